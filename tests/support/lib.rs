//! Helpers for the cross-crate integration suite: where the workspace, its
//! built binaries and the reference Python live, and running them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The workspace root (the parent of this package).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// A binary of the workspace, built by the same `cargo` invocation profile
/// as this test (the test command builds all binaries before the tests).
pub fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/suite-<hash> -> target/<profile>/<name>
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target profile dir");
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is not built; run the test command (scripts/test.sh), which builds the binaries first",
        path.display()
    );
    path
}

/// The Python interpreter of the venv with the reference Gymnasium
/// (`RLFLEET_PYTHON`, set by scripts/setup.sh).
pub fn reference_python() -> PathBuf {
    let p = std::env::var_os("RLFLEET_PYTHON").expect(
        "RLFLEET_PYTHON is not set: run the tests through scripts/test.sh, which installs the \
         reference Gymnasium",
    );
    PathBuf::from(p)
}

/// Runs a command to completion with `input` on stdin, returning its output.
pub fn run_with_input(cmd: &mut Command, input: &[u8]) -> Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let mut stdin = child.stdin.take().expect("stdin");
    let data = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&data));
    let out = child.wait_with_output().expect("wait for child");
    writer.join().expect("writer thread").expect("write stdin");
    out
}

pub mod daemon;

/// Waits for a child with piped output, at most `limit`: past it the child
/// is killed and the test fails, naming the wait. A process that never ends
/// then fails its test instead of hanging the whole suite.
pub fn wait_output(child: std::process::Child, limit: std::time::Duration, what: &str) -> Output {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.expect("wait for child"),
        Err(_) => {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            let out = rx.recv().ok().and_then(Result::ok);
            let stderr = out
                .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
                .unwrap_or_default();
            panic!(
                "{what} (pid {pid}) did not exit within {limit:?}; killed it. Its stderr:\n{stderr}"
            )
        }
    }
}

/// Runs `cmd` with its output piped, at most `limit` ([`wait_output`]).
pub fn output_within(cmd: &mut Command, limit: std::time::Duration, what: &str) -> Output {
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    wait_output(child, limit, what)
}

/// The value of the series `name` in a Prometheus text dump: the sum of
/// the series of that family carrying the labels `name` gives, if any (a
/// run's series carry `run` and `run_id` beside them, so a daemon's one
/// run reads as it did). Panics when there is no such series: a metric
/// that is renamed or never exported fails the test that reads it, rather
/// than reading as 0.
pub fn metric_value(prom: &str, name: &str) -> f64 {
    let (family, wanted) = split_series(name);
    let values: Vec<f64> = prom
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (f, labels) = split_series(series);
            (f == family && wanted.iter().all(|w| labels.contains(w))).then(|| {
                value
                    .trim()
                    .parse::<f64>()
                    .unwrap_or_else(|e| panic!("metric `{series}` has value `{value}`: {e}"))
            })
        })
        .collect();
    assert!(
        !values.is_empty(),
        "no series `{name}` in the metrics:\n{prom}"
    );
    values.iter().sum()
}

/// `name{a="x",b="y"}` as its name and its label pairs.
fn split_series(series: &str) -> (&str, Vec<&str>) {
    match series.split_once('{') {
        Some((name, rest)) => (
            name,
            rest.trim_end_matches('}')
                .split(',')
                .filter(|p| !p.is_empty())
                .collect(),
        ),
        None => (series, Vec::new()),
    }
}

/// Serialises the tests that train networks: on a 2-core machine two of
/// them at once would each run at half speed and blur their budgets.
pub fn heavy() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// What an embedded run (`learner-server run --local-actors 4`) printed.
#[derive(Debug)]
pub struct Embedded {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

/// A run of the counting env (`Counting-v0`, every transition
/// recognisable) with the `probe` agent, which records every transition it
/// trains on: `episodes` episodes, batches of 3 steps, a new policy
/// version every 5 transitions, no evaluations to speak of.
pub fn counting_probe(
    name: &str,
    workflow: &str,
    transport: rlfleet_shared::config::TransportKind,
    seed: u64,
    episodes: u64,
    output_dir: &Path,
) -> rlfleet_shared::config::RunConfig {
    let text = format!(
        r#"
name = "{name}"
env = "Counting-v0"
agent = "probe"
workflow = "{workflow}"
transport = "{transport}"
seed = {seed}
output_dir = "{}"
[stop]
max_episodes = {episodes}
max_wall_secs = 120.0
[eval]
period_steps = 1000000
episodes = 1
[distributed]
batch_step_frequency = 3
[probe]
train_every = 5
"#,
        output_dir.display()
    );
    rlfleet_shared::config::RunConfig::from_toml(&text, name).expect("a valid counting config")
}

impl From<Output> for Embedded {
    fn from(out: Output) -> Embedded {
        Embedded {
            success: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

/// Writes `cfg` resolved into `dir` as `NAME-WORKFLOW[-SUFFIX].toml`.
fn write_config(cfg: &rlfleet_shared::config::RunConfig, dir: &Path, suffix: &str) -> PathBuf {
    let path = dir.join(format!("{}-{}{suffix}.toml", cfg.name, cfg.workflow));
    std::fs::write(&path, cfg.to_resolved_toml()).expect("write the run config");
    path
}

/// Writes `cfg` resolved into `dir` and runs `learner-server run
/// --no-progress --local-actors 4 [extra] CONFIG` to completion.
pub fn run_embedded(
    cfg: &rlfleet_shared::config::RunConfig,
    dir: &Path,
    extra: &[&str],
) -> Embedded {
    let mut args = vec!["--local-actors", "4"];
    args.extend_from_slice(extra);
    run_learner(cfg, dir, &args)
}

/// Writes `cfg` resolved into `dir` and runs `learner-server run
/// --no-progress CONFIG` (a `single` run) to completion.
pub fn run_single(cfg: &rlfleet_shared::config::RunConfig, dir: &Path) -> Embedded {
    run_learner(cfg, dir, &[])
}

/// Runs the shipped `config/NAME.toml` (changed by `adjust`) under
/// `single` for `steps` env steps, with its output in `dir/NAME`; checks
/// that it succeeded and stopped at `steps`. The config as run, its
/// summary, and what it printed.
pub fn run_shipped_single(
    name: &str,
    steps: u64,
    dir: &Path,
    adjust: impl FnOnce(&mut rlfleet_shared::config::RunConfig),
) -> (rlfleet_shared::config::RunConfig, toml::Value, String) {
    let shipped = workspace_root().join(format!("config/{name}.toml"));
    let mut cfg = rlfleet_shared::config::RunConfig::load(&shipped).unwrap();
    cfg.output_dir = dir.join(name);
    cfg.stop.max_env_steps = Some(steps);
    adjust(&mut cfg);
    let out = run_single(&cfg, dir);
    assert!(out.success, "{name}\n{}\n{}", out.stdout, out.stderr);
    let summary = read_summary(&cfg.output_dir);
    assert_eq!(
        summary["env_steps"].as_integer(),
        Some(steps as i64),
        "{name}: {summary}"
    );
    (cfg, summary, out.stdout)
}

/// `mpirun` as the MPI tests start it: allowed as root, and
/// oversubscribed (more ranks than cores).
pub fn mpirun() -> Command {
    let mut c = Command::new("mpirun");
    c.arg("--oversubscribe")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    c
}

/// Writes `cfg` resolved into `dir` and runs it as an MPI job under real
/// `mpirun`: `-n 1 learner-server mpi CONFIG : -n ACTORS actor-client mpi
/// [actor_args]` (as root, oversubscribed: more ranks than cores).
pub fn run_mpi(
    cfg: &rlfleet_shared::config::RunConfig,
    dir: &Path,
    actors: usize,
    actor_args: &[&str],
) -> Embedded {
    run_mpi_groups(cfg, dir, 1, &[(actors, actor_args)])
}

/// As [`run_mpi`], with `learners` learner ranks and groups of actor ranks
/// that get different flags (`: -n N actor-client mpi FLAGS` each).
pub fn run_mpi_groups(
    cfg: &rlfleet_shared::config::RunConfig,
    dir: &Path,
    learners: usize,
    groups: &[(usize, &[&str])],
) -> Embedded {
    let child = mpi_job(cfg, dir, learners, &[], groups)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run mpirun (OpenMPI is installed by scripts/setup.sh)");
    wait_output(
        child,
        run_limit(cfg),
        &format!("the MPI job of `{}`", cfg.name),
    )
    .into()
}

/// How long a run's process may take: its wall-time stop with two minutes
/// to start and end, or ten minutes when it has none.
pub fn run_limit(cfg: &rlfleet_shared::config::RunConfig) -> std::time::Duration {
    match cfg.stop.max_wall_secs {
        Some(secs) => std::time::Duration::from_secs_f64(secs + 120.0),
        None => std::time::Duration::from_secs(600),
    }
}

/// The `mpirun` command of [`run_mpi_groups`], with `learner_args` for
/// the learner ranks; runs are recorded in `dir/state`.
pub fn mpi_job(
    cfg: &rlfleet_shared::config::RunConfig,
    dir: &Path,
    learners: usize,
    learner_args: &[&str],
    groups: &[(usize, &[&str])],
) -> Command {
    let cfg_path = write_config(cfg, dir, "-mpi");
    let mut cmd = mpirun();
    cmd.args(["-n", &learners.to_string()])
        .arg(binary("learner-server"))
        .arg("mpi")
        .arg("--state-dir")
        .arg(dir.join("state"))
        .arg(&cfg_path)
        .args(learner_args);
    for (n, args) in groups {
        cmd.args([":", "-n", &n.to_string()])
            .arg(binary("actor-client"))
            .arg("mpi")
            .args(*args);
    }
    cmd.env("RUST_LOG", "warn");
    cmd
}

fn run_learner(cfg: &rlfleet_shared::config::RunConfig, dir: &Path, args: &[&str]) -> Embedded {
    let cfg_path = write_config(cfg, dir, "");
    let child = Command::new(binary("learner-server"))
        .args(["run", "--no-progress", "--state-dir"])
        .arg(dir.join("state"))
        .args(args)
        .arg(&cfg_path)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run learner-server");
    wait_output(
        child,
        run_limit(cfg),
        &format!("`learner-server run` of `{}`", cfg.name),
    )
    .into()
}

/// The episode ids in a run's `episodes.csv`, sorted, and the sum of the
/// episodes' lengths.
pub fn episode_ids_and_steps(output_dir: &Path) -> (Vec<u64>, u64) {
    let eps =
        rlfleet_output::read_episodes(&output_dir.join("episodes.csv")).expect("read episodes.csv");
    let mut ids: Vec<u64> = eps.iter().map(|e| e.episode).collect();
    ids.sort();
    let steps = eps.iter().map(|e| u64::from(e.length)).sum();
    (ids, steps)
}

/// A run's `summary.toml`, parsed.
pub fn read_summary(output_dir: &Path) -> toml::Value {
    let text = std::fs::read_to_string(output_dir.join("summary.toml")).expect("read summary.toml");
    toml::from_str(&text).expect("summary.toml parses")
}
