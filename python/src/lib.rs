//! The `rlfleet` Python module (built with maturin, `python/pyproject.toml`):
//! `rlfleet.Client`, a simulator that owns its main loop driving a `seed`
//! run (central inference: no model in the simulator), and
//! `rlfleet.run_actor`, an actor process whose envs a Python factory builds,
//! and `rlfleet.Control`, the daemon's control API (`control.rs`).
//! Both run rlfleet's own Rust actor code; the GIL is released while it
//! waits on the network.

mod control;

use actor_client::envs::EnvFactory;
use actor_client::remote::{ActorOptions, ClientOptions, Inference, Player, RunEnded, SeedClient};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyList;
use rlfleet_quic::{Liveness, Trust};
use rlfleet_shared::env::Env;
use rlfleet_shared::env::python::PyEnv;
use std::sync::Arc;
use std::time::Duration;

pyo3::create_exception!(
    rlfleet,
    RunEndedError,
    PyRuntimeError,
    "The learner ended the run."
);

/// `given`, else the environment variable `var` (as `actor-client` reads
/// it), else nothing.
fn or_env(given: Option<String>, var: &str) -> Option<String> {
    given.or_else(|| std::env::var(var).ok().filter(|v| !v.is_empty()))
}

/// The learner's address: `server`, else `RLFLEET_SERVER`.
fn server_of(server: Option<String>) -> PyResult<String> {
    or_env(server, "RLFLEET_SERVER").ok_or_else(|| {
        PyValueError::new_err("give server= (the learner's HOST:PORT) or set RLFLEET_SERVER")
    })
}

/// How the learner's certificate is trusted: `pin` or `ca`, else
/// `RLFLEET_PIN` or `RLFLEET_CA`.
fn trust(pin: Option<String>, ca: Option<String>) -> PyResult<Trust> {
    let (pin, ca) = if pin.is_none() && ca.is_none() {
        (or_env(None, "RLFLEET_PIN"), or_env(None, "RLFLEET_CA"))
    } else {
        (pin, ca)
    };
    match (pin, ca) {
        (Some(p), None) => Ok(Trust::Pin(p)),
        (None, Some(c)) => Ok(Trust::CaFile(c.into())),
        _ => Err(PyValueError::new_err(
            "give exactly one of pin= (the learner certificate's SHA-256) or ca= (a PEM file), \
             or set RLFLEET_PIN or RLFLEET_CA",
        )),
    }
}

fn to_py_err(e: anyhow::Error) -> PyErr {
    match e.downcast_ref::<RunEnded>() {
        Some(ended) => RunEndedError::new_err(ended.0.clone()),
        None => PyRuntimeError::new_err(format!("{e:#}")),
    }
}

/// An observation as flat float32: any array-like, converted by NumPy.
fn flat_obs(obs: &Bound<'_, PyAny>) -> PyResult<Vec<f32>> {
    let np = obs.py().import("numpy")?;
    let arr = np
        .call_method1("asarray", (obs, np.getattr("float32")?))?
        .call_method0("ravel")?;
    arr.call_method0("tolist")?.extract()
}

fn default_actor_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "host".into());
    format!("{host}-py-{}", std::process::id())
}

/// A simulator's session with a `seed` run of a learner.
///
/// ``client = rlfleet.Client("host:port", pin=FINGERPRINT, token=TOKEN)``;
/// ``action = client.act(obs)`` begins an episode,
/// ``action = client.step(reward, terminated, truncated, next_obs)``
/// reports the outcome and returns the next action (``None`` once the
/// episode is over: begin the next with ``act``). Discrete actions are
/// ints, continuous ones lists of floats.
#[pyclass(module = "rlfleet")]
struct Client {
    inner: Option<SeedClient>,
}

impl Client {
    fn inner(&mut self) -> PyResult<&mut SeedClient> {
        self.inner
            .as_mut()
            .ok_or_else(|| PyRuntimeError::new_err("the client is closed"))
    }

    fn action(&mut self, py: Python<'_>, action: Vec<f32>) -> PyResult<Py<PyAny>> {
        let discrete = self.inner()?.welcome().discrete_actions();
        Ok(if discrete {
            (action[0] as i64).into_pyobject(py)?.into_any().unbind()
        } else {
            PyList::new(py, action)?.into_any().unbind()
        })
    }
}

#[pymethods]
impl Client {
    #[new]
    #[pyo3(signature = (server=None, pin=None, ca=None, token=None, actor_id=None, server_name=None, wait_secs=600.0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        server: Option<String>,
        pin: Option<String>,
        ca: Option<String>,
        token: Option<String>,
        actor_id: Option<String>,
        server_name: Option<String>,
        wait_secs: f64,
    ) -> PyResult<Client> {
        let opts = ClientOptions {
            server: server_of(server)?,
            server_name: or_env(server_name, "RLFLEET_SERVER_NAME"),
            trust: trust(pin, ca)?,
            token: or_env(token, "RLFLEET_TOKEN").unwrap_or_default(),
            actor_id: actor_id.unwrap_or_else(default_actor_id),
            liveness: Liveness::default(),
            wait_for_episode: Duration::from_secs_f64(wait_secs),
        };
        let inner = py
            .detach(|| SeedClient::connect(&opts))
            .map_err(to_py_err)?;
        Ok(Client { inner: Some(inner) })
    }

    /// Begins an episode with its first observation; returns the action.
    fn act(&mut self, py: Python<'_>, obs: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let obs = flat_obs(obs)?;
        let inner = self.inner()?;
        let action = py.detach(|| inner.act(&obs)).map_err(to_py_err)?;
        self.action(py, action)
    }

    /// Reports the last action's outcome and the next observation; returns
    /// the next action, or None when the episode ended.
    fn step(
        &mut self,
        py: Python<'_>,
        reward: f64,
        terminated: bool,
        truncated: bool,
        next_obs: &Bound<'_, PyAny>,
    ) -> PyResult<Option<Py<PyAny>>> {
        let obs = flat_obs(next_obs)?;
        let inner = self.inner()?;
        let action = py
            .detach(|| inner.step(reward as f32, terminated, truncated, &obs))
            .map_err(to_py_err)?;
        action.map(|a| self.action(py, a)).transpose()
    }

    /// Closes the connection.
    fn close(&mut self) {
        if let Some(c) = self.inner.take() {
            c.close();
        }
    }

    /// The run's id.
    #[getter]
    fn run_id(&mut self) -> PyResult<String> {
        Ok(self.inner()?.welcome().run_id.clone())
    }

    /// The version of the weights that chose the last action.
    #[getter]
    fn policy_version(&mut self) -> PyResult<u64> {
        Ok(self.inner()?.policy_version)
    }

    /// Episodes this client finished.
    #[getter]
    fn episodes(&mut self) -> PyResult<u64> {
        Ok(self.inner()?.episodes)
    }

    /// Steps this client reported.
    #[getter]
    fn env_steps(&mut self) -> PyResult<u64> {
        Ok(self.inner()?.env_steps)
    }

    /// The observation's shape the run's env has.
    #[getter]
    fn observation_shape(&mut self) -> PyResult<Vec<u32>> {
        Ok(self.inner()?.welcome().obs_shape.clone())
    }
}

/// Runs an actor whose envs ``env_factory()`` builds (each a Gymnasium-API
/// env) against the learner at ``server`` until the run ends (``once``) or
/// the learner shuts down; returns the actor's report line. As
/// ``actor-client``: it gives up after ``give_up_secs`` without reaching
/// the learner, reconnects when a run's learner has not answered for
/// ``reply_timeout_secs`` (0: never), and ``server``, ``pin``/``ca``,
/// ``token`` and ``server_name`` default to ``RLFLEET_SERVER``,
/// ``RLFLEET_PIN``/``RLFLEET_CA``, ``RLFLEET_TOKEN`` and
/// ``RLFLEET_SERVER_NAME``.
#[pyfunction]
#[pyo3(signature = (server, env_factory, n_envs=1, pin=None, ca=None, token=None, actor_id=None, server_name=None, once=true, give_up_secs=600.0, reply_timeout_secs=600.0))]
#[allow(clippy::too_many_arguments)]
fn run_actor(
    py: Python<'_>,
    server: Option<String>,
    env_factory: Py<PyAny>,
    n_envs: u32,
    pin: Option<String>,
    ca: Option<String>,
    token: Option<String>,
    actor_id: Option<String>,
    server_name: Option<String>,
    once: bool,
    give_up_secs: f64,
    reply_timeout_secs: f64,
) -> PyResult<String> {
    let factory = Arc::new(env_factory);
    let make = move || -> anyhow::Result<Box<dyn Env>> {
        Python::attach(|py| {
            let env = factory
                .call0(py)
                .map_err(|e| anyhow::anyhow!("env_factory() raised {e}"))?;
            let env = PyEnv::wrap(env.bind(py), "python:env_factory")?;
            Ok(Box::new(env) as Box<dyn Env>)
        })
    };
    let opts = ActorOptions {
        server: server_of(server)?,
        server_name: or_env(server_name, "RLFLEET_SERVER_NAME"),
        trust: trust(pin, ca)?,
        player: Player {
            actor_id: actor_id.unwrap_or_else(default_actor_id),
            token: or_env(token, "RLFLEET_TOKEN").unwrap_or_default(),
            envs: n_envs.max(1),
            once,
            run: None,
            inference: Inference::Rust,
            env_factory: Some(EnvFactory::new(make)),
        },
        liveness: Liveness::default(),
        max_frame_bytes: rlfleet_shared::wire::DEFAULT_MAX_FRAME_BYTES,
        give_up_after: Duration::from_secs_f64(give_up_secs),
        // 0: wait for ever, as `actor-client --reply-timeout-secs 0`.
        reply_timeout: (reply_timeout_secs > 0.0)
            .then(|| Duration::from_secs_f64(reply_timeout_secs)),
    };
    let report = py.detach(|| {
        let rt = actor_client::remote::runtime()?;
        rt.block_on(actor_client::remote::run(
            opts,
            tokio_util::sync::CancellationToken::new(),
        ))
    });
    report.map(|r| r.to_string()).map_err(to_py_err)
}

#[pymodule]
fn rlfleet(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // Envs built here import from the Python that loaded this module.
    rlfleet_shared::env::python::use_host_interpreter();
    m.add_class::<Client>()?;
    m.add_class::<control::Control>()?;
    m.add_function(wrap_pyfunction!(run_actor, m)?)?;
    m.add("RunEndedError", m.py().get_type::<RunEndedError>())?;
    Ok(())
}
