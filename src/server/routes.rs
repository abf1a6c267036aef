//! The HTTP API's routes: OpenAI's chat and text completions (whole or streamed as
//! server-sent events), models, health, tokenize / detokenize, slots, metrics, the pool's
//! view and the page. Every error leaves in one shape ([`Failure`](super::failure::Failure)).

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{StatusCode, header};
use axum::middleware;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::answer;
use super::failure::Failure;
use super::guard::{self, off_loop};
use super::prompt::{body, constrain, tokenize_prompt};
use super::state::Shared;
use super::track::Tracker;
use crate::model::tokenizer::Tokenizer;
use crate::serve::error::{ApiError, ErrorType, MAX_PROMPT_BYTES_PER_POSITION};
use crate::serve::params::{parse_chat, parse_completion};
use crate::serve::shapes::{Api, Meta};
use crate::wire::reason::ApiRefusal;

/// The page at `/`: one self-contained file, embedded.
const PAGE: &str = include_str!("page.html");

/// Every route, behind [`guard`]'s checks (outermost first: `Host`, CORS, the API key,
/// JSON bodies) and the body limit.
pub fn router(shared: Arc<Shared>) -> Router {
    let max_body = shared.config.limits.max_body;
    Router::new()
        .route("/", get(page))
        .route("/health", get(health))
        .route("/v1/health", get(health))
        .route("/v1/models", get(models))
        .route("/models", get(models))
        .route("/v1/models/{*id}", get(model))
        .route("/models/{*id}", get(model))
        .route("/v1/chat/completions", post(chat))
        .route("/chat/completions", post(chat))
        .route("/v1/completions", post(completions))
        .route("/completions", post(completions))
        .route("/v1/messages", post(super::messages::messages))
        .route("/v1/responses", post(super::responses::responses))
        .route("/api/chat", post(super::ollama::chat))
        .route("/api/generate", post(super::ollama::generate))
        .route("/api/tags", get(super::ollama::tags))
        .route("/api/version", get(super::ollama::version))
        .route("/tokenize", post(tokenize))
        .route("/detokenize", post(detokenize))
        .route("/slots", get(slots))
        .route("/metrics", get(metrics))
        .route("/pool", get(pool))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(shared.clone(), guard::json_body))
        .layer(middleware::from_fn_with_state(shared.clone(), guard::auth))
        .layer(middleware::from_fn_with_state(shared.clone(), guard::cors))
        .layer(middleware::from_fn_with_state(shared.clone(), guard::host))
        .layer(DefaultBodyLimit::max(max_body))
        .with_state(shared)
}

async fn not_found() -> Failure {
    Failure(ApiError::new(ErrorType::NotFoundError, "no such route"))
}

async fn method_not_allowed() -> Response {
    let mut e =
        ApiError::new(ErrorType::InvalidRequestError, "this route does not take that method");
    e.code = 405;
    let mut r = Failure(e).into_response();
    *r.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
    r
}

async fn page() -> Html<&'static str> {
    Html(PAGE)
}

async fn health(State(shared): State<Arc<Shared>>) -> Response {
    match shared.phase().health() {
        Ok(()) => axum::Json(json!({"status": "ok"})).into_response(),
        Err(e) => {
            let mut r = Failure(e.clone()).into_response();
            let body = json!({"status": e.reason, "error": e});
            *r.body_mut() = axum::body::Body::from(body.to_string());
            r
        }
    }
}

/// The served model as OpenAI's model object.
fn model_object(shared: &Shared) -> serde_json::Value {
    let c = &shared.config;
    json!({
        "id": c.model_name,
        "object": "model",
        "created": c.created,
        "owned_by": "swactor",
        "meta": {"n_ctx": shared.n_ctx(), "n_vocab": c.vocab},
    })
}

async fn models(State(shared): State<Arc<Shared>>) -> axum::Json<serde_json::Value> {
    axum::Json(json!({"object": "list", "data": [model_object(&shared)]}))
}

/// `GET /v1/models/{id}`: the served model, or 404 `model_not_found`.
async fn model(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
) -> Result<axum::Json<serde_json::Value>, Failure> {
    if id == shared.config.model_name {
        return Ok(axum::Json(model_object(&shared)));
    }
    let message = format!(
        "the model {id:?} does not exist (this server serves {:?})",
        shared.config.model_name
    );
    Err(ApiError::new(ErrorType::NotFoundError, message).refused(ApiRefusal::ModelNotFound).into())
}

async fn metrics(State(shared): State<Arc<Shared>>) -> Response {
    let ct = "application/openmetrics-text; version=1.0.0; charset=utf-8";
    ([(header::CONTENT_TYPE, ct)], shared.metrics.encode()).into_response()
}

async fn pool(State(shared): State<Arc<Shared>>) -> axum::Json<serde_json::Value> {
    let phase = shared.phase().clone();
    let mut view = serde_json::to_value(&*shared.view()).unwrap_or_default();
    view["phase"] = json!(phase.phase);
    view["sessions_formed"] = json!(phase.sessions_formed);
    view["faults"] = json!(phase.faults);
    axum::Json(view)
}

async fn slots(State(shared): State<Arc<Shared>>) -> Result<Response, Failure> {
    let report = shared.slots().await?;
    let n_ctx = shared.n_ctx();
    let slots: Vec<serde_json::Value> = report
        .slots
        .iter()
        .map(|s| {
            let mut v = json!(s);
            v["n_ctx"] = json!(n_ctx);
            // The stores are the stages', shared by every slot.
            v["prompt_cache"] = json!(report.prompt_cache);
            v
        })
        .collect();
    Ok(axum::Json(json!(slots)).into_response())
}

#[derive(Deserialize)]
struct TokenizeBody {
    content: String,
    #[serde(default)]
    add_special: bool,
    #[serde(default)]
    with_pieces: bool,
}

/// A token and its text, as `/tokenize` lists them with `with_pieces`.
#[derive(Serialize)]
struct Piece<'a> {
    id: u32,
    piece: &'a str,
}

/// `/tokenize`'s answer to `raw`, as JSON bytes: content over the prompt cap (64 bytes
/// per context position) is refused (413 `content_too_long`); the pieces are written one
/// after the other, nothing per token outliving its line.
fn tokenized(tok: &Tokenizer, raw: &[u8], n_ctx: u32) -> Result<Vec<u8>, ApiError> {
    let b: TokenizeBody = serde_json::from_slice(raw)
        .map_err(|e| ApiError::invalid(format!("the body is not a valid request: {e}")))?;
    let cap = MAX_PROMPT_BYTES_PER_POSITION * n_ctx as usize;
    if b.content.len() > cap {
        let message = format!(
            "the content is {} bytes; at most {cap} ({MAX_PROMPT_BYTES_PER_POSITION} per context position) are tokenized",
            b.content.len()
        );
        return Err(
            ApiError::new(ErrorType::RequestTooLarge, message).refused(ApiRefusal::ContentTooLong)
        );
    }
    let ids = tok.encode(&b.content, b.add_special, false);
    drop(b.content);
    let failed = |e: serde_json::Error| ApiError::new(ErrorType::ServerError, e.to_string());
    if !b.with_pieces {
        return serde_json::to_vec(&json!({"tokens": ids})).map_err(failed);
    }
    let mut out = Vec::with_capacity(16 + ids.len() * 24);
    out.extend_from_slice(b"{\"tokens\":[");
    for (i, &id) in ids.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let piece = tok.decode(&[id]);
        serde_json::to_writer(&mut out, &Piece { id, piece: &piece }).map_err(failed)?;
    }
    out.extend_from_slice(b"]}");
    Ok(out)
}

async fn tokenize(
    State(shared): State<Arc<Shared>>,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Response, Failure> {
    let raw = body(raw)?;
    let (tok, n_ctx) = (shared.tokenizer.clone(), shared.n_ctx());
    let out = off_loop(move || tokenized(&tok, &raw, n_ctx)).await??;
    Ok(([(header::CONTENT_TYPE, "application/json")], out).into_response())
}

#[derive(Deserialize)]
struct DetokenizeBody {
    tokens: Vec<u32>,
}

/// `/detokenize`'s answer to `raw`.
fn detokenized(tok: &Tokenizer, raw: &[u8], vocab: u32) -> Result<serde_json::Value, ApiError> {
    let b: DetokenizeBody = serde_json::from_slice(raw)
        .map_err(|e| ApiError::invalid(format!("the body is not a valid request: {e}")))?;
    if let Some(t) = b.tokens.iter().find(|t| **t >= vocab) {
        return Err(ApiError::invalid(format!(
            "token id {t} is outside the vocabulary of {vocab}"
        )));
    }
    Ok(json!({"content": tok.decode(&b.tokens)}))
}

async fn detokenize(
    State(shared): State<Arc<Shared>>,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Response, Failure> {
    let raw = body(raw)?;
    let (tok, vocab) = (shared.tokenizer.clone(), shared.config.vocab);
    let out = off_loop(move || detokenized(&tok, &raw, vocab)).await??;
    Ok(axum::Json(out).into_response())
}

async fn chat(State(s): State<Arc<Shared>>, raw: Result<Bytes, BytesRejection>) -> Response {
    complete(s, Api::Chat, raw).await.unwrap_or_else(IntoResponse::into_response)
}

async fn completions(State(s): State<Arc<Shared>>, raw: Result<Bytes, BytesRejection>) -> Response {
    complete(s, Api::Completion, raw).await.unwrap_or_else(IntoResponse::into_response)
}

/// A completion: judged, tokenized, submitted, answered whole or streamed.
async fn complete(
    shared: Arc<Shared>,
    api: Api,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Response, Failure> {
    let tracker = Tracker::arrived(shared.clone());
    let raw = body(raw)?;
    let defaults = shared.defaults();
    let seed = rand::random::<u64>();
    let parsed = off_loop(move || match api {
        Api::Chat => parse_chat(&raw, &defaults, seed),
        Api::Completion => parse_completion(&raw, &defaults, seed),
    })
    .await??;
    let (prompt, parser) = tokenize_prompt(&shared, &parsed).await?;
    let ticket = shared.ticket();
    let (n_ctx, vocab) = (defaults.n_ctx, shared.config.vocab);
    let mut request = parsed.request(ticket.to_string(), prompt, n_ctx, vocab)?;
    constrain(&shared, &parsed, &mut request).await?;
    let prompt_n = request.prompt.len() as u32;
    let submitted = shared.submit(ticket, request)?;
    let meta = Meta::new(api, ticket, shared.config.unix_now(), shared.config.model_name.clone())
        .with_echo(parsed.echo_text(&shared.tokenizer));
    let tracker = tracker.submitted(prompt_n);
    let tok = shared.tokenizer.clone();
    let read = parser.map(|p| answer::Reader::new(p, ticket));
    if parsed.stream {
        answer::stream(meta, submitted, tracker, parsed.include_usage, tok, read).await
    } else {
        answer::whole(meta, submitted, tracker, tok, read).await
    }
}
