//! The node side of the worker (sans-IO): the worker controller.

pub mod fsm;

pub use fsm::{CtlConfig, CtlError, CtlOutput, CtlState, RestartPolicy, WorkerCtl};
