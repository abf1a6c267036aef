//! Chat templates render as Hugging Face `transformers` renders them: every template
//! llama.cpp collects from published models (fetched by `.ci/fetch-models --tests`) and
//! the templates inside the GGUF files the tests use, over the cases in
//! `tests/data/chat-cases.json`, compared with Python `jinja2`'s renderings
//! (`scripts/chat_template_reference.py`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use swactor::chat::{ChatTemplate, Conversation, Escaper, Message, TemplateLimits, ToolCall};
use swactor::model::GgufFile;
use swactor::model::tokenizer::chat_template;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The time the cases render at (`now` in the cases file: 2026-12-04T09:30:00 UTC).
const NOW: i64 = 1_796_376_600;

/// A case's messages as the server would hold them.
fn messages(case: &Value) -> Vec<Message> {
    let text = |m: &Value, k: &str| m.get(k).and_then(Value::as_str).map(str::to_string);
    case["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| Message {
            role: text(m, "role").expect("role"),
            content: text(m, "content"),
            reasoning: text(m, "reasoning_content"),
            tool_calls: m
                .get("tool_calls")
                .and_then(Value::as_array)
                .map(|calls| {
                    calls
                        .iter()
                        .map(|c| ToolCall {
                            id: text(c, "id").unwrap_or_default(),
                            name: text(&c["function"], "name").expect("name"),
                            arguments: c["function"]["arguments"].to_string(),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            tool_call_id: text(m, "tool_call_id"),
            name: text(m, "name"),
        })
        .collect()
}

/// The templates to compare: llama.cpp's collection and those of the GGUFs here.
fn templates() -> Option<Vec<PathBuf>> {
    let dir = root().join(".cache/templates");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jinja"))
        .collect();
    out.sort();
    let scratch = crate::support::scratch();
    for (name, gguf) in [
        ("gguf-SmolLM2-135M-Instruct", ".cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"),
        ("gguf-gemma-3-270m", ".cache/models/gemma-3-270m-q4_k_m.gguf"),
        (
            "gguf-Qwen2.5-Coder-0.5B-Instruct",
            ".cache/bench-models/qwen2.5-coder-0.5b-instruct.gguf",
        ),
    ] {
        let Ok(file) = GgufFile::open(&root().join(gguf)) else { continue };
        let t = chat_template(file.header()).expect("the file carries a chat template");
        let path = scratch.join(format!("{name}.jinja"));
        std::fs::write(&path, t).expect("write template");
        out.push(path);
    }
    Some(out)
}

fn reference(cases: &Path, templates: &[PathBuf]) -> Option<BTreeMap<String, Vec<Value>>> {
    let python = root().join(".cache/sdist-venv/bin/python");
    if !python.exists() {
        return None;
    }
    let out = std::process::Command::new(python)
        .arg(root().join("scripts/chat_template_reference.py"))
        .arg(cases)
        .args(templates)
        .output()
        .expect("run the reference renderer");
    assert!(out.status.success(), "reference: {}", String::from_utf8_lossy(&out.stderr));
    Some(serde_json::from_slice(&out.stdout).expect("reference JSON"))
}

/// Renderings where jinja2 itself goes wrong, so the reference is not what a template
/// means: `'text'|safe + value` HTML-escapes the value in jinja2 (a `Markup` quirk the
/// template's authors did not intend, which llama.cpp's renderer does not copy either),
/// and `tojson` of a `map(...)` generator fails in Python.
const JINJA2_QUIRKS: [(&str, &str); 2] = [
    ("meetkai-functionary-medium-v3.1.jinja", "Markup concatenation escapes the tool's JSON"),
    ("llama-cpp-deepseek-r1.jinja", "tojson of a generator raises TypeError in Python"),
];

#[test]
fn every_collected_template_renders_as_transformers_renders_it() {
    let cases_path = root().join("tests/data/chat-cases.json");
    let cases: Value =
        serde_json::from_str(&std::fs::read_to_string(&cases_path).expect("cases")).expect("json");
    let Some(reference) = templates().and_then(|t| reference(&cases_path, &t).map(|r| (t, r)))
    else {
        assert!(std::env::var_os("CI").is_none(), "CI must run .ci/fetch-models --tests");
        eprintln!("note: templates or jinja2 not fetched; run .ci/fetch-models --tests");
        return;
    };
    let (paths, reference) = reference;
    let (bos, eos) = (cases["bos_token"].as_str().unwrap(), cases["eos_token"].as_str().unwrap());
    let mut failures = Vec::new();
    let mut compared = 0;
    for path in &paths {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let quirk = JINJA2_QUIRKS.iter().any(|(q, _)| *q == name);
        let want = &reference[&name];
        let source = std::fs::read_to_string(path).expect("template");
        let template =
            ChatTemplate::new(&source, bos, eos, Escaper::default(), TemplateLimits::default());
        for (case, want) in cases["cases"].as_array().unwrap().iter().zip(want.iter().cycle()) {
            let mut conv = Conversation::new(messages(case));
            conv.add_generation_prompt =
                case.get("add_generation_prompt").is_none_or(|v| v == true);
            if case.get("tools") == Some(&Value::Bool(true)) {
                conv.tools = cases["tools"].as_array().unwrap().clone();
            }
            if let Some(k) = case.get("kwargs").and_then(Value::as_object) {
                conv.kwargs = k.clone();
            }
            let got = template
                .as_ref()
                .map_err(|e| e.to_string())
                .and_then(|t| t.render(&conv, NOW, 1 << 20).map_err(|e| e.to_string()));
            compared += 1;
            match (&got, want.get("text").and_then(Value::as_str)) {
                (Ok(g), Some(w)) if g == w => {}
                (Err(_), None) => {}
                _ if quirk && case.get("tools").is_some() => compared -= 1,
                _ => failures.push(format!(
                    "{name} / {}:\n  want {:?}\n  got  {:?}",
                    case["name"], want, got
                )),
            }
        }
    }
    eprintln!("{} templates, {compared} renderings compared", paths.len());
    assert!(paths.len() >= 70, "llama.cpp's collection is fetched whole");
    assert!(
        failures.is_empty(),
        "{} of {compared} renderings differ from jinja2's:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
