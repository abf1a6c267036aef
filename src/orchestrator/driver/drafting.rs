//! A session's draft model, run off the reactor (drafting as data). The session's
//! scheduler emits [`DraftJob`]s; this file carries them to the draft model, which a
//! thread of its own owns and runs in order, and brings each [`DraftAnswer`] back to the
//! run loop as an input. The reactor never computes a draft: HTTP, SSE and the pumps go
//! on while the model steps.
//!
//! The model is loaded by the role that uses it: an orchestrator's session at its start,
//! a server once for all its sessions (they take turns with one model and its caches;
//! each run gets answers of its own).

use std::path::PathBuf;

use tokio::sync::{mpsc, oneshot};

use crate::model::ModelFacts;
use crate::model::draft::{DraftModel, DraftTarget};
use crate::orchestrator::session::Session;
use crate::speculate::{Draft, DraftAnswer, DraftJob};

/// The draft model a session drafts with (`--draft-model FILE --draft-threads N`): a
/// path, checked against the target's vocabulary when the config is made and loaded by
/// the role that uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DraftModelConfig {
    /// The model file.
    pub path: PathBuf,
    /// Threads it computes on.
    pub threads: u32,
}

/// Where one job's answer goes: the run that asked.
type Reply = mpsc::UnboundedSender<DraftAnswer>;

/// A loaded draft model on a thread of its own, taking jobs in order. Clones share the
/// model (a server's sessions, one after another); the thread ends with the last clone.
#[derive(Debug, Clone)]
pub struct Drafter {
    jobs: std::sync::mpsc::Sender<(DraftJob, Reply)>,
    /// One drafted token's cost relative to a target's step (its share of the weights).
    pub(super) step_cost: f64,
}

impl Drafter {
    /// Loads `config`'s model as a draft for the model `target` describes, with caches
    /// of `max_seq_len` positions, on the thread that will run it (never the reactor's).
    /// A model that cannot load, or has another vocabulary, is refused (its message).
    pub async fn load(
        config: &DraftModelConfig,
        target: &ModelFacts,
        max_seq_len: u32,
    ) -> Result<Drafter, String> {
        let (config, target) = (config.clone(), DraftTarget::of(target));
        let (loaded, load) = oneshot::channel();
        let (jobs, queue) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("swactor-draft".into())
            .spawn(move || {
                let threads = config.threads;
                match DraftModel::load(&config.path, max_seq_len, threads, &target) {
                    Ok(model) => {
                        let _ = loaded.send(Ok(model.step_cost()));
                        serve(model, &queue);
                    }
                    Err(e) => {
                        let _ = loaded.send(Err(e.to_string()));
                    }
                }
            })
            .map_err(|e| format!("the draft model's thread: {e}"))?;
        let step_cost = load.await.map_err(|_| "the draft model's thread ended".to_string())??;
        Ok(Drafter { jobs, step_cost })
    }
}

/// Runs every job of `queue` on `model`, in order, answering each request to the run
/// that asked (a run that ended dropped its receiver: its answer goes nowhere). A
/// drafter that panicked drafts nothing from then on (its answers are empty).
fn serve(mut model: DraftModel, queue: &std::sync::mpsc::Receiver<(DraftJob, Reply)>) {
    let mut broken = false;
    while let Ok((job, reply)) = queue.recv() {
        let answer = if broken {
            empty_answer(&job)
        } else {
            let run = std::panic::AssertUnwindSafe(|| crate::speculate::run_job(&mut model, &job));
            std::panic::catch_unwind(run).unwrap_or_else(|_| {
                eprintln!("swactor: the draft model failed and drafts no more");
                broken = true;
                empty_answer(&job)
            })
        };
        if let Some(answer) = answer {
            let _ = reply.send(answer);
        }
    }
}

/// A request's answer drafting nothing (a warm has none).
fn empty_answer(job: &DraftJob) -> Option<DraftAnswer> {
    match job {
        DraftJob::Warm { .. } => None,
        DraftJob::Draft(r) => Some(DraftAnswer {
            id: r.id,
            drafts: vec![Vec::new(); r.asks.len()],
            seconds_per_token: None,
        }),
    }
}

/// One run's side of the drafter: its jobs go to the model's thread, its answers come
/// back on a channel of its own.
#[derive(Debug)]
pub(super) struct Drafting {
    drafter: Drafter,
    replies: Reply,
    answers: mpsc::UnboundedReceiver<DraftAnswer>,
}

impl Drafting {
    /// A run that drafts with `drafter` (its session drafts from outside:
    /// [`crate::orchestrator::session::SessionConfig::draft_step_cost`]).
    pub(super) fn start(drafter: &Drafter) -> Drafting {
        let (replies, answers) = mpsc::unbounded_channel();
        Drafting { drafter: drafter.clone(), replies, answers }
    }

    /// The drafter it sends to (a re-formed session's next run drafts with it too).
    pub(super) fn drafter(&self) -> &Drafter {
        &self.drafter
    }
}

/// Hands the session's new jobs to the model's thread, where the run drafts with a model.
/// Should the thread be gone, a request is answered at once with no drafts (the output
/// is the same).
pub(super) fn send_jobs(drafting: &mut Option<Drafting>, session: &mut Session<'_>) {
    let Some(d) = drafting.as_mut() else { return };
    while let Some(job) = session.poll_draft_job() {
        if let Err(std::sync::mpsc::SendError((job, reply))) =
            d.drafter.jobs.send((job, d.replies.clone()))
            && let Some(answer) = empty_answer(&job)
        {
            let _ = reply.send(answer);
        }
    }
}

/// The next answer for the run, if it drafts with a model (else never).
pub(super) async fn next_answer(drafting: &mut Option<Drafting>) -> DraftAnswer {
    match drafting.as_mut() {
        // The run holds a sender itself: the channel never closes under it.
        Some(d) => match d.answers.recv().await {
            Some(answer) => answer,
            None => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
}
