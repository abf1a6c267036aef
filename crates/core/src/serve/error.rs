//! One error shape for every refusal, `{"error":{"code","message","type"}}`, with the HTTP
//! status it goes out with, following OpenAI and llama.cpp's `llama-server`.

use serde::Serialize;

use crate::wire::reason::ApiRefusal;

/// The error's `type`, which fixes its status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorType {
    /// 400: the request is malformed or asks for what is not offered.
    InvalidRequestError,
    /// 400: the prompt does not fit the context.
    ExceedContextSizeError,
    /// 401: the bearer token is missing or wrong.
    AuthenticationError,
    /// 403: the request's `Host` or `Origin` is not allowed.
    PermissionError,
    /// 404: no such route, or no such model.
    NotFoundError,
    /// 408: the request's body did not arrive in time.
    RequestTimeout,
    /// 413: the body is over the limit.
    RequestTooLarge,
    /// 415: the body is not JSON.
    UnsupportedMediaType,
    /// 429: the admission queue is full.
    RateLimitError,
    /// 503: no session can serve now.
    UnavailableError,
    /// 500: the server failed.
    ServerError,
}

impl ErrorType {
    /// The HTTP status it goes out with.
    pub fn status(self) -> u16 {
        match self {
            ErrorType::InvalidRequestError | ErrorType::ExceedContextSizeError => 400,
            ErrorType::AuthenticationError => 401,
            ErrorType::PermissionError => 403,
            ErrorType::NotFoundError => 404,
            ErrorType::RequestTimeout => 408,
            ErrorType::RequestTooLarge => 413,
            ErrorType::UnsupportedMediaType => 415,
            ErrorType::RateLimitError => 429,
            ErrorType::UnavailableError => 503,
            ErrorType::ServerError => 500,
        }
    }
}

/// Prompt bytes per context position past which a prompt is refused before it is
/// tokenized (no token of a vocabulary in use spells more).
pub const MAX_PROMPT_BYTES_PER_POSITION: usize = 64;

/// An API error: the body's `error` object.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApiError {
    /// The HTTP status, repeated as a number (llama-server's convention).
    pub code: u16,
    /// What went wrong, for a person.
    pub message: String,
    /// The kind, for a program.
    #[serde(rename = "type")]
    pub kind: ErrorType,
    /// `exceed_context_size_error`: the prompt's tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n_prompt_tokens: Option<u32>,
    /// `exceed_context_size_error` of a prompt refused by its length before it was
    /// tokenized: its bytes (its tokens were never counted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n_prompt_bytes: Option<usize>,
    /// `exceed_context_size_error`: the context.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n_ctx: Option<u32>,
    /// A stable reason below the type (`busy`, `session_forming`, a fault's `class.code`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The body: `{"error": …}`.
#[derive(Debug, Clone, Serialize)]
pub struct ErrorBody<'a> {
    /// The error.
    pub error: &'a ApiError,
}

impl ApiError {
    /// An error of `kind` saying `message`.
    pub fn new(kind: ErrorType, message: impl Into<String>) -> ApiError {
        ApiError {
            code: kind.status(),
            message: message.into(),
            kind,
            n_prompt_tokens: None,
            n_prompt_bytes: None,
            n_ctx: None,
            reason: None,
        }
    }

    /// 400 `invalid_request_error`.
    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorType::InvalidRequestError, message)
    }

    /// 400 `exceed_context_size_error`.
    pub fn exceeds_context(n_prompt_tokens: u32, n_ctx: u32) -> ApiError {
        ApiError {
            n_prompt_tokens: Some(n_prompt_tokens),
            n_ctx: Some(n_ctx),
            ..ApiError::new(
                ErrorType::ExceedContextSizeError,
                format!(
                    "the request exceeds the available context size: {n_prompt_tokens} prompt \
                     tokens, a context of {n_ctx}"
                ),
            )
        }
    }

    /// 400 `exceed_context_size_error` of a prompt of `n_prompt_bytes` bytes, refused
    /// before tokenizing: more than [`MAX_PROMPT_BYTES_PER_POSITION`] bytes per position
    /// of a context of `n_ctx` cannot fit.
    pub fn exceeds_context_bytes(n_prompt_bytes: usize, n_ctx: u32) -> ApiError {
        let most = MAX_PROMPT_BYTES_PER_POSITION * n_ctx as usize;
        ApiError {
            n_prompt_bytes: Some(n_prompt_bytes),
            n_ctx: Some(n_ctx),
            ..ApiError::new(
                ErrorType::ExceedContextSizeError,
                format!(
                    "the request exceeds the available context size: the prompt has \
                     {n_prompt_bytes} bytes, more than a context of {n_ctx} tokens can hold \
                     ({most} bytes); it was not tokenized"
                ),
            )
        }
    }

    /// 503 `unavailable_error` for `reason`.
    pub fn unavailable(reason: ApiRefusal, message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorType::UnavailableError, message).refused(reason)
    }

    /// The same error with the API's refusal `reason`.
    pub fn refused(self, reason: ApiRefusal) -> ApiError {
        self.because(reason.as_str())
    }

    /// The same error with a stable reason.
    pub fn because(mut self, reason: &str) -> ApiError {
        self.reason = Some(reason.to_string());
        self
    }

    /// The HTTP status.
    pub fn status(&self) -> u16 {
        self.code
    }

    /// The body, as JSON.
    pub fn body(&self) -> String {
        serde_json::to_string(&ErrorBody { error: self }).unwrap_or_default()
    }

    /// The error a session's request error (its stable reason) becomes: a refusal is the
    /// client's (400) or the queue's (429); anything else (a fault, the session's end, the
    /// operator's stop) means no session serves it now (503).
    pub fn from_request_error(reason: &str, n_prompt_tokens: u32, n_ctx: u32) -> ApiError {
        match reason {
            "busy" => ApiError::new(
                ErrorType::RateLimitError,
                "every slot is taken and the admission queue is full",
            )
            .refused(ApiRefusal::Busy),
            "prompt_too_long" => ApiError::exceeds_context(n_prompt_tokens, n_ctx),
            "empty_prompt" => ApiError::invalid("the prompt is empty").because(reason),
            "invalid_sampling" => {
                ApiError::invalid("the sampling parameters are out of range").because(reason)
            }
            fault => ApiError::new(
                ErrorType::UnavailableError,
                format!("the session serving this request ended: {fault}"),
            )
            .because(fault),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_has_one_shape_with_its_status_as_code_and_its_type() {
        let e = ApiError::exceeds_context(900, 512);
        let v: serde_json::Value = serde_json::from_str(&e.body()).expect("json");
        assert_eq!(v["error"]["code"], 400);
        assert_eq!(v["error"]["type"], "exceed_context_size_error");
        assert_eq!(v["error"]["n_prompt_tokens"], 900);
        assert_eq!(v["error"]["n_ctx"], 512);
        assert!(v["error"]["message"].as_str().is_some_and(|m| m.contains("900")));
    }

    #[test]
    fn a_prompt_refused_by_its_length_says_bytes_and_invents_no_token_count() {
        let e = ApiError::exceeds_context_bytes(40_000, 512);
        let v: serde_json::Value = serde_json::from_str(&e.body()).expect("json");
        assert_eq!(v["error"]["type"], "exceed_context_size_error");
        assert_eq!(v["error"]["n_prompt_bytes"], 40_000);
        assert_eq!(v["error"]["n_ctx"], 512);
        assert!(v["error"].get("n_prompt_tokens").is_none(), "{v}");
        let m = v["error"]["message"].as_str().expect("message");
        assert!(m.contains("40000 bytes") && !m.contains("tokens,"), "{m}");
    }

    #[test]
    fn a_full_queue_is_429_a_fault_is_503_and_a_bad_prompt_is_400() {
        assert_eq!(ApiError::from_request_error("busy", 3, 512).status(), 429);
        assert_eq!(ApiError::from_request_error("membership.node_down", 3, 512).status(), 503);
        assert_eq!(ApiError::from_request_error("empty_prompt", 0, 512).status(), 400);
        let long = ApiError::from_request_error("prompt_too_long", 600, 512);
        assert_eq!(long.kind, ErrorType::ExceedContextSizeError);
    }
}
