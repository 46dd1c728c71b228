//! Every run writes TensorBoard event files next to its CSVs: read back
//! with TensorBoard's own reader (Python `tensorboard`, in the test venv),
//! the episode and evaluation series equal `episodes.csv` and `evals.csv`
//! row for row, and the training scalars come every 1,000 env steps with
//! values that fit the run (the configured learning rate, an epsilon that
//! only falls, an entropy within a two-action policy's bounds).

use rlfleet_output::{EpisodeRecord, EvalRecord, read_episodes, read_evals};
use rlfleet_shared::config::RunConfig;
use rlfleet_tests::workspace_root;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// TensorBoard's `EventAccumulator` over a run's directory, every scalar
/// kept, as `{tag: [[step, value], ...]}`.
const READ_EVENTS: &str = r#"
import json, sys
from tensorboard.backend.event_processing import event_accumulator as ea
acc = ea.EventAccumulator(sys.argv[1], size_guidance={ea.SCALARS: 0}, purge_orphaned_data=False)
acc.Reload()
print(json.dumps({t: [[e.step, e.value] for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}))
"#;

type Series = BTreeMap<String, Vec<(u64, f64)>>;

pub(crate) fn read_board(dir: &Path) -> Series {
    let files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("events.out.tfevents.")
        })
        .collect();
    assert_eq!(
        files.len(),
        1,
        "one event file per session in {}",
        dir.display()
    );
    assert!(files[0].metadata().unwrap().len() > 0);
    serde_json::from_value(read_with_tensorboard(READ_EVENTS, dir)).unwrap()
}

/// The JSON a Python `script` prints reading the event files in `dir`
/// (it gets `dir` as its argument) with TensorBoard's own code.
pub(crate) fn read_with_tensorboard(script: &str, dir: &Path) -> serde_json::Value {
    let out = rlfleet_tests::output_within(
        Command::new(rlfleet_tests::reference_python())
            .args(["-c", script])
            .arg(dir),
        std::time::Duration::from_secs(120),
        "TensorBoard's event reader",
    );
    assert!(
        out.status.success(),
        "reading the events failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

pub(crate) fn series<'a>(b: &'a Series, tag: &str) -> &'a [(u64, f64)] {
    b.get(tag)
        .unwrap_or_else(|| panic!("no `{tag}` in the event file; tags: {:?}", b.keys()))
}

/// The values TensorBoard stores (f32) of `xs`.
fn as_f32(xs: impl Iterator<Item = (u64, f64)>) -> Vec<(u64, f64)> {
    xs.map(|(s, v)| (s, f64::from(v as f32))).collect()
}

/// Episode and evaluation series equal the CSVs; the training scalars
/// come once per 1,000 env steps crossed. Returns the env steps the
/// training scalars were written at.
fn check_against_csvs(
    board: &Series,
    episodes: &[EpisodeRecord],
    evals: &[EvalRecord],
) -> Vec<u64> {
    assert!(!episodes.is_empty());
    assert_eq!(
        series(board, "episode/return"),
        as_f32(episodes.iter().map(|e| (e.env_steps, e.ret))).as_slice()
    );
    assert_eq!(
        series(board, "episode/length"),
        as_f32(episodes.iter().map(|e| (e.env_steps, f64::from(e.length)))).as_slice()
    );
    for (tag, confirming) in [("eval", false), ("eval_confirm", true)] {
        let rows: Vec<_> = evals
            .iter()
            .filter(|e| e.confirming == confirming)
            .collect();
        assert!(!rows.is_empty(), "no {tag} rows in evals.csv");
        for (what, f) in [
            (
                "mean_return",
                (|e: &EvalRecord| e.mean_return) as fn(&EvalRecord) -> f64,
            ),
            ("min_return", |e| e.min_return),
            ("max_return", |e| e.max_return),
        ] {
            assert_eq!(
                series(board, &format!("{tag}/{what}")),
                as_f32(rows.iter().map(|e| (e.env_steps, f(e)))).as_slice(),
                "{tag}/{what}"
            );
        }
    }
    // One point per multiple of 1,000 the run's env steps crossed, written
    // by the batch that crossed it.
    let last = episodes.last().unwrap().env_steps;
    let steps: Vec<u64> = series(board, "replay/size").iter().map(|p| p.0).collect();
    let thousands: Vec<u64> = steps.iter().map(|s| s / 1000).collect();
    assert_eq!(thousands, (1..=thousands.len() as u64).collect::<Vec<_>>());
    assert!(
        steps.len() as u64 >= last / 1000,
        "{} points, {last} steps",
        steps.len()
    );
    for tag in [
        "perf/env_steps_per_sec",
        "perf/gradient_steps_per_sec",
        "train/gradient_steps",
        "train/learning_rate",
        "train/loss",
        "train/grad_norm",
    ] {
        let s = series(board, tag);
        assert!(s.iter().all(|p| p.1.is_finite()), "{tag}: {s:?}");
        if tag.starts_with("perf/") || tag == "train/gradient_steps" {
            assert_eq!(s.iter().map(|p| p.0).collect::<Vec<_>>(), steps, "{tag}");
        }
    }
    assert!(
        series(board, "perf/env_steps_per_sec")
            .iter()
            .all(|p| p.1 > 0.0)
    );
    // Gradient steps only grow, and the loss is there once there are any.
    let grads = series(board, "train/gradient_steps");
    assert!(grads.windows(2).all(|w| w[1].1 >= w[0].1));
    let trained = grads.iter().filter(|p| p.1 > 0.0).count();
    assert_eq!(series(board, "train/loss").len(), trained);
    assert!(trained > 0);
    steps
}

/// Runs a shipped config (with 4 actor processes when `embedded`) until
/// its first screening evaluation, every `period` env steps, passes a
/// target of 0 and a confirming one follows; checks the event file against
/// the CSVs. Returns the config, the scalars and where the training
/// scalars were written.
fn run_to_a_confirmed_target(
    file: &str,
    period: u64,
    embedded: bool,
) -> (RunConfig, Series, Vec<u64>) {
    let _heavy = rlfleet_tests::heavy();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = RunConfig::load(&workspace_root().join("config").join(file)).unwrap();
    cfg.output_dir = dir.path().join("out");
    cfg.stop.target_eval_return = Some(0.0);
    cfg.stop.max_env_steps = Some(20_000);
    cfg.eval.period_steps = period;
    cfg.eval.episodes = 5;
    cfg.eval.confirm_episodes = 100;
    let out = if embedded {
        rlfleet_tests::run_embedded(&cfg, dir.path(), &[])
    } else {
        rlfleet_tests::run_single(&cfg, dir.path())
    };
    assert!(out.success, "failed\n{}\n{}", out.stdout, out.stderr);
    let episodes = read_episodes(&cfg.output_dir.join("episodes.csv")).unwrap();
    let evals = read_evals(&cfg.output_dir.join("evals.csv")).unwrap();
    let board = read_board(&cfg.output_dir);
    let steps = check_against_csvs(&board, &episodes, &evals);
    (cfg, board, steps)
}

#[test]
fn dqn_async_over_quic_writes_tensorboard_scalars_that_match_its_csvs() {
    let (cfg, board, steps) = run_to_a_confirmed_target("cartpole-dqn-async.toml", 6000, true);
    assert!(steps.len() >= 6, "{steps:?}");
    // The config's rate, annealed linearly towards `lr_end` when
    // `lr_anneal_steps` is set: never above the start or below the end,
    // never rising.
    let lr = series(&board, "train/learning_rate");
    let (start, end) = (f64::from(cfg.dqn.lr as f32), cfg.dqn.lr_end);
    assert!(!lr.is_empty());
    assert!(
        lr.iter().all(|p| p.1 <= start && p.1 >= end * (1.0 - 1e-6))
            && lr.windows(2).all(|w| w[1].1 <= w[0].1),
        "{lr:?}"
    );
    if cfg.dqn.lr_anneal_steps == 0 {
        assert!(lr.iter().all(|p| p.1 == start), "{lr:?}");
    } else {
        assert!(lr.last().unwrap().1 < start, "{lr:?}");
    }
    let eps = series(&board, "train/epsilon");
    assert!(
        eps.windows(2).all(|w| w[1].1 <= w[0].1),
        "epsilon rises: {eps:?}"
    );
    assert!(eps.iter().all(|p| (0.0..=1.0).contains(&p.1)));
    for &(step, size) in series(&board, "replay/size") {
        assert!(size > 0.0 && size <= step as f64, "replay {size} at {step}");
    }
    // Batches from actors over QUIC: the learner's policy lag is measured.
    // Four actors feed one learner that trains on every batch, so a batch
    // arrives behind the versions the other actors' batches made: once
    // training runs, the mean lag is above 0.
    let lag = series(&board, "train/policy_lag");
    assert!(
        !lag.is_empty() && lag.iter().all(|p| p.1.is_finite()) && lag.iter().any(|p| p.1 > 0.0),
        "{lag:?}"
    );
}

#[test]
fn ppo_single_writes_its_entropy_and_learning_rate() {
    let (cfg, board, _) = run_to_a_confirmed_target("cartpole-ppo-single.toml", 4000, false);
    // A policy over CartPole's two actions: entropy in (0, ln 2].
    let entropy = series(&board, "train/entropy");
    assert!(!entropy.is_empty());
    for &(_, h) in entropy {
        assert!(h > 0.0 && h <= std::f64::consts::LN_2 + 1e-6, "entropy {h}");
    }
    let lr = series(&board, "train/learning_rate");
    assert!(
        lr.iter().all(|p| p.1 > 0.0 && p.1 <= cfg.ppo.lr + 1e-9),
        "{lr:?}"
    );
    // `single` trains in-process: no batches, no lag.
    assert!(!board.contains_key("train/policy_lag"));
}
