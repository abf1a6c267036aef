//! Log-probabilities on the token-out path. An entry flagged
//! [`EntryFlags::LOGPROBS`](super::batch::EntryFlags::LOGPROBS) asks the last stage for the
//! chosen token's log-probability and its `top_logprobs` most likely tokens; they follow
//! the token ids of the token-out payload, for each asking entry in table order:
//!
//! ```text
//! chosen logprob f32 | top_logprobs x (token id u32 | logprob f32)
//! ```
//!
//! Every value is four bytes, so the section is whole `u32` rows of the token-out object.
//! Log-probabilities are of the model's distribution (softmax of the logits, before
//! temperature, top-k or top-p).

use super::batch::{BatchError, BatchTable, logprobs_asked as asks};
pub use super::batch::{MAX_TOP_LOGPROBS, max_section_bytes, section_bytes};

/// One token's log-probability and its most likely alternatives (highest first).
#[derive(Debug, Clone, PartialEq)]
pub struct TokenLogprobs {
    /// The chosen token's log-probability.
    pub logprob: f32,
    /// The most likely tokens and their log-probabilities, highest first.
    pub top: Vec<(u32, f32)>,
}

/// Bytes of every token-out object of a plan with `capacity` entries per table and at
/// most `max_top` alternatives per entry: the table, a token id per entry and the largest
/// section, zero-padded after the section its entries ask for (the last stage writes one
/// fixed-size object; without log-probabilities it is the table and the ids alone).
pub const fn token_out_max_bytes(capacity: u16, max_top: Option<u32>) -> u64 {
    super::batch::table_bytes(capacity)
        + 4 * capacity as u64
        + max_section_bytes(capacity, max_top)
        + super::batch::max_verify_section_bytes(capacity)
}

/// Appends the section for `table`: entry `i`'s values from `values[i]` (an entry that
/// asks but has none is written as zeros; alternatives past what it holds are zeros).
pub fn encode(table: &BatchTable, values: &[Option<TokenLogprobs>], out: &mut Vec<u8>) {
    for (i, e) in table.entries().iter().enumerate() {
        let Some(k) = asks(e) else { continue };
        let v = values.get(i).and_then(Option::as_ref);
        out.extend_from_slice(&v.map_or(0.0, |v| v.logprob).to_le_bytes());
        for j in 0..k as usize {
            let (id, lp) = v.and_then(|v| v.top.get(j)).copied().unwrap_or((0, f32::NEG_INFINITY));
            out.extend_from_slice(&id.to_le_bytes());
            out.extend_from_slice(&lp.to_le_bytes());
        }
    }
}

/// Reads the section of `table` from `bytes` (exactly [`section_bytes`] long): each entry's
/// values, `None` where it did not ask. A token id at or above `vocab` is refused.
pub fn decode(
    table: &BatchTable,
    bytes: &[u8],
    vocab: u32,
) -> Result<Vec<Option<TokenLogprobs>>, BatchError> {
    let expected = section_bytes(table);
    if bytes.len() as u64 != expected {
        return Err(BatchError::PayloadMismatch { found: bytes.len() as u64, expected });
    }
    let word =
        |at: usize| u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    let mut at = 0;
    let mut out = Vec::with_capacity(table.entries().len());
    for e in table.entries() {
        let Some(k) = asks(e) else {
            out.push(None);
            continue;
        };
        let logprob = f32::from_bits(word(at));
        at += 4;
        let mut top = Vec::with_capacity(k as usize);
        for _ in 0..k {
            let (id, lp) = (word(at), f32::from_bits(word(at + 4)));
            at += 8;
            if id >= vocab {
                return Err(BatchError::PayloadMismatch { found: bytes.len() as u64, expected });
            }
            top.push((id, lp));
        }
        out.push(Some(TokenLogprobs { logprob, top }));
    }
    Ok(out)
}

/// A decoded token-out payload: its table, each entry's token, each entry's
/// log-probabilities, and each entry's tokens after its rows but the last (a verifying
/// entry's; empty for the others).
pub type TokenOut = (BatchTable, Vec<u32>, Vec<Option<TokenLogprobs>>, Vec<Vec<u32>>);

/// Decodes a token-out payload with its log-probability section: the table, each entry's
/// token ([`super::batch::NO_TOKEN`] where it does not sample) and each entry's
/// log-probabilities (`None` where it did not ask). `vocab` bounds the listed ids.
pub fn split_token_out(
    payload: &[u8],
    limits: super::batch::BatchLimits,
    vocab: u32,
) -> Result<TokenOut, BatchError> {
    let (table, tokens) = BatchTable::split_tokens(payload, limits)?;
    let at = (table.encoded_len() + 4 * u64::from(table.capacity())) as usize;
    let end = at + section_bytes(&table) as usize;
    let logprobs = decode(&table, &payload[at..end], vocab)?;
    let vend = end + super::batch::verify_section_bytes(&table) as usize;
    let verified = super::batch::decode_verify_section(&table, &payload[end..vend], vocab)?;
    Ok((table, tokens, logprobs, verified))
}

/// The log-probabilities of `logits` for `chosen` and the `k` most likely tokens (ties by
/// id; non-finite logits are never among them).
pub fn of_logits(logits: &[f32], chosen: u32, k: usize) -> TokenLogprobs {
    let max = logits.iter().copied().filter(|l| l.is_finite()).fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = logits.iter().filter(|l| l.is_finite()).map(|&l| f64::from(l - max).exp()).sum();
    let log_z = f64::from(max) + sum.ln();
    let lp = |l: f32| (f64::from(l) - log_z) as f32;
    let mut top: Vec<(u32, f32)> = Vec::with_capacity(k + 1);
    for (i, &l) in logits.iter().enumerate() {
        if !l.is_finite() {
            continue;
        }
        if top.len() == k && top.last().is_some_and(|&(_, m)| l <= m) {
            continue;
        }
        let at = top.partition_point(|&(_, m)| m >= l);
        top.insert(at, (i as u32, l));
        top.truncate(k);
    }
    let chosen = logits.get(chosen as usize).copied().filter(|l| l.is_finite());
    TokenLogprobs {
        logprob: chosen.map_or(f32::NEG_INFINITY, lp),
        top: top.into_iter().map(|(i, l)| (i, lp(l))).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::batch::EntryFlags;
    use crate::wire::batch::{BatchEntry, EntrySampling};

    fn table(asks: &[Option<u32>]) -> BatchTable {
        let entries = asks
            .iter()
            .enumerate()
            .map(|(i, a)| BatchEntry {
                slot: i as u32,
                first_position: 0,
                tokens: 1,
                flags: match a {
                    Some(_) => EntryFlags::SAMPLE | EntryFlags::LOGPROBS,
                    None => EntryFlags::SAMPLE,
                },
                sampling: EntrySampling { top_logprobs: a.unwrap_or(0), ..Default::default() },
            })
            .collect();
        BatchTable::new(4, entries)
    }

    #[test]
    fn a_section_round_trips_for_the_entries_that_ask_and_only_them() {
        let t = table(&[Some(2), None, Some(0)]);
        let values = vec![
            Some(TokenLogprobs { logprob: -0.5, top: vec![(7, -0.5), (3, -1.5)] }),
            None,
            Some(TokenLogprobs { logprob: -2.0, top: vec![] }),
        ];
        let mut bytes = Vec::new();
        encode(&t, &values, &mut bytes);
        assert_eq!(bytes.len() as u64, section_bytes(&t));
        assert_eq!(bytes.len(), 4 + 16 + 4);
        assert_eq!(decode(&t, &bytes, 10).expect("decodes"), values);
        assert!(decode(&t, &bytes[1..], 10).is_err(), "a short section is refused");
        assert!(decode(&t, &bytes, 5).is_err(), "an id outside the vocabulary is refused");
    }

    #[test]
    fn logprobs_of_logits_are_a_log_softmax_with_the_top_tokens_highest_first() {
        let logits = [1.0f32, 3.0, f32::NAN, 2.0, 3.0];
        let lp = of_logits(&logits, 3, 3);
        let z: f64 = [1.0f64, 3.0, 2.0, 3.0].iter().map(|l| l.exp()).sum();
        assert!((f64::from(lp.logprob) - (2.0 - z.ln())).abs() < 1e-5);
        let ids: Vec<u32> = lp.top.iter().map(|t| t.0).collect();
        assert_eq!(ids, [1, 4, 3], "highest first, ties by id, NaN never");
        let total: f64 =
            logits.iter().filter(|l| l.is_finite()).map(|&l| f64::from(l).exp() / z).sum();
        assert!((total - 1.0).abs() < 1e-9);
    }
}
