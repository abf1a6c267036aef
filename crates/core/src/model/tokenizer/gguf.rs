//! The tokenizer a decoded GGUF header describes (llama.cpp's `tokenizer.ggml.*` keys),
//! and its chat template.

use super::{GEMMA_TEMPLATE, Kind, Tokenizer, pre_tokenizer, token_type};
use crate::model::facts::ModelError;
use crate::model::gguf::{GgufHeader, MetaValue};

fn meta_strings(header: &GgufHeader, key: &str) -> Result<Option<Vec<String>>, ModelError> {
    match header.get(key) {
        None => Ok(None),
        Some(MetaValue::Array(a)) => a
            .iter()
            .map(|v| match v {
                MetaValue::String(s) => Ok(s.clone()),
                _ => Err(ModelError::WrongKeyType {
                    key: key.into(),
                    expected: "an array of strings",
                }),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => {
            Err(ModelError::WrongKeyType { key: key.into(), expected: "an array of strings" })
        }
    }
}

fn meta_u32(header: &GgufHeader, key: &str) -> Option<u32> {
    match header.get(key)? {
        MetaValue::U32(x) => Some(*x),
        MetaValue::I32(x) => Some(*x as u32),
        _ => None,
    }
}

fn meta_bool(header: &GgufHeader, key: &str) -> Option<bool> {
    match header.get(key)? {
        MetaValue::Bool(b) => Some(*b),
        _ => None,
    }
}

/// Builds the tokenizer a GGUF header describes.
pub fn tokenizer_from_gguf(header: &GgufHeader) -> Result<Tokenizer, ModelError> {
    let model = match header.get("tokenizer.ggml.model") {
        Some(MetaValue::String(s)) => s.clone(),
        Some(_) => {
            return Err(ModelError::WrongKeyType {
                key: "tokenizer.ggml.model".into(),
                expected: "a string",
            });
        }
        None => return Err(ModelError::MissingKey { key: "tokenizer.ggml.model".into() }),
    };
    let tokens = meta_strings(header, "tokenizer.ggml.tokens")?
        .ok_or_else(|| ModelError::MissingKey { key: "tokenizer.ggml.tokens".into() })?;
    let types = match header.get("tokenizer.ggml.token_type") {
        Some(MetaValue::Array(a)) => a
            .iter()
            .map(|v| match v {
                MetaValue::I32(t) => *t,
                _ => token_type::NORMAL,
            })
            .collect(),
        _ => vec![token_type::NORMAL; tokens.len()],
    };
    let scores = match header.get("tokenizer.ggml.scores") {
        Some(MetaValue::Array(a)) => a
            .iter()
            .map(|v| match v {
                MetaValue::F32(s) => *s,
                _ => 0.0,
            })
            .collect(),
        _ => vec![0.0; tokens.len()],
    };
    let kind = match model.as_str() {
        "gpt2" => {
            let pre_name = match header.get("tokenizer.ggml.pre") {
                Some(MetaValue::String(s)) => s.clone(),
                _ => "default".into(),
            };
            let (pre, ignore_merges) =
                pre_tokenizer(&pre_name).ok_or_else(|| ModelError::Inconsistent {
                    detail: format!("unsupported pre-tokenizer `{pre_name}`"),
                })?;
            Kind::Bpe { pre: pre.into_iter().map(String::from).collect(), ignore_merges }
        }
        "llama" => Kind::Spm {
            add_space_prefix: meta_bool(header, "tokenizer.ggml.add_space_prefix").unwrap_or(true),
        },
        other => {
            return Err(ModelError::Inconsistent {
                detail: format!("unsupported tokenizer model `{other}`"),
            });
        }
    };
    let merges = if matches!(kind, Kind::Bpe { .. }) {
        meta_strings(header, "tokenizer.ggml.merges")?
            .ok_or_else(|| ModelError::MissingKey { key: "tokenizer.ggml.merges".into() })?
    } else {
        Vec::new()
    };
    let add_bos_default = matches!(kind, Kind::Spm { .. });
    Tokenizer::new(
        kind,
        tokens,
        types,
        scores,
        &merges,
        meta_u32(header, "tokenizer.ggml.bos_token_id"),
        meta_u32(header, "tokenizer.ggml.eos_token_id"),
        meta_bool(header, "tokenizer.ggml.add_bos_token").unwrap_or(add_bos_default),
    )
}

/// The model's chat template (`tokenizer.chat_template`), if the header has one; a
/// Gemma 3 file without one gets Gemma's turn markers (the template every Gemma 3
/// checkpoint ships with), as llama.cpp does.
pub fn chat_template(header: &GgufHeader) -> Option<String> {
    let own = header.get("tokenizer.chat_template").and_then(MetaValue::as_str);
    let arch = header.get("general.architecture").and_then(MetaValue::as_str);
    own.map(str::to_string).or_else(|| (arch == Some("gemma3")).then(|| GEMMA_TEMPLATE.to_string()))
}
