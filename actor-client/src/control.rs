//! A client of a daemon's HTTP control API (runs, sweeps, populations),
//! shared by `learner-server runs|sweeps|populations` and the Python
//! module's `rlfleet.Control`: plain HTTP with an optional bearer token;
//! an error answer becomes an error that carries the daemon's message.

use anyhow::Context;
use rlfleet_shared::config::RunConfig;
use serde_json::Value;
use std::path::Path;

/// One daemon's control API.
#[derive(Debug)]
pub struct Control {
    base: String,
    token: Option<String>,
    http: ureq::Agent,
}

impl Control {
    /// `api`: the base URL (`http://host:port`); `token`: `[api] token`.
    pub fn new(api: &str, token: Option<String>) -> Control {
        Control {
            base: api.trim_end_matches('/').to_string(),
            token: token.filter(|t| !t.is_empty()),
            http: ureq::Agent::config_builder()
                .http_status_as_error(false)
                .build()
                .into(),
        }
    }

    /// `method path` with a JSON `body`; the JSON answer, or an error
    /// naming the call, the status and the daemon's message.
    pub fn call(&self, method: &str, path: &str, body: Option<String>) -> anyhow::Result<Value> {
        let url = format!("{}{path}", self.base);
        let auth = self.token.as_ref().map(|t| format!("Bearer {t}"));
        let sent = if method == "GET" {
            let mut req = self.http.get(&url);
            if let Some(a) = &auth {
                req = req.header("Authorization", a);
            }
            req.call()
        } else {
            let mut req = self
                .http
                .post(&url)
                .header("Content-Type", "application/json");
            if let Some(a) = &auth {
                req = req.header("Authorization", a);
            }
            req.send(body.unwrap_or_default())
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

/// A run config file as the JSON body of `POST /v1/runs` (read and
/// checked as `learner-server check` does).
pub fn config_json(path: &Path) -> anyhow::Result<String> {
    Ok(serde_json::to_string(&RunConfig::load(path)?)?)
}

/// A sweep or population spec file (TOML) as JSON: a `base` that names a
/// run config file (relative to the spec's folder) is replaced by that
/// config, read and checked.
pub fn spec_json(path: &Path) -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read `{}`", path.display()))?;
    let mut doc: toml::Table = text
        .parse()
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    if let Some(toml::Value::String(base)) = doc.get("base") {
        let file = path.parent().unwrap_or(Path::new(".")).join(base);
        let cfg = RunConfig::load(&file).with_context(|| format!("{}: base", path.display()))?;
        doc.insert("base".into(), toml::Value::try_from(&cfg)?);
    }
    Ok(serde_json::to_value(&doc)?)
}
