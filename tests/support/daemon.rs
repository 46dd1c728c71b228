//! A real `learner-server serve` process on loopback, its control API over
//! real HTTP, and real `actor-client` processes connected to it.

use crate::binary;
use rlfleet_shared::config::RunConfig;
use serde_json::Value;
use std::collections::BTreeSet;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running daemon; SIGTERM and wait on drop.
#[derive(Debug)]
pub struct Daemon {
    child: Child,
    pub api: String,
    pub actors: String,
    pub fingerprint: String,
    pub cert: String,
    pub token: Option<String>,
    pub dir: tempfile::TempDir,
    /// Environment variables it was started with (and is restarted with).
    env: Vec<(String, String)>,
    http: ureq::Agent,
}

/// Starts `learner-server serve` on `dir/server.toml`, logging to
/// `dir/server.log` (appended to across restarts), from `dir`.
fn spawn(dir: &std::path::Path, env: &[(String, String)]) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("server.log"))
        .unwrap();
    Command::new(binary("learner-server"))
        .envs(env.iter().map(|(k, v)| (k, v)))
        .args(["--log-format", "json", "serve", "--config"])
        .arg(dir.join("server.toml"))
        .arg("--ready-file")
        .arg(dir.join("ready.json"))
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap()
}

/// Waits for the ready file `spawn` asked for; returns what it says.
fn ready(dir: &std::path::Path) -> Value {
    let ready = dir.join("ready.json");
    let t0 = Instant::now();
    while !ready.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "server did not start:\n{}",
            std::fs::read_to_string(dir.join("server.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    serde_json::from_str(&std::fs::read_to_string(&ready).unwrap()).unwrap()
}

/// Counts an actor prints on exit.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ActorCounts {
    pub env_steps: u64,
    pub episodes: u64,
    pub batches: u64,
    pub resent: u64,
    pub refused: u64,
    pub inference_requests: u64,
    pub sessions: u64,
}

/// Whether every actor played and took a real share of the env steps: at
/// least a quarter of an equal split. A fixed floor is not one: a lucky
/// seed has been confirmed solved at 2,327 env steps in all (PPO over
/// `sync`, 486 from one actor).
pub fn each_took_a_share(reports: &[ActorCounts]) -> bool {
    let total: u64 = reports.iter().map(|r| r.env_steps).sum();
    let n = reports.len() as u64;
    reports
        .iter()
        .all(|r| r.env_steps > 0 && r.env_steps * 4 * n >= total)
}

/// Parses the `actor done: ...` line of an actor's stderr.
pub fn actor_counts(stderr: &str) -> Option<ActorCounts> {
    let line = stderr.lines().find(|l| l.starts_with("actor done:"))?;
    let nums: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    let [
        env_steps,
        episodes,
        batches,
        resent,
        refused,
        inference_requests,
        sessions,
    ] = nums[..]
    else {
        return None;
    };
    Some(ActorCounts {
        env_steps,
        episodes,
        batches,
        resent,
        refused,
        inference_requests,
        sessions,
    })
}

impl Daemon {
    /// Starts `serve` with listeners on port 0; `extra` is appended to the
    /// `[actors]` table of server.toml, `api_extra` to `[api]`.
    pub fn start(extra: &str, api_extra: &str) -> Daemon {
        Daemon::start_with_env(extra, api_extra, &[])
    }

    /// [`Daemon::start`] with these environment variables set for it.
    pub fn start_with_env(extra: &str, api_extra: &str, env: &[(&str, &str)]) -> Daemon {
        Daemon::start_in(tempfile::tempdir().unwrap(), extra, api_extra, env)
    }

    /// [`Daemon::start_with_env`] in `dir` (its state directory is
    /// `dir/rlfleet-state`, which the caller may have made first).
    pub fn start_in(
        dir: tempfile::TempDir,
        extra: &str,
        api_extra: &str,
        env: &[(&str, &str)],
    ) -> Daemon {
        let cfg = format!(
            "[actors]\nlisten = \"127.0.0.1:0\"\ntls_dir = \"{}\"\nkeep_alive_ms = 200\nidle_timeout_ms = 1500\n{extra}\n\
             [api]\nlisten = \"127.0.0.1:0\"\n{api_extra}\n",
            dir.path().join("tls").display()
        );
        let cfg_path = dir.path().join("server.toml");
        std::fs::write(&cfg_path, cfg).unwrap();
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let child = spawn(dir.path(), &env);
        let info = ready(dir.path());
        let s = |k: &str| info[k].as_str().unwrap().to_string();
        let token = api_extra
            .lines()
            .find_map(|l| l.strip_prefix("token = "))
            .map(|t| t.trim_matches('"').to_string());
        Daemon {
            child,
            api: format!("http://{}", s("api")),
            actors: s("actors"),
            fingerprint: s("fingerprint"),
            cert: s("cert"),
            token,
            dir,
            env,
            http: ureq::Agent::config_builder()
                .http_status_as_error(false)
                .build()
                .into(),
        }
    }

    /// SIGKILLs the daemon (no drain, no checkpoint), then starts it again
    /// in the same folder (state directory, TLS identity) on the same
    /// ports; returns once it is ready (an interrupted run resumed).
    pub fn crash_and_restart(&mut self) {
        self.crash();
        self.restart();
    }

    /// Waits for the daemon's process to exit, at most `limit` (past it the
    /// process is killed and the test fails, with its log).
    fn wait_exit(&mut self, limit: Duration) -> std::process::ExitStatus {
        let t0 = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            if t0.elapsed() > limit {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "the daemon did not exit within {limit:?}; killed it. Its log:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILLs the daemon; [`Daemon::restart`] starts it again.
    pub fn crash(&mut self) {
        let _ = self.child.kill();
    }

    /// SIGTERMs the daemon (it drains: runs checkpoint and stop, actors
    /// are told), waits for it to exit, and starts it again as
    /// [`Daemon::crash_and_restart`] does.
    pub fn terminate_and_restart(&mut self) {
        self.terminate();
        self.restart();
    }

    /// Waits for the daemon's process to end, then starts it again in the
    /// same folder on the same ports.
    pub fn restart(&mut self) {
        let status = self.wait_exit(Duration::from_secs(60));
        assert!(
            status.success() || status.code().is_none(),
            "the daemon exited with {status}:\n{}",
            self.log()
        );
        let cfg_path = self.dir.path().join("server.toml");
        let fixed = std::fs::read_to_string(&cfg_path)
            .unwrap()
            .replace(
                "listen = \"127.0.0.1:0\"\ntls_dir",
                &format!("listen = \"{}\"\ntls_dir", self.actors),
            )
            .replace(
                "[api]\nlisten = \"127.0.0.1:0\"",
                &format!(
                    "[api]\nlisten = \"{}\"",
                    self.api.trim_start_matches("http://")
                ),
            );
        std::fs::write(&cfg_path, fixed).unwrap();
        std::fs::remove_file(self.dir.path().join("ready.json")).unwrap();
        self.child = spawn(self.dir.path(), &self.env);
        let info = ready(self.dir.path());
        assert_eq!(info["actors"].as_str().unwrap(), self.actors);
        assert_eq!(info["fingerprint"].as_str().unwrap(), self.fingerprint);
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    fn auth(&self, with: bool) -> Option<String> {
        self.token
            .as_ref()
            .filter(|_| with)
            .map(|t| format!("Bearer {t}"))
    }

    /// GET with the token (if any): (status, body).
    pub fn get(&self, path: &str) -> (u16, String) {
        self.get_as(path, true)
    }

    pub fn get_as(&self, path: &str, with_token: bool) -> (u16, String) {
        let mut req = self.http.get(format!("{}{path}", self.api));
        if let Some(a) = self.auth(with_token) {
            req = req.header("Authorization", a);
        }
        let mut resp = req.call().unwrap();
        let status = resp.status().as_u16();
        (status, resp.body_mut().read_to_string().unwrap())
    }

    pub fn post(&self, path: &str, body: &str) -> (u16, String) {
        self.post_as(path, body, true)
    }

    pub fn post_as(&self, path: &str, body: &str, with_token: bool) -> (u16, String) {
        let mut req = self
            .http
            .post(format!("{}{path}", self.api))
            .header("Content-Type", "application/json");
        if let Some(a) = self.auth(with_token) {
            req = req.header("Authorization", a);
        }
        let mut resp = req.send(body).unwrap();
        let status = resp.status().as_u16();
        (status, resp.body_mut().read_to_string().unwrap())
    }

    pub fn json(&self, path: &str) -> Value {
        let (status, body) = self.get(path);
        assert_eq!(status, 200, "GET {path}: {body}\n{}", self.log());
        serde_json::from_str(&body).unwrap()
    }

    /// Starts a run; returns its id.
    pub fn start_run(&self, cfg: &RunConfig) -> String {
        let (status, body) = self.post("/v1/runs", &serde_json::to_string(cfg).unwrap());
        assert_eq!(status, 201, "POST /v1/runs: {body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        v["id"].as_str().unwrap().to_string()
    }

    /// Polls the run until `done` says so (or panics after `limit`).
    pub fn wait_until(&self, id: &str, limit: Duration, done: impl Fn(&Value) -> bool) -> Value {
        let t0 = Instant::now();
        loop {
            let v = self.json(&format!("/v1/runs/{id}"));
            if done(&v) {
                return v;
            }
            assert!(
                t0.elapsed() < limit,
                "run {id} not done after {limit:?}: {v}\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Run `id`'s `record.json` in the daemon's state directory.
    pub fn record(&self, id: &str) -> Value {
        let path = self
            .dir
            .path()
            .join(format!("rlfleet-state/runs/{id}/record.json"));
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    /// Sends the daemon SIGTERM.
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// The daemon's resident memory now, in bytes (`VmRSS`).
    pub fn rss_bytes(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS in /proc/PID/status");
        kb * 1024
    }

    /// Waits for the run to finish.
    pub fn wait_finished(&self, id: &str, limit: Duration) -> Value {
        self.wait_until(id, limit, |v| {
            v["state"] == "finished" || v["state"] == "failed"
        })
    }

    /// The value of one series (`name` includes labels, if any) of `/metrics`; panics when the series does
    /// not exist (so a renamed metric fails its test instead of reading 0).
    pub fn metric(&self, name: &str) -> f64 {
        let (_, text) = self.get("/metrics");
        crate::metric_value(&text, name)
    }

    /// An `actor-client` process connected to this daemon (stderr piped).
    pub fn actor(&self, id: &str, envs: u32, extra: &[&str]) -> Child {
        self.actor_with_env(id, envs, extra, &[])
    }

    /// [`Daemon::actor`] with these environment variables set for it.
    pub fn actor_with_env(
        &self,
        id: &str,
        envs: u32,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Child {
        Command::new(binary("actor-client"))
            .args(["--server", &self.actors, "--pin", &self.fingerprint])
            .args(["--envs", &envs.to_string(), "--actor-id", id])
            .args(["--keep-alive-ms", "200", "--idle-timeout-ms", "1500"])
            .args(extra)
            .env(
                "RUST_LOG",
                std::env::var("RLFLEET_TEST_ACTOR_LOG").unwrap_or_else(|_| "warn".into()),
            )
            // After the default log level, so a caller may set its own.
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }
}

/// Checks a finished run's episode books: `episodes.csv` holds every id
/// of `0..episodes` exactly once, and the run's env steps are the finished
/// episodes' lengths plus the abandoned steps (episodes played again).
pub fn check_episode_books(output_dir: &std::path::Path, episodes: u64, status: &Value) {
    let (ids, lengths) = crate::episode_ids_and_steps(output_dir);
    assert_eq!(
        ids,
        (0..episodes).collect::<Vec<_>>(),
        "each id once: {status}"
    );
    let abandoned = status["env_steps_abandoned"].as_u64().unwrap();
    assert_eq!(
        lengths + abandoned,
        status["env_steps"].as_u64().unwrap(),
        "{status}"
    );
}

/// Checks the books of a run that ended however it ended: every episode
/// id in `episodes.csv` once, env steps = finished lengths + abandoned +
/// cut off at the end (`env_steps_in_play`), and the batch books. Returns
/// the actor indexes that finished its episodes.
pub fn check_run_books(output_dir: &std::path::Path, status: &Value) -> BTreeSet<u32> {
    let eps = rlfleet_output::read_episodes(&output_dir.join("episodes.csv")).unwrap();
    let ids: BTreeSet<u64> = eps.iter().map(|e| e.episode).collect();
    assert_eq!(ids.len(), eps.len(), "an id finished twice: {status}");
    let lengths: u64 = eps.iter().map(|e| u64::from(e.length)).sum();
    let n = |k: &str| status[k].as_u64().unwrap();
    assert_eq!(
        lengths + n("env_steps_abandoned") + n("env_steps_in_play"),
        n("env_steps"),
        "{status}"
    );
    check_batch_books(status);
    eps.iter().map(|e| e.actor).collect()
}

/// Kills actor processes that would otherwise wait for the next run.
pub fn kill_all(actors: Vec<Child>) {
    for mut a in actors {
        let _ = a.kill();
        let _ = a.wait();
    }
}

/// Checks a run's batch books as its status gives them: every batch
/// received was trained or dropped (with a reason).
pub fn check_batch_books(status: &Value) {
    let b = &status["batches"];
    let dropped: u64 = b["dropped"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(
        b["received"].as_u64().unwrap(),
        b["trained"].as_u64().unwrap() + dropped,
        "{status}"
    );
}

/// Waits for an actor process (at most three minutes; past that it is
/// killed and the test fails); returns its exit success and stderr.
pub fn finish_actor(child: Child) -> (bool, String) {
    let out = crate::wait_output(child, Duration::from_secs(180), "an actor process");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(20) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
