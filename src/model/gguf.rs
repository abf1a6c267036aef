//! Reading a GGUF file: the file is mapped once ([`GgufFile::open`]), the core decodes its
//! header from the mapping ([`decode_header`], every claim checked, typed errors), and the
//! mapping and header travel together to whoever needs them (facts, tokenizer, the
//! engine's binding), so one load reads the file once.
#![allow(unsafe_code)] // the one mmap, see `MappedFile::map`

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use swactor_core::model::gguf::*;

use super::facts::{ModelError, ModelFacts, facts_from_header};

/// A read-only mapping of a model file.
pub struct MappedFile(memmap2::Mmap);

impl AsRef<[u8]> for MappedFile {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl MappedFile {
    /// Maps `file` read-only.
    fn map(file: &File) -> std::io::Result<MappedFile> {
        // SAFETY: the mapping is read-only and private to this process. Another process
        // that truncates or rewrites the file while it is mapped would change what we read
        // (or fault the reads); model files are not modified while they are in use, the
        // same assumption llama.cpp's mmap loading makes.
        unsafe { memmap2::Mmap::map(file) }.map(MappedFile)
    }

    /// Drops this process's resident pages of `range` (the whole pages inside it): the
    /// bytes stay in the page cache and are read again on the next access, so nothing
    /// changes but the process's resident memory. For a matrix whose products read a
    /// repacked copy, so that the stage does not hold its weights twice, and for the
    /// header once it is decoded.
    pub fn release(&self, range: std::ops::Range<usize>) {
        let page = 4096;
        let (start, end) = (range.start.next_multiple_of(page), range.end / page * page);
        if start < end && end <= self.0.len() {
            // SAFETY: a read-only file mapping: dropping its pages makes the next
            // read fault the same bytes back in from the file; nothing holds a pointer that
            // relies on them staying resident.
            let _ = unsafe {
                self.0.unchecked_advise_range(
                    memmap2::UncheckedAdvice::DontNeed,
                    start,
                    end - start,
                )
            };
        }
    }
}

/// A mapped GGUF file and its decoded header. Cloning shares both.
#[derive(Clone)]
pub struct GgufFile {
    path: PathBuf,
    map: Arc<MappedFile>,
    header: Arc<GgufHeader>,
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile").field("path", &self.path).finish_non_exhaustive()
    }
}

impl GgufFile {
    /// Maps the file at `path` and decodes its header (metadata and tensor infos; the
    /// tensor data stays in the mapping until something reads it).
    pub fn open(path: &Path) -> Result<GgufFile, ModelError> {
        let io = |source| ModelError::Io { path: path.display().to_string(), source };
        let file = File::open(path).map_err(io)?;
        let map = match MappedFile::map(&file) {
            Ok(map) => map,
            // What a read would have said (a directory, say), else why the map failed.
            Err(e) => return Err(io((&file).read(&mut [0u8; 1]).err().unwrap_or(e))),
        };
        let header = decode_header(map.as_ref(), map.as_ref().len() as u64)?;
        // The header's pages were read once; the tensor data is what stays in use.
        map.release(0..usize::try_from(header.tensor_data_offset).unwrap_or(usize::MAX));
        Ok(GgufFile { path: path.to_path_buf(), map: Arc::new(map), header: Arc::new(header) })
    }

    /// The decoded header.
    pub fn header(&self) -> &GgufHeader {
        &self.header
    }

    /// The file's length.
    pub fn len(&self) -> u64 {
        self.header.file_len
    }

    /// Whether the file is empty (never, for a decoded header).
    pub fn is_empty(&self) -> bool {
        self.header.file_len == 0
    }

    /// The mapping, shared (tensor views hold it).
    pub fn mapping(&self) -> &Arc<MappedFile> {
        &self.map
    }

    /// The model facts of the header, checked.
    pub fn facts(&self) -> Result<ModelFacts, ModelError> {
        facts_from_header(&self.header)
    }
}

/// Reads and checks the model facts of the GGUF file at `path`.
pub fn read_facts(path: &Path) -> Result<ModelFacts, ModelError> {
    GgufFile::open(path)?.facts()
}
