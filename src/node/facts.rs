//! What a node reports of its host in `node_available`: the memory it can give a stage and
//! the device its stage computes on.

use crate::worker::protocol::Backend;

/// The host's available memory (`MemAvailable` of `/proc/meminfo`), if it can be read.
pub(crate) fn host_memory_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// A device as pool files and `node_available` name it: `cpu` or `cuda:N`.
pub fn device_label(device: Backend) -> String {
    match device {
        Backend::Cpu | Backend::CpuFaulty { .. } => "cpu".to_string(),
        Backend::Cuda { ordinal } => format!("cuda:{ordinal}"),
    }
}
