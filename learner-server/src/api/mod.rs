//! The HTTP control API (axum, JSON): create, list, get and stop runs,
//! sweeps and populations,
//! episode curves, connected actors, Prometheus metrics, health, and the
//! OpenAPI document. [`router`] builds it without a socket, so tests can
//! drive it directly.

mod error;
mod handlers;
mod openapi;
mod studies;

pub use error::ApiError;
pub use openapi::{Access, openapi_json};

use crate::hub::Hub;
use crate::server_config::tokens_match;
use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::{get, post};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// What every handler can reach.
#[derive(Debug)]
pub struct ApiState {
    pub hub: Arc<Hub>,
    /// Sweeps and populations, over the hub's runs.
    pub studies: Arc<crate::studies::Studies>,
    /// Bearer token, when configured.
    pub token: Option<String>,
    pub open_metrics: bool,
    pub open_healthz: bool,
    /// Set once every listener is bound.
    pub ready: AtomicBool,
}

pub fn router(state: Arc<ApiState>) -> Router {
    Router::new()
        .route(
            "/v1/runs",
            post(handlers::create_run).get(handlers::list_runs),
        )
        .route("/v1/runs/{id}", get(handlers::get_run))
        .route("/v1/runs/{id}/stop", post(handlers::stop_run))
        .route("/v1/runs/{id}/resume", post(handlers::resume_run))
        .route("/v1/runs/{id}/episodes", get(handlers::run_episodes))
        .route(
            "/v1/sweeps",
            post(studies::create_sweep).get(studies::list_sweeps),
        )
        .route("/v1/sweeps/{id}", get(studies::get_sweep))
        .route("/v1/sweeps/{id}/stop", post(studies::stop_sweep))
        .route(
            "/v1/populations",
            post(studies::create_population).get(studies::list_populations),
        )
        .route("/v1/populations/{id}", get(studies::get_population))
        .route("/v1/populations/{id}/stop", post(studies::stop_population))
        .route("/v1/actors", get(handlers::list_actors))
        .route("/metrics", get(handlers::metrics))
        .route("/healthz", get(handlers::healthz))
        .route("/readyz", get(handlers::readyz))
        .route("/openapi.json", get(openapi::serve))
        .layer(axum::middleware::from_fn_with_state(state.clone(), auth))
        .with_state(state)
}

/// Checks the bearer token, except on the routes configured as open.
async fn auth(
    State(state): State<Arc<ApiState>>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let Some(token) = &state.token else {
        return Ok(next.run(req).await);
    };
    let path = req.uri().path();
    let open = (state.open_metrics && path == "/metrics")
        || (state.open_healthz && (path == "/healthz" || path == "/readyz"));
    if open {
        return Ok(next.run(req).await);
    }
    let given = req
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match given {
        Some(g) if tokens_match(token, g) => Ok(next.run(req).await),
        Some(_) => Err(ApiError::unauthorized("wrong bearer token")),
        None => Err(ApiError::unauthorized(
            "missing `Authorization: Bearer <token>` header",
        )),
    }
}
