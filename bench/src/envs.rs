//! `rlfleet-bench envs`: environment steps/s of each built-in env, against
//! the counting env through the same trait (the cost of the interface
//! itself).

use crate::measure::{rate, write_json};
use rlfleet_shared::env::{self, Action, ENV_IDS};
use serde::Serialize;

#[derive(Serialize)]
struct EnvRow {
    env: String,
    steps_per_sec: f64,
    baseline_steps_per_sec: f64,
    ratio: f64,
}

fn env_rate(id: &str, secs: f64) -> f64 {
    let mut e = env::make(id).unwrap();
    let spec = e.spec().clone();
    let mut obs = vec![0f32; spec.obs_dim()];
    e.reset(Some(0), &mut obs);
    let cont = [0.3f32];
    let mut i = 0usize;
    rate(secs, || {
        i += 1;
        let a = match spec.action_space.n() {
            Some(n) => Action::Discrete(i % n),
            None => Action::Continuous(&cont),
        };
        if e.step(a, &mut obs).done() {
            e.reset(None, &mut obs);
        }
    })
}

pub fn bench(secs: f64, out: &std::path::Path) -> anyhow::Result<()> {
    let base = env_rate("Counting-v0", secs);
    let mut rows = vec![];
    for id in ENV_IDS.iter().filter(|id| **id != "Counting-v0") {
        let r = env_rate(id, secs);
        println!(
            "{id:<26} {:>12.0} steps/s; counting env {base:>12.0}; ratio {:.2}",
            r,
            r / base
        );
        rows.push(EnvRow {
            env: id.to_string(),
            steps_per_sec: r,
            baseline_steps_per_sec: base,
            ratio: r / base,
        });
    }
    write_json(out, "env_steps", &rows)
}
