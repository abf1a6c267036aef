//! The worker's inputs: commands read from stdin by a reader thread, and the rings the
//! node's doorbell (or short polling) says have something; the wait between them.

use std::io::BufRead;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::{Input, Slot, Worker};
use crate::ring::Doorbells;
use crate::wire::RingId;
use crate::worker::protocol::{Command, Event, LineError, MAX_LINE, ShutdownMode, decode_line};

/// The next input: polls for up to `spin` (consuming ingress rings that received bytes
/// meanwhile), then blocks: on the doorbell when the node gave one (commands and rings
/// both ring it), else on the command channel.
#[allow(clippy::disallowed_methods)] // the process loop is a driver: it owns the clock
pub(super) fn next_input(rx: &mpsc::Receiver<Input>, worker: &mut Worker, spin: Duration) -> Input {
    let Some(bells) = worker.bells.clone() else {
        spin_for_input(rx, worker, spin);
        return rx.recv().unwrap_or(Input::Eof);
    };
    loop {
        if let Some(input) = spin_for_input(rx, worker, spin) {
            return input;
        }
        match rx.try_recv() {
            Ok(input) => return input,
            Err(mpsc::TryRecvError::Disconnected) => return Input::Eof,
            Err(mpsc::TryRecvError::Empty) => {}
        }
        if worker.wake_rings() {
            return Input::Flush;
        }
        if bells.to_worker.wait().is_err() {
            return Input::Eof;
        }
    }
}

/// Polls commands and ingress rings for up to `spin`; `Some` when there is something to
/// handle.
#[allow(clippy::disallowed_methods)] // the process loop is a driver: it owns the clock
fn spin_for_input(
    rx: &mpsc::Receiver<Input>,
    worker: &mut Worker,
    spin: Duration,
) -> Option<Input> {
    if !spin.is_zero() {
        let mut deadline = Instant::now() + spin;
        while Instant::now() < deadline {
            match rx.try_recv() {
                Ok(input) => return Some(input),
                Err(mpsc::TryRecvError::Disconnected) => return Some(Input::Eof),
                Err(mpsc::TryRecvError::Empty) => {}
            }
            if worker.poll_ready_ingress() {
                if !worker.events.is_empty() {
                    // Report what was loaded without waiting for the next command.
                    return Some(Input::Flush);
                }
                deadline = Instant::now() + spin;
            }
            std::hint::spin_loop();
        }
    }
    None
}

pub(super) fn read_commands(
    tx: mpsc::Sender<Input>,
    abort: Arc<AtomicBool>,
    bells: Option<Arc<Doorbells>>,
) {
    let stdin = std::io::stdin();
    let mut reader = stdin.lock();
    let mut line = Vec::new();
    loop {
        line.clear();
        let read =
            std::io::Read::take(&mut reader, MAX_LINE as u64 + 1).read_until(b'\n', &mut line);
        let input = match read {
            Ok(0) | Err(_) => Input::Eof,
            Ok(_) if line.len() > MAX_LINE && !line.ends_with(b"\n") => {
                Input::Bad(LineError::TooLong)
            }
            Ok(_) => {
                let text = String::from_utf8_lossy(&line);
                match decode_line::<Command>(text.trim_end()) {
                    Ok(cmd) => {
                        if matches!(
                            cmd,
                            Command::ShutdownWorker { mode: ShutdownMode::AbortInFlight }
                                | Command::AbortStep
                        ) {
                            abort.store(true, Ordering::SeqCst);
                        }
                        Input::Command(cmd)
                    }
                    Err(e) => Input::Bad(e),
                }
            }
        };
        let stop = matches!(input, Input::Eof | Input::Bad(_));
        let sent = tx.send(input).is_ok();
        if let Some(b) = &bells {
            b.to_worker.ring();
        }
        if !sent || stop {
            return;
        }
    }
}

impl Worker {
    /// Handles the rings whose pending bit the node set before it rang the doorbell:
    /// ingress rings with committed bytes, egress rings with freed space. Returns whether
    /// there is anything to report.
    pub(super) fn wake_rings(&mut self) -> bool {
        let before = self.events.len();
        let mut readable = Vec::new();
        let mut writable = false;
        for (id, slot) in self.rings.iter_mut() {
            match slot {
                Slot::Ingress { consumer, .. } if consumer.readable_pending() => {
                    let _ = consumer.on_readable();
                    readable.push(*id);
                }
                Slot::Egress { producer, .. } if producer.writable_pending() => {
                    let _ = producer.on_writable();
                    writable = true;
                }
                _ => {}
            }
        }
        for id in readable {
            self.poll_ingress(id);
        }
        if writable && self.active.is_some() {
            self.drive_step();
        }
        self.events.len() > before || (self.active.is_none() && !self.pending.is_empty())
    }
    /// Rings the node's doorbell in place of the wake-hint lines, when it gave one.
    pub(super) fn ring_node(&mut self) {
        let Some(bells) = &self.bells else { return };
        let before = self.events.len();
        self.events
            .retain(|e| !matches!(e, Event::RingReadable { .. } | Event::RingWritable { .. }));
        if self.events.len() != before {
            bells.to_node.ring();
        }
    }
    /// Consumes every ingress ring that has committed bytes the worker has not read yet;
    /// returns whether any made progress.
    pub(super) fn poll_ready_ingress(&mut self) -> bool {
        let ready: Vec<RingId> = self
            .rings
            .iter_mut()
            .filter_map(|(id, slot)| match slot {
                Slot::Ingress { consumer, parser }
                    if !parser.is_faulted() && !parser.is_closed() =>
                {
                    consumer.available().is_ok_and(|n| n > 0).then_some(*id)
                }
                _ => None,
            })
            .collect();
        let before = self.events.len();
        for id in &ready {
            self.poll_ingress(*id);
        }
        self.events.len() > before
    }
}
