//! What an `Observations` request must be before the front acts on it:
//! its shapes and values checked, naming the first problem (a run of
//! uint8 observations takes them as bytes, in `obs_u8`, and no values).

use rlfleet_shared::wire::{ErrorCode, Observations, flags};

/// Shapes and values of one request from an actor with `n` envs
/// (`obs_u8`: the run's observations travel as bytes).
pub(super) fn check_observations(
    o: &Observations,
    n: usize,
    od: usize,
    obs_u8: bool,
) -> Result<(), (ErrorCode, String)> {
    let (values, bytes) = if obs_u8 { (0, n * od) } else { (n * od, 0) };
    for (what, got, want) in [
        ("obs_u8", o.obs_u8.len(), bytes),
        ("obs", o.obs.len(), values),
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
        let row = o.obs.get(i * od..(i + 1) * od).unwrap_or_default();
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
