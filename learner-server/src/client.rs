//! `learner-server runs …`: a command-line client of a daemon's control
//! API, as `squeue`/`scancel` are for Slurm's — submit a run config, list
//! the runs, show one, stop or resume it. The daemon's address and token
//! come from flags or the environment (`RLFLEET_API`, `RLFLEET_API_TOKEN`).

use rlfleet_shared::config::RunConfig;
use serde_json::Value;
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

/// A client of one daemon's API.
struct Api {
    base: String,
    token: Option<String>,
    http: ureq::Agent,
}

impl Api {
    fn new(args: &ApiArgs) -> Api {
        Api {
            base: args.api.trim_end_matches('/').to_string(),
            token: args.token.clone().filter(|t| !t.is_empty()),
            http: ureq::Agent::config_builder()
                .http_status_as_error(false)
                .build()
                .into(),
        }
    }

    /// `method path` with `body`; the JSON answer, or the daemon's error.
    fn call(&self, method: &str, path: &str, body: Option<String>) -> anyhow::Result<Value> {
        let url = format!("{}{path}", self.base);
        let auth = self.token.as_ref().map(|t| format!("Bearer {t}"));
        let sent = match (method, body) {
            ("GET", _) => {
                let mut req = self.http.get(&url);
                if let Some(a) = &auth {
                    req = req.header("Authorization", a);
                }
                req.call()
            }
            (_, body) => {
                let mut req = self
                    .http
                    .post(&url)
                    .header("Content-Type", "application/json");
                if let Some(a) = &auth {
                    req = req.header("Authorization", a);
                }
                req.send(body.unwrap_or_default())
            }
        };
        let mut resp =
            sent.map_err(|e| anyhow::anyhow!("cannot reach the daemon at {}: {e}", self.base))?;
        let status = resp.status().as_u16();
        let text = resp.body_mut().read_to_string()?;
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::String(text.clone()));
        if status >= 400 {
            let why = v["error"].as_str().map_or(text.as_str(), |e| e).to_string();
            anyhow::bail!("{method} {path}: {status}: {why}");
        }
        Ok(v)
    }
}

/// Runs `cmd` against the daemon; prints what it answered.
pub fn run(api: &ApiArgs, cmd: RunsCommand) -> anyhow::Result<()> {
    let api = Api::new(api);
    match cmd {
        RunsCommand::Submit { config } => {
            let cfg = RunConfig::load(&config)?;
            let v = api.call("POST", "/v1/runs", Some(serde_json::to_string(&cfg)?))?;
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
