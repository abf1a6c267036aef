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
    /// Log-probabilities of each token and this many alternatives (`None`: none).
    pub logprobs: Option<u32>,
}

/// What became of one request: a result, or an error with a stable reason.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestResult {
    /// The request's id (a batch job's output writes it as the request gave it).
    #[serde(skip)]
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
    /// From the moment the session could serve it to its first token, in milliseconds,
    /// rounded to a tenth.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<f64>,
}

impl RequestResult {
    /// Whether it failed.
    pub fn is_error(&self) -> bool {
        self.error.is_some()
    }
}

/// The most stop strings one request may give (OpenAI allows 4).
pub const MAX_STOPS: usize = 16;
/// The longest stop string, in bytes.
pub const MAX_STOP_BYTES: usize = 256;

/// Where the earliest of `stops` begins in `text`, if one appears.
pub fn find_stop(text: &str, stops: &[String]) -> Option<usize> {
    stops.iter().filter(|s| !s.is_empty()).filter_map(|s| text.find(s.as_str())).min()
}

/// The largest char boundary of `text` at or below `at`.
fn floor_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// A request's text as it grows, matched against its stop strings incrementally, with the
/// text that may still become a stop string held back: what [`StopText::push`] releases,
/// concatenated, is always a prefix of the final text, and [`StopText::finish`] releases
/// the rest. Each push searches only the new text and the longest stop string's tail
/// before it.
#[derive(Debug, Clone, Default)]
pub struct StopText {
    stops: Vec<String>,
    longest: usize,
    text: String,
    released: usize,
    stopped: bool,
    scanned: u64,
}

impl StopText {
    /// Empty text matched against `stops` (empty ones never match).
    pub fn new(stops: &[String]) -> StopText {
        let stops: Vec<String> = stops.iter().filter(|s| !s.is_empty()).cloned().collect();
        let longest = stops.iter().map(String::len).max().unwrap_or(0);
        StopText { stops, longest, ..StopText::default() }
    }

    /// Appends `piece`: the text now safe to release, and whether a stop string appeared
    /// (the text is cut before it; later pieces are ignored).
    pub fn push(&mut self, piece: &str) -> (String, bool) {
        if self.stopped {
            return (String::new(), true);
        }
        let old = self.text.len();
        self.text.push_str(piece);
        let from = floor_boundary(&self.text, old.saturating_sub(self.longest.saturating_sub(1)));
        let window = &self.text[from..];
        self.scanned += window.len() as u64;
        if let Some(at) = find_stop(window, &self.stops) {
            self.text.truncate(from + at);
            self.stopped = true;
            return (self.release(self.text.len()), true);
        }
        let hold = self.hold_from();
        (self.release(hold), false)
    }

    /// The end: the text not released yet (all of it, cut at a stop string).
    pub fn finish(&mut self) -> String {
        self.release(self.text.len())
    }

    /// The whole text so far (cut at a stop string).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether a stop string appeared.
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// Bytes searched so far (the cost of matching).
    pub fn scanned(&self) -> u64 {
        self.scanned
    }

    /// Where the held-back text begins: the earliest position whose suffix is a proper
    /// prefix of a stop string (the text's end when none is).
    fn hold_from(&self) -> usize {
        let len = self.text.len();
        let lowest = self.released.max(len.saturating_sub(self.longest.saturating_sub(1)));
        let mut at = floor_boundary(&self.text, lowest);
        if at < self.released {
            at = self.released;
        }
        while at < len {
            if self.text.is_char_boundary(at) {
                let tail = &self.text[at..];
                if self.stops.iter().any(|s| s.starts_with(tail)) {
                    return at;
                }
            }
            at += 1;
        }
        len
    }

    fn release(&mut self, to: usize) -> String {
        let from = self.released.min(to);
        self.released = to.max(self.released);
        self.text[from..to].to_string()
    }
}

/// A result for a request that never ran (`error` is its stable reason).
pub fn error_result(request: &Request, error: String) -> RequestResult {
    RequestResult {
        prompt_tokens: request.prompt.len() as u32,
        ..error_for(request.id.clone(), error)
    }
}

/// A result for the request `id` that failed before it was known (`error`, its reason).
pub fn error_for(id: String, error: String) -> RequestResult {
    RequestResult {
        id,
        text: String::new(),
        tokens: Vec::new(),
        prompt_tokens: 0,
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
    /// The text the token releases: empty while a character is incomplete or while the
    /// text may still become a stop string (held back until it cannot).
    pub piece: String,
    /// A stop string appeared: cancel the sequence with [`FinishReason::Stop`].
    pub stop: bool,
}

struct Live<'t> {
    index: usize,
    detok: Detokenizer<'t>,
    text: StopText,
    tokens: u32,
    first_at: Option<Instant>,
}

/// Every request of a session: the live ones' text, and every result once known. A
/// request may be known by its id alone until it arrives ([`RequestBook::expecting`]).
/// Storage is sparse: a served request is forgotten once its client has its result
/// ([`RequestBook::forget`]), so a long-lived server's book holds only what is live.
pub struct RequestBook<'t> {
    tokenizer: &'t Tokenizer,
    /// Indices handed out so far.
    len: usize,
    ids: HashMap<usize, String>,
    requests: HashMap<usize, Request>,
    live: HashMap<SeqId, Live<'t>>,
    results: HashMap<usize, RequestResult>,
    serving_since: Option<Instant>,
}

impl<'t> RequestBook<'t> {
    /// A book of `requests` (in request order), none live yet.
    pub fn new(tokenizer: &'t Tokenizer, requests: Vec<Request>) -> RequestBook<'t> {
        let ids = requests.iter().map(|r| r.id.clone()).collect();
        let mut book = RequestBook::expecting(tokenizer, ids);
        book.requests = requests.into_iter().enumerate().collect();
        book
    }

    /// A book of requests known so far by their `ids` (in request order): each arrives
    /// later ([`RequestBook::arrived`]).
    pub fn expecting(tokenizer: &'t Tokenizer, ids: Vec<String>) -> RequestBook<'t> {
        RequestBook {
            tokenizer,
            len: ids.len(),
            ids: ids.into_iter().enumerate().collect(),
            requests: HashMap::new(),
            live: HashMap::new(),
            results: HashMap::new(),
            serving_since: None,
        }
    }

    /// How many requests the book was given (arrived or not, forgotten included).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the book was given no request.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Request `index` arrived (its id is the book's, whatever `request` says). Ignored
    /// past the book's requests.
    pub fn arrived(&mut self, index: usize, request: Request) {
        if let Some(id) = self.ids.get(&index) {
            self.requests.insert(index, Request { id: id.clone(), ..request });
        }
    }

    /// Adds a request that arrived unannounced (a server's); returns its index.
    pub fn push(&mut self, request: Request) -> usize {
        let index = self.len;
        self.len += 1;
        self.ids.insert(index, request.id.clone());
        self.requests.insert(index, request);
        index
    }

    /// Drops request `index` and its result (its client has it): it is no longer
    /// unresolved and no longer among [`RequestBook::into_results`].
    pub fn forget(&mut self, index: usize) {
        self.ids.remove(&index);
        self.requests.remove(&index);
        self.results.remove(&index);
    }

    /// The request of live sequence `seq`.
    pub fn index_of(&self, seq: SeqId) -> Option<usize> {
        self.live.get(&seq).map(|l| l.index)
    }

    /// The live sequence of request `index`, if it has one.
    pub fn seq_of(&self, index: usize) -> Option<SeqId> {
        self.live.iter().find(|(_, l)| l.index == index).map(|(seq, _)| *seq)
    }

    /// Request `index`, once it arrived.
    pub fn request(&self, index: usize) -> Option<&Request> {
        self.requests.get(&index)
    }

    /// Request `index` became sequence `seq` of the session.
    pub fn admitted(&mut self, index: usize, seq: SeqId) {
        let stops = self.request(index).map(|r| r.stop.as_slice()).unwrap_or_default();
        let live = Live {
            index,
            detok: Detokenizer::new(self.tokenizer),
            text: StopText::new(stops),
            tokens: 0,
            first_at: None,
        };
        self.live.insert(seq, live);
    }

    /// Request `index` failed before it ran (`reason`, a stable code); returns its result.
    /// Ignored past the book's requests.
    pub fn refused(&mut self, index: usize, reason: &str) -> Option<&RequestResult> {
        let r = match self.request(index) {
            Some(req) => error_result(req, reason.to_string()),
            None => error_for(self.ids.get(&index)?.clone(), reason.to_string()),
        };
        self.results.insert(index, r);
        self.results.get(&index)
    }

    /// The session could serve from `now` on (times to first token count from here).
    pub fn serving(&mut self, now: Instant) {
        self.serving_since.get_or_insert(now);
    }

    /// A token of `seq` at `now`: the text it releases, and whether a stop string ends it.
    /// Tokens after a stop (already in flight) are dropped (`None`).
    pub fn token(&mut self, now: Instant, seq: SeqId, token: u32) -> Option<TokenNote> {
        let live = self.live.get_mut(&seq)?;
        if live.text.stopped() {
            return None;
        }
        live.first_at.get_or_insert(now);
        live.tokens += 1;
        let piece = live.detok.push(token);
        let (piece, stop) = live.text.push(&piece);
        Some(TokenNote { index: live.index, piece, stop })
    }

    /// `seq` ended: its result (an error naming `fault` when the session's fault ended
    /// it). Returns the request's index and result, and the text not released yet (the
    /// detokenizer's tail and what was held back), so that the released pieces and it
    /// concatenated are the result's text.
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
        let mut rest = live.text.push(&tail).0;
        rest.push_str(&live.text.finish());
        let since = self.serving_since;
        let failed = reason == FinishReason::Fault;
        let result = RequestResult {
            id: self.ids.get(&live.index).cloned().unwrap_or_default(),
            text: live.text.text().to_string(),
            tokens: generated,
            prompt_tokens: prompt.len() as u32,
            completion_tokens: live.tokens,
            finish_reason: (!failed).then_some(reason),
            error: failed.then(|| fault.to_string()),
            ttft_ms: live
                .first_at
                .zip(since)
                .map(|(t, s)| (t.saturating_duration_since(s).as_secs_f64() * 1e4).round() / 10.0),
        };
        let index = live.index;
        self.results.insert(index, result);
        Some((index, self.results.get(&index)?, rest))
    }

    /// Request `index`'s result, once it has one.
    pub fn result(&self, index: usize) -> Option<&RequestResult> {
        self.results.get(&index)
    }

    /// The requests without a result yet, in order.
    pub fn unresolved(&self) -> Vec<usize> {
        let mut open: Vec<usize> =
            self.ids.keys().copied().filter(|i| !self.results.contains_key(i)).collect();
        open.sort_unstable();
        open
    }

    /// Every request's result in order; one that never got one is an error
    /// `session.ended`.
    pub fn into_results(mut self) -> Vec<RequestResult> {
        let mut ids: Vec<(usize, String)> = self.ids.drain().collect();
        ids.sort_unstable_by_key(|(i, _)| *i);
        ids.into_iter()
            .map(|(i, id)| {
                self.results.remove(&i).unwrap_or_else(|| match self.requests.get(&i) {
                    Some(req) => error_result(req, "session.ended".into()),
                    None => error_for(id, "session.ended".into()),
                })
            })
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
            logprobs: None,
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
    #[allow(clippy::disallowed_methods)] // a test owns the clock
    fn the_time_to_first_token_is_given_in_milliseconds_rounded_to_a_tenth() {
        let tok = tokenizer("ttft");
        let req = Request {
            id: "a".into(),
            prompt: vec![1],
            max_tokens: 1,
            sampling: SamplingPolicy::Greedy,
            stop: Vec::new(),
            logprobs: None,
        };
        let mut book = RequestBook::new(&tok, vec![req]);
        let t0 = Instant::now();
        book.serving(t0);
        book.admitted(0, 1);
        let at = t0 + std::time::Duration::from_nanos(12_345_678);
        book.token(at, 1, 104);
        let (_, r, _) =
            book.finished(1, FinishReason::MaxTokens, &[1], vec![104], "").expect("live");
        assert_eq!(r.ttft_ms, Some(12.3));
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
            logprobs: None,
        };
        let mut book = RequestBook::new(&tok, vec![req("a"), req("b"), req("c")]);
        book.admitted(0, 0);
        assert_eq!(book.refused(1, "busy").and_then(|r| r.error.as_deref()), Some("busy"));
        let (_, r, _) = book
            .finished(0, FinishReason::Fault, &[1], vec![], "membership.node_down")
            .expect("live");
        assert_eq!(r.error.as_deref(), Some("membership.node_down"));
        assert_eq!(r.finish_reason, None);
        let all = book.into_results();
        assert_eq!(all[2].error.as_deref(), Some("session.ended"));
    }

    /// Feeds `text` one byte-token at a time; returns the streamed pieces, the rest, and
    /// the result's text.
    fn stream(text: &str, stops: &[&str]) -> (Vec<String>, String, String) {
        let tok = tokenizer("stream");
        let req = Request {
            id: "s".into(),
            prompt: vec![1],
            max_tokens: 100,
            sampling: SamplingPolicy::Greedy,
            stop: stops.iter().map(|s| s.to_string()).collect(),
            logprobs: None,
        };
        let mut book = RequestBook::new(&tok, vec![req]);
        book.admitted(0, 1);
        #[allow(clippy::disallowed_methods)] // a test owns the clock
        let now = Instant::now();
        let mut pieces = Vec::new();
        for id in tok.encode(text, false, false) {
            if let Some(note) = book.token(now, 1, id) {
                pieces.push(note.piece);
            }
        }
        let (_, r, rest) =
            book.finished(1, FinishReason::MaxTokens, &[1], vec![], "").expect("live");
        (pieces, rest, r.text.clone())
    }

    #[test]
    fn streamed_text_never_contains_what_becomes_a_stop_string_and_adds_up_to_the_result() {
        let (pieces, rest, text) = stream("hello, the end", &[", the"]);
        assert_eq!(text, "hello");
        assert_eq!(pieces.concat() + &rest, text, "the stream says what the result says");
        assert!(pieces.iter().all(|p| !p.contains(',')), "{pieces:?}");
    }

    #[test]
    fn text_held_back_for_a_stop_string_that_never_completes_is_released_at_the_end() {
        let (pieces, rest, text) = stream("a, th", &[", the", "zz"]);
        assert_eq!(text, "a, th");
        assert_eq!(pieces.concat(), "a", "\", th\" may still become \", the\"");
        assert_eq!(rest, ", th");
        let (pieces, rest, text) = stream("plain words", &[]);
        assert_eq!(
            (pieces.concat(), rest.as_str(), text.as_str()),
            (text.clone(), "", "plain words")
        );
    }

    #[test]
    fn stop_strings_are_matched_on_the_new_text_and_the_longest_stops_tail_only() {
        let stops: Vec<String> = vec!["needle".into(), "xyz".into()];
        let mut text = StopText::new(&stops);
        let mut released = String::new();
        for _ in 0..10_000 {
            let (piece, stop) = text.push("hay ");
            assert!(!stop);
            released.push_str(&piece);
        }
        // Each push searches its 4 bytes and at most 5 bytes before them.
        assert!(text.scanned() <= 10_000 * 9, "{} bytes searched", text.scanned());
        let (piece, stop) = text.push("nee");
        assert!(!stop && piece.is_empty());
        let (piece, stop) = text.push("dle and more");
        assert!(stop && piece.is_empty(), "{piece:?}");
        assert_eq!(text.text().len(), 40_000);
        assert_eq!(released + &text.finish(), "hay ".repeat(10_000));
    }

    #[test]
    fn a_stop_string_across_multibyte_characters_is_found_and_cut_on_a_boundary() {
        let stops: Vec<String> = vec!["éé".into()];
        let mut text = StopText::new(&stops);
        assert_eq!(text.push("aé"), ("a".to_string(), false));
        assert_eq!(text.push("éb"), (String::new(), true));
        assert_eq!(text.text(), "a");
    }
}
