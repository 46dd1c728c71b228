//! [`EnvSource`]: where a run's environment comes from — a built-in id,
//! `gymnasium:ID` or `python:module:attr` — and the one place that turns it
//! into a spec or an instance.

#[cfg(feature = "python")]
use super::python::{PyEnv, Recipe};
use super::{Collective, Env, EnvFault, EnvSpec, FrameStack, UnknownEnv, stacked_spec};
use std::collections::HashMap;
use std::sync::Mutex;

/// The prefix of a registered Gymnasium id.
pub const GYMNASIUM_PREFIX: &str = "gymnasium:";
/// The prefix of a user's class or factory (`module:attr`).
pub const PYTHON_PREFIX: &str = "python:";

/// An environment as a run config names it, with what building it needs
/// (serializable: an env group's leader sends it to the group's ranks).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
pub struct EnvSource {
    /// `CartPole-v1` (built in), `gymnasium:LunarLander-v3` or
    /// `python:my_pkg.my_module:MyEnv`.
    pub id: String,
    /// Keyword arguments for `gymnasium.make` or the user's callable, as a
    /// JSON object (empty: none).
    pub kwargs_json: String,
    /// `module:attr` callables applied to the env in order.
    pub wrappers: Vec<String>,
    /// Folders put in front of `sys.path` (absolute).
    pub python_path: Vec<String>,
    /// The run's `frame_stack`: above 1, the env's observations are its
    /// last `frame_stack` frames ([`FrameStack`]).
    pub frame_stack: u32,
}

/// Why an environment could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    #[error(transparent)]
    Unknown(#[from] UnknownEnv),
    /// The Python exception, as one line.
    #[error("`{id}` cannot be built: {fault}")]
    Python { id: String, fault: EnvFault },
    #[error("`{0}`: {1}")]
    Kwargs(String, String),
    #[error(
        "`{0}`: env_kwargs, env_wrappers and python_path apply to Python envs only (and env_kwargs to HeatRod-v0)"
    )]
    PythonOptionsOnBuiltin(String),
    #[error("`{0}` runs in Python, and this build has none (rlfleet-shared's `python` feature)")]
    NoPython(String),
}

/// Specs already resolved in this process (building a Python env to read
/// its spaces costs an import).
static SPECS: Mutex<Option<HashMap<EnvSource, EnvSpec>>> = Mutex::new(None);

impl EnvSource {
    /// A built-in environment, or a Python one with no options.
    pub fn plain(id: impl Into<String>) -> EnvSource {
        EnvSource {
            id: id.into(),
            ..EnvSource::default()
        }
    }

    /// The env runs in the embedded Python interpreter.
    pub fn is_python(&self) -> bool {
        is_python_id(&self.id)
    }

    /// Frames its observations stack (1: none).
    pub fn stack(&self) -> usize {
        self.frame_stack.max(1) as usize
    }

    /// The env's spec (its observations stacked, with `frame_stack`); a
    /// Python env is built once per process to read it.
    pub fn spec(&self) -> Result<EnvSpec, EnvError> {
        if self.stack() > 1 {
            let frames = EnvSource {
                frame_stack: 1,
                ..self.clone()
            };
            return Ok(stacked_spec(&frames.spec()?, self.stack()));
        }
        if self.id == "HeatRod-v0" {
            return Ok(self.make()?.spec().clone());
        }
        if !self.is_python() {
            self.check_builtin_options()?;
            return super::spec(&self.id).map_err(EnvError::from);
        }
        if let Some(s) = SPECS
            .lock()
            .expect("spec cache poisoned")
            .as_ref()
            .and_then(|m| m.get(self))
        {
            return Ok(s.clone());
        }
        let spec = self.make()?.spec().clone();
        SPECS
            .lock()
            .expect("spec cache poisoned")
            .get_or_insert_with(HashMap::new)
            .insert(self.clone(), spec.clone());
        Ok(spec)
    }

    /// A new instance of the env (its observations stacked, with
    /// `frame_stack`).
    pub fn make(&self) -> Result<Box<dyn Env>, EnvError> {
        self.make_in(None)
    }

    /// A new instance spanning the ranks of `comm` (one rank of an MPI env
    /// group): a built-in partitions itself over them; a Python env whose
    /// constructor takes a `comm` keyword gets it as an mpi4py
    /// communicator. The env keeps `comm` for its life.
    pub fn make_in(&self, comm: Option<Box<dyn Collective>>) -> Result<Box<dyn Env>, EnvError> {
        if self.stack() > 1 {
            let frames = EnvSource {
                frame_stack: 1,
                ..self.clone()
            };
            return Ok(Box::new(FrameStack::new(
                frames.make_in(comm)?,
                self.stack(),
            )));
        }
        if self.id == "HeatRod-v0" && self.wrappers.is_empty() && self.python_path.is_empty() {
            let comm = comm.unwrap_or_else(|| Box::new(super::Solo));
            let rod = super::HeatRod::from_kwargs(&self.kwargs_json, comm)
                .map_err(|e| EnvError::Kwargs(self.id.clone(), e))?;
            return Ok(Box::new(super::TimeLimited::new(rod)));
        }
        if !self.is_python() {
            self.check_builtin_options()?;
            return super::make_in(&self.id, comm).map_err(EnvError::from);
        }
        self.make_python(comm)
    }

    #[cfg(feature = "python")]
    fn make_python(&self, comm: Option<Box<dyn Collective>>) -> Result<Box<dyn Env>, EnvError> {
        let recipe = Recipe {
            id: &self.id,
            kwargs_json: &self.kwargs_json,
            wrappers: &self.wrappers,
            python_path: &self.python_path,
            comm,
        };
        match PyEnv::build(recipe) {
            Ok(env) => Ok(Box::new(env)),
            Err(fault) => Err(EnvError::Python {
                id: self.id.clone(),
                fault,
            }),
        }
    }

    #[cfg(not(feature = "python"))]
    fn make_python(&self, _comm: Option<Box<dyn Collective>>) -> Result<Box<dyn Env>, EnvError> {
        Err(EnvError::NoPython(self.id.clone()))
    }

    fn check_builtin_options(&self) -> Result<(), EnvError> {
        if self.kwargs_json.is_empty() && self.wrappers.is_empty() && self.python_path.is_empty() {
            Ok(())
        } else {
            Err(EnvError::PythonOptionsOnBuiltin(self.id.clone()))
        }
    }
}

/// `id` names a Python env (`gymnasium:` or `python:`).
pub fn is_python_id(id: &str) -> bool {
    id.starts_with(GYMNASIUM_PREFIX) || id.starts_with(PYTHON_PREFIX)
}
