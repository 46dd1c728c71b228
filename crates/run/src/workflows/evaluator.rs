//! The evaluator: a thread with its own environment and its own copy of the
//! policy that scores the latest published weights with greedy episodes,
//! without stalling training. Publication is a latest-value slot: if
//! training publishes faster than evaluation runs, older weights are skipped.
//! A confirming evaluation (more episodes, other starts, the weights of a
//! screening evaluation that reached the target) goes first and is never
//! replaced.

use super::seeds::eval_seed;
use rlfleet_learning::agents::{Policy, Weights};
use rlfleet_shared::env::{Action, Env, EnvFault};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

/// The score of one publication.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalResult {
    pub env_steps: u64,
    pub weights: Weights,
    pub returns: Vec<f64>,
    /// A confirming evaluation.
    pub confirming: bool,
}

impl EvalResult {
    pub fn mean(&self) -> f64 {
        self.returns.iter().sum::<f64>() / self.returns.len() as f64
    }
    pub fn min(&self) -> f64 {
        self.returns.iter().copied().fold(f64::INFINITY, f64::min)
    }
    pub fn max(&self) -> f64 {
        self.returns
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max)
    }
}

#[derive(Debug, Default)]
struct Slot {
    job: Option<(Weights, u64)>,
    /// The version of the weights last offered by `publish`: pending,
    /// being scored or scored.
    offered: Option<u64>,
    /// A confirming evaluation to run first: weights, env steps, episodes.
    confirm: Option<(Weights, u64, u32)>,
    closed: bool,
}

/// Handle to the evaluator thread.
#[derive(Debug)]
pub struct Evaluator {
    slot: Arc<(Mutex<Slot>, Condvar)>,
    results: mpsc::Receiver<EvalResult>,
    thread: Option<JoinHandle<()>>,
}

/// Plays `episodes` greedy episodes with `policy`; returns their returns,
/// or the fault of an env that raised (a Python env).
pub fn evaluate(
    env: &mut dyn Env,
    policy: &mut dyn Policy,
    episodes: u32,
    seed: u64,
    confirming: bool,
) -> Result<Vec<f64>, EnvFault> {
    let spec = env.spec().clone();
    let mut obs = vec![0f32; spec.obs_dim()];
    let mut action = vec![0f32; spec.action_space.flat_dim()];
    (0..episodes)
        .map(|i| {
            env.try_reset(Some(eval_seed(seed, i, confirming)), &mut obs)?;
            policy.begin_episode();
            let mut ret = 0.0;
            loop {
                policy.act(&obs, &mut action);
                let a = if spec.action_space.is_discrete() {
                    Action::Discrete(action[0] as usize)
                } else {
                    Action::Continuous(&action)
                };
                let step = env.try_step(a, &mut obs)?;
                ret += step.reward;
                if step.done() {
                    return Ok(ret);
                }
            }
        })
        .collect()
}

impl Evaluator {
    /// Starts the thread. `env` and `policy` are the evaluator's own.
    pub fn spawn(
        mut env: Box<dyn Env>,
        mut policy: Box<dyn Policy>,
        episodes: u32,
        seed: u64,
    ) -> Evaluator {
        let slot = Arc::new((Mutex::new(Slot::default()), Condvar::new()));
        let (tx, results) = mpsc::channel();
        let shared = slot.clone();
        let thread = std::thread::Builder::new()
            .name("evaluator".into())
            .spawn(move || {
                loop {
                    let (weights, env_steps, n, confirming) = {
                        let (lock, cv) = &*shared;
                        let mut s = lock.lock().expect("evaluator slot");
                        loop {
                            if let Some((w, steps, n)) = s.confirm.take() {
                                break (w, steps, n, true);
                            }
                            if let Some((w, steps)) = s.job.take() {
                                break (w, steps, episodes, false);
                            }
                            if s.closed {
                                return;
                            }
                            s = cv.wait(s).expect("evaluator slot");
                        }
                    };
                    if let Err(e) = policy.load(&weights) {
                        tracing::error!("evaluator cannot load weights: {e}");
                        continue;
                    }
                    let returns = match evaluate(env.as_mut(), policy.as_mut(), n, seed, confirming)
                    {
                        Ok(r) => r,
                        Err(fault) => {
                            // An env that raised is skipped for this
                            // evaluation; training goes on.
                            tracing::error!(
                                env_steps,
                                "evaluation skipped: the env raised {fault}"
                            );
                            continue;
                        }
                    };
                    if tx
                        .send(EvalResult {
                            env_steps,
                            weights,
                            returns,
                            confirming,
                        })
                        .is_err()
                    {
                        return;
                    }
                }
            })
            .expect("spawn evaluator thread");
        Evaluator {
            slot,
            results,
            thread: Some(thread),
        }
    }

    /// Offers weights for evaluation, replacing any not yet started.
    pub fn publish(&self, weights: Weights, env_steps: u64) {
        let (lock, cv) = &*self.slot;
        let mut s = lock.lock().expect("evaluator slot");
        s.offered = Some(weights.version);
        s.job = Some((weights, env_steps));
        cv.notify_one();
    }

    /// Asks for a confirming evaluation of `weights` over `episodes`
    /// episodes, before any other.
    pub fn confirm(&self, weights: Weights, env_steps: u64, episodes: u32) {
        let (lock, cv) = &*self.slot;
        lock.lock().expect("evaluator slot").confirm = Some((weights, env_steps, episodes));
        cv.notify_one();
    }

    /// A finished evaluation, if one is ready.
    pub fn try_result(&self) -> Option<EvalResult> {
        self.results.try_recv().ok()
    }

    /// Stops the thread after the job in progress and any pending one
    /// (`last`, when given, is queued first — unless those are its weights
    /// already: a run that ends where a periodic evaluation was offered
    /// scores them once), and returns what they scored.
    pub fn finish(mut self, last: Option<(Weights, u64)>) -> Vec<EvalResult> {
        {
            let (lock, cv) = &*self.slot;
            let mut s = lock.lock().expect("evaluator slot");
            if let Some(last) = last
                && s.offered != Some(last.0.version)
            {
                s.job = Some(last);
            }
            s.closed = true;
            cv.notify_one();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.results.try_iter().collect()
    }
}

impl Drop for Evaluator {
    fn drop(&mut self) {
        let (lock, cv) = &*self.slot;
        if let Ok(mut s) = lock.lock() {
            s.job = None;
            s.confirm = None;
            s.closed = true;
            cv.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlfleet_learning::agents::AgentError;

    /// Always pushes left.
    struct Left(u64);

    impl Policy for Left {
        fn load(&mut self, w: &Weights) -> Result<(), AgentError> {
            self.0 = w.version;
            Ok(())
        }
        fn act(&mut self, _obs: &[f32], action: &mut [f32]) {
            action[0] = 0.0;
        }
        fn version(&self) -> u64 {
            self.0
        }
    }

    fn weights(version: u64) -> Weights {
        Weights {
            version,
            data: Vec::new(),
        }
    }

    #[test]
    fn the_last_weights_are_scored_once_when_a_periodic_evaluation_has_them() {
        let env = rlfleet_shared::env::make("CartPole-v1").unwrap();
        let e = Evaluator::spawn(env, Box::new(Left(0)), 200, 1);
        e.publish(weights(7), 3000);
        // Wait until the thread has taken the job (it is being scored):
        // the race in which the end of a run used to queue it again.
        while e.slot.0.lock().unwrap().job.is_some() {
            std::thread::yield_now();
        }
        let scored: Vec<(u64, u64)> = e
            .finish(Some((weights(7), 3000)))
            .iter()
            .map(|r| (r.weights.version, r.env_steps))
            .collect();
        assert_eq!(scored, [(7, 3000)]);
        // Newer weights at the end are scored after the periodic ones.
        let env = rlfleet_shared::env::make("CartPole-v1").unwrap();
        let e = Evaluator::spawn(env, Box::new(Left(0)), 5, 1);
        e.publish(weights(7), 3000);
        while e.slot.0.lock().unwrap().job.is_some() {
            std::thread::yield_now();
        }
        let versions: Vec<u64> = e
            .finish(Some((weights(8), 3100)))
            .iter()
            .map(|r| r.weights.version)
            .collect();
        assert_eq!(versions, [7, 8]);
    }
}
