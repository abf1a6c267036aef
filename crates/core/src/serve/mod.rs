//! The OpenAI-compatible API's pure side: requests parsed and judged into a session's
//! [`Request`](crate::orchestrator::requests::Request) ([`params`]), the response and
//! stream-chunk shapes with their `usage` and `timings` ([`shapes`]; a chat's content,
//! reasoning and tool calls in [`chat_answer`]), one error shape
//! ([`error`]), the server's lifecycle ([`phase`]: whether it serves, and why not), and
//! who may reach it from a browser ([`access`]).
//! Anthropic's Messages API ([`anthropic`]), OpenAI's Responses API ([`responses`]) and
//! Ollama's chat and generate ([`ollama`]) are read into the same request and answered in
//! their own shapes.
//! No IO and no clock: the server passes the moments and the fresh seeds in.

pub mod access;
pub mod anthropic;
pub mod chat_answer;
pub mod error;
pub mod ollama;
pub mod openai_chat;
pub mod params;
pub mod phase;
pub mod responses;
pub mod shapes;
