//! What an `Observations` request must be before the front acts on it:
//! bytes widened to f32 where the run's observations are bytes, and its
//! shapes and values checked, naming the first problem.

use rlfleet_shared::wire::{ErrorCode, Observations, flags};

/// A uint8 run's observations as f32 (its requests carry `obs_u8` only);
/// a run of f32 observations takes no bytes.
pub(super) fn widen(
    o: &mut Observations,
    n: usize,
    od: usize,
    obs_u8: bool,
) -> Result<(), (ErrorCode, String)> {
    let (f32s, bytes) = if obs_u8 { (0, n * od) } else { (n * od, 0) };
    for (what, got, want) in [
        ("obs_u8", o.obs_u8.len(), bytes),
        ("obs", o.obs.len(), f32s),
    ] {
        if got != want {
            return Err((
                ErrorCode::BadShape,
                format!(
                    "observations: `{what}` has {got} values, expected {want} ({n} envs, obs_dim {od})"
                ),
            ));
        }
    }
    if obs_u8 {
        o.obs = o.obs_u8.drain(..).map(f32::from).collect();
    }
    Ok(())
}

/// Shapes and values of one request from an actor with `n` envs.
pub(super) fn check_observations(
    o: &Observations,
    n: usize,
    od: usize,
) -> Result<(), (ErrorCode, String)> {
    for (what, got, want) in [
        ("obs", o.obs.len(), n * od),
        ("rewards", o.rewards.len(), n),
        ("flags", o.flags.len(), n),
    ] {
        if got != want {
            return Err((
                ErrorCode::BadShape,
                format!(
                    "observations: `{what}` has {got} values, expected {want} ({n} envs, obs_dim {od})"
                ),
            ));
        }
    }
    if let Some(f) = o.faults.iter().find(|f| f.env as usize >= n) {
        return Err((
            ErrorCode::BadShape,
            format!(
                "observations: a fault names env {}, the actor runs {n}",
                f.env
            ),
        ));
    }
    for i in 0..n {
        if o.flags[i] & flags::IDLE != 0 {
            continue;
        }
        let row = &o.obs[i * od..(i + 1) * od];
        if let Some(j) = row.iter().position(|x| !x.is_finite()) {
            return Err((
                ErrorCode::NonFinite,
                format!("observations: env {i} obs[{j}] is {}", row[j]),
            ));
        }
        if !o.rewards[i].is_finite() {
            return Err((
                ErrorCode::NonFinite,
                format!("observations: env {i} reward is {}", o.rewards[i]),
            ));
        }
    }
    Ok(())
}
