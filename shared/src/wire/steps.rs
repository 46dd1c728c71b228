//! Building and reading a batch's [`Steps`]: runs begun, stepped and
//! ended on the actor; on the learner, the transitions they hold —
//! `(observation, action, reward, next observation)` with each
//! observation read from its one place in the batch.

use super::messages::{RUN_GOES_ON, RUN_TERMINATED, RUN_TRUNCATED, StepRun, Steps};

/// One transition of a [`Steps`], as indices into its columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepRef {
    /// The run it belongs to.
    pub run: usize,
    pub env: u32,
    pub episode: u64,
    /// Its index within its episode's play (the run's `first` + its place
    /// in the run).
    pub index: u32,
    /// Rows of its observation and next observation (`next = obs + 1`).
    pub obs: usize,
    /// Its row in `actions` and `rewards`.
    pub step: usize,
    /// The step ends its episode in a terminal state (no bootstrap).
    pub terminated: bool,
    /// The step ends its episode, terminal or truncated.
    pub ends: bool,
}

impl Steps {
    /// Steps (transitions) in the batch.
    pub fn len(&self) -> usize {
        self.rewards.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rewards.is_empty()
    }

    /// Observation rows in the batch (one more per run than its steps).
    pub fn obs_rows(&self) -> usize {
        self.len() + self.runs.len()
    }

    fn push_obs(&mut self, obs: &[f32], as_u8: bool) {
        if as_u8 {
            self.obs_u8.extend(obs.iter().map(|&x| x as u8));
        } else {
            self.obs.extend_from_slice(obs);
        }
    }

    /// Begins a run of `env` in `episode` from `obs`, the episode's
    /// observation after `first` steps; bytes when `as_u8` (the env's
    /// uint8 or bool values, exact), else f32. The run stays open for
    /// [`Steps::step`] until [`Steps::end`] or the next `begin`.
    pub fn begin(&mut self, env: u32, episode: u64, first: u32, obs: &[f32], as_u8: bool) {
        self.runs.push(StepRun {
            env,
            episode,
            steps: 0,
            first,
            end: RUN_GOES_ON,
        });
        self.push_obs(obs, as_u8);
    }

    /// One step of the open run: its action, its reward, and the
    /// observation it led to.
    pub fn step(&mut self, action: &[f32], reward: f32, next_obs: &[f32], as_u8: bool) {
        let run = self.runs.last_mut().expect("a run was begun");
        run.steps += 1;
        self.actions.extend_from_slice(action);
        self.rewards.push(reward);
        self.push_obs(next_obs, as_u8);
    }

    /// The policy core's state the open run's first action was chosen
    /// from (every run of a batch has one, or none has).
    pub fn run_state(&mut self, state: &[f32]) {
        self.states.extend_from_slice(state);
    }

    /// The log-probability of the last step's action, from a policy that
    /// gives them (every step of a batch has one, or none has).
    pub fn step_logp(&mut self, logp: f32) {
        self.logp.push(logp);
    }

    /// Whether the next step of `episode` goes on in the last run (it is
    /// that episode's and goes on), rather than beginning one.
    pub fn continues(&self, episode: u64) -> bool {
        self.runs
            .last()
            .is_some_and(|r| r.episode == episode && r.end == RUN_GOES_ON)
    }

    /// The open run's last step ended its episode (`terminated`: in a
    /// terminal state; else by a time limit).
    pub fn end(&mut self, terminated: bool) {
        let run = self.runs.last_mut().expect("a run was begun");
        run.end = if terminated {
            RUN_TERMINATED
        } else {
            RUN_TRUNCATED
        };
    }

    /// Appends `other`'s runs after this batch's.
    pub fn append(&mut self, other: &mut Steps) {
        self.runs.append(&mut other.runs);
        self.obs.append(&mut other.obs);
        self.obs_u8.append(&mut other.obs_u8);
        self.actions.append(&mut other.actions);
        self.rewards.append(&mut other.rewards);
        self.logp.append(&mut other.logp);
        self.states.append(&mut other.states);
    }

    /// Takes the last run out (its episode was abandoned): `obs_dim` and
    /// `act_dim` values per observation and action.
    pub fn drop_last_run(&mut self, obs_dim: usize, act_dim: usize) {
        let state_len = self.states.len() / self.runs.len().max(1);
        let Some(run) = self.runs.pop() else {
            return;
        };
        self.states.truncate(self.states.len() - state_len);
        let (rows, steps) = (run.steps as usize + 1, run.steps as usize);
        let obs = if self.obs_u8.is_empty() {
            self.obs.len()
        } else {
            self.obs_u8.len()
        } - rows * obs_dim;
        self.obs.truncate(obs);
        self.obs_u8.truncate(obs);
        self.rewards.truncate(self.rewards.len() - steps);
        self.actions.truncate(self.actions.len() - steps * act_dim);
        self.logp.truncate(self.logp.len().saturating_sub(steps));
    }

    /// Empties the batch, keeping its allocations.
    pub fn clear(&mut self) {
        self.runs.clear();
        self.obs.clear();
        self.obs_u8.clear();
        self.actions.clear();
        self.rewards.clear();
        self.logp.clear();
        self.states.clear();
    }

    /// Observation row `row` as f32 into `out` (`obs_dim` values).
    pub fn obs_into(&self, row: usize, out: &mut [f32]) {
        let od = out.len();
        if self.obs_u8.is_empty() {
            out.copy_from_slice(&self.obs[row * od..(row + 1) * od]);
        } else {
            for (d, &x) in out.iter_mut().zip(&self.obs_u8[row * od..(row + 1) * od]) {
                *d = f32::from(x);
            }
        }
    }

    /// Every transition, run by run.
    pub fn transitions(&self) -> impl Iterator<Item = StepRef> + '_ {
        let mut obs = 0;
        let mut step = 0;
        self.runs.iter().enumerate().flat_map(move |(r, run)| {
            let (o, s) = (obs, step);
            obs += run.steps as usize + 1;
            step += run.steps as usize;
            (0..run.steps as usize).map(move |i| {
                let last = i + 1 == run.steps as usize;
                StepRef {
                    run: r,
                    env: run.env,
                    episode: run.episode,
                    index: run.first + i as u32,
                    obs: o + i,
                    step: s + i,
                    terminated: last && run.end == RUN_TERMINATED,
                    ends: last && run.end != RUN_GOES_ON,
                }
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Env 0 plays a 2-step episode to its end and begins another; env 1
    /// goes on from step 5: each observation is in the batch once, and
    /// the transitions read it back in order.
    #[test]
    fn runs_carry_each_observation_once_and_give_back_every_transition() {
        let mut s = Steps::default();
        s.begin(0, 7, 0, &[0.0, 0.5], false);
        s.step(&[1.0], 1.0, &[1.0, 1.5], false);
        s.step(&[0.0], 2.0, &[2.0, 2.5], false);
        s.end(true);
        s.begin(0, 8, 0, &[10.0, 10.5], false);
        s.step(&[1.0], 3.0, &[11.0, 11.5], false);
        let mut other = Steps::default();
        other.begin(1, 3, 5, &[5.0, 5.5], false);
        other.step(&[0.0], 4.0, &[6.0, 6.5], false);
        other.end(false);
        s.append(&mut other);
        assert_eq!((s.len(), s.obs_rows(), s.obs.len()), (4, 7, 14));
        let t: Vec<StepRef> = s.transitions().collect();
        let mut o = [0f32; 2];
        let pairs: Vec<(u64, f32, f32, f32, bool, bool)> = t
            .iter()
            .map(|r| {
                s.obs_into(r.obs, &mut o);
                let before = o[0];
                s.obs_into(r.obs + 1, &mut o);
                (
                    r.episode,
                    before,
                    o[0],
                    s.rewards[r.step],
                    r.terminated,
                    r.ends,
                )
            })
            .collect();
        assert_eq!(
            pairs,
            [
                (7, 0.0, 1.0, 1.0, false, false),
                (7, 1.0, 2.0, 2.0, true, true),
                (8, 10.0, 11.0, 3.0, false, false),
                (3, 5.0, 6.0, 4.0, false, true),
            ]
        );
        assert_eq!(s.runs[2].first, 5);
    }

    /// With or without log-probabilities and run states: dropping a run
    /// takes its own out, and appending keeps them in step.
    #[test]
    fn an_abandoned_run_leaves_no_trace() {
        for with_logp in [false, true] {
            let mut s = Steps::default();
            let step = |s: &mut Steps, a: f32, r: f32, o: f32| {
                s.step(&[a], r, &[o, o], false);
                if with_logp {
                    s.step_logp(-r);
                }
            };
            let begin = |s: &mut Steps, env: u32, episode: u64, o: f32| {
                s.begin(env, episode, 0, &[o, o], false);
                if with_logp {
                    s.run_state(&[o, -o]);
                }
            };
            begin(&mut s, 0, 1, 0.0);
            step(&mut s, 1.0, 1.0, 1.0);
            s.end(true);
            let kept = s.clone();
            begin(&mut s, 0, 2, 5.0);
            step(&mut s, 0.0, 2.0, 6.0);
            step(&mut s, 0.0, 3.0, 7.0);
            s.drop_last_run(2, 1);
            assert_eq!(s, kept);
            let mut other = Steps::default();
            begin(&mut other, 1, 3, 3.0);
            step(&mut other, 1.0, 4.0, 1.0);
            s.append(&mut other);
            let logp: &[f32] = if with_logp { &[-1.0, -4.0] } else { &[] };
            assert_eq!(
                (s.rewards.as_slice(), s.logp.as_slice()),
                (&[1.0, 4.0][..], logp)
            );
            let states: &[f32] = if with_logp {
                &[0.0, -0.0, 3.0, -3.0]
            } else {
                &[]
            };
            assert_eq!(s.states, states);
        }
    }

    #[test]
    fn byte_observations_read_back_as_floats() {
        let mut s = Steps::default();
        s.begin(0, 1, 0, &[255.0, 0.0], true);
        s.step(&[2.0], 0.0, &[1.0, 17.0], true);
        assert!(s.obs.is_empty());
        assert_eq!(s.obs_u8, [255, 0, 1, 17]);
        let mut o = [0f32; 2];
        s.obs_into(1, &mut o);
        assert_eq!(o, [1.0, 17.0]);
    }
}
