//! Generated text as every path hands it out: `generate --json` and `run local --json`
//! add up to the text `generate` prints (the lossy decoding of every byte, an invalid
//! UTF-8 sequence in the middle included).

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

use crate::support::scratch;

fn swactor() -> Command {
    let mut cmd = Command::cargo_bin("swactor").expect("binary");
    cmd.env("RUST_BACKTRACE", "0").env("NO_COLOR", "1");
    cmd
}

/// The issue's model: `model synth --arch llama3`, whose greedy text after "hello world"
/// holds invalid UTF-8 sequences followed by valid text.
fn llama3_synth() -> PathBuf {
    let path = scratch().join("text-llama3.gguf");
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !path.exists() {
        swactor()
            .args(["model", "synth", "--arch", "llama3", "--out"])
            .arg(&path)
            .assert()
            .success();
    }
    path
}

/// The text of a JSON Lines output: its `token` lines' texts, then its `text` line's.
fn json_text(stdout: &[u8]) -> (String, Vec<u32>, usize) {
    let mut text = String::new();
    let (mut ids, mut tails) = (Vec::new(), 0);
    for line in String::from_utf8_lossy(stdout).lines() {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        match v["type"].as_str() {
            Some("token") => {
                text.push_str(v["text"].as_str().expect("a token's text"));
                ids.push(v["id"].as_u64().expect("id") as u32);
            }
            Some("text") => {
                text.push_str(v["text"].as_str().expect("the tail's text"));
                tails += 1;
            }
            _ => {}
        }
    }
    (text, ids, tails)
}

/// `generate` prints this text (without the closing newline).
fn printed(model: &Path, max_tokens: u32) -> String {
    let out = swactor()
        .args(["generate", "--prompt", "hello world", "--max-tokens", &max_tokens.to_string()])
        .arg("--model")
        .arg(model)
        .output()
        .expect("generate");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).expect("lossy text is UTF-8");
    text.strip_suffix('\n').unwrap_or(&text).to_string()
}

#[test]
fn generate_json_lines_add_up_to_the_printed_text_after_invalid_utf8() {
    let model = llama3_synth();
    let mut tails = 0;
    for n in [13, 16, 18] {
        let out = swactor()
            .args(["generate", "--json", "--prompt", "hello world", "--max-tokens"])
            .arg(n.to_string())
            .arg("--model")
            .arg(&model)
            .output()
            .expect("generate --json");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let (text, ids, tail) = json_text(&out.stdout);
        assert_eq!(ids.len(), n, "a token line per token");
        let want = printed(&model, n as u32);
        assert!(want.contains('\u{FFFD}'), "the case holds invalid UTF-8: {want:?}");
        assert_eq!(text, want, "{n} tokens");
        tails += tail;
    }
    assert!(tails > 0, "an incomplete character at the end comes out as a text line");
}

#[test]
fn run_local_json_lines_add_up_to_the_text_generate_prints() {
    let model = llama3_synth();
    for n in [13, 16] {
        let out = swactor()
            .args(["run", "local", "--json", "--stages", "2", "--prompt", "hello world"])
            .args(["--max-tokens", &n.to_string(), "--model"])
            .arg(&model)
            .output()
            .expect("run local --json");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let (text, ids, _) = json_text(&out.stdout);
        assert_eq!(ids.len(), n);
        assert_eq!(text, printed(&model, n as u32), "{n} tokens");
    }
}

#[test]
fn a_streamed_batch_jobs_lines_add_up_to_each_result_and_to_the_printed_text() {
    let model = llama3_synth();
    let requests = scratch().join("text-requests.jsonl");
    let lines: Vec<String> = [13, 16, 18]
        .iter()
        .map(|n| format!(r#"{{"id":"r{n}","prompt":"hello world","max_tokens":{n}}}"#))
        .collect();
    std::fs::write(&requests, lines.join("\n")).expect("write the requests");
    let out = swactor()
        .args(["run", "local", "--stages", "2", "--stream", "--requests"])
        .arg(&requests)
        .arg("--model")
        .arg(&model)
        .output()
        .expect("run local --requests");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut streamed: std::collections::HashMap<String, String> = Default::default();
    let mut results = 0;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let id = v["id"].as_str().unwrap_or_default().to_string();
        match v["type"].as_str() {
            Some("token" | "text") => {
                streamed.entry(id).or_default().push_str(v["text"].as_str().expect("text"));
            }
            Some("result") => {
                let n: u32 = id[1..].parse().expect("r<n>");
                let text = v["text"].as_str().expect("the result's text");
                assert_eq!(streamed.get(&id).map(String::as_str), Some(text), "{id}");
                assert_eq!(text, printed(&model, n), "{id}");
                results += 1;
            }
            _ => {}
        }
    }
    assert_eq!(results, 3);
}

/// POSTs `body` to the server's `path`: status and body.
fn post(server: &crate::serve::Server, path: &str, body: &Value) -> (u16, String) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let url = format!("{}{path}", server.url);
    let a = rt.block_on(crate::serve::post_raw(&url, body.to_string().into_bytes(), None));
    (a.status, a.body)
}

/// A streamed completion's text and its tokens' `text_offset`s, from its SSE body.
fn streamed_completion(body: &str) -> (String, Vec<Value>) {
    let (mut text, mut offsets) = (String::new(), Vec::new());
    for data in body.split("\n\n").filter_map(|e| e.strip_prefix("data: ")) {
        if data == "[DONE]" {
            continue;
        }
        let c: Value = serde_json::from_str(data).unwrap_or_else(|e| panic!("{e}: {data}"));
        text.push_str(c["choices"][0]["text"].as_str().unwrap_or(""));
        if let Some(o) = c["choices"][0]["logprobs"]["text_offset"].as_array() {
            offsets.extend(o.iter().cloned());
        }
    }
    (text, offsets)
}

#[test]
fn served_completions_add_up_whole_and_streamed_with_equal_offsets_echo_and_refused_fields() {
    let model = llama3_synth();
    let s = crate::serve::Server::local(&model, &["--stages", "2"]);
    let want = printed(&model, 16);
    let ask = |extra: Value| {
        let mut body = serde_json::json!({"prompt": "hello world", "max_tokens": 16,
                                          "temperature": 0, "logprobs": 1});
        body.as_object_mut().expect("object").extend(extra.as_object().expect("object").clone());
        body
    };
    let (status, whole) = post(&s, "/v1/completions", &ask(serde_json::json!({})));
    assert_eq!(status, 200, "{whole}");
    let whole: Value = serde_json::from_str(&whole).expect("json");
    assert_eq!(whole["choices"][0]["text"], want.as_str(), "the whole text is the lossy text");
    let (status, sse) = post(&s, "/v1/completions", &ask(serde_json::json!({"stream": true})));
    assert_eq!(status, 200, "{sse}");
    let (text, offsets) = streamed_completion(&sse);
    assert_eq!(text, want, "the streamed chunks add up to the same text");
    let whole_offsets = whole["choices"][0]["logprobs"]["text_offset"].as_array().expect("offsets");
    assert_eq!(whole_offsets.len(), 16);
    assert_eq!(&offsets, whole_offsets, "text_offset is the same whole and streamed");

    // `echo` repeats the prompt before the text, whole and streamed; usage is unchanged.
    let echo = serde_json::json!({"prompt": "hello world", "max_tokens": 16, "temperature": 0,
                                  "echo": true});
    let (status, body) = post(&s, "/v1/completions", &echo);
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["choices"][0]["text"], format!("hello world{want}"));
    assert_eq!(v["usage"]["prompt_tokens"], whole["usage"]["prompt_tokens"]);
    let mut streamed = echo.clone();
    streamed["stream"] = true.into();
    let (_, sse) = post(&s, "/v1/completions", &streamed);
    assert_eq!(streamed_completion(&sse).0, format!("hello world{want}"));

    // Fields that would change the output and are not implemented: 400, never ignored.
    for field in [
        serde_json::json!({"presence_penalty": 0.5}),
        serde_json::json!({"frequency_penalty": 1}),
        serde_json::json!({"logit_bias": {"42": 5}}),
        serde_json::json!({"tools": [{"type": "function", "function": {"name": "f"}}]}),
    ] {
        let (status, body) = post(&s, "/v1/completions", &ask(field.clone()));
        assert_eq!(status, 400, "{field}: {body}");
        let e: Value = serde_json::from_str(&body).expect("json");
        assert_eq!(e["error"]["reason"], "unsupported_field", "{field}: {body}");
    }
    let neutral = serde_json::json!({"presence_penalty": 0, "logit_bias": {},
                                     "response_format": {"type": "text"}, "tools": []});
    assert_eq!(post(&s, "/v1/completions", &ask(neutral)).0, 200);

    // A prompt refused by its length before tokenizing says bytes, not invented tokens.
    let long = serde_json::json!({"prompt": "x".repeat(64 * 512 + 1)});
    let (status, body) = post(&s, "/v1/completions", &long);
    assert_eq!(status, 400, "{body}");
    let e: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(e["error"]["type"], "exceed_context_size_error");
    assert_eq!(e["error"]["n_prompt_bytes"], 64 * 512 + 1);
    assert!(e["error"].get("n_prompt_tokens").is_none(), "{body}");
}
