//! The node's weights cache as a directory of files: what it holds (`swactor cache ls`) and
//! removing it (`swactor cache clear`). Only files named as the downloader names them are
//! listed or removed (`<sha256>.gguf`, `<sha256>.<key>.ranges.gguf`, their `.part` and
//! `.json` companions); nothing else in the directory, and nothing below it, is touched.
//! The cache directory itself may be a symbolic link to a directory; a link inside it is
//! not the cache's (it is never followed, listed or removed).

use std::path::{Path, PathBuf};

use serde::Serialize;

/// A cache operation's failure, with its stable reason.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The cache path exists and is not a directory (`cache_not_a_directory`).
    #[error("{0} is not a directory")]
    NotADirectory(PathBuf),
    /// Reading or removing failed (`io`).
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
}

impl CacheError {
    /// The stable reason code.
    pub fn reason(&self) -> &'static str {
        match self {
            CacheError::NotADirectory(_) => "cache_not_a_directory",
            CacheError::Io(..) => "io",
        }
    }
}

/// One cached weights file (complete or partial).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CacheEntry {
    /// The file's name in the cache directory.
    pub file: String,
    /// The whole model file's sha256 (from the name).
    pub sha256: String,
    /// The URL it was downloaded from, when recorded.
    pub url: Option<String>,
    /// `whole` or `ranges` (a sparse file holding only a stage's ranges).
    pub kind: &'static str,
    /// Whether the download finished and was verified (`false`: a `.part` to resume).
    pub complete: bool,
    /// The file's length (a sparse file has the whole model's length).
    pub size: u64,
    /// Bytes it occupies on disk.
    pub disk_bytes: u64,
    /// The byte ranges a sparse file holds, as `[offset, len]`, when recorded.
    pub ranges: Option<Vec<[u64; 2]>>,
}

/// What a cached file's name says: `(sha256, kind, complete)`, or `None` for a file that
/// is not the cache's.
fn parse_name(name: &str) -> Option<(&str, &'static str, bool)> {
    let (stem, complete) = match name.strip_suffix(".part") {
        Some(s) => (s, false),
        None => (name, true),
    };
    let stem = stem.strip_suffix(".gguf")?;
    let is_hex = |s: &str, n: usize| s.len() == n && s.chars().all(|c| c.is_ascii_hexdigit());
    if is_hex(stem, 64) {
        return Some((stem, "whole", complete));
    }
    let (sha, key) = stem.strip_suffix(".ranges")?.split_once('.')?;
    (is_hex(sha, 64) && is_hex(key, 16)).then_some((sha, "ranges", complete))
}

/// Whether `name` is a file the cache owns (a cached file, a partial one, or the record
/// beside either).
fn owned(name: &str) -> bool {
    parse_name(name.strip_suffix(".json").unwrap_or(name)).is_some()
}

/// The regular files of `dir` (sorted by name), or none if it does not exist. `dir` may be
/// a symbolic link to a directory (as `node boot --cache` accepts it); a link inside it is
/// never followed, listed or removed.
fn files(dir: &Path) -> Result<Vec<(String, std::fs::Metadata)>, CacheError> {
    match std::fs::metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // A link to nothing is not a missing cache: say what it is.
            if std::fs::symlink_metadata(dir).is_ok() {
                return Err(CacheError::NotADirectory(dir.to_path_buf()));
            }
            return Ok(Vec::new());
        }
        Err(e) => return Err(CacheError::Io(dir.to_path_buf(), e)),
        Ok(m) if !m.is_dir() => return Err(CacheError::NotADirectory(dir.to_path_buf())),
        Ok(_) => {}
    }
    let io = |e| CacheError::Io(dir.to_path_buf(), e);
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        // The entry's own metadata: a link is a link here, whatever it points at.
        let meta = entry.metadata().map_err(io)?;
        if let Some(name) = entry.file_name().to_str()
            && meta.is_file()
        {
            out.push((name.to_string(), meta));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Lists the weights cached in `dir` (a missing directory holds nothing).
pub fn list(dir: &Path) -> Result<Vec<CacheEntry>, CacheError> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    for (name, meta) in files(dir)? {
        let Some((sha256, kind, complete)) = parse_name(&name) else { continue };
        let cached = dir.join(name.strip_suffix(".part").unwrap_or(&name));
        let record: Option<serde_json::Value> = std::fs::read(super::weights::sidecar(&cached))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        let field = |k: &str| record.as_ref().and_then(|r| r.get(k)).cloned();
        out.push(CacheEntry {
            file: name.clone(),
            sha256: sha256.to_ascii_lowercase(),
            url: field("url").and_then(|v| v.as_str().map(str::to_string)),
            kind,
            complete,
            size: meta.len(),
            disk_bytes: meta.blocks() * 512,
            ranges: field("ranges").and_then(|v| serde_json::from_value(v).ok()),
        });
    }
    Ok(out)
}

/// Removes every file of the cache in `dir` (cached, partial, and their records); returns
/// the removed files' names. Any other file is left alone.
pub fn clear(dir: &Path) -> Result<Vec<String>, CacheError> {
    let mut removed = Vec::new();
    for (name, _) in files(dir)? {
        if owned(&name) {
            let path = dir.join(&name);
            std::fs::remove_file(&path).map_err(|e| CacheError::Io(path, e))?;
            removed.push(name);
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::{owned, parse_name};

    #[test]
    fn only_the_downloaders_names_belong_to_the_cache() {
        let sha = "a".repeat(64);
        assert_eq!(parse_name(&format!("{sha}.gguf")), Some((&sha[..], "whole", true)));
        let sparse = format!("{sha}.0123456789abcdef.ranges.gguf.part");
        assert_eq!(parse_name(&sparse), Some((&sha[..], "ranges", false)));
        assert!(owned(&format!("{sha}.gguf.json")));
        for other in ["model.gguf", "notes.txt", &format!("{sha}.bin"), &format!("x{sha}.gguf")] {
            assert!(!owned(other), "{other}");
        }
    }
}
