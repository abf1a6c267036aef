//! What a run hands the run that re-forms it: its slots' certain contents.

use super::RunFsm;
use crate::orchestrator::scheduler::CarriedSlots;

impl RunFsm {
    /// What the slots held for certain when the run's sequences were failed (taken once).
    pub fn take_carried(&mut self) -> Option<CarriedSlots> {
        self.sched.take_carried()
    }

    /// This run re-forms the faulted run `carried` came from (its slots start with what
    /// they held there).
    pub fn resume_onto(&mut self, carried: CarriedSlots) {
        self.sched.resume_onto(carried);
    }

    /// Test-only: plants a bug in the scheduler (see
    /// [`crate::orchestrator::scheduler::Scheduler::plant_resume_overkeep`]).
    pub fn plant_resume_overkeep(&mut self) {
        self.sched.plant_resume_overkeep();
    }

    /// The positions sequence `seq` keeps of its slot from the faulted run (0: none, or
    /// it has no slot yet).
    pub fn kept_positions(&self, seq: crate::orchestrator::scheduler::SeqId) -> u32 {
        self.sched.kept_positions(seq)
    }
}
