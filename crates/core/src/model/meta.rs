//! Why a file's model facts could not be read ([`ModelError`], with its stable codes) and
//! typed access to a decoded header's metadata: what the facts and each family's own
//! reads (`arch.rs`) share.

use thiserror::Error;

use super::gguf::{GgufError, GgufHeader, MetaValue};

/// The values of `general.architecture` this build runs.
pub const SUPPORTED_ARCHITECTURES: &[&str] =
    &["llama", "qwen2", "qwen3", "gemma3", "qwen3moe", "qwen2moe", "gpt-oss"];

/// Why a file's model facts could not be read. [`ModelError::code`] is a stable reason.
#[derive(Debug, Error)]
pub enum ModelError {
    /// The file could not be opened or read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// The file does not start with the GGUF magic.
    #[error("not a GGUF file (starts with {found:02x?})")]
    NotGguf {
        /// The first bytes found.
        found: Vec<u8>,
    },
    /// The file ends before its header or tensor data does.
    #[error("truncated GGUF file: {detail}")]
    Truncated {
        /// What is missing.
        detail: String,
    },
    /// The header could not be parsed.
    #[error("malformed GGUF header: {detail}")]
    Malformed {
        /// The parser's message.
        detail: String,
    },
    /// A tensor has a type this build cannot read.
    #[error("unsupported tensor type: {detail}")]
    UnsupportedTensorType {
        /// The parser's message.
        detail: String,
    },
    /// A required metadata key is absent.
    #[error("missing GGUF metadata key `{key}`")]
    MissingKey {
        /// The key.
        key: String,
    },
    /// A metadata key has the wrong type or an out-of-range value.
    #[error("GGUF metadata key `{key}` is not {expected}")]
    WrongKeyType {
        /// The key.
        key: String,
        /// What was expected.
        expected: &'static str,
    },
    /// The facts contradict each other or the tensors.
    #[error("inconsistent model: {detail}")]
    Inconsistent {
        /// What is inconsistent.
        detail: String,
    },
    /// `general.architecture` names an architecture this build does not run.
    #[error(
        "unsupported architecture `{architecture}` (this build runs {})",
        SUPPORTED_ARCHITECTURES.join(", ")
    )]
    UnsupportedArchitecture {
        /// The architecture the file names.
        architecture: String,
    },
    /// The tokenizer's vocabulary is malformed (a merge that is not two tokens).
    #[error("invalid vocabulary: {detail}")]
    InvalidVocabulary {
        /// What is wrong.
        detail: String,
    },
}

impl ModelError {
    /// A stable `snake_case` code for this error class.
    pub const fn code(&self) -> &'static str {
        match self {
            ModelError::Io { .. } => "io",
            ModelError::NotGguf { .. } => "not_gguf",
            ModelError::Truncated { .. } => "truncated",
            ModelError::Malformed { .. } => "malformed",
            ModelError::UnsupportedTensorType { .. } => "unsupported_tensor_type",
            ModelError::MissingKey { .. } => "missing_key",
            ModelError::WrongKeyType { .. } => "wrong_key_type",
            ModelError::Inconsistent { .. } => "inconsistent",
            ModelError::UnsupportedArchitecture { .. } => "unsupported_architecture",
            ModelError::InvalidVocabulary { .. } => "invalid_vocabulary",
        }
    }
}

impl From<GgufError> for ModelError {
    fn from(e: GgufError) -> Self {
        match e {
            GgufError::NotGguf { found } => ModelError::NotGguf { found },
            GgufError::Truncated { detail } => ModelError::Truncated { detail },
            GgufError::Malformed { detail } => ModelError::Malformed { detail },
            GgufError::UnsupportedTensorType { detail } => {
                ModelError::UnsupportedTensorType { detail }
            }
        }
    }
}

/// Typed access to a header's metadata, each wrong type a [`ModelError::WrongKeyType`].
pub(crate) struct Meta<'a> {
    pub(crate) header: &'a GgufHeader,
}

impl Meta<'_> {
    pub(crate) fn get(&self, key: &str) -> Option<&MetaValue> {
        self.header.metadata.get(key)
    }

    pub(crate) fn uint(&self, key: &str) -> Result<Option<u64>, ModelError> {
        let wrong =
            || ModelError::WrongKeyType { key: key.to_string(), expected: "an unsigned integer" };
        let Some(v) = self.get(key) else { return Ok(None) };
        let n = v.as_integer().ok_or_else(wrong)?;
        u64::try_from(n).map(Some).map_err(|_| wrong())
    }

    pub(crate) fn u32_opt(&self, key: &str) -> Result<Option<u32>, ModelError> {
        match self.uint(key)? {
            None => Ok(None),
            Some(n) => u32::try_from(n).map(Some).map_err(|_| ModelError::WrongKeyType {
                key: key.to_string(),
                expected: "a 32-bit unsigned integer",
            }),
        }
    }

    pub(crate) fn u32_req(&self, key: &str) -> Result<u32, ModelError> {
        self.u32_opt(key)?.ok_or_else(|| ModelError::MissingKey { key: key.to_string() })
    }

    pub(crate) fn f32_opt(&self, key: &str) -> Result<Option<f32>, ModelError> {
        match self.get(key) {
            None => Ok(None),
            Some(MetaValue::F32(x)) => Ok(Some(*x)),
            Some(MetaValue::F64(x)) => Ok(Some(*x as f32)),
            Some(_) => Err(ModelError::WrongKeyType { key: key.to_string(), expected: "a float" }),
        }
    }

    pub(crate) fn string_opt(&self, key: &str) -> Result<Option<String>, ModelError> {
        match self.get(key) {
            None => Ok(None),
            Some(MetaValue::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(ModelError::WrongKeyType { key: key.to_string(), expected: "a string" }),
        }
    }

    pub(crate) fn array_len(&self, key: &str) -> Result<Option<usize>, ModelError> {
        match self.get(key) {
            None => Ok(None),
            Some(MetaValue::Array(a)) => Ok(Some(a.len())),
            Some(_) => Err(ModelError::WrongKeyType { key: key.to_string(), expected: "an array" }),
        }
    }
}

/// The error of a header whose facts contradict each other.
pub(crate) fn inconsistent<T>(detail: String) -> Result<T, ModelError> {
    Err(ModelError::Inconsistent { detail })
}
