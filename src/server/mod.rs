//! The server role (`swactor orchestrate serve`, `swactor run local --serve`): the
//! OpenAI-compatible API over a resident pipeline. Sessions are formed and re-formed by
//! [`sessions`] through the orchestrator's driver; [`routes`] answers HTTP (axum on hyper,
//! through [`http`]'s bounded listener, each request past [`guard`]'s checks); [`metrics`]
//! and [`view`] follow the sessions' events. What a request means and what it answers is
//! the core's [`serve`](crate::serve) module; this role carries it over sockets.
#![allow(clippy::disallowed_methods)] // the server owns the clock (`created` stamps)

pub mod answer;
pub mod event_api;
pub mod failure;
pub mod guard;
pub mod http;
pub mod key;
pub mod messages;
pub mod metrics;
pub mod ollama;
pub mod prompt;
pub mod responses;
pub mod routes;
pub mod sessions;
pub mod state;
pub mod track;
pub mod view;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::events::EventLine;
use crate::model::ModelFacts;
use crate::model::tokenizer::{ChatFormat, Tokenizer};
use crate::orchestrator::driver::{OrchestrateConfig, OrchestrateError};
use crate::serve::params::Defaults;
use crate::wire::SamplingPolicy;
use crate::wire::reason::OperatorStop;
pub use http::HttpLimits;
pub use sessions::ServeReport;

/// What a request leaves out, and the session's size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServeDefaults {
    /// Sampling when a request gives no temperature.
    pub sampling: SamplingPolicy,
    /// Tokens to generate at most (`None`: what the context leaves).
    pub max_tokens: Option<u32>,
    /// The context.
    pub n_ctx: u32,
    /// Slots of the session.
    pub slots: u32,
}

impl ServeDefaults {
    /// The core's view of the defaults.
    pub fn params(&self) -> Defaults {
        Defaults { sampling: self.sampling, max_tokens: self.max_tokens, n_ctx: self.n_ctx }
    }
}

/// The server's settings.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Where the API listens.
    pub http: SocketAddr,
    /// How long a stop lets what is in flight finish.
    pub grace: Duration,
    /// The API key every route but `/health` and the page needs, if set.
    pub api_key: Option<String>,
    /// The listener's bounds.
    pub limits: HttpLimits,
    /// Which `Host` and `Origin` values are answered.
    pub access: crate::serve::access::AccessRules,
    /// The model's name (`/v1/models`, every response's `model`).
    pub model_name: String,
    /// Unix seconds the server started (`/v1/models`).
    pub created: u64,
    /// Vocabulary size.
    pub vocab: u32,
    /// Request defaults and the session's size.
    pub defaults: ServeDefaults,
    /// The pool's node ids (for the page).
    pub nodes: Vec<u64>,
}

impl ServeConfig {
    /// Unix seconds now.
    pub fn unix_now(&self) -> u64 {
        std::time::SystemTime::UNIX_EPOCH.elapsed().map_or(0, |d| d.as_secs())
    }
}

/// Why the server could not serve.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The HTTP address could not be bound.
    #[error("cannot listen on {0}: {1}")]
    Bind(SocketAddr, std::io::Error),
    /// The first session could not form (the configuration is wrong).
    #[error(transparent)]
    Orchestrate(#[from] OrchestrateError),
}

/// The model and its tokenizer, as the server needs them.
pub struct ServeModel<'a> {
    /// The model's facts.
    pub facts: &'a ModelFacts,
    /// Its tokenizer.
    pub tokenizer: Arc<Tokenizer>,
    /// Its chat format.
    pub chat: Arc<ChatFormat>,
}

/// When the server stops: `stop` starts the graceful drain, `force` (a second signal)
/// cuts it short.
pub struct Stops<S, F> {
    /// The first stop.
    pub stop: S,
    /// Ends the grace period at once.
    pub force: F,
}

/// Serves until `stops.stop`: binds the API (then calls `listening` with its address),
/// forms sessions, and on `stop` drains (see [`sessions::run_sessions`]) and closes the
/// listener gracefully, both cut short by `stops.force`. `events` receives every
/// session's event lines.
pub async fn serve(
    config: ServeConfig,
    orchestrate: OrchestrateConfig,
    model: ServeModel<'_>,
    stops: Stops<
        impl std::future::Future<Output = OperatorStop>,
        impl std::future::Future<Output = ()>,
    >,
    listening: impl FnOnce(SocketAddr),
    events: Option<&mut dyn FnMut(&EventLine)>,
) -> Result<ServeReport, ServeError> {
    let Stops { stop, force } = stops;
    let listener =
        TcpListener::bind(config.http).await.map_err(|e| ServeError::Bind(config.http, e))?;
    let addr = listener.local_addr().map_err(|e| ServeError::Bind(config.http, e))?;
    let (limits, grace) = (config.limits, config.grace);
    let shared = Arc::new(state::Shared::new(
        config,
        model.tokenizer,
        model.chat,
        [model.facts.eos_token_id, model.facts.eot_token_id].into_iter().flatten().collect(),
    ));
    let (stop_tx, stop_rx) = watch::channel(false);
    let (force_tx, force_rx) = watch::channel(false);
    let http = tokio::spawn(http::serve(
        listener,
        routes::router(shared.clone()),
        limits,
        stop_rx.clone(),
        grace + Duration::from_secs(5),
        force_rx.clone(),
        http::HttpMetrics {
            open: shared.metrics.http_connections.clone(),
            refused: shared.metrics.http_refused.clone(),
        },
    ));
    listening(addr);
    let stopping = sessions::Stopping { shutdown: stop_rx, force: force_rx };
    let sessions =
        sessions::run_sessions(shared.clone(), orchestrate, model.facts, stopping, events);
    tokio::pin!(sessions);
    tokio::pin!(stop);
    tokio::pin!(force);
    let (mut stopped, mut forced) = (false, false);
    let result = loop {
        tokio::select! {
            r = &mut sessions => break r,
            _ = &mut stop, if !stopped => {
                stopped = true;
                shutting_down(&shared, &stop_tx);
            }
            () = &mut force, if stopped && !forced => {
                forced = true;
                let _ = force_tx.send(true);
            }
        }
    };
    shutting_down(&shared, &stop_tx);
    let _ = http.await;
    Ok(result?)
}

/// No new request is taken; the serving session's input closes; the listener stops.
fn shutting_down(shared: &state::Shared, stop: &watch::Sender<bool>) {
    shared.phase().shutting_down();
    shared.set_input(None);
    let _ = stop.send(true);
}
