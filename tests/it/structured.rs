//! Constrained output through a served pipeline (SmolLM2 over two stages): a
//! `response_format` JSON schema is enforced by the masks the orchestrator sends with
//! each sampling entry, whole and streamed alike; `json_object` and completions too; a
//! schema that is invalid or unsatisfiable is a 400 before any compute; Ollama's
//! `format` is the same constraint.

use serde_json::{Value, json};

use crate::cli::smollm2;
use crate::serve::{Server, post_raw, runtime};

#[test]
fn a_json_schema_holds_every_answer_whole_and_streamed_and_bad_schemas_are_refused_first() {
    let Some(model) = smollm2() else { return };
    let s = Server::local(&model, &["--stages", "2"]);
    let rt = runtime();
    let post = |path: &str, body: Value| {
        rt.block_on(post_raw(&format!("{}{path}", s.url), body.to_string().into_bytes(), None))
    };
    let schema = json!({"type": "object",
        "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"},
                       "pets": {"type": "array", "items": {"enum": ["cat", "dog"]}, "maxItems": 3}},
        "required": ["name", "age", "pets"], "additionalProperties": false});
    let format =
        json!({"type": "json_schema", "json_schema": {"name": "person", "schema": schema}});
    let ask = json!([{"role": "user", "content": "Describe a person as JSON."}]);
    let whole = post(
        "/v1/chat/completions",
        json!({"messages": ask, "max_tokens": 96, "temperature": 0, "response_format": format}),
    );
    assert_eq!(whole.status, 200, "{}", whole.body);
    let v: Value = serde_json::from_str(&whole.body).expect("json");
    let text = v["choices"][0]["message"]["content"].as_str().expect("content").to_string();
    let person: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text:?}"));
    assert!(person["name"].is_string() && person["age"].is_i64(), "{person}");
    assert!(person["pets"].as_array().is_some_and(|p| p.iter().all(|x| x == "cat" || x == "dog")));
    assert_eq!(person.as_object().map(|o| o.len()), Some(3), "no other key: {person}");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");

    // Streamed, the same greedy answer.
    let streamed = post(
        "/v1/chat/completions",
        json!({"messages": ask, "max_tokens": 96,
        "temperature": 0, "stream": true, "response_format": format}),
    );
    let mut joined = String::new();
    for data in streamed.events() {
        if let Ok(c) = serde_json::from_str::<Value>(&data)
            && let Some(t) = c["choices"][0]["delta"]["content"].as_str()
        {
            joined.push_str(t);
        }
    }
    assert_eq!(joined, text);

    // Sampled, seeded: still the schema's.
    let sampled = post(
        "/v1/chat/completions",
        json!({"messages": ask, "max_tokens": 96,
        "temperature": 1.0, "seed": 7, "response_format": {"type": "json_object"}}),
    );
    let v: Value = serde_json::from_str(&sampled.body).expect("json");
    if v["choices"][0]["finish_reason"] == "stop" {
        let t = v["choices"][0]["message"]["content"].as_str().expect("content");
        assert!(serde_json::from_str::<Value>(t).is_ok_and(|o| o.is_object()), "{t:?}");
    }

    // A completion, and Ollama's `format`.
    let ints = json!({"type": "array", "items": {"type": "integer"}, "maxItems": 4});
    let c = post(
        "/v1/completions",
        json!({"prompt": "Some numbers:", "max_tokens": 24,
        "temperature": 0, "response_format": {"type": "json_schema", "json_schema": {"schema": ints}}}),
    );
    let v: Value = serde_json::from_str(&c.body).expect("json");
    let t = v["choices"][0]["text"].as_str().expect("text");
    assert!(serde_json::from_str::<Vec<i64>>(t).is_ok(), "{t:?}");
    let o = post(
        "/api/chat",
        json!({"messages": ask, "stream": false, "format": schema,
        "options": {"temperature": 0, "num_predict": 96}}),
    );
    let v: Value = serde_json::from_str(&o.body).expect("json");
    let t = v["message"]["content"].as_str().expect("content");
    assert_eq!(serde_json::from_str::<Value>(t).expect("ollama's answer parses"), person);

    // Refused before any compute.
    for (bad, says) in [
        (json!({"type": "string", "pattern": "(("}), "unclosed group"),
        (json!({"type": "integer", "minimum": 5, "maximum": 2}), "nsatisfiable"),
    ] {
        let r = post(
            "/v1/chat/completions",
            json!({"messages": ask,
            "response_format": {"type": "json_schema", "json_schema": {"schema": bad}}}),
        );
        assert_eq!(r.status, 400, "{}", r.body);
        assert!(r.body.contains("invalid_schema") && r.body.contains(says), "{}", r.body);
    }
    let r = post(
        "/v1/chat/completions",
        json!({"messages": ask, "response_format": {"type": "json_schema", "json_schema": {}}}),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    // SmolLM2's template teaches no tool-call format: a call cannot be forced.
    let tools = json!([{"type": "function", "function": {"name": "f"}}]);
    let r = post(
        "/v1/chat/completions",
        json!({"messages": ask, "tools": tools, "tool_choice": "required"}),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("unsupported_field"), "{}", r.body);
}
