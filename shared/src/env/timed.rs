//! [`Timed`]: an environment run on a thread of its own, so that a `reset`
//! or `step` that does not return within a limit (a hung simulator) comes
//! back as an [`EnvFault`] instead of stopping the actor. The hung call's
//! thread is abandoned: it ends, dropping its env, whenever the call
//! returns. A Python env that hangs while holding the GIL (a pure-Python
//! busy loop) would still block every other Python call of the process;
//! one that waits (`time.sleep`, a socket, a subprocess) does not.
//! [`EnvThread`], the env on its thread, also serves an MPI env group's
//! ranks, which stop waiting when another rank raises.

use super::{Action, Env, EnvFault, EnvSpec, Step};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::time::Duration;

/// A call on an env that lives on its own thread ([`EnvThread`]).
#[derive(Debug, Clone, PartialEq)]
pub enum EnvCall {
    Reset(Option<u64>),
    /// A discrete action (`Some(index)`) or a continuous one.
    Step(Option<usize>, Vec<f32>),
}

/// What a call returned: the observation, and the step (`None` for a
/// reset).
pub type EnvReply = Result<(Vec<f32>, Option<Step>), EnvFault>;

/// An env on a thread of its own: calls go in, replies come out, and the
/// caller decides how long to wait (`Timed`: up to a limit; an env
/// group's ranks: until another rank raises). Dropped, the thread ends
/// after its current call, taking the env with it.
pub struct EnvThread {
    calls: Sender<EnvCall>,
    replies: Receiver<EnvReply>,
}

impl std::fmt::Debug for EnvThread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EnvThread")
    }
}

impl EnvThread {
    pub fn spawn(mut env: Box<dyn Env>) -> EnvThread {
        let (calls, inbox) = mpsc::channel::<EnvCall>();
        let (outbox, replies) = mpsc::channel();
        let mut obs = vec![0f32; env.spec().obs_dim()];
        std::thread::Builder::new()
            .name(format!("env {}", env.spec().id))
            .spawn(move || {
                for call in inbox {
                    let reply = match call {
                        EnvCall::Reset(seed) => {
                            env.try_reset(seed, &mut obs).map(|()| (obs.clone(), None))
                        }
                        EnvCall::Step(discrete, a) => {
                            let action = match discrete {
                                Some(i) => Action::Discrete(i),
                                None => Action::Continuous(&a),
                            };
                            env.try_step(action, &mut obs)
                                .map(|s| (obs.clone(), Some(s)))
                        }
                    };
                    if outbox.send(reply).is_err() {
                        break;
                    }
                }
            })
            .expect("spawn an env thread");
        EnvThread { calls, replies }
    }

    /// Starts `call` (its reply comes from `try_reply` or `reply_within`).
    pub fn start(&self, call: EnvCall) {
        // A send fails only when the thread ended (it panicked): the
        // reply then says so.
        let _ = self.calls.send(call);
    }

    /// The reply, if there is one yet.
    pub fn try_reply(&self) -> Option<EnvReply> {
        match self.replies.try_recv() {
            Ok(r) => Some(r),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => Some(Err(ended())),
        }
    }

    /// The reply, waiting at most `limit` (`None`: it did not come).
    pub fn reply_within(&self, limit: Duration) -> Option<EnvReply> {
        match self.replies.recv_timeout(limit) {
            Ok(r) => Some(r),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => Some(Err(ended())),
        }
    }
}

fn ended() -> EnvFault {
    EnvFault("the env's thread ended (it panicked)".into())
}

/// An env behind a thread, with a time limit on each call.
pub struct Timed {
    spec: EnvSpec,
    limit: Duration,
    /// `None` once a call timed out (the env is gone).
    thread: Option<EnvThread>,
    /// Steps since the last reset.
    elapsed: u32,
}

impl std::fmt::Debug for Timed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timed")
            .field("env", &self.spec.id)
            .field("limit", &self.limit)
            .field("abandoned", &self.thread.is_none())
            .finish()
    }
}

impl Timed {
    pub fn new(env: Box<dyn Env>, limit: Duration) -> Timed {
        Timed {
            spec: env.spec().clone(),
            limit,
            thread: Some(EnvThread::spawn(env)),
            elapsed: 0,
        }
    }

    /// Makes a call and waits for its reply, at most the limit.
    fn call(&mut self, what: &str, call: EnvCall) -> EnvReply {
        let thread = self.thread.as_ref().ok_or_else(|| {
            EnvFault(format!(
                "the env was abandoned after a call took longer than {:?}",
                self.limit
            ))
        })?;
        thread.start(call);
        let reply = thread.reply_within(self.limit);
        if reply.is_none() {
            self.thread = None;
        }
        reply.unwrap_or_else(|| {
            Err(EnvFault(format!(
                "TimeoutError: `{what}` took longer than env_step_timeout_secs ({} s); the env is abandoned",
                self.limit.as_secs_f64()
            )))
        })
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
        let (o, _) = self.call("reset", EnvCall::Reset(seed))?;
        obs.copy_from_slice(&o);
        self.elapsed = 0;
        Ok(())
    }

    fn try_step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvFault> {
        let call = match action {
            Action::Discrete(i) => EnvCall::Step(Some(i), Vec::new()),
            Action::Continuous(a) => EnvCall::Step(None, a.to_vec()),
        };
        let (o, step) = self.call("step", call)?;
        obs.copy_from_slice(&o);
        self.elapsed += 1;
        Ok(step.expect("a step is answered with a step"))
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
