//! `learner-server export RUN_DIR --onnx FILE`: a run's trained policy as a
//! standalone ONNX model (weights embedded) that any ONNX runtime loads.

use anyhow::Context;
use rlfleet_checkpoint::Checkpoint;
use rlfleet_shared::config::RunConfig;
use rlfleet_shared::onnx::PolicyGraph;
use std::path::Path;

/// What was exported.
#[derive(Debug)]
pub struct Exported {
    /// The model's head output (`q`, `logits` or `action`).
    pub output: &'static str,
    pub parameters: usize,
    /// The weights' policy version.
    pub version: u64,
    /// The evaluation those weights scored (the best one), if they were
    /// the best evaluated weights.
    pub eval_mean: Option<f64>,
    pub bytes: usize,
}

/// `learner-server export`: exports and says what it wrote.
pub fn command(run_dir: &Path, out: &Path, latest: bool) -> anyhow::Result<()> {
    let e = export_onnx(run_dir, out, latest)?;
    let eval = e
        .eval_mean
        .map(|m| format!(", evaluation mean {m:.1}"))
        .unwrap_or_default();
    println!(
        "wrote {}: output `{}`, {} parameters of policy version {}{eval}, {} bytes",
        out.display(),
        e.output,
        e.parameters,
        e.version,
        e.bytes
    );
    Ok(())
}

/// Writes the run's best evaluated weights (or with `latest`, the weights
/// at its last checkpoint) as an ONNX model to `out`.
pub fn export_onnx(run_dir: &Path, out: &Path, latest: bool) -> anyhow::Result<Exported> {
    let cfg = RunConfig::load(&run_dir.join("config.resolved.toml"))?;
    let spec = cfg.env_source().spec()?;
    let ck = Checkpoint::load(&run_dir.join("checkpoint.safetensors"))?;
    let (weights, version, eval_mean) = match (&ck.best, latest) {
        (Some(best), false) => (
            best.weights.data.clone(),
            best.weights.version,
            Some(best.mean_return),
        ),
        _ => (
            ck.agent_state.tensor("online")?.data.clone(),
            ck.agent_state.version,
            None,
        ),
    };
    let graph = PolicyGraph::for_run(&cfg, &spec);
    anyhow::ensure!(
        weights.len() == graph.numel(),
        "the checkpoint's policy has {} values, the config's network has {}",
        weights.len(),
        graph.numel()
    );
    let model = graph.model(Some(&weights));
    std::fs::write(out, &model).with_context(|| format!("cannot write {}", out.display()))?;
    Ok(Exported {
        output: graph.head.output(),
        parameters: weights.len(),
        version,
        eval_mean,
        bytes: model.len(),
    })
}
