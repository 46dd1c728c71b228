//! The route handlers. Each documents itself for the OpenAPI document.
#![allow(unused_qualifications)] // utoipa's generated code spells out paths

use super::error::ErrorBody;
use super::{ApiError, ApiState};
use crate::hub::StartError;
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use rlfleet_run::vocab::{ActorView, EpisodeView, RunState, RunStatus};
use rlfleet_run::workflows::RunOptions;
use rlfleet_shared::config::RunConfig;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use utoipa::{IntoParams, ToSchema};

/// The answer to a created or stopped run.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunRef {
    pub id: String,
}

/// The largest `since` (OpenAPI's int64, as clients read the document).
const SINCE_MAX: u64 = i64::MAX as u64;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct Since {
    /// Skip the first `since` episodes (poll with the count you have).
    #[param(maximum = 9_223_372_036_854_775_807_u64)]
    pub since: Option<u64>,
}

/// Start a run. The body is a run config (the TOML schema, as JSON).
#[utoipa::path(post, path = "/v1/runs", tag = "runs",
    request_body(content = RunConfig, description = "A run config, as JSON (the TOML file's schema). Rules across fields (a workflow's agents and transport, buffer sizes at least the batch size, an env that exists and fits the agent) are the server's: a body that breaks one is answered 400 naming it", content_type = "application/json"),
    responses(
        (status = 201, description = "Accepted: started, or queued while `[runs] max_active` runs are active", body = RunRef),
        (status = 400, description = "The config is invalid; the message names the field", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 500, description = "The run could not be recorded in the state directory", body = ErrorBody),
        (status = 503, description = "The server is shutting down", body = ErrorBody),
    ))]
pub async fn create_run(
    State(state): State<Arc<ApiState>>,
    body: Bytes,
) -> Result<impl IntoResponse, ApiError> {
    let cfg: RunConfig = rlfleet_shared::config::from_json_keyed(&body)
        .map_err(|e| ApiError::bad_request(format!("run config: {e}")))?;
    cfg.validate()
        .map_err(|e| ApiError::bad_request(format!("run config: {e}")))?;
    if cfg.transport == rlfleet_shared::config::TransportKind::Mpi {
        return Err(ApiError::bad_request(format!(
            "run config: transport = \"mpi\" runs under MPI, not in a daemon: `{}`",
            rlfleet_shared::config::MPI_LAUNCH
        )));
    }
    let id = state
        .hub
        .start_run(cfg, RunOptions::default())
        .map_err(start_error)?;
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, format!("/v1/runs/{id}"))],
        Json(RunRef { id }),
    ))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StateFilter {
    /// Only runs in this state.
    #[param(inline)]
    pub state: Option<RunState>,
}

/// All runs, oldest first (those in `state`, when given), each with its
/// state, its share of the fleet (`envs`) and its counters.
#[utoipa::path(get, path = "/v1/runs", tag = "runs", params(StateFilter),
    responses((status = 200, body = Vec<RunStatus>),
              (status = 400, description = "`state` is not a run state", body = ErrorBody),
              (status = 401, body = ErrorBody)))]
pub async fn list_runs(
    State(state): State<Arc<ApiState>>,
    query: Result<Query<StateFilter>, QueryRejection>,
) -> Result<Json<Vec<RunStatus>>, ApiError> {
    let Query(q) = query.map_err(|e| {
        ApiError::bad_request(format!(
            "`state` must be one of queued, running, stopping, finished or failed ({})",
            e.body_text()
        ))
    })?;
    Ok(Json(state.hub.list_runs(q.state)))
}

/// One run: state, env steps, episodes, returns, policy version, actors.
#[utoipa::path(get, path = "/v1/runs/{id}", tag = "runs",
    params(("id" = String, Path, description = "Run id")),
    responses((status = 200, body = RunStatus), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn get_run(
    State(state): State<Arc<ApiState>>,
    Path(id): Path<String>,
) -> Result<Json<RunStatus>, ApiError> {
    state
        .hub
        .run_status(&id)
        .map(Json)
        .ok_or_else(|| ApiError::not_found("run", &id))
}

/// Stop a run: it checkpoints and tells its actors to stop.
#[utoipa::path(post, path = "/v1/runs/{id}/stop", tag = "runs",
    params(("id" = String, Path, description = "Run id")),
    responses((status = 202, body = RunRef), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn stop_run(
    State(state): State<Arc<ApiState>>,
    Path(id): Path<String>,
) -> Result<impl IntoResponse, ApiError> {
    if state.hub.stop_run(&id) {
        Ok((StatusCode::ACCEPTED, Json(RunRef { id })))
    } else {
        Err(ApiError::not_found("run", &id))
    }
}

/// The answer to a run that cannot start or resume.
pub(super) fn start_error(e: StartError) -> ApiError {
    match e {
        StartError::Conflict(_) | StartError::Finished(_) | StartError::Held(_) => {
            ApiError::conflict(e.to_string())
        }
        StartError::ShuttingDown => ApiError::unavailable(e.to_string()),
        StartError::NotFound(id) => ApiError::not_found("recorded run", &id),
        StartError::State(_) => ApiError::internal(e.to_string()),
        StartError::Invalid(_) => ApiError::bad_request(e.to_string()),
    }
}

/// Resumes a stopped (or failed, or interrupted) run from its latest
/// checkpoint in the state directory, under the same id: counters, episode
/// ledger, batch accounts, dedup keys, evaluation history and (with
/// `checkpoint.replay`) the replay continue; episodes unfinished at the
/// checkpoint are played again. It starts at once while a slot is free,
/// else it is queued. 409 while the run is active or queued, or when it
/// finished.
#[utoipa::path(post, path = "/v1/runs/{id}/resume", tag = "runs",
    params(("id" = String, Path, description = "Run id")),
    responses((status = 202, body = RunRef), (status = 401, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
              (status = 500, description = "The state directory could not be read or written", body = ErrorBody),
              (status = 503, body = ErrorBody)))]
pub async fn resume_run(
    State(state): State<Arc<ApiState>>,
    Path(id): Path<String>,
) -> Result<impl IntoResponse, ApiError> {
    let id = state.hub.resume_run(&id, None).map_err(start_error)?;
    Ok((StatusCode::ACCEPTED, Json(RunRef { id })))
}

/// Finished episodes of a run, in the order they finished.
#[utoipa::path(get, path = "/v1/runs/{id}/episodes", tag = "runs",
    params(("id" = String, Path, description = "Run id"), Since),
    responses((status = 200, body = Vec<EpisodeView>),
              (status = 400, description = "`since` is not an integer in 0..=2^63-1", body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn run_episodes(
    State(state): State<Arc<ApiState>>,
    Path(id): Path<String>,
    query: Result<Query<Since>, QueryRejection>,
) -> Result<Json<Vec<EpisodeView>>, ApiError> {
    let bad = || ApiError::bad_request("`since` must be an integer in 0..=9223372036854775807");
    let Query(q) = query.map_err(|_| bad())?;
    let since = q.since.unwrap_or(0);
    if since > SINCE_MAX {
        return Err(bad());
    }
    state
        .hub
        .episodes(&id, usize::try_from(since).unwrap_or(usize::MAX))
        .map(Json)
        .ok_or_else(|| ApiError::not_found("run", &id))
}

/// Connected actors.
#[utoipa::path(get, path = "/v1/actors", tag = "actors",
    responses((status = 200, body = Vec<ActorView>), (status = 401, body = ErrorBody)))]
pub async fn list_actors(State(state): State<Arc<ApiState>>) -> Json<Vec<ActorView>> {
    Json(state.hub.registry.list_actors())
}

/// Prometheus metrics (text format 0.0.4).
#[utoipa::path(get, path = "/metrics", tag = "ops", security((), ("bearer" = [])),
    responses((status = 200, description = "Prometheus text format", body = String, content_type = "text/plain"),
              (status = 401, description = "A token is configured and `api.open_metrics` is false", body = ErrorBody)))]
pub async fn metrics(State(state): State<Arc<ApiState>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.hub.metrics().render(),
    )
}

/// Liveness: the process answers.
#[utoipa::path(get, path = "/healthz", tag = "ops", security((), ("bearer" = [])),
    responses((status = 200, description = "Alive", body = String, content_type = "text/plain"),
              (status = 401, description = "A token is configured and `api.open_healthz` is false", body = ErrorBody)))]
pub async fn healthz() -> &'static str {
    "ok\n"
}

/// Readiness: listeners bound and not shutting down.
#[utoipa::path(get, path = "/readyz", tag = "ops", security((), ("bearer" = [])),
    responses((status = 200, description = "Ready", body = String, content_type = "text/plain"),
              (status = 401, description = "A token is configured and `api.open_healthz` is false", body = ErrorBody),
              (status = 503, description = "Starting or shutting down", body = ErrorBody)))]
pub async fn readyz(State(state): State<Arc<ApiState>>) -> Result<&'static str, ApiError> {
    if state.hub.shutdown().is_cancelled() {
        Err(ApiError::unavailable("shutting down"))
    } else if !state.ready.load(Ordering::Acquire) {
        Err(ApiError::unavailable("starting"))
    } else {
        Ok("ready\n")
    }
}
