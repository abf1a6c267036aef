use super::*;

fn whole(format: ToolFormat, reasoning: bool, open: bool, text: &str) -> Vec<Delta> {
    merge(parse_whole(&mut OutputParser::new(format, reasoning, open), text))
}

/// Joins neighbouring text deltas of one kind (streams cut them anywhere).
fn merge(deltas: Vec<Delta>) -> Vec<Delta> {
    let mut out: Vec<Delta> = Vec::new();
    for d in deltas {
        match (out.last_mut(), d) {
            (Some(Delta::Content(a)), Delta::Content(b)) => a.push_str(&b),
            (Some(Delta::Reasoning(a)), Delta::Reasoning(b)) => a.push_str(&b),
            (_, d) => out.push(d),
        }
    }
    out
}

fn call(index: usize, name: &str, args: &str) -> Delta {
    Delta::ToolCall(ParsedCall { index, name: name.into(), arguments: args.into() })
}

fn content(s: &str) -> Delta {
    Delta::Content(s.into())
}

#[test]
fn hermes_calls_are_read_with_the_text_around_them() {
    let text = "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>{\"name\":\"t\",\"arguments\":\"{}\"}</tool_call>";
    assert_eq!(
        whole(ToolFormat::Hermes, false, false, text),
        vec![
            content("Let me check.\n"),
            call(0, "get_weather", r#"{"city":"Paris"}"#),
            content("\n"),
            call(1, "t", "{}")
        ]
    );
}

#[test]
fn a_call_written_badly_comes_back_as_text() {
    let bad = "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": }</tool_call>";
    assert_eq!(whole(ToolFormat::Hermes, false, false, bad), vec![content(bad)]);
    let unclosed = "<tool_call>{\"name\": \"f\"";
    assert_eq!(whole(ToolFormat::Hermes, false, false, unclosed), vec![content(unclosed)]);
    let not_a_call = "{\"weather\": \"sunny\"}";
    assert_eq!(whole(ToolFormat::Llama3Json, false, false, not_a_call), vec![content(not_a_call)]);
    let mistral = "[TOOL_CALLS][{\"oops\"";
    assert_eq!(whole(ToolFormat::Mistral, false, false, mistral), vec![content(mistral)]);
}

#[test]
fn an_unclosed_hermes_call_that_parses_is_a_call() {
    let text = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n";
    assert_eq!(whole(ToolFormat::Hermes, false, false, text), vec![call(0, "f", r#"{"x":1}"#)]);
}

#[test]
fn a_bare_json_answer_naming_an_offered_tool_is_a_hermes_call() {
    let parse = |text: &str| {
        let p = OutputParser::new(ToolFormat::Hermes, false, false)
            .with_tool_names(vec!["get_weather".into()]);
        merge(parse_whole(&mut p.clone(), text))
    };
    let bare = "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}";
    assert_eq!(parse(bare), vec![call(0, "get_weather", r#"{"city":"Paris"}"#)]);
    assert_eq!(
        parse(&format!("```json\n{bare}\n```")),
        vec![call(0, "get_weather", r#"{"city":"Paris"}"#)]
    );
    let other = "{\"name\": \"launch\", \"arguments\": {}}";
    assert_eq!(parse(other), vec![content(other)]);
    assert_eq!(parse("{\"a\": 1}"), vec![content("{\"a\": 1}")]);
}

#[test]
fn llama3_and_mistral_calls_are_read() {
    let llama = "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}";
    assert_eq!(
        whole(ToolFormat::Llama3Json, false, false, llama),
        vec![call(0, "get_weather", r#"{"city":"Oslo"}"#)]
    );
    let v3 = "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", \"arguments\": {\"k\": true}}]";
    assert_eq!(
        whole(ToolFormat::Mistral, false, false, v3),
        vec![call(0, "a", "{}"), call(1, "b", r#"{"k":true}"#)]
    );
    let v11 = "[TOOL_CALLS]a[ARGS]{\"x\": 2}[TOOL_CALLS]b[ARGS]{}";
    assert_eq!(
        whole(ToolFormat::Mistral, false, false, v11),
        vec![call(0, "a", r#"{"x":2}"#), call(1, "b", "{}")]
    );
}

#[test]
fn reasoning_is_kept_apart_from_the_answer() {
    let text = "<think>\nThe user wants 2+2.\n</think>\n\nIt is 4.";
    assert_eq!(
        whole(ToolFormat::Hermes, true, false, text),
        vec![Delta::Reasoning("\nThe user wants 2+2.\n".into()), content("It is 4.")]
    );
    // A prompt that opened the block: the answer starts inside it.
    assert_eq!(
        whole(ToolFormat::None, true, true, "hmm</think>4"),
        vec![Delta::Reasoning("hmm".into()), content("4")]
    );
    // A model whose template has no reasoning keeps the tags as text.
    assert_eq!(
        whole(ToolFormat::None, false, false, "<think>x</think>"),
        vec![content("<think>x</think>")]
    );
}

#[test]
fn an_answer_cut_into_any_pieces_reads_as_the_whole_answer() {
    let cases = [
        (
            ToolFormat::Hermes,
            true,
            "<think>a</think>Hi <tool_call>{\"name\": \"f\", \"arguments\": {\"q\": \"<tool\"}}</tool_call> bye <tool",
        ),
        (ToolFormat::Llama3Json, false, "  {\"name\": \"f\", \"parameters\": {}}"),
        (ToolFormat::Mistral, false, "ok [TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}]"),
        (ToolFormat::None, true, "<thi"),
    ];
    for (format, reasoning, text) in cases {
        let want = whole(format, reasoning, false, text);
        let chars: Vec<char> = text.chars().collect();
        for step in 1..6 {
            let mut p = OutputParser::new(format, reasoning, false);
            let mut got = Vec::new();
            for piece in chars.chunks(step) {
                got.extend(p.push(&piece.iter().collect::<String>()));
            }
            got.extend(p.finish());
            assert_eq!(merge(got), want, "{text:?} in pieces of {step}");
        }
    }
}

#[test]
fn formats_are_read_from_the_templates_that_teach_them() {
    assert_eq!(ToolFormat::of_template("{{'<tool_call>'}}"), ToolFormat::Hermes);
    assert_eq!(ToolFormat::of_template("[TOOL_CALLS]"), ToolFormat::Mistral);
    assert_eq!(
        ToolFormat::of_template("<|start_header_id|>{{ 'parameters' }}"),
        ToolFormat::Llama3Json
    );
    assert_eq!(ToolFormat::of_template("<|im_start|>"), ToolFormat::None);
}
