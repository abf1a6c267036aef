//! The worker as the local user of the stage's rings (the edge executor attaches rings
//! through it).

use crate::edge::executor::{AttachFault, Hint, Ring, RingUser};
use crate::events::Direction;
use crate::wire::evidence::WorkerQuiet;
use crate::wire::reason::{Component, RingFault};
use crate::wire::{EdgeId, ObjectSpec, PortId, RingId, RingLayout};
use crate::worker::protocol::{Command, UninstallReason};
use crate::workerctl::{WorkerDriver, WorkerNotifier};

/// The worker as the rings' local user: rings are installed by command (it answers
/// `RingInstalled`), uninstalled by command (it answers `RingQuiesced`), and woken with
/// `RingReadable` / `RingWritable`.
pub(super) struct WorkerUser<'a> {
    pub(super) worker: &'a mut WorkerDriver,
    pub(super) notifier: &'a WorkerNotifier,
}

impl RingUser for WorkerUser<'_> {
    async fn attach(
        &mut self,
        edge_id: EdgeId,
        direction: Direction,
        layout: RingLayout,
        object: ObjectSpec,
        _ring: Ring,
    ) -> Result<bool, AttachFault> {
        let install = Command::InstallRing {
            ring_id: layout.ring_id,
            edge_id,
            port_id: PortId(0),
            direction,
            layout,
            object_spec: object,
        };
        match self.worker.send(install).await {
            Ok(()) => Ok(false),
            Err(_) => Err((RingFault::WorkerCrashed, Component::WorkerCtl)),
        }
    }

    fn detach(&mut self, ring_id: RingId) -> Option<WorkerQuiet> {
        self.worker.pump_wakes().lock().unwrap_or_else(|e| e.into_inner()).remove(&ring_id);
        self.notifier.notify(Command::UninstallRing { ring_id, reason: UninstallReason::Stop });
        None
    }

    fn drained_hint(&self, ring_id: RingId) -> Hint {
        let notifier = self.notifier.clone();
        Box::new(move || notifier.wake(Command::RingWritable { ring_id }))
    }

    fn filled_hint(&self, ring_id: RingId) -> Hint {
        let notifier = self.notifier.clone();
        Box::new(move || notifier.wake(Command::RingReadable { ring_id }))
    }

    fn pump_started(&mut self, ring_id: RingId, wake: std::sync::Arc<tokio::sync::Notify>) {
        self.worker.pump_wakes().lock().unwrap_or_else(|e| e.into_inner()).insert(ring_id, wake);
    }
}
