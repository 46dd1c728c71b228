//! [`FrameStack`]: the run setting `frame_stack = K` on an env that gives
//! single frames — its observation is the last K frames, oldest first,
//! with Gymnasium's `FrameStackObservation` semantics (at `reset` the
//! first frame fills every place). [`Stacker`] is the same rule for
//! whoever rebuilds stacks from frames that arrive one at a time (the
//! learner, from actors that send only each step's newest frame).

use super::{Action, Env, EnvFault, EnvSpec, Space, Step};

/// The last `k` frames of `frame_dim` values each, oldest first (values,
/// or the bytes of a uint8 env).
#[derive(Debug, Clone, PartialEq)]
pub struct Stacker<T = f32> {
    k: usize,
    frame_dim: usize,
    stack: Vec<T>,
}

impl<T: Copy + Default> Stacker<T> {
    pub fn new(k: usize, frame_dim: usize) -> Stacker<T> {
        Stacker {
            k,
            frame_dim,
            stack: vec![T::default(); k * frame_dim],
        }
    }

    /// An episode's first frame: every place holds it.
    pub fn reset(&mut self, frame: &[T]) {
        for place in self.stack.chunks_exact_mut(self.frame_dim) {
            place.copy_from_slice(frame);
        }
    }

    /// The next frame: the oldest goes.
    pub fn push(&mut self, frame: &[T]) {
        self.stack.copy_within(self.frame_dim.., 0);
        let at = (self.k - 1) * self.frame_dim;
        self.stack[at..].copy_from_slice(frame);
    }

    /// The stack, `k × frame_dim` values.
    pub fn stack(&self) -> &[T] {
        &self.stack
    }

    pub fn frame_dim(&self) -> usize {
        self.frame_dim
    }
}

/// The newest frame of a stacked observation of `k` frames.
pub fn newest(obs: &[f32], k: usize) -> &[f32] {
    &obs[obs.len() - obs.len() / k..]
}

/// The spec of `inner` with its observations stacked `k` deep: shape
/// `[k, ..frame shape]`, each bound repeated per frame.
pub fn stacked_spec(inner: &EnvSpec, k: usize) -> EnvSpec {
    let observation_space = match &inner.observation_space {
        Space::Box { low, high } => Space::Box {
            low: low.repeat(k),
            high: high.repeat(k),
        },
        other => other.clone(),
    };
    let mut obs_shape = vec![k];
    obs_shape.extend_from_slice(&inner.obs_shape);
    EnvSpec {
        observation_space,
        obs_shape,
        ..inner.clone()
    }
}

/// An env whose observations are its inner env's last `k` frames.
pub struct FrameStack {
    inner: Box<dyn Env>,
    spec: EnvSpec,
    stacker: Stacker,
    frame: Vec<f32>,
}

impl std::fmt::Debug for FrameStack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameStack")
            .field("env", &self.spec.id)
            .field("k", &self.stacker.k)
            .finish()
    }
}

impl FrameStack {
    pub fn new(inner: Box<dyn Env>, k: usize) -> FrameStack {
        let frame_dim = inner.spec().obs_dim();
        FrameStack {
            spec: stacked_spec(inner.spec(), k),
            inner,
            stacker: Stacker::new(k, frame_dim),
            frame: vec![0.0; frame_dim],
        }
    }

    /// The newest frame of the current observation.
    pub fn frame(&self) -> &[f32] {
        &self.frame
    }
}

impl Env for FrameStack {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) {
        self.inner.reset(seed, &mut self.frame);
        self.stacker.reset(&self.frame);
        obs.copy_from_slice(self.stacker.stack());
    }

    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Step {
        let step = self.inner.step(action, &mut self.frame);
        self.stacker.push(&self.frame);
        obs.copy_from_slice(self.stacker.stack());
        step
    }

    fn state(&self) -> Vec<f64> {
        self.inner.state()
    }

    fn set_state(&mut self, state: &[f64]) {
        self.inner.set_state(state)
    }

    fn elapsed_steps(&self) -> u32 {
        self.inner.elapsed_steps()
    }

    fn try_reset(&mut self, seed: Option<u64>, obs: &mut [f32]) -> Result<(), EnvFault> {
        self.inner.try_reset(seed, &mut self.frame)?;
        self.stacker.reset(&self.frame);
        obs.copy_from_slice(self.stacker.stack());
        Ok(())
    }

    fn try_step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvFault> {
        let step = self.inner.try_step(action, &mut self.frame)?;
        self.stacker.push(&self.frame);
        obs.copy_from_slice(self.stacker.stack());
        Ok(step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Gymnasium's rule: the reset frame fills the stack, then each step's
    /// frame pushes the oldest out.
    #[test]
    fn the_stack_starts_full_of_the_first_frame_and_moves_on_by_one() {
        let mut s = Stacker::new(3, 2);
        s.reset(&[1.0, 1.5]);
        assert_eq!(s.stack(), [1.0, 1.5, 1.0, 1.5, 1.0, 1.5]);
        s.push(&[2.0, 2.5]);
        s.push(&[3.0, 3.5]);
        s.push(&[4.0, 4.5]);
        assert_eq!(s.stack(), [2.0, 2.5, 3.0, 3.5, 4.0, 4.5]);
        assert_eq!(newest(s.stack(), 3), [4.0, 4.5]);
    }

    #[test]
    fn a_stacked_env_observes_its_last_frames() {
        let mut env = FrameStack::new(super::super::make("Counting-v0").unwrap(), 4);
        let spec = env.spec().clone();
        assert_eq!(spec.obs_shape, [4, 3]);
        assert_eq!(spec.obs_dim(), 12);
        let mut obs = vec![0f32; 12];
        env.reset(Some(5), &mut obs);
        let first = obs[..3].to_vec();
        assert!(obs.chunks(3).all(|f| f == first), "{obs:?}");
        env.step(Action::Discrete(0), &mut obs);
        assert_eq!(
            &obs[..9],
            [first.clone(), first.clone(), first.clone()].concat()
        );
        assert_eq!(&obs[9..], env.frame());
        assert_ne!(env.frame(), first.as_slice());
    }
}
