//! The request book's and stop strings' tests.
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
        speculative: true,
        cache_prompt: true,
        constraint: None,
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
        book.finished(7, FinishReason::Stop, &[1, 2, 3], vec![], 0, "").expect("live");
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
        speculative: true,
        cache_prompt: true,
        constraint: None,
    };
    let mut book = RequestBook::new(&tok, vec![req]);
    let t0 = Instant::now();
    book.serving(t0);
    book.admitted(0, 1);
    let at = t0 + std::time::Duration::from_nanos(12_345_678);
    book.token(at, 1, 104);
    let (_, r, _) =
        book.finished(1, FinishReason::MaxTokens, &[1], vec![104], 0, "").expect("live");
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
        speculative: true,
        cache_prompt: true,
        constraint: None,
    };
    let mut book = RequestBook::new(&tok, vec![req("a"), req("b"), req("c")]);
    book.admitted(0, 0);
    assert_eq!(book.refused(1, "busy").and_then(|r| r.error.as_deref()), Some("busy"));
    let (_, r, _) = book
        .finished(0, FinishReason::Fault, &[1], vec![], 0, "membership.node_down")
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
        speculative: true,
        cache_prompt: true,
        constraint: None,
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
        book.finished(1, FinishReason::MaxTokens, &[1], vec![], 0, "").expect("live");
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
    assert_eq!((pieces.concat(), rest.as_str(), text.as_str()), (text.clone(), "", "plain words"));
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

#[test]
#[allow(clippy::disallowed_methods)] // a test owns the clock
fn a_kept_sequence_resumes_with_its_text_and_counts_and_its_result_covers_both_runs() {
    let tok = tokenizer("keep");
    let ids = tok.encode("hello world", false, false);
    let req = Request {
        id: "k".into(),
        prompt: vec![1, 2],
        max_tokens: 50,
        sampling: SamplingPolicy::Greedy,
        stop: vec![],
        logprobs: None,
        speculative: true,
        cache_prompt: true,
        constraint: None,
    };
    let mut book = RequestBook::new(&tok, vec![req]);
    let t0 = Instant::now();
    book.admitted(0, 3);
    let mut text = String::new();
    for &id in &ids[..5] {
        text.push_str(&book.token(t0, 3, id).expect("live").piece);
    }
    assert_eq!(book.keep(3, &[1, 2], ids[..5].to_vec()), Some(0));
    assert_eq!(book.kept(), vec![0]);
    assert!(book.unresolved().contains(&0), "a kept request has no result yet");
    let replay = book.replay(0).expect("kept");
    assert_eq!(replay.tokens, [&[1, 2][..], &ids[..5]].concat());
    assert_eq!((replay.generated, replay.resumed), (5, 0));
    book.resumed(0, 9, true);
    for &id in &ids[5..] {
        text.push_str(&book.token(t0, 9, id).expect("live again").piece);
    }
    let (index, r, rest) = book
        .finished(9, FinishReason::Eos, &replay.tokens, ids[5..].to_vec(), 0, "")
        .expect("live");
    text.push_str(&rest);
    assert_eq!((index, r.text.as_str(), text.as_str()), (0, "hello world", "hello world"));
    assert_eq!(r.tokens, ids);
    assert_eq!((r.prompt_tokens, r.completion_tokens), (2, ids.len() as u32));
}

#[test]
fn a_kept_sequence_that_cannot_resume_ends_with_the_fault_and_its_text_so_far() {
    let tok = tokenizer("end");
    let req = Request {
        id: "e".into(),
        prompt: vec![1],
        max_tokens: 50,
        sampling: SamplingPolicy::Greedy,
        stop: vec![],
        logprobs: None,
        speculative: true,
        cache_prompt: true,
        constraint: None,
    };
    let mut book = RequestBook::new(&tok, vec![req]);
    book.admitted(0, 1);
    #[allow(clippy::disallowed_methods)] // a test owns the clock
    let now = Instant::now();
    let ids = tok.encode("abc", false, false);
    for &id in &ids {
        book.token(now, 1, id);
    }
    book.keep(1, &[1], ids.clone());
    let (_, r, _) = book.end_kept(0, FinishReason::Fault, "membership.node_down").expect("kept");
    assert_eq!(r.error.as_deref(), Some("membership.node_down"));
    assert_eq!((r.tokens.clone(), r.prompt_tokens, r.completion_tokens), (ids, 1, 3));
    assert!(book.kept().is_empty() && book.unresolved().is_empty());
}

proptest::proptest! {
    /// What a session streams of a request (each token's piece, then the rest at its end:
    /// a server's SSE chunks, a batch job's `token` and `text` lines, `run local --json`'s)
    /// adds up to its result's text, which is the lossy decoding of every byte generated,
    /// cut before the stop string.
    #[test]
    fn streamed_pieces_and_the_rest_add_up_to_the_lossy_text_cut_at_the_stop(
        bytes in proptest::collection::vec(
            proptest::sample::select(vec![b'a', b'b', b' ', 0xE2, 0x82, 0xAC, 0xC3, 0xFF]),
            0..60,
        ),
        stop in "[ab\u{FFFD}]{0,3}",
    ) {
        let tok = tokenizer("lossy");
        let req = Request {
            id: "p".into(),
            prompt: vec![1],
            max_tokens: 100,
            sampling: SamplingPolicy::Greedy,
            stop: vec![stop.clone()],
            logprobs: None,
            speculative: true,
            cache_prompt: true,
            constraint: None,
        };
        let mut book = RequestBook::new(&tok, vec![req]);
        book.admitted(0, 1);
        #[allow(clippy::disallowed_methods)] // a test owns the clock
        let now = Instant::now();
        let mut streamed = String::new();
        for &b in &bytes {
            if let Some(note) = book.token(now, 1, u32::from(b)) {
                streamed.push_str(&note.piece);
            }
        }
        let (_, r, rest) =
            book.finished(1, FinishReason::MaxTokens, &[1], vec![], 0, "").expect("live");
        let lossy = String::from_utf8_lossy(&bytes).into_owned();
        let cut = match lossy.find(stop.as_str()).filter(|_| !stop.is_empty()) {
            Some(at) => &lossy[..at],
            None => &lossy[..],
        };
        proptest::prop_assert_eq!(streamed + &rest, r.text.clone());
        proptest::prop_assert_eq!(r.text.as_str(), cut);
    }
}
