use super::*;

fn openai(body: Value) -> Value {
    serde_json::from_slice(&to_openai_chat(body.to_string().as_bytes()).expect("converts")).unwrap()
}

#[test]
fn input_items_read_as_openai_messages_with_calls_joined_to_their_turn() {
    let v = openai(json!({
        "model": "m", "instructions": "Be brief.", "max_output_tokens": 32,
        "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}],
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
            {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
            {"type": "function_call", "call_id": "c2", "name": "get_weather", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "18C"}
        ]
    }));
    let m = v["messages"].as_array().unwrap();
    assert_eq!(m[0], json!({"role": "system", "content": "Be brief."}));
    assert_eq!(m[1], json!({"role": "user", "content": "Weather in Paris?"}));
    assert_eq!(m[2]["tool_calls"].as_array().unwrap().len(), 2);
    assert_eq!(m[3], json!({"role": "tool", "tool_call_id": "c1", "content": "18C"}));
    assert_eq!(v["tools"][0]["function"]["name"], "get_weather");
    assert_eq!(v["max_tokens"], 32);
    assert_eq!(
        openai(json!({"input": "hi"}))["messages"],
        json!([{"role": "user", "content": "hi"}])
    );
}

#[test]
fn state_the_server_does_not_keep_and_other_parts_are_refused() {
    for (body, says) in [
        (json!({"input": "x", "previous_response_id": "resp_1"}), "previous_response_id"),
        (
            json!({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}),
            "input_image",
        ),
        (json!({"input": "x", "tools": [{"type": "web_search"}]}), "function tools"),
        (json!({"input": "x", "text": {"format": {"type": "grammar"}}}), "grammar"),
    ] {
        let e = to_openai_chat(body.to_string().as_bytes()).expect_err(says);
        assert_eq!(e.status(), 400);
        assert!(e.message.contains(says), "{says}: {}", e.message);
    }
}

#[test]
fn a_streamed_answer_numbers_its_events_and_completes_with_every_item() {
    let meta = ResponseMeta { ticket: 4, created: 1, model: "m".into() };
    let mut w = EventWriter::new(meta);
    let mut events = w.start();
    events.extend(w.delta(&Delta::Content("Hel".into())));
    events.extend(w.delta(&Delta::Content("lo".into())));
    events.extend(w.delta(&Delta::ToolCall(ParsedCall {
        index: 0,
        name: "f".into(),
        arguments: "{}".into(),
    })));
    events.extend(w.finish("tool_calls", (5, 3, 0)));
    let seqs: Vec<u64> =
        events.iter().map(|(_, v)| v["sequence_number"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (0..events.len() as u64).collect::<Vec<_>>());
    let (last, done) = events.last().unwrap();
    assert_eq!(*last, "response.completed");
    let output = done["response"]["output"].as_array().unwrap();
    assert_eq!(output[0]["content"][0]["text"], "Hello");
    assert_eq!(output[1]["type"], "function_call");
    assert_eq!(done["response"]["usage"]["total_tokens"], 8);
}
