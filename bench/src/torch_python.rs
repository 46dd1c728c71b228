//! PyTorch from Python as a benchmark baseline: finds a Python that imports
//! torch and runs `bench/python/dqn_step.py`, `cnn_step.py`,
//! `r2d2_step.py` or a reference (`reference.rs`) in it as a subprocess.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

/// The DQN update in PyTorch-Python (embedded, so the bench runs from any
/// directory).
const DQN_STEP: &str = include_str!("../python/dqn_step.py");

/// The Python to use: `RLFLEET_TORCH_PYTHON`, else the venv
/// `scripts/torch-venv.sh` makes, else none.
fn python() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("RLFLEET_TORCH_PYTHON") {
        return Ok(PathBuf::from(p));
    }
    let cache = std::env::var_os("RLFLEET_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/rlfleet")))
        .ok_or("neither RLFLEET_CACHE nor HOME is set")?;
    let venv = cache.join("venv-torch-2.11.0/bin/python");
    if venv.exists() {
        Ok(venv)
    } else {
        Err(format!(
            "no Python with torch: run scripts/torch-venv.sh (makes {}) or set RLFLEET_TORCH_PYTHON",
            venv.display()
        ))
    }
}

/// The Nature-CNN update and inference in PyTorch-Python (embedded too).
const CNN_STEP: &str = include_str!("../python/cnn_step.py");

/// Runs `script` with `args` in the torch Python; its stdout.
fn run(script: &str, args: &[String]) -> Result<String, String> {
    let python = python()?;
    let out = Command::new(&python)
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .map_err(|e| format!("{}: {e}", python.display()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().last().unwrap_or("no output");
        return Err(format!("{} failed: {last}", python.display()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Parses each line of `out` as JSON.
fn lines<T: serde::de::DeserializeOwned>(out: &str) -> Result<Vec<T>, String> {
    out.lines()
        .map(|l| serde_json::from_str(l).map_err(|e| format!("unexpected line {l:?}: {e}")))
        .collect()
}

/// Steps per second of the PyTorch-Python DQN update at each batch size.
pub fn rates(secs: f64, batches: &[u32]) -> Result<BTreeMap<u32, f64>, String> {
    let mut args = vec![secs.to_string()];
    args.extend(batches.iter().map(|b| b.to_string()));
    #[derive(serde::Deserialize)]
    struct Line {
        batch: u32,
        steps_per_sec: f64,
    }
    Ok(lines::<Line>(&run(DQN_STEP, &args)?)?
        .into_iter()
        .map(|r| (r.batch, r.steps_per_sec))
        .collect())
}

/// The Nature-CNN rates in PyTorch-Python on `threads` threads: per
/// `("update" | "infer", batch)`, DQN updates per second or observations
/// answered per second.
pub fn cnn_rates(
    secs: f64,
    threads: usize,
    batches: &[u32],
) -> Result<BTreeMap<(String, u32), f64>, String> {
    let mut args = vec![secs.to_string(), threads.to_string()];
    args.extend(batches.iter().map(|b| b.to_string()));
    #[derive(serde::Deserialize)]
    struct Line {
        what: String,
        batch: u32,
        per_sec: f64,
    }
    Ok(lines::<Line>(&run(CNN_STEP, &args)?)?
        .into_iter()
        .map(|r| ((r.what, r.batch), r.per_sec))
        .collect())
}

/// The R2D2 sequence update in PyTorch-Python (embedded too).
const R2D2_STEP: &str = include_str!("../python/r2d2_step.py");

/// Sequence updates per second of the PyTorch-Python R2D2 step for the
/// network and batch `shape`: obs, hidden, core, actions, batch, unroll,
/// burn-in.
pub fn r2d2_rate(secs: f64, shape: [u32; 7]) -> Result<f64, String> {
    let mut args = vec![secs.to_string()];
    args.extend(shape.iter().map(|v| v.to_string()));
    #[derive(serde::Deserialize)]
    struct Line {
        steps_per_sec: f64,
    }
    lines::<Line>(&run(R2D2_STEP, &args)?)?
        .first()
        .map(|l| l.steps_per_sec)
        .ok_or_else(|| "no result line".into())
}

/// The lines a script that prints one JSON object per line prints for
/// `args`, parsed (the `reference` benchmark's episodes).
pub fn json_lines<T: serde::de::DeserializeOwned>(
    script: &str,
    args: &[String],
) -> Result<Vec<T>, String> {
    lines(&run(script, args)?)
}
