//! Progress on a terminal: indicatif spinners and bars on stderr, drawn only when stderr is
//! a terminal and the command does not print JSON Lines. Otherwise the same calls go to a
//! hidden bar, so a command's logic never depends on whether progress is shown.

use std::borrow::Cow;
use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::cli::output::human_bytes;
use crate::events::Event;
use crate::wire::Sequence;

/// Whether progress is drawn: never with `--json`, never when stderr is not a terminal.
pub fn shown(json: bool, stderr_is_terminal: bool) -> bool {
    !json && stderr_is_terminal
}

/// One spinner or bar at a time, on stderr.
pub struct Progress {
    enabled: bool,
    bar: ProgressBar,
}

impl Progress {
    /// Progress for a command that prints JSON Lines when `json`: drawn only if it is not
    /// and stderr is a terminal.
    pub fn new(json: bool) -> Progress {
        Progress::with(shown(json, std::io::stderr().is_terminal()))
    }

    /// Progress that is drawn only when `enabled`.
    pub fn with(enabled: bool) -> Progress {
        Progress { enabled, bar: ProgressBar::hidden() }
    }

    fn replace(&mut self, bar: ProgressBar, style: ProgressStyle, message: Cow<'static, str>) {
        self.bar.finish_and_clear();
        let bar = if self.enabled { bar } else { ProgressBar::hidden() };
        bar.set_style(style);
        bar.set_message(message);
        if self.enabled {
            bar.enable_steady_tick(Duration::from_millis(100));
        }
        self.bar = bar;
    }

    /// A spinner with `message` and the time it has been spinning.
    pub fn spinner(&mut self, message: impl Into<Cow<'static, str>>) {
        let style = ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
        self.replace(ProgressBar::new_spinner(), style, message.into());
    }

    /// A bar of `len` steps with `message`.
    pub fn bar(&mut self, len: u64, message: impl Into<Cow<'static, str>>) {
        let style = ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        self.replace(ProgressBar::new(len), style, message.into());
        self.bar.set_length(len);
    }

    /// Changes the current message.
    pub fn message(&self, message: impl Into<Cow<'static, str>>) {
        self.bar.set_message(message);
    }

    /// Advances the current bar by one step.
    pub fn step(&self) {
        self.bar.inc(1);
    }

    /// Removes whatever is shown.
    pub fn clear(&mut self) {
        self.bar.finish_and_clear();
        self.bar = ProgressBar::hidden();
    }

    /// Runs `f` (which writes to the terminal) with the progress line out of the way.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        self.bar.suspend(f)
    }

    /// The current message (what a terminal would show).
    pub fn current(&self) -> String {
        self.bar.message()
    }

    /// The current bar's position and length (`None` for a spinner).
    pub fn counts(&self) -> (u64, Option<u64>) {
        (self.bar.position(), self.bar.length())
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        // An early return (an error) leaves no stale progress line above its message.
        self.bar.finish_and_clear();
    }
}

/// Which part of a run the progress shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunPhase {
    /// Waiting for the pool to converge.
    Pool,
    /// Stages download and load their weights.
    Weights,
    /// The prompt runs through the pipeline.
    Prefill,
    /// Tokens are streaming, or the run ended: nothing is drawn.
    Done,
}

/// The progress of one orchestrated run, driven by its event stream and the driver's
/// progress messages: a spinner while the pool converges, a bar over the stages while
/// weights download and load, a spinner during the prefill, nothing once tokens stream.
pub struct RunProgress {
    progress: Progress,
    phase: RunPhase,
}

impl RunProgress {
    /// A run's progress (see [`Progress::with`]).
    pub fn new(progress: Progress) -> RunProgress {
        let mut progress = progress;
        progress.spinner("waiting for the pool");
        RunProgress { progress, phase: RunPhase::Pool }
    }

    /// The phase shown.
    pub fn phase(&self) -> RunPhase {
        self.phase
    }

    /// What is shown now (message, and the bar's position and length).
    pub fn shown(&self) -> (String, (u64, Option<u64>)) {
        (self.progress.current(), self.progress.counts())
    }

    /// A progress message of the driver (pool convergence, provisioning); from the plan
    /// on, the run's events say more.
    pub fn message(&mut self, message: &str) {
        if self.phase == RunPhase::Pool {
            self.progress.message(message.to_string());
        }
    }

    /// One event of the run's stream.
    pub fn event(&mut self, event: &Event) {
        match event {
            Event::RunPlanned { stages, .. } if self.phase == RunPhase::Pool => {
                self.phase = RunPhase::Weights;
                self.progress.bar(u64::from(*stages), "loading weights");
            }
            Event::WeightsDownloadStarted { node_id, bytes, .. }
                if self.phase == RunPhase::Weights =>
            {
                let size = human_bytes(*bytes);
                self.progress.message(format!("node {node_id} downloads {size} of weights"));
            }
            Event::WeightsDownloading { node_id, bytes, total, .. }
                if self.phase == RunPhase::Weights =>
            {
                let pct = bytes.saturating_mul(100).checked_div(*total).unwrap_or(100);
                let (held, of) = (human_bytes(*bytes), human_bytes(*total));
                self.progress
                    .message(format!("node {node_id} downloads weights: {held} of {of} ({pct}%)"));
            }
            Event::WeightsDownloaded { node_id, .. } if self.phase == RunPhase::Weights => {
                self.progress.message(format!("node {node_id} downloaded its weights"));
            }
            Event::WeightsLoaded { node_id, .. } if self.phase == RunPhase::Weights => {
                self.progress.step();
                self.progress.message(format!("weights loaded on node {node_id}"));
            }
            Event::PromptInjected { sequence: Sequence(0), tokens, .. }
                if matches!(self.phase, RunPhase::Pool | RunPhase::Weights) =>
            {
                self.phase = RunPhase::Prefill;
                self.progress.spinner(format!("prefill of {tokens} prompt tokens"));
            }
            e if e.is_terminal_outcome() => self.done(),
            _ => {}
        }
    }

    /// Prints `line` on stderr, with the progress line out of its way.
    pub fn note(&self, line: &str) {
        self.progress.suspend(|| eprintln!("{line}"));
    }

    /// A token is about to be written: the progress line makes way for good.
    pub fn token(&mut self) {
        self.done();
    }

    /// Removes the progress line.
    pub fn done(&mut self) {
        self.phase = RunPhase::Done;
        self.progress.clear();
    }
}

mod pool_wait;
pub use pool_wait::PoolWait;

#[cfg(test)]
mod tests;
