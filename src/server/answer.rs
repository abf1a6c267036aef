//! A submitted request's answer: whole (once its result arrives) or streamed as
//! server-sent events straight off its reply channel, with its tokens' log-probabilities
//! when it asked for them. A chat's answer is read ([`Reader`]) into content, reasoning
//! and tool calls.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;

use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::failure::Failure;
use super::state::Submitted;
use super::track::Tracker;
use crate::chat::{OutputParser, parse_whole};
use crate::model::tokenizer::Tokenizer;
use crate::orchestrator::driver::served::Reply;
use crate::orchestrator::scheduler::FinishReason;
use crate::serve::chat_answer::{self, ChatAnswer};
use crate::serve::shapes::{Meta, TextOffsets, TokenChoice, Usage, finish_reason};
use crate::wire::logprobs::TokenLogprobs;
use crate::wire::reason::RequestEnd;

/// Reads a chat's answer as it comes: its parser, and what it read so far.
pub struct Reader {
    parser: OutputParser,
    ticket: u64,
    answer: ChatAnswer,
}

impl Reader {
    /// A reader of request `ticket`'s answer.
    pub fn new(parser: OutputParser, ticket: u64) -> Reader {
        Reader { parser, ticket, answer: ChatAnswer::default() }
    }
}

/// A token's log-probabilities with the texts of it and its alternatives, its text at
/// `offset`.
fn choice(tok: &Tokenizer, id: u32, lp: &TokenLogprobs, offset: usize) -> TokenChoice {
    let text = |id: u32| {
        let bytes = tok.token_bytes(id);
        (String::from_utf8_lossy(&bytes).into_owned(), bytes)
    };
    let (token, bytes) = text(id);
    let top = lp
        .top
        .iter()
        .map(|&(alt, l)| {
            let (s, b) = text(alt);
            (s, b, l)
        })
        .collect();
    TokenChoice { token, bytes, logprob: lp.logprob, top, offset }
}

/// Waits for the result and answers it whole.
pub async fn whole(
    meta: Meta,
    mut sub: Submitted,
    mut tracker: Tracker,
    tok: Arc<Tokenizer>,
    read: Option<Reader>,
) -> Result<Response, Failure> {
    let mut choices = Vec::new();
    let mut offsets = TextOffsets::default();
    let result = loop {
        match sub.replies.recv().await {
            Some(Reply::Started) => tracker.started(),
            Some(Reply::Token { id, logprobs, .. }) => {
                tracker.token();
                let offset = offsets.next(&tok, id);
                if let Some(lp) = logprobs {
                    choices.push(choice(&tok, id, &lp, offset));
                }
            }
            Some(Reply::Text(_)) => {}
            Some(Reply::Done(r)) => break r,
            None => {
                sub.guard.disarm();
                let e = tracker.failed(RequestEnd::SessionEnded.as_str());
                return Err(e.into());
            }
        }
    };
    sub.guard.disarm();
    if let Some(err) = &result.error {
        return Err(tracker.failed(err).into());
    }
    let mut finish = finish_reason(result.finish_reason.unwrap_or(FinishReason::Eos));
    let read = read.map(|mut r| {
        r.answer.add(parse_whole(&mut r.parser, &result.text));
        finish = r.answer.finish(finish);
        r
    });
    let timings = tracker.finished(finish, result.completion_tokens, result.cached_tokens);
    let usage = Usage::new(result.prompt_tokens, result.completion_tokens)
        .with_cached(result.cached_tokens);
    let mut v = meta.response(&result.text, finish, usage, timings);
    if let Some(r) = &read {
        v["choices"][0]["message"] = chat_answer::message(r.ticket, &r.answer);
    }
    if !choices.is_empty() {
        v["choices"][0]["logprobs"] = meta.logprobs_value(&choices);
    }
    Ok(axum::Json(v).into_response())
}

/// Waits for a streamed request's first reply: `None` once it took a slot, or a reply that
/// came first; a request refused or a session gone before that is an error with its status
/// (never `200` and an error event).
pub async fn stream_head(
    sub: &mut Submitted,
    tracker: &mut Tracker,
) -> Result<Option<Reply>, Failure> {
    match sub.replies.recv().await {
        Some(Reply::Started) => {
            tracker.started();
            Ok(None)
        }
        Some(Reply::Done(r)) if r.error.is_some() => {
            sub.guard.disarm();
            Err(tracker.failed(r.error.as_deref().unwrap_or_default()).into())
        }
        None => {
            sub.guard.disarm();
            Err(tracker.failed(RequestEnd::SessionEnded.as_str()).into())
        }
        other => Ok(other),
    }
}

/// Streams the request as server-sent events, read straight off its reply channel; a
/// client that goes away drops the body, and with it the guard that cancels the sequence.
/// The response's head waits until the request took a slot: one refused (a full queue,
/// a session gone) is answered with its status (429, 503, with `Retry-After`), never
/// `200` and an error event.
pub async fn stream(
    meta: Meta,
    mut sub: Submitted,
    mut tracker: Tracker,
    include_usage: bool,
    tok: Arc<Tokenizer>,
    read: Option<Reader>,
) -> Result<Response, Failure> {
    let first = stream_head(&mut sub, &mut tracker).await?;
    let mut pending = VecDeque::new();
    if let Some(first) = meta.role_chunk() {
        pending.push_back(first.to_string());
    }
    let offsets = TextOffsets::default();
    let mut state =
        Streaming { meta, sub, tracker, include_usage, pending, done: false, tok, offsets, read };
    if first.is_some() {
        state.reply(first);
    }
    let events = futures_util::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(data) = st.pending.pop_front() {
                return Some((Ok::<_, Infallible>(SseEvent::default().data(data)), st));
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

/// A streamed request between its replies and its events.
struct Streaming {
    meta: Meta,
    sub: Submitted,
    tracker: Tracker,
    include_usage: bool,
    pending: VecDeque<String>,
    done: bool,
    tok: Arc<Tokenizer>,
    /// Where each token's text begins (a completion's `text_offset`).
    offsets: TextOffsets,
    /// A chat's answer, read as it streams.
    read: Option<Reader>,
}

impl Streaming {
    /// Text of the answer: as it is, or read into content, reasoning and tool calls.
    fn text(&mut self, text: &str) {
        match &mut self.read {
            Some(r) => {
                for d in r.parser.push(text) {
                    self.pending.extend(chat_answer::delta_chunks(&self.meta, r.ticket, &d));
                    r.answer.add(vec![d]);
                }
            }
            None if !text.is_empty() => self.pending.push_back(self.meta.text_chunk(text)),
            None => {}
        }
    }

    /// Turns one reply into the events it means (`None`: the session ended first).
    fn reply(&mut self, reply: Option<Reply>) {
        match reply {
            Some(Reply::Started) => self.tracker.started(),
            Some(Reply::Token { id, piece, logprobs }) if self.read.is_some() => {
                self.tracker.token();
                let offset = self.offsets.next(&self.tok, id);
                if let Some(lp) = logprobs {
                    let c = choice(&self.tok, id, &lp, offset);
                    let v = self.meta.logprobs_value(&[c]);
                    self.pending.push_back(self.meta.text_chunk_with("", v));
                }
                self.text(&piece);
            }
            Some(Reply::Token { id, piece, logprobs }) => {
                self.tracker.token();
                let offset = self.offsets.next(&self.tok, id);
                match logprobs {
                    Some(lp) => {
                        let c = choice(&self.tok, id, &lp, offset);
                        let v = self.meta.logprobs_value(&[c]);
                        self.pending.push_back(self.meta.text_chunk_with(&piece, v));
                    }
                    None if !piece.is_empty() => {
                        self.pending.push_back(self.meta.text_chunk(&piece));
                    }
                    None => {}
                }
            }
            Some(Reply::Text(t)) => self.text(&t),
            Some(Reply::Done(r)) => {
                self.sub.guard.disarm();
                self.done = true;
                if let Some(err) = &r.error {
                    let e = self.tracker.failed(err);
                    self.pending.push_back(json!({"error": e}).to_string());
                    return;
                }
                let reason = r.finish_reason.unwrap_or(FinishReason::Eos);
                let mut finish = finish_reason(reason);
                if let Some(read) = &mut self.read {
                    for d in read.parser.finish() {
                        self.pending.extend(chat_answer::delta_chunks(&self.meta, read.ticket, &d));
                        read.answer.add(vec![d]);
                    }
                    finish = read.answer.finish(finish);
                }
                let timings = self.tracker.finished(finish, r.completion_tokens, r.cached_tokens);
                self.pending.push_back(self.meta.finish_chunk(finish, timings).to_string());
                if self.include_usage {
                    let usage = Usage::new(r.prompt_tokens, r.completion_tokens)
                        .with_cached(r.cached_tokens);
                    self.pending.push_back(self.meta.usage_chunk(usage, timings).to_string());
                }
                self.pending.push_back("[DONE]".into());
            }
            None => {
                self.sub.guard.disarm();
                self.done = true;
                let e = self.tracker.failed(RequestEnd::SessionEnded.as_str());
                self.pending.push_back(json!({"error": e}).to_string());
            }
        }
    }
}
