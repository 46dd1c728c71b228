//! `rlfleet.Control`: the daemon's control API from Python — submit, list,
//! show, stop and resume runs; submit, list, show and stop sweeps and
//! populations — the calls of `learner-server runs|sweeps|populations`.

use actor_client::control::{config_json, spec_json};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use serde_json::Value;
use std::path::PathBuf;

/// A client of one daemon's control API.
///
/// ``api = rlfleet.Control("http://learner:8080", token=TOKEN)`` (default:
/// ``RLFLEET_API`` and ``RLFLEET_API_TOKEN``); ``rid =
/// api.submit_run("run.toml")`` (a path, or a dict of the config);
/// ``api.runs(state="queued")``, ``api.run(rid)``, ``api.stop_run(rid)``,
/// ``api.resume_run(rid)``; ``api.submit_sweep("sweep.toml")``,
/// ``api.sweeps()``, ``api.sweep(sid)``, ``api.stop_sweep(sid)``; and the
/// same for populations. Answers are dicts and lists as the API's JSON;
/// an error answer raises ``RuntimeError`` with the daemon's message.
#[pyclass(module = "rlfleet")]
#[derive(Debug)]
pub struct Control {
    inner: actor_client::control::Control,
}

/// A path (read as a file) or a dict (sent as it is) as a JSON body.
fn body(py: Python<'_>, what: &Bound<'_, PyAny>, spec: bool) -> PyResult<String> {
    if let Ok(path) = what.extract::<PathBuf>() {
        let text = if spec {
            spec_json(&path).map(|v| v.to_string())
        } else {
            config_json(&path)
        };
        return text.map_err(err);
    }
    py.import("json")?.call_method1("dumps", (what,))?.extract()
}

fn err(e: anyhow::Error) -> PyErr {
    PyRuntimeError::new_err(format!("{e:#}"))
}

impl Control {
    /// Calls the API with the GIL released; the answer as Python objects.
    fn call(
        &self,
        py: Python<'_>,
        method: &str,
        path: &str,
        body: Option<String>,
    ) -> PyResult<Py<PyAny>> {
        let v: Value = py
            .detach(|| self.inner.call(method, path, body))
            .map_err(err)?;
        Ok(py
            .import("json")?
            .call_method1("loads", (v.to_string(),))?
            .unbind())
    }

    fn id_of(&self, py: Python<'_>, v: Py<PyAny>) -> PyResult<String> {
        v.bind(py).get_item("id")?.extract()
    }
}

#[pymethods]
impl Control {
    #[new]
    #[pyo3(signature = (api=None, token=None))]
    fn new(api: Option<String>, token: Option<String>) -> Control {
        let api = api
            .or_else(|| std::env::var("RLFLEET_API").ok())
            .unwrap_or_else(|| "http://127.0.0.1:8080".into());
        let token = token.or_else(|| std::env::var("RLFLEET_API_TOKEN").ok());
        Control {
            inner: actor_client::control::Control::new(&api, token),
        }
    }

    /// Submits a run config; returns its id (it runs or waits queued).
    fn submit_run(&self, py: Python<'_>, config: &Bound<'_, PyAny>) -> PyResult<String> {
        let v = self.call(py, "POST", "/v1/runs", Some(body(py, config, false)?))?;
        self.id_of(py, v)
    }

    /// Every run, oldest first (those in `state` when given).
    #[pyo3(signature = (state=None))]
    fn runs(&self, py: Python<'_>, state: Option<String>) -> PyResult<Py<PyAny>> {
        let path = match state {
            Some(s) => format!("/v1/runs?state={s}"),
            None => "/v1/runs".into(),
        };
        self.call(py, "GET", &path, None)
    }

    fn run(&self, py: Python<'_>, id: &str) -> PyResult<Py<PyAny>> {
        self.call(py, "GET", &format!("/v1/runs/{id}"), None)
    }

    fn stop_run(&self, py: Python<'_>, id: &str) -> PyResult<()> {
        self.call(py, "POST", &format!("/v1/runs/{id}/stop"), None)
            .map(drop)
    }

    fn resume_run(&self, py: Python<'_>, id: &str) -> PyResult<()> {
        self.call(py, "POST", &format!("/v1/runs/{id}/resume"), None)
            .map(drop)
    }

    /// Submits a sweep spec (a TOML path or a dict); returns its id.
    fn submit_sweep(&self, py: Python<'_>, spec: &Bound<'_, PyAny>) -> PyResult<String> {
        let v = self.call(py, "POST", "/v1/sweeps", Some(body(py, spec, true)?))?;
        self.id_of(py, v)
    }

    fn sweeps(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.call(py, "GET", "/v1/sweeps", None)
    }

    fn sweep(&self, py: Python<'_>, id: &str) -> PyResult<Py<PyAny>> {
        self.call(py, "GET", &format!("/v1/sweeps/{id}"), None)
    }

    fn stop_sweep(&self, py: Python<'_>, id: &str) -> PyResult<()> {
        self.call(py, "POST", &format!("/v1/sweeps/{id}/stop"), None)
            .map(drop)
    }

    /// Submits a population spec (a TOML path or a dict); returns its id.
    fn submit_population(&self, py: Python<'_>, spec: &Bound<'_, PyAny>) -> PyResult<String> {
        let v = self.call(py, "POST", "/v1/populations", Some(body(py, spec, true)?))?;
        self.id_of(py, v)
    }

    fn populations(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.call(py, "GET", "/v1/populations", None)
    }

    fn population(&self, py: Python<'_>, id: &str) -> PyResult<Py<PyAny>> {
        self.call(py, "GET", &format!("/v1/populations/{id}"), None)
    }

    fn stop_population(&self, py: Python<'_>, id: &str) -> PyResult<()> {
        self.call(py, "POST", &format!("/v1/populations/{id}/stop"), None)
            .map(drop)
    }
}
