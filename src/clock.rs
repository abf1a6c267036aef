//! The host's clocks, read only by drivers (a mechanism: pure modules take time as an
//! argument).
#![allow(clippy::disallowed_methods)] // the one place the host clock is read

/// The host's `CLOCK_MONOTONIC` in microseconds: one clock for every process of a host, so
/// `origin_us` stamps of events from different processes compare.
pub fn monotonic_us() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec as u64) * 1_000_000 + (t.tv_nsec as u64) / 1_000
}

/// The host's wall clock in seconds since the Unix epoch (what chat templates print as
/// today's date).
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}
