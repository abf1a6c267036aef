//! The worker controller's driver: a tokio task that owns the worker child process, its
//! stdin and stdout, and the controller's timer, and executes what [`WorkerCtl`] asks.
//! It decides nothing itself.
//!
//! The child inherits the arena descriptor (named in its environment), has its stderr
//! inherited for logs, is killed if the driver is dropped, and is killed by the kernel if
//! the node dies (the worker sets a parent-death signal at start).
#![allow(clippy::disallowed_methods)] // the driver owns the clock

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command as ProcessCommand};
use tokio::sync::{Notify, mpsc, oneshot};

use super::fsm::{CtlConfig, CtlError, CtlOutput, CtlState, WorkerCtl};
use crate::arena::{ARENA_BYTES_ENV, ARENA_FD_ENV, Arena};
use crate::ring::Doorbells;
use crate::ring::doorbell::AsyncDoorbell;
use crate::ring::doorbell::DOORBELLS_ENV;
use crate::wire::{RingId, WorkerGeneration};
use crate::worker::protocol::{Command, Event, ShutdownMode, decode_line, encode_line};

/// How to run workers.
#[derive(Debug, Clone)]
pub struct WorkerDriverConfig {
    /// The `swactor` executable (its hidden `worker` subcommand is run).
    pub exe: PathBuf,
    /// Controller settings.
    pub ctl: CtlConfig,
    /// Compute threads per worker (passed as `SWACTOR_WORKER_THREADS`).
    pub threads: u32,
    /// Wake the worker and the pumps through doorbells (eventfds the worker inherits) rather
    /// than `RingReadable` / `RingWritable` lines; pumps register in
    /// [`WorkerDriver::pump_wakes`]. Off: the hints travel as lines (the protocol's
    /// portable form, which a worker without doorbells always uses).
    pub doorbells: bool,
}

/// Sends commands to the worker without waiting for the answer; see
/// [`WorkerDriver::notifier`].
#[derive(Debug, Clone)]
pub struct WorkerNotifier {
    requests: mpsc::UnboundedSender<Request>,
    bells: Option<Arc<Doorbells>>,
}

impl WorkerNotifier {
    /// Sends `cmd` through the controller; a refusal is dropped (a hint to a ring that is
    /// gone is harmless).
    pub fn notify(&self, cmd: Command) {
        let (tx, _rx) = oneshot::channel();
        let _ = self.requests.send(Request::Command(cmd, tx));
    }

    /// Wakes the worker for a ring whose pending bit was just set (`hint` is the
    /// `RingReadable` / `RingWritable` it stands for): through the doorbell, without a
    /// command line, when the worker has one.
    pub fn wake(&self, hint: Command) {
        match &self.bells {
            Some(b) => b.to_worker.ring(),
            None => self.notify(hint),
        }
    }
}

/// The pumps the worker's doorbell wakes, by ring.
pub type PumpWakes = Arc<Mutex<HashMap<RingId, Arc<Notify>>>>;

#[derive(Debug)]
enum Request {
    Command(Command, oneshot::Sender<Result<(), CtlError>>),
    Stop(ShutdownMode),
}

enum Line {
    Event(Event),
    Malformed,
    Eof,
}

/// A handle to the driver task.
#[derive(Debug)]
pub struct WorkerDriver {
    requests: mpsc::UnboundedSender<Request>,
    task: tokio::task::JoinHandle<()>,
    bells: Option<Arc<Doorbells>>,
    wakes: PumpWakes,
}

struct Running {
    generation: WorkerGeneration,
    child: Child,
    stdin: Option<ChildStdin>,
    exited: bool,
    eof: bool,
}

impl WorkerDriver {
    /// Starts the driver (and through it the first worker). Everything the controller
    /// reports (ready, routed events, synthesized ring faults, pump stops, stopped,
    /// failed) arrives on the returned receiver, which closes when the driver ends.
    pub fn start(
        config: WorkerDriverConfig,
        arena: Arc<Arena>,
    ) -> (WorkerDriver, mpsc::UnboundedReceiver<CtlOutput>) {
        let (requests, rx) = mpsc::unbounded_channel();
        let (events, events_rx) = mpsc::unbounded_channel();
        // Without doorbells (no eventfd), wake hints travel as command and event lines.
        let bells = config.doorbells.then(Doorbells::create).and_then(Result::ok).map(Arc::new);
        let wakes = PumpWakes::default();
        let bell = bells.clone().map(|b| (b, Arc::clone(&wakes)));
        let task = tokio::spawn(run(config, arena, bell, rx, events));
        (WorkerDriver { requests, task, bells, wakes }, events_rx)
    }

    /// The pumps the worker's doorbell wakes: a ring's pump registers here when it starts
    /// and leaves when the ring is detached.
    pub fn pump_wakes(&self) -> &PumpWakes {
        &self.wakes
    }

    /// Sends a command to the worker through the controller.
    pub async fn send(&self, cmd: Command) -> Result<(), CtlError> {
        let (tx, rx) = oneshot::channel();
        self.requests.send(Request::Command(cmd, tx)).map_err(|_| CtlError::NotRunning)?;
        rx.await.unwrap_or(Err(CtlError::NotRunning))
    }

    /// A cloneable handle that sends wake hints without waiting for the controller's answer
    /// (for network pumps on the hot path).
    pub fn notifier(&self) -> WorkerNotifier {
        WorkerNotifier { requests: self.requests.clone(), bells: self.bells.clone() }
    }

    /// Asks the worker to stop (graceful or aborting), escalating to kill on timeout.
    pub fn stop(&self, mode: ShutdownMode) {
        let _ = self.requests.send(Request::Stop(mode));
    }

    /// Waits for the driver to finish (after stop, failure, or the events receiver
    /// being dropped).
    pub async fn join(self) {
        let _ = self.task.await;
    }
}

/// Aborts the doorbell task when the driver ends.
struct AbortOnDrop(Option<tokio::task::JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(t) = &self.0 {
            t.abort();
        }
    }
}

/// Wakes every registered pump whenever the worker rings: each pump then clears its
/// ring's pending bit and reloads the cursors (a pump with nothing to do goes back to
/// sleep), so no ring is missed.
async fn answer_doorbell(bells: Arc<Doorbells>, wakes: PumpWakes) {
    let Ok(bell) = AsyncDoorbell::register(bells) else { return };
    while bell.rung().await.is_ok() {
        for w in wakes.lock().unwrap_or_else(|e| e.into_inner()).values() {
            w.notify_one();
        }
    }
}

async fn run(
    config: WorkerDriverConfig,
    arena: Arc<Arena>,
    bell: Option<(Arc<Doorbells>, PumpWakes)>,
    mut requests: mpsc::UnboundedReceiver<Request>,
    events: mpsc::UnboundedSender<CtlOutput>,
) {
    let bells = bell.as_ref().map(|(b, _)| Arc::clone(b));
    let _doorbell = AbortOnDrop(bell.map(|(b, w)| tokio::spawn(answer_doorbell(b, w))));
    let mut ctl = WorkerCtl::new(config.ctl);
    ctl.start();
    let (lines_tx, mut lines) = mpsc::unbounded_channel::<(WorkerGeneration, Line)>();
    let mut worker: Option<Running> = None;
    let mut requests_open = true;
    loop {
        while let Some(out) = ctl.poll_output() {
            match out {
                CtlOutput::Spawn { generation } => {
                    match spawn(&config, &arena, bells.as_deref(), generation, &lines_tx) {
                        Ok(running) => {
                            worker = Some(running);
                            ctl.spawned(Instant::now());
                        }
                        Err(e) => {
                            eprintln!("swactor: cannot start worker: {e}");
                            ctl.spawn_failed();
                        }
                    }
                }
                CtlOutput::ToWorker(cmd) => {
                    if let Some(stdin) = worker.as_mut().and_then(|w| w.stdin.as_mut()) {
                        // A write error means the worker is gone; its exit will follow.
                        let _ = stdin.write_all(encode_line(&cmd).as_bytes()).await;
                        let _ = stdin.flush().await;
                    }
                }
                CtlOutput::Kill => {
                    if let Some(w) = worker.as_mut() {
                        let _ = w.child.start_kill();
                    }
                }
                other => {
                    if let CtlOutput::Restarting { generation, after } = &other
                        && !after.is_zero()
                    {
                        eprintln!(
                            "swactor: the worker keeps exiting at start; generation {} in {after:?}",
                            generation.0
                        );
                    }
                    let _ = events.send(other);
                }
            }
        }
        if let Some(w) = worker.as_mut()
            && w.exited
            && w.eof
        {
            let generation = w.generation;
            worker = None;
            ctl.worker_exited(generation, Instant::now());
            continue;
        }
        let finished = matches!(ctl.state(), CtlState::Stopped | CtlState::Failed { .. });
        if finished && worker.is_none() {
            return;
        }
        if finished && let Some(w) = worker.as_mut() {
            // Failed with a live process (e.g. init timeout): make sure it dies.
            let _ = w.child.start_kill();
        }
        let deadline = ctl.poll_timeout();
        tokio::select! {
            req = requests.recv(), if requests_open => match req {
                Some(Request::Command(cmd, reply)) => {
                    let _ = reply.send(ctl.command(cmd));
                }
                Some(Request::Stop(mode)) => ctl.stop(Instant::now(), mode),
                None => {
                    requests_open = false;
                    ctl.stop(Instant::now(), ShutdownMode::AbortInFlight);
                }
            },
            Some((generation, line)) = lines.recv() => match line {
                Line::Event(e) => ctl.worker_event(generation, e, Instant::now()),
                Line::Malformed => ctl.malformed_event(generation, Instant::now()),
                Line::Eof => {
                    if let Some(w) = worker.as_mut().filter(|w| w.generation == generation) {
                        w.eof = true;
                    }
                }
            },
            status = wait_child(&mut worker) => {
                if let Some(w) = worker.as_mut() {
                    w.exited = true;
                    w.stdin = None;
                    // A worker that exits (or is killed) after a stop was asked for is no news.
                    let asked_to_stop = matches!(
                        ctl.state(),
                        CtlState::Stopping { .. } | CtlState::Killing | CtlState::Stopped
                    );
                    if let Ok(status) = status
                        && !status.success()
                        && !asked_to_stop
                    {
                        eprintln!("swactor: worker generation {} exited: {status}", w.generation);
                    }
                }
            },
            _ = sleep_until(deadline) => ctl.handle_timeout(Instant::now()),
        }
        if events.is_closed() && requests_open {
            requests_open = false;
            ctl.stop(Instant::now(), ShutdownMode::AbortInFlight);
        }
    }
}

async fn wait_child(worker: &mut Option<Running>) -> std::io::Result<std::process::ExitStatus> {
    match worker {
        Some(w) if !w.exited => w.child.wait().await,
        _ => std::future::pending().await,
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(tokio::time::Instant::from_std(d)).await,
        None => std::future::pending().await,
    }
}

fn spawn(
    config: &WorkerDriverConfig,
    arena: &Arena,
    bells: Option<&Doorbells>,
    generation: WorkerGeneration,
    lines: &mpsc::UnboundedSender<(WorkerGeneration, Line)>,
) -> std::io::Result<Running> {
    let mut command = ProcessCommand::new(&config.exe);
    if let Some(b) = bells {
        command.env(DOORBELLS_ENV, b.env_value());
    }
    let mut child = command
        .arg("worker")
        .env(ARENA_FD_ENV, arena.fd().to_string())
        .env(crate::worker::process::PARENT_ENV, std::process::id().to_string())
        .env(ARENA_BYTES_ENV, arena.len().to_string())
        .env("SWACTOR_WORKER_THREADS", config.threads.to_string())
        // candle sizes its compute pools from this variable.
        .env("RAYON_NUM_THREADS", config.threads.max(1).to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()?;
    let stdin = child.stdin.take();
    let stdout = child.stdout.take().ok_or_else(|| std::io::Error::other("no worker stdout"))?;
    let lines = lines.clone();
    tokio::spawn(async move {
        let mut reader = BufReader::new(stdout).lines();
        loop {
            let line = match reader.next_line().await {
                Ok(Some(text)) => match decode_line::<Event>(&text) {
                    Ok(e) => Line::Event(e),
                    Err(_) => Line::Malformed,
                },
                Ok(None) | Err(_) => Line::Eof,
            };
            let eof = matches!(line, Line::Eof);
            if lines.send((generation, line)).is_err() || eof {
                return;
            }
        }
    });
    Ok(Running { generation, child, stdin, exited: false, eof: false })
}
