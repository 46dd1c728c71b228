//! A sweep's task: every tick it finds each trial's run, starts pending
//! trials while fewer than `max_concurrent` are active or queued, brings
//! the rows up to date (`sweep.csv` rewritten when one changed) and marks
//! the sweep finished once every trial has ended.

use super::Studies;
use super::store::{StudyState, cell, write_csv};
use super::sweep::{Sweep, TrialRow};
use super::{Look, RunsByName, TICK};
use rlfleet_run::state::RecordState;
use rlfleet_run::vocab::RunStatus;
use rlfleet_run::workflows::RunOptions;
use std::path::Path;
use std::sync::Arc;

impl Studies {
    pub(super) async fn drive_sweep(self: Arc<Self>, sweep: Arc<Sweep>) {
        loop {
            let done = self.sweep_tick(&sweep);
            if done || sweep.cancel.is_cancelled() {
                break;
            }
            tokio::select! {
                _ = tokio::time::sleep(TICK) => {}
                _ = sweep.cancel.cancelled() => {}
            }
        }
        // The rows as they stand when the task ends (a stop or shutdown).
        let runs = RunsByName::now(&self.hub);
        let old = sweep.rows.lock().expect("rows lock").clone();
        self.sweep_rows(&sweep, &runs, &old, None);
    }

    /// Every trial's row as pending.
    pub(super) fn first_rows(&self, sweep: &Sweep) {
        *sweep.rows.lock().expect("rows lock") = sweep
            .trials
            .iter()
            .map(|t| trial_row(t, &Look::Unstarted))
            .collect();
    }

    /// One look at the sweep; true once it has finished.
    fn sweep_tick(self: &Arc<Self>, sweep: &Sweep) -> bool {
        let runs = RunsByName::now(&self.hub);
        let old = sweep.rows.lock().expect("rows lock").clone();
        // An ended trial's row no longer changes: it is not looked at.
        let looks: Vec<Option<Look>> = sweep
            .trials
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let ended = old.get(i).is_some_and(|r| is_ended(&r.state));
                (!ended).then(|| runs.look(&t.cfg.name))
            })
            .collect();
        let mut active = looks
            .iter()
            .filter(|l| matches!(l, Some(Look::Live(_))))
            .count();
        // Trials start under the state lock, and only while the sweep is
        // active: a stop, which takes the lock first, then finds every
        // trial started here.
        let state = sweep.state.lock().expect("state lock");
        for (trial, look) in sweep.trials.iter().zip(&looks) {
            if *state != StudyState::Active
                || active >= sweep.spec.max_concurrent as usize
                || self.hub.shutdown().is_cancelled()
            {
                break;
            }
            if matches!(look, Some(Look::Unstarted)) {
                match self.hub.start_run(trial.cfg.clone(), RunOptions::default()) {
                    Ok(id) => {
                        tracing::info!(sweep = %sweep.id(), trial = trial.number, run = %id, "trial started");
                        active += 1;
                    }
                    Err(e) => {
                        tracing::error!(sweep = %sweep.id(), trial = trial.number, "cannot start the trial: {e}");
                        return false;
                    }
                }
            }
        }
        drop(state);
        let rows = self.sweep_rows(sweep, &runs, &old, Some(&looks));
        let finished = rows.iter().all(|r| is_ended(&r.state));
        // A sweep stopped meanwhile stays stopped.
        let ends_now = finished && {
            let mut state = sweep.state.lock().expect("state lock");
            let active = *state == StudyState::Active;
            if active {
                *state = StudyState::Finished;
            }
            active
        };
        if ends_now {
            if let Err(e) = sweep.dir.write(&sweep.record()) {
                tracing::error!(sweep = %sweep.id(), "cannot record the sweep's end: {e}");
            }
            tracing::info!(sweep = %sweep.id(), csv = %sweep.csv_path().display(), "sweep finished");
        }
        finished
    }

    /// Brings the sweep's rows (`old`) up to date, with this tick's
    /// `looks` when given; rewrites `sweep.csv` when one changed.
    fn sweep_rows(
        &self,
        sweep: &Sweep,
        runs: &RunsByName,
        old: &[TrialRow],
        looks: Option<&[Option<Look>]>,
    ) -> Vec<TrialRow> {
        let rows: Vec<TrialRow> = sweep
            .trials
            .iter()
            .enumerate()
            .map(
                |(i, t)| match (old.get(i), looks.and_then(|l| l[i].as_ref())) {
                    // An ended trial's row no longer changes.
                    (Some(r), _) if is_ended(&r.state) => r.clone(),
                    (_, Some(look)) => trial_row(t, look),
                    _ => trial_row(t, &runs.look(&t.cfg.name)),
                },
            )
            .collect();
        if rows != old {
            let keys: Vec<String> = sweep.spec.params.keys().cloned().collect();
            if let Err(e) = write_sweep_csv(&sweep.csv_path(), &keys, &rows) {
                tracing::warn!(sweep = %sweep.id(), "cannot write sweep.csv: {e}");
            }
            *sweep.rows.lock().expect("rows lock") = rows.clone();
        }
        rows
    }
}

fn is_ended(state: &str) -> bool {
    matches!(state, "finished" | "failed" | "stopped")
}

/// A trial's row from where its run is and its output files.
fn trial_row(t: &super::sweep::Trial, look: &Look) -> TrialRow {
    let mut row = TrialRow {
        trial: t.number,
        run_id: look.run_id().map(str::to_string),
        seed: t.seed,
        params: t.params.iter().cloned().collect(),
        state: "pending".into(),
        env_steps: None,
        wall_secs: None,
        best_eval_return: None,
        best_confirmed_eval_return: None,
        target_reached: false,
        wall_secs_to_target: None,
        env_steps_to_target: None,
    };
    let from_status = |row: &mut TrialRow, s: &RunStatus| {
        row.env_steps = Some(s.env_steps);
        row.wall_secs = Some(s.wall_secs);
        row.best_eval_return = s.best_eval_return;
        row.target_reached = s.target_reached;
    };
    match look {
        Look::Unstarted => return row,
        Look::Live(s) => {
            row.state = super::state_name(s.state);
            from_status(&mut row, s);
        }
        Look::Ended { state, status, .. } => {
            row.state = match state {
                RecordState::Finished => "finished",
                RecordState::Failed => "failed",
                _ => "stopped",
            }
            .into();
            match status {
                Some(s) => from_status(&mut row, s),
                None => from_summary(&mut row, &t.cfg.output_dir),
            }
        }
    }
    let evals = rlfleet_output::read_evals(&t.cfg.output_dir.join("evals.csv")).unwrap_or_default();
    row.best_confirmed_eval_return = evals
        .iter()
        .filter(|e| e.confirming)
        .map(|e| e.mean_return)
        .reduce(f64::max);
    if row.best_eval_return.is_none() {
        row.best_eval_return = evals.iter().map(|e| e.mean_return).reduce(f64::max);
    }
    if row.target_reached {
        let target = t.cfg.stop.target_eval_return;
        let hit = evals
            .iter()
            .find(|e| e.confirming && target.is_some_and(|g| e.mean_return >= g))
            .or_else(|| evals.iter().rev().find(|e| e.confirming));
        row.wall_secs_to_target = hit.map(|e| e.wall_secs).or(row.wall_secs);
        row.env_steps_to_target = hit.map(|e| e.env_steps).or(row.env_steps);
    }
    row
}

/// What an ended run's `summary.toml` says (a run ended before this
/// daemon started).
fn from_summary(row: &mut TrialRow, output_dir: &Path) {
    #[derive(serde::Deserialize)]
    struct Summary {
        env_steps: u64,
        wall_secs: f64,
        target_reached: bool,
        best_eval_return: f64,
    }
    let Ok(text) = std::fs::read_to_string(output_dir.join("summary.toml")) else {
        return;
    };
    if let Ok(s) = toml::from_str::<Summary>(&text) {
        row.env_steps = Some(s.env_steps);
        row.wall_secs = Some(s.wall_secs);
        row.target_reached = s.target_reached;
        row.best_eval_return = Some(s.best_eval_return).filter(|v| v.is_finite());
    }
}

/// `sweep.csv`: one row per trial.
fn write_sweep_csv(path: &Path, keys: &[String], rows: &[TrialRow]) -> std::io::Result<()> {
    let mut header: Vec<String> = ["trial", "run_id", "seed"].map(String::from).to_vec();
    header.extend(keys.iter().cloned());
    header.extend(
        [
            "state",
            "env_steps",
            "wall_secs",
            "best_eval_return",
            "best_confirmed_eval_return",
            "target_reached",
            "env_steps_to_target",
            "wall_secs_to_target",
        ]
        .map(String::from),
    );
    let lines: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut l = vec![
                r.trial.to_string(),
                r.run_id.clone().unwrap_or_default(),
                r.seed.to_string(),
            ];
            l.extend(
                keys.iter()
                    .map(|k| r.params.get(k).map(|v| v.to_string()).unwrap_or_default()),
            );
            l.extend([
                r.state.clone(),
                cell(r.env_steps),
                cell(r.wall_secs.map(|w| format!("{w:.3}"))),
                cell(r.best_eval_return),
                cell(r.best_confirmed_eval_return),
                r.target_reached.to_string(),
                cell(r.env_steps_to_target),
                cell(r.wall_secs_to_target.map(|w| format!("{w:.3}"))),
            ]);
            l
        })
        .collect();
    write_csv(path, &header, &lines)
}
