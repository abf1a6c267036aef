//! The micro-batch: the payload of every object on a session's activation path.
//!
//! A micro-batch carries several sequences at once. Its payload begins with an **entry
//! table** of a fixed size per edge (the plan's `max_sequences` entries, used or not),
//! followed by the rows of its entries in table order:
//!
//! - token-in: one `u32` token id per row;
//! - activation edges: one hidden-state row per token;
//! - token-out: one `u32` per table entry (the sampled token of a sampling entry, or
//!   [`NO_TOKEN`]), `capacity` of them, whatever the entry count; then the
//!   log-probability section ([`super::logprobs`]); then, for each `VERIFY` entry in table
//!   order, the tokens sampled after each of its rows but the last (`tokens - 1` values;
//!   the last row's is the entry's token above); zeros to the object's fixed size.
//!
//! Every stage copies the table unchanged from its input to its output, so the token-out
//! object names the slots its tokens belong to. Layout (little-endian):
//!
//! ```text
//! table header, 16 bytes: magic "SWMB" u32 | version u16 | capacity u16 | count u16
//!                         | cache ops u16 | total tokens u32
//! entry, 40 bytes each:   slot u32 | first position u32 | tokens u32 | flags u32
//!                         | temperature f32 | top_p f32 | top_k u32 | top_logprobs u32
//!                         | seed u64
//! cache ops, 16 bytes each, `MAX_CACHE_OPS` of them (super::cache_ops)
//! token masks, the runtime's `mask_bytes` (0: none; super::mask)
//! ```
//!
//! `top_logprobs` is 0 unless the entry's flags have `LOGPROBS` (then at most
//! [`MAX_TOP_LOGPROBS`]); the token-out payload's log-probability section
//! follows its token ids (see [`super::logprobs`]).
//!
//! ```text
//! ```
//!
//! Unused entries (index >= count) are all zero. Decoding is total: any byte string
//! either decodes into a table that satisfies every rule below or yields a typed
//! [`BatchError`]; nothing an untrusted table says is allocated before it is checked.

pub use super::batch_error::BatchError;
use super::cache_ops::CacheOpError;
pub use super::cache_ops::{CACHE_OP_BYTES, CacheOp, CacheOpKind, MAX_CACHE_OPS};
use super::mask::TokenMask;
use super::plan::SamplingPolicy;

/// `"SWMB"` little-endian.
pub const BATCH_MAGIC: u32 = u32::from_le_bytes(*b"SWMB");
/// The one table version this build reads and writes (2: entries may ask for
/// log-probabilities; 3: entries may verify a draft and roll a slot back; 4: a section
/// of cache operations follows the entries).
pub const BATCH_VERSION: u16 = 4;
/// The most rows a `VERIFY` entry may have (the last accepted token and 15 drafted).
pub const MAX_VERIFY_ROWS: u32 = 16;
/// The token-out value of an entry that does not sample.
pub const NO_TOKEN: u32 = u32::MAX;
pub use super::spec::{ENTRY_BYTES, MAX_CAPACITY, TABLE_HEADER_BYTES, table_bytes};

/// The most alternatives an entry may ask for (OpenAI's limit).
pub const MAX_TOP_LOGPROBS: u32 = 20;

/// Whether entry `e` of a token-out table carries log-probabilities, and how many
/// alternatives.
pub(crate) fn logprobs_asked(e: &BatchEntry) -> Option<u32> {
    let flags = e.flags;
    (flags.contains(EntryFlags::SAMPLE) && flags.contains(EntryFlags::LOGPROBS))
        .then_some(e.sampling.top_logprobs)
}

/// Bytes of the token-out object's log-probability section `table` asks for (the section
/// itself: [`super::logprobs`]).
pub fn section_bytes(table: &BatchTable) -> u64 {
    table.entries().iter().filter_map(logprobs_asked).map(|k| 4 + 8 * u64::from(k)).sum()
}

/// The largest log-probability section a table of `capacity` entries can ask for when
/// each may list at most `max_top` alternatives (`None`: no entry may ask).
pub const fn max_section_bytes(capacity: u16, max_top: Option<u32>) -> u64 {
    match max_top {
        Some(k) => capacity as u64 * (4 + 8 * k as u64),
        None => 0,
    }
}

/// Flags of one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct EntryFlags(pub u32);

impl EntryFlags {
    /// No flags.
    pub const NONE: EntryFlags = EntryFlags(0);
    /// A new sequence starts in the slot with this entry: the slot's KV cache keeps only
    /// its positions before `first_position` (0: it is emptied; more: the new sequence
    /// shares that prefix with what the slot held, the prefix cache) and its sampler
    /// starts over from this entry's sampling. A stage that holds fewer positions than
    /// `first_position` refuses the entry.
    pub const RESET: EntryFlags = EntryFlags(1);
    /// The last stage samples a token from this entry's last row.
    pub const SAMPLE: EntryFlags = EntryFlags(2);
    /// With `SAMPLE`: the token-out payload also carries the token's log-probability and
    /// the `top_logprobs` most likely tokens ([`super::logprobs`]).
    pub const LOGPROBS: EntryFlags = EntryFlags(4);
    /// With `SAMPLE`: the last stage samples after every row, not only the last (the
    /// rows after the first are a draft to verify; at most [`MAX_VERIFY_ROWS`] rows, no
    /// `LOGPROBS`).
    pub const VERIFY: EntryFlags = EntryFlags(8);
    /// Before this entry's rows, every stage drops the slot's cached positions from
    /// `first_position` on (the rows of a draft that was not accepted), so they continue
    /// there; without it a stage refuses a first position other than its cached length.
    /// Never with `RESET`.
    pub const ROLLBACK: EntryFlags = EntryFlags(16);
    /// A resumed sequence's replay (after a re-formation): rows at positions the slot
    /// already holds (kept across the re-formation, see the `keep` cache operation) are
    /// not computed again; a stage sends the rows it logged for them instead
    /// ([`super::cache_ops::resume_skip`]). The entry may start below the slot's cached
    /// length, never above it. Never with `RESET`, `ROLLBACK` or `VERIFY`.
    pub const RESUME: EntryFlags = EntryFlags(32);
    /// Every defined bit.
    pub const KNOWN: EntryFlags = EntryFlags(63);

    /// Whether every bit of `other` is set.
    pub const fn contains(self, other: EntryFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for EntryFlags {
    type Output = EntryFlags;
    fn bitor(self, rhs: EntryFlags) -> EntryFlags {
        EntryFlags(self.0 | rhs.0)
    }
}

/// How one entry's token is picked, as the table carries it: a temperature of 0 is
/// greedy, a `top_k` of 0 and a `top_p` of 0 mean "no restriction".
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct EntrySampling {
    /// Softmax temperature, finite and >= 0.
    pub temperature: f32,
    /// Keep the smallest set of tokens whose probability reaches this, in `(0, 1]`; 0: off.
    pub top_p: f32,
    /// Keep the `top_k` most likely tokens; 0: off.
    pub top_k: u32,
    /// The sequence's sampler seed.
    pub seed: u64,
    /// With [`EntryFlags::LOGPROBS`]: the most likely tokens the token-out payload lists
    /// beside the chosen one's log-probability (0 otherwise).
    pub top_logprobs: u32,
}

impl EntrySampling {
    /// The table form of a plan's policy.
    pub fn from_policy(policy: SamplingPolicy) -> EntrySampling {
        match policy.normalized() {
            SamplingPolicy::Greedy => EntrySampling::default(),
            SamplingPolicy::Sample { temperature, top_k, top_p, seed } => EntrySampling {
                temperature,
                top_p: top_p.unwrap_or(0.0),
                top_k: top_k.unwrap_or(0),
                seed,
                top_logprobs: 0,
            },
        }
    }

    /// The policy the last stage samples with.
    pub fn policy(self) -> SamplingPolicy {
        if self.temperature == 0.0 {
            return SamplingPolicy::Greedy;
        }
        SamplingPolicy::Sample {
            temperature: self.temperature,
            top_k: (self.top_k > 0).then_some(self.top_k),
            top_p: (self.top_p > 0.0).then_some(self.top_p),
            seed: self.seed,
        }
    }

    fn valid(&self) -> bool {
        self.temperature.is_finite()
            && self.temperature >= 0.0
            && self.top_p.is_finite()
            && (0.0..=1.0).contains(&self.top_p)
    }
}

/// One sequence's part of a micro-batch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchEntry {
    /// The sequence's slot (names its KV cache on every stage).
    pub slot: u32,
    /// The position of the entry's first row in its sequence.
    pub first_position: u32,
    /// Rows (tokens) of this entry, at least 1.
    pub tokens: u32,
    /// Reset / sample flags.
    pub flags: EntryFlags,
    /// Sampling parameters (meaningful on sampling entries).
    pub sampling: EntrySampling,
}

/// What a decoder must check a table against: the edge's capacity and the plan's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLimits {
    /// Entries in every table of the session (`max_sequences`).
    pub capacity: u16,
    /// Positions per slot (`max_seq_len`).
    pub max_seq_len: u32,
    /// Blocks in every stage's prompt-cache store (a cache operation naming one at or
    /// above it is refused; 0: no operation is allowed).
    pub cache_blocks: u32,
    /// Bytes of the token-mask section after the cache operations (the runtime's
    /// `mask_bytes`; 0: none, and no entry is constrained).
    pub mask_bytes: u32,
}

impl BatchLimits {
    /// What every micro-batch table of `plan`'s run must satisfy.
    pub fn of(plan: &super::plan::RunPlan) -> BatchLimits {
        BatchLimits {
            capacity: plan.runtime.table_capacity(),
            max_seq_len: plan.runtime.max_seq_len,
            cache_blocks: plan.prompt_cache.blocks,
            mask_bytes: plan.runtime.mask_bytes,
        }
    }
}

/// A decoded or to-be-encoded entry table.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchTable {
    capacity: u16,
    entries: Vec<BatchEntry>,
    /// Cache operations every stage runs, in order, before the entries' rows.
    ops: Vec<CacheOp>,
    /// Token masks the last stage applies before it samples.
    masks: Vec<TokenMask>,
    /// Bytes of the mask section (the runtime's `mask_bytes`).
    mask_bytes: u32,
}

fn op_error(e: CacheOpError) -> BatchError {
    match e {
        CacheOpError::BadKind(k) => BatchError::BadCacheOp(k),
        CacheOpError::Reserved => BatchError::ReservedNonZero,
        CacheOpError::TooMany(n) => BatchError::TooManyCacheOps(n),
        CacheOpError::OutOfRange { slot, block } => BatchError::CacheOpOutOfRange { slot, block },
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

impl BatchTable {
    /// A table of `capacity` entries holding `entries` (in row order). Checked by
    /// [`BatchTable::check`] before use; [`BatchTable::encode`] writes it as given.
    pub fn new(capacity: u16, entries: Vec<BatchEntry>) -> BatchTable {
        BatchTable { capacity, entries, ops: Vec::new(), masks: Vec::new(), mask_bytes: 0 }
    }

    /// The table with a mask section of `mask_bytes` holding `masks` (those that fit:
    /// [`super::mask::section_bytes`]).
    pub fn with_masks(self, masks: Vec<TokenMask>, mask_bytes: u32) -> BatchTable {
        BatchTable { masks, mask_bytes, ..self }
    }

    /// The token masks, as the last stage applies them.
    pub fn masks(&self) -> &[TokenMask] {
        &self.masks
    }

    /// The mask of entry `entry`'s row `row`, if it is constrained.
    pub fn mask(&self, entry: usize, row: usize) -> Option<&TokenMask> {
        self.masks.iter().find(|m| usize::from(m.entry) == entry && usize::from(m.row) == row)
    }

    /// The table with these cache operations (run in order before the rows).
    pub fn with_ops(self, ops: Vec<CacheOp>) -> BatchTable {
        BatchTable { ops, ..self }
    }

    /// The cache operations, in the order every stage runs them.
    pub fn ops(&self) -> &[CacheOp] {
        &self.ops
    }

    /// The capacity (entries the encoded table has room for).
    pub fn capacity(&self) -> u16 {
        self.capacity
    }

    /// The entries, in row order.
    pub fn entries(&self) -> &[BatchEntry] {
        &self.entries
    }

    /// Rows of all entries.
    pub fn total_tokens(&self) -> u64 {
        self.entries.iter().map(|e| u64::from(e.tokens)).sum()
    }

    /// The encoded table's size (the mask section included).
    pub fn encoded_len(&self) -> u64 {
        table_bytes(self.capacity) + u64::from(self.mask_bytes)
    }

    /// Appends the encoded table (exactly [`BatchTable::encoded_len`] bytes) to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&BATCH_MAGIC.to_le_bytes());
        out.extend_from_slice(&BATCH_VERSION.to_le_bytes());
        out.extend_from_slice(&self.capacity.to_le_bytes());
        out.extend_from_slice(&(self.entries.len() as u16).to_le_bytes());
        out.extend_from_slice(
            &(self.ops.len().min(usize::from(MAX_CACHE_OPS)) as u16).to_le_bytes(),
        );
        out.extend_from_slice(&(self.total_tokens().min(u64::from(u32::MAX)) as u32).to_le_bytes());
        for e in &self.entries {
            out.extend_from_slice(&e.slot.to_le_bytes());
            out.extend_from_slice(&e.first_position.to_le_bytes());
            out.extend_from_slice(&e.tokens.to_le_bytes());
            out.extend_from_slice(&e.flags.0.to_le_bytes());
            out.extend_from_slice(&e.sampling.temperature.to_le_bytes());
            out.extend_from_slice(&e.sampling.top_p.to_le_bytes());
            out.extend_from_slice(&e.sampling.top_k.to_le_bytes());
            out.extend_from_slice(&e.sampling.top_logprobs.to_le_bytes());
            out.extend_from_slice(&e.sampling.seed.to_le_bytes());
        }
        out.resize(start + Self::ops_offset(self.capacity), 0);
        for op in self.ops.iter().take(usize::from(MAX_CACHE_OPS)) {
            op.encode_into(out);
        }
        out.resize(start + table_bytes(self.capacity) as usize, 0);
        super::mask::encode_section(&self.masks, self.mask_bytes, out);
    }

    /// The encoded table.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len() as usize);
        self.encode_into(&mut out);
        out
    }

    /// Checks the table against `limits`: capacity, count, slots, positions, sampling.
    pub fn check(&self, limits: BatchLimits) -> Result<(), BatchError> {
        if self.capacity != limits.capacity {
            return Err(BatchError::CapacityMismatch {
                found: self.capacity,
                expected: limits.capacity,
            });
        }
        let count = self.entries.len();
        if count == 0 || count > usize::from(self.capacity) {
            return Err(BatchError::BadCount {
                count: count.min(usize::from(u16::MAX)) as u16,
                capacity: self.capacity,
            });
        }
        let mut seen = vec![false; usize::from(self.capacity)];
        for e in &self.entries {
            if e.flags.0 & !EntryFlags::KNOWN.0 != 0 {
                return Err(BatchError::UnknownFlags(e.flags.0 & !EntryFlags::KNOWN.0));
            }
            let Some(mark) = seen.get_mut(e.slot as usize) else {
                return Err(BatchError::SlotOutOfRange { slot: e.slot, capacity: self.capacity });
            };
            if std::mem::replace(mark, true) {
                return Err(BatchError::DuplicateSlot(e.slot));
            }
            if e.tokens == 0 {
                return Err(BatchError::EmptyEntry(e.slot));
            }
            let end = u64::from(e.first_position) + u64::from(e.tokens);
            if end > u64::from(limits.max_seq_len) {
                return Err(BatchError::PastContext {
                    slot: e.slot,
                    first: e.first_position,
                    end,
                    max: limits.max_seq_len,
                });
            }
            if !e.sampling.valid() {
                return Err(BatchError::BadSampling(e.slot));
            }
            if e.flags.contains(EntryFlags::VERIFY)
                && (!e.flags.contains(EntryFlags::SAMPLE)
                    || e.flags.contains(EntryFlags::LOGPROBS)
                    || e.tokens > MAX_VERIFY_ROWS)
            {
                return Err(BatchError::BadVerify(e.slot));
            }
            if e.flags.contains(EntryFlags::ROLLBACK) && e.flags.contains(EntryFlags::RESET) {
                return Err(BatchError::RollbackWithReset(e.slot));
            }
            if e.flags.contains(EntryFlags::RESUME)
                && (e.flags.0
                    & (EntryFlags::RESET.0 | EntryFlags::ROLLBACK.0 | EntryFlags::VERIFY.0))
                    != 0
            {
                return Err(BatchError::BadResume(e.slot));
            }
        }
        let (capacity, blocks, max) = (self.capacity, limits.cache_blocks, limits.max_seq_len);
        super::cache_ops::check(&self.ops, capacity, blocks, max).map_err(op_error)
    }

    /// Where the cache-operation section starts in an encoded table.
    fn ops_offset(capacity: u16) -> usize {
        (TABLE_HEADER_BYTES + ENTRY_BYTES * u64::from(capacity)) as usize
    }

    /// Decodes and checks the table at the front of `payload` (which may go on with the
    /// rows). Total: every input yields a checked table or a typed error.
    pub fn decode(payload: &[u8], limits: BatchLimits) -> Result<BatchTable, BatchError> {
        let need = table_bytes(limits.capacity) + u64::from(limits.mask_bytes);
        if (payload.len() as u64) < TABLE_HEADER_BYTES {
            return Err(BatchError::Truncated {
                found: payload.len() as u64,
                need,
                capacity: limits.capacity,
            });
        }
        let magic = u32_at(payload, 0);
        if magic != BATCH_MAGIC {
            return Err(BatchError::BadMagic(magic));
        }
        let version = u16_at(payload, 4);
        if version != BATCH_VERSION {
            return Err(BatchError::UnsupportedVersion(version));
        }
        let capacity = u16_at(payload, 6);
        if capacity != limits.capacity {
            return Err(BatchError::CapacityMismatch {
                found: capacity,
                expected: limits.capacity,
            });
        }
        if (payload.len() as u64) < need {
            return Err(BatchError::Truncated { found: payload.len() as u64, need, capacity });
        }
        let count = u16_at(payload, 8);
        if count == 0 || count > capacity {
            return Err(BatchError::BadCount { count, capacity });
        }
        let op_count = u16_at(payload, 10);
        let total = u32_at(payload, 12);
        let mut entries = Vec::with_capacity(usize::from(count));
        for i in 0..usize::from(capacity) {
            let at = (TABLE_HEADER_BYTES + ENTRY_BYTES * i as u64) as usize;
            let raw = &payload[at..at + ENTRY_BYTES as usize];
            if i >= usize::from(count) {
                if raw.iter().any(|&b| b != 0) {
                    return Err(BatchError::ReservedNonZero);
                }
                continue;
            }
            let top_logprobs = u32_at(raw, 28);
            let asks = EntryFlags(u32_at(raw, 12)).contains(EntryFlags::LOGPROBS);
            if (!asks && top_logprobs != 0) || top_logprobs > MAX_TOP_LOGPROBS {
                return Err(BatchError::ReservedNonZero);
            }
            entries.push(BatchEntry {
                slot: u32_at(raw, 0),
                first_position: u32_at(raw, 4),
                tokens: u32_at(raw, 8),
                flags: EntryFlags(u32_at(raw, 12)),
                sampling: EntrySampling {
                    temperature: f32::from_le_bytes(raw[16..20].try_into().unwrap_or([0; 4])),
                    top_p: f32::from_le_bytes(raw[20..24].try_into().unwrap_or([0; 4])),
                    top_k: u32_at(raw, 24),
                    top_logprobs,
                    seed: u64_at(raw, 32),
                },
            });
        }
        let masks_at = table_bytes(capacity) as usize;
        let section = &payload[Self::ops_offset(capacity)..masks_at];
        let ops = super::cache_ops::decode_section(section, op_count).map_err(op_error)?;
        let rows = |i: u16| {
            let e = entries.get(usize::from(i)).filter(|e| e.flags.contains(EntryFlags::SAMPLE))?;
            let n = u16::try_from(e.tokens).ok()?;
            Some(if e.flags.contains(EntryFlags::VERIFY) { 0..n } else { n - 1..n })
        };
        let masks = super::mask::decode_section(&payload[masks_at..need as usize], rows)
            .map_err(BatchError::BadMask)?;
        let mask_bytes = limits.mask_bytes;
        let table = BatchTable { capacity, entries, ops, masks, mask_bytes };
        table.check(limits)?;
        let sum = table.total_tokens();
        if u64::from(total) != sum {
            return Err(BatchError::TotalMismatch { total, sum });
        }
        Ok(table)
    }

    /// Decodes the table and checks that exactly `row_bytes` per row follow it (token-in
    /// and activation objects). Returns the table and the rows.
    pub fn split_rows(
        payload: &[u8],
        limits: BatchLimits,
        row_bytes: u64,
    ) -> Result<(BatchTable, &[u8]), BatchError> {
        let table = BatchTable::decode(payload, limits)?;
        let rows = &payload[table.encoded_len() as usize..];
        let expected = table.total_tokens().saturating_mul(row_bytes);
        if rows.len() as u64 != expected {
            return Err(BatchError::PayloadMismatch { found: rows.len() as u64, expected });
        }
        Ok((table, rows))
    }

    /// Decodes a token-out payload: the table, then one `u32` per table entry of the
    /// capacity (and the log-probability section its entries ask for, checked for its
    /// length here and read by [`super::logprobs::split_token_out`]). Returns the table and each entry's token ([`NO_TOKEN`] where it does not
    /// sample); a sampling entry without a token, or a token on an entry that does not
    /// sample, is a [`BatchError::PayloadMismatch`].
    pub fn split_tokens(
        payload: &[u8],
        limits: BatchLimits,
    ) -> Result<(BatchTable, Vec<u32>), BatchError> {
        let table = BatchTable::decode(payload, limits)?;
        let rest = &payload[table.encoded_len() as usize..];
        let ids = u64::from(table.capacity) * 4;
        let expected = ids + section_bytes(&table) + verify_section_bytes(&table);
        // Exactly the sections its entries ask for, or zero-padded to the fixed size.
        let most = MAX_TOP_LOGPROBS;
        let padded = ids
            + max_section_bytes(table.capacity, Some(most))
            + max_verify_section_bytes(table.capacity);
        let len = rest.len() as u64;
        let fits = len == expected
            || (len > expected
                && len <= padded
                && rest[expected as usize..].iter().all(|&b| b == 0));
        if !fits {
            return Err(BatchError::PayloadMismatch { found: rest.len() as u64, expected });
        }
        let tokens: Vec<u32> = rest[..ids as usize].chunks_exact(4).map(|c| u32_at(c, 0)).collect();
        for (i, &t) in tokens.iter().enumerate() {
            let samples =
                table.entries.get(i).is_some_and(|e| e.flags.contains(EntryFlags::SAMPLE));
            if samples == (t == NO_TOKEN) {
                return Err(BatchError::PayloadMismatch { found: rest.len() as u64, expected });
            }
        }
        Ok((table, tokens))
    }
}

/// Bytes of the verify section `table` implies: `tokens - 1` token ids per `VERIFY` entry.
pub fn verify_section_bytes(table: &BatchTable) -> u64 {
    table
        .entries()
        .iter()
        .filter(|e| e.flags.contains(EntryFlags::VERIFY))
        .map(|e| 4 * u64::from(e.tokens.saturating_sub(1)))
        .sum()
}

/// The largest verify section a table of `capacity` entries can carry.
pub const fn max_verify_section_bytes(capacity: u16) -> u64 {
    capacity as u64 * 4 * (MAX_VERIFY_ROWS as u64 - 1)
}

/// Appends the verify section: for each `VERIFY` entry, the tokens sampled after its rows
/// but the last (`rows[i]` holds entry `i`'s; missing values are written as [`NO_TOKEN`]).
pub fn encode_verify_section(table: &BatchTable, rows: &[Vec<u32>], out: &mut Vec<u8>) {
    for (i, e) in table.entries().iter().enumerate() {
        if !e.flags.contains(EntryFlags::VERIFY) {
            continue;
        }
        for j in 0..e.tokens.saturating_sub(1) as usize {
            let t = rows.get(i).and_then(|r| r.get(j)).copied().unwrap_or(NO_TOKEN);
            out.extend_from_slice(&t.to_le_bytes());
        }
    }
}

/// Reads the verify section of `table` from `bytes` (exactly [`verify_section_bytes`]
/// long): each entry's tokens after its rows but the last (empty for an entry that does
/// not verify). A token at or above `vocab` is refused.
pub fn decode_verify_section(
    table: &BatchTable,
    bytes: &[u8],
    vocab: u32,
) -> Result<Vec<Vec<u32>>, BatchError> {
    let expected = verify_section_bytes(table);
    if bytes.len() as u64 != expected {
        return Err(BatchError::PayloadMismatch { found: bytes.len() as u64, expected });
    }
    let mut words = bytes.chunks_exact(4).map(|c| u32_at(c, 0));
    let mut out = Vec::with_capacity(table.entries().len());
    for e in table.entries() {
        let n = if e.flags.contains(EntryFlags::VERIFY) { e.tokens - 1 } else { 0 };
        let row: Vec<u32> = words.by_ref().take(n as usize).collect();
        if row.iter().any(|&t| t >= vocab) {
            return Err(BatchError::PayloadMismatch { found: bytes.len() as u64, expected });
        }
        out.push(row);
    }
    Ok(out)
}

/// Bytes of a token-out payload for `capacity` entries (table plus one `u32` each).
pub const fn token_out_bytes(capacity: u16) -> u64 {
    table_bytes(capacity) + 4 * capacity as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const LIMITS: BatchLimits =
        BatchLimits { capacity: 4, max_seq_len: 64, cache_blocks: 8, mask_bytes: 0 };

    fn entry(slot: u32, first: u32, tokens: u32, flags: EntryFlags) -> BatchEntry {
        BatchEntry {
            slot,
            first_position: first,
            tokens,
            flags,
            sampling: EntrySampling::default(),
        }
    }

    #[test]
    fn a_table_round_trips_through_its_bytes() {
        let t = BatchTable::new(
            4,
            vec![
                entry(2, 0, 5, EntryFlags::RESET | EntryFlags::SAMPLE),
                BatchEntry {
                    sampling: EntrySampling {
                        temperature: 0.7,
                        top_p: 0.9,
                        top_k: 40,
                        seed: 7,
                        top_logprobs: 0,
                    },
                    ..entry(0, 9, 1, EntryFlags::SAMPLE)
                },
            ],
        );
        let bytes = t.encode();
        assert_eq!(bytes.len() as u64, table_bytes(4));
        assert_eq!(BatchTable::decode(&bytes, LIMITS), Ok(t));
    }

    #[test]
    fn cache_operations_round_trip_and_one_out_of_range_is_refused() {
        let op = |kind, slot, store_block| CacheOp { kind, slot, slot_block: 1, store_block };
        let ops = vec![op(CacheOpKind::Save, 3, 7), op(CacheOpKind::Load, 0, 0)];
        let t = BatchTable::new(4, vec![entry(0, 4, 1, EntryFlags::RESET)]).with_ops(ops);
        let bytes = t.encode();
        assert_eq!(bytes.len() as u64, table_bytes(4));
        assert_eq!(BatchTable::decode(&bytes, LIMITS), Ok(t.clone()));
        let fewer = BatchLimits { cache_blocks: 7, ..LIMITS };
        assert_eq!(BatchTable::decode(&bytes, fewer).unwrap_err().code(), "cache_op_out_of_range");
        let mut bad = bytes.clone();
        bad[TABLE_HEADER_BYTES as usize + 4 * ENTRY_BYTES as usize] = 9;
        assert_eq!(BatchTable::decode(&bad, LIMITS).unwrap_err().code(), "bad_cache_op");
    }

    #[test]
    fn a_keep_needs_no_store_and_never_names_more_positions_than_the_context() {
        let resume = entry(1, 0, 3, EntryFlags::RESUME);
        let no_store = BatchLimits { cache_blocks: 0, ..LIMITS };
        let t = BatchTable::new(4, vec![resume]).with_ops(vec![CacheOp::keep(1, 40)]);
        assert_eq!(BatchTable::decode(&t.encode(), no_store), Ok(t));
        let past = BatchTable::new(4, vec![resume]).with_ops(vec![CacheOp::keep(1, 65)]);
        assert_eq!(past.check(no_store).unwrap_err().code(), "cache_op_out_of_range");
    }

    #[test]
    fn a_resumed_entry_skips_what_its_slot_holds_but_a_sampled_last_row() {
        use crate::wire::cache_ops::{resume_hold, resume_skip};
        // A kept stage holds 10 positions, logged 8: it keeps 8 of a keep of 9.
        assert_eq!(resume_hold(10, Some(8), 9), 8);
        assert_eq!(resume_hold(10, None, 9), 9);
        // A new stage holds none and computes every row.
        assert_eq!(resume_hold(0, Some(0), 9), 0);
        assert_eq!(resume_skip(0, 0, 4, false), Some(0));
        assert_eq!(resume_skip(8, 0, 4, false), Some(4));
        assert_eq!(resume_skip(8, 4, 6, false), Some(4));
        assert_eq!(resume_skip(8, 6, 2, true), Some(1), "the sampled row is computed");
        assert_eq!(resume_skip(8, 9, 2, false), None, "a gap is refused");
    }

    #[test]
    fn rows_after_the_table_must_be_exactly_the_tables_rows() {
        let t = BatchTable::new(4, vec![entry(1, 0, 3, EntryFlags::RESET)]);
        let mut bytes = t.encode();
        bytes.extend_from_slice(&[0; 12]);
        let (back, rows) = BatchTable::split_rows(&bytes, LIMITS, 4).unwrap();
        assert_eq!((back, rows.len()), (t, 12));
        bytes.push(0);
        assert_eq!(
            BatchTable::split_rows(&bytes, LIMITS, 4).unwrap_err().code(),
            "payload_mismatch"
        );
    }

    #[test]
    fn token_out_names_a_token_for_exactly_the_sampling_entries() {
        let t = BatchTable::new(
            4,
            vec![entry(0, 0, 3, EntryFlags::RESET), entry(1, 4, 1, EntryFlags::SAMPLE)],
        );
        let mut bytes = t.encode();
        for tok in [NO_TOKEN, 17, NO_TOKEN, NO_TOKEN] {
            bytes.extend_from_slice(&tok.to_le_bytes());
        }
        assert_eq!(bytes.len() as u64, token_out_bytes(4));
        let (_, tokens) = BatchTable::split_tokens(&bytes, LIMITS).unwrap();
        assert_eq!(tokens, vec![NO_TOKEN, 17, NO_TOKEN, NO_TOKEN]);
        bytes[table_bytes(4) as usize..][..4].copy_from_slice(&5u32.to_le_bytes());
        assert!(BatchTable::split_tokens(&bytes, LIMITS).is_err());
    }

    #[test]
    fn each_broken_rule_has_its_own_code() {
        let cases: Vec<(BatchTable, &str)> = vec![
            (BatchTable::new(4, vec![]), "bad_count"),
            (BatchTable::new(4, vec![entry(4, 0, 1, EntryFlags::NONE)]), "slot_out_of_range"),
            (
                BatchTable::new(
                    4,
                    vec![entry(1, 0, 1, EntryFlags::NONE), entry(1, 1, 1, EntryFlags::NONE)],
                ),
                "duplicate_slot",
            ),
            (BatchTable::new(4, vec![entry(1, 0, 0, EntryFlags::NONE)]), "empty_entry"),
            (BatchTable::new(4, vec![entry(1, 60, 5, EntryFlags::NONE)]), "past_context"),
            (BatchTable::new(4, vec![entry(1, 0, 1, EntryFlags(64))]), "unknown_flags"),
            (
                BatchTable::new(4, vec![entry(1, 0, 1, EntryFlags::RESUME | EntryFlags::RESET)]),
                "bad_resume",
            ),
            (
                BatchTable::new(
                    4,
                    vec![entry(
                        1,
                        0,
                        2,
                        EntryFlags::RESUME | EntryFlags::SAMPLE | EntryFlags::VERIFY,
                    )],
                ),
                "bad_resume",
            ),
            (BatchTable::new(4, vec![entry(1, 0, 2, EntryFlags::VERIFY)]), "bad_verify"),
            (
                BatchTable::new(
                    4,
                    vec![entry(
                        1,
                        0,
                        2,
                        EntryFlags::VERIFY | EntryFlags::SAMPLE | EntryFlags::LOGPROBS,
                    )],
                ),
                "bad_verify",
            ),
            (
                BatchTable::new(4, vec![entry(1, 0, 17, EntryFlags::VERIFY | EntryFlags::SAMPLE)]),
                "bad_verify",
            ),
            (
                BatchTable::new(4, vec![entry(1, 0, 1, EntryFlags::ROLLBACK | EntryFlags::RESET)]),
                "rollback_with_reset",
            ),
            (
                BatchTable::new(
                    4,
                    vec![BatchEntry {
                        sampling: EntrySampling { temperature: f32::NAN, ..Default::default() },
                        ..entry(1, 0, 1, EntryFlags::SAMPLE)
                    }],
                ),
                "bad_sampling",
            ),
            (BatchTable::new(3, vec![entry(1, 0, 1, EntryFlags::NONE)]), "capacity_mismatch"),
        ];
        for (t, code) in cases {
            assert_eq!(t.check(LIMITS).unwrap_err().code(), code, "{t:?}");
            assert_eq!(BatchTable::decode(&t.encode(), LIMITS).unwrap_err().code(), code);
        }
        let good = BatchTable::new(4, vec![entry(1, 0, 2, EntryFlags::NONE)]).encode();
        let mut b = good.clone();
        b[0] ^= 1;
        assert_eq!(BatchTable::decode(&b, LIMITS).unwrap_err().code(), "bad_magic");
        let mut b = good.clone();
        b[4] = 9;
        assert_eq!(BatchTable::decode(&b, LIMITS).unwrap_err().code(), "unsupported_version");
        let mut b = good.clone();
        b[12] = 3;
        assert_eq!(BatchTable::decode(&b, LIMITS).unwrap_err().code(), "total_mismatch");
        let mut b = good.clone();
        *b.last_mut().unwrap() = 1;
        assert_eq!(BatchTable::decode(&b, LIMITS).unwrap_err().code(), "reserved_nonzero");
        assert_eq!(BatchTable::decode(&good[..20], LIMITS).unwrap_err().code(), "truncated");
    }

    #[test]
    fn a_policy_survives_the_tables_sampling_form() {
        let p = SamplingPolicy::Sample { temperature: 0.8, top_k: Some(5), top_p: None, seed: 3 };
        assert_eq!(EntrySampling::from_policy(p).policy(), p);
        assert_eq!(
            EntrySampling::from_policy(SamplingPolicy::Greedy).policy(),
            SamplingPolicy::Greedy
        );
    }

    fn arb_entry() -> impl Strategy<Value = BatchEntry> {
        (0u32..6, 0u32..70, 0u32..10, 0u32..5, prop::bool::ANY, any::<u64>()).prop_map(
            |(slot, first, tokens, flags, hot, seed)| BatchEntry {
                slot,
                first_position: first,
                tokens,
                flags: EntryFlags(flags),
                sampling: EntrySampling {
                    temperature: if hot { 0.5 } else { 0.0 },
                    top_p: 0.0,
                    top_k: 0,
                    seed,
                    top_logprobs: 0,
                },
            },
        )
    }

    proptest! {
        /// Decoding is total: any bytes give a checked table or a typed error, never a
        /// panic; and whatever decodes re-encodes to the same bytes.
        #[test]
        fn decoding_any_bytes_is_total(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
            if let Ok(t) = BatchTable::decode(&bytes, LIMITS) {
                prop_assert!(t.check(LIMITS).is_ok());
                prop_assert_eq!(&t.encode()[..], &bytes[..t.encoded_len() as usize]);
            }
        }

        /// A table decodes back to itself exactly when it passes the check.
        #[test]
        fn encode_then_decode_agrees_with_check(
            entries in prop::collection::vec(arb_entry(), 0..6),
        ) {
            let t = BatchTable::new(4, entries);
            if t.entries().len() > 4 {
                return Ok(());
            }
            let decoded = BatchTable::decode(&t.encode(), LIMITS);
            match t.check(LIMITS) {
                Ok(()) => prop_assert_eq!(decoded, Ok(t)),
                Err(e) => prop_assert_eq!(decoded, Err(e)),
            }
        }

        /// Flipped bits, cut or extended bytes of a valid table never panic the decoder.
        #[test]
        fn mutated_valid_tables_decode_or_fail_typed(
            flip in 0usize..176, bit in 0u8..8, cut in 0usize..200,
        ) {
            let t = BatchTable::new(4, vec![entry(1, 0, 3, EntryFlags::RESET | EntryFlags::SAMPLE)]);
            let mut b = t.encode();
            let n = b.len();
            b[flip % n] ^= 1 << bit;
            let _ = BatchTable::decode(&b, LIMITS);
            let _ = BatchTable::decode(&b[..cut.min(b.len())], LIMITS);
            b.extend_from_slice(&[0xFF; 9]);
            let _ = BatchTable::split_rows(&b, LIMITS, 4);
            let _ = BatchTable::split_tokens(&b, LIMITS);
        }
    }

    #[test]
    fn a_verifying_entrys_tokens_after_each_row_follow_the_ids_and_round_trip() {
        let limits = BatchLimits { capacity: 4, max_seq_len: 64, cache_blocks: 8, mask_bytes: 0 };
        let t = BatchTable::new(
            4,
            vec![
                entry(0, 5, 4, EntryFlags::SAMPLE | EntryFlags::VERIFY | EntryFlags::ROLLBACK),
                entry(2, 0, 3, EntryFlags::SAMPLE | EntryFlags::RESET),
            ],
        );
        let mut bytes = t.encode();
        bytes.extend([40u32, 41, NO_TOKEN, NO_TOKEN].iter().flat_map(|v| v.to_le_bytes()));
        encode_verify_section(&t, &[vec![30, 31, 32], vec![]], &mut bytes);
        assert_eq!(verify_section_bytes(&t), 12);
        let (table, tokens, _, verified) =
            crate::wire::logprobs::split_token_out(&bytes, limits, 100).unwrap();
        assert_eq!((table, tokens), (t.clone(), vec![40, 41, NO_TOKEN, NO_TOKEN]));
        assert_eq!(verified, vec![vec![30, 31, 32], vec![]]);
        // Zero-padded to the fixed size it still decodes; a short section does not.
        let mut padded = bytes.clone();
        padded.resize(crate::wire::logprobs::token_out_max_bytes(4, None) as usize, 0);
        assert!(crate::wire::logprobs::split_token_out(&padded, limits, 100).is_ok());
        let short = &bytes[..bytes.len() - 4];
        assert!(crate::wire::logprobs::split_token_out(short, limits, 100).is_err());
        // A verified token outside the vocabulary is refused.
        assert!(crate::wire::logprobs::split_token_out(&bytes, limits, 32).is_err());
    }
}
