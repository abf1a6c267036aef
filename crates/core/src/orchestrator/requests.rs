//! Requests of a session as its clients see them (pure): what one asks for, what became
//! of it, and the [`RequestBook`] that follows each live request's text (detokenized
//! token by token), cuts it at a stop string and makes its result. Time is explicit.

use std::collections::HashMap;
use std::time::Instant;

use serde::Serialize;

use super::scheduler::{FinishReason, SeqId};
use crate::model::tokenizer::{Detokenizer, Tokenizer};
use crate::wire::SamplingPolicy;
use crate::wire::reason::{FaultReason, RequestEnd};

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
    /// Whether its tokens may be drafted and verified several at a time where the
    /// session speculates (`"speculative": false` opts a request out).
    pub speculative: bool,
    /// Whether it may start from a prefix its slot's caches hold (`"cache_prompt": false`
    /// opts a request out: every prompt token is computed).
    pub cache_prompt: bool,
    /// The grammar its tokens must follow (`response_format`), if any.
    pub constraint: Option<crate::model::constraint::SharedConstraint>,
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
    /// Prompt tokens found cached (not computed again).
    pub cached_tokens: u32,
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
        cached_tokens: 0,
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
    /// Tokens generated before the sequence last resumed (its replay's tail): the
    /// scheduler's token log of the resumed sequence counts them as prompt.
    prior: Vec<u32>,
    /// Times it was resumed.
    resumed: u32,
}

/// A sequence kept across a re-formation: its text so far and its token log.
struct Kept<'t> {
    live: Live<'t>,
    prompt: Vec<u32>,
    generated: Vec<u32>,
}

/// What a kept sequence replays when it resumes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replay {
    /// The prompt and every token generated so far: the resumed sequence's prefill.
    pub tokens: Vec<u32>,
    /// Of which generated.
    pub generated: u32,
    /// Times it was resumed before.
    pub resumed: u32,
}

/// Why a request that did not finish ended: the run's fault, the operator's stop, or the
/// session's end (`membership.node_down`, `operator.stopped`, `session.ended`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionEnd {
    /// The run faulted.
    Fault(FaultReason),
    /// The operator stopped the session.
    OperatorStopped,
    /// The session ended.
    Ended,
}

impl std::fmt::Display for SessionEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SessionEnd::Fault(reason) => write!(f, "{reason}"),
            SessionEnd::OperatorStopped => f.write_str(RequestEnd::OperatorStopped.as_str()),
            SessionEnd::Ended => f.write_str(RequestEnd::SessionEnded.as_str()),
        }
    }
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
    kept: HashMap<usize, Kept<'t>>,
    results: HashMap<usize, RequestResult>,
    /// Times each request resumed (counted resumes only).
    resumes: HashMap<usize, u32>,
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
            kept: HashMap::new(),
            results: HashMap::new(),
            resumes: HashMap::new(),
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
        self.resumes.remove(&index);
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
            prior: Vec::new(),
            resumed: 0,
        };
        self.live.insert(seq, live);
    }

    /// `seq` ended with its session's fault and is kept to resume on a re-formed
    /// pipeline (`prompt` and `generated`: the scheduler's token log). Returns its request.
    pub fn keep(&mut self, seq: SeqId, prompt: &[u32], generated: Vec<u32>) -> Option<usize> {
        let live = self.live.remove(&seq)?;
        let own = prompt.len().saturating_sub(live.prior.len());
        let mut all = live.prior.clone();
        all.extend(generated);
        let index = live.index;
        self.kept.insert(index, Kept { live, prompt: prompt[..own].to_vec(), generated: all });
        Some(index)
    }

    /// The requests kept to resume, in request order.
    pub fn kept(&self) -> Vec<usize> {
        let mut kept: Vec<usize> = self.kept.keys().copied().collect();
        kept.sort_unstable();
        kept
    }

    /// What kept request `index` replays.
    pub fn replay(&self, index: usize) -> Option<Replay> {
        let k = self.kept.get(&index)?;
        let mut tokens = k.prompt.clone();
        tokens.extend_from_slice(&k.generated);
        Some(Replay { tokens, generated: k.generated.len() as u32, resumed: k.live.resumed })
    }

    /// Kept request `index` resumed as sequence `seq`: its text continues where it was.
    /// `counted`: the re-formation counts against its resume cap (a pool that grew does
    /// not).
    pub fn resumed(&mut self, index: usize, seq: SeqId, counted: bool) {
        if let Some(Kept { mut live, generated, .. }) = self.kept.remove(&index) {
            live.prior = generated;
            live.resumed += u32::from(counted);
            *self.resumes.entry(index).or_default() += u32::from(counted);
            self.live.insert(seq, live);
        }
    }

    /// Kept request `index` ends without resuming (`reason`; `fault` names the error of a
    /// [`FinishReason::Fault`]): as [`RequestBook::finished`].
    pub fn end_kept(
        &mut self,
        index: usize,
        reason: FinishReason,
        fault: &str,
    ) -> Option<(usize, &RequestResult, String)> {
        let Kept { mut live, prompt, generated } = self.kept.remove(&index)?;
        // Finish it as the sequence it was: its whole log, nothing counted as prompt.
        live.prior.clear();
        let seq = SeqId::MAX;
        self.live.insert(seq, live);
        self.finished(seq, reason, &prompt, generated, 0, fault)
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
        cached: u32,
        fault: &str,
    ) -> Option<(usize, &RequestResult, String)> {
        let mut live = self.live.remove(&seq)?;
        let tail = live.detok.finish();
        let mut rest = live.text.push(&tail).0;
        rest.push_str(&live.text.finish());
        let since = self.serving_since;
        let failed = reason == FinishReason::Fault;
        let prompt_tokens = prompt.len().saturating_sub(live.prior.len()) as u32;
        let mut tokens = std::mem::take(&mut live.prior);
        tokens.extend(generated);
        let result = RequestResult {
            id: self.ids.get(&live.index).cloned().unwrap_or_default(),
            text: live.text.text().to_string(),
            tokens,
            prompt_tokens,
            completion_tokens: live.tokens,
            cached_tokens: cached.min(prompt_tokens),
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

    /// Times request `index` resumed on a re-formed session (re-formations onto a pool
    /// that grew not counted).
    pub fn resumes(&self, index: usize) -> u32 {
        self.resumes.get(&index).copied().unwrap_or(0)
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
                    Some(req) => error_result(req, SessionEnd::Ended.to_string()),
                    None => error_for(id, SessionEnd::Ended.to_string()),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
