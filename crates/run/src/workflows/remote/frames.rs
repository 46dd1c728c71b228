//! [`FrameContexts`]: each actor env's frame stack on the learner, for
//! runs that carry single frames (`frame_stack` > 1). A run from an
//! episode's start fills the stack with its first frame (Gymnasium's
//! `FrameStackObservation`); a run that goes on continues the stack the
//! env's last run left. A run whose earlier frames never arrived (a batch
//! an `rma` pool pushed out) has no whole stack for its first steps: those
//! are counted and not trained on. A uint8 run's frames are stacked as
//! bytes ([`Frames::Bytes`]) and reach the agent as bytes.

use crate::vocab::ConnId;
use rlfleet_shared::env::Stacker;
use rlfleet_shared::wire::{RUN_GOES_ON, StepRef, StepRun, Steps};
use std::collections::HashMap;

/// A frame's element as the learner keeps it: a value, or a uint8 run's
/// byte.
pub(super) trait Frame: Copy + Default + PartialEq + std::fmt::Debug {
    /// Row `row` of `t`'s observations into `out`.
    fn read(t: &Steps, row: usize, out: &mut [Self]);
}

impl Frame for f32 {
    fn read(t: &Steps, row: usize, out: &mut [f32]) {
        t.obs_into(row, out);
    }
}

impl Frame for u8 {
    fn read(t: &Steps, row: usize, out: &mut [u8]) {
        let n = out.len();
        out.copy_from_slice(&t.obs_u8[row * n..(row + 1) * n]);
    }
}

/// The stacks of a run, of values or of bytes.
#[derive(Debug)]
pub(super) enum Frames {
    Values(FrameContexts<f32>),
    Bytes(FrameContexts<u8>),
}

impl Frames {
    /// Stacks of `k` frames of `frame_dim` (`bytes`: a uint8 run's).
    pub fn new(k: usize, frame_dim: usize, bytes: bool) -> Frames {
        if bytes {
            Frames::Bytes(FrameContexts::new(k, frame_dim))
        } else {
            Frames::Values(FrameContexts::new(k, frame_dim))
        }
    }

    /// `conn` left: its stacks go.
    pub fn forget(&mut self, conn: ConnId) {
        match self {
            Frames::Values(f) => f.forget(conn),
            Frames::Bytes(f) => f.forget(conn),
        }
    }

    /// The stacks move on over `t`'s steps, which are not trained on.
    pub fn skip_steps(&mut self, conn: ConnId, t: &Steps) {
        match self {
            Frames::Values(f) => f.stack_steps(conn, t, |_, _| {}),
            Frames::Bytes(f) => f.stack_steps(conn, t, |_, _| {}),
        };
    }
}

/// One env's stack and where its episode is.
#[derive(Debug)]
struct Context<T> {
    episode: u64,
    /// The episode step of the stack's newest frame.
    at: u32,
    /// The first episode step whose stack holds only frames that arrived.
    whole_from: u32,
    stacker: Stacker<T>,
}

/// The stacks of every env of every connection.
#[derive(Debug)]
pub(super) struct FrameContexts<T> {
    k: usize,
    frame_dim: usize,
    envs: HashMap<(ConnId, u32), Context<T>>,
}

impl<T: Frame> FrameContexts<T> {
    pub fn new(k: usize, frame_dim: usize) -> FrameContexts<T> {
        FrameContexts {
            k,
            frame_dim,
            envs: HashMap::new(),
        }
    }

    /// Stacks `run` of `conn`, whose frames `frame(i)` gives (its first
    /// observation is `frame(0)`): for each step, `step(i, obs, next)` with
    /// the stacked observation and next observation, or `None` for a step
    /// whose stack misses frames. Returns the steps without a whole stack.
    pub fn stack_run(
        &mut self,
        conn: ConnId,
        run: &StepRun,
        frame: impl Fn(usize, &mut [T]),
        mut step: impl FnMut(usize, Option<(&[T], &[T])>),
    ) -> u32 {
        let (k, frame_dim) = (self.k, self.frame_dim);
        let mut buf = vec![T::default(); frame_dim];
        frame(0, &mut buf);
        let key = (conn, run.env);
        let goes_on = self
            .envs
            .get(&key)
            .is_some_and(|c| run.first > 0 && c.episode == run.episode && c.at == run.first);
        if !goes_on {
            let mut stacker = Stacker::new(k, frame_dim);
            stacker.reset(&buf);
            let whole_from = if run.first == 0 {
                0
            } else {
                run.first + k as u32 - 1
            };
            self.envs.insert(
                key,
                Context {
                    episode: run.episode,
                    at: run.first,
                    whole_from,
                    stacker,
                },
            );
        }
        let ctx = self.envs.get_mut(&key).expect("inserted above");
        let mut obs = ctx.stacker.stack().to_vec();
        let mut missing = 0;
        for i in 0..run.steps as usize {
            frame(i + 1, &mut buf);
            ctx.stacker.push(&buf);
            let whole = ctx.at >= ctx.whole_from;
            ctx.at += 1;
            if whole {
                step(i, Some((&obs, ctx.stacker.stack())));
            } else {
                missing += 1;
                step(i, None);
            }
            obs.copy_from_slice(ctx.stacker.stack());
        }
        if run.end != RUN_GOES_ON {
            self.envs.remove(&key);
        }
        missing
    }

    /// Stacks every run of `t` from `conn` ([`FrameContexts::stack_run`]),
    /// giving `each` every step with its stacks (`None`: frames missing);
    /// returns the steps without a whole stack.
    pub fn stack_steps(
        &mut self,
        conn: ConnId,
        t: &Steps,
        mut each: impl FnMut(&StepRef, Option<(&[T], &[T])>),
    ) -> u32 {
        let refs: Vec<StepRef> = t.transitions().collect();
        let (mut missing, mut at) = (0, 0);
        for run in &t.runs {
            let first_row = refs[at].obs;
            missing += self.stack_run(
                conn,
                run,
                |i, f| T::read(t, first_row + i, f),
                |i, stacks| each(&refs[at + i], stacks),
            );
            at += run.steps as usize;
        }
        missing
    }

    /// `conn` left: its stacks go.
    pub fn forget(&mut self, conn: ConnId) {
        self.envs.retain(|(c, _), _| *c != conn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(env: u32, episode: u64, first: u32, steps: u32, end: u8) -> StepRun {
        StepRun {
            env,
            episode,
            steps,
            first,
            end,
        }
    }

    /// A step's stacked observation and next observation, if whole.
    type Stacks = Option<(Vec<f32>, Vec<f32>)>;

    /// Frames `first..=first + steps` of an episode whose frame `t` is `[t]`.
    fn stacks(c: &mut FrameContexts<f32>, r: StepRun) -> (Vec<Stacks>, u32) {
        let mut out = Vec::new();
        let missing = c.stack_run(
            1,
            &r,
            |i, f| f[0] = (r.first as usize + i) as f32,
            |_, s| out.push(s.map(|(o, n)| (o.to_vec(), n.to_vec()))),
        );
        (out, missing)
    }

    #[test]
    fn a_stack_starts_from_the_first_frame_and_goes_on_across_batches() {
        let mut c = FrameContexts::new(3, 1);
        let (a, missing) = stacks(&mut c, run(0, 7, 0, 2, RUN_GOES_ON));
        assert_eq!(missing, 0);
        assert_eq!(
            a,
            [
                Some((vec![0.0, 0.0, 0.0], vec![0.0, 0.0, 1.0])),
                Some((vec![0.0, 0.0, 1.0], vec![0.0, 1.0, 2.0])),
            ]
        );
        // The next batch's run goes on from frame 2.
        let (b, _) = stacks(&mut c, run(0, 7, 2, 1, 1));
        assert_eq!(b, [Some((vec![0.0, 1.0, 2.0], vec![1.0, 2.0, 3.0]))]);
        // Its episode ended: the env's next run starts afresh.
        assert!(c.envs.is_empty());
    }

    #[test]
    fn a_run_whose_earlier_frames_never_came_trains_only_on_whole_stacks() {
        let mut c = FrameContexts::new(3, 1);
        let (a, missing) = stacks(&mut c, run(0, 7, 10, 4, RUN_GOES_ON));
        assert_eq!(missing, 2);
        assert_eq!(a[0], None);
        assert_eq!(a[1], None);
        assert_eq!(a[2], Some((vec![10.0, 11.0, 12.0], vec![11.0, 12.0, 13.0])));
        c.forget(1);
        assert!(c.envs.is_empty());
    }
}
