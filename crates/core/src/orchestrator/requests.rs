//! Requests of a session as its clients see them (pure): what one asks for, what became
//! of it, and the [`RequestBook`] that follows each live request's text (detokenized
//! token by token), cuts it at a stop string and makes its result. Time is explicit.

use std::collections::HashMap;
use std::time::Instant;

use serde::Serialize;

use super::scheduler::{FinishReason, SeqId};
use crate::model::tokenizer::{Detokenizer, Tokenizer};
use crate::wire::SamplingPolicy;

/// One request to a session.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The client's id for it (echoed in its result).
    pub id: String,
    /// Prompt token ids.
    pub prompt: Vec<u32>,
    /// Tokens to generate at most.
    pub max_tokens: u32,
    /// How its tokens are picked (temperature 0 is greedy).
    pub sampling: SamplingPolicy,
    /// Strings that end it when they appear in its text (the text is cut before them).
    pub stop: Vec<String>,
}

/// What became of one request: a result, or an error with a stable reason.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestResult {
    /// The request's id.
    pub id: String,
    /// Its text (cut before a stop string).
    pub text: String,
    /// Generated token ids (EOS excluded).
    #[serde(skip)]
    pub tokens: Vec<u32>,
    /// Prompt tokens.
    pub prompt_tokens: u32,
    /// Generated tokens.
    pub completion_tokens: u32,
    /// Why it ended (absent for an error).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<FinishReason>,
    /// The stable reason it failed (a refusal, or the session's fault as `class.code`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// From the moment the session could serve it to its first token, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<f64>,
}

impl RequestResult {
    /// Whether it failed.
    pub fn is_error(&self) -> bool {
        self.error.is_some()
    }
}

/// Where the earliest of `stops` begins in `text`, if one appears.
pub fn find_stop(text: &str, stops: &[String]) -> Option<usize> {
    stops.iter().filter(|s| !s.is_empty()).filter_map(|s| text.find(s.as_str())).min()
}

/// A result for a request that never ran (`error` is its stable reason).
pub fn error_result(request: &Request, error: String) -> RequestResult {
    RequestResult {
        id: request.id.clone(),
        text: String::new(),
        tokens: Vec::new(),
        prompt_tokens: request.prompt.len() as u32,
        completion_tokens: 0,
        finish_reason: None,
        error: Some(error),
        ttft_ms: None,
    }
}

/// What a session's new token means for its request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenNote {
    /// The request (its index).
    pub index: usize,
    /// The text the token adds (possibly empty while a character is incomplete).
    pub piece: String,
    /// A stop string appeared: cancel the sequence with [`FinishReason::Stop`].
    pub stop: bool,
}

struct Live<'t> {
    index: usize,
    detok: Detokenizer<'t>,
    text: String,
    tokens: u32,
    first_at: Option<Instant>,
    stopped: bool,
}

/// Every request of a session: the live ones' text, and every result once known.
pub struct RequestBook<'t> {
    tokenizer: &'t Tokenizer,
    requests: Vec<Request>,
    live: HashMap<SeqId, Live<'t>>,
    results: Vec<Option<RequestResult>>,
    serving_since: Option<Instant>,
}

impl<'t> RequestBook<'t> {
    /// A book of `requests` (in request order), none live yet.
    pub fn new(tokenizer: &'t Tokenizer, requests: Vec<Request>) -> RequestBook<'t> {
        let results = vec![None; requests.len()];
        RequestBook { tokenizer, requests, live: HashMap::new(), results, serving_since: None }
    }

    /// The requests, in order.
    pub fn requests(&self) -> &[Request] {
        &self.requests
    }

    /// Request `index` became sequence `seq` of the session.
    pub fn admitted(&mut self, index: usize, seq: SeqId) {
        let live = Live {
            index,
            detok: Detokenizer::new(self.tokenizer),
            text: String::new(),
            tokens: 0,
            first_at: None,
            stopped: false,
        };
        self.live.insert(seq, live);
    }

    /// Request `index` was refused (`reason`, a stable code); returns its result.
    pub fn refused(&mut self, index: usize, reason: &str) -> &RequestResult {
        let r = error_result(&self.requests[index], reason.to_string());
        self.results[index].insert(r)
    }

    /// The session could serve from `now` on (times to first token count from here).
    pub fn serving(&mut self, now: Instant) {
        self.serving_since.get_or_insert(now);
    }

    /// A token of `seq` at `now`: its text, and whether a stop string ends it. Tokens
    /// after a stop (already in flight) are dropped (`None`).
    pub fn token(&mut self, now: Instant, seq: SeqId, token: u32) -> Option<TokenNote> {
        let live = self.live.get_mut(&seq)?;
        if live.stopped {
            return None;
        }
        live.first_at.get_or_insert(now);
        live.tokens += 1;
        let piece = live.detok.push(token);
        live.text.push_str(&piece);
        let stop = match find_stop(&live.text, &self.requests[live.index].stop) {
            Some(at) => {
                live.text.truncate(at);
                live.stopped = true;
                true
            }
            None => false,
        };
        Some(TokenNote { index: live.index, piece, stop })
    }

    /// `seq` ended: its result (an error naming `fault` when the session's fault ended
    /// it). Returns the request's index and result, and the detokenizer's tail.
    pub fn finished(
        &mut self,
        seq: SeqId,
        reason: FinishReason,
        prompt: &[u32],
        generated: Vec<u32>,
        fault: &str,
    ) -> Option<(usize, &RequestResult, String)> {
        let mut live = self.live.remove(&seq)?;
        let tail = live.detok.finish();
        if !live.stopped {
            live.text.push_str(&tail);
            if let Some(at) = find_stop(&live.text, &self.requests[live.index].stop) {
                live.text.truncate(at);
            }
        }
        let since = self.serving_since;
        let failed = reason == FinishReason::Fault;
        let result = RequestResult {
            id: self.requests[live.index].id.clone(),
            text: live.text,
            tokens: generated,
            prompt_tokens: prompt.len() as u32,
            completion_tokens: live.tokens,
            finish_reason: (!failed).then_some(reason),
            error: failed.then(|| fault.to_string()),
            ttft_ms: live
                .first_at
                .zip(since)
                .map(|(t, s)| t.saturating_duration_since(s).as_secs_f64() * 1e3),
        };
        let index = live.index;
        Some((index, self.results[index].insert(result), tail))
    }

    /// Request `index`'s result, once it has one.
    pub fn result(&self, index: usize) -> Option<&RequestResult> {
        self.results.get(index).and_then(Option::as_ref)
    }

    /// Every request's result in order; one that never got one is an error `unfinished`.
    pub fn into_results(self) -> Vec<RequestResult> {
        self.results
            .into_iter()
            .zip(&self.requests)
            .map(|(r, req)| r.unwrap_or_else(|| error_result(req, "session.ended".into())))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_earliest_stop_string_cuts_the_text_and_empty_ones_never_match() {
        let stops = vec![String::new(), "lo w".into(), "l".into()];
        assert_eq!(find_stop("hello world", &stops), Some(2));
        assert_eq!(find_stop("hi", &stops), None);
        assert_eq!(find_stop("anything", &[]), None);
    }

    /// A byte-level BPE tokenizer without merges: one token per byte.
    fn tokenizer(_test: &str) -> Tokenizer {
        use crate::model::tokenizer::{Kind, byte_to_unicode, pre_tokenizer};
        let tokens: Vec<String> = byte_to_unicode().iter().map(|c| c.to_string()).collect();
        let n = tokens.len();
        let (pre, ignore_merges) = pre_tokenizer("default").expect("the default pre-tokenizer");
        let kind = Kind::Bpe { pre: pre.into_iter().map(String::from).collect(), ignore_merges };
        Tokenizer::new(kind, tokens, vec![1; n], vec![0.0; n], &[], None, None, false)
            .expect("tokenizer")
    }

    #[test]
    #[allow(clippy::disallowed_methods)] // a test owns the clock
    fn a_request_stops_at_its_stop_string_drops_later_tokens_and_keeps_the_text_before_it() {
        let tok = tokenizer("stop");
        let ids = tok.encode("hello world, goodbye", false, false);
        let req = Request {
            id: "a".into(),
            prompt: vec![1, 2, 3],
            max_tokens: 50,
            sampling: SamplingPolicy::Greedy,
            stop: vec![", good".into()],
        };
        let mut book = RequestBook::new(&tok, vec![req]);
        let t0 = Instant::now();
        book.serving(t0);
        book.admitted(0, 7);
        let mut stopped = false;
        for &id in &ids {
            match book.token(t0, 7, id) {
                Some(note) => stopped |= note.stop,
                None => assert!(stopped, "only tokens after the stop are dropped"),
            }
        }
        assert!(stopped);
        let (index, r, _) =
            book.finished(7, FinishReason::Stop, &[1, 2, 3], vec![], "").expect("live");
        assert_eq!((index, r.text.as_str()), (0, "hello world"));
        assert_eq!(r.finish_reason, Some(FinishReason::Stop));
        assert_eq!(r.ttft_ms, Some(0.0));
    }

    #[test]
    fn a_sequence_ended_by_the_sessions_fault_is_an_error_naming_it_and_unrun_ones_say_so() {
        let tok = tokenizer("fault");
        let req = |id: &str| Request {
            id: id.into(),
            prompt: vec![1],
            max_tokens: 5,
            sampling: SamplingPolicy::Greedy,
            stop: vec![],
        };
        let mut book = RequestBook::new(&tok, vec![req("a"), req("b"), req("c")]);
        book.admitted(0, 0);
        assert_eq!(book.refused(1, "busy").error.as_deref(), Some("busy"));
        let (_, r, _) = book
            .finished(0, FinishReason::Fault, &[1], vec![], "membership.node_down")
            .expect("live");
        assert_eq!(r.error.as_deref(), Some("membership.node_down"));
        assert_eq!(r.finish_reason, None);
        let all = book.into_results();
        assert_eq!(all[2].error.as_deref(), Some("session.ended"));
    }
}
