//! Returned micro-batches: the round trip the pacer learns from, and each sequence's
//! tokens, a draft's verdict and what its slot then holds.

use std::time::Duration;

use super::{ReturnError, Scheduler, spec};
use crate::wire::batch::{BatchTable, EntryFlags, NO_TOKEN};
use crate::wire::logprobs::TokenLogprobs;

impl Scheduler {
    /// The oldest micro-batch in flight is coming back `elapsed` after it was sent, having
    /// flown `alone` (no other micro-batch in flight meanwhile): the prefill pacer learns
    /// from it. Call before [`Scheduler::batch_returned`]; nothing in flight changes nothing.
    pub fn round_trip(&mut self, elapsed: Duration, alone: bool) {
        if let Some(f) = self.in_flight.front() {
            self.pacer.observe(f.prompt_rows, elapsed, alone);
            if alone && f.prompt_rows == 0 {
                self.row_cost.observe(f.draft_rows, elapsed);
            }
        }
    }

    /// The oldest micro-batch in flight came back with `tokens` (one per table entry of
    /// the capacity, [`NO_TOKEN`] where the entry does not sample). Its sequences take
    /// their tokens and may finish.
    pub fn batch_returned(
        &mut self,
        table: &BatchTable,
        tokens: &[u32],
    ) -> Result<(), ReturnError> {
        self.batch_returned_with(table, tokens, &[])
    }

    /// As [`Scheduler::batch_returned`], with each entry's log-probabilities (`None`, or
    /// past the slice's end, where it did not ask); a sequence's come out as
    /// [`SeqOutput::Logprobs`] just before its token.
    pub fn batch_returned_with(
        &mut self,
        table: &BatchTable,
        tokens: &[u32],
        logprobs: &[Option<TokenLogprobs>],
    ) -> Result<(), ReturnError> {
        self.batch_returned_all(table, tokens, logprobs, &[])
    }

    /// As [`Scheduler::batch_returned_with`], with each verifying entry's tokens after its
    /// rows but the last (`verified[i]`, empty for the others): a draft keeps its longest
    /// prefix that agrees with them, then the target's own next token; rejected rows are
    /// rolled back by the sequence's next entry.
    pub fn batch_returned_all(
        &mut self,
        table: &BatchTable,
        tokens: &[u32],
        logprobs: &[Option<TokenLogprobs>],
        verified: &[Vec<u32>],
    ) -> Result<(), ReturnError> {
        let Some(sent) = self.in_flight.front() else { return Err(ReturnError::Unexpected) };
        if sent.table != *table {
            return Err(ReturnError::TableMismatch);
        }
        for (i, e) in table.entries().iter().enumerate() {
            let t = tokens.get(i).copied().unwrap_or(NO_TOKEN);
            if e.flags.contains(EntryFlags::SAMPLE) == (t == NO_TOKEN) {
                return Err(ReturnError::Malformed);
            }
            if t != NO_TOKEN && t >= self.cfg.vocab {
                return Err(ReturnError::OutOfVocab(t));
            }
        }
        let Some(done) = self.in_flight.pop_front() else { return Err(ReturnError::Unexpected) };
        self.group_busy[usize::from(done.group)] = false;
        for (i, id) in done.ids.iter().copied().enumerate() {
            let e = table.entries()[i];
            let samples = e.flags.contains(EntryFlags::SAMPLE);
            let Some(seq) = self.live.get_mut(&id) else { continue };
            seq.in_flight = false;
            seq.returned = true;
            // Every stage ran the entry's rows; a draft's rows count once accepted.
            let verify = e.flags.contains(EntryFlags::VERIFY);
            seq.kv_high = seq.kv_high.max(e.first_position + e.tokens);
            seq.kv_valid = e.first_position as usize + if verify { 1 } else { e.tokens as usize };
            if let Some(reason) = seq.cancelled {
                self.finish(id, reason);
                continue;
            }
            if !samples {
                continue;
            }
            let target = verified.get(i).map_or(&[][..], Vec::as_slice);
            let draft = if verify { seq.draft.clone() } else { Vec::new() };
            let taken = spec::verdict(seq, &mut self.spec, target, tokens[i])?;
            seq.kv_valid += draft.iter().zip(&taken).take_while(|(d, t)| d == t).count();
            let lp = logprobs.get(i).cloned().flatten();
            self.take_tokens(id, &taken, lp);
        }
        Ok(())
    }
}
