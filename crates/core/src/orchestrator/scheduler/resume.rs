//! Keeping the stages' caches across a re-formation (`specs/reformation.md`), sans-IO.
//!
//! When a run faults, the scheduler knows what every slot holds on every stage for certain:
//! the positions of the micro-batches that came back. Those tokens are carried to the run
//! that re-forms this one. There, a sequence that takes a carried slot sharing a prefix
//! with its prompt (a kept request replaying its own history, most of all) does not reset
//! the slot: its first entry carries a `keep` cache operation of the shared length and
//! every entry below it `RESUME`. A stage that kept its caches (the same stage on the same
//! node: the worker took over its parked role) keeps those positions and sends the rows it
//! logged for them; a new stage holds nothing and computes every row. So only the stages
//! that moved rebuild their caches, from the rows the kept stages send.
//!
//! Rules:
//! - A sequence whose first micro-batch never came back may have reached some stages and
//!   not others: only the prefix its slot shared before is certain (its store loads may
//!   not have run).
//! - A carried slot's tokens are never saved to the block store (a new stage does not
//!   hold them), and a resumed sequence loads nothing from it.
//! - Carried slots are used only where the caches are not rings (sliding windows): a ring
//!   may have wrapped past what the scheduler knows.

use super::prefix::{Chosen, WarmSlots};
use super::{Scheduler, Seq};
use crate::wire::batch::{CacheOp, EntryFlags};

/// What the slots' caches held, for certain, when a run faulted: handed to the scheduler
/// of the run that re-forms it ([`Scheduler::resume_onto`]).
#[derive(Debug, Clone)]
pub struct CarriedSlots {
    warm: WarmSlots,
}

impl Scheduler {
    /// What the slots held when the scheduler's sequences were failed (taken once).
    pub fn take_carried(&mut self) -> Option<CarriedSlots> {
        self.carry.take()
    }

    /// This scheduler's run re-forms the faulted run `carried` came from: its slots start
    /// with what they held there. Ignored where the slot count differs or the caches are
    /// rings.
    pub fn resume_onto(&mut self, carried: CarriedSlots) {
        let slots = usize::from(self.cfg.max_sequences);
        if carried.warm.slot_count() != slots || self.cfg.window.is_some() {
            return;
        }
        self.warm.take_over(carried.warm);
        self.carried = self.warm.warm_slots().collect();
    }

    /// The positions sequence `id` keeps of its slot from the faulted run (0: none, or it
    /// has no slot yet).
    pub fn kept_positions(&self, id: super::SeqId) -> u32 {
        self.live.get(&id).map_or(0, |s| s.resume_below)
    }

    /// Test-only: plants a bug: a sequence that takes a carried slot keeps every position
    /// the slot held, shared or not (the simulation's self-check only).
    pub fn plant_resume_overkeep(&mut self) {
        self.planted_overkeep = true;
    }

    /// Whether the sequence taking `chosen` resumes a carried slot, and how many positions
    /// it keeps. A carried slot's old tokens are never saved (a new stage lacks them).
    pub(super) fn resumes(&mut self, chosen: &mut Chosen) -> Option<u32> {
        if !self.carried.remove(&chosen.slot) {
            return None;
        }
        let held = std::mem::take(&mut chosen.old).len() as u32;
        if self.planted_overkeep && held > 0 {
            return Some(held);
        }
        (chosen.reuse > 0).then_some(chosen.reuse)
    }

    /// Before the sequences are failed: a sequence whose first micro-batch never came
    /// back is certain only of the prefix its slot shared.
    pub(super) fn settle_for_carry(&mut self) {
        for seq in self.live.values_mut() {
            if !seq.returned {
                seq.kv_valid = seq.kv_valid.min(seq.shared as usize);
            }
        }
    }

    /// After the sequences are failed: what the slots hold is carried.
    pub(super) fn carry_slots(&mut self) {
        self.carry = Some(CarriedSlots { warm: self.warm.carried() });
        self.carried.clear();
    }
}

impl Seq {
    /// The flags its entry at `first` starts with: its first entry resets the slot or, on
    /// a resumed slot, carries a `keep` operation (`skip_reset`: the planted bug resets
    /// nothing); an entry below the kept positions resumes.
    pub(super) fn start_flags(
        &mut self,
        skip_reset: bool,
        first: usize,
        ops: &mut Vec<CacheOp>,
    ) -> EntryFlags {
        let mut flags = EntryFlags::NONE;
        if std::mem::take(&mut self.fresh) && !skip_reset {
            if self.resume_below > 0 {
                ops.push(CacheOp::keep(u32::from(self.slot), self.resume_below));
            } else {
                flags = EntryFlags::RESET;
            }
        }
        if first < self.resume_below as usize {
            flags = flags | EntryFlags::RESUME;
        }
        flags
    }
}
