//! Ollama's API over the same sessions ([`crate::serve::ollama`]'s shapes): `/api/chat`
//! and `/api/generate` (streamed as newline-delimited JSON unless `"stream": false`),
//! `/api/tags` and `/api/version`; errors as `{"error": message}`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::response::Response;
use serde_json::{Value, json};

use super::event_api::{self, Event, Made, Shape};
use super::state::Shared;
use crate::chat::Delta;
use crate::orchestrator::requests::RequestResult;
use crate::serve::chat_answer::ChatAnswer;
use crate::serve::error::ApiError;
use crate::serve::ollama::{self, Endpoint, LineWriter};
use crate::serve::shapes::Timings;

/// Ollama's shapes of one answer.
struct Ollama(LineWriter);

impl Shape for Ollama {
    const NDJSON: bool = true;

    fn start(&mut self, _prompt_n: u32) -> Vec<Event> {
        Vec::new()
    }

    fn delta(&mut self, d: &Delta) -> Vec<Event> {
        vec![("line", self.0.delta(d))]
    }

    fn finish(&mut self, finish: &str, _: &RequestResult, t: &Timings) -> Vec<Event> {
        vec![("line", self.0.done(None, finish, t))]
    }

    fn whole(&self, answer: &ChatAnswer, finish: &str, _: &RequestResult, t: &Timings) -> Value {
        self.0.done(Some(answer), finish, t)
    }

    fn error(e: &ApiError) -> Value {
        json!({"error": e.message})
    }
}

fn maker(endpoint: Endpoint) -> fn(Made) -> Ollama {
    match endpoint {
        Endpoint::Chat => {
            |m: Made| Ollama(LineWriter::new(Endpoint::Chat, m.model, m.created, m.ticket))
        }
        Endpoint::Generate => {
            |m: Made| Ollama(LineWriter::new(Endpoint::Generate, m.model, m.created, m.ticket))
        }
    }
}

/// `POST /api/chat`.
pub async fn chat(
    State(shared): State<Arc<Shared>>,
    raw: Result<Bytes, BytesRejection>,
) -> Response {
    event_api::answer(shared, raw, ollama::chat_to_openai, maker(Endpoint::Chat)).await
}

/// `POST /api/generate`.
pub async fn generate(
    State(shared): State<Arc<Shared>>,
    raw: Result<Bytes, BytesRejection>,
) -> Response {
    event_api::answer(shared, raw, ollama::generate_to_openai, maker(Endpoint::Generate)).await
}

/// `GET /api/tags`: the served model.
pub async fn tags(State(shared): State<Arc<Shared>>) -> axum::Json<Value> {
    axum::Json(ollama::tags(&shared.config.model_name, shared.config.created))
}

/// `GET /api/version`.
pub async fn version() -> axum::Json<Value> {
    axum::Json(json!({"version": env!("CARGO_PKG_VERSION")}))
}
