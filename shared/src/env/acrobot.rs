//! Acrobot-v1, as Gymnasium 1.x computes it ("book" dynamics, one RK4 step of
//! 0.2 s, no torque noise, float32 initial state, 500-step limit).

use super::time_limit::{Dynamics, discrete};
use super::{Action, EnvRng, EnvSpec, ObsDtype, Space};
use std::borrow::Cow;
use std::f64::consts::PI;

const DT: f64 = 0.2;
const LINK_LENGTH_1: f64 = 1.0;
const LINK_MASS_1: f64 = 1.0;
const LINK_MASS_2: f64 = 1.0;
const LINK_COM_POS_1: f64 = 0.5;
const LINK_COM_POS_2: f64 = 0.5;
const LINK_MOI: f64 = 1.0;
const AVAIL_TORQUE: [f64; 3] = [-1.0, 0.0, 1.0];

fn max_vel_1() -> f64 {
    4.0 * PI
}

fn max_vel_2() -> f64 {
    9.0 * PI
}

/// Swing the tip of a two-link pendulum above a line.
#[derive(Debug, Clone)]
pub struct Acrobot {
    spec: EnvSpec,
    state: [f64; 4],
}

impl Default for Acrobot {
    fn default() -> Self {
        let high = vec![1.0, 1.0, 1.0, 1.0, max_vel_1() as f32, max_vel_2() as f32];
        Acrobot {
            spec: EnvSpec {
                id: Cow::Borrowed("Acrobot-v1"),
                observation_space: Space::Box {
                    low: high.iter().map(|h| -h).collect(),
                    high,
                },
                obs_shape: vec![6],
                obs_dtype: ObsDtype::F32,
                action_space: Space::Discrete { n: 3 },
                max_episode_steps: Some(500),
                reward_threshold: Some(-100.0),
            },
            state: [0.0; 4],
        }
    }
}

/// The time derivative of `[theta1, theta2, dtheta1, dtheta2, torque]`.
fn dsdt(s: &[f64; 5]) -> [f64; 5] {
    let (m1, m2, l1, lc1, lc2) = (
        LINK_MASS_1,
        LINK_MASS_2,
        LINK_LENGTH_1,
        LINK_COM_POS_1,
        LINK_COM_POS_2,
    );
    let (i1, i2) = (LINK_MOI, LINK_MOI);
    let g = 9.8;
    let a = s[4];
    let (theta1, theta2, dtheta1, dtheta2) = (s[0], s[1], s[2], s[3]);
    let d1 =
        m1 * (lc1 * lc1) + m2 * ((l1 * l1) + (lc2 * lc2) + 2.0 * l1 * lc2 * theta2.cos()) + i1 + i2;
    let d2 = m2 * ((lc2 * lc2) + l1 * lc2 * theta2.cos()) + i2;
    let phi2 = m2 * lc2 * g * (theta1 + theta2 - PI / 2.0).cos();
    let phi1 = -m2 * l1 * lc2 * (dtheta2 * dtheta2) * theta2.sin()
        - 2.0 * m2 * l1 * lc2 * dtheta2 * dtheta1 * theta2.sin()
        + (m1 * lc1 + m2 * l1) * g * (theta1 - PI / 2.0).cos()
        + phi2;
    let ddtheta2 = (a + d2 / d1 * phi1 - m2 * l1 * lc2 * (dtheta1 * dtheta1) * theta2.sin() - phi2)
        / (m2 * (lc2 * lc2) + i2 - (d2 * d2) / d1);
    let ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;
    [dtheta1, dtheta2, ddtheta1, ddtheta2, 0.0]
}

fn axpy(y: &[f64; 5], h: f64, k: &[f64; 5]) -> [f64; 5] {
    std::array::from_fn(|i| y[i] + h * k[i])
}

/// One classical Runge-Kutta step over `[0, DT]`, as Gymnasium's `rk4`.
fn rk4(y0: &[f64; 5]) -> [f64; 5] {
    let dt = DT - 0.0;
    let dt2 = dt / 2.0;
    let k1 = dsdt(y0);
    let k2 = dsdt(&axpy(y0, dt2, &k1));
    let k3 = dsdt(&axpy(y0, dt2, &k2));
    let k4 = dsdt(&axpy(y0, dt, &k3));
    std::array::from_fn(|i| y0[i] + dt / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]))
}

fn wrap(mut x: f64, m: f64, big_m: f64) -> f64 {
    let diff = big_m - m;
    while x > big_m {
        x -= diff;
    }
    while x < m {
        x += diff;
    }
    x
}

fn bound(x: f64, m: f64, big_m: f64) -> f64 {
    // Python's min(max(x, m), M).
    let lo = if m > x { m } else { x };
    if big_m < lo { big_m } else { lo }
}

impl Dynamics for Acrobot {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, rng: &mut EnvRng, _seed: Option<u64>) {
        for s in &mut self.state {
            *s = rng.uniform(-0.1, 0.1) as f32 as f64;
        }
    }

    fn step(&mut self, action: Action<'_>) -> (f64, bool) {
        let torque = AVAIL_TORQUE[discrete(action, 3, &self.spec.id)];
        let s = self.state;
        let ns = rk4(&[s[0], s[1], s[2], s[3], torque]);
        self.state = [
            wrap(ns[0], -PI, PI),
            wrap(ns[1], -PI, PI),
            bound(ns[2], -max_vel_1(), max_vel_1()),
            bound(ns[3], -max_vel_2(), max_vel_2()),
        ];
        let [t1, t2, ..] = self.state;
        let terminated = -t1.cos() - (t2 + t1).cos() > 1.0;
        (if terminated { 0.0 } else { -1.0 }, terminated)
    }

    fn observe(&self, obs: &mut [f32]) {
        let s = self.state;
        let vals = [s[0].cos(), s[0].sin(), s[1].cos(), s[1].sin(), s[2], s[3]];
        for (o, v) in obs.iter_mut().zip(vals) {
            *o = v as f32;
        }
    }

    fn state(&self) -> Vec<f64> {
        self.state.to_vec()
    }

    fn set_state(&mut self, state: &[f64]) {
        self.state.copy_from_slice(state);
    }
}
