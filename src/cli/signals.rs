//! How long-running commands learn to stop: SIGINT / SIGTERM ([`StopSignal`],
//! [`stop_signal`]), the end of standard input, or a closed standard output.

use crate::wire::reason::OperatorStop;

/// The command's one SIGINT / SIGTERM listener, installed before anything starts: a
/// signal at any moment after that is kept for whoever waits for it, in whichever phase
/// (starting nodes, waiting for the pool, running), so none is lost between phases.
/// Later signals are counted, so a second one can cut a graceful stop short.
#[derive(Clone)]
pub struct StopSignal(
    tokio::sync::watch::Receiver<Option<OperatorStop>>,
    tokio::sync::watch::Receiver<u32>,
);

impl StopSignal {
    /// Installs the listener; call inside the runtime, first thing.
    pub fn install() -> StopSignal {
        use tokio::signal::unix::{SignalKind, signal};
        let (tx, rx) = tokio::sync::watch::channel(None);
        let (count_tx, count) = tokio::sync::watch::channel(0u32);
        if let (Ok(mut int), Ok(mut term)) =
            (signal(SignalKind::interrupt()), signal(SignalKind::terminate()))
        {
            tokio::spawn(async move {
                loop {
                    let how = tokio::select! {
                        _ = int.recv() => OperatorStop::Interrupt,
                        _ = term.recv() => OperatorStop::Terminate,
                    };
                    // The first signal is the one reported; later ones change nothing.
                    tx.send_if_modified(|s| s.is_none().then(|| *s = Some(how)).is_some());
                    count_tx.send_modify(|n| *n = n.saturating_add(1));
                }
            });
        }
        StopSignal(rx, count)
    }

    /// Resolves once a second signal has arrived (the operator insists).
    pub async fn again(mut self) {
        if self.1.wait_for(|n| *n >= 2).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Resolves once a signal has arrived (at once if one already has).
    pub async fn stopped(mut self) -> OperatorStop {
        match self.0.wait_for(Option::is_some).await {
            Ok(how) => how.unwrap_or(OperatorStop::Interrupt),
            Err(_) => std::future::pending().await,
        }
    }
}

/// SIGINT / SIGTERM, or the end of standard input when `eof` (the supervisor is gone).
pub async fn stop_signal_or_eof(eof: bool) {
    if !eof {
        return stop_signal().await;
    }
    let stdin_closed = async {
        use tokio::io::AsyncReadExt;
        let mut stdin = tokio::io::stdin();
        let mut buf = [0u8; 64];
        while matches!(stdin.read(&mut buf).await, Ok(n) if n > 0) {}
    };
    tokio::select! {
        _ = stop_signal() => {}
        _ = stdin_closed => {}
    }
}

/// Resolves on the first SIGINT or SIGTERM (never, where they cannot be listened to).
pub async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) {
        (Ok(mut int), Ok(mut term)) => {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
        }
        _ => std::future::pending::<()>().await,
    }
}

/// Resolves once standard output is gone: its reader closed a pipe or a socket (for
/// example `swactor pool watch | head -1`), so nobody reads what the command would print.
/// Never resolves for a file or a terminal that stays open.
pub async fn stdout_closed() {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let watcher = std::thread::Builder::new().name("stdout-watch".into()).spawn(move || {
        use rustix::event::{PollFd, PollFlags, poll};
        let stdout = std::io::stdout();
        loop {
            let mut fds = [PollFd::new(&stdout, PollFlags::empty())];
            match poll(&mut fds, None) {
                Ok(_) if fds[0].revents().intersects(PollFlags::ERR | PollFlags::HUP) => {
                    let _ = tx.send(());
                    return;
                }
                Err(rustix::io::Errno::INTR) => {}
                // An invalid descriptor, or nothing this can watch.
                Ok(_) | Err(_) => return,
            }
        }
    });
    if watcher.is_err() || rx.await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// SIGINT / SIGTERM for a command that computes on its own thread: a listener thread (with
/// a runtime of its own) records the first signal, which the command reads between steps.
/// Installed first thing; the listener replaces an inherited "ignore" disposition, so a
/// command started with SIGINT ignored (a background job of a shell) still stops on it.
#[derive(Clone, Default)]
pub struct StopFlag(std::sync::Arc<std::sync::Mutex<Option<OperatorStop>>>);

impl StopFlag {
    /// Starts listening; returns at once.
    pub fn install() -> StopFlag {
        let flag = StopFlag::default();
        let seen = flag.clone();
        let (ready, installed) = std::sync::mpsc::channel::<()>();
        let listener = std::thread::Builder::new().name("signals".into()).spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
                let _ = ready.send(());
                return;
            };
            rt.block_on(async move {
                let stop = StopSignal::install();
                let _ = ready.send(());
                let how = stop.stopped().await;
                *seen.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(how);
            });
        });
        if listener.is_ok() {
            // A signal from now on is caught, not lost to the default disposition.
            let _ = installed.recv();
        }
        flag
    }

    /// The first signal received, if any.
    pub fn stopped(&self) -> Option<OperatorStop> {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}
