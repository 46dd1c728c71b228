//! Studies: many runs the daemon makes from one base config. A sweep
//! ([`sweep`]) runs a grid of points × seeds, a few trials at a time; a
//! population ([`population`]) trains members side by side and lets the
//! worst copy the best and perturb their hyperparameters. Each is recorded
//! under the state directory (`sweeps/<id>/`, `populations/<id>/`, see
//! [`store`]) and driven by a task of the daemon's runtime that starts,
//! stops and resumes ordinary runs through the [`Hub`]: trial and member
//! runs are named `<study id>-<n>`, so a daemon started again finds every
//! one of them in the state directory and takes its unfinished studies
//! back.

pub mod population;
mod population_task;
pub mod space;
pub mod spec_file;
pub mod store;
pub mod sweep;
mod sweep_task;
mod transplant;

use crate::hub::Hub;
use rlfleet_run::state::{RecordState, RunRecord};
use rlfleet_run::vocab::{RunState, RunStatus};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often a study's task looks at its runs.
const TICK: Duration = Duration::from_millis(250);

/// The daemon's studies, oldest first, over its hub of runs.
#[derive(Debug)]
pub struct Studies {
    hub: Arc<Hub>,
    sweeps: Mutex<Vec<Arc<sweep::Sweep>>>,
    populations: Mutex<Vec<Arc<population::Population>>>,
}

/// Where a study's run is.
#[derive(Debug, Clone)]
pub(crate) enum Look {
    /// Not started yet.
    Unstarted,
    /// Queued, running or stopping in this daemon.
    Live(Box<RunStatus>),
    /// Ended: how (its record), and its last status if this daemon ran it.
    Ended {
        record: RunRecord,
        state: RecordState,
        status: Option<Box<RunStatus>>,
    },
}

impl Look {
    pub fn run_id(&self) -> Option<&str> {
        match self {
            Look::Unstarted => None,
            Look::Live(s) => Some(&s.id),
            Look::Ended { record, .. } => Some(&record.id),
        }
    }
}

/// A run state as the API spells it (`running`).
pub(crate) fn state_name(state: RunState) -> String {
    serde_json::to_value(state)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The daemon's runs by name, in memory and recorded, read once per tick.
pub(crate) struct RunsByName {
    live: HashMap<String, RunStatus>,
    /// The newest record of each name.
    recorded: HashMap<String, RunRecord>,
}

impl RunsByName {
    pub fn now(hub: &Hub) -> RunsByName {
        let live = hub
            .list_runs(None)
            .into_iter()
            .map(|s| (s.name.clone(), s))
            .collect();
        let recorded = hub
            .state
            .as_ref()
            .map(|st| st.records())
            .unwrap_or_default()
            .into_iter()
            .filter_map(|r| Some((r.id.rsplit_once('-')?.0.to_string(), r)))
            .collect();
        RunsByName { live, recorded }
    }

    /// Where the run named `name` is.
    pub fn look(&self, name: &str) -> Look {
        let status = self.live.get(name).cloned().map(Box::new);
        if let Some(s) = &status
            && !matches!(s.state, RunState::Finished | RunState::Failed)
        {
            return Look::Live(status.expect("some"));
        }
        let record = self.recorded.get(name).cloned();
        match record.and_then(|r| r.info().ok().map(|i| (r, i.state))) {
            Some((
                record,
                state @ (RecordState::Stopped | RecordState::Finished | RecordState::Failed),
            )) => Look::Ended {
                record,
                state,
                status,
            },
            // Recorded as active or queued but not held by this daemon:
            // being taken back, or run by another process.
            Some(_) => match status {
                Some(s) => Look::Live(s),
                None => Look::Unstarted,
            },
            None => Look::Unstarted,
        }
    }
}

impl Studies {
    pub fn new(hub: Arc<Hub>) -> Arc<Studies> {
        Arc::new(Studies {
            hub,
            sweeps: Mutex::default(),
            populations: Mutex::default(),
        })
    }

    /// Takes back every sweep and population the state directory says
    /// was active (after [`Hub::resume_interrupted`]). Returns their ids.
    pub fn resume(self: &Arc<Self>) -> Vec<String> {
        let mut ids = self.resume_sweeps();
        ids.extend(self.resume_populations());
        ids
    }
}
