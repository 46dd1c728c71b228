//! The daemon under soak: a `learner-server serve` process on loopback
//! ports the OS picks, its API over HTTP, its RSS, stopped on drop.

use rlfleet_shared::config::RunConfig;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `learner-server serve` process on loopback ports the OS picks.
pub(crate) struct Server {
    pub child: Child,
    _dir: tempfile::TempDir,
    pub actors: SocketAddr,
    pub api: String,
    pub fingerprint: String,
    pub(super) http: ureq::Agent,
}

impl Server {
    pub(super) fn start() -> anyhow::Result<Server> {
        Server::start_in(tempfile::tempdir()?)
    }

    /// Starts one in `dir`, with its state directory at `dir/state`.
    pub(crate) fn start_in(dir: tempfile::TempDir) -> anyhow::Result<Server> {
        Server::start_with(dir, "")
    }

    /// [`Server::start_in`] with `extra` appended to its `server.toml`
    /// (tables after `[api]`, such as `[runs]`).
    pub(crate) fn start_with(dir: tempfile::TempDir, extra: &str) -> anyhow::Result<Server> {
        let conf = dir.path().join("server.toml");
        std::fs::write(
            &conf,
            format!(
                "state_dir = \"{}\"\n[actors]\nlisten = \"127.0.0.1:0\"\ntls_dir = \"{}\"\n[api]\nlisten = \"127.0.0.1:0\"\n{extra}",
                dir.path().join("state").display(),
                dir.path().join("tls").display()
            ),
        )?;
        let ready = dir.path().join("ready.json");
        let exe = std::env::current_exe()?.with_file_name("learner-server");
        let child = Command::new(&exe)
            .args(["serve", "--config"])
            .arg(&conf)
            .arg("--ready-file")
            .arg(&ready)
            .env("RUST_LOG", "warn")
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| anyhow::anyhow!("cannot start {}: {e}", exe.display()))?;
        let t0 = Instant::now();
        while !ready.exists() {
            anyhow::ensure!(
                t0.elapsed() < Duration::from_secs(30),
                "the daemon never got ready"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let info: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&ready)?)?;
        let s = |k: &str| info[k].as_str().unwrap_or_default().to_string();
        Ok(Server {
            child,
            _dir: dir,
            actors: s("actors").parse()?,
            api: format!("http://{}", s("api")),
            fingerprint: s("fingerprint"),
            http: ureq::Agent::config_builder()
                .http_status_as_error(false)
                .build()
                .into(),
        })
    }

    /// The folder it runs in (its state directory, TLS identity, and
    /// whatever a benchmark puts there), removed on drop.
    pub(crate) fn dir(&self) -> &std::path::Path {
        self._dir.path()
    }

    /// `GET path` as JSON.
    pub(crate) fn json(&self, path: &str) -> anyhow::Result<serde_json::Value> {
        let body = self
            .http
            .get(format!("{}{path}", self.api))
            .call()?
            .body_mut()
            .read_to_string()?;
        Ok(serde_json::from_str(&body)?)
    }

    pub(crate) fn rss_kib(&self) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }

    /// What `/metrics` serves now.
    pub(crate) fn metrics_text(&self) -> anyhow::Result<String> {
        Ok(self
            .http
            .get(format!("{}/metrics", self.api))
            .call()?
            .body_mut()
            .read_to_string()?)
    }

    /// `POST path` with an empty body; an error unless it is accepted.
    pub(crate) fn post(&self, path: &str) -> anyhow::Result<()> {
        let mut resp = self
            .http
            .post(format!("{}{path}", self.api))
            .header("Content-Type", "application/json")
            .send("")?;
        let status = resp.status().as_u16();
        let body = resp.body_mut().read_to_string()?;
        anyhow::ensure!(status < 300, "POST {path}: {status} {body}");
        Ok(())
    }

    /// The sum of the series of family `name` (a run's series carry its
    /// `run` and `run_id` labels); an error when there is none.
    pub(super) fn metric(&self, name: &str) -> anyhow::Result<f64> {
        let text = self.metrics_text()?;
        let values: Vec<f64> = text
            .lines()
            .filter_map(|l| {
                let rest = l.strip_prefix(name)?;
                let value = match rest.strip_prefix(' ') {
                    Some(v) => v,
                    None => rest.strip_prefix('{')?.rsplit_once("} ")?.1,
                };
                value.trim().parse().ok()
            })
            .collect();
        anyhow::ensure!(!values.is_empty(), "no metric {name}");
        Ok(values.iter().sum())
    }

    pub(crate) fn start_run(&self, cfg: &RunConfig) -> anyhow::Result<String> {
        let mut resp = self
            .http
            .post(format!("{}/v1/runs", self.api))
            .header("Content-Type", "application/json")
            .send(serde_json::to_string(cfg)?)?;
        let body = resp.body_mut().read_to_string()?;
        anyhow::ensure!(resp.status().as_u16() == 201, "POST /v1/runs: {body}");
        let v: serde_json::Value = serde_json::from_str(&body)?;
        Ok(v["id"].as_str().unwrap_or_default().to_string())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}
