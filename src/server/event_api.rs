//! The APIs whose requests are chat requests in another shape and whose streams are named
//! events (Anthropic's Messages, OpenAI's Responses): each body is read into an OpenAI
//! chat body, judged, tokenized by the model's template, submitted, and answered whole or
//! as server-sent events with `event:` names, in its [`Shape`].

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::header;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::Value;

use super::failure::Failure;
use super::guard::off_loop;
use super::prompt::{body, constrain, tokenize_prompt};
use super::state::{Shared, Submitted};
use super::track::Tracker;
use crate::chat::{Delta, OutputParser, ToolFormat, parse_whole};
use crate::orchestrator::driver::served::Reply;
use crate::orchestrator::requests::RequestResult;
use crate::orchestrator::scheduler::FinishReason;
use crate::serve::chat_answer::ChatAnswer;
use crate::serve::error::ApiError;
use crate::serve::params::parse_chat;
use crate::serve::shapes::{Timings, finish_reason};
use crate::wire::reason::RequestEnd;

/// An event: its name and its data.
pub type Event = (&'static str, Value);

/// One API's shapes of an answer.
pub trait Shape: Send + 'static {
    /// Streams as newline-delimited JSON (each event's data on a line) instead of
    /// server-sent events.
    const NDJSON: bool = false;
    /// The events that open a stream (the request took a slot; `prompt_n` tokens).
    fn start(&mut self, prompt_n: u32) -> Vec<Event>;
    /// The events of one read piece of the answer.
    fn delta(&mut self, d: &Delta) -> Vec<Event>;
    /// The events that close a stream: `finish` is OpenAI's finish reason.
    fn finish(&mut self, finish: &str, r: &RequestResult, t: &Timings) -> Vec<Event>;
    /// The whole answer's body.
    fn whole(&self, answer: &ChatAnswer, finish: &str, r: &RequestResult, t: &Timings) -> Value;
    /// An error's body (as a response, or as the data of an `error` event).
    fn error(e: &ApiError) -> Value;
}

/// A request's identity, for making its shape.
pub struct Made {
    /// The ticket.
    pub ticket: u64,
    /// Unix seconds at arrival.
    pub created: u64,
    /// The served model's name.
    pub model: String,
}

/// An error as a response in `S`'s envelope, with [`Failure`]'s status and headers.
fn error_response<S: Shape>(e: ApiError) -> Response {
    let mut r = Failure(e.clone()).into_response();
    *r.body_mut() = axum::body::Body::from(S::error(&e).to_string());
    r
}

/// Answers one request of an API whose bodies `convert` reads into OpenAI chat bodies.
pub async fn answer<S: Shape>(
    shared: Arc<Shared>,
    raw: Result<Bytes, BytesRejection>,
    convert: fn(&[u8]) -> Result<Vec<u8>, ApiError>,
    make: fn(Made) -> S,
) -> Response {
    match run(shared, raw, convert, make).await {
        Ok(r) => r,
        Err(Failure(e)) => error_response::<S>(e),
    }
}

async fn run<S: Shape>(
    shared: Arc<Shared>,
    raw: Result<Bytes, BytesRejection>,
    convert: fn(&[u8]) -> Result<Vec<u8>, ApiError>,
    make: fn(Made) -> S,
) -> Result<Response, Failure> {
    let tracker = Tracker::arrived(shared.clone());
    let raw = body(raw)?;
    let defaults = shared.defaults();
    let seed = rand::random::<u64>();
    let parsed =
        off_loop(move || convert(&raw).and_then(|b| parse_chat(&b, &defaults, seed))).await??;
    let (prompt, parser) = tokenize_prompt(&shared, &parsed).await?;
    let ticket = shared.ticket();
    let (n_ctx, vocab) = (defaults.n_ctx, shared.config.vocab);
    let mut request = parsed.request(ticket.to_string(), prompt, n_ctx, vocab)?;
    constrain(&shared, &parsed, &mut request).await?;
    let prompt_n = request.prompt.len() as u32;
    let submitted = shared.submit(ticket, request)?;
    let tracker = tracker.submitted(prompt_n);
    let parser = parser.unwrap_or_else(|| OutputParser::new(ToolFormat::None, false, false));
    let shape = make(Made {
        ticket,
        created: shared.config.unix_now(),
        model: shared.config.model_name.clone(),
    });
    if parsed.stream {
        stream(submitted, tracker, parser, shape, prompt_n).await
    } else {
        whole(submitted, tracker, parser, shape).await
    }
}

async fn whole<S: Shape>(
    mut sub: Submitted,
    mut tracker: Tracker,
    mut parser: OutputParser,
    shape: S,
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
    let t = tracker.finished(finish, result.completion_tokens, result.cached_tokens);
    Ok(axum::Json(shape.whole(&answer, finish, &result, &t)).into_response())
}

/// A streamed answer between its replies and its events.
struct Streaming<S> {
    sub: Submitted,
    tracker: Tracker,
    parser: OutputParser,
    answer: ChatAnswer,
    shape: S,
    pending: VecDeque<Event>,
    done: bool,
}

impl<S: Shape> Streaming<S> {
    fn read(&mut self, deltas: Vec<Delta>) {
        for d in deltas {
            self.pending.extend(self.shape.delta(&d));
            self.answer.add(vec![d]);
        }
    }

    fn fail(&mut self, reason: &str) {
        let e = self.tracker.failed(reason);
        self.pending.push_back(("error", S::error(&e)));
    }

    fn reply(&mut self, reply: Option<Reply>) {
        match reply {
            Some(Reply::Started) => self.tracker.started(),
            Some(Reply::Token { piece, .. }) => {
                self.tracker.token();
                let d = self.parser.push(&piece);
                self.read(d);
            }
            Some(Reply::Text(t)) => {
                let d = self.parser.push(&t);
                self.read(d);
            }
            Some(Reply::Done(r)) => {
                self.sub.guard.disarm();
                self.done = true;
                if let Some(err) = &r.error {
                    return self.fail(err);
                }
                let d = self.parser.finish();
                self.read(d);
                let reason = finish_reason(r.finish_reason.unwrap_or(FinishReason::Eos));
                let finish = self.answer.finish(reason);
                let t = self.tracker.finished(finish, r.completion_tokens, r.cached_tokens);
                self.pending.extend(self.shape.finish(finish, &r, &t));
            }
            None => {
                self.sub.guard.disarm();
                self.done = true;
                self.fail(RequestEnd::SessionEnded.as_str());
            }
        }
    }
}

/// Streams the answer as named events. As for OpenAI's chat streams, the head waits until
/// the request took a slot, so a refused one gets its status.
async fn stream<S: Shape>(
    mut sub: Submitted,
    mut tracker: Tracker,
    parser: OutputParser,
    mut shape: S,
    prompt_n: u32,
) -> Result<Response, Failure> {
    let first = super::answer::stream_head(&mut sub, &mut tracker).await?;
    let pending = shape.start(prompt_n).into();
    let answer = ChatAnswer::default();
    let mut st = Streaming { sub, tracker, parser, answer, shape, pending, done: false };
    if first.is_some() {
        st.reply(first);
    }
    let events = futures_util::stream::unfold(st, |mut st| async move {
        loop {
            if let Some(event) = st.pending.pop_front() {
                return Some((Ok::<_, Infallible>(event), st));
            }
            if st.done {
                return None;
            }
            let reply = st.sub.replies.recv().await;
            st.reply(reply);
        }
    });
    if S::NDJSON {
        let lines = events.map(|e| e.map(|(_, data)| format!("{data}\n")));
        let body = axum::body::Body::from_stream(lines);
        return Ok(([(header::CONTENT_TYPE, "application/x-ndjson")], body).into_response());
    }
    let sse = events
        .map(|e| e.map(|(name, data)| SseEvent::default().event(name).data(data.to_string())));
    Ok(Sse::new(sse).keep_alive(KeepAlive::default()).into_response())
}
