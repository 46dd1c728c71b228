//! `server.toml`: the daemon's listeners, TLS, tokens and run slots. Parsed and
//! validated before anything binds.

use rlfleet_shared::config::ConfigError;
use rlfleet_shared::wire::DEFAULT_MAX_FRAME_BYTES;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Where runs are recorded (config, state, checkpoints) so that a
    /// daemon started again resumes the run that was active. Relative to
    /// the working directory.
    #[schema(value_type = String)]
    pub state_dir: PathBuf,
    pub actors: ActorsListener,
    pub api: ApiListener,
    pub runs: RunsConfig,
}

/// `state_dir` when the config says nothing.
pub const DEFAULT_STATE_DIR: &str = "rlfleet-state";

/// `actors.max_actors` when the server config says nothing.
pub const DEFAULT_MAX_ACTORS: u32 = 4096;

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            state_dir: PathBuf::from(DEFAULT_STATE_DIR),
            actors: ActorsListener::default(),
            api: ApiListener::default(),
            runs: RunsConfig::default(),
        }
    }
}

/// The QUIC listener for actors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ActorsListener {
    /// UDP address; port 0 picks a free one (the bound address is logged).
    #[schema(value_type = String)]
    pub listen: SocketAddr,
    /// PEM certificate chain; when `cert` and `key` are unset, a
    /// self-signed pair is generated in `tls_dir` on first start and
    /// reused after.
    #[schema(value_type = Option<String>)]
    pub cert: Option<PathBuf>,
    /// PEM private key of `cert`.
    #[schema(value_type = Option<String>)]
    pub key: Option<PathBuf>,
    /// Where the generated certificate (`cert.pem`) and key are kept.
    #[schema(value_type = String)]
    pub tls_dir: PathBuf,
    /// DNS names or IPs the generated certificate names besides
    /// `localhost`, `127.0.0.1` and `::1`: the names actors reach the
    /// learner by (`actor-client --server NAME:PORT` verifies it). Read
    /// when the certificate is generated: delete `tls_dir` to make it
    /// again for new names.
    pub tls_names: Vec<String>,
    /// Actors must present this token (or the content of `token_file`).
    pub token: Option<String>,
    /// A file whose trimmed content is the actors' token (kept out of the
    /// config and its logs).
    #[schema(value_type = Option<String>)]
    pub token_file: Option<PathBuf>,
    /// Largest frame accepted from an actor.
    pub max_frame_bytes: u32,
    /// Most actors connected at once, over every transport; one more is
    /// refused (`too_many_actors`). It also sizes the run's inboxes, which
    /// are bounded by it.
    pub max_actors: u32,
    /// Connections not yet past `Hello` (version and token checked) at
    /// once; one more is refused before its handshake. Until its `Hello`
    /// is accepted a connection may send frames of at most 64 KiB, and it
    /// has `hello_timeout_ms` to open its stream and send the `Hello`.
    pub max_unauthenticated: u32,
    /// Milliseconds a new connection has to send its `Hello`.
    pub hello_timeout_ms: u64,
    /// An actor that sends nothing for this long while the run waits on
    /// it (it was answered and owes its next batch, observations or work
    /// request) is dropped and its unfinished episodes go to other actors.
    /// Slow environments need a larger value; 0 never drops.
    pub actor_timeout_secs: u64,
    /// QUIC keep-alive: milliseconds between the pings that keep a quiet
    /// connection open.
    pub keep_alive_ms: u64,
    /// QUIC idle timeout: a peer not heard from for this many
    /// milliseconds is gone (an actor's connection is driven by a thread
    /// of its own, so a slow env step does not stop its keep-alives). A
    /// network blackout shorter than this keeps the connection, and the
    /// run goes on where it was; a dead actor's episodes go to others
    /// this long after it was last heard from.
    pub idle_timeout_ms: u64,
}

impl Default for ActorsListener {
    fn default() -> Self {
        ActorsListener {
            listen: ([0, 0, 0, 0], 7000).into(),
            cert: None,
            key: None,
            tls_dir: PathBuf::from("rlfleet-tls"),
            tls_names: Vec::new(),
            token: None,
            token_file: None,
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            max_actors: DEFAULT_MAX_ACTORS,
            max_unauthenticated: 64,
            hello_timeout_ms: 10_000,
            actor_timeout_secs: 600,
            keep_alive_ms: 1_000,
            idle_timeout_ms: 15_000,
        }
    }
}

/// How many runs the daemon holds at once, and how long an ended run's
/// series stay in `/metrics`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RunsConfig {
    /// Runs active at once; one more is accepted `queued` and starts when
    /// a slot frees (highest `priority` first, then the earliest).
    pub max_active: u32,
    /// Seconds an ended run's series stay in `/metrics` (its files keep
    /// everything).
    pub metrics_retention_secs: u64,
    /// Ended runs the API keeps in memory (the oldest beyond this are
    /// forgotten there; their records and files stay), so a daemon that
    /// has served thousands of runs holds as little as a new one.
    pub keep_ended: u32,
    /// Device memory the active runs may reserve together, in MB (unset:
    /// no limit). Each run reserves its `[fleet] device_memory_mb`, or the
    /// daemon's estimate; one that would pass the limit waits queued (the
    /// queue's head first), and one that could never fit is refused.
    pub device_memory_mb: Option<u64>,
    /// How active runs share the learner's device.
    pub device_turns: DeviceTurnsMode,
}

/// How active runs share the learner's device (`[runs] device_turns`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeviceTurnsMode {
    /// `weighted` on a GPU, `free` on the CPU.
    Auto,
    /// Gradient steps take turns on the device, one run at a time, each
    /// run's share of the device's time following its `[fleet] weight`.
    Weighted,
    /// Every run's gradient steps at once, as the operating system
    /// schedules their threads.
    Free,
}

impl Default for RunsConfig {
    fn default() -> Self {
        RunsConfig {
            max_active: 4,
            metrics_retention_secs: 300,
            keep_ended: 100,
            device_memory_mb: None,
            device_turns: DeviceTurnsMode::Auto,
        }
    }
}

impl RunsConfig {
    /// The device's turns, `auto` resolved for a device that is a GPU or not.
    pub fn sharing(&self, gpu: bool) -> rlfleet_run::turns::Sharing {
        use rlfleet_run::turns::Sharing;
        match self.device_turns {
            DeviceTurnsMode::Weighted => Sharing::Weighted,
            DeviceTurnsMode::Free => Sharing::Free,
            DeviceTurnsMode::Auto if gpu => Sharing::Weighted,
            DeviceTurnsMode::Auto => Sharing::Free,
        }
    }
}

/// The HTTP control API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ApiListener {
    /// TCP address of the HTTP control API.
    #[schema(value_type = String)]
    pub listen: SocketAddr,
    /// Bearer token required on every route except the open ones.
    pub token: Option<String>,
    /// A file whose trimmed content is the API's token.
    #[schema(value_type = Option<String>)]
    pub token_file: Option<PathBuf>,
    /// Serve `/metrics` without the token (for Prometheus).
    pub open_metrics: bool,
    /// Serve `/healthz` and `/readyz` without the token (for probes).
    pub open_healthz: bool,
}

impl Default for ApiListener {
    fn default() -> Self {
        ApiListener {
            listen: ([127, 0, 0, 1], 8080).into(),
            token: None,
            token_file: None,
            open_metrics: true,
            open_healthz: true,
        }
    }
}

/// Compares a presented token with the configured one in time that does not
/// depend on where they differ.
pub fn tokens_match(expected: &str, given: &str) -> bool {
    expected.len() == given.len()
        && expected
            .bytes()
            .zip(given.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// `token`, or the trimmed content of `token_file`.
fn resolve_token(
    token: &Option<String>,
    file: &Option<PathBuf>,
) -> Result<Option<String>, ConfigError> {
    match (token, file) {
        (Some(_), Some(_)) => Err(ConfigError::Conflict(
            "set `token` or `token_file`, not both".into(),
        )),
        (Some(t), None) => Ok(Some(t.clone())),
        (None, Some(path)) => std::fs::read_to_string(path)
            .map(|t| Some(t.trim().to_string()))
            .map_err(|source| ConfigError::Read {
                path: path.clone(),
                source,
            }),
        (None, None) => Ok(None),
    }
}

impl ServerConfig {
    pub fn load(path: &Path) -> Result<ServerConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut cfg: ServerConfig =
            rlfleet_shared::config::from_toml_keyed(&text).map_err(|message| {
                ConfigError::Parse {
                    origin: path.display().to_string(),
                    message,
                }
            })?;
        cfg.resolve()?;
        Ok(cfg)
    }

    /// The config as `check --server` prints it: every default filled in,
    /// token files read, and each token shown only as `"(set)"`.
    pub fn to_checked_toml(&self) -> String {
        let mut shown = self.clone();
        for token in [&mut shown.actors.token, &mut shown.api.token] {
            if token.is_some() {
                *token = Some("(set)".to_string());
            }
        }
        toml::to_string(&shown).expect("a server config serialises")
    }

    /// Reads token files and checks cross-field rules.
    pub fn resolve(&mut self) -> Result<(), ConfigError> {
        self.actors.token = resolve_token(&self.actors.token, &self.actors.token_file)?;
        self.actors.token_file = None;
        self.api.token = resolve_token(&self.api.token, &self.api.token_file)?;
        self.api.token_file = None;
        if self.actors.cert.is_some() != self.actors.key.is_some() {
            return Err(ConfigError::Conflict(
                "[actors] `cert` and `key` go together: set both or neither".into(),
            ));
        }
        if self.actors.max_frame_bytes < 1024 {
            return Err(ConfigError::OutOfRange {
                key: "actors.max_frame_bytes",
                value: self.actors.max_frame_bytes.to_string(),
                allowed: "an integer >= 1024".into(),
            });
        }
        if !(1..=1_000_000).contains(&self.actors.max_actors) {
            return Err(ConfigError::OutOfRange {
                key: "actors.max_actors",
                value: self.actors.max_actors.to_string(),
                allowed: "an integer from 1 to 1000000".into(),
            });
        }
        if !(1..=10_000).contains(&self.runs.max_active) {
            return Err(ConfigError::OutOfRange {
                key: "runs.max_active",
                value: self.runs.max_active.to_string(),
                allowed: "an integer from 1 to 10000".into(),
            });
        }
        if self.runs.device_memory_mb == Some(0) {
            return Err(ConfigError::OutOfRange {
                key: "runs.device_memory_mb",
                value: "0".into(),
                allowed: "an integer >= 1 (or unset: no limit)".into(),
            });
        }
        if self.actors.max_unauthenticated == 0 || self.actors.hello_timeout_ms == 0 {
            return Err(ConfigError::Conflict(
                "[actors] max_unauthenticated and hello_timeout_ms must be at least 1".into(),
            ));
        }
        if self.actors.keep_alive_ms == 0
            || self.actors.idle_timeout_ms <= self.actors.keep_alive_ms
        {
            return Err(ConfigError::Conflict(
                "[actors] needs 0 < keep_alive_ms < idle_timeout_ms".into(),
            ));
        }
        Ok(())
    }

    pub fn liveness(&self) -> rlfleet_quic::Liveness {
        rlfleet_quic::Liveness {
            keep_alive: std::time::Duration::from_millis(self.actors.keep_alive_ms),
            idle_timeout: std::time::Duration::from_millis(self.actors.idle_timeout_ms),
        }
    }
}
