use super::*;

fn openai(body: Value) -> Value {
    serde_json::from_slice(&to_openai_chat(body.to_string().as_bytes()).expect("converts")).unwrap()
}

#[test]
fn a_tool_round_trip_reads_as_openai_messages_in_order() {
    let v = openai(json!({
        "model": "m", "max_tokens": 64, "system": [{"type": "text", "text": "Be brief."}],
        "tools": [{"name": "get_weather", "description": "d",
                   "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
        "tool_choice": {"type": "auto"},
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Paris"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "18C"}]}]}
        ]
    }));
    let m = v["messages"].as_array().unwrap();
    assert_eq!(m[0], json!({"role": "system", "content": "Be brief."}));
    assert_eq!(m[2]["tool_calls"][0]["function"]["arguments"], r#"{"city":"Paris"}"#);
    assert_eq!(m[2]["content"], "Checking.");
    assert_eq!(m[3], json!({"role": "tool", "tool_call_id": "t1", "content": "18C"}));
    assert_eq!(m.len(), 4, "no empty user message after a tool result");
    assert_eq!(v["tools"][0]["function"]["parameters"]["properties"]["city"]["type"], "string");
    assert_eq!(v["tool_choice"], "auto");
    assert_eq!(v["max_tokens"], 64);
}

#[test]
fn requests_without_max_tokens_or_with_unknown_blocks_are_refused_naming_them() {
    for (body, says) in [
        (json!({"messages": [{"role": "user", "content": "x"}]}), "max_tokens"),
        (
            json!({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}),
            "\"image\"",
        ),
        (json!({"max_tokens": 5, "messages": [{"role": "system", "content": "x"}]}), "role"),
        (
            json!({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}],
                "tools": [{"type": "web_search_20250305", "name": "w"}]}),
            "server tools",
        ),
    ] {
        let e = to_openai_chat(body.to_string().as_bytes()).expect_err(says);
        assert_eq!(e.status(), 400);
        assert!(e.message.contains(says), "{says}: {}", e.message);
    }
}

#[test]
fn a_streamed_answer_opens_and_closes_one_block_per_kind_run_and_one_per_tool_use() {
    let mut w = EventWriter::new(3);
    let mut names = Vec::new();
    for d in [
        Delta::Reasoning("hm".into()),
        Delta::Content("A".into()),
        Delta::Content("B".into()),
        Delta::ToolCall(ParsedCall { index: 0, name: "f".into(), arguments: "{}".into() }),
    ] {
        names.extend(w.delta(&d).into_iter().map(|(n, v)| format!("{n}:{}", v["index"])));
    }
    names.extend(w.finish("tool_calls", 9).into_iter().map(|(n, _)| n.to_string()));
    assert_eq!(
        names,
        [
            "content_block_start:0",
            "content_block_delta:0",
            "content_block_stop:0",
            "content_block_start:1",
            "content_block_delta:1",
            "content_block_delta:1",
            "content_block_stop:1",
            "content_block_start:2",
            "content_block_delta:2",
            "content_block_stop:2",
            "message_delta",
            "message_stop"
        ]
    );
    assert_eq!(stop_reason("tool_calls"), "tool_use");
}
