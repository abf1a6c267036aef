//! What reading an answer gives: [`Delta`]s of content, reasoning and whole tool calls
//! (shared by the answer formats' readers).

/// A tool call read from the answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedCall {
    /// Its place among the answer's calls (0, 1, ...).
    pub index: usize,
    /// The function called.
    pub name: String,
    /// The arguments as compact JSON text (an object).
    pub arguments: String,
}

/// A piece of the answer, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delta {
    /// Text of the answer.
    Content(String),
    /// Text of the reasoning before it.
    Reasoning(String),
    /// A whole tool call.
    ToolCall(ParsedCall),
}
