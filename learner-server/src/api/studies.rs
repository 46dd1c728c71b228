//! The routes of sweeps and populations: submit one, list them, show one,
//! stop one.
#![allow(unused_qualifications)] // utoipa's generated code spells out paths

use super::error::ErrorBody;
use super::handlers::{RunRef, start_error};
use super::{ApiError, ApiState};
use crate::studies::population::{PopulationSpec, PopulationView};
use crate::studies::sweep::{SweepSpec, SweepView};
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use rlfleet_shared::config::{RunConfig, TransportKind};
use std::sync::Arc;

/// Errors unless a study's base config can run in a daemon.
fn check_base(what: &str, base: &RunConfig) -> Result<(), ApiError> {
    if base.transport == TransportKind::Mpi {
        return Err(ApiError::bad_request(format!(
            "{what}: base.transport = \"mpi\" runs under MPI, not in a daemon"
        )));
    }
    Ok(())
}

/// The answer to a created study.
fn created(kind: &str, id: String) -> impl IntoResponse {
    (
        StatusCode::CREATED,
        [(header::LOCATION, format!("/v1/{kind}/{id}"))],
        Json(RunRef { id }),
    )
}

/// Start a sweep: every combination of `params` × `seeds` is a trial, an
/// ordinary run named `<sweep id>-<n>`, at most `max_concurrent` at once.
#[utoipa::path(post, path = "/v1/sweeps", tag = "sweeps",
    request_body(content = SweepSpec, content_type = "application/json"),
    responses(
        (status = 201, description = "Accepted: its first trials start (or queue) now", body = RunRef),
        (status = 400, description = "The spec or one of its trials' configs is invalid; the message names it", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 500, description = "The sweep could not be recorded in the state directory", body = ErrorBody),
        (status = 503, body = ErrorBody),
    ))]
pub async fn create_sweep(
    State(state): State<Arc<ApiState>>,
    body: Bytes,
) -> Result<impl IntoResponse, ApiError> {
    let spec: SweepSpec = rlfleet_shared::config::from_json_keyed(&body)
        .map_err(|e| ApiError::bad_request(format!("sweep: {e}")))?;
    check_base("sweep", &spec.base)?;
    let id = state.studies.start_sweep(spec).map_err(|e| match e {
        crate::hub::StartError::Invalid(m) => ApiError::bad_request(format!("sweep: {m}")),
        e => start_error(e),
    })?;
    Ok(created("sweeps", id))
}

/// Every sweep of this daemon, oldest first, with its trials.
#[utoipa::path(get, path = "/v1/sweeps", tag = "sweeps",
    responses((status = 200, body = Vec<SweepView>), (status = 401, body = ErrorBody)))]
pub async fn list_sweeps(State(state): State<Arc<ApiState>>) -> Json<Vec<SweepView>> {
    Json(state.studies.list_sweeps())
}

/// One sweep: one row per trial (its point, seed, run, state, best
/// confirmed evaluation, env steps and wall time to the target).
#[utoipa::path(get, path = "/v1/sweeps/{id}", tag = "sweeps",
    params(("id" = String, Path, description = "Sweep id")),
    responses((status = 200, body = SweepView), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn get_sweep(
    State(state): State<Arc<ApiState>>,
    Path(id): Path<String>,
) -> Result<Json<SweepView>, ApiError> {
    state
        .studies
        .sweep(&id)
        .map(|s| Json(s.view()))
        .ok_or_else(|| ApiError::not_found("sweep", &id))
}

/// Stop a sweep: no trial starts any more; its active and queued trials
/// stop (checkpointing first).
#[utoipa::path(post, path = "/v1/sweeps/{id}/stop", tag = "sweeps",
    params(("id" = String, Path, description = "Sweep id")),
    responses((status = 202, body = RunRef), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn stop_sweep(
    State(state): State<Arc<ApiState>>,
    Path(id): Path<String>,
) -> Result<impl IntoResponse, ApiError> {
    if state.studies.stop_sweep(&id) {
        Ok((StatusCode::ACCEPTED, Json(RunRef { id })))
    } else {
        Err(ApiError::not_found("sweep", &id))
    }
}

/// Start population-based training: `size` members of the base config
/// train as runs named `<population id>-<n>`; every `interval_env_steps`
/// the bottom `quantile` copies a top member and perturbs `params`.
#[utoipa::path(post, path = "/v1/populations", tag = "populations",
    request_body(content = PopulationSpec, content_type = "application/json"),
    responses(
        (status = 201, description = "Accepted: its members start (or queue) now", body = RunRef),
        (status = 400, description = "The spec or a member's config is invalid; the message names it", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 500, description = "The population could not be recorded in the state directory", body = ErrorBody),
        (status = 503, body = ErrorBody),
    ))]
pub async fn create_population(
    State(state): State<Arc<ApiState>>,
    body: Bytes,
) -> Result<impl IntoResponse, ApiError> {
    let spec: PopulationSpec = rlfleet_shared::config::from_json_keyed(&body)
        .map_err(|e| ApiError::bad_request(format!("population: {e}")))?;
    check_base("population", &spec.base)?;
    let id = state.studies.start_population(spec).map_err(|e| match e {
        crate::hub::StartError::Invalid(m) => ApiError::bad_request(format!("population: {m}")),
        e => start_error(e),
    })?;
    Ok(created("populations", id))
}

/// Every population of this daemon, oldest first.
#[utoipa::path(get, path = "/v1/populations", tag = "populations",
    responses((status = 200, body = Vec<PopulationView>), (status = 401, body = ErrorBody)))]
pub async fn list_populations(State(state): State<Arc<ApiState>>) -> Json<Vec<PopulationView>> {
    Json(state.studies.list_populations())
}

/// One population: its generation, members (run, metric,
/// hyperparameters) and lineage of exploits.
#[utoipa::path(get, path = "/v1/populations/{id}", tag = "populations",
    params(("id" = String, Path, description = "Population id")),
    responses((status = 200, body = PopulationView), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn get_population(
    State(state): State<Arc<ApiState>>,
    Path(id): Path<String>,
) -> Result<Json<PopulationView>, ApiError> {
    state
        .studies
        .population(&id)
        .map(|p| Json(p.view()))
        .ok_or_else(|| ApiError::not_found("population", &id))
}

/// Stop a population and its members (they checkpoint first).
#[utoipa::path(post, path = "/v1/populations/{id}/stop", tag = "populations",
    params(("id" = String, Path, description = "Population id")),
    responses((status = 202, body = RunRef), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn stop_population(
    State(state): State<Arc<ApiState>>,
    Path(id): Path<String>,
) -> Result<impl IntoResponse, ApiError> {
    if state.studies.stop_population(&id) {
        Ok((StatusCode::ACCEPTED, Json(RunRef { id })))
    } else {
        Err(ApiError::not_found("population", &id))
    }
}
