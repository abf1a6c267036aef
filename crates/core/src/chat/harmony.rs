//! gpt-oss's answers (OpenAI's "harmony" format) read back as they stream: the answer is
//! a run of messages, each a header (`<|channel|>analysis`, `<|start|>assistant
//! <|channel|>final`, `<|channel|>commentary to=functions.NAME <|constrain|>json`) and a
//! body after `<|message|>` that ends at `<|end|>`, `<|call|>`, `<|return|>` or the end
//! of the answer. The `analysis` channel is reasoning; a message to `functions.NAME` is a
//! tool call whose body is its JSON arguments (when tools were offered); every other
//! message is content. Text outside any header (a model that ignores the format) is
//! content.

use serde_json::Value;

use super::delta::{Delta, ParsedCall};

/// The format's control tokens, as the detokenizer prints them.
pub const HARMONY_MARKERS: [&str; 7] = [
    "<|start|>",
    "<|channel|>",
    "<|message|>",
    "<|constrain|>",
    "<|end|>",
    "<|call|>",
    "<|return|>",
];

const MESSAGE: &str = "<|message|>";
const ENDS: [&str; 3] = ["<|end|>", "<|call|>", "<|return|>"];

/// What a message's body is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Body {
    Reasoning,
    Content,
    /// A call of this function: held whole until the message ends.
    Call(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Reading a header (up to `<|message|>`).
    Header,
    /// Inside a message's body.
    Body(Body),
}

/// Reads one harmony answer as it streams.
#[derive(Debug, Clone)]
pub struct HarmonyParser {
    state: State,
    buf: String,
    /// Whether tools were offered (a message to a function is a call).
    tools: bool,
    calls: usize,
}

/// The length of the longest suffix of `text` that could begin one of `markers`.
fn held_back(text: &str, markers: &[&str]) -> usize {
    markers
        .iter()
        .map(|m| {
            (1..m.len().min(text.len() + 1))
                .rev()
                .find(|&n| {
                    text.is_char_boundary(text.len() - n) && m.starts_with(&text[text.len() - n..])
                })
                .unwrap_or(0)
        })
        .max()
        .unwrap_or(0)
}

/// The word after `key` in a header (up to a space or a control token).
fn word_after<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let rest = &header[header.find(key)? + key.len()..];
    let end = rest.find(|c: char| c.is_whitespace() || c == '<').unwrap_or(rest.len());
    Some(&rest[..end]).filter(|w| !w.is_empty())
}

impl HarmonyParser {
    /// A parser; `tools`: tools were offered, so messages to functions are calls.
    pub fn new(tools: bool) -> HarmonyParser {
        HarmonyParser { state: State::Header, buf: String::new(), tools, calls: 0 }
    }

    /// How many tool calls were read so far.
    pub fn calls(&self) -> usize {
        self.calls
    }

    /// Reads the next piece; `end`: the answer ended (everything held is read).
    pub fn step(&mut self, piece: &str, end: bool, out: &mut Vec<Delta>) {
        self.buf.push_str(piece);
        loop {
            let before = (self.state.clone(), self.buf.len());
            match self.state.clone() {
                State::Header => self.header(end, out),
                State::Body(body) => self.body(body, end, out),
            }
            if (self.state.clone(), self.buf.len()) == before {
                return;
            }
        }
    }

    fn header(&mut self, end: bool, out: &mut Vec<Delta>) {
        let t = self.buf.trim_start();
        let header_like = t.is_empty()
            || ["<|", " to=", "to=", "assistant", "json"].iter().any(|p| t.starts_with(p))
            || "<|".starts_with(t);
        if !header_like {
            // Not the format: the rest is content.
            self.state = State::Body(Body::Content);
            return;
        }
        let Some(at) = self.buf.find(MESSAGE) else {
            if end && !t.is_empty() {
                let text = std::mem::take(&mut self.buf);
                push_text(out, Delta::Content(strip_markers(&text)));
            }
            return;
        };
        let header: String = self.buf.drain(..at + MESSAGE.len()).collect();
        let channel = word_after(&header, "<|channel|>").unwrap_or("final");
        let to = word_after(&header, "to=");
        self.state = State::Body(match (to, channel) {
            (Some(to), _) if self.tools => {
                Body::Call(to.strip_prefix("functions.").unwrap_or(to).to_string())
            }
            (_, "analysis") => Body::Reasoning,
            _ => Body::Content,
        });
    }

    fn body(&mut self, body: Body, end: bool, out: &mut Vec<Delta>) {
        let found = ENDS.iter().filter_map(|m| self.buf.find(m).map(|at| (at, m.len()))).min();
        let (text, closed) = match found {
            Some((at, len)) => {
                let text: String = self.buf.drain(..at).collect();
                self.buf.drain(..len);
                self.state = State::Header;
                (text, true)
            }
            None if end => (std::mem::take(&mut self.buf), true),
            None => {
                if matches!(body, Body::Call(_)) {
                    return;
                }
                let keep = held_back(&self.buf, &ENDS);
                (self.buf.drain(..self.buf.len() - keep).collect(), false)
            }
        };
        match body {
            Body::Reasoning => push_text(out, Delta::Reasoning(text)),
            Body::Content => push_text(out, Delta::Content(text)),
            Body::Call(name) if closed => {
                let args = serde_json::from_str::<Value>(text.trim()).ok().filter(Value::is_object);
                match args {
                    Some(args) if !name.is_empty() => {
                        let (index, arguments) = (self.calls, args.to_string());
                        self.calls += 1;
                        out.push(Delta::ToolCall(ParsedCall { index, name, arguments }));
                    }
                    _ => push_text(out, Delta::Content(text)),
                }
            }
            Body::Call(_) => {}
        }
    }
}

/// Pushes `delta` unless its text is empty.
fn push_text(out: &mut Vec<Delta>, delta: Delta) {
    let empty = match &delta {
        Delta::Content(t) | Delta::Reasoning(t) => t.is_empty(),
        Delta::ToolCall(_) => false,
    };
    if !empty {
        out.push(delta);
    }
}

/// `text` without the format's control tokens.
fn strip_markers(text: &str) -> String {
    HARMONY_MARKERS.iter().fold(text.to_string(), |t, m| t.replace(m, ""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(tools: bool, pieces: &[&str]) -> Vec<Delta> {
        let mut p = HarmonyParser::new(tools);
        let mut out = Vec::new();
        for piece in pieces {
            p.step(piece, false, &mut out);
        }
        p.step("", true, &mut out);
        // Merge consecutive texts of one kind, as a client assembles a stream.
        let mut merged: Vec<Delta> = Vec::new();
        for d in out {
            match (merged.last_mut(), &d) {
                (Some(Delta::Content(a)), Delta::Content(b)) => a.push_str(b),
                (Some(Delta::Reasoning(a)), Delta::Reasoning(b)) => a.push_str(b),
                _ => merged.push(d),
            }
        }
        merged
    }

    #[test]
    fn analysis_is_reasoning_and_final_is_content_however_the_answer_is_cut() {
        let answer = "<|channel|>analysis<|message|>The user greets.<|end|><|start|>assistant\
                      <|channel|>final<|message|>Hello there!";
        let want = vec![
            Delta::Reasoning("The user greets.".into()),
            Delta::Content("Hello there!".into()),
        ];
        assert_eq!(read(false, &[answer]), want);
        let bytes: Vec<String> = answer.chars().map(String::from).collect();
        let pieces: Vec<&str> = bytes.iter().map(String::as_str).collect();
        assert_eq!(read(false, &pieces), want, "one character at a time");
    }

    #[test]
    fn a_message_to_a_function_is_a_call_with_its_json_arguments_when_tools_were_offered() {
        let answer = "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant\
                      <|channel|>commentary to=functions.get_weather <|constrain|>json\
                      <|message|>{\"city\": \"Paris\"}";
        let got = read(true, &[answer]);
        assert_eq!(got[0], Delta::Reasoning("Need weather.".into()));
        assert_eq!(
            got[1],
            Delta::ToolCall(ParsedCall {
                index: 0,
                name: "get_weather".into(),
                arguments: "{\"city\":\"Paris\"}".into()
            })
        );
        // The recipient may come before the channel, and without tools it is content.
        let early = " to=functions.f<|channel|>commentary json<|message|>{\"a\": 1}<|call|>";
        assert!(matches!(&read(true, &[early])[0], Delta::ToolCall(c) if c.name == "f"));
        assert_eq!(read(false, &[early]), vec![Delta::Content("{\"a\": 1}".into())]);
    }

    #[test]
    fn text_that_ignores_the_format_and_a_call_that_does_not_parse_are_content() {
        assert_eq!(read(false, &["Just words."]), vec![Delta::Content("Just words.".into())]);
        let bad = "<|channel|>commentary to=functions.f<|message|>{not json";
        assert_eq!(read(true, &[bad]), vec![Delta::Content("{not json".into())]);
    }
}
