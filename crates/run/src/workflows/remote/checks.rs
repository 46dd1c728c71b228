//! What a batch must be before the run takes it: [`Shapes`], the run's
//! spaces as batches must match them, and the checks that name the first
//! problem found (sans-IO: plain data in, a refusal out).

use rlfleet_shared::env::Space;
use rlfleet_shared::wire::{ErrorCode, Experience, RUN_GOES_ON, RUN_TRUNCATED, Steps, Submission};

/// A refusal: the code and the text that names the problem.
pub(super) type Refusal = (ErrorCode, String);

/// The shapes a run's batches must have.
#[derive(Debug, Clone)]
pub(super) struct Shapes {
    /// Values per observation row: one frame (the whole observation
    /// unless `frame_stack` > 1).
    pub obs_dim: usize,
    /// Observations travel as uint8 (`Welcome.obs_u8`).
    pub obs_u8: bool,
    pub action_space: Space,
    /// Values of the policy core's state (0: no core).
    pub state_len: usize,
}

/// Checks a batch against the run's spaces; names the first problem.
pub(super) fn check_experience(
    e: &Experience,
    shapes: &Shapes,
    n_envs: u32,
) -> Result<(), Refusal> {
    let (obs_dim, action_space) = (shapes.obs_dim, &shapes.action_space);
    let t = &e.steps;
    let n = t.rewards.len();
    if n == 0 {
        return Err((
            ErrorCode::BadShape,
            "experience without steps (an actor asking for work sends a work request)".into(),
        ));
    }
    check_runs(t, n_envs)?;
    let act_dim = action_space.flat_dim();
    let rows = t.obs_rows();
    let shape = |what: &str, got: usize, want: usize| {
        (got != want).then(|| {
            (
                ErrorCode::BadShape,
                format!(
                    "experience: `{what}` has {got} values, expected {want} for {n} steps in {} runs",
                    t.runs.len()
                ),
            )
        })
    };
    // The run's observation width carries them; the other is empty.
    let (f32_rows, u8_rows) = if shapes.obs_u8 { (0, rows) } else { (rows, 0) };
    let problems = [
        shape("obs", t.obs.len(), f32_rows * obs_dim),
        shape("obs_u8", t.obs_u8.len(), u8_rows * obs_dim),
        shape("actions", t.actions.len(), n * act_dim),
    ];
    if let Some(p) = problems.into_iter().flatten().next() {
        return Err(p);
    }
    if !t.logp.is_empty()
        && let Some(p) = shape("logp", t.logp.len(), n)
    {
        return Err(p);
    }
    if !t.states.is_empty()
        && let Some(p) = shape("states", t.states.len(), t.runs.len() * shapes.state_len)
    {
        return Err(p);
    }
    for (what, v) in [
        ("obs", &t.obs),
        ("rewards", &t.rewards),
        ("actions", &t.actions),
        ("logp", &t.logp),
        ("states", &t.states),
    ] {
        if let Some(i) = v.iter().position(|x| !x.is_finite()) {
            return Err((
                ErrorCode::NonFinite,
                format!("experience: `{what}`[{i}] is {}", v[i]),
            ));
        }
    }
    if action_space.is_discrete()
        && let Some(i) = t.logp.iter().position(|&l| l > 0.0)
    {
        return Err((
            ErrorCode::BadShape,
            format!(
                "experience: `logp`[{i}] = {} is above 0, not the log of a probability",
                t.logp[i]
            ),
        ));
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

/// The runs of a batch: each of at least one step, of an env the actor
/// runs, with a known end; within an env, only its last run may go on
/// (a run that goes on ends the env's part of the batch).
fn check_runs(t: &Steps, n_envs: u32) -> Result<(), Refusal> {
    let bad = |text: String| Err((ErrorCode::BadShape, text));
    let mut open = std::collections::BTreeSet::new();
    for (i, r) in t.runs.iter().enumerate() {
        if r.steps == 0 {
            return bad(format!("experience: run {i} has no steps"));
        }
        if r.env >= n_envs {
            return bad(format!(
                "experience: run {i} names env {}, the actor runs {n_envs}",
                r.env
            ));
        }
        if r.end > RUN_TRUNCATED {
            return bad(format!(
                "experience: run {i} ends with unknown code {}",
                r.end
            ));
        }
        if r.first.checked_add(r.steps).is_none() {
            return bad(format!("experience: run {i} counts past 2^32 steps"));
        }
        if !open.insert(r.env) {
            return bad(format!(
                "experience: run {i} of env {} follows a run of it that goes on",
                r.env
            ));
        }
        if r.end != RUN_GOES_ON {
            open.remove(&r.env);
        }
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use rlfleet_shared::wire::Steps;

    fn batch(logp: Vec<f32>) -> Experience {
        let mut steps = Steps::default();
        steps.begin(0, 1, 0, &[0.0; 4], false);
        steps.step(&[1.0], 1.0, &[0.5; 4], false);
        steps.step(&[0.0], 1.0, &[0.25; 4], false);
        steps.logp = logp;
        Experience::lone("a", steps)
    }

    /// A batch's log-probabilities are none or one per step, finite, and
    /// for a discrete action not above 0; each refusal names the problem.
    #[test]
    fn log_probabilities_are_checked_and_named() {
        let shapes = Shapes {
            obs_dim: 4,
            obs_u8: false,
            action_space: Space::Discrete { n: 2 },
            state_len: 3,
        };
        let check = |logp: Vec<f32>| check_experience(&batch(logp), &shapes, 1);
        assert!(check(vec![]).is_ok());
        assert!(check(vec![-0.5, -0.7]).is_ok());
        let refused = |logp: Vec<f32>| check(logp).unwrap_err();
        assert_eq!(
            refused(vec![-0.5]),
            (
                ErrorCode::BadShape,
                "experience: `logp` has 1 values, expected 2 for 2 steps in 1 runs".into()
            )
        );
        assert_eq!(refused(vec![-0.5, f32::NAN]).0, ErrorCode::NonFinite);
        assert_eq!(
            refused(vec![-0.5, f32::NAN]).1,
            "experience: `logp`[1] is NaN"
        );
        assert_eq!(
            refused(vec![0.5, -0.1]).1,
            "experience: `logp`[0] = 0.5 is above 0, not the log of a probability"
        );
        // A recurrent state per run, of the core's size.
        let with_states = |states: Vec<f32>| {
            let mut e = batch(vec![]);
            std::sync::Arc::make_mut(&mut e.steps).states = states;
            check_experience(&e, &shapes, 1)
        };
        assert!(with_states(vec![0.5, -0.5, 0.0]).is_ok());
        assert_eq!(
            with_states(vec![0.5]).unwrap_err().1,
            "experience: `states` has 1 values, expected 3 for 2 steps in 1 runs"
        );
        assert_eq!(
            with_states(vec![0.5, f32::INFINITY, 0.0]).unwrap_err().0,
            ErrorCode::NonFinite
        );
        // A continuous action's density may exceed 1.
        let boxed = Shapes {
            action_space: Space::Box {
                low: vec![-1.0],
                high: vec![1.0],
            },
            ..shapes.clone()
        };
        assert!(check_experience(&batch(vec![0.5, 1.5]), &boxed, 1).is_ok());
    }
}
