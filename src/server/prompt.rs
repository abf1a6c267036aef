//! What every completion route does before it submits: read the body within its limit,
//! and tokenize the prompt (a chat through the model's template, with a parser of its
//! answer; text; or token ids), refusing one too long by its bytes first; and give a
//! request the grammar its `response_format` asks for.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;

use super::failure::Failure;
use super::guard::off_loop;
use super::state::Shared;
use crate::chat::OutputParser;
use crate::chat::forced_call_grammar;
use crate::orchestrator::requests::Request;
use crate::serve::error::{ApiError, ErrorType, MAX_PROMPT_BYTES_PER_POSITION};
use crate::serve::openai_chat::ToolChoice;
use crate::serve::params::{Parsed, Prompt};

/// A body, or the error its reading ended in (413 past the limit).
pub fn body(body: Result<Bytes, BytesRejection>) -> Result<Bytes, Failure> {
    body.map_err(|r| {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            Failure(ApiError::new(ErrorType::RequestTooLarge, "the request body is over the limit"))
        } else {
            Failure(ApiError::invalid(format!("the body could not be read: {r}")))
        }
    })
}

/// The prompt's token ids: the chat template's (with a parser of a chat's answer), the
/// text's, or the ids given. Long prompts are refused by their bytes before tokenizing
/// (no token spells more than 64 bytes, so a prompt of more than 64 bytes per context
/// position cannot fit).
pub async fn tokenize_prompt(
    shared: &Arc<Shared>,
    parsed: &Parsed,
) -> Result<(Vec<u32>, Option<OutputParser>), Failure> {
    let n_ctx = shared.n_ctx();
    let bytes = match &parsed.prompt {
        Prompt::Chat(c) => c.text_bytes(),
        Prompt::Text(t) => t.len(),
        Prompt::Tokens(_) => 0,
    };
    if bytes > MAX_PROMPT_BYTES_PER_POSITION * n_ctx as usize {
        return Err(ApiError::exceeds_context_bytes(bytes, n_ctx).into());
    }
    let (tok, chat, prompt) =
        (shared.tokenizer.clone(), shared.chat.clone(), parsed.prompt.clone());
    let (now, cap) =
        (shared.config.unix_now() as i64, MAX_PROMPT_BYTES_PER_POSITION * n_ctx as usize);
    let encoded = off_loop(move || match prompt {
        Prompt::Chat(c) => chat
            .encode_for_answer(&tok, &c, now, cap)
            .map(|(ids, p)| (ids, Some(p)))
            .map_err(|e| ApiError::invalid(format!("messages: {e}")).because(e.code())),
        Prompt::Text(t) => Ok((tok.encode(&t, true, false), None)),
        Prompt::Tokens(ids) => Ok((ids, None)),
    })
    .await?;
    Ok(encoded?)
}

/// Gives `request` the grammar its answer must follow: its `response_format`'s schema, or
/// one call of the offered tools in the template's call format (`tool_choice` `required` or
/// a named function). The grammars are built on the first such request; a schema that is
/// too large, unsupported or unsatisfiable is refused with a 400 `invalid_schema` before
/// any compute, and a forced call where the template has no call format this build writes
/// with a 400 `unsupported_field`.
pub async fn constrain(
    shared: &Arc<Shared>,
    parsed: &Parsed,
    request: &mut Request,
) -> Result<(), Failure> {
    let forced = match (&parsed.tool_choice, &parsed.prompt) {
        (ToolChoice::Required, Prompt::Chat(c)) => Some((c.tools.clone(), None)),
        (ToolChoice::Function(n), Prompt::Chat(c)) => Some((c.tools.clone(), Some(n.clone()))),
        _ => None,
    };
    let lark = match forced {
        None => None,
        Some((tools, only)) => {
            let marker = |t: &str| shared.tokenizer.token_id(t);
            let g = forced_call_grammar(shared.chat.tool_format(), &tools, only.as_deref(), marker);
            Some(g.ok_or_else(|| {
                ApiError::invalid(
                    "'tool_choice' forces a call, but this model's template has no tool-call \
                     format this server writes (Hermes / Qwen, Llama 3, Mistral): use \"auto\"",
                )
                .because(crate::serve::params::UNSUPPORTED)
            })?)
        }
    };
    let schema = parsed.format.clone();
    if lark.is_none() && schema.is_none() {
        return Ok(());
    }
    let shared = shared.clone();
    let built = off_loop(move || {
        let grammars = shared.grammars.get_or_init(|| {
            crate::model::grammar::Grammars::new(shared.tokenizer.clone(), &shared.ends)
                .map(Arc::new)
        });
        match (grammars, lark, schema) {
            (Err(e), _, _) => Err(format!("constrained sampling is not available: {e}")),
            (Ok(g), Some(lark), _) => g.lark(&lark, &shared.ends),
            (Ok(g), None, Some(schema)) => g.json_schema(&schema, &shared.ends),
            (Ok(_), None, None) => Err("nothing to constrain".into()),
        }
    })
    .await?;
    let constraint = built.map_err(|e| {
        ApiError::invalid(format!("'response_format': {e}")).because("invalid_schema")
    })?;
    request.constraint = Some(constraint);
    Ok(())
}
