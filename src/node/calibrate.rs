//! The node's calibration at boot: memory read bandwidth and every weight format's product
//! rates at the worker's thread count and kernel tier ([`NodeSpeed`]), reported in
//! `node_available` for the planner's cost model (`specs/cost-model.md`).
//!
//! Measured once per host boot, kernel tier, thread count and binary, and kept in the
//! user's cache directory (`$XDG_CACHE_HOME/swactor/calibration/`, else
//! `~/.cache/swactor/calibration/`; entries of earlier host boots or binaries are removed): nodes that
//! share a host share the same hardware, so they report the same figures, and a node
//! booting beside others does not measure them while they measure too (an exclusive lock
//! on the cache serialises the first measurements). An unreadable or corrupt entry is
//! measured again; a directory that cannot be written only costs the measurement.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

use crate::bench::cache;
use crate::wire::{FormatRate, NodeSpeed};

/// Milliseconds of each product timing.
const PRODUCT_MS: f64 = 5.0;

/// Rows of the many-row (prefill) product.
const PREFILL_ROWS: usize = 128;

/// Measures this host at `threads` compute threads, with no cache.
pub fn measure(threads: u32) -> NodeSpeed {
    let t = threads.max(1) as usize;
    // A plain read loop, or the engine's own kernel streaming from memory: the faster. Both
    // read twice the last-level cache (some servers' hold hundreds of MiB: a smaller buffer
    // measures the cache, not the memory a model streams from).
    let per_thread = cache::read_bytes(t, cache::last_level_cache_bytes());
    let read = crate::bench::products::read_bandwidth_of(t, per_thread, 3)
        .max(crate::bench::products::stream_rate(t, per_thread));
    let formats = crate::bench::products::format_rates(threads, PREFILL_ROWS, PRODUCT_MS)
        .into_iter()
        .map(|(format, one, many)| FormatRate {
            format: format.name().to_string(),
            decode_mmacs: (one * 1e3).round() as u64,
            prefill_mmacs: (many * 1e3).round() as u64,
        })
        .collect();
    NodeSpeed {
        threads,
        isa: crate::model::engine::isa().name().to_string(),
        read_mbs: (read * 1e3).round() as u64,
        formats,
    }
}

/// This host's figures at `threads` threads: the cached ones, or measured (and cached).
pub fn host_speed(threads: u32) -> NodeSpeed {
    let Some(path) = cache_path(threads) else { return measure(threads) };
    let Some(dir) = path.parent() else { return measure(threads) };
    if std::fs::create_dir_all(dir).is_err() {
        return measure(threads);
    }
    let Ok(lock) = File::options().create(true).truncate(false).write(true).open(dir.join(".lock"))
    else {
        return measure(threads);
    };
    // Released when `lock` is dropped (or the process ends).
    let _held = lock.lock();
    if let Some(speed) = read_cached(&path, threads) {
        return speed;
    }
    let speed = measure(threads);
    prune(dir, &path);
    let _ = write_cached(&path, &speed);
    speed
}

/// Removes from `dir` the entries of earlier host boots, and those of the same tier and
/// thread count measured for another binary (`path` is this one's).
fn prune(dir: &std::path::Path, path: &std::path::Path) {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else { return };
    let (Some(boot), Some(kind)) = (name.get(..36), name.rsplit_once('-').map(|(k, _)| k)) else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let other = entry.file_name();
        let other = other.to_string_lossy();
        let stale = !other.starts_with(boot) || other.starts_with(&format!("{kind}-"));
        if other.ends_with(".json") && other != name && stale {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The cache file of `threads` threads on this host boot, tier and binary.
fn cache_path(threads: u32) -> Option<PathBuf> {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let exe = std::env::current_exe().ok()?;
    let modified = std::fs::metadata(exe).ok()?.modified().ok()?;
    let stamp = modified.duration_since(std::time::UNIX_EPOCH).ok()?.as_nanos();
    let isa = crate::model::engine::isa().name();
    let name = format!("{}-{isa}-t{threads}-{stamp:x}.json", boot.trim());
    let cache = match std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").filter(|d| !d.is_empty())?).join(".cache"),
    };
    Some(cache.join("swactor").join("calibration").join(name))
}

/// The cached figures, if readable and of `threads` threads.
fn read_cached(path: &std::path::Path, threads: u32) -> Option<NodeSpeed> {
    let text = std::fs::read_to_string(path).ok()?;
    let speed: NodeSpeed = serde_json::from_str(&text).ok()?;
    (speed.threads == threads && speed.read_mbs > 0 && !speed.formats.is_empty()).then_some(speed)
}

/// Writes the figures beside `path` and renames them onto it.
fn write_cached(path: &std::path::Path, speed: &NodeSpeed) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut f = File::create(&tmp)?;
    f.write_all(serde_json::to_string(speed).map_err(std::io::Error::other)?.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}
