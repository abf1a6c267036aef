use super::*;
use crate::chat::Message;

fn defaults() -> Defaults {
    Defaults { sampling: SamplingPolicy::Greedy, max_tokens: None, n_ctx: 512 }
}

/// A byte-level BPE tokenizer without merges: one token per byte.
fn byte_tokenizer() -> crate::model::tokenizer::Tokenizer {
    use crate::model::tokenizer::{Kind, Tokenizer, byte_to_unicode, pre_tokenizer};
    let tokens: Vec<String> = byte_to_unicode().iter().map(|c| c.to_string()).collect();
    let n = tokens.len();
    let (pre, ignore_merges) = pre_tokenizer("default").expect("the default pre-tokenizer");
    let kind = Kind::Bpe { pre: pre.into_iter().map(String::from).collect(), ignore_merges };
    Tokenizer::new(kind, tokens, vec![1; n], vec![0.0; n], &[], None, None, false)
        .expect("tokenizer")
}

fn chat(body: &str) -> Result<Parsed, ApiError> {
    parse_chat(body.as_bytes(), &defaults(), 77)
}

#[test]
fn a_chat_body_keeps_its_messages_and_ignores_fields_it_does_not_know() {
    let p = chat(
        r#"{"model":"m","messages":[{"role":"system","content":"be brief"},
        {"role":"user","content":[{"type":"text","text":"hi "},{"type":"text","text":"there"}]}],
        "metadata":{"k":"v"},"user":"u1","stream":true,"stream_options":{"include_usage":true}}"#,
    )
    .expect("parses");
    let want = vec![Message::new("system", "be brief"), Message::new("user", "hi there")];
    assert_eq!(p.prompt, Prompt::Chat(Conversation::new(want)));
    assert!(p.stream && p.include_usage);
    assert_eq!(p.model.as_deref(), Some("m"));
    assert_eq!(p.sampling, SamplingPolicy::Greedy);
}

#[test]
fn more_than_one_choice_bad_types_and_empty_messages_are_invalid_requests() {
    for body in [
        r#"{"messages":[{"role":"user","content":"x"}],"n":2}"#,
        r#"{"messages":[{"role":"user","content":"x"}],"max_tokens":"ten"}"#,
        r#"{"messages":[]}"#,
        r#"{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}"#,
        r#"{"messages":[{"role":"user","content":"x"}],"max_tokens":0}"#,
        r#"{"messages":[{"role":"user","content":"x"}],"temperature":-1}"#,
        r#"not json"#,
    ] {
        let e = chat(body).expect_err(body);
        assert_eq!(e.status(), 400, "{body}");
    }
}

#[test]
fn a_temperature_samples_with_the_given_seed_or_a_fresh_one_and_zero_is_greedy() {
    let p = chat(
        r#"{"messages":[{"role":"user","content":"x"}],"temperature":0.7,"top_k":40,"seed":5}"#,
    )
    .expect("parses");
    let want = SamplingPolicy::Sample { temperature: 0.7, top_k: Some(40), top_p: None, seed: 5 };
    assert_eq!(p.sampling, want);
    let p = chat(r#"{"messages":[{"role":"user","content":"x"}],"temperature":0.7}"#).expect("ok");
    assert!(matches!(p.sampling, SamplingPolicy::Sample { seed: 77, .. }));
    let p = chat(r#"{"messages":[{"role":"user","content":"x"}],"temperature":0}"#).expect("ok");
    assert_eq!(p.sampling, SamplingPolicy::Greedy);
}

#[test]
fn stop_is_a_string_or_a_list_within_its_limits() {
    let p = chat(r#"{"messages":[{"role":"user","content":"x"}],"stop":"\n"}"#).expect("ok");
    assert_eq!(p.stop, vec!["\n".to_string()]);
    let many: Vec<String> = (0..17).map(|i| format!("\"s{i}\"")).collect();
    let body =
        format!(r#"{{"messages":[{{"role":"user","content":"x"}}],"stop":[{}]}}"#, many.join(","));
    assert_eq!(chat(&body).expect_err("17 stops").status(), 400);
}

#[test]
fn a_completion_prompt_is_text_or_token_ids_and_only_one() {
    let d = defaults();
    let p = parse_completion(br#"{"prompt":"Once"}"#, &d, 1).expect("text");
    assert_eq!(p.prompt, Prompt::Text("Once".into()));
    let p = parse_completion(br#"{"prompt":[1,2,3]}"#, &d, 1).expect("tokens");
    assert_eq!(p.prompt, Prompt::Tokens(vec![1, 2, 3]));
    let p = parse_completion(br#"{"prompt":["a"]}"#, &d, 1).expect("one text");
    assert_eq!(p.prompt, Prompt::Text("a".into()));
    assert_eq!(parse_completion(br#"{"prompt":["a","b"]}"#, &d, 1).expect_err("two").status(), 400);
    assert_eq!(parse_completion(br#"{}"#, &d, 1).expect_err("none").status(), 400);
}

#[test]
fn a_prompt_that_fills_the_context_is_an_exceed_context_size_error_naming_both_sizes() {
    let p = parse_completion(br#"{"prompt":"x","max_tokens":100}"#, &defaults(), 1).expect("ok");
    let e = p.request("r".into(), vec![1; 512], 512, 1000).expect_err("too long");
    assert_eq!((e.n_prompt_tokens, e.n_ctx), (Some(512), Some(512)));
    let r = p.request("r".into(), vec![1; 500], 512, 1000).expect("fits");
    assert_eq!(r.max_tokens, 12, "max_tokens is cut to what the context leaves");
    let e = p.request("r".into(), vec![5000], 512, 1000).expect_err("outside the vocabulary");
    assert_eq!(e.status(), 400);
}

#[test]
fn logprobs_carry_their_count_and_more_than_twenty_alternatives_are_refused() {
    let p =
        chat(r#"{"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":3}"#)
            .expect("parses");
    assert_eq!(p.logprobs, Some(3));
    let r = p.request("1".into(), vec![1, 2], 512, 100).expect("fits");
    assert_eq!(r.logprobs, Some(3));
    let many =
        chat(r#"{"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21}"#);
    assert_eq!(many.expect_err("21").status(), 400);
    let alone = chat(r#"{"messages":[{"role":"user","content":"x"}],"top_logprobs":2}"#);
    assert_eq!(alone.expect_err("without logprobs").status(), 400);
    let p = parse_completion(br#"{"prompt":"x","logprobs":2}"#, &defaults(), 1).expect("ok");
    assert_eq!(p.logprobs, Some(2));
}

#[test]
fn fields_that_would_change_the_output_are_refused_unless_neutral() {
    let x = r#""messages":[{"role":"user","content":"x"}]"#;
    for field in
        [r#""presence_penalty":0.5"#, r#""frequency_penalty":-1"#, r#""logit_bias":{"50256":-100}"#]
    {
        let e = chat(&format!("{{{x},{field}}}")).expect_err(field);
        assert_eq!((e.status(), e.reason.as_deref()), (400, Some(UNSUPPORTED)), "{field}");
        let name =
            field.rsplit_once(":{").map_or(field, |f| f.0).split('"').nth(1).expect("a name");
        let name = if name == "tools" { "tool_choice" } else { name };
        assert!(e.message.contains(name), "{field}: {}", e.message);
    }
    for neutral in [
        r#""presence_penalty":0,"frequency_penalty":0.0"#,
        r#""logit_bias":{}"#,
        r#""logit_bias":null,"presence_penalty":null"#,
        r#""tools":[]"#,
        r#""tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"auto""#,
        r#""tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required""#,
        r#""response_format":{"type":"text"}"#,
        r#""response_format":{"type":"json_object"}"#,
    ] {
        chat(&format!("{{{x},{neutral}}}")).unwrap_or_else(|e| panic!("{neutral}: {e:?}"));
    }
    let d = defaults();
    let e = parse_completion(br#"{"prompt":"x","frequency_penalty":1}"#, &d, 1).expect_err("pen");
    assert_eq!(e.status(), 400);
}

#[test]
fn a_developer_message_is_a_system_message() {
    let p = chat(
        r#"{"messages":[{"role":"developer","content":"be brief"},
        {"role":"user","content":"hi"}]}"#,
    )
    .expect("parses");
    let want = vec![Message::new("system", "be brief"), Message::new("user", "hi")];
    assert_eq!(p.prompt, Prompt::Chat(Conversation::new(want)));
}

#[test]
fn echo_repeats_a_completions_prompt_and_is_refused_with_logprobs() {
    let d = defaults();
    let p = parse_completion(br#"{"prompt":"Once upon","echo":true}"#, &d, 1).expect("echo");
    assert!(p.echo);
    let tok = byte_tokenizer();
    assert_eq!(p.echo_text(&tok).as_deref(), Some("Once upon"));
    let ids = tok.encode("Once upon", false, false);
    let body = format!(r#"{{"prompt":{ids:?},"echo":true}}"#);
    let p = parse_completion(body.as_bytes(), &d, 1).expect("echo of ids");
    assert_eq!(p.echo_text(&tok).as_deref(), Some("Once upon"));
    let p = parse_completion(br#"{"prompt":"Once"}"#, &d, 1).expect("no echo");
    assert_eq!(p.echo_text(&tok), None);
    let e = parse_completion(br#"{"prompt":"x","echo":true,"logprobs":1}"#, &d, 1)
        .expect_err("echo with logprobs");
    assert_eq!((e.status(), e.reason.as_deref()), (400, Some(UNSUPPORTED)));
}

#[test]
fn tool_calls_and_tool_results_reach_the_conversation_with_their_ids() {
    let p = chat(
        r#"{"messages":[{"role":"user","content":"weather?"},
        {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",
          "function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
        {"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"18C"}]}],
        "tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],
        "chat_template_kwargs":{"enable_thinking":false}}"#,
    )
    .expect("parses");
    let Prompt::Chat(conv) = p.prompt else { panic!("a chat") };
    assert_eq!(conv.tools.len(), 1);
    assert_eq!(conv.kwargs["enable_thinking"], false);
    let call = &conv.messages[1].tool_calls[0];
    assert_eq!((call.id.as_str(), call.name.as_str()), ("c1", "get_weather"));
    assert_eq!(call.arguments, r#"{"city":"Paris"}"#);
    assert_eq!(conv.messages[1].content, None);
    assert_eq!(conv.messages[2].tool_call_id.as_deref(), Some("c1"));
    assert_eq!(conv.messages[2].content.as_deref(), Some("18C"));
}

#[test]
fn bad_tools_and_tool_messages_are_invalid_requests_that_say_why() {
    let user = r#"{"role":"user","content":"x"}"#;
    for (body, says) in [
        (format!(r#"{{"messages":[{user}],"tools":[{{"type":"retrieval"}}]}}"#), "type 'function'"),
        (format!(r#"{{"messages":[{user}],"tools":[{{"type":"function","function":{{}}}}]}}"#), "name"),
        (
            format!(r#"{{"messages":[{user}],"tools":[{{"type":"function","function":{{"name":"f"}}}}],"tool_choice":{{"type":"function","function":{{"name":"g"}}}}}}"#),
            "not in 'tools'",
        ),
        (r#"{"messages":[{"role":"tool","content":"x"}]}"#.to_string(), "tool_call_id"),
        (r#"{"messages":[{"role":"robot","content":"x"}]}"#.to_string(), "unknown role"),
        (
            r#"{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}"#
                .to_string(),
            "'image_url'",
        ),
    ] {
        let e = chat(&body).expect_err(&body);
        assert_eq!(e.status(), 400, "{body}");
        assert!(e.message.contains(says), "{body}: {}", e.message);
    }
}

#[test]
fn a_response_format_names_the_schema_the_output_follows() {
    let x = r#""messages":[{"role":"user","content":"x"}]"#;
    let p = chat(&format!(r#"{{{x},"response_format":{{"type":"json_object"}}}}"#)).expect("ok");
    assert_eq!(p.format, Some(serde_json::json!({"type": "object"})));
    let p = chat(&format!(
        r#"{{{x},"response_format":{{"type":"json_schema","json_schema":{{"name":"s","schema":{{"type":"array"}}}}}}}}"#
    ))
    .expect("ok");
    assert_eq!(p.format, Some(serde_json::json!({"type": "array"})));
    assert_eq!(
        chat(&format!(r#"{{{x},"response_format":{{"type":"text"}}}}"#)).unwrap().format,
        None
    );
    for bad in [
        r#"{"type":"json_schema","json_schema":{"name":"s"}}"#,
        r#"{"type":"json_schema","json_schema":{"schema":3}}"#,
        r#"{"type":"yaml"}"#,
    ] {
        let e = chat(&format!(r#"{{{x},"response_format":{bad}}}"#)).expect_err(bad);
        assert_eq!(e.status(), 400, "{bad}");
    }
}
