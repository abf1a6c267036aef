//! What the server's tasks share: the lifecycle, the current session's input (set only
//! while it serves), the metrics, and the pool's view for the page.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{mpsc, oneshot};

use super::ServeConfig;
use super::metrics::Metrics;
use super::view::PoolView;
use crate::model::tokenizer::{ChatFormat, Tokenizer};
use crate::orchestrator::driver::served::{Reply, SlotsReport, Submission};
use crate::orchestrator::requests::Request;
use crate::serve::error::ApiError;
use crate::serve::phase::ServerPhase;
use crate::wire::reason::ApiRefusal;

/// The input of the session that serves now.
#[derive(Clone)]
pub struct SessionInput {
    /// Requests.
    pub submit: mpsc::UnboundedSender<Submission>,
    /// Cancellations.
    pub cancel: mpsc::UnboundedSender<u64>,
    /// Slot queries.
    pub queries: mpsc::UnboundedSender<oneshot::Sender<SlotsReport>>,
}

/// Shared by the HTTP handlers and the session loop.
pub struct Shared {
    /// The server's settings.
    pub config: ServeConfig,
    /// The model's tokenizer.
    pub tokenizer: Arc<Tokenizer>,
    /// The model's chat format (its own template, or the hand-written fallback).
    pub chat: Arc<ChatFormat>,
    /// The tokens that end a sequence (end of sequence, end of turn): what a finished
    /// grammar allows.
    pub ends: Vec<u32>,
    /// Grammars over the vocabulary, built on the first constrained request.
    pub grammars: std::sync::OnceLock<Result<Arc<crate::model::grammar::Grammars>, String>>,
    /// The lifecycle.
    phase: Mutex<ServerPhase>,
    /// Set while a session serves.
    input: Mutex<Option<SessionInput>>,
    /// The metrics.
    pub metrics: Metrics,
    /// The pool as the page shows it.
    view: Mutex<PoolView>,
    tickets: AtomicU64,
    /// The context of the session's plan (the configured one until a session is planned).
    n_ctx: AtomicU32,
}

/// Locks `m`, whatever a panicking holder left (the data stays usable).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A submitted request: its ticket, its replies, and a guard that cancels it when dropped
/// before its result arrived (the client went away).
pub struct Submitted {
    /// The request's number.
    pub ticket: u64,
    /// Its replies.
    pub replies: mpsc::UnboundedReceiver<Reply>,
    /// Cancels it on drop unless disarmed.
    pub guard: CancelGuard,
}

/// Cancels a request when dropped, unless it finished.
pub struct CancelGuard {
    ticket: u64,
    cancel: Option<mpsc::UnboundedSender<u64>>,
}

impl CancelGuard {
    /// The request finished: nothing to cancel.
    pub fn disarm(&mut self) {
        self.cancel = None;
    }
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        if let Some(tx) = self.cancel.take() {
            let _ = tx.send(self.ticket);
        }
    }
}

impl Shared {
    /// The shared state of a server that has not formed a session yet.
    pub fn new(
        config: ServeConfig,
        tokenizer: Arc<Tokenizer>,
        chat: Arc<ChatFormat>,
        ends: Vec<u32>,
    ) -> Shared {
        let view = PoolView::new(&config);
        let n_ctx = AtomicU32::new(config.defaults.n_ctx);
        Shared {
            config,
            tokenizer,
            chat,
            ends,
            grammars: std::sync::OnceLock::new(),
            phase: Mutex::new(ServerPhase::default()),
            input: Mutex::new(None),
            metrics: Metrics::new(),
            view: Mutex::new(view),
            tickets: AtomicU64::new(1),
            n_ctx,
        }
    }

    /// The context requests are judged against: the latest session plan's (a plan may
    /// lower the configured one to what its nodes' memory holds).
    pub fn n_ctx(&self) -> u32 {
        self.n_ctx.load(Ordering::Relaxed)
    }

    /// A session was planned with a context of `n_ctx` tokens.
    pub fn planned_context(&self, n_ctx: u32) {
        self.n_ctx.store(n_ctx, Ordering::Relaxed);
    }

    /// What a request leaves out, with the planned context.
    pub fn defaults(&self) -> crate::serve::params::Defaults {
        crate::serve::params::Defaults { n_ctx: self.n_ctx(), ..self.config.defaults.params() }
    }

    /// The lifecycle.
    pub fn phase(&self) -> MutexGuard<'_, ServerPhase> {
        lock(&self.phase)
    }

    /// The pool's view.
    pub fn view(&self) -> MutexGuard<'_, PoolView> {
        lock(&self.view)
    }

    /// A fresh request number.
    pub fn ticket(&self) -> u64 {
        self.tickets.fetch_add(1, Ordering::Relaxed)
    }

    /// The session `input` serves from now on (`None`: no session serves).
    pub fn set_input(&self, input: Option<SessionInput>) {
        *lock(&self.input) = input;
    }

    /// The serving session's input, if one serves or re-forms (a request taken while it
    /// re-forms waits for the re-formed session) and the server takes requests.
    fn serving_input(&self) -> Result<SessionInput, ApiError> {
        {
            let phase = self.phase();
            if !phase.serving() {
                phase.health()?;
            }
        }
        lock(&self.input).clone().ok_or_else(|| {
            ApiError::unavailable(ApiRefusal::SessionForming, "the session is forming")
        })
    }

    /// Hands `request` to the serving session, or says why none takes it (503).
    pub fn submit(&self, ticket: u64, request: Request) -> Result<Submitted, ApiError> {
        let input = self.serving_input()?;
        let (reply, replies) = mpsc::unbounded_channel();
        input.submit.send(Submission { ticket, request, reply }).map_err(|_| {
            ApiError::unavailable(
                ApiRefusal::SessionEnded,
                "the session ended; a new one is forming",
            )
        })?;
        let guard = CancelGuard { ticket, cancel: Some(input.cancel) };
        Ok(Submitted { ticket, replies, guard })
    }

    /// The serving session's slots.
    pub async fn slots(&self) -> Result<SlotsReport, ApiError> {
        let input = self.serving_input()?;
        let (tx, rx) = oneshot::channel();
        let gone = || ApiError::unavailable(ApiRefusal::SessionEnded, "the session ended");
        input.queries.send(tx).map_err(|_| gone())?;
        rx.await.map_err(|_| gone())
    }
}
