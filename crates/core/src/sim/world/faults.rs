//! Fault injection: the faults a seed draws, what each does to the world, and the broken
//! edge streams a vanished or failing stage leaves its neighbours.

use std::time::Duration;

use rand::RngExt;

use super::{DETECT, Ev, Fault, Link, Membership, OrchIn, World};
use crate::wire::EdgeId;
use crate::wire::evidence::PumpStopped;
use crate::wire::reason::{
    Component, ControlFault, FaultReason, MembershipLoss, RingFault, StreamFault,
};

impl World {
    pub(super) fn faults(&mut self) {
        let stages = self.nodes.len();
        for _ in 0..self.rng.random_range(0..=3u32) {
            let at = Duration::from_micros(self.rng.random_range(200_000..1_700_000));
            let i = self.rng.random_range(0..stages);
            let fault = match self.rng.random_range(0..9u32) {
                8 => {
                    // During boot (before the first fact is in).
                    let at = Duration::from_micros(self.rng.random_range(0..90));
                    self.at(at, Ev::Fault(Fault::BootFail(i)));
                    continue;
                }
                0 => Fault::Crash(i),
                1 => Fault::WorkerCrash(i),
                2 => Fault::Pause(i, Duration::from_millis(self.rng.random_range(10..200))),
                3 => Fault::Pause(i, Duration::from_millis(self.rng.random_range(600..2000))),
                4 => Fault::ControlDrop(i),
                5 => Fault::EdgeError(i),
                6 => Fault::Slow(i),
                _ => {
                    self.report.faults.push("operator_stop");
                    self.at(at, Ev::Orch(OrchIn::Stop));
                    continue;
                }
            };
            self.at(at, Ev::Fault(fault));
        }
        if self.rng.random_bool(0.5) {
            self.jitter = true;
            self.report.faults.push("timer_jitter");
        }
    }

    pub(super) fn fault(&mut self, f: Fault) {
        if self.torn_down {
            return;
        }
        let target = match f {
            Fault::BootFail(i)
            | Fault::Crash(i)
            | Fault::WorkerCrash(i)
            | Fault::Pause(i, _)
            | Fault::ControlDrop(i)
            | Fault::EdgeError(i)
            | Fault::Slow(i) => i,
        };
        if self.nodes[target].dead {
            return; // nothing happens to a node that is gone
        }
        // A slow consumer is no fault: the run must still complete.
        self.faulty |= !matches!(f, Fault::Slow(_));
        self.trace(format!("fault {f:?}"));
        // SWIM suspects the member, then declares it down (through the pool gate).
        let lost = |w: &mut World, i: usize| {
            let reason = FaultReason::Membership(MembershipLoss::NodeDown);
            w.possible.insert(reason);
            let d = DETECT.as_micros() as u64;
            w.send(Link::Orch, d / 4, d / 2, Ev::Orch(OrchIn::Member(i, Membership::Suspect)));
            w.send(Link::Orch, d / 2, d, Ev::Orch(OrchIn::Member(i, Membership::Down)));
        };
        match f {
            Fault::BootFail(i) => {
                // Before it is available: its worker does not come up in time.
                self.report.faults.push("boot_fault");
                if !self.nodes[i].boot.is_available() {
                    // Its worker never answers: the controller's init timeout fails it.
                    self.boot_faulted = true;
                    self.nodes[i].mute = true;
                }
            }
            Fault::Crash(i) => {
                self.report.faults.push("node_crash");
                if !self.nodes[i].dead {
                    self.nodes[i].dead = true;
                    lost(self, i);
                    self.neighbours_see_broken_streams(i);
                }
            }
            Fault::WorkerCrash(i) => {
                // The worker process dies: its controller reaps it, faults its rings and
                // restarts it.
                self.report.faults.push("worker_crash");
                self.possible.insert(FaultReason::Ring(RingFault::WorkerCrashed));
                self.possible.insert(FaultReason::Worker(crate::wire::reason::WorkerFatal::Exited));
                let g = self.nodes[i].wctl.generation();
                self.nodes[i].wctl.worker_exited(g, self.base + self.now);
                self.pump_wctl(i);
                self.neighbours_see_broken_streams(i);
            }
            Fault::Pause(i, d) => {
                self.report.faults.push(if d > DETECT { "long_pause" } else { "short_pause" });
                let until = self.now + d;
                self.nodes[i].paused_until = self.nodes[i].paused_until.max(until);
                if d > DETECT {
                    // SWIM declares it down; when it wakes its session is gone and it
                    // tears its stage down by itself (modelled as a node that is gone).
                    lost(self, i);
                    self.nodes[i].dead = true;
                    self.neighbours_see_broken_streams(i);
                } else if d > DETECT / 4 {
                    // Suspected, then refuted when it wakes.
                    let us = d.as_micros() as u64;
                    self.send(
                        Link::Orch,
                        us / 2,
                        us / 2,
                        Ev::Orch(OrchIn::Member(i, Membership::Suspect)),
                    );
                    self.send(
                        Link::Orch,
                        us,
                        us + 50_000,
                        Ev::Orch(OrchIn::Member(i, Membership::Up)),
                    );
                }
            }
            Fault::ControlDrop(i) => {
                self.report.faults.push("control_drop");
                let reason = FaultReason::Control(ControlFault::ConnectionLost);
                self.possible.insert(reason);
                self.send(Link::Orch, 100, 5000, Ev::Orch(OrchIn::NodeLost(i, reason)));
                // Without its session the node tears its stage down by itself.
                self.nodes[i].dead = true;
            }
            Fault::EdgeError(i) => {
                // The stream of node i's outbound edge breaks: both pumps end with it.
                self.report.faults.push("edge_error");
                self.possible.insert(FaultReason::Stream(StreamFault::WriteFailed));
                self.possible.insert(FaultReason::Stream(StreamFault::ReadFailed));
                let edge = self.nodes[i].stage.provisioning().map(|p| p.outbound.edge_id);
                let Some(edge) = edge else { return };
                self.pump_failed(i, edge, StreamFault::WriteFailed);
                if let Some(j) = self.next_of(i).filter(|&j| !self.nodes[j].dead) {
                    self.pump_failed(j, edge, StreamFault::ReadFailed);
                }
            }
            Fault::Slow(i) => {
                self.report.faults.push("slow_consumer");
                self.nodes[i].slow = self.rng.random_range(5..40);
            }
        }
    }

    /// Node `i`'s pump of `edge` ends with `fault` (if the edge has a ring there).
    fn pump_failed(&mut self, i: usize, edge: EdgeId, fault: StreamFault) {
        let n = &mut self.nodes[i];
        let ring = n.rings.iter().find(|(_, e)| **e == edge).map(|(r, _)| *r);
        if let Some(r) = ring
            && n.ended.insert(edge)
        {
            n.stage.plane_mut().pump_ended(edge, PumpStopped::observed(r), Some(fault));
            self.pump_node(i);
        }
    }

    /// The stages next to a vanished one see their edge streams break.
    fn neighbours_see_broken_streams(&mut self, i: usize) {
        for (j, reason, before) in [
            (self.prev_of(i), StreamFault::WriteFailed, true),
            (self.next_of(i), StreamFault::ReadFailed, false),
        ] {
            let Some(j) = j else { continue };
            if self.nodes[j].dead {
                continue;
            }
            let r = FaultReason::Stream(reason);
            self.possible.insert(r);
            // The edge between the two: node j's outbound (i after j) or inbound (i before).
            let edge = self.nodes[j]
                .stage
                .provisioning()
                .map(|p| if before { p.outbound.edge_id } else { p.inbound.edge_id });
            if let Some(edge) = edge {
                self.nodes[j].stage.plane_mut().stream_fault(
                    edge,
                    reason,
                    Component::EdgeEstablisher,
                );
            }
            self.pump_node(j);
        }
    }
}
