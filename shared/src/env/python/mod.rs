//! Gymnasium and Python environments through the embedded interpreter
//! (pyo3): [`PyEnv`] is an [`Env`] whose `reset` and `step` call a Python
//! object with the Gymnasium API, holding the GIL only for the call.
//!
//! Observations arrive as flat `f32`: a `Box` of any shape is flattened in
//! C order (float64 and uint8 are converted), a `Discrete` observation is
//! one-hot. Actions leave as Gymnasium expects them: `Discrete` indices
//! (shifted by the space's `start`), `Box` arrays of the space's shape and
//! dtype. Other spaces are refused when the env is built.

mod interpreter;

pub use interpreter::{VENV_VAR, set_venv, use_host_interpreter, venv};

use super::{Action, Collective, Env, EnvFault, EnvSpec, ObsDtype, Space, Step};
use interpreter::{bridge, describe_err};
use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use serde::Deserialize;
use std::borrow::Cow;

/// A Python object with the Gymnasium API, behind the bridge's `Stepper`.
pub struct PyEnv {
    spec: EnvSpec,
    stepper: Py<PyAny>,
    elapsed: u32,
    /// The env group's communicator the env was given (kept alive while
    /// the Python side may use it).
    comm: Option<Box<dyn Collective>>,
}

impl std::fmt::Debug for PyEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PyEnv")
            .field("id", &self.spec.id)
            .field("elapsed", &self.elapsed)
            .finish()
    }
}

/// A space as `bridge.describe` reports it (non-finite bounds as `null`).
#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum SpaceDesc {
    Discrete {
        n: usize,
    },
    Box {
        shape: Vec<usize>,
        dtype: String,
        low: Vec<Option<f32>>,
        high: Vec<Option<f32>>,
    },
}

#[derive(Deserialize)]
struct Described {
    observation: SpaceDesc,
    action: SpaceDesc,
    max_episode_steps: Option<u32>,
    reward_threshold: Option<f64>,
}

fn bounds(v: &[Option<f32>], missing: f32) -> Vec<f32> {
    v.iter().map(|x| x.unwrap_or(missing)).collect()
}

impl Described {
    fn into_spec(self, id: &str) -> EnvSpec {
        let (observation_space, obs_shape, obs_dtype) = match self.observation {
            SpaceDesc::Discrete { n } => (Space::uniform_box(n, 0.0, 1.0), vec![n], ObsDtype::F32),
            SpaceDesc::Box {
                shape,
                dtype,
                low,
                high,
            } => (
                Space::Box {
                    low: bounds(&low, f32::NEG_INFINITY),
                    high: bounds(&high, f32::INFINITY),
                },
                shape,
                match dtype.as_str() {
                    "uint8" => ObsDtype::U8,
                    "bool" => ObsDtype::Bool,
                    "float64" => ObsDtype::F64,
                    _ => ObsDtype::F32,
                },
            ),
        };
        let action_space = match self.action {
            SpaceDesc::Discrete { n } => Space::Discrete { n },
            SpaceDesc::Box { low, high, .. } => Space::Box {
                low: bounds(&low, f32::NEG_INFINITY),
                high: bounds(&high, f32::INFINITY),
            },
        };
        EnvSpec {
            id: Cow::Owned(id.to_string()),
            observation_space,
            obs_shape,
            obs_dtype,
            action_space,
            max_episode_steps: self.max_episode_steps,
            reward_threshold: self.reward_threshold,
        }
    }
}

/// What building a Python env needs (see [`super::EnvSource`]).
pub(super) struct Recipe<'a> {
    pub id: &'a str,
    pub kwargs_json: &'a str,
    pub wrappers: &'a [String],
    pub python_path: &'a [String],
    /// The env group's communicator, for a constructor with a `comm`
    /// keyword.
    pub comm: Option<Box<dyn Collective>>,
}

/// Fortran handles of the group communicators Python envs were given.
static GROUP_COMMS: std::sync::Mutex<Vec<i32>> = std::sync::Mutex::new(Vec::new());

/// Makes the collectives a Python env calls through the group
/// communicator `handle` it was given give up (raising `EnvAbandoned` in
/// the env): another rank of its group raised. Nothing when no Python env
/// was given that communicator.
pub fn abandon_comm(handle: i32) {
    let known = GROUP_COMMS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .contains(&handle);
    if known {
        Python::attach(|py| {
            if let Ok(b) = bridge(py) {
                let _ = b.call_method1("abandon_comm", (handle,));
            }
        });
    }
}

impl PyEnv {
    /// Builds the env `recipe` names and reads its spec; the error is the
    /// Python exception as one line.
    pub(super) fn build(recipe: Recipe<'_>) -> Result<PyEnv, EnvFault> {
        let handle = recipe.comm.as_ref().and_then(|c| c.fortran_handle());
        if let Some(h) = handle {
            let mut known = GROUP_COMMS.lock().unwrap_or_else(|p| p.into_inner());
            if !known.contains(&h) {
                known.push(h);
            }
        }
        Python::attach(|py| {
            let built = (|| -> PyResult<Bound<'_, PyAny>> {
                let b = bridge(py)?;
                for p in recipe.python_path {
                    b.call_method1("add_path", (p.as_str(),))?;
                }
                b.call_method1(
                    "make",
                    (
                        recipe.id,
                        recipe.kwargs_json,
                        recipe.wrappers.to_vec(),
                        handle,
                    ),
                )
            })();
            let env = built.map_err(|e| EnvFault(describe_err(py, &e)))?;
            let mut env = PyEnv::wrap(&env, recipe.id)?;
            env.comm = recipe.comm;
            Ok(env)
        })
    }

    /// An env object built elsewhere (a factory the Python client was
    /// given), named `id` in logs; the error is the Python exception (an
    /// unsupported space, for one).
    pub fn wrap(env: &Bound<'_, PyAny>, id: &str) -> Result<PyEnv, EnvFault> {
        let py = env.py();
        let wrapped = (|| -> PyResult<(Py<PyAny>, String)> {
            let b = bridge(py)?;
            let described: String = b.call_method1("describe_json", (env,))?.extract()?;
            let stepper = b.getattr("Stepper")?.call1((env,))?;
            Ok((stepper.unbind(), described))
        })();
        let (stepper, described) = wrapped.map_err(|e| EnvFault(describe_err(py, &e)))?;
        let described: Described = serde_json::from_str(&described)
            .map_err(|e| EnvFault(format!("bridge described the env oddly: {e}")))?;
        Ok(PyEnv {
            spec: described.into_spec(id),
            stepper,
            elapsed: 0,
            comm: None,
        })
    }

    /// Copies a returned observation into `obs`, checking its size and that
    /// it is finite (a NaN or an infinity is the env's fault, like an
    /// exception: the episode is abandoned, not sent).
    fn read_obs(&self, py: Python<'_>, value: &Bound<'_, PyAny>, obs: &mut [f32]) -> PyResult<()> {
        let buf = PyBuffer::<f32>::get(value)?;
        if buf.item_count() != obs.len() {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "observation has {} values, the observation space has {}",
                buf.item_count(),
                obs.len()
            )));
        }
        buf.copy_to_slice(py, obs)?;
        // A simulator that diverged: a fault of this episode, not data.
        match obs.iter().position(|x| !x.is_finite()) {
            Some(i) => Err(pyo3::exceptions::PyValueError::new_err(format!(
                "the env returned a non-finite observation (value {i} is {})",
                obs[i]
            ))),
            None => Ok(()),
        }
    }

    fn fault(py: Python<'_>, e: PyErr) -> EnvFault {
        EnvFault(describe_err(py, &e))
    }
}

impl Env for PyEnv {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) {
        if let Err(e) = self.try_reset(seed, obs) {
            panic!("{}: reset raised {e}", self.spec.id);
        }
    }

    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Step {
        self.try_step(action, obs)
            .unwrap_or_else(|e| panic!("{}: step raised {e}", self.spec.id))
    }

    fn try_reset(&mut self, seed: Option<u64>, obs: &mut [f32]) -> Result<(), EnvFault> {
        self.elapsed = 0;
        Python::attach(|py| {
            let out = self
                .stepper
                .bind(py)
                .call_method1("reset", (seed,))
                .and_then(|o| self.read_obs(py, &o, obs));
            out.map_err(|e| Self::fault(py, e))
        })
    }

    fn try_step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvFault> {
        self.elapsed += 1;
        Python::attach(|py| {
            let stepper = self.stepper.bind(py);
            let out = match action {
                Action::Discrete(a) => stepper.call_method1("step_discrete", (a,)),
                Action::Continuous(a) => stepper.call_method1("step_box", (a.to_vec(),)),
            };
            let out = out.and_then(|t| {
                let (o, reward, terminated, truncated): (Bound<'_, PyAny>, f64, bool, bool) =
                    t.extract()?;
                self.read_obs(py, &o, obs)?;
                if !reward.is_finite() {
                    return Err(pyo3::exceptions::PyValueError::new_err(format!(
                        "the env returned a non-finite reward ({reward})"
                    )));
                }
                Ok(Step {
                    reward,
                    terminated,
                    truncated,
                })
            });
            out.map_err(|e| Self::fault(py, e))
        })
    }

    /// The env's `unwrapped.state`, for envs that keep one (Gymnasium's
    /// classic control); panics for others.
    fn state(&self) -> Vec<f64> {
        Python::attach(|py| {
            let got = self.stepper.bind(py).call_method0("get_state");
            got.and_then(|v| v.extract::<Vec<f64>>())
                .unwrap_or_else(|e| panic!("{}: no state: {}", self.spec.id, describe_err(py, &e)))
        })
    }

    fn set_state(&mut self, state: &[f64]) {
        Python::attach(|py| {
            let set = self
                .stepper
                .bind(py)
                .call_method1("set_state", (state.to_vec(),));
            if let Err(e) = set {
                panic!(
                    "{}: cannot set state: {}",
                    self.spec.id,
                    describe_err(py, &e)
                );
            }
        })
    }

    fn elapsed_steps(&self) -> u32 {
        self.elapsed
    }
}

impl Drop for PyEnv {
    fn drop(&mut self) {
        Python::attach(|py| {
            let _ = self.stepper.bind(py).call_method0("close");
        });
    }
}
