//! Posted steps (sans-IO): steps the node decided ahead of their input, waiting in the
//! worker for the one object they may run on.
//!
//! A post names an ingress ring, its edge and a sequence. It takes an object only when all
//! three match exactly ([`PostedSteps::claim`]); it never takes an object of another ring,
//! edge or sequence. At most one post waits per ring. A post whose sequence the ring has
//! already loaded can never match and is refused as passed; the node, which saw that
//! object arrive untaken, executes it itself.

use crate::wire::{EdgeId, PortId, RingId, RoleId, Sequence, StepId};
use crate::worker::protocol::PostedOutput;

/// One posted step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Post {
    /// The role.
    pub role_id: RoleId,
    /// The step.
    pub step_id: StepId,
    /// The ingress ring whose object it takes.
    pub ring_id: RingId,
    /// That ring's edge.
    pub edge_id: EdgeId,
    /// The port its input feeds.
    pub port: PortId,
    /// The sequence of the object it takes.
    pub sequence: Sequence,
    /// Its output.
    pub output: PostedOutput,
}

/// What became of a post.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostOutcome {
    /// It waits for its object.
    Waiting,
    /// Its object was already loaded: it can never run (withdrawn at once).
    Passed,
    /// It names no installed ingress ring of that edge, or the ring already has a post.
    Rejected,
}

/// The posts waiting in one worker.
#[derive(Debug, Default)]
pub struct PostedSteps {
    posts: Vec<Post>,
}

impl PostedSteps {
    /// No posts.
    pub fn new() -> PostedSteps {
        PostedSteps::default()
    }

    /// Takes a post. `ring`: the ring's edge and the next sequence it will load, when it is
    /// an installed ingress ring that still loads objects.
    pub fn post(&mut self, post: Post, ring: Option<(EdgeId, Sequence)>) -> PostOutcome {
        let Some((edge, next)) = ring else { return PostOutcome::Rejected };
        if edge != post.edge_id
            || self.posts.iter().any(|p| p.ring_id == post.ring_id || p.step_id == post.step_id)
        {
            return PostOutcome::Rejected;
        }
        if post.sequence < next {
            return PostOutcome::Passed;
        }
        self.posts.push(post);
        PostOutcome::Waiting
    }

    /// The post that takes the object of `sequence` just loaded from `ring` on `edge`, if
    /// one matches all three; it leaves the waiting set.
    pub fn claim(&mut self, ring: RingId, edge: EdgeId, sequence: Sequence) -> Option<Post> {
        let at = self
            .posts
            .iter()
            .position(|p| p.ring_id == ring && p.edge_id == edge && p.sequence == sequence)?;
        Some(self.posts.remove(at))
    }

    /// Withdraws the post of `step`, if it still waits.
    pub fn withdraw(&mut self, step: StepId) -> Option<Post> {
        let at = self.posts.iter().position(|p| p.step_id == step)?;
        Some(self.posts.remove(at))
    }

    /// Withdraws every post matching `f`.
    pub fn withdraw_where(&mut self, mut f: impl FnMut(&Post) -> bool) -> Vec<Post> {
        let (gone, kept) = std::mem::take(&mut self.posts).into_iter().partition(|p| f(p));
        self.posts = kept;
        gone
    }

    /// Posts waiting.
    pub fn len(&self) -> usize {
        self.posts.len()
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.posts.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{ObjectFlags, ObjectId};
    use crate::worker::protocol::OutputExtent;
    use proptest::prelude::*;

    fn post(step: u64, ring: u64, edge: u64, seq: u64) -> Post {
        Post {
            role_id: RoleId(1),
            step_id: StepId(step),
            ring_id: RingId(ring),
            edge_id: EdgeId(edge),
            port: PortId(0),
            sequence: Sequence(seq),
            output: PostedOutput {
                port: PortId(0),
                ring_id: RingId(99),
                object_id: ObjectId(seq + 1),
                sequence: Sequence(seq),
                extent: OutputExtent::Fixed { bytes: 4 },
                flags: ObjectFlags::NONE,
            },
        }
    }

    #[test]
    fn a_post_for_an_object_already_loaded_is_passed_and_never_waits() {
        let mut posts = PostedSteps::new();
        let outcome = posts.post(post(1, 7, 2, 3), Some((EdgeId(2), Sequence(4))));
        assert_eq!(outcome, PostOutcome::Passed);
        assert!(posts.is_empty());
    }

    #[test]
    fn a_post_naming_no_ingress_ring_or_a_busy_ring_is_rejected() {
        let mut posts = PostedSteps::new();
        assert_eq!(posts.post(post(1, 7, 2, 0), None), PostOutcome::Rejected);
        assert_eq!(
            posts.post(post(1, 7, 3, 0), Some((EdgeId(2), Sequence(0)))),
            PostOutcome::Rejected
        );
        assert_eq!(
            posts.post(post(1, 7, 2, 0), Some((EdgeId(2), Sequence(0)))),
            PostOutcome::Waiting
        );
        assert_eq!(
            posts.post(post(2, 7, 2, 1), Some((EdgeId(2), Sequence(0)))),
            PostOutcome::Rejected
        );
        assert_eq!(posts.len(), 1);
    }

    #[test]
    fn withdrawn_posts_take_nothing() {
        let mut posts = PostedSteps::new();
        posts.post(post(1, 7, 2, 0), Some((EdgeId(2), Sequence(0))));
        posts.post(post(2, 8, 3, 5), Some((EdgeId(3), Sequence(5))));
        assert_eq!(posts.withdraw(StepId(1)).map(|p| p.step_id), Some(StepId(1)));
        assert_eq!(posts.claim(RingId(7), EdgeId(2), Sequence(0)), None);
        let gone = posts.withdraw_where(|p| p.ring_id == RingId(8));
        assert_eq!(gone.len(), 1);
        assert_eq!(posts.claim(RingId(8), EdgeId(3), Sequence(5)), None);
    }

    proptest! {
        /// Whatever is posted and loaded, a claim returns only a post of exactly the
        /// loaded ring, edge and sequence, and each post is claimed at most once.
        #[test]
        fn a_posted_step_never_takes_an_object_of_another_sequence_ring_or_edge(
            ops in proptest::collection::vec((0u64..3, 0u64..3, 0u64..4, any::<bool>()), 1..60)
        ) {
            let mut posts = PostedSteps::new();
            let mut next_step = 1;
            let mut claimed = std::collections::HashSet::new();
            for (ring, edge, seq, is_post) in ops {
                if is_post {
                    let p = post(next_step, ring, edge, seq);
                    next_step += 1;
                    let _ = posts.post(p, Some((EdgeId(edge), Sequence(0))));
                } else if let Some(p) = posts.claim(RingId(ring), EdgeId(edge), Sequence(seq)) {
                    prop_assert_eq!(p.ring_id, RingId(ring));
                    prop_assert_eq!(p.edge_id, EdgeId(edge));
                    prop_assert_eq!(p.sequence, Sequence(seq));
                    prop_assert!(claimed.insert(p.step_id));
                }
            }
        }
    }
}
