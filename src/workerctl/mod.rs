//! GpuWorkerCtl: the node side of the worker process.
//!
//! [`fsm`] is the sans-IO controller (spawn, initialize with a timeout, serialize commands,
//! route events, crash handling, restart, graceful stop with escalation to kill);
//! [`driver`] is the tokio task that owns the child process and shuttles IO for it.

pub use swactor_core::workerctl::*;

pub mod driver;

pub use driver::{WorkerDriver, WorkerDriverConfig, WorkerNotifier};
