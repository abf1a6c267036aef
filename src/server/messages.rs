//! `POST /v1/messages`: Anthropic's Messages API over the same sessions
//! ([`crate::serve::anthropic`]'s shapes), errors in Anthropic's envelope
//! (`{"type":"error","error":{..}}`).

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
use crate::serve::anthropic::{self, EventWriter};
use crate::serve::chat_answer::ChatAnswer;
use crate::serve::error::ApiError;
use crate::serve::shapes::Timings;

/// Anthropic's shapes of one answer.
struct Messages {
    made: Made,
    writer: EventWriter,
}

impl Shape for Messages {
    fn start(&mut self, prompt_n: u32) -> Vec<Event> {
        vec![self.writer.start(&self.made.model, prompt_n), ("ping", json!({"type": "ping"}))]
    }

    fn delta(&mut self, d: &Delta) -> Vec<Event> {
        self.writer.delta(d)
    }

    fn finish(&mut self, finish: &str, r: &RequestResult, _: &Timings) -> Vec<Event> {
        self.writer.finish(finish, r.completion_tokens)
    }

    fn whole(&self, answer: &ChatAnswer, finish: &str, r: &RequestResult, _: &Timings) -> Value {
        let usage = (r.prompt_tokens, r.completion_tokens, r.cached_tokens);
        anthropic::message(self.made.ticket, &self.made.model, answer, finish, usage)
    }

    fn error(e: &ApiError) -> Value {
        json!({"type": "error", "error": {"type": e.kind, "message": e.message}})
    }
}

/// The route's handler.
pub async fn messages(
    State(shared): State<Arc<Shared>>,
    raw: Result<Bytes, BytesRejection>,
) -> Response {
    let make = |made: Made| Messages { writer: EventWriter::new(made.ticket), made };
    event_api::answer(shared, raw, anthropic::to_openai_chat, make).await
}
