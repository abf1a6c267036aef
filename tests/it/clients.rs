//! The official `openai` and `anthropic` Python clients (fetched into a venv by
//! `.ci/fetch-models --tests`) against a served Qwen2.5-Coder 0.5B Instruct over two
//! stages, as an application uses them: a weather-tool round trip (the call, the tool's
//! result, the final answer) whole and streamed through the chat, Responses and Messages
//! APIs, content parts, and a
//! part of another type refused with a 400 naming it (`tests/clients/*.py`); and Ollama's
//! shapes over raw HTTP.

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};

use crate::serve::{Server, get, post_raw, runtime};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The model and the clients' Python, or `None` (outside CI) when not fetched.
fn fetched() -> Option<(PathBuf, PathBuf)> {
    let model = root().join(".cache/bench-models/qwen2.5-coder-0.5b-instruct.gguf");
    let python = root().join(".cache/clients-venv/bin/python");
    if model.exists() && root().join(".cache/clients-venv/.ready").exists() {
        return Some((model, python));
    }
    assert!(std::env::var_os("CI").is_none(), "CI must run .ci/fetch-models --tests");
    eprintln!(
        "note: Qwen2.5-Coder 0.5B or the clients are not fetched; run .ci/fetch-models --tests"
    );
    None
}

/// Runs one client script against `url`; what it saw.
fn client(python: &PathBuf, script: &str, url: &str) -> Value {
    let out = Command::new(python)
        .arg(root().join("tests/clients").join(script))
        .arg(url)
        .output()
        .expect("run the client");
    assert!(
        out.status.success(),
        "{script} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the client's JSON")
}

#[test]
fn the_official_openai_and_anthropic_clients_make_a_tool_round_trip_whole_and_streamed() {
    let Some((model, python)) = fetched() else { return };
    let s = Server::local(&model, &["--stages", "2"]);
    let openai = client(&python, "openai_client.py", &s.url);
    assert_eq!(openai["call"]["arguments"]["city"], "Paris", "{openai}");
    assert_eq!(openai["streamed_call"]["name"], "get_weather", "{openai}");
    assert_eq!(openai["image_refused"], 400, "{openai}");
    assert_eq!(openai["responses"]["call"]["city"], "Paris", "{openai}");
    assert!(openai["json_schema"]["population"].is_i64(), "{openai}");
    assert_eq!(openai["forced"]["named"], "get_time", "{openai}");
    let anthropic = client(&python, "anthropic_client.py", &s.url);
    assert_eq!(anthropic["tool_use"]["input"]["city"], "Paris", "{anthropic}");
    assert_eq!(anthropic["streamed_tool_use"]["city"], "Paris", "{anthropic}");
    eprintln!("openai: {openai}\nanthropic: {anthropic}");
    ollama_speaks_its_own_shapes(&s.url);
}

/// Ollama's API: a streamed chat as JSON lines ending in a `done` line with its counts, a
/// whole tool call with its arguments as an object, the model list, and `raw` refused.
fn ollama_speaks_its_own_shapes(u: &str) {
    let rt = runtime();
    let post = |path: &str, body: Value| {
        rt.block_on(post_raw(&format!("{u}{path}"), body.to_string().into_bytes(), None))
    };
    let ask = json!([{"role": "user", "content": "What is the weather in Paris?"}]);
    let streamed = post(
        "/api/chat",
        json!({"messages": [{"role": "user", "content": "Say hi."}],
                                            "options": {"num_predict": 6, "temperature": 0}}),
    );
    assert_eq!(streamed.status, 200, "{}", streamed.body);
    let lines: Vec<Value> =
        streamed.body.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    let last = lines.last().expect("lines");
    assert_eq!(last["done"], true, "{}", streamed.body);
    assert!(last["eval_count"].as_u64().is_some_and(|n| n >= 1), "{last}");
    assert!(
        lines[..lines.len() - 1]
            .iter()
            .all(|l| l["done"] == false && l["message"]["role"] == "assistant")
    );
    let tools = json!([{"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]);
    let whole = post(
        "/api/chat",
        json!({"messages": ask, "tools": tools, "stream": false,
                                         "options": {"temperature": 0}}),
    );
    let v: Value = serde_json::from_str(&whole.body).expect("json");
    assert_eq!(v["message"]["tool_calls"][0]["function"]["arguments"]["city"], "Paris", "{v}");
    let (status, tags) = get(&format!("{u}/api/tags")).expect("tags");
    assert_eq!((status, tags["models"].as_array().map(Vec::len)), (200, Some(1)));
    let refused = post("/api/generate", json!({"prompt": "x", "raw": true}));
    assert_eq!(refused.status, 400);
    assert!(refused.body.contains("raw"), "{}", refused.body);
}
