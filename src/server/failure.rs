//! The one shape every error of the HTTP API leaves in ([`Failure`]).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::serve::error::ApiError;

/// An API error as a response: its status, its JSON body, and `Retry-After` on 429 / 503.
pub struct Failure(pub ApiError);

impl From<ApiError> for Failure {
    fn from(e: ApiError) -> Self {
        Failure(e)
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.0.status()).unwrap_or(StatusCode::BAD_REQUEST);
        let mut r =
            (status, [(header::CONTENT_TYPE, "application/json")], self.0.body()).into_response();
        if matches!(status.as_u16(), 429 | 503) {
            r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        r
    }
}
