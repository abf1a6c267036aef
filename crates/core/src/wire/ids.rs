//! Identifier newtypes.
//!
//! Every identifier is a `u64` newtype (`StageIndex` is a `u32`) so that an edge id can
//! never be passed where a ring id is expected. They serialize as plain numbers.

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! id_newtype {
    ($(#[$doc:meta])* $name:ident($inner:ty)) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub $inner);

        impl $name {
            /// The raw numeric value.
            pub const fn get(self) -> $inner {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        impl From<$inner> for $name {
            fn from(value: $inner) -> Self {
                Self(value)
            }
        }
    };
}

id_newtype!(
    /// One run of a model over a pool, from planning to teardown.
    RunId(u64)
);
id_newtype!(
    /// A node (host process) of the pool, or the orchestrator, as named in the pool file.
    NodeId(u64)
);
id_newtype!(
    /// A role configured in a worker (one per provisioned stage).
    RoleId(u64)
);
id_newtype!(
    /// An edge of a run's pipeline. Minted only by the planner; unique within a run.
    EdgeId(u64)
);
id_newtype!(
    /// A ring in a node's arena. Never reused during the node's lifetime.
    RingId(u64)
);
id_newtype!(
    /// One object (token ids or activations) travelling over an edge.
    ObjectId(u64)
);
id_newtype!(
    /// Position in the token stream: 0 is the prefill, every later sequence one decode step.
    Sequence(u64)
);
id_newtype!(
    /// One step executed by a worker.
    StepId(u64)
);
id_newtype!(
    /// A worker process incarnation; bumped on every restart, invalidating old handles.
    WorkerGeneration(u64)
);
id_newtype!(
    /// Position of a stage in the pipeline, `0..stage_count`.
    StageIndex(u32)
);
id_newtype!(
    /// A role's input or output port (0 for the single input and output of a stage).
    PortId(u32)
);

impl Sequence {
    /// The sequence that must follow this one.
    pub const fn next(self) -> Sequence {
        Sequence(self.0 + 1)
    }
}
