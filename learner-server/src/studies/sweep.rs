//! Sweeps: a base run config, parameters by key path (a list of values,
//! or a range cut into `count` points, `log` for log spacing), seeds per
//! point, and at most `max_concurrent` trials at a time. Trial `n` is an
//! ordinary run named `<sweep id>-<n>` writing under the sweep's root,
//! `<base output_dir>/<sweep id>/<n>/` (the root moves to a sibling
//! `<sweep id>-2` when an earlier state directory's sweep of the same id
//! wrote there); `sweep.csv` beside those folders and
//! `GET /v1/sweeps/{id}` give one row per trial.

use super::Studies;
use super::space::{Params, grid};
use super::store::{StudyDir, StudyState, claim_root, root_of};
use crate::hub::StartError;
use rlfleet_shared::config::RunConfig;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// The most trials one sweep may have.
pub const MAX_TRIALS: usize = 10_000;

/// A sweep, as submitted (`POST /v1/sweeps`, `learner-server sweep`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SweepSpec {
    /// Names the sweep (its id is `<name>-<n>`).
    #[schema(min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9._-]+$")]
    pub name: String,
    /// The run config every trial starts from (a file path in a TOML spec
    /// given to the command line).
    pub base: RunConfig,
    /// Parameters by config key path (`dqn.lr`): a list of values, or
    /// `{ min, max, count, log }`. The trials are every combination.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub params: Params,
    /// Each point runs once per seed (default: the base config's seed).
    #[serde(default)]
    pub seeds: Vec<u64>,
    /// Trials active or queued at once.
    #[serde(default = "four")]
    #[schema(minimum = 1, maximum = 1024)]
    pub max_concurrent: u32,
}

fn four() -> u32 {
    4
}

/// One trial: its point, seed and config.
#[derive(Debug, Clone)]
pub struct Trial {
    pub number: usize,
    pub seed: u64,
    pub params: Vec<(String, Value)>,
    pub cfg: RunConfig,
}

impl SweepSpec {
    /// Every trial of sweep `id` writing under `root` (points × seeds),
    /// each config validated; the error names the point.
    pub fn trials(&self, root: &Path, id: &str) -> Result<Vec<Trial>, String> {
        check_name(&self.name)?;
        if !(1..=1024).contains(&self.max_concurrent) {
            return Err("`max_concurrent` must be in 1..=1024".into());
        }
        for (key, space) in &self.params {
            space.check(key, true)?;
        }
        let points = grid(&self.params);
        let seeds = if self.seeds.is_empty() {
            vec![self.base.seed]
        } else {
            self.seeds.clone()
        };
        if points.len().saturating_mul(seeds.len()) > MAX_TRIALS {
            return Err(format!(
                "{} points × {} seeds is more than {MAX_TRIALS} trials",
                points.len(),
                seeds.len()
            ));
        }
        let mut trials = Vec::new();
        for point in &points {
            for &seed in &seeds {
                let number = trials.len() + 1;
                let mut values = point.clone();
                values.push(("seed".into(), Value::from(seed)));
                let mut cfg = self.base.with_values(&values).map_err(|e| e.to_string())?;
                self.place(&mut cfg, root, id, number);
                trials.push(Trial {
                    number,
                    seed,
                    params: point.clone(),
                    cfg,
                });
            }
        }
        Ok(trials)
    }
}

impl SweepSpec {
    /// Names trial `number` of sweep `id` and puts its output under the
    /// sweep's `root` (name and folder are all that differ between ids).
    fn place(&self, cfg: &mut RunConfig, root: &Path, id: &str, number: usize) {
        cfg.name = format!("{id}-{number}");
        cfg.output_dir = root.join(number.to_string());
    }
}

/// Errors unless `name` can name a study (and its runs).
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "name `{name}`: 1 to 64 of A-Z, a-z, 0-9, `.`, `_`, `-`"
        ))
    }
}

/// `study.json` of a sweep.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SweepRecord {
    pub spec: SweepSpec,
    pub state: StudyState,
    /// Where its trials write (absent in older records:
    /// `<base output_dir>/<id>`).
    #[serde(default)]
    pub root: Option<PathBuf>,
}

impl SweepRecord {
    pub fn root(&self, id: &str) -> PathBuf {
        root_of(&self.root, &self.spec.base.output_dir, id)
    }
}

/// One trial's row of `sweep.csv` and `GET /v1/sweeps/{id}`.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct TrialRow {
    pub trial: usize,
    /// Its run (once started).
    pub run_id: Option<String>,
    pub seed: u64,
    /// The point's values, by key path.
    #[schema(value_type = Object)]
    pub params: BTreeMap<String, Value>,
    /// `pending`, or its run's state (`queued`, `running`, `stopping`,
    /// `finished`, `failed`, `stopped`).
    pub state: String,
    pub env_steps: Option<u64>,
    pub wall_secs: Option<f64>,
    /// Best screening evaluation.
    pub best_eval_return: Option<f64>,
    /// Best confirming evaluation (`eval.confirm_episodes` episodes).
    pub best_confirmed_eval_return: Option<f64>,
    pub target_reached: bool,
    /// Wall seconds from its start to its confirmed target.
    pub wall_secs_to_target: Option<f64>,
    /// Env steps at its confirmed target.
    pub env_steps_to_target: Option<u64>,
}

/// A sweep and where it is (`GET /v1/sweeps/{id}`).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct SweepView {
    pub id: String,
    pub name: String,
    pub state: StudyState,
    pub max_concurrent: u32,
    /// The parameters' key paths (the columns of `sweep.csv` after `seed`).
    pub params: Vec<String>,
    pub trials: Vec<TrialRow>,
    /// Where `sweep.csv` is written.
    pub csv: String,
}

/// A sweep the daemon holds.
#[derive(Debug)]
pub struct Sweep {
    pub(crate) dir: StudyDir,
    pub(crate) spec: SweepSpec,
    /// Where its trials and `sweep.csv` are.
    pub(crate) root: PathBuf,
    pub(crate) trials: Vec<Trial>,
    pub(crate) state: Mutex<StudyState>,
    pub(crate) rows: Mutex<Vec<TrialRow>>,
    pub(crate) cancel: CancellationToken,
}

impl Sweep {
    pub fn id(&self) -> &str {
        &self.dir.id
    }

    pub(crate) fn csv_path(&self) -> PathBuf {
        self.root.join("sweep.csv")
    }

    pub fn view(&self) -> SweepView {
        SweepView {
            id: self.id().to_string(),
            name: self.spec.name.clone(),
            state: *self.state.lock().expect("state lock"),
            max_concurrent: self.spec.max_concurrent,
            params: self.spec.params.keys().cloned().collect(),
            trials: self.rows.lock().expect("rows lock").clone(),
            csv: self.csv_path().display().to_string(),
        }
    }

    pub(crate) fn record(&self) -> SweepRecord {
        SweepRecord {
            spec: self.spec.clone(),
            state: *self.state.lock().expect("state lock"),
            root: Some(self.root.clone()),
        }
    }
}

impl Studies {
    /// Records and starts a sweep; returns its id.
    pub fn start_sweep(self: &Arc<Self>, spec: SweepSpec) -> Result<String, StartError> {
        let state = self
            .hub
            .state
            .as_ref()
            .ok_or_else(|| StartError::State("sweeps need a state directory".into()))?;
        if self.hub.shutdown().is_cancelled() {
            return Err(StartError::ShuttingDown);
        }
        // Checked before anything is written: a bad spec leaves no trace.
        let mut trials = spec
            .trials(&spec.base.output_dir, "x")
            .map_err(StartError::Invalid)?;
        for t in &trials {
            self.hub.device_mb(&t.cfg)?;
        }
        let dir = StudyDir::create(state.root(), "sweeps", &spec.name)
            .map_err(|e| StartError::State(format!("{e:#}")))?;
        let root = claim_root(&spec.base.output_dir, &dir.id)
            .map_err(|e| StartError::State(format!("{e:#}")))?;
        for t in &mut trials {
            spec.place(&mut t.cfg, &root, &dir.id, t.number);
        }
        let record = SweepRecord {
            spec,
            state: StudyState::Active,
            root: Some(root),
        };
        dir.write(&record)
            .map_err(|e| StartError::State(format!("cannot record the sweep: {e}")))?;
        let id = dir.id.clone();
        self.hold_sweep(dir, record, trials);
        Ok(id)
    }

    /// Takes back the sweeps recorded as active. Returns their ids.
    pub(crate) fn resume_sweeps(self: &Arc<Self>) -> Vec<String> {
        let Some(state) = self.hub.state.as_ref() else {
            return Vec::new();
        };
        let mut ids = Vec::new();
        for dir in StudyDir::list(state.root(), "sweeps") {
            let record = match dir.read::<SweepRecord>() {
                Ok(r) if r.state == StudyState::Active => r,
                Ok(_) => continue,
                Err(e) => {
                    tracing::error!(sweep = %dir.id, "cannot take the sweep back: {e:#}");
                    continue;
                }
            };
            match record.spec.trials(&record.root(&dir.id), &dir.id) {
                Ok(trials) => {
                    ids.push(dir.id.clone());
                    self.hold_sweep(dir, record, trials);
                }
                Err(e) => tracing::error!(sweep = %dir.id, "cannot take the sweep back: {e}"),
            }
        }
        ids
    }

    fn hold_sweep(self: &Arc<Self>, dir: StudyDir, record: SweepRecord, trials: Vec<Trial>) {
        let sweep = Arc::new(Sweep {
            root: record.root(&dir.id),
            dir,
            spec: record.spec,
            trials,
            state: Mutex::new(record.state),
            rows: Mutex::default(),
            cancel: self.hub.shutdown().child_token(),
        });
        // Pending until its task's first look (a GET at once shows them).
        self.first_rows(&sweep);
        self.sweeps.lock().expect("sweeps lock").push(sweep.clone());
        tracing::info!(sweep = %sweep.id(), trials = sweep.trials.len(), "sweep started");
        let hub = self.clone();
        tokio::spawn(async move { hub.drive_sweep(sweep).await });
    }

    /// Every sweep this daemon holds, oldest first.
    pub fn list_sweeps(&self) -> Vec<SweepView> {
        let sweeps = self.sweeps.lock().expect("sweeps lock");
        sweeps.iter().map(|s| s.view()).collect()
    }

    pub fn sweep(&self, id: &str) -> Option<Arc<Sweep>> {
        let sweeps = self.sweeps.lock().expect("sweeps lock");
        sweeps.iter().find(|s| s.id() == id).cloned()
    }

    /// Stops a sweep: no trial starts any more, its active and queued
    /// trials stop (checkpointing). False if there is no such sweep.
    pub fn stop_sweep(self: &Arc<Self>, id: &str) -> bool {
        let Some(sweep) = self.sweep(id) else {
            return false;
        };
        {
            let mut state = sweep.state.lock().expect("state lock");
            if *state == StudyState::Active {
                *state = StudyState::Stopped;
            }
        }
        if let Err(e) = sweep.dir.write(&sweep.record()) {
            tracing::error!(sweep = %id, "cannot record the sweep's stop: {e}");
        }
        sweep.cancel.cancel();
        let runs = super::RunsByName::now(&self.hub);
        for t in &sweep.trials {
            if let super::Look::Live(s) = runs.look(&t.cfg.name) {
                self.hub.stop_run(&s.id);
            }
        }
        true
    }
}
