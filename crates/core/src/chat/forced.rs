//! A forced tool call (`tool_choice: "required"` or a named function) as a grammar of the
//! call format the template teaches: llguidance's Lark with the call as a JSON schema
//! (`%json`), so constrained sampling can only write one well-formed call of an offered
//! tool with arguments that follow its parameters' schema.

use serde_json::{Value, json};

use super::output::ToolFormat;

/// The JSON schema of one call of any of `tools` (OpenAI's tool objects), with the
/// arguments under `key` (`arguments`, or Llama 3's `parameters`).
fn call_schema(tools: &[&Value], key: &str) -> Value {
    let one = |t: &Value| {
        let f = &t["function"];
        let params = f.get("parameters").cloned().unwrap_or(json!({"type": "object"}));
        json!({"type": "object",
               "properties": {"name": {"const": f["name"]}, key: params},
               "required": ["name", key], "additionalProperties": false})
    };
    match tools {
        [t] => one(t),
        _ => json!({"anyOf": tools.iter().map(|t| one(t)).collect::<Vec<_>>()}),
    }
}

/// The Lark grammar of one call of `tools` (those named `only`, if given) in `format`;
/// `markers(text)` is the token id of a control token the format writes (Mistral's
/// `[TOOL_CALLS]`). `None` where the format is not one this build writes.
pub fn forced_call_grammar(
    format: ToolFormat,
    tools: &[Value],
    only: Option<&str>,
    marker: impl Fn(&str) -> Option<u32>,
) -> Option<String> {
    let chosen: Vec<&Value> =
        tools.iter().filter(|t| only.is_none_or(|n| t["function"]["name"] == n)).collect();
    if chosen.is_empty() {
        return None;
    }
    let grammar = match format {
        ToolFormat::Hermes => {
            let call = call_schema(&chosen, "arguments");
            format!("start: \"<tool_call>\\n\" call \"\\n</tool_call>\"\ncall: %json {call}\n")
        }
        ToolFormat::Llama3Json => {
            format!("start: call\ncall: %json {}\n", call_schema(&chosen, "parameters"))
        }
        ToolFormat::Mistral => {
            let calls = json!({"type": "array", "items": call_schema(&chosen, "arguments"),
                               "minItems": 1, "maxItems": 1});
            let open = match marker("[TOOL_CALLS]") {
                Some(id) => format!("<[{id}]>"),
                None => "\"[TOOL_CALLS]\"".to_string(),
            };
            format!("start: {open} calls\ncalls: %json {calls}\n")
        }
        ToolFormat::Harmony => {
            // `<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{..}`,
            // one alternative per tool (the name picks the arguments' schema).
            let token = |t: &str| match marker(t) {
                Some(id) => format!("<[{id}]>"),
                None => format!("{t:?}"),
            };
            let (channel, constrain, message) =
                (token("<|channel|>"), token("<|constrain|>"), token("<|message|>"));
            let mut alts = Vec::new();
            let mut rules = String::new();
            for (i, t) in chosen.iter().enumerate() {
                let f = &t["function"];
                let name = f["name"].as_str().unwrap_or_default();
                let params = f.get("parameters").cloned().unwrap_or(json!({"type": "object"}));
                let head = format!("commentary to=functions.{name} ");
                alts.push(format!("{channel} {:?} {constrain} \"json\" {message} args{i}", head));
                rules.push_str(&format!("args{i}: %json {params}\n"));
            }
            format!("start: {}\n{rules}", alts.join(" | "))
        }
        ToolFormat::None => return None,
    };
    Some(grammar)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forced_harmony_call_addresses_one_chosen_function_with_its_schema_after_json() {
        let tools = vec![
            json!({"type": "function", "function": {"name": "a", "parameters": {"type": "object"}}}),
            json!({"type": "function", "function": {"name": "b"}}),
        ];
        let ids = |t: &str| match t {
            "<|channel|>" => Some(5),
            "<|constrain|>" => Some(6),
            "<|message|>" => Some(7),
            _ => None,
        };
        let g = forced_call_grammar(ToolFormat::Harmony, &tools, Some("b"), ids).unwrap();
        assert_eq!(
            g,
            "start: <[5]> \"commentary to=functions.b \" <[6]> \"json\" <[7]> args0\n\
             args0: %json {\"type\":\"object\"}\n"
        );
    }

    #[test]
    fn a_forced_call_is_one_call_of_the_chosen_tools_in_the_templates_format() {
        let tools = vec![
            json!({"type": "function", "function": {"name": "a", "parameters": {"type": "object"}}}),
            json!({"type": "function", "function": {"name": "b"}}),
        ];
        let g = forced_call_grammar(ToolFormat::Hermes, &tools, None, |_| None).unwrap();
        assert!(g.starts_with("start: \"<tool_call>\\n\" call \"\\n</tool_call>\""), "{g}");
        assert!(
            g.contains("\"anyOf\"")
                && g.contains("\"const\":\"a\"")
                && g.contains("\"const\":\"b\"")
        );
        let named =
            forced_call_grammar(ToolFormat::Llama3Json, &tools, Some("b"), |_| None).unwrap();
        assert!(named.contains("\"parameters\"") && !named.contains("\"const\":\"a\""), "{named}");
        let mistral = forced_call_grammar(ToolFormat::Mistral, &tools, None, |_| Some(9)).unwrap();
        assert!(mistral.starts_with("start: <[9]> calls"), "{mistral}");
        assert_eq!(forced_call_grammar(ToolFormat::None, &tools, None, |_| None), None);
        assert_eq!(forced_call_grammar(ToolFormat::Hermes, &tools, Some("c"), |_| None), None);
    }
}
