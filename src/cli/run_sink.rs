//! Where a run's tokens and events go: stdout (text, or JSON Lines with `--json`; a batch
//! job's `result` and `error` lines), the `--events` file, and progress on a terminal.

use std::io::Write;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use color_eyre::eyre::eyre;
use serde::Serialize;
use serde_json::value::RawValue;

use super::config::run::PrintConfig;
use super::exit::{CliError, ExitCode};
use super::output::Output;
use super::progress::{PoolWait, Progress, RunProgress};
use super::requests::{LineError, RequestId};
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
        if existing.as_ref().is_some_and(|m| m.file_type().is_fifo()) {
            return Self::open_fifo(path);
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
    /// A batch job's requests (its output is JSON Lines results).
    batch: Option<BatchOut>,
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
    /// A sink printing as `print` says; `batch` holds a batch job's request ids as given.
    pub fn new(
        out: &'a mut Output,
        print: PrintConfig,
        batch: Option<Vec<RequestId>>,
        events: Option<&'a mut EventsFile>,
    ) -> CliSink<'a> {
        CliSink {
            batch: batch.map(|ids| BatchOut {
                reported: vec![false; ids.len()],
                ids,
                stream: print.stream,
            }),
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

    /// A batch job's requests that have no line yet each get an `error` line naming
    /// `reason` (the run ended before it reached them).
    pub fn fail_unreported(&mut self, reason: &str) {
        let Some(batch) = &mut self.batch else { return };
        let mut r = Ok(());
        for (id, reported) in batch.ids.iter().zip(&mut batch.reported) {
            if !std::mem::replace(reported, true) {
                let line = BatchError {
                    id,
                    reason,
                    message: None,
                    prompt_tokens: 0,
                    completion_tokens: 0,
                };
                r = r.and_then(|()| self.out.json("error", &line));
            }
        }
        let r = r.and_then(|()| self.out.flush());
        self.keep(r);
    }
}

/// A batch job's requests as the sink prints them.
struct BatchOut {
    /// Each request's id as given.
    ids: Vec<RequestId>,
    /// Whether each request has its line.
    reported: Vec<bool>,
    /// `--stream`.
    stream: bool,
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
        if let Some(batch) = &self.batch {
            if let Some(rid) = batch.ids.get(request).filter(|_| batch.stream) {
                let line = BatchToken { id: rid, token: Some(id), text };
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

    fn text(&mut self, request: usize, text: &str) {
        let Some(batch) = &self.batch else {
            // A prompt run's tail: a `text` line with `--json` (the text mode prints it
            // with the summary).
            if self.json {
                let r = super::generate_cmd::write_tail(self.out, true, text)
                    .and_then(|()| self.out.flush());
                self.keep(r);
            }
            return;
        };
        if let Some(rid) = batch.ids.get(request).filter(|_| batch.stream) {
            let line = BatchToken { id: rid, token: None, text };
            let r = self.out.json("text", &line).and_then(|()| self.out.flush());
            self.keep(r);
        }
    }

    fn result(&mut self, request: usize, result: &RequestResult) {
        let Some(batch) = &mut self.batch else { return };
        let Some(id) = batch.ids.get(request) else { return };
        if std::mem::replace(&mut batch.reported[request], true) {
            return;
        }
        let r = write_result(self.out, id, result).and_then(|()| self.out.flush());
        self.keep(r);
    }
}

#[derive(Serialize)]
struct BatchToken<'a> {
    id: &'a RawValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    token: Option<u32>,
    text: &'a str,
}

#[derive(Serialize)]
struct BatchResult<'a> {
    id: &'a RawValue,
    #[serde(flatten)]
    result: &'a RequestResult,
}

#[derive(Serialize)]
struct BatchError<'a> {
    id: &'a RawValue,
    reason: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a str>,
    prompt_tokens: u32,
    completion_tokens: u32,
}

/// One `result` line, or an `error` line for a request that failed; `id` as given.
fn write_result(out: &mut Output, id: &RawValue, r: &RequestResult) -> std::io::Result<()> {
    match &r.error {
        None => out.json("result", &BatchResult { id, result: r }),
        Some(reason) => out.json(
            "error",
            &BatchError {
                id,
                reason,
                message: None,
                prompt_tokens: r.prompt_tokens,
                completion_tokens: r.completion_tokens,
            },
        ),
    }
}

/// A batch job's lines that could not become requests, each as an `error` line, first.
pub fn write_line_errors<'e>(
    out: &mut Output,
    errors: impl Iterator<Item = &'e LineError>,
) -> std::io::Result<()> {
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

/// How long `--events` waits for a reader to open a FIFO before it gives up.
const FIFO_READER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

impl EventsFile {
    /// Opens a FIFO for writing once a reader has it open: waits up to
    /// [`FIFO_READER_WAIT`] for one, then fails with `events_no_reader` (a plain open
    /// would block forever, before the run even starts).
    fn open_fifo(path: &Path) -> Result<EventsFile, CliError> {
        use rustix::fs::{Mode, OFlags};
        #[allow(clippy::disallowed_methods)] // a wait with a deadline, not a measurement
        let deadline = std::time::Instant::now() + FIFO_READER_WAIT;
        let flags = OFlags::WRONLY | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let fd = loop {
            match rustix::fs::open(path, flags, Mode::empty()) {
                Ok(fd) => break fd,
                #[allow(clippy::disallowed_methods)] // the deadline above
                Err(rustix::io::Errno::NXIO) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                Err(rustix::io::Errno::NXIO) => {
                    return Err(CliError::new(
                        ExitCode::Input,
                        "events_no_reader",
                        eyre!(
                            "--events {}: a FIFO that nobody reads (waited {} s for a reader)",
                            path.display(),
                            FIFO_READER_WAIT.as_secs()
                        ),
                    )
                    .with_suggestion("start its reader first, or give --events a file"));
                }
                Err(e) => return Err(events_error(path, e.into())),
            }
        };
        // Writes block again from now on, as on any file.
        let blocking = rustix::fs::fcntl_getfl(&fd).map(|f| f - OFlags::NONBLOCK);
        if let Err(e) = blocking.and_then(|f| rustix::fs::fcntl_setfl(&fd, f)) {
            return Err(events_error(path, e.into()));
        }
        Ok(EventsFile {
            path: path.to_path_buf(),
            file: std::io::BufWriter::new(std::fs::File::from(fd)),
            error: None,
        })
    }
}
