//! The official `openai` and `anthropic` Python clients (fetched into a venv by
//! `.ci/fetch-models --tests`) against a served Qwen2.5-Coder 0.5B Instruct over two
//! stages, as an application uses them: a weather-tool round trip (the call, the tool's
//! result, the final answer) whole and streamed through the chat, Responses and Messages
//! APIs, content parts, and a
//! part of another type refused with a 400 naming it (`tests/clients/*.py`).

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::serve::Server;

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
    let anthropic = client(&python, "anthropic_client.py", &s.url);
    assert_eq!(anthropic["tool_use"]["input"]["city"], "Paris", "{anthropic}");
    assert_eq!(anthropic["streamed_tool_use"]["city"], "Paris", "{anthropic}");
    eprintln!("openai: {openai}\nanthropic: {anthropic}");
}
