use super::*;
use crate::chat::ParsedCall;

fn chat(body: Value) -> Value {
    serde_json::from_slice(&chat_to_openai(body.to_string().as_bytes()).expect("converts")).unwrap()
}

#[test]
fn a_chat_streams_by_default_and_tool_results_answer_the_calls_in_order() {
    let v = chat(json!({
        "model": "m", "options": {"temperature": 0, "num_predict": 20, "stop": ["\n"]},
        "messages": [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
                {"function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]},
            {"role": "tool", "content": "18C"},
            {"role": "tool", "content": "2C"}
        ]
    }));
    assert_eq!(v["stream"], true);
    assert_eq!((v["max_tokens"].clone(), v["temperature"].clone()), (json!(20), json!(0.0)));
    let m = v["messages"].as_array().unwrap();
    let calls = m[1]["tool_calls"].as_array().unwrap();
    assert_eq!(calls[0]["function"]["arguments"], r#"{"city":"Paris"}"#);
    assert_eq!(m[2]["tool_call_id"], calls[0]["id"]);
    assert_eq!(m[3]["tool_call_id"], calls[1]["id"]);
}

#[test]
fn formats_become_response_formats_and_images_and_raw_prompts_are_refused() {
    let json = chat(json!({"messages": [{"role": "user", "content": "x"}], "format": "json"}));
    assert_eq!(json["response_format"], json!({"type": "json_object"}));
    let schema = json!({"type": "array"});
    let s = chat(json!({"messages": [{"role": "user", "content": "x"}], "format": schema}));
    assert_eq!(s["response_format"]["json_schema"]["schema"], schema);
    let e = chat_to_openai(br#"{"messages":[{"role":"user","content":"x"}],"format":3}"#)
        .expect_err("format");
    assert!(e.message.contains("'format'"), "{}", e.message);
    let e = chat_to_openai(br#"{"messages":[{"role":"user","content":"x","images":["AA=="]}]}"#)
        .expect_err("images");
    assert!(e.message.contains("images"), "{}", e.message);
    let e = generate_to_openai(br#"{"prompt":"x","raw":true}"#).expect_err("raw");
    assert!(e.message.contains("'raw'"), "{}", e.message);
    let g: Value = serde_json::from_slice(
        &generate_to_openai(br#"{"prompt":"hi","system":"s","stream":false}"#).unwrap(),
    )
    .unwrap();
    assert_eq!(g["messages"][1], json!({"role": "user", "content": "hi"}));
    assert_eq!(g["stream"], false);
}

#[test]
fn lines_carry_the_message_or_the_response_and_the_last_one_the_counts() {
    let t = Timings::new(7, 2.0, 3, 4.0);
    let w = LineWriter::new(Endpoint::Chat, "m".into(), 0, 1);
    assert_eq!(
        w.delta(&Delta::Content("Hi".into()))["message"],
        json!({"role": "assistant", "content": "Hi"})
    );
    let call =
        Delta::ToolCall(ParsedCall { index: 0, name: "f".into(), arguments: "{\"a\":1}".into() });
    assert_eq!(
        w.delta(&call)["message"]["tool_calls"][0]["function"]["arguments"],
        json!({"a": 1})
    );
    let done = w.done(None, "length", &t);
    assert_eq!((done["done"].clone(), done["done_reason"].clone()), (json!(true), json!("length")));
    assert_eq!(
        (done["prompt_eval_count"].clone(), done["eval_duration"].clone()),
        (json!(7), json!(4_000_000))
    );
    assert_eq!(done["created_at"], "1970-01-01T00:00:00Z");
    let g = LineWriter::new(Endpoint::Generate, "m".into(), 0, 1);
    assert_eq!(g.delta(&Delta::Content("x".into()))["response"], "x");
}
