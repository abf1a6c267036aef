//! `swactor cache ls|clear`: the weights a node downloaded into its cache directory.

use color_eyre::eyre::eyre;
use serde::Serialize;

use super::args::CacheArgs;
use super::exit::{CliError, ExitCode};
use super::output::{Output, human_bytes, table};
use crate::stage::cache::{CacheError, clear as clear_cache, list};

/// The typed CLI error of a cache failure (exit 3, its reason).
fn cache_error(e: CacheError) -> CliError {
    let reason = e.reason();
    CliError::new(ExitCode::Input, reason, eyre!(e).wrap_err("cannot use the weights cache"))
}

/// `swactor cache ls`: one row (or `cache_entry` line) per cached or partial file.
pub fn ls(args: &CacheArgs, out: &mut Output) -> Result<(), CliError> {
    let dir = args.cache.clone().unwrap_or_else(super::node_cmd::default_cache);
    let entries = list(&dir).map_err(cache_error)?;
    if args.output.json {
        for e in &entries {
            out.json("cache_entry", e)?;
        }
        return Ok(());
    }
    if entries.is_empty() {
        out.line(format!("{}: no cached weights", dir.display()))?;
        return Ok(());
    }
    let mut rows =
        vec![["file", "kind", "state", "size", "on disk", "url"].map(String::from).to_vec()];
    for e in &entries {
        rows.push(vec![
            e.file.clone(),
            e.kind.to_string(),
            if e.complete { "complete" } else { "partial" }.to_string(),
            human_bytes(e.size),
            human_bytes(e.disk_bytes),
            e.url.clone().unwrap_or_else(|| "-".into()),
        ]);
    }
    for line in table(&rows) {
        out.line(line)?;
    }
    Ok(())
}

#[derive(Serialize)]
struct Cleared<'a> {
    dir: String,
    removed: &'a [String],
}

/// `swactor cache clear`: removes the cache's own files, nothing else.
pub fn clear(args: &CacheArgs, out: &mut Output) -> Result<(), CliError> {
    let dir = args.cache.clone().unwrap_or_else(super::node_cmd::default_cache);
    let removed = clear_cache(&dir).map_err(cache_error)?;
    if args.output.json {
        out.json("cache_cleared", &Cleared { dir: dir.display().to_string(), removed: &removed })?;
    } else {
        out.line(format!("removed {} files from {}", removed.len(), dir.display()))?;
    }
    Ok(())
}
