//! The session's own tests: what it asks of its driver as requests come and go, as a run
//! faults, re-forms and ends. The simulation (`crate::sim`) drives it through whole pools.
