//! How much memory a bandwidth measurement reads: twice the host's last-level cache (read
//! from sysfs), within bounds, so that it measures the memory a model streams from and not
//! a cache. Used by the node's calibration and `bench products`.

/// Bytes each thread reads for the bandwidth at least: far beyond a core's own caches.
const READ_BYTES_PER_THREAD: usize = 48 << 20;

/// The most the bandwidth reads in all (a host whose last-level cache is larger than half
/// of this reads this much).
const READ_BYTES_MAX: usize = 1 << 30;

/// Bytes each of `threads` threads reads for the bandwidth, with a last-level cache of
/// `llc` bytes: twice the cache in all, at least [`READ_BYTES_PER_THREAD`] each, at most
/// [`READ_BYTES_MAX`] in all.
pub fn read_bytes(threads: usize, llc: Option<usize>) -> usize {
    let threads = threads.max(1);
    let beyond = llc.map_or(0, |c| 2 * c).min(READ_BYTES_MAX) / threads;
    beyond.max(READ_BYTES_PER_THREAD)
}

/// The largest cache of CPU 0 (sysfs), bytes; `None` where the kernel does not say.
pub fn last_level_cache_bytes() -> Option<usize> {
    let dir = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?;
    dir.filter_map(Result::ok)
        .filter_map(|e| std::fs::read_to_string(e.path().join("size")).ok())
        .filter_map(|s| parse_cache_size(s.trim()))
        .max()
}

/// A sysfs cache size (`491520K`, `2048K`, `32M`), bytes.
pub fn parse_cache_size(s: &str) -> Option<usize> {
    let (digits, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: usize = digits.parse().ok()?;
    let scale = match unit {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_sizes_parse_as_sysfs_writes_them() {
        assert_eq!(parse_cache_size("491520K"), Some(480 << 20));
        assert_eq!(parse_cache_size("32M"), Some(32 << 20));
        assert_eq!(parse_cache_size("64"), Some(64));
        assert_eq!(parse_cache_size("big"), None);
        assert_eq!(parse_cache_size("12X"), None);
    }

    #[test]
    fn the_bandwidth_reads_twice_the_last_level_cache_within_its_bounds() {
        // A 480 MiB cache (a large server's): 960 MiB in all, over the threads.
        assert_eq!(read_bytes(1, Some(480 << 20)), 960 << 20);
        assert_eq!(read_bytes(2, Some(480 << 20)), 480 << 20);
        // A desktop's 16 MiB, or none known: 48 MiB a thread; 32 MiB: 64.
        assert_eq!(read_bytes(1, Some(16 << 20)), READ_BYTES_PER_THREAD);
        assert_eq!(read_bytes(1, Some(32 << 20)), 64 << 20);
        assert_eq!(read_bytes(4, None), READ_BYTES_PER_THREAD);
        // Never more than 1 GiB in all, unless the threads' minimum says more.
        assert_eq!(read_bytes(1, Some(4 << 30)), READ_BYTES_MAX);
    }
}
