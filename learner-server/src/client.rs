//! `learner-server runs …`, `sweeps …`, `populations …`: a command-line
//! client of a daemon's control API, as `squeue`/`scancel` are for
//! Slurm's — submit a run config or a study's spec, list, show one, stop
//! or resume it. The daemon's address and token
//! come from flags or the environment (`RLFLEET_API`, `RLFLEET_API_TOKEN`).

use actor_client::control::{Control, config_json, spec_json};
use std::path::PathBuf;

/// What to ask the daemon.
#[derive(clap::Subcommand, Debug)]
pub enum RunsCommand {
    /// Submit a run config (TOML): it starts at once or waits queued.
    Submit { config: PathBuf },
    /// The daemon's runs, oldest first: id, state, envs, env steps,
    /// episodes, best evaluation.
    List {
        /// Only runs in this state (queued, running, stopping, finished,
        /// failed).
        #[arg(long)]
        state: Option<String>,
    },
    /// One run's status, as JSON.
    Show { id: String },
    /// Stop a run (it checkpoints first); a queued run leaves the queue.
    Stop { id: String },
    /// Resume a stopped, failed or interrupted run under its id.
    Resume { id: String },
}

/// What to ask of a daemon's sweeps or populations.
#[derive(clap::Subcommand, Debug)]
pub enum StudiesCommand {
    /// Submit a spec (TOML; its `base` names a run config file or holds
    /// one): its first runs start at once or wait queued.
    Submit { spec: PathBuf },
    /// Every one the daemon holds: id, state, and its runs' states.
    List,
    /// One, as JSON (its trials or members and lineage).
    Show { id: String },
    /// Stop one and its runs (they checkpoint first).
    Stop { id: String },
}

/// The daemon's control API.
#[derive(clap::Args, Debug)]
pub struct ApiArgs {
    /// The control API's base URL.
    #[arg(long, env = "RLFLEET_API", default_value = "http://127.0.0.1:8080")]
    pub api: String,
    /// The API's bearer token (`[api] token`), when it has one.
    #[arg(long, env = "RLFLEET_API_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

impl ApiArgs {
    fn control(&self) -> Control {
        Control::new(&self.api, self.token.clone())
    }
}

/// Runs `cmd` against the daemon; prints what it answered.
pub fn run(api: &ApiArgs, cmd: RunsCommand) -> anyhow::Result<()> {
    let api = api.control();
    match cmd {
        RunsCommand::Submit { config } => {
            let v = api.call("POST", "/v1/runs", Some(config_json(&config)?))?;
            let id = v["id"].as_str().unwrap_or_default();
            let state = api.call("GET", &format!("/v1/runs/{id}"), None)?;
            println!("{id} {}", state["state"].as_str().unwrap_or("?"));
        }
        RunsCommand::List { state } => {
            let path = match state {
                Some(s) => format!("/v1/runs?state={s}"),
                None => "/v1/runs".to_string(),
            };
            let runs = api.call("GET", &path, None)?;
            println!(
                "{:<32} {:<9} {:>5} {:>12} {:>9} {:>10}",
                "ID", "STATE", "ENVS", "ENV_STEPS", "EPISODES", "BEST_EVAL"
            );
            for r in runs.as_array().into_iter().flatten() {
                println!(
                    "{:<32} {:<9} {:>5} {:>12} {:>9} {:>10}",
                    r["id"].as_str().unwrap_or("?"),
                    r["state"].as_str().unwrap_or("?"),
                    r["envs"],
                    r["env_steps"],
                    r["episodes_finished"],
                    r["best_eval_return"]
                        .as_f64()
                        .map_or("-".to_string(), |b| format!("{b:.1}")),
                );
            }
        }
        RunsCommand::Show { id } => {
            let v = api.call("GET", &format!("/v1/runs/{id}"), None)?;
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        RunsCommand::Stop { id } => {
            api.call("POST", &format!("/v1/runs/{id}/stop"), None)?;
            println!("{id} stopping");
        }
        RunsCommand::Resume { id } => {
            api.call("POST", &format!("/v1/runs/{id}/resume"), None)?;
            let state = api.call("GET", &format!("/v1/runs/{id}"), None)?;
            println!("{id} {}", state["state"].as_str().unwrap_or("?"));
        }
    }
    Ok(())
}

/// Runs `cmd` on the daemon's `kind` (`sweeps` or `populations`).
pub fn studies(api: &ApiArgs, kind: &str, cmd: StudiesCommand) -> anyhow::Result<()> {
    let api = api.control();
    match cmd {
        StudiesCommand::Submit { spec } => {
            let body = spec_json(&spec)?.to_string();
            let v = api.call("POST", &format!("/v1/{kind}"), Some(body))?;
            println!("{}", v["id"].as_str().unwrap_or("?"));
        }
        StudiesCommand::List => {
            let all = api.call("GET", &format!("/v1/{kind}"), None)?;
            println!("{:<32} {:<9} RUNS", "ID", "STATE");
            for s in all.as_array().into_iter().flatten() {
                let runs = s["trials"].as_array().or(s["members"].as_array());
                let mut by_state = std::collections::BTreeMap::<String, usize>::new();
                for r in runs.into_iter().flatten() {
                    *by_state
                        .entry(r["state"].as_str().unwrap_or("?").to_string())
                        .or_default() += 1;
                }
                let runs: Vec<String> = by_state.iter().map(|(k, n)| format!("{n} {k}")).collect();
                println!(
                    "{:<32} {:<9} {}",
                    s["id"].as_str().unwrap_or("?"),
                    s["state"].as_str().unwrap_or("?"),
                    runs.join(", ")
                );
            }
        }
        StudiesCommand::Show { id } => {
            let v = api.call("GET", &format!("/v1/{kind}/{id}"), None)?;
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        StudiesCommand::Stop { id } => {
            api.call("POST", &format!("/v1/{kind}/{id}/stop"), None)?;
            println!("{id} stopping");
        }
    }
    Ok(())
}
