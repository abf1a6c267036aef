//! Where a run's tokens and events go: stdout (text, or JSON Lines with `--json`; a batch
//! job's `result` and `error` lines), the `--events` file, and progress on a terminal.

use std::io::Write;
use std::path::{Path, PathBuf};

use color_eyre::eyre::eyre;
use serde::Serialize;

use super::config::run::PrintConfig;
use super::exit::{CliError, ExitCode};
use super::output::Output;
use super::progress::{PoolWait, Progress, RunProgress};
use super::requests::LineError;
use crate::events::EventLine;
use crate::orchestrator::driver::RunSink;
use crate::orchestrator::requests::RequestResult;

/// The `--events` file, created before anything starts.
pub struct EventsFile {
    /// The file's path.
    pub path: PathBuf,
    /// The open file.
    file: std::io::BufWriter<std::fs::File>,
    /// The first write error (the run goes on; it is reported at the end).
    pub error: Option<std::io::Error>,
}

impl EventsFile {
    /// Creates the file, or says which file cannot be written and why. An existing regular
    /// file is never overwritten (`events_file_exists`); a device or a pipe that exists
    /// (`/dev/stderr`, a FIFO) is written to.
    pub fn create(path: &Path) -> Result<EventsFile, CliError> {
        let exists = || {
            CliError::new(
                ExitCode::Input,
                "events_file_exists",
                eyre!("--events {}: the file exists and is never overwritten", path.display()),
            )
            .with_suggestion("remove it, or give --events a path that does not exist yet")
        };
        let existing = std::fs::metadata(path).ok();
        if existing.as_ref().is_some_and(std::fs::Metadata::is_file) {
            return Err(exists());
        }
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(existing.is_none())
            .open(path)
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    return exists();
                }
                events_error(path, e)
                    .with_suggestion("give --events a file in an existing, writable directory")
            })?;
        Ok(EventsFile {
            path: path.to_path_buf(),
            file: std::io::BufWriter::new(file),
            error: None,
        })
    }

    /// Writes one line; the first error is kept in `error`.
    pub fn write(&mut self, json: &str) {
        if self.error.is_none()
            && let Err(e) = writeln!(self.file, "{json}").and_then(|()| self.file.flush())
        {
            self.error = Some(e);
        }
    }
}

/// A write error of the `--events` file.
pub fn events_error(path: &Path, e: std::io::Error) -> CliError {
    CliError::new(
        ExitCode::Input,
        "io",
        eyre!(e).wrap_err(format!("cannot write events to {}", path.display())),
    )
}

#[derive(Serialize)]
struct TokenLine<'a> {
    index: usize,
    id: u32,
    text: &'a str,
}

/// Writes tokens and events where the flags say; progress on a terminal.
pub struct CliSink<'a> {
    out: &'a mut Output,
    json: bool,
    /// A batch job's request ids (its output is JSON Lines results), and `--stream`.
    batch: Option<(Vec<String>, bool)>,
    events: Option<&'a mut EventsFile>,
    /// The run's progress on stderr.
    pub progress: RunProgress,
    count: usize,
    /// What the pool run waits for, said on stderr (text mode only).
    pool_wait: Option<PoolWait>,
    /// The first write error on stdout (the run goes on; it is reported at the end).
    pub error: Option<std::io::Error>,
}

impl<'a> CliSink<'a> {
    /// A sink printing as `print` says; `batch` holds a batch job's request ids.
    pub fn new(
        out: &'a mut Output,
        print: PrintConfig,
        batch: Option<Vec<String>>,
        events: Option<&'a mut EventsFile>,
    ) -> CliSink<'a> {
        CliSink {
            batch: batch.map(|ids| (ids, print.stream)),
            json: print.json,
            events,
            progress: RunProgress::new(Progress::new(print.json)),
            count: 0,
            pool_wait: None,
            error: None,
            out,
        }
    }

    /// Says on stderr which of `nodes` the run still waits for and why, as the pool
    /// converges (text mode only: with `--json` the events say it).
    pub fn waiting_for(mut self, nodes: impl IntoIterator<Item = crate::wire::NodeId>) -> Self {
        if !self.json {
            self.pool_wait = Some(PoolWait::new(nodes));
        }
        self
    }

    fn keep(&mut self, r: std::io::Result<()>) {
        if let Err(e) = r {
            self.error.get_or_insert(e);
        }
    }
}

impl RunSink for CliSink<'_> {
    fn event(&mut self, line: &EventLine) {
        self.progress.event(&line.event);
        if let Some(said) = self.pool_wait.as_mut().and_then(|w| w.event(&line.event)) {
            self.progress.note(&said);
        }
        let json = line.to_json();
        if let Some(f) = self.events.as_mut() {
            f.write(&json);
        }
        if self.json {
            let r = self.out.line(json).and_then(|()| self.out.flush());
            self.keep(r);
        }
    }

    fn token(&mut self, request: usize, id: u32, text: &str) {
        self.progress.token();
        if let Some((ids, stream)) = &self.batch {
            if *stream {
                let line = BatchToken { id: &ids[request], token: id, text };
                let r = self.out.json("token", &line).and_then(|()| self.out.flush());
                self.keep(r);
            }
            return;
        }
        let r = if self.json {
            self.out.json("token", &TokenLine { index: self.count, id, text })
        } else {
            self.out.write_str(text)
        }
        .and_then(|()| self.out.flush());
        self.count += 1;
        self.keep(r);
    }

    fn progress(&mut self, message: &str) {
        self.progress.message(message);
        if let Some(said) = self.pool_wait.as_mut().and_then(|w| w.message(message)) {
            self.progress.note(&said);
        }
    }

    fn result(&mut self, _request: usize, result: &RequestResult) {
        if self.batch.is_none() {
            return;
        }
        let r = write_result(self.out, result).and_then(|()| self.out.flush());
        self.keep(r);
    }
}

#[derive(Serialize)]
struct BatchToken<'a> {
    id: &'a str,
    token: u32,
    text: &'a str,
}

#[derive(Serialize)]
struct BatchError<'a> {
    id: &'a str,
    reason: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a str>,
    prompt_tokens: u32,
    completion_tokens: u32,
}

/// One `result` line, or an `error` line for a request that failed.
fn write_result(out: &mut Output, r: &RequestResult) -> std::io::Result<()> {
    match &r.error {
        None => out.json("result", r),
        Some(reason) => out.json(
            "error",
            &BatchError {
                id: &r.id,
                reason,
                message: None,
                prompt_tokens: r.prompt_tokens,
                completion_tokens: r.completion_tokens,
            },
        ),
    }
}

/// A batch job's lines that could not become requests, each as an `error` line, first.
pub fn write_line_errors(out: &mut Output, errors: &[LineError]) -> std::io::Result<()> {
    for e in errors {
        out.json(
            "error",
            &BatchError {
                id: &e.id,
                reason: e.reason,
                message: Some(&e.message),
                prompt_tokens: 0,
                completion_tokens: 0,
            },
        )?;
    }
    out.flush()
}
