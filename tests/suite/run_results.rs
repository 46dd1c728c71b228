//! A run never writes over another run's results: the same config run
//! twice leaves two result directories (the second `<output_dir>-2`, said
//! on stderr), each with its own CSVs and TensorBoard file; `--seed` and
//! `--set` land in the `config.resolved.toml` each run writes, and in its
//! TensorBoard file as text and hyperparameters (read back by
//! TensorBoard's own reader).

use rlfleet_shared::config::RunConfig;
use rlfleet_tests::{binary, output_within, workspace_root};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn run(config: &Path, state: &Path, extra: &[&str]) -> String {
    let mut cmd = Command::new(binary("learner-server"));
    cmd.args(["run", "--no-progress", "--state-dir"])
        .arg(state)
        .args(extra)
        .arg(config)
        .env("RUST_LOG", "warn");
    let out = output_within(&mut cmd, Duration::from_secs(120), "learner-server run");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    err
}

/// The config text and three hyperparameters of a run's event file, as
/// TensorBoard's `EventAccumulator` and hparams plugin data read them.
const READ_CONFIG: &str = r#"
import json, sys
from tensorboard.backend.event_processing import event_accumulator as ea
from tensorboard.plugins.hparams import plugin_data_pb2
acc = ea.EventAccumulator(sys.argv[1], size_guidance={ea.TENSORS: 0}, purge_orphaned_data=False)
acc.Reload()
text = acc.Tensors("config")[0].tensor_proto.string_val[0].decode()
meta = acc.SummaryMetadata("_hparams_/session_start_info").plugin_data
hp = plugin_data_pb2.HParamsPluginData.FromString(meta.content).session_start_info.hparams
print(json.dumps({"plugin": meta.plugin_name, "text": text, "seed": hp["seed"].number_value,
                  "lr": hp["dqn.lr"].number_value, "agent": hp["agent"].string_value}))
"#;

fn events_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_string_lossy().starts_with("events.out.tfevents.")
        })
        .count()
}

#[test]
fn a_config_run_twice_leaves_two_result_directories() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg =
        RunConfig::load(&workspace_root().join("config/cartpole-dqn-single.toml")).unwrap();
    cfg.output_dir = dir.path().join("out");
    cfg.stop.max_episodes = Some(3);
    cfg.stop.target_eval_return = None;
    let config = dir.path().join("cartpole.toml");
    std::fs::write(&config, cfg.to_resolved_toml()).unwrap();
    let state = dir.path().join("state");
    let sets = ["--seed", "3", "--set", "dqn.lr=0.001"];
    let first_err = run(&config, &state, &sets);
    assert!(!first_err.contains("holds another run"), "{first_err}");
    let second_err = run(&config, &state, &sets);
    let (first, second) = (dir.path().join("out"), dir.path().join("out-2"));
    assert!(
        second_err.contains("holds another run's results")
            && second_err.contains(&second.display().to_string()),
        "{second_err}"
    );
    for out in [&first, &second] {
        let resolved = std::fs::read_to_string(out.join("config.resolved.toml")).unwrap();
        let ran = RunConfig::from_toml(&resolved, "resolved").unwrap();
        assert_eq!((ran.seed, ran.dqn.lr), (3, 0.001), "{}", out.display());
        assert_eq!(ran.output_dir, *out);
        let eps = rlfleet_output::read_episodes(&out.join("episodes.csv")).unwrap();
        assert_eq!(eps.len(), 3, "{}", out.display());
        assert_eq!(
            events_files(out),
            1,
            "{}: one TensorBoard run",
            out.display()
        );
        let board = crate::tensorboard::read_with_tensorboard(READ_CONFIG, out);
        assert_eq!(board["plugin"], "hparams");
        assert_eq!(
            (&board["seed"], &board["lr"], &board["agent"]),
            (&3.0.into(), &0.001.into(), &"dqn".into())
        );
        assert_eq!(
            board["text"].as_str().unwrap(),
            format!("```toml\n{resolved}```")
        );
    }
    // A third run with `--overwrite` writes over the first directory.
    run(&config, &state, &["--overwrite"]);
    assert!(!dir.path().join("out-3").exists());
    let resolved = std::fs::read_to_string(first.join("config.resolved.toml")).unwrap();
    assert_eq!(RunConfig::from_toml(&resolved, "r").unwrap().seed, cfg.seed);
}
