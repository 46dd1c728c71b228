//! [`run_recorded`]: `learner-server run` of an in-process (`single`)
//! config, recorded in the state directory like every daemon run.

use super::{RunOptions, RunSummary, StopReason};
use crate::state::{RecordState, RunRecord, Start, StateDir};
use rlfleet_shared::config::RunConfig;
use std::path::Path;

/// Runs an in-process (`single`) config as `learner-server run` does:
/// recorded in `state_dir` (resuming the newest unfinished run of its name
/// with [`Start::ResumeLatest`]), its record's state set when it ends.
pub fn run_recorded(
    cfg: &RunConfig,
    mut opts: RunOptions,
    start: Start,
    state_dir: &Path,
    cancel: tokio_util::sync::CancellationToken,
) -> anyhow::Result<RunSummary> {
    let state = StateDir::open(state_dir)?;
    let mut cfg = cfg.clone();
    let record = match start.settle(state_dir, &cfg.name)? {
        Start::New | Start::Continue => {
            super::settle_output_dir(&mut cfg, &opts)?;
            state.create_run(&cfg)?
        }
        Start::ResumeLatest => {
            let r = state.resumable(&cfg.name)?;
            r.resumed()?;
            opts.resume = r.latest_checkpoint();
            // Its results are where it wrote them.
            cfg.output_dir = r.config()?.output_dir;
            r
        }
    };
    let _lock = record.lock()?;
    opts.record = Some(record.clone());
    let result = super::run(&cfg, &opts, cancel);
    record_end(
        &record,
        result.as_ref().map_err(|e| format!("{e:#}")),
        false,
    );
    result
}

/// Sets a run's record to how the run ended: finished by a stop rule,
/// stopped on request, failed with its error — or, when the daemon's own
/// shutdown cancelled it (`interrupted`), still active, so that the next
/// daemon resumes it.
pub fn record_end(record: &RunRecord, result: Result<&RunSummary, String>, interrupted: bool) {
    let (state, reason) = match result {
        Ok(s) if s.reason == StopReason::Cancelled && interrupted => (RecordState::Active, None),
        Ok(s) if s.reason == StopReason::Cancelled => {
            (RecordState::Stopped, Some(s.reason.to_string()))
        }
        Ok(s) => (RecordState::Finished, Some(s.reason.to_string())),
        Err(e) => (RecordState::Failed, Some(e)),
    };
    record.set_state(state, reason);
}
