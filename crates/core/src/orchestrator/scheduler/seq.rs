//! A sequence as the scheduler holds it, and a micro-batch in flight.

use super::{FinishReason, SeqId};
use crate::speculate::adapt::DraftLength;
use crate::wire::batch::{BatchTable, EntryFlags, EntrySampling};

/// Entry `entry`'s masks (of [`Seq::next_masks`]) on its rows: a decode entry's from its
/// first row, a prompt chunk's on its last.
pub(super) fn row_masks(
    entry: usize,
    rows: usize,
    sets: Vec<crate::wire::mask::MaskSet>,
) -> impl Iterator<Item = crate::wire::mask::TokenMask> {
    let from = rows - sets.len().min(rows);
    sets.into_iter().enumerate().map(move |(k, set)| crate::wire::mask::TokenMask {
        entry: entry as u16,
        row: (from + k) as u16,
        set,
    })
}

#[derive(Debug)]
pub(super) struct Seq {
    pub(super) slot: u16,
    pub(super) group: u16,
    pub(super) prompt: Vec<u32>,
    /// Prompt tokens already sent.
    pub(super) prefilled: usize,
    pub(super) generated: Vec<u32>,
    pub(super) max_tokens: u32,
    pub(super) sampling: EntrySampling,
    /// It asked for log-probabilities (`sampling.top_logprobs` alternatives).
    pub(super) logprobs: bool,
    pub(super) in_flight: bool,
    /// Cancelled while in flight: finish with this when its micro-batch returns.
    pub(super) cancelled: Option<FinishReason>,
    /// The draft riding with its last token in the micro-batch in flight.
    pub(super) draft: Vec<u32>,
    /// Its draft length (`None`: it does not speculate).
    pub(super) spec: Option<DraftLength>,
    /// The stages hold rows of a rejected draft: its next entry rolls them back.
    pub(super) rollback: bool,
    /// Prompt tokens its slot held when it took it (its first entry starts there).
    pub(super) cached: u32,
    /// Its first entry is still to be sent (it carries `RESET`).
    pub(super) fresh: bool,
    /// Positions from 0 whose cached rows are its history's tokens (after the micro-batches
    /// that returned).
    pub(super) kv_valid: usize,
    /// Positions its slot wrote since it was last emptied.
    pub(super) kv_high: u32,
    /// The tokens its slot held before (saved to the block store with its first entry).
    pub(super) old: Vec<u32>,
    /// It may use cached tokens (`cache_prompt`).
    pub(super) cache_prompt: bool,
    /// Positions below this are kept from a faulted run (a resumed slot): its entries
    /// below it carry `RESUME`, its first one a `keep` (0: none).
    pub(super) resume_below: u32,
    /// Prompt tokens its slot shared when it took it (before any store load).
    pub(super) shared: u32,
    /// One of its micro-batches came back (every stage ran its first entry).
    pub(super) returned: bool,
    /// The grammar its samples follow.
    pub(super) constraint: Option<crate::model::constraint::SharedConstraint>,
}

impl Seq {
    /// The masks of its next entry when it is constrained and the entry samples, one per
    /// row from the first that samples (a draft is cut where the grammar refuses a token,
    /// or where the table's mask section, `room` bytes with `used` taken, has no room for
    /// more): `None` when not even the first fits (the entry waits for the next
    /// micro-batch); empty when it needs none.
    pub(super) fn next_masks(
        &self,
        samples: bool,
        draft: &mut Option<Vec<u32>>,
        used: &mut usize,
        room: u32,
    ) -> Option<Vec<crate::wire::mask::MaskSet>> {
        let Some(c) = self.constraint.as_ref().filter(|_| samples) else { return Some(vec![]) };
        let mut sets = c.masks_along(draft.as_deref().unwrap_or(&[]));
        let mut fit = 0;
        for set in &sets {
            let bytes = crate::wire::mask::mask_bytes(set);
            if *used + bytes > room as usize {
                break;
            }
            *used += bytes;
            fit += 1;
        }
        if fit == 0 {
            return None;
        }
        sets.truncate(fit);
        if let Some(d) = draft.as_mut() {
            d.truncate(fit - 1);
        }
        Some(sets)
    }

    /// An entry's flags and sampling: log-probabilities asked where it samples and the
    /// request asked for them.
    pub(super) fn entry_sampling(&self, flags: EntryFlags) -> (EntryFlags, EntrySampling) {
        let asks = self.logprobs && flags.contains(EntryFlags::SAMPLE);
        let flags = if asks { flags | EntryFlags::LOGPROBS } else { flags };
        let top_logprobs = if asks { self.sampling.top_logprobs } else { 0 };
        (flags, EntrySampling { top_logprobs, ..self.sampling })
    }

    pub(super) fn has_work(&self) -> bool {
        !self.in_flight && self.cancelled.is_none()
    }

    /// Its tokens so far: the prompt, then its output.
    pub(super) fn history_len(&self) -> usize {
        self.prompt.len() + self.generated.len()
    }
}

#[derive(Debug)]
pub(super) struct InFlight {
    pub(super) group: u16,
    pub(super) table: BatchTable,
    pub(super) ids: Vec<SeqId>,
    /// Prompt rows it carries (the pacer's input).
    pub(super) prompt_rows: u32,
    /// Drafted rows it carries (the row cost's input).
    pub(super) draft_rows: usize,
}
