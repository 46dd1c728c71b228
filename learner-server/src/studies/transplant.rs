//! A population's exploit on disk: the recipient's latest checkpoint is
//! rewritten with the donor's agent state (networks, optimizer moments,
//! counters) and replay, keeping the recipient's own counters, books and
//! best evaluation, so that it resumes as the donor's learner inside its
//! own run: its episodes, batches and files stay its own and no step is
//! counted twice.

use anyhow::Context;
use rlfleet_checkpoint::{Checkpoint, RunCounters};
use std::path::{Path, PathBuf};

/// Writes the donor's learner into the recipient's checkpoint at
/// `recipient` (in place, atomically). Run again with the same files it
/// writes the same tensors (the recipient's books are never the donor's).
pub fn transplant(donor: &Path, recipient: &Path) -> anyhow::Result<()> {
    let d = Checkpoint::load(donor)?;
    let mut r = Checkpoint::load(recipient)?;
    d.check_matches(donor, &r.env, &r.agent)?;
    // Weights versions only grow inside a run: actors compare them.
    let version = r.agent_state.version.max(d.agent_state.version) + 1;
    r.agent_state = d.agent_state;
    r.agent_state.version = version;
    r.replay = d.replay;
    r.save(recipient)?;
    Ok(())
}

/// A member's latest checkpoint and the counters it holds.
pub fn latest(record: &rlfleet_run::state::RunRecord) -> anyhow::Result<(PathBuf, RunCounters)> {
    let path = record
        .latest_checkpoint()
        .with_context(|| format!("run `{}` has no checkpoint", record.id))?;
    let counters = Checkpoint::load(&path)?.counters;
    Ok((path, counters))
}

/// Links `file` as `name` in `dir` (kept when the run rotates it away).
pub fn keep(file: &Path, dir: &Path, name: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let to = dir.join(name);
    let _ = std::fs::remove_file(&to);
    std::fs::hard_link(file, &to).or_else(|_| std::fs::copy(file, &to).map(|_| ()))
}
