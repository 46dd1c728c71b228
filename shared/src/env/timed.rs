//! [`Timed`]: an environment run on a thread of its own, so that a `reset`
//! or `step` that does not return within a limit (a hung simulator) comes
//! back as an [`EnvFault`] instead of stopping the actor. The hung call's
//! thread is abandoned: it ends, dropping its env, whenever the call
//! returns. A Python env that hangs while holding the GIL (a pure-Python
//! busy loop) would still block every other Python call of the process;
//! one that waits (`time.sleep`, a socket, a subprocess) does not.

use super::{Action, Env, EnvFault, EnvSpec, Step};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::Duration;

enum Call {
    Reset(Option<u64>),
    /// A discrete action (`Some(index)`) or a continuous one.
    Step(Option<usize>, Vec<f32>),
}

enum Reply {
    Obs(Result<Vec<f32>, EnvFault>),
    Stepped(Result<(Vec<f32>, Step), EnvFault>),
}

/// An env behind a thread, with a time limit on each call.
pub struct Timed {
    spec: EnvSpec,
    limit: Duration,
    /// `None` once a call timed out (the env is gone).
    calls: Option<Sender<Call>>,
    replies: Receiver<Reply>,
    /// Steps since the last reset.
    elapsed: u32,
}

impl std::fmt::Debug for Timed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timed")
            .field("env", &self.spec.id)
            .field("limit", &self.limit)
            .field("abandoned", &self.calls.is_none())
            .finish()
    }
}

impl Timed {
    pub fn new(mut env: Box<dyn Env>, limit: Duration) -> Timed {
        let spec = env.spec().clone();
        let (calls, inbox) = mpsc::channel::<Call>();
        let (outbox, replies) = mpsc::channel();
        let n = spec.obs_dim();
        std::thread::Builder::new()
            .name(format!("env {}", spec.id))
            .spawn(move || {
                let mut obs = vec![0f32; n];
                for call in inbox {
                    let reply = match call {
                        Call::Reset(seed) => {
                            Reply::Obs(env.try_reset(seed, &mut obs).map(|()| obs.clone()))
                        }
                        Call::Step(discrete, a) => {
                            let action = match discrete {
                                Some(i) => Action::Discrete(i),
                                None => Action::Continuous(&a),
                            };
                            Reply::Stepped(env.try_step(action, &mut obs).map(|s| (obs.clone(), s)))
                        }
                    };
                    if outbox.send(reply).is_err() {
                        break;
                    }
                }
            })
            .expect("spawn an env thread");
        Timed {
            spec,
            limit,
            calls: Some(calls),
            replies,
            elapsed: 0,
        }
    }

    /// Makes a call and waits for its reply, at most the limit.
    fn call(&mut self, what: &str, call: Call) -> Result<Reply, EnvFault> {
        let calls = self.calls.as_ref().ok_or_else(|| {
            EnvFault(format!(
                "the env was abandoned after a call took longer than {:?}",
                self.limit
            ))
        })?;
        calls
            .send(call)
            .map_err(|_| EnvFault("the env's thread ended".into()))?;
        match self.replies.recv_timeout(self.limit) {
            Ok(r) => Ok(r),
            Err(RecvTimeoutError::Timeout) => {
                self.calls = None;
                Err(EnvFault(format!(
                    "TimeoutError: `{what}` took longer than env_step_timeout_secs ({} s); the env is abandoned",
                    self.limit.as_secs_f64()
                )))
            }
            Err(RecvTimeoutError::Disconnected) => {
                self.calls = None;
                Err(EnvFault("the env's thread ended (it panicked)".into()))
            }
        }
    }
}

impl Env for Timed {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) {
        self.try_reset(seed, obs)
            .unwrap_or_else(|e| panic!("reset failed: {e}"));
    }

    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Step {
        self.try_step(action, obs)
            .unwrap_or_else(|e| panic!("step failed: {e}"))
    }

    /// Not available: the env lives on its thread (only tests use it).
    fn state(&self) -> Vec<f64> {
        panic!("the state of a timed env is not available")
    }

    /// Not available: the env lives on its thread (only tests use it).
    fn set_state(&mut self, _state: &[f64]) {
        panic!("the state of a timed env is not available")
    }

    fn elapsed_steps(&self) -> u32 {
        self.elapsed
    }

    fn try_reset(&mut self, seed: Option<u64>, obs: &mut [f32]) -> Result<(), EnvFault> {
        match self.call("reset", Call::Reset(seed))? {
            Reply::Obs(r) => {
                obs.copy_from_slice(&r?);
                self.elapsed = 0;
                Ok(())
            }
            _ => unreachable!("a reset is answered with an observation"),
        }
    }

    fn try_step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvFault> {
        let call = match action {
            Action::Discrete(i) => Call::Step(Some(i), Vec::new()),
            Action::Continuous(a) => Call::Step(None, a.to_vec()),
        };
        match self.call("step", call)? {
            Reply::Stepped(r) => {
                let (o, step) = r?;
                obs.copy_from_slice(&o);
                self.elapsed += 1;
                Ok(step)
            }
            _ => unreachable!("a step is answered with a step"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::make;

    #[test]
    fn a_timed_env_steps_as_the_env_itself() {
        let mut a = make("CartPole-v1").unwrap();
        let mut t = Timed::new(make("CartPole-v1").unwrap(), Duration::from_secs(5));
        let (mut oa, mut ob) = (vec![0f32; 4], vec![0f32; 4]);
        a.reset(Some(7), &mut oa);
        t.try_reset(Some(7), &mut ob).unwrap();
        for i in 0..50 {
            let sa = a.step(Action::Discrete(i % 2), &mut oa);
            let sb = t.try_step(Action::Discrete(i % 2), &mut ob).unwrap();
            assert_eq!((oa.clone(), sa), (ob.clone(), sb));
            if sa.done() {
                break;
            }
        }
    }
}
