//! `POST /v1/messages`: Anthropic's Messages API over the same sessions. The body is read
//! into the OpenAI chat request ([`anthropic::to_openai_chat`]), tokenized by the model's
//! template, submitted, and answered as a `message` or as Anthropic's stream events;
//! errors leave in Anthropic's envelope (`{"type":"error","error":{..}}`).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::failure::Failure;
use super::guard::off_loop;
use super::prompt::{body, tokenize_prompt};
use super::state::{Shared, Submitted};
use super::track::Tracker;
use crate::chat::{OutputParser, parse_whole};
use crate::orchestrator::driver::served::Reply;
use crate::orchestrator::scheduler::FinishReason;
use crate::serve::anthropic::{self, EventWriter};
use crate::serve::chat_answer::ChatAnswer;
use crate::serve::error::ApiError;
use crate::serve::params::parse_chat;
use crate::serve::shapes::finish_reason;
use crate::wire::reason::RequestEnd;

/// An error in Anthropic's envelope, with the status and headers of [`Failure`].
fn anthropic_error(e: ApiError) -> Response {
    let mut r = Failure(e.clone()).into_response();
    let body = json!({"type": "error", "error": {"type": e.kind, "message": e.message}});
    *r.body_mut() = axum::body::Body::from(body.to_string());
    r
}

/// The route's handler.
pub async fn messages(
    State(shared): State<Arc<Shared>>,
    raw: Result<Bytes, BytesRejection>,
) -> Response {
    match answer(shared, raw).await {
        Ok(r) => r,
        Err(Failure(e)) => anthropic_error(e),
    }
}

async fn answer(
    shared: Arc<Shared>,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Response, Failure> {
    let tracker = Tracker::arrived(shared.clone());
    let raw = body(raw)?;
    let defaults = shared.defaults();
    let seed = rand::random::<u64>();
    let parsed = off_loop(move || {
        anthropic::to_openai_chat(&raw).and_then(|b| parse_chat(&b, &defaults, seed))
    })
    .await??;
    let (prompt, parser) = tokenize_prompt(&shared, &parsed).await?;
    let ticket = shared.ticket();
    let (n_ctx, vocab) = (defaults.n_ctx, shared.config.vocab);
    let request = parsed.request(ticket.to_string(), prompt, n_ctx, vocab)?;
    let prompt_n = request.prompt.len() as u32;
    let submitted = shared.submit(ticket, request)?;
    let tracker = tracker.submitted(prompt_n);
    let parser =
        parser.unwrap_or_else(|| OutputParser::new(crate::chat::ToolFormat::None, false, false));
    let model = shared.config.model_name.clone();
    if parsed.stream {
        stream(submitted, tracker, parser, model, prompt_n).await
    } else {
        whole(submitted, tracker, parser, model).await
    }
}

async fn whole(
    mut sub: Submitted,
    mut tracker: Tracker,
    mut parser: OutputParser,
    model: String,
) -> Result<Response, Failure> {
    let result = loop {
        match sub.replies.recv().await {
            Some(Reply::Started) => tracker.started(),
            Some(Reply::Token { .. }) => tracker.token(),
            Some(Reply::Text(_)) => {}
            Some(Reply::Done(r)) => break r,
            None => {
                sub.guard.disarm();
                return Err(tracker.failed(RequestEnd::SessionEnded.as_str()).into());
            }
        }
    };
    sub.guard.disarm();
    if let Some(err) = &result.error {
        return Err(tracker.failed(err).into());
    }
    let mut answer = ChatAnswer::default();
    answer.add(parse_whole(&mut parser, &result.text));
    let finish = answer.finish(finish_reason(result.finish_reason.unwrap_or(FinishReason::Eos)));
    tracker.finished(finish, result.completion_tokens, result.cached_tokens);
    let usage = (result.prompt_tokens, result.completion_tokens, result.cached_tokens);
    let v = anthropic::message(sub.ticket, &model, &answer, finish, usage);
    Ok(axum::Json(v).into_response())
}

/// A streamed answer between its replies and its events.
struct Streaming {
    sub: Submitted,
    tracker: Tracker,
    parser: OutputParser,
    answer: ChatAnswer,
    writer: EventWriter,
    pending: VecDeque<(&'static str, serde_json::Value)>,
    done: bool,
}

impl Streaming {
    fn text(&mut self, text: &str) {
        for d in self.parser.push(text) {
            self.pending.extend(self.writer.delta(&d));
            self.answer.add(vec![d]);
        }
    }

    fn reply(&mut self, reply: Option<Reply>) {
        match reply {
            Some(Reply::Started) => self.tracker.started(),
            Some(Reply::Token { piece, .. }) => {
                self.tracker.token();
                self.text(&piece);
            }
            Some(Reply::Text(t)) => self.text(&t),
            Some(Reply::Done(r)) => {
                self.sub.guard.disarm();
                self.done = true;
                if let Some(err) = &r.error {
                    let e = self.tracker.failed(err);
                    let body =
                        json!({"type": "error", "error": {"type": e.kind, "message": e.message}});
                    self.pending.push_back(("error", body));
                    return;
                }
                for d in self.parser.finish() {
                    self.pending.extend(self.writer.delta(&d));
                    self.answer.add(vec![d]);
                }
                let reason = finish_reason(r.finish_reason.unwrap_or(FinishReason::Eos));
                let finish = self.answer.finish(reason);
                self.tracker.finished(finish, r.completion_tokens, r.cached_tokens);
                self.pending.extend(self.writer.finish(finish, r.completion_tokens));
            }
            None => {
                self.sub.guard.disarm();
                self.done = true;
                let e = self.tracker.failed(RequestEnd::SessionEnded.as_str());
                let body =
                    json!({"type": "error", "error": {"type": e.kind, "message": e.message}});
                self.pending.push_back(("error", body));
            }
        }
    }
}

/// Streams the answer as Anthropic's events. As for OpenAI's streams, the head waits
/// until the request took a slot, so a refused one gets its status.
async fn stream(
    mut sub: Submitted,
    mut tracker: Tracker,
    parser: OutputParser,
    model: String,
    prompt_n: u32,
) -> Result<Response, Failure> {
    let first = match sub.replies.recv().await {
        Some(Reply::Started) => {
            tracker.started();
            None
        }
        Some(Reply::Done(r)) if r.error.is_some() => {
            sub.guard.disarm();
            return Err(tracker.failed(r.error.as_deref().unwrap_or_default()).into());
        }
        None => {
            sub.guard.disarm();
            return Err(tracker.failed(RequestEnd::SessionEnded.as_str()).into());
        }
        other => other,
    };
    let writer = EventWriter::new(sub.ticket);
    let mut pending = VecDeque::new();
    pending.push_back(writer.start(&model, prompt_n));
    pending.push_back(("ping", json!({"type": "ping"})));
    let mut st = Streaming {
        sub,
        tracker,
        parser,
        answer: ChatAnswer::default(),
        writer,
        pending,
        done: false,
    };
    if first.is_some() {
        st.reply(first);
    }
    let events = futures_util::stream::unfold(st, |mut st| async move {
        loop {
            if let Some((name, data)) = st.pending.pop_front() {
                let ev = SseEvent::default().event(name).data(data.to_string());
                return Some((Ok::<_, Infallible>(ev), st));
            }
            if st.done {
                return None;
            }
            let reply = st.sub.replies.recv().await;
            st.reply(reply);
        }
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::default()).into_response())
}
