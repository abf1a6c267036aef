//! The prefix cache with real processes: a request that finds its prefix in a warm slot
//! gets exactly the tokens of a cold run (greedy and seeded), on every family (a sliding
//! window's ring included: a prefix the ring no longer holds counts as not cached),
//! through one to three stages; results carry `cached_tokens`; a served chat's second turn
//! says what it found in `usage`, `timings`, `/slots` and the metrics.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::cli::smollm2;
use crate::families::{FAMILIES, family_model};
use crate::run::SERIAL;
use crate::serve::{Server, get, metric, metrics_of, post_raw, runtime};
use crate::session::{requests_file, results, run_local_batch, streamed};
use swactor::model::synth::SynthArch;

/// A long opening (longer than the synthesized Gemma 3's ring of 80 positions, so its
/// ring wraps while the first request runs).
const OPENING: &str = "The old lighthouse keeper climbed the stairs every evening, counting \
                       each step aloud while the sea below him kept its slow time.";

/// The batch: an opening, its continuation twice (greedy, then seeded), a branch that
/// shares only the opening's first words, and an unrelated prompt. One slot serves them
/// one after another, so each finds what the one before left.
fn lines(cache: bool) -> Vec<Value> {
    let more = format!("{OPENING} Then he lit the lamp");
    let branch = format!("{} a different story", &OPENING[..24]);
    let hot = |p: &str, id: &str| {
        json!({"id": id, "prompt": p, "max_tokens": 8, "temperature": 0.9, "seed": 11,
               "cache_prompt": cache})
    };
    vec![
        json!({"id": "opening", "prompt": OPENING, "max_tokens": 8, "cache_prompt": cache}),
        json!({"id": "more", "prompt": more, "max_tokens": 8, "cache_prompt": cache}),
        hot(&more, "more-seeded"),
        json!({"id": "branch", "prompt": branch, "max_tokens": 6, "cache_prompt": cache}),
        json!({"id": "other", "prompt": "Unrelated words", "max_tokens": 4, "cache_prompt": cache}),
    ]
}

fn cached_tokens(done: &BTreeMap<String, Value>, id: &str) -> u64 {
    done[id]["cached_tokens"].as_u64().unwrap_or_else(|| panic!("{id}: {}", done[id]))
}

#[test]
fn a_request_served_from_a_cached_prefix_gets_the_tokens_of_a_cold_run_on_every_family_through_one_to_three_stages()
 {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cold = requests_file("prefix-cold", &lines(false));
    let warm = requests_file("prefix-warm", &lines(true));
    let extra = ["--max-sequences", "1", "--max-seq-len", "256"];
    for arch in FAMILIES {
        let model = family_model(arch);
        for stages in 1..=3 {
            let what = format!("{arch:?}, {stages} stages");
            let (code, out, err) = run_local_batch(&model, stages, &cold, &extra);
            assert_eq!(code, 0, "{what}, cold: {err}");
            let (cold_tokens, cold_done) = (streamed(&out), results(&out));
            let (code, out, err) = run_local_batch(&model, stages, &warm, &extra);
            assert_eq!(code, 0, "{what}, warm: {err}");
            let (warm_tokens, warm_done) = (streamed(&out), results(&out));
            assert_eq!(warm_done.len(), 5, "{what}: {warm_done:?}");
            assert_eq!(warm_tokens, cold_tokens, "{what}: the cached run's tokens");
            for id in ["opening", "more", "more-seeded", "branch", "other"] {
                assert_eq!(cold_done[id]["type"], "result", "{what}: {}", cold_done[id]);
                assert_eq!(cached_tokens(&cold_done, id), 0, "{what}, {id}: opted out");
                let (w, c) = (&warm_done[id], &cold_done[id]);
                assert_eq!(w["text"], c["text"], "{what}, {id}");
                assert_eq!(w["finish_reason"], c["finish_reason"], "{what}, {id}");
            }
            assert_eq!(cached_tokens(&warm_done, "opening"), 0, "{what}: nothing warm yet");
            // The continuation finds the opening and what it generated; the seeded one
            // finds the whole continuation but its last token.
            let opening = warm_done["opening"]["prompt_tokens"].as_u64().expect("prompt");
            let more = warm_done["more-seeded"]["prompt_tokens"].as_u64().expect("prompt");
            assert!(cached_tokens(&warm_done, "more") + 2 >= opening, "{what}: {warm_done:?}");
            assert_eq!(cached_tokens(&warm_done, "more-seeded"), more - 1, "{what}");
            // The branch goes back 24 bytes into a history of 150: a ring of 80 positions
            // no longer holds what it attends to.
            let branch = cached_tokens(&warm_done, "branch");
            // Gemma 3's and gpt-oss's sliding blocks keep a ring of 80 positions.
            if matches!(arch, SynthArch::Gemma3 | SynthArch::GptOss) {
                assert_eq!(branch, 0, "{what}: the ring wrapped past the branch point");
            } else {
                assert!(branch >= 20, "{what}: the branch shares the opening's start: {branch}");
            }
        }
    }
}

/// POSTs `body` to the server's chat completions; the JSON answer.
fn chat(server: &Server, body: &Value) -> Value {
    let url = format!("{}/v1/chat/completions", server.url);
    let a = runtime().block_on(post_raw(&url, body.to_string().into_bytes(), None));
    assert_eq!(a.status, 200, "{}", a.body);
    serde_json::from_str(&a.body).expect("json")
}

#[test]
fn a_served_second_turn_finds_the_first_in_its_slot_says_so_everywhere_and_answers_as_a_cold_one() {
    let Some(model) = smollm2() else { return };
    let server = Server::local(&model, &["--stages", "2", "--max-sequences", "3"]);
    let first = vec![json!({"role": "user", "content": "Name three rivers."})];
    let one = chat(&server, &json!({"messages": first, "max_tokens": 12, "temperature": 0}));
    let reply = one["choices"][0]["message"]["content"].as_str().expect("text").to_string();
    let mut second = first.clone();
    second.push(json!({"role": "assistant", "content": reply}));
    second.push(json!({"role": "user", "content": "Which is longest?"}));
    let turn = |cache: bool, sampling: Value| {
        let mut body = json!({"messages": second, "max_tokens": 12, "cache_prompt": cache});
        body.as_object_mut()
            .expect("object")
            .extend(sampling.as_object().cloned().unwrap_or_default());
        chat(&server, &body)
    };
    let greedy = json!({"temperature": 0});
    let warm = turn(true, greedy.clone());
    let cached = warm["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64().expect("cached");
    let prompt = warm["usage"]["prompt_tokens"].as_u64().expect("prompt");
    assert!(cached > 10 && cached < prompt, "the first turn's prompt and reply: {}", warm["usage"]);
    assert_eq!(warm["timings"]["cache_n"], cached, "{}", warm["timings"]);
    assert_eq!(warm["timings"]["prompt_n"], prompt - cached, "{}", warm["timings"]);
    let cold = turn(false, greedy.clone());
    assert_eq!(cold["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    assert_eq!(warm["choices"][0]["message"], cold["choices"][0]["message"]);
    // Seeded sampling: the same draw from a cached prefix as from a cold one.
    let seeded = json!({"temperature": 0.9, "seed": 7});
    let (a, b) = (turn(true, seeded.clone()), turn(false, seeded));
    assert!(a["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64() > Some(10));
    assert_eq!(a["choices"][0]["message"], b["choices"][0]["message"]);
    // Two requests sharing the prefix at once: one may take the warm slot, both are exact.
    let url = format!("{}/v1/chat/completions", server.url);
    let body = json!({"messages": second, "max_tokens": 12, "temperature": 0}).to_string();
    let (x, y) = runtime().block_on(async {
        tokio::join!(
            post_raw(&url, body.clone().into_bytes(), None),
            post_raw(&url, body.clone().into_bytes(), None)
        )
    });
    for a in [x, y] {
        assert_eq!(a.status, 200, "{}", a.body);
        let v: Value = serde_json::from_str(&a.body).expect("json");
        assert_eq!(v["choices"][0]["message"], cold["choices"][0]["message"]);
    }
    // The slots and the metrics show it.
    let (_, slots) = get(&format!("{}/slots", server.url)).expect("slots");
    let held: Vec<u64> = slots
        .as_array()
        .expect("slots")
        .iter()
        .map(|s| s["n_prompt_tokens_cache"].as_u64().expect("n_prompt_tokens_cache"))
        .collect();
    assert!(held.iter().any(|&n| n > prompt), "a free slot holds the second turn: {held:?}");
    let m = metrics_of(&server.url);
    assert!(metric(&m, "swactor_prefix_cache_hits_total") >= (2 * cached) as f64, "{m}");
    assert!(
        metric(&m, "swactor_prefix_cache_queries_total")
            > metric(&m, "swactor_prefix_cache_hits_total")
    );
    assert!(metric(&m, "swactor_prefix_cache_bytes") > 0.0, "{m}");
}

/// The store's batch: an opening, an unrelated prompt that takes its one slot (the
/// opening's blocks are saved), then the opening's continuation, which finds them in the
/// stages' block stores.
fn evicting_lines(cache: bool) -> Vec<Value> {
    let line = |id: &str, prompt: String| json!({"id": id, "prompt": prompt, "max_tokens": 6, "cache_prompt": cache});
    vec![
        line("opening", OPENING.to_string()),
        line("other", "Unrelated words about the price of wheat".to_string()),
        line("more", format!("{OPENING} Then he lit the lamp")),
    ]
}

#[test]
fn a_prefix_evicted_from_its_slot_comes_back_from_the_stages_block_stores_and_answers_as_a_cold_run()
 {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cold = requests_file("store-cold", &evicting_lines(false));
    let warm = requests_file("store-warm", &evicting_lines(true));
    let model = family_model(SynthArch::Llama);
    let extra = ["--max-sequences", "1", "--max-seq-len", "256"];
    for stages in [1, 3] {
        let what = format!("{stages} stages");
        let (code, out, err) = run_local_batch(&model, stages, &cold, &extra);
        assert_eq!(code, 0, "{what}, cold: {err}");
        let (cold_tokens, cold_done) = (streamed(&out), results(&out));
        let (code, out, err) = run_local_batch(&model, stages, &warm, &extra);
        assert_eq!(code, 0, "{what}, warm: {err}");
        let (warm_tokens, warm_done) = (streamed(&out), results(&out));
        assert_eq!(warm_tokens, cold_tokens, "{what}: the stored blocks' tokens");
        for id in ["opening", "other", "more"] {
            assert_eq!(warm_done[id]["text"], cold_done[id]["text"], "{what}, {id}");
        }
        // A block is 64 positions at this context: whole blocks come back.
        let more = cached_tokens(&warm_done, "more");
        assert!(more >= 64 && more.is_multiple_of(64), "{what}: {}", warm_done["more"]);
        // Without a store the slot's new tokens leave nothing of the opening.
        let mut off = extra.to_vec();
        off.extend(["--prompt-cache-bytes", "0"]);
        let (code, out, err) = run_local_batch(&model, stages, &warm, &off);
        assert_eq!(code, 0, "{what}, no store: {err}");
        assert_eq!(streamed(&out), cold_tokens, "{what}, no store");
        assert!(cached_tokens(&results(&out), "more") < 64, "{what}: {out:?}");
    }
}
