//! What every request passes before its route, outermost first: the `Host` check (DNS
//! rebinding, 403), the `Origin` check and CORS (preflights answered; another site's page
//! refused, 403), the API key (401), JSON-only bodies on the JSON routes (415), and the
//! body read whole within `--body-timeout-s` (408) and `--max-body-bytes` (413). The
//! rules themselves are the core's ([`crate::serve::access`]). Also [`off_loop`]: the
//! runtime thread drives the session, so a request's heavy work runs elsewhere.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;

use super::failure::Failure;
use super::state::Shared;
use crate::serve::access::{bearer_token, is_json};
use crate::serve::error::{ApiError, ErrorType};
use crate::wire::reason::ApiRefusal;

/// The routes whose POST body is JSON.
const JSON_ROUTES: [&str; 10] = [
    "/v1/chat/completions",
    "/v1/messages",
    "/v1/responses",
    "/api/chat",
    "/api/generate",
    "/chat/completions",
    "/v1/completions",
    "/completions",
    "/tokenize",
    "/detokenize",
];

/// Runs `work` on tokio's blocking pool: the server's runtime is one thread, which also
/// drives the session, so parsing a large body or decoding many tokens there would stall
/// every stream.
pub async fn off_loop<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|_| ApiError::new(ErrorType::ServerError, "the request's work failed"))
}

fn header_str<'a>(headers: &'a HeaderMap, name: &header::HeaderName) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn forbidden(reason: ApiRefusal, message: &str) -> Response {
    Failure(ApiError::new(ErrorType::PermissionError, message).refused(reason)).into_response()
}

/// Refuses a request whose `Host` the server does not answer to (a page on another name
/// that resolves to this server: DNS rebinding). A request without one (HTTP/1.0) passes.
pub async fn host(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    let given = header_str(request.headers(), &header::HOST);
    if let Some(h) = given
        && !shared.config.access.host_allowed(h)
    {
        return forbidden(
            ApiRefusal::HostNotAllowed,
            &format!("this server does not answer to the host {h:?} (see --allowed-host)"),
        );
    }
    next.run(request).await
}

/// CORS: a request with an `Origin` the rules allow is answered with that origin allowed
/// (a preflight at once, 204); one with another origin is refused (403), so another
/// site's page can neither read nor drive the API. A request without `Origin` (curl, the
/// SDKs) passes untouched.
pub async fn cors(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    let Some(origin) = header_str(headers, &header::ORIGIN).map(str::to_string) else {
        return next.run(request).await;
    };
    if !shared.config.access.origin_allowed(&origin, header_str(headers, &header::HOST)) {
        return forbidden(
            ApiRefusal::OriginNotAllowed,
            &format!("pages from {origin:?} may not use this server (see --cors-origin)"),
        );
    }
    let preflight = request.method() == Method::OPTIONS
        && headers.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    let mut response = if preflight {
        let asked = headers.get(header::ACCESS_CONTROL_REQUEST_HEADERS).cloned();
        let mut r = StatusCode::NO_CONTENT.into_response();
        let h = r.headers_mut();
        h.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("GET, POST"));
        let allow = asked.unwrap_or(HeaderValue::from_static("authorization, content-type"));
        h.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, allow);
        h.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("600"));
        r
    } else {
        next.run(request).await
    };
    let h = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&origin) {
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, v);
    }
    h.insert(header::VARY, HeaderValue::from_static("origin"));
    h.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static("retry-after"));
    response
}

/// `--api-key-file`: every route but `/health` and the page needs `Authorization: Bearer
/// KEY` (the scheme in any case), compared in constant time.
pub async fn auth(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    let Some(key) = &shared.config.api_key else { return next.run(request).await };
    let path = request.uri().path();
    if matches!(path, "/health" | "/v1/health" | "/") {
        return next.run(request).await;
    }
    // A bearer token, or Anthropic's `x-api-key` header (its clients send that).
    let given = header_str(request.headers(), &header::AUTHORIZATION)
        .and_then(bearer_token)
        .or_else(|| request.headers().get("x-api-key").and_then(|v| v.to_str().ok()))
        .unwrap_or("");
    if super::key::same_key(given, key) {
        return next.run(request).await;
    }
    let e = ApiError::new(ErrorType::AuthenticationError, "invalid or missing API key");
    let mut r = Failure(e).into_response();
    r.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    r
}

/// A POST to a JSON route must say its body is JSON (a form or `text/plain` post, which
/// any page may send without asking, is refused: 415); its body is then read whole
/// within the body timeout (408, and the connection closes) and the size limit (413).
pub async fn json_body(
    State(shared): State<Arc<Shared>>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() != Method::POST || !JSON_ROUTES.contains(&request.uri().path()) {
        return next.run(request).await;
    }
    let content_type = header_str(request.headers(), &header::CONTENT_TYPE).unwrap_or("");
    if !is_json(content_type) {
        let e = ApiError::new(
            ErrorType::UnsupportedMediaType,
            format!("the body must be JSON (Content-Type: application/json), not {content_type:?}"),
        );
        return Failure(e).into_response();
    }
    let limits = shared.config.limits;
    let declared =
        header_str(request.headers(), &header::CONTENT_LENGTH).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limits.max_body as u64) {
        return Failure(too_large()).into_response();
    }
    let (parts, body) = request.into_parts();
    match tokio::time::timeout(limits.body_timeout, read_whole(body, limits.max_body)).await {
        Ok(Ok(bytes)) => next.run(Request::from_parts(parts, Body::from(bytes))).await,
        Ok(Err(e)) => Failure(e).into_response(),
        Err(_) => {
            let e = ApiError::new(
                ErrorType::RequestTimeout,
                format!(
                    "the request body did not arrive within {} s",
                    limits.body_timeout.as_secs_f64()
                ),
            )
            .refused(ApiRefusal::BodyTimeout);
            let mut r = Failure(e).into_response();
            r.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
            r
        }
    }
}

fn too_large() -> ApiError {
    ApiError::new(ErrorType::RequestTooLarge, "the request body is over the limit")
}

/// The body's bytes, at most `max` of them.
async fn read_whole(body: Body, max: usize) -> Result<Bytes, ApiError> {
    let mut stream = body.into_data_stream();
    let mut whole = bytes::BytesMut::new();
    while let Some(chunk) = stream.next().await {
        let chunk =
            chunk.map_err(|e| ApiError::invalid(format!("the body could not be read: {e}")))?;
        if whole.len() + chunk.len() > max {
            return Err(too_large());
        }
        whole.extend_from_slice(&chunk);
    }
    Ok(whole.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn work_sent_off_the_loop_runs_while_the_runtime_thread_is_busy_elsewhere() {
        // On a one-thread runtime, work that waits for a task of that same runtime only
        // finishes if it runs on another thread.
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
        let done = rt.block_on(async {
            let (tx, rx) = std::sync::mpsc::channel::<()>();
            let work = off_loop(move || rx.recv_timeout(Duration::from_secs(30)).is_ok());
            let signal = async move {
                tokio::task::yield_now().await;
                tx.send(()).expect("send");
            };
            let (done, ()) = tokio::join!(work, signal);
            done
        });
        assert_eq!(done, Ok(true));
    }
}
