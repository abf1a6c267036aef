//! Reading GGUF headers from files, with typed errors for every way a file can be wrong.

use candle_core::quantized::gguf_file::Content;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use super::facts::{ModelError, ModelFacts, facts_from_content};

/// The four bytes every GGUF file starts with.
pub const GGUF_MAGIC: &[u8; 4] = b"GGUF";

/// Reads a GGUF header (metadata and tensor infos, no tensor data) from `path`.
/// Returns the parsed content and the file's length.
pub fn read_content(path: &Path) -> Result<(Content, u64), ModelError> {
    let io = |source| ModelError::Io { path: path.display().to_string(), source };
    let file = File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    let mut reader = BufReader::new(file);
    let mut magic = [0u8; 4];
    let got = read_up_to(&mut reader, &mut magic).map_err(io)?;
    if got < 4 {
        return Err(ModelError::Truncated {
            detail: format!("file has {len} bytes, fewer than the 4-byte magic"),
        });
    }
    if &magic != GGUF_MAGIC {
        return Err(ModelError::NotGguf { found: magic.to_vec() });
    }
    reader.seek(SeekFrom::Start(0)).map_err(io)?;
    let content = Content::read(&mut reader).map_err(classify)?;
    if content.tensor_data_offset > len && !content.tensor_infos.is_empty() {
        return Err(ModelError::Truncated {
            detail: format!(
                "tensor data would start at {} past the end ({len})",
                content.tensor_data_offset
            ),
        });
    }
    Ok((content, len))
}

/// Reads and checks the model facts of the GGUF file at `path`.
pub fn read_facts(path: &Path) -> Result<ModelFacts, ModelError> {
    let (content, len) = read_content(path)?;
    facts_from_content(&content, len)
}

fn read_up_to(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

/// Maps candle's parse errors onto typed model errors.
fn classify(mut err: candle_core::Error) -> ModelError {
    // Candle attaches a backtrace when RUST_BACKTRACE is set; keep only the message.
    while let candle_core::Error::WithBacktrace { inner, .. } = err {
        err = *inner;
    }
    if let candle_core::Error::Io(io) = &err
        && io.kind() == std::io::ErrorKind::UnexpectedEof
    {
        return ModelError::Truncated { detail: "the header ends early".into() };
    }
    let detail = err.to_string();
    if detail.contains("unknown dtype") {
        ModelError::UnsupportedTensorType { detail }
    } else if detail.contains("remaining") || detail.contains("failed to fill whole buffer") {
        ModelError::Truncated { detail }
    } else {
        ModelError::Malformed { detail }
    }
}
