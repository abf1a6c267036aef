//! The byte ranges of a GGUF file that one stage needs (the header, and the data of the
//! tensors its blocks, embedding and head bind: [`crate::model::engine::stage_tensors`]),
//! and their digests, computed by the orchestrator from its own copy of the file and put
//! in the plan, so each node downloads only its ranges and checks each one. The digests
//! are remembered ([`DigestMemo`]) and computed off the async runtime
//! ([`attach_stage_ranges_async`]): a session's re-formation neither hashes the file again
//! nor holds up the server's thread.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use sha2::{Digest, Sha256};

use crate::model::gguf::GgufFile;
use crate::stage::weights::WeightsError;
use crate::wire::reason::WeightsFailure;
use crate::wire::{LayerRange, RunPlan, WeightRange, WeightSource};

fn fail(reason: WeightsFailure, detail: impl Into<String>) -> WeightsError {
    WeightsError { reason, detail: detail.into() }
}

/// A GGUF file's header, as the ranges need it.
pub struct ModelLayout {
    file: GgufFile,
    facts: crate::model::ModelFacts,
}

impl ModelLayout {
    /// Reads the header of the GGUF file at `path` (`weights.parse_failed` if it is not one).
    pub fn read(path: &Path) -> Result<ModelLayout, WeightsError> {
        let parse = |e: crate::model::ModelError| fail(WeightsFailure::ParseFailed, e.to_string());
        let file = GgufFile::open(path).map_err(parse)?;
        let facts = file.facts().map_err(parse)?;
        Ok(ModelLayout { file, facts })
    }

    /// The file's length.
    pub fn len(&self) -> u64 {
        self.file.len()
    }

    /// Whether the file is empty (never, for a parsed GGUF).
    pub fn is_empty(&self) -> bool {
        self.file.is_empty()
    }

    /// The `(offset, len)` extents a stage of `layers` needs, sorted and merged where they
    /// touch: the header (everything before the tensor data) and each bound tensor's data.
    pub fn stage_extents(
        &self,
        layers: LayerRange,
        embedding: bool,
        head: bool,
    ) -> Result<Vec<(u64, u64)>, WeightsError> {
        let c = self.file.header();
        let mut extents = vec![(0, c.tensor_data_offset)];
        let names = crate::model::engine::stage_tensors(&self.facts, layers, embedding, head);
        for name in names {
            let info = c.tensors.get(&name).ok_or_else(|| {
                fail(WeightsFailure::MissingTensor, format!("tensor `{name}` is missing"))
            })?;
            let (start, len) = c
                .extent(&name, info)
                .map_err(|e| fail(WeightsFailure::ParseFailed, e.to_string()))?;
            let start = u64::try_from(start)
                .ok()
                .filter(|s| s.checked_add(len).is_some_and(|end| end <= self.file.len()))
                .ok_or_else(|| {
                    fail(WeightsFailure::ParseFailed, format!("tensor `{name}` lies outside"))
                })?;
            extents.push((start, len));
        }
        Ok(merge(extents))
    }
}

/// Sorts `extents` and merges those that overlap or touch; drops empty ones.
fn merge(mut extents: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    extents.retain(|e| e.1 > 0);
    extents.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(extents.len());
    for (start, len) in extents {
        match out.last_mut() {
            Some(last) if start <= last.0 + last.1 => {
                last.1 = last.1.max(start + len - last.0);
            }
            _ => out.push((start, len)),
        }
    }
    out
}

/// The identity of a file's contents as the memo trusts it: its path, size and
/// modification time (a file rewritten in place gets a new time).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct FileKey {
    path: std::path::PathBuf,
    len: u64,
    modified: Option<std::time::SystemTime>,
}

/// What the memo holds of one file: for each extent start, the hash states after the
/// lengths hashed from it (finalized for a digest, or carried on for a longer extent).
type FileStates = HashMap<u64, Vec<(u64, Sha256)>>;

/// Hash states kept per extent start (the longest ones stay).
const STATES_PER_START: usize = 16;

/// Remembered extent digests, so a session's re-formations hash a model file once: an
/// extent hashed before costs nothing, and one that starts where an earlier one started
/// and goes on past it hashes only the bytes past it. Remembers the latest file per path.
#[derive(Debug, Default)]
pub struct DigestMemo {
    files: Mutex<HashMap<FileKey, FileStates>>,
    read: AtomicU64,
}

impl DigestMemo {
    /// The process's memo (the orchestrator's planning uses it).
    pub fn global() -> &'static DigestMemo {
        static MEMO: OnceLock<DigestMemo> = OnceLock::new();
        MEMO.get_or_init(DigestMemo::default)
    }

    /// Bytes read from files to hash them, in all.
    pub fn bytes_read(&self) -> u64 {
        self.read.load(Ordering::Relaxed)
    }

    /// The sha256 of each extent of the file at `path` (`weights.size_mismatch` for an
    /// extent past its end), from what is remembered where it can.
    pub fn digest_extents(
        &self,
        path: &Path,
        extents: &[(u64, u64)],
    ) -> Result<Vec<WeightRange>, WeightsError> {
        let io = |e: std::io::Error| {
            fail(WeightsFailure::DownloadFailed, format!("{}: {e}", path.display()))
        };
        let mut file = std::fs::File::open(path).map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        let key =
            FileKey { path: path.to_path_buf(), len: meta.len(), modified: meta.modified().ok() };
        let mut out = Vec::with_capacity(extents.len());
        for &(offset, len) in extents {
            let (from, state) = self.longest_prefix(&key, offset, len);
            let state = self.hash_on(&mut file, path, state, offset + from, len - from)?;
            self.remember(&key, offset, len, &state);
            let sha256 = state.finalize().iter().map(|b| format!("{b:02x}")).collect();
            out.push(WeightRange { offset, len, sha256 });
        }
        Ok(out)
    }

    /// The longest remembered hash of bytes from `offset`, at most `len` of them.
    fn longest_prefix(&self, key: &FileKey, offset: u64, len: u64) -> (u64, Sha256) {
        let files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        files
            .get(key)
            .and_then(|f| f.get(&offset))
            .and_then(|states| states.iter().filter(|(l, _)| *l <= len).max_by_key(|(l, _)| *l))
            .map_or((0, Sha256::new()), |(l, h)| (*l, h.clone()))
    }

    /// Feeds `len` bytes of `file` from `at` into `state`.
    fn hash_on(
        &self,
        file: &mut std::fs::File,
        path: &Path,
        mut state: Sha256,
        at: u64,
        len: u64,
    ) -> Result<Sha256, WeightsError> {
        let io = |e: std::io::Error| {
            fail(WeightsFailure::DownloadFailed, format!("{}: {e}", path.display()))
        };
        file.seek(SeekFrom::Start(at)).map_err(io)?;
        let mut buf = vec![0u8; 1 << 20];
        let mut take = (&mut *file).take(len);
        let mut seen = 0u64;
        loop {
            let n = take.read(&mut buf).map_err(io)?;
            if n == 0 {
                break;
            }
            state.update(&buf[..n]);
            seen += n as u64;
            self.read.fetch_add(n as u64, Ordering::Relaxed);
        }
        if seen != len {
            return Err(fail(
                WeightsFailure::SizeMismatch,
                format!("{} is truncated", path.display()),
            ));
        }
        Ok(state)
    }

    fn remember(&self, key: &FileKey, offset: u64, len: u64, state: &Sha256) {
        let mut files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        // A file rewritten since is another file: what was known of it goes.
        files.retain(|k, _| k.path != key.path || k == key);
        let states = files.entry(key.clone()).or_default().entry(offset).or_default();
        if states.iter().any(|(l, _)| *l == len) {
            return;
        }
        states.push((len, state.clone()));
        if states.len() > STATES_PER_START {
            states.sort_by_key(|(l, _)| std::cmp::Reverse(*l));
            states.truncate(STATES_PER_START);
        }
    }
}

/// The sha256 of each extent of the file at `path` (remembered in [`DigestMemo::global`]).
pub fn digest_extents(
    path: &Path,
    extents: &[(u64, u64)],
) -> Result<Vec<WeightRange>, WeightsError> {
    DigestMemo::global().digest_extents(path, extents)
}

/// For a plan whose weights come from a URL, computes each stage's ranges and their
/// digests from `model` (the orchestrator's copy of the file) and puts them in the plan,
/// so each node downloads only what its stage loads. A local source is left as it is.
/// Reads the file: call it off an async runtime's threads ([`attach_stage_ranges_async`]).
pub fn attach_stage_ranges(plan: &mut RunPlan, model: &Path) -> Result<(), WeightsError> {
    attach_stage_ranges_with(plan, model, DigestMemo::global())
}

/// [`attach_stage_ranges`] on tokio's blocking threads, so the runtime that drives the
/// session and answers clients never waits for the hashing.
pub async fn attach_stage_ranges_async(
    mut plan: RunPlan,
    model: &Path,
) -> Result<RunPlan, WeightsError> {
    if !matches!(plan.model.source, WeightSource::Url { .. }) {
        return Ok(plan);
    }
    let model = model.to_path_buf();
    tokio::task::spawn_blocking(move || attach_stage_ranges(&mut plan, &model).map(|()| plan))
        .await
        .map_err(|e| fail(WeightsFailure::ParseFailed, format!("hashing the ranges: {e}")))?
}

/// [`attach_stage_ranges`] with its own memo.
pub fn attach_stage_ranges_with(
    plan: &mut RunPlan,
    model: &Path,
    memo: &DigestMemo,
) -> Result<(), WeightsError> {
    let WeightSource::Url { size, .. } = &plan.model.source else {
        return Ok(());
    };
    let layout = ModelLayout::read(model)?;
    if layout.len() != *size {
        return Err(fail(
            WeightsFailure::SizeMismatch,
            format!("{} has {} bytes, the plan says {size}", model.display(), layout.len()),
        ));
    }
    let mut per_stage = Vec::with_capacity(plan.stages.len());
    for s in &plan.stages {
        let extents = layout.stage_extents(s.layers, s.embedding, s.head)?;
        per_stage.push(memo.digest_extents(model, &extents)?);
    }
    plan.model.stage_ranges = per_stage;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{DigestMemo, merge};
    use sha2::{Digest, Sha256};

    fn sha(bytes: &[u8]) -> String {
        Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn a_second_digest_of_the_same_extents_reads_nothing_and_a_longer_one_reads_only_its_tail() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("model.bin");
        let bytes: Vec<u8> = (0..10_000u32).map(|i| (i * 31 % 251) as u8).collect();
        std::fs::write(&path, &bytes).expect("write");
        let memo = DigestMemo::default();
        let extents = [(0, 1000), (5000, 3000)];
        let first = memo.digest_extents(&path, &extents).expect("digests");
        assert_eq!(first[0].sha256, sha(&bytes[..1000]));
        assert_eq!(first[1].sha256, sha(&bytes[5000..8000]));
        assert_eq!(memo.bytes_read(), 4000);
        let again = memo.digest_extents(&path, &extents).expect("digests");
        assert_eq!(again, first);
        assert_eq!(memo.bytes_read(), 4000, "a second attach reads none of the file");
        let longer = memo.digest_extents(&path, &[(0, 2500), (5000, 1000)]).expect("digests");
        assert_eq!(longer[0].sha256, sha(&bytes[..2500]));
        assert_eq!(longer[1].sha256, sha(&bytes[5000..6000]));
        assert_eq!(memo.bytes_read(), 4000 + 1500 + 1000, "only past what was hashed from 0");

        // The file rewritten (its time stamp set to another): its digests are computed again.
        let changed: Vec<u8> = bytes.iter().map(|b| b ^ 0x5a).collect();
        std::fs::write(&path, &changed).expect("rewrite");
        let later = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .expect("open")
            .set_modified(later)
            .expect("touch");
        let fresh = memo.digest_extents(&path, &extents).expect("digests");
        assert_eq!(fresh[0].sha256, sha(&changed[..1000]));
        assert_eq!(memo.bytes_read(), 6500 + 4000);
        let err = memo.digest_extents(&path, &[(9000, 2000)]).expect_err("past the end");
        assert_eq!(err.reason, crate::wire::reason::WeightsFailure::SizeMismatch);
    }

    #[test]
    fn touching_and_overlapping_extents_merge_and_empty_ones_vanish() {
        let got = merge(vec![(10, 5), (0, 10), (20, 0), (30, 4), (32, 10), (50, 1)]);
        assert_eq!(got, vec![(0, 15), (30, 12), (50, 1)]);
    }
}
