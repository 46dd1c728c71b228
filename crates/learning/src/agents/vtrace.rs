//! V-trace (Espeholt et al. 2018, "IMPALA", section 4.1): value targets and
//! policy-gradient advantages for an unroll acted by a behaviour policy μ
//! and learned by a target policy π, with the importance weights
//! π(a|x)/μ(a|x) clipped (ρ̄ in the targets and the gradient, c̄ in the
//! traces). Plain host arithmetic on one unroll (in f64), as seed_rl's
//! `vtrace.from_importance_weights` computes it.

/// What [`vtrace`] takes for clipping.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Clipping {
    /// ρ̄: clips the importance weights of the temporal differences and
    /// of the policy gradient.
    pub rho_bar: f32,
    /// c̄: clips the trace coefficients.
    pub c_bar: f32,
    /// λ: scales the trace coefficients.
    pub lambda: f32,
}

/// V-trace's results for one unroll, a value per step.
#[derive(Debug, Clone, PartialEq)]
pub struct VTrace {
    /// The value targets v_s.
    pub vs: Vec<f32>,
    /// min(ρ̄, ρ_s) (r_s + γ_s v_{s+1} − V(x_s)): what multiplies
    /// ∇ log π(a_s|x_s).
    pub pg_advantages: Vec<f32>,
    /// The importance weights ρ_s = π(a_s|x_s) / μ(a_s|x_s), unclipped.
    pub rhos: Vec<f32>,
}

/// V-trace over one unroll of `n` steps. `log_rhos[s]` is
/// log π(a_s|x_s) − log μ(a_s|x_s); `discounts[s]` multiplies what follows
/// step s (γ, or 0 where the episode terminated at s: an episode may end
/// inside the unroll); `values[s]` is V(x_s) and `bootstrap` the value of
/// the state after the last step.
pub fn vtrace(
    log_rhos: &[f32],
    discounts: &[f32],
    rewards: &[f32],
    values: &[f32],
    bootstrap: f32,
    clip: Clipping,
) -> VTrace {
    let n = log_rhos.len();
    assert!(
        discounts.len() == n && rewards.len() == n && values.len() == n,
        "one value per step"
    );
    // In f64 inside (a long unroll's sums stay exact to f32's precision).
    let f = |x: &[f32]| -> Vec<f64> { x.iter().map(|&v| f64::from(v)).collect() };
    let (d, r, v) = (f(discounts), f(rewards), f(values));
    let rhos: Vec<f64> = log_rhos.iter().map(|&l| f64::from(l).exp()).collect();
    let (rho_bar, c_bar) = (f64::from(clip.rho_bar), f64::from(clip.c_bar));
    let bootstrap = f64::from(bootstrap);
    let next = |s: usize, x: &[f64]| if s + 1 < n { x[s + 1] } else { bootstrap };
    // v_s − V(x_s) = δ_s + γ_s c_s (v_{s+1} − V(x_{s+1})), from the end.
    let mut vs = vec![0f64; n];
    let mut acc = 0f64;
    for s in (0..n).rev() {
        let rho = rhos[s].min(rho_bar);
        let c = f64::from(clip.lambda) * rhos[s].min(c_bar);
        let delta = rho * (r[s] + d[s] * next(s, &v) - v[s]);
        acc = delta + d[s] * c * acc;
        vs[s] = v[s] + acc;
    }
    let pg_advantages = (0..n)
        .map(|s| (rhos[s].min(rho_bar) * (r[s] + d[s] * next(s, &vs) - v[s])) as f32)
        .collect();
    VTrace {
        vs: vs.into_iter().map(|x| x as f32).collect(),
        pg_advantages,
        rhos: rhos.into_iter().map(|x| x as f32).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On-policy (every ρ = 1) with λ = c̄ = 1, the targets are the n-step
    /// discounted returns bootstrapped from the end, and the advantages
    /// r + γ v' − V.
    #[test]
    fn on_policy_targets_are_discounted_returns() {
        let (r, v) = ([1.0, 0.0, 2.0], [0.5, 0.25, 1.0]);
        let d = [0.9; 3];
        let clip = Clipping {
            rho_bar: 1.0,
            c_bar: 1.0,
            lambda: 1.0,
        };
        let out = vtrace(&[0.0; 3], &d, &r, &v, 4.0, clip);
        let g2 = 2.0 + 0.9 * 4.0;
        let g1 = 0.0 + 0.9 * g2;
        let g0 = 1.0 + 0.9 * g1;
        for (a, b) in out.vs.iter().zip([g0, g1, g2]) {
            assert!((a - b).abs() < 1e-5, "{a} against {b}");
        }
        let adv0 = 1.0 + 0.9 * g1 - 0.5;
        assert!((out.pg_advantages[0] - adv0).abs() < 1e-5);
        assert_eq!(out.rhos, vec![1.0; 3]);
    }
}
