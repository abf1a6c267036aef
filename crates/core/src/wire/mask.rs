//! Token masks: the tokens a constrained entry may sample (a grammar's allowed set,
//! computed by the orchestrator), carried in a section of the micro-batch table that every
//! stage copies and the last stage applies to the entry's logits before it samples.
//!
//! The section has the fixed size the plan's runtime reserves (`mask_bytes`; 0: no
//! section, and no entry may be constrained). Layout (little-endian), zero-padded:
//!
//! ```text
//! count u16 | reserved u16
//! mask:  entry u16 | row u16 | kind u8 (0 bits, 1 ids) | reserved u8 x3 | len u32
//!        | len x u32   (bits: bit t of word t/32 allows token t; ids: the allowed ids)
//! ```

/// A mask's allowed set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MaskSet {
    /// A bit per token (bit `t % 32` of word `t / 32`).
    Bits(Vec<u32>),
    /// The allowed token ids.
    Ids(Vec<u32>),
}

impl MaskSet {
    /// The smaller encoding of `bits` (a bit per token).
    pub fn compact(bits: Vec<u32>) -> MaskSet {
        let ones: usize = bits.iter().map(|w| w.count_ones() as usize).sum();
        if ones < bits.len() {
            let ids = (0..bits.len() * 32)
                .filter(|&t| bits[t / 32] >> (t % 32) & 1 == 1)
                .map(|t| t as u32)
                .collect();
            MaskSet::Ids(ids)
        } else {
            MaskSet::Bits(bits)
        }
    }

    /// Whether token `t` is allowed.
    pub fn allows(&self, t: u32) -> bool {
        match self {
            MaskSet::Bits(w) => w.get(t as usize / 32).is_some_and(|w| w >> (t % 32) & 1 == 1),
            MaskSet::Ids(ids) => ids.contains(&t),
        }
    }

    fn words(&self) -> &[u32] {
        match self {
            MaskSet::Bits(w) | MaskSet::Ids(w) => w,
        }
    }

    /// Sets every disallowed token's logit to minus infinity.
    pub fn apply(&self, logits: &mut [f32]) {
        match self {
            MaskSet::Bits(words) => {
                for (t, l) in logits.iter_mut().enumerate() {
                    if words.get(t / 32).is_none_or(|w| w >> (t % 32) & 1 == 0) {
                        *l = f32::NEG_INFINITY;
                    }
                }
            }
            MaskSet::Ids(ids) => {
                let mut kept = vec![f32::NEG_INFINITY; logits.len()];
                for &t in ids {
                    if let Some(&l) = logits.get(t as usize) {
                        kept[t as usize] = l;
                    }
                }
                logits.copy_from_slice(&kept);
            }
        }
    }
}

/// The mask of one row of one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenMask {
    /// The entry's index in the table.
    pub entry: u16,
    /// The row (0-based) whose sample it constrains.
    pub row: u16,
    /// The allowed tokens.
    pub set: MaskSet,
}

const SECTION_HEAD: usize = 4;
const MASK_HEAD: usize = 12;

/// Bytes `masks` take in a section.
pub fn section_bytes(masks: &[TokenMask]) -> usize {
    SECTION_HEAD + masks.iter().map(|m| MASK_HEAD + 4 * m.set.words().len()).sum::<usize>()
}

/// Bytes one mask takes in a section.
pub fn mask_bytes(set: &MaskSet) -> usize {
    MASK_HEAD + 4 * set.words().len()
}

/// Appends the section (exactly `budget` bytes; nothing when `budget` is 0). Masks past
/// the budget are not written: the caller keeps within it ([`section_bytes`]).
pub fn encode_section(masks: &[TokenMask], budget: u32, out: &mut Vec<u8>) {
    if budget == 0 {
        return;
    }
    let start = out.len();
    let end = start + budget as usize;
    let fits: Vec<&TokenMask> = masks
        .iter()
        .scan(SECTION_HEAD, |used, m| {
            *used += mask_bytes(&m.set);
            Some((*used, m))
        })
        .take_while(|(used, _)| *used <= budget as usize)
        .map(|(_, m)| m)
        .collect();
    out.extend_from_slice(&(fits.len() as u16).to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    for m in fits {
        out.extend_from_slice(&m.entry.to_le_bytes());
        out.extend_from_slice(&m.row.to_le_bytes());
        out.push(matches!(m.set, MaskSet::Ids(_)) as u8);
        out.extend_from_slice(&[0, 0, 0]);
        out.extend_from_slice(&(m.set.words().len() as u32).to_le_bytes());
        for w in m.set.words() {
            out.extend_from_slice(&w.to_le_bytes());
        }
    }
    out.resize(end, 0);
}

/// Why a mask section does not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaskError {
    /// A mask runs past the section, or the padding is not zero.
    Malformed,
    /// A mask names an entry past the table's count, or an entry that does not sample
    /// that row.
    BadEntry(u16),
    /// Two masks for one row.
    Duplicate(u16),
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Decodes a section; `rows(entry)` says which rows of an entry sample (`None`: the entry
/// does not exist). Nothing is allocated past the section's own bytes.
pub fn decode_section(
    bytes: &[u8],
    rows: impl Fn(u16) -> Option<std::ops::Range<u16>>,
) -> Result<Vec<TokenMask>, MaskError> {
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    if bytes.len() < SECTION_HEAD || u16_at(bytes, 2) != 0 {
        return Err(MaskError::Malformed);
    }
    let count = u16_at(bytes, 0);
    let mut at = SECTION_HEAD;
    let mut out: Vec<TokenMask> = Vec::new();
    for _ in 0..count {
        if at + MASK_HEAD > bytes.len() || bytes[at + 5..at + 8] != [0, 0, 0] || bytes[at + 4] > 1 {
            return Err(MaskError::Malformed);
        }
        let (entry, row) = (u16_at(bytes, at), u16_at(bytes, at + 2));
        let len = u32_at(bytes, at + 8) as usize;
        let body = at + MASK_HEAD;
        let Some(end) =
            len.checked_mul(4).and_then(|n| n.checked_add(body)).filter(|&e| e <= bytes.len())
        else {
            return Err(MaskError::Malformed);
        };
        if !rows(entry).is_some_and(|r| r.contains(&row)) {
            return Err(MaskError::BadEntry(entry));
        }
        if out.iter().any(|m| (m.entry, m.row) == (entry, row)) {
            return Err(MaskError::Duplicate(entry));
        }
        let words = (body..end).step_by(4).map(|i| u32_at(bytes, i)).collect();
        let set = if bytes[at + 4] == 1 { MaskSet::Ids(words) } else { MaskSet::Bits(words) };
        out.push(TokenMask { entry, row, set });
        at = end;
    }
    if bytes[at..].iter().any(|&b| b != 0) {
        return Err(MaskError::Malformed);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_round_trip_and_apply_as_their_sets_say() {
        let bits = MaskSet::compact(vec![u32::MAX, 0b101]);
        assert!(matches!(bits, MaskSet::Bits(_)) && bits.allows(34) && !bits.allows(33));
        let ids = MaskSet::compact(vec![0, 0b1000, 0]);
        assert_eq!(ids, MaskSet::Ids(vec![35]));
        let masks = vec![
            TokenMask { entry: 0, row: 0, set: bits.clone() },
            TokenMask { entry: 2, row: 3, set: ids.clone() },
        ];
        let mut out = Vec::new();
        encode_section(&masks, 64, &mut out);
        assert_eq!(out.len(), 64);
        let rows = |e: u16| (e != 1).then_some(0..4);
        assert_eq!(decode_section(&out, rows), Ok(masks));
        let mut logits = vec![1.0f32; 40];
        ids.apply(&mut logits);
        assert!(logits.iter().enumerate().all(|(t, l)| (t == 35) == l.is_finite()));
    }

    #[test]
    fn bad_sections_are_refused_not_read() {
        let m = vec![TokenMask { entry: 1, row: 0, set: MaskSet::Ids(vec![1]) }];
        let mut out = Vec::new();
        encode_section(&m, 32, &mut out);
        assert_eq!(decode_section(&out, |e| (e == 0).then_some(0..1)), Err(MaskError::BadEntry(1)));
        let mut long = out.clone();
        long[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(decode_section(&long, |_| Some(0..1)), Err(MaskError::Malformed));
        let mut dirty = out.clone();
        dirty[31] = 1;
        assert_eq!(decode_section(&dirty, |_| Some(0..1)), Err(MaskError::Malformed));
        let twice = vec![m[0].clone(), m[0].clone()];
        let mut out = Vec::new();
        encode_section(&twice, 64, &mut out);
        assert_eq!(decode_section(&out, |_| Some(0..1)), Err(MaskError::Duplicate(1)));
    }
}
