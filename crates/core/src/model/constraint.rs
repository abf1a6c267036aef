//! Constrained sampling's state for one sequence: a grammar (a JSON schema) that decides
//! which tokens the next sample may take. The driver's implementation wraps a grammar
//! engine; the scheduler asks it for the mask of each sampling entry (carried to the last
//! stage in the table's mask section, [`crate::wire::mask`]) and tells it each token the
//! sequence kept. A drafting sequence gets a mask for every verifying row: the grammar
//! advanced over the draft, then back.

use std::sync::{Arc, Mutex};

use crate::wire::mask::MaskSet;

/// A grammar's state for one sequence.
pub trait Constraint: Send {
    /// The tokens the next sample may take (end of sequence included once the grammar
    /// may end).
    fn mask(&mut self) -> MaskSet;
    /// The token the sequence kept.
    fn commit(&mut self, token: u32);
    /// The masks of the rows of an entry carrying `draft` after the sequence's last token:
    /// the next sample's, then each one after the draft's tokens so far. It stops where a
    /// draft token is not allowed (the rest of the draft cannot be kept); the state is
    /// as before. Without an implementation, one mask: the sequence does not draft.
    fn masks_along(&mut self, draft: &[u32]) -> Vec<MaskSet> {
        let _ = draft;
        vec![self.mask()]
    }
}

/// A constraint shared by a request and its sequence (the request outlives a re-formed
/// run, and its state with it: every kept token was committed once).
#[derive(Clone)]
pub struct SharedConstraint(pub Arc<Mutex<dyn Constraint>>);

impl SharedConstraint {
    /// Shares `c`.
    pub fn new(c: impl Constraint + 'static) -> SharedConstraint {
        SharedConstraint(Arc::new(Mutex::new(c)))
    }

    /// The next sample's mask.
    pub fn mask(&self) -> MaskSet {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).mask()
    }

    /// [`Constraint::masks_along`].
    pub fn masks_along(&self, draft: &[u32]) -> Vec<MaskSet> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).masks_along(draft)
    }

    /// Commits a kept token.
    pub fn commit(&self, token: u32) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).commit(token);
    }
}

impl std::fmt::Debug for SharedConstraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedConstraint")
    }
}

impl PartialEq for SharedConstraint {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
