//! Exit codes and the error type every command returns.
//!
//! | code | meaning |
//! |-----:|---------|
//! | 0    | success |
//! | 1    | internal error (a bug, or an unexpected system failure) |
//! | 2    | usage error (bad flags or arguments) |
//! | 3    | input error (a file that cannot be read or is invalid: model, pool, output path) |
//! | 4    | plan rejected (the request cannot be planned; the reason is printed) |
//! | 5    | model failed (weights could not be loaded, or computing failed) |
//! | 6    | node boot failed (the boot fault is printed) |
//! | 7    | run faulted (the first fault's reason and component are printed) |
//! | 8    | pool not ready in time (which nodes are missing is printed) |
//! | 9    | run stopped by the operator (Ctrl-C or SIGTERM), torn down |

use color_eyre::eyre::eyre;
use color_eyre::{Report, Section};
use std::fmt;

use crate::orchestrator::driver::OrchestrateError;
use crate::wire::reason::{FaultReason, OperatorStop, Timeout};

/// The documented, stable exit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitCode {
    /// Success.
    Success = 0,
    /// Internal error.
    Internal = 1,
    /// Usage error.
    Usage = 2,
    /// Invalid or unreadable input.
    Input = 3,
    /// The planner rejected the request.
    PlanRejected = 4,
    /// The model could not be loaded or computed.
    ModelFailed = 5,
    /// A node could not boot (the typed boot fault is printed).
    BootFailed = 6,
    /// The run faulted (its first fault is printed).
    RunFaulted = 7,
    /// The pool did not become ready in time.
    PoolNotReady = 8,
    /// The operator stopped the run.
    Stopped = 9,
}

impl ExitCode {
    /// The numeric code.
    pub const fn code(self) -> u8 {
        self as u8
    }
}

/// Where a command's help sends the reader for the exit codes (listed once, in the top
/// level's help and its man page).
pub const SEE_EXIT_CODES: &str = "Exit codes: see `swactor --help` or swactor(1).";

/// Help text listing the exit codes (the top level's `--help` and man page).
pub const EXIT_CODES_HELP: &str = "\
Exit codes:
  0  success
  1  internal error
  2  usage error (bad flags or arguments)
  3  input error (unreadable or invalid model, pool or output file)
  4  plan rejected (the reason is printed; `--json` prints it as an `error` line)
  5  model failed (weights could not be loaded, or computing failed)
  6  node boot failed (the typed boot fault is printed)
  7  run faulted (the first fault's reason and component are printed)
  8  pool not ready in time (the missing nodes are printed)
  9  run stopped by the operator (Ctrl-C or SIGTERM) and torn down";

/// A command's failure: the exit code, a stable reason code and the report to print.
pub struct CliError {
    /// The exit code.
    pub code: ExitCode,
    /// Stable reason code (`too_many_stages`, `not_gguf`, ...).
    pub reason: String,
    /// The human report (message, causes, suggestion).
    pub report: Report,
    /// The command already told the user on stderr (a run's summary line): no `Error:`
    /// block repeats it (the `--json` error line is still written).
    pub told: bool,
}

impl CliError {
    /// An error with an exit code, a reason code and a report.
    pub fn new(code: ExitCode, reason: impl Into<String>, report: impl Into<Report>) -> CliError {
        CliError { code, reason: reason.into(), report: report.into(), told: false }
    }

    /// Marks the error as already told on stderr (see [`CliError::told`]).
    pub fn already_told(mut self) -> CliError {
        self.told = true;
        self
    }

    /// An internal error.
    pub fn internal(report: impl Into<Report>) -> CliError {
        CliError::new(ExitCode::Internal, "internal", report)
    }

    /// Adds a suggestion line to the report.
    pub fn with_suggestion(mut self, hint: &str) -> CliError {
        use color_eyre::Section;
        self.report = self.report.suggestion(hint.to_string());
        self
    }

    /// Whether the failure is only a closed stdout (the reader went away).
    pub fn is_broken_pipe(&self) -> bool {
        self.report.chain().any(|e| {
            e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
        })
    }
}

impl fmt::Debug for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} ({}): {:?}", self.code, self.reason, self.report)
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::internal(e)
    }
}

/// Maps a model-reading error onto an input error with a hint.
pub fn model_error(path: &std::path::Path, e: crate::model::ModelError) -> CliError {
    let hint = match &e {
        crate::model::ModelError::Io { .. } => "check the path and its permissions",
        crate::model::ModelError::NotGguf { .. } => {
            "the file must be a GGUF model (llama.cpp's format)"
        }
        crate::model::ModelError::Truncated { .. } => {
            "the file is incomplete or corrupt: download or copy it again"
        }
        crate::model::ModelError::Malformed { .. } => {
            "the file is corrupt (its header breaks the GGUF format): download or copy it again"
        }
        crate::model::ModelError::UnsupportedTensorType { .. } => {
            "re-quantize the model to a supported type (F32, F16, BF16, Q4_0..Q8_1, K-quants)"
        }
        _ => "the file's metadata does not describe a supported transformer",
    };
    let code = e.code();
    CliError::new(
        ExitCode::Input,
        code,
        eyre!(e).wrap_err(format!("cannot use model {}", path.display())).suggestion(hint),
    )
}

/// Maps a plan rejection onto its exit code.
pub fn plan_error(e: crate::planner::PlanError) -> CliError {
    let reason = e.reason.as_str().to_string();
    CliError::new(ExitCode::PlanRejected, reason, eyre!(e).wrap_err("the run cannot be planned"))
}

/// The reason of a pool that was not ready in time (`timeout.pool_readiness`).
pub const POOL_NOT_READY: FaultReason = FaultReason::Timeout(Timeout::PoolReadiness);

/// The reason of a command the operator stopped (`operator.interrupt`).
pub const INTERRUPTED: FaultReason = FaultReason::Operator(OperatorStop::Interrupt);

/// Maps an orchestrator error onto its exit code.
pub fn orchestrate_error(e: OrchestrateError) -> CliError {
    match e {
        OrchestrateError::Setup(m) => CliError::new(ExitCode::Input, "setup_failed", eyre!(m)),
        OrchestrateError::PoolTimeout(..) => {
            CliError::new(ExitCode::PoolNotReady, POOL_NOT_READY.to_string(), eyre!(e))
                .with_suggestion("are the nodes running with this orchestrator's endpoint id?")
        }
        OrchestrateError::PoolRefused(..) => {
            CliError::new(ExitCode::PoolNotReady, "pool_refused", eyre!(e))
                .with_suggestion("are the nodes running with this orchestrator's endpoint id?")
        }
        OrchestrateError::Plan(p) => plan_error(p),
        OrchestrateError::DraftModel(m) => {
            CliError::new(ExitCode::Usage, "bad_draft_model", eyre!(m))
        }
        OrchestrateError::GaveUp { reason, .. } => {
            CliError::new(ExitCode::RunFaulted, reason.to_string(), eyre!(e))
                .with_suggestion("check the weights the URL serves against the --model file")
        }
        OrchestrateError::Stopped => {
            CliError::new(ExitCode::Stopped, INTERRUPTED.to_string(), eyre!(e))
        }
    }
}
