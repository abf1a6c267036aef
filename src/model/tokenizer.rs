//! The tokenizer a GGUF header describes (the tokenizer itself is the core crate's).

use candle_core::quantized::gguf_file::{Content, Value};

pub use swactor_core::model::tokenizer::*;

use super::facts::ModelError;

fn meta_strings(content: &Content, key: &str) -> Result<Option<Vec<String>>, ModelError> {
    match content.metadata.get(key) {
        None => Ok(None),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| match v {
                Value::String(s) => Ok(s.clone()),
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

fn meta_u32(content: &Content, key: &str) -> Option<u32> {
    content
        .metadata
        .get(key)
        .and_then(|v| v.to_u32().ok().or_else(|| v.to_i32().ok().map(|x| x as u32)))
}

fn meta_bool(content: &Content, key: &str) -> Option<bool> {
    content.metadata.get(key).and_then(|v| v.to_bool().ok())
}

/// Builds the tokenizer a GGUF header describes.
pub fn tokenizer_from_gguf(content: &Content) -> Result<Tokenizer, ModelError> {
    let model = match content.metadata.get("tokenizer.ggml.model") {
        Some(Value::String(s)) => s.clone(),
        Some(_) => {
            return Err(ModelError::WrongKeyType {
                key: "tokenizer.ggml.model".into(),
                expected: "a string",
            });
        }
        None => return Err(ModelError::MissingKey { key: "tokenizer.ggml.model".into() }),
    };
    let tokens = meta_strings(content, "tokenizer.ggml.tokens")?
        .ok_or_else(|| ModelError::MissingKey { key: "tokenizer.ggml.tokens".into() })?;
    let types = match content.metadata.get("tokenizer.ggml.token_type") {
        Some(Value::Array(a)) => {
            a.iter().map(|v| v.to_i32().unwrap_or(token_type::NORMAL)).collect()
        }
        _ => vec![token_type::NORMAL; tokens.len()],
    };
    let scores = match content.metadata.get("tokenizer.ggml.scores") {
        Some(Value::Array(a)) => a.iter().map(|v| v.to_f32().unwrap_or(0.0)).collect(),
        _ => vec![0.0; tokens.len()],
    };
    let kind = match model.as_str() {
        "gpt2" => {
            let pre_name = match content.metadata.get("tokenizer.ggml.pre") {
                Some(Value::String(s)) => s.clone(),
                _ => "default".into(),
            };
            let (pre, ignore_merges) =
                pre_tokenizer(&pre_name).ok_or_else(|| ModelError::Inconsistent {
                    detail: format!("unsupported pre-tokenizer `{pre_name}`"),
                })?;
            Kind::Bpe { pre: pre.into_iter().map(String::from).collect(), ignore_merges }
        }
        "llama" => Kind::Spm {
            add_space_prefix: meta_bool(content, "tokenizer.ggml.add_space_prefix").unwrap_or(true),
        },
        other => {
            return Err(ModelError::Inconsistent {
                detail: format!("unsupported tokenizer model `{other}`"),
            });
        }
    };
    let merges = if matches!(kind, Kind::Bpe { .. }) {
        meta_strings(content, "tokenizer.ggml.merges")?
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
        meta_u32(content, "tokenizer.ggml.bos_token_id"),
        meta_u32(content, "tokenizer.ggml.eos_token_id"),
        meta_bool(content, "tokenizer.ggml.add_bos_token").unwrap_or(add_bos_default),
    )
}

/// The model's chat template (`tokenizer.chat_template`), if the header has one; a
/// Gemma 3 file without one gets Gemma's turn markers (the template every Gemma 3
/// checkpoint ships with), as llama.cpp does.
pub fn chat_template(content: &Content) -> Option<String> {
    let own =
        content.metadata.get("tokenizer.chat_template").and_then(|v| v.to_string().ok()).cloned();
    let arch = content.metadata.get("general.architecture").and_then(|v| v.to_string().ok());
    own.or_else(|| {
        (arch.map(String::as_str) == Some("gemma3"))
            .then(|| swactor_core::model::tokenizer::GEMMA_TEMPLATE.to_string())
    })
}
