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

/// The model: `model synth --arch llama3`, whose greedy text after "hello world"
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
