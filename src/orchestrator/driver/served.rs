//! A server's requests in a session: each arrives as a [`Submission`] with its own reply
//! channel and a ticket (the server's id for it); the run loop gives it an index in the
//! session's request book, submits it, and routes its tokens, released text and result
//! back on that channel. A ticket on the cancel channel cancels its sequence (the client
//! went away). The submission channel closing says no more requests will come: the session
//! finishes what it holds and completes.

use std::collections::HashMap;

use tokio::sync::mpsc;

use crate::orchestrator::requests::{Request, RequestResult};
use crate::orchestrator::scheduler::SlotView;
use crate::wire::logprobs::TokenLogprobs;

/// A server's side of one session's input.
#[derive(Debug)]
pub struct Served {
    /// Requests, as they arrive.
    pub submissions: mpsc::UnboundedReceiver<Submission>,
    /// Tickets of requests whose client went away.
    pub cancels: mpsc::UnboundedReceiver<u64>,
    /// Asks for the slots' state (`/slots`).
    pub queries: mpsc::UnboundedReceiver<tokio::sync::oneshot::Sender<SlotsReport>>,
}

/// The session's slots and queue.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SlotsReport {
    /// Every slot.
    pub slots: Vec<SlotView>,
    /// Requests waiting for a slot.
    pub queued: usize,
    /// The stages' prompt-cache stores.
    pub prompt_cache: PromptCacheView,
}

/// What `/slots` shows of the stages' prompt-cache stores.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PromptCacheView {
    /// Blocks every stage's store holds at most.
    pub blocks: u32,
    /// Positions per block.
    pub block_tokens: u32,
    /// Blocks holding a prefix now.
    pub blocks_used: u64,
    /// The stores' budget across the stages (what the plan counts).
    pub bytes: u64,
}

/// One request from a server.
#[derive(Debug)]
pub struct Submission {
    /// The server's id for it (what a cancellation names).
    pub ticket: u64,
    /// The request.
    pub request: Request,
    /// Where its tokens, text and result go.
    pub reply: mpsc::UnboundedSender<Reply>,
}

/// What the session tells a served request, in order: tokens and released text, then its
/// result (exactly once; a reply channel that closes without one means the session ended
/// before it read the request).
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// The request left the queue and holds a slot.
    Started,
    /// A generated token and the text it releases (possibly empty).
    Token {
        /// The token id.
        id: u32,
        /// The text it releases.
        piece: String,
        /// Its log-probabilities, when the request asked.
        logprobs: Option<TokenLogprobs>,
    },
    /// Text released at the end (what was held back as a possible stop string, and the
    /// detokenizer's tail).
    Text(String),
    /// Its result or error.
    Done(RequestResult),
}

/// The run loop's routes to served requests.
#[derive(Debug)]
pub(super) struct Routes {
    submissions: Option<mpsc::UnboundedReceiver<Submission>>,
    cancels: mpsc::UnboundedReceiver<u64>,
    queries: mpsc::UnboundedReceiver<tokio::sync::oneshot::Sender<SlotsReport>>,
    replies: HashMap<usize, mpsc::UnboundedSender<Reply>>,
    index_of: HashMap<u64, usize>,
}

impl Routes {
    pub(super) fn new(served: Served) -> Routes {
        Routes {
            submissions: Some(served.submissions),
            cancels: served.cancels,
            queries: served.queries,
            replies: HashMap::new(),
            index_of: HashMap::new(),
        }
    }

    /// Request `index` answers on `reply`, and is cancelled by `ticket`.
    pub(super) fn add(&mut self, index: usize, ticket: u64, reply: mpsc::UnboundedSender<Reply>) {
        self.replies.insert(index, reply);
        self.index_of.insert(ticket, index);
    }

    /// The request a cancelled ticket names, if it is still routed.
    pub(super) fn cancelled(&self, ticket: u64) -> Option<usize> {
        self.index_of.get(&ticket).copied().filter(|i| self.replies.contains_key(i))
    }

    /// Sends `reply` to request `index` (if it is a served one); a result ends its route.
    pub(super) fn send(&mut self, index: usize, reply: Reply) {
        let done = matches!(reply, Reply::Done(_));
        if let Some(tx) = self.replies.get(&index) {
            let _ = tx.send(reply);
        }
        if done {
            self.replies.remove(&index);
            self.index_of.retain(|_, i| *i != index);
        }
    }

    /// No more requests are read: those still in the channel are dropped unread (their
    /// reply channels close without a result).
    pub(super) fn close(&mut self) {
        self.submissions = None;
    }

    /// The next submission or cancellation; once closed, only cancellations (pending
    /// forever when the server's cancel sender is gone too).
    pub(super) async fn next_event(&mut self) -> Routed {
        let (cancels, queries) = (&mut self.cancels, &mut self.queries);
        let other = async {
            tokio::select! {
                Some(t) = cancels.recv() => Routed::Cancel(t),
                Some(q) = queries.recv() => Routed::Slots(q),
                else => std::future::pending().await,
            }
        };
        match &mut self.submissions {
            Some(rx) => tokio::select! {
                sub = rx.recv() => Routed::Submission(sub),
                routed = other => routed,
            },
            None => other.await,
        }
    }
}

/// What a server's channels brought.
#[derive(Debug)]
pub(super) enum Routed {
    /// A request (`None`: no more will come).
    Submission(Option<Submission>),
    /// A request's client went away.
    Cancel(u64),
    /// The slots' state is asked for.
    Slots(tokio::sync::oneshot::Sender<SlotsReport>),
}

/// The next submission or cancellation of a server's session (pending forever for a run
/// that serves no server).
pub(super) async fn next_routed(routes: &mut Option<Routes>) -> Routed {
    match routes {
        Some(routes) => routes.next_event().await,
        None => std::future::pending().await,
    }
}
