//! What a batch must be before the run takes it: [`Shapes`], the run's
//! spaces as batches must match them, and the checks that name the first
//! problem found (sans-IO: plain data in, a refusal out).

use rlfleet_shared::env::Space;
use rlfleet_shared::wire::{ErrorCode, Experience, Submission};

/// A refusal: the code and the text that names the problem.
pub(super) type Refusal = (ErrorCode, String);

/// The shapes a run's batches must have.
#[derive(Debug, Clone)]
pub(super) struct Shapes {
    pub obs_dim: usize,
    /// Observations travel as uint8 (`Welcome.obs_u8`).
    pub obs_u8: bool,
    pub action_space: Space,
}

/// Checks a batch against the run's spaces; names the first problem.
pub(super) fn check_experience(
    e: &Experience,
    shapes: &Shapes,
    n_envs: u32,
) -> Result<(), Refusal> {
    let (obs_dim, action_space) = (shapes.obs_dim, &shapes.action_space);
    let t = &e.transitions;
    let n = t.rewards.len();
    if n == 0 {
        return Err((
            ErrorCode::BadShape,
            "experience without transitions (an actor asking for work sends a work request)".into(),
        ));
    }
    let act_dim = action_space.flat_dim();
    let shape = |what: &str, got: usize, want: usize| {
        (got != want).then(|| {
            (
                ErrorCode::BadShape,
                format!(
                    "experience: `{what}` has {got} values, expected {want} for {n} transitions"
                ),
            )
        })
    };
    // The run's observation width carries them; the other pair is empty.
    let (f32_rows, u8_rows) = if shapes.obs_u8 { (0, n) } else { (n, 0) };
    let problems = [
        shape("obs", t.obs.len(), f32_rows * obs_dim),
        shape("next_obs", t.next_obs.len(), f32_rows * obs_dim),
        shape("obs_u8", t.obs_u8.len(), u8_rows * obs_dim),
        shape("next_obs_u8", t.next_obs_u8.len(), u8_rows * obs_dim),
        shape("actions", t.actions.len(), n * act_dim),
        shape("terminated", t.terminated.len(), n),
        shape("episode", t.episode.len(), n),
    ];
    if let Some(p) = problems.into_iter().flatten().next() {
        return Err(p);
    }
    for (what, v) in [
        ("obs", &t.obs),
        ("next_obs", &t.next_obs),
        ("rewards", &t.rewards),
        ("actions", &t.actions),
    ] {
        if let Some(i) = v.iter().position(|x| !x.is_finite()) {
            return Err((
                ErrorCode::NonFinite,
                format!("experience: `{what}`[{i}] is {}", v[i]),
            ));
        }
    }
    if let Some(n_actions) = action_space.n()
        && let Some(i) = t
            .actions
            .iter()
            .position(|&a| a < 0.0 || a.fract() != 0.0 || a as usize >= n_actions)
    {
        return Err((
            ErrorCode::BadAction,
            format!(
                "experience: action[{i}] = {} is not in Discrete({n_actions})",
                t.actions[i]
            ),
        ));
    }
    check_envs(e.finished.iter().map(|f| f.env), n_envs)
}

/// Every env a submission names is one the actor runs.
fn check_envs(mut envs: impl Iterator<Item = u32>, n_envs: u32) -> Result<(), Refusal> {
    match envs.find(|&env| env >= n_envs) {
        Some(env) => Err((
            ErrorCode::BadShape,
            format!("experience names env {env}, the actor runs {n_envs}"),
        )),
        None => Ok(()),
    }
}

/// Checks a submission from an actor with `n_envs` envs, connected as
/// `actor_id`, against the run's spaces.
pub(super) fn check_submission(
    s: &Submission,
    actor_id: &str,
    shapes: &Shapes,
    n_envs: u32,
) -> Result<(), Refusal> {
    if s.actor_id() != actor_id {
        return Err((
            ErrorCode::Unexpected,
            format!(
                "experience from actor `{}` on the connection of `{actor_id}`",
                s.actor_id()
            ),
        ));
    }
    if let Some(e) = s.batch() {
        check_experience(e, shapes, n_envs)?;
    }
    check_envs(s.faults().iter().map(|f| f.env), n_envs)?;
    check_envs(s.idle_envs().iter().copied(), n_envs)
}
