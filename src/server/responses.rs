//! `POST /v1/responses`: OpenAI's Responses API over the same sessions
//! ([`crate::serve::responses`]'s shapes), errors in OpenAI's envelope.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::response::Response;
use serde_json::Value;

use super::event_api::{self, Event, Made, Shape};
use super::state::Shared;
use crate::chat::Delta;
use crate::orchestrator::requests::RequestResult;
use crate::serve::chat_answer::ChatAnswer;
use crate::serve::error::ApiError;
use crate::serve::responses::{self, EventWriter, ResponseMeta};
use crate::serve::shapes::Timings;

/// The Responses API's shapes of one answer.
struct Responses {
    meta: ResponseMeta,
    writer: EventWriter,
}

fn usage(r: &RequestResult) -> (u32, u32, u32) {
    (r.prompt_tokens, r.completion_tokens, r.cached_tokens)
}

impl Shape for Responses {
    fn start(&mut self, _prompt_n: u32) -> Vec<Event> {
        self.writer.start()
    }

    fn delta(&mut self, d: &Delta) -> Vec<Event> {
        self.writer.delta(d)
    }

    fn finish(&mut self, finish: &str, r: &RequestResult, _: &Timings) -> Vec<Event> {
        self.writer.finish(finish, usage(r))
    }

    fn whole(&self, answer: &ChatAnswer, finish: &str, r: &RequestResult, _: &Timings) -> Value {
        let status = if finish == "length" { "incomplete" } else { "completed" };
        self.meta.response(status, self.meta.output(answer), finish, usage(r))
    }

    fn error(e: &ApiError) -> Value {
        serde_json::from_str(&e.body()).unwrap_or_default()
    }
}

/// The route's handler.
pub async fn responses(
    State(shared): State<Arc<Shared>>,
    raw: Result<Bytes, BytesRejection>,
) -> Response {
    let make = |m: Made| {
        let meta = ResponseMeta { ticket: m.ticket, created: m.created, model: m.model };
        Responses { writer: EventWriter::new(meta.clone()), meta }
    };
    event_api::answer(shared, raw, responses::to_openai_chat, make).await
}
