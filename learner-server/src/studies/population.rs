//! Population-based training: `size` members of one base config, each
//! starting from hyperparameters drawn from `params`, train side by side
//! as ordinary runs named `<population id>-<n>`. Every
//! `interval_env_steps` (a generation) each member stops itself at that
//! env step (its `stop.max_env_steps`, checkpointing); once all have, the members are ranked by their metric, each of the
//! bottom `quantile` copies a top-`quantile` member's state (weights,
//! optimizer, replay: [`super::transplant`]) and perturbs its
//! hyperparameters, and all go on. Every exploit is a row of
//! `population.csv` and a count in `rlfleet_pbt_exploits_total`.

use super::Studies;
use super::space::Params;
use super::store::{StudyDir, StudyState, claim_root, root_of};
use super::sweep::check_name;
use crate::hub::StartError;
use rand::SeedableRng;
use rlfleet_shared::config::RunConfig;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// What ranks the members.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// The mean return of the member's latest evaluation.
    #[default]
    EvalMean,
    /// The mean return of its last 20 training episodes.
    TrainMean,
}

/// A population, as submitted (`POST /v1/populations`, `learner-server
/// pbt`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PopulationSpec {
    #[schema(min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9._-]+$")]
    pub name: String,
    /// The run config every member starts from; its stop rule ends each
    /// member (a file path in a TOML spec given to the command line).
    pub base: RunConfig,
    #[schema(minimum = 2, maximum = 256)]
    pub size: u32,
    /// Env steps of a generation: members stop, copy and perturb every
    /// this many of their env steps.
    #[schema(minimum = 1)]
    pub interval_env_steps: u64,
    /// Hyperparameters by config key path: a list of values or `{ min,
    /// max, log }`; each member starts from a draw, an exploit perturbs
    /// the donor's value (×0.8 or ×1.2, a list's neighbour).
    #[serde(default)]
    #[schema(value_type = Object)]
    pub params: Params,
    #[serde(default)]
    pub metric: Metric,
    /// The fraction of members at the bottom that copy one at the top.
    #[serde(default = "quarter")]
    #[schema(exclusive_minimum = 0.0, maximum = 0.5)]
    pub quantile: f64,
    /// The chance that an exploit draws a hyperparameter again instead of
    /// scaling the donor's.
    #[serde(default = "quarter")]
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub resample_probability: f64,
    /// Seeds the draws (members' seeds are the base seed + 0, 1, …).
    #[serde(default)]
    pub seed: u64,
}

fn quarter() -> f64 {
    0.25
}

/// One hyperparameter an exploit changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Change {
    pub key: String,
    #[schema(value_type = Object)]
    pub old: Value,
    #[schema(value_type = Object)]
    pub new: Value,
}

/// One exploit (and its explore): a row of `population.csv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Exploit {
    pub generation: u32,
    /// The member's env steps when it copied.
    pub env_steps: u64,
    pub member: u32,
    pub member_run: String,
    pub donor: u32,
    pub donor_run: String,
    pub member_metric: Option<f64>,
    pub donor_metric: Option<f64>,
    /// The donor's checkpoint it copied (kept in the population's folder
    /// as `exploits/g<generation>-m<member>-donor.safetensors`).
    pub donor_checkpoint: String,
    pub donor_env_steps: u64,
    pub changes: Vec<Change>,
}

/// A member's hyperparameters now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct MemberParams {
    pub params: BTreeMap<String, Value>,
}

/// `study.json` of a population.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct PopulationRecord {
    pub spec: PopulationSpec,
    pub state: StudyState,
    /// Generations completed.
    pub generation: u32,
    pub members: Vec<MemberParams>,
    pub lineage: Vec<Exploit>,
    /// Exploits decided and not yet all applied (redone after a crash).
    #[serde(default)]
    pub pending: Vec<Exploit>,
    /// Where its members write (absent in older records:
    /// `<base output_dir>/<id>`).
    #[serde(default)]
    pub root: Option<PathBuf>,
}

impl PopulationRecord {
    pub fn root(&self, id: &str) -> PathBuf {
        root_of(&self.root, &self.spec.base.output_dir, id)
    }
}

/// A member as `GET /v1/populations/{id}` shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct MemberView {
    pub member: u32,
    pub run_id: Option<String>,
    pub state: String,
    pub env_steps: Option<u64>,
    pub metric: Option<f64>,
    #[schema(value_type = Object)]
    pub params: BTreeMap<String, Value>,
}

/// A population and where it is.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct PopulationView {
    pub id: String,
    pub name: String,
    pub state: StudyState,
    /// Generations completed.
    pub generation: u32,
    pub interval_env_steps: u64,
    pub members: Vec<MemberView>,
    pub exploits: Vec<Exploit>,
    /// Where `population.csv` is written.
    pub csv: String,
}

/// A population the daemon holds.
#[derive(Debug)]
pub struct Population {
    pub(crate) dir: StudyDir,
    pub(crate) record: Mutex<PopulationRecord>,
    pub(crate) members: Mutex<Vec<MemberView>>,
    pub(crate) cancel: CancellationToken,
}

impl PopulationSpec {
    /// Errors unless the spec is usable.
    pub fn check(&self) -> Result<(), String> {
        check_name(&self.name)?;
        if !(2..=256).contains(&self.size) {
            return Err("`size` must be in 2..=256".into());
        }
        if self.interval_env_steps == 0 {
            return Err("`interval_env_steps` must be at least 1".into());
        }
        if !(self.quantile > 0.0 && self.quantile <= 0.5) {
            return Err("`quantile` must be in (0, 0.5]".into());
        }
        if !(0.0..=1.0).contains(&self.resample_probability) {
            return Err("`resample_probability` must be in [0, 1]".into());
        }
        for (key, space) in &self.params {
            space.check(key, false)?;
        }
        Ok(())
    }

    /// Member `n`'s (1-based) config with hyperparameters `params`,
    /// writing under `root`, for the generation that ends at env step
    /// `boundary` (where the member stops itself: `stop.max_env_steps`,
    /// within the base's).
    pub fn member_cfg(
        &self,
        root: &Path,
        id: &str,
        n: u32,
        params: &BTreeMap<String, Value>,
        boundary: u64,
    ) -> Result<RunConfig, String> {
        let mut values: Vec<(String, Value)> =
            params.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        values.push((
            "seed".into(),
            Value::from(self.base.seed + u64::from(n) - 1),
        ));
        let mut cfg = self.base.with_values(&values).map_err(|e| e.to_string())?;
        cfg.name = format!("{id}-{n}");
        cfg.output_dir = root.join(n.to_string());
        cfg.stop.max_env_steps = Some(
            self.base
                .stop
                .max_env_steps
                .map_or(boundary, |m| m.min(boundary)),
        );
        Ok(cfg)
    }

    /// Whether a member that reached its env step limit at `env_steps`
    /// has used the base's whole budget (else a generation ended).
    pub fn budget_spent(&self, env_steps: u64) -> bool {
        self.base.stop.max_env_steps.is_some_and(|m| env_steps >= m)
    }

    /// The members' first hyperparameters, each drawn from its space.
    fn first_params(&self) -> Vec<MemberParams> {
        let mut rng = rand_pcg::Pcg64::seed_from_u64(self.seed);
        (0..self.size)
            .map(|_| MemberParams {
                params: self
                    .params
                    .iter()
                    .map(|(k, s)| (k.clone(), s.sample(&mut rng)))
                    .collect(),
            })
            .collect()
    }
}

impl Population {
    pub fn id(&self) -> &str {
        &self.dir.id
    }

    pub(crate) fn csv_path(&self, rec: &PopulationRecord) -> PathBuf {
        rec.root(self.id()).join("population.csv")
    }

    pub fn view(&self) -> PopulationView {
        let r = self.record.lock().expect("record lock");
        PopulationView {
            id: self.id().to_string(),
            name: r.spec.name.clone(),
            state: r.state,
            generation: r.generation,
            interval_env_steps: r.spec.interval_env_steps,
            members: self.members.lock().expect("members lock").clone(),
            exploits: r.lineage.clone(),
            csv: self.csv_path(&r).display().to_string(),
        }
    }
}

impl Studies {
    /// Records and starts a population; returns its id.
    pub fn start_population(self: &Arc<Self>, spec: PopulationSpec) -> Result<String, StartError> {
        let state = self
            .hub
            .state
            .as_ref()
            .ok_or_else(|| StartError::State("populations need a state directory".into()))?;
        if self.hub.shutdown().is_cancelled() {
            return Err(StartError::ShuttingDown);
        }
        spec.check().map_err(StartError::Invalid)?;
        let members = spec.first_params();
        let (base, steps) = (&spec.base.output_dir, spec.interval_env_steps);
        for (n, m) in (1..).zip(&members) {
            let cfg = spec
                .member_cfg(base, "x", n, &m.params, steps)
                .map_err(StartError::Invalid)?;
            self.hub.device_mb(&cfg)?;
        }
        let dir = StudyDir::create(state.root(), "populations", &spec.name)
            .map_err(|e| StartError::State(format!("{e:#}")))?;
        let root = claim_root(&spec.base.output_dir, &dir.id)
            .map_err(|e| StartError::State(format!("{e:#}")))?;
        let record = PopulationRecord {
            root: Some(root),
            spec,
            state: StudyState::Active,
            generation: 0,
            members,
            lineage: Vec::new(),
            pending: Vec::new(),
        };
        dir.write(&record)
            .map_err(|e| StartError::State(format!("cannot record the population: {e}")))?;
        let id = dir.id.clone();
        self.hold_population(dir, record);
        Ok(id)
    }

    /// Takes back the populations recorded as active. Returns their ids.
    pub(crate) fn resume_populations(self: &Arc<Self>) -> Vec<String> {
        let Some(state) = self.hub.state.as_ref() else {
            return Vec::new();
        };
        let mut ids = Vec::new();
        for dir in StudyDir::list(state.root(), "populations") {
            match dir.read::<PopulationRecord>() {
                Ok(r) if r.state == StudyState::Active => {
                    ids.push(dir.id.clone());
                    self.hold_population(dir, r);
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::error!(population = %dir.id, "cannot take the population back: {e:#}")
                }
            }
        }
        ids
    }

    fn hold_population(self: &Arc<Self>, dir: StudyDir, record: PopulationRecord) {
        // Pending until its task's first look (a GET at once shows them).
        let members = (1..)
            .zip(&record.members)
            .map(|(member, m)| MemberView {
                member,
                run_id: None,
                state: "pending".into(),
                env_steps: None,
                metric: None,
                params: m.params.clone(),
            })
            .collect();
        let pop = Arc::new(Population {
            dir,
            record: Mutex::new(record),
            members: Mutex::new(members),
            cancel: self.hub.shutdown().child_token(),
        });
        self.populations
            .lock()
            .expect("populations lock")
            .push(pop.clone());
        tracing::info!(population = %pop.id(), "population started");
        let hub = self.clone();
        tokio::spawn(async move { hub.drive_population(pop).await });
    }

    pub fn list_populations(&self) -> Vec<PopulationView> {
        let pops = self.populations.lock().expect("populations lock");
        pops.iter().map(|p| p.view()).collect()
    }

    pub fn population(&self, id: &str) -> Option<Arc<Population>> {
        let pops = self.populations.lock().expect("populations lock");
        pops.iter().find(|p| p.id() == id).cloned()
    }

    /// Stops a population and its members (they checkpoint). False if
    /// there is no such population.
    pub fn stop_population(self: &Arc<Self>, id: &str) -> bool {
        let Some(pop) = self.population(id) else {
            return false;
        };
        pop.cancel.cancel();
        let names: Vec<String> = {
            let mut r = pop.record.lock().expect("record lock");
            if r.state == StudyState::Active {
                r.state = StudyState::Stopped;
            }
            if let Err(e) = pop.dir.write(&*r) {
                tracing::error!(population = %id, "cannot record the population's stop: {e}");
            }
            (1..=r.spec.size).map(|n| format!("{id}-{n}")).collect()
        };
        let runs = super::RunsByName::now(&self.hub);
        for name in names {
            if let super::Look::Live(s) = runs.look(&name) {
                self.hub.stop_run(&s.id);
            }
        }
        true
    }
}
