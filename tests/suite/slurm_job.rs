//! `slurm/single-node.sbatch` under a real single-node Slurm: Debian's
//! `munged`, `slurmctld` and `slurmd`, started here as root on loopback
//! with their state, sockets and logs in a temporary folder, and stopped at
//! the end (also when the test fails). `sbatch` runs the script; `srun`
//! starts the learner rank and the actor ranks (PMIx); the run goes to its
//! target. The job's state is read from `scontrol`, the run's outcome from
//! its `summary.toml`.

use rlfleet_tests::{binary, workspace_root};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The three daemons of a one-node cluster; stopped on drop.
struct Cluster {
    dir: tempfile::TempDir,
    conf: PathBuf,
}

fn run(cmd: &mut Command) -> Output {
    let what = format!("{cmd:?} (scripts/setup.sh installs Slurm)");
    let out = rlfleet_tests::output_within(cmd, Duration::from_secs(120), &what);
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Cluster {
    fn start() -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let munge = d.join("munge");
        for sub in ["munge", "state", "spool"] {
            std::fs::create_dir(d.join(sub)).unwrap();
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&munge, std::fs::Permissions::from_mode(0o700)).unwrap();
        let key = munge.join("munge.key");
        run(Command::new("mungekey")
            .arg("--create")
            .arg("--keyfile")
            .arg(&key));
        let socket = munge.join("munge.socket");
        run(Command::new("munged")
            .arg("--force")
            .arg(format!("--key-file={}", key.display()))
            .arg(format!("--socket={}", socket.display()))
            .arg(format!("--pid-file={}", munge.join("munged.pid").display()))
            .arg(format!("--log-file={}", munge.join("munged.log").display()))
            .arg(format!("--seed-file={}", munge.join("seed").display())));
        let host = String::from_utf8(run(Command::new("hostname").arg("-s")).stdout).unwrap();
        let host = host.trim();
        let p = |name: &str| d.join(name).display().to_string();
        let conf = d.join("slurm.conf");
        std::fs::write(
            &conf,
            format!(
                "ClusterName=rlfleet-test\n\
                 SlurmctldHost={host}(127.0.0.1)\n\
                 SlurmctldPort={ctld}\nSlurmdPort={slurmd}\n\
                 SlurmUser=root\nSlurmdUser=root\n\
                 AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket={socket}\n\
                 StateSaveLocation={state}\nSlurmdSpoolDir={spool}\n\
                 SlurmctldPidFile={ctld_pid}\nSlurmdPidFile={slurmd_pid}\n\
                 SlurmctldLogFile={ctld_log}\nSlurmdLogFile={slurmd_log}\n\
                 ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n\
                 SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\n\
                 SlurmdParameters=config_overrides\n\
                 JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n\
                 MpiDefault=none\nReturnToService=2\nMinJobAge=600\n\
                 NodeName={host} NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN\n\
                 PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES\n",
                ctld = free_port(),
                slurmd = free_port(),
                socket = socket.display(),
                state = p("state"),
                spool = p("spool"),
                ctld_pid = p("slurmctld.pid"),
                slurmd_pid = p("slurmd.pid"),
                ctld_log = p("slurmctld.log"),
                slurmd_log = p("slurmd.log"),
            ),
        )
        .unwrap();
        let cluster = Cluster { dir, conf };
        run(Command::new("slurmctld")
            .arg("-i")
            .arg("-f")
            .arg(&cluster.conf));
        run(Command::new("slurmd").arg("-f").arg(&cluster.conf));
        let t0 = Instant::now();
        loop {
            let out = rlfleet_tests::output_within(
                cluster.cmd("sinfo").args(["-h", "-o", "%T"]),
                Duration::from_secs(60),
                "sinfo",
            );
            if String::from_utf8_lossy(&out.stdout).trim() == "idle" {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "the node never became idle: {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                cluster.logs()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        cluster
    }

    /// A Slurm client command pointed at this cluster.
    fn cmd(&self, name: &str) -> Command {
        let mut c = Command::new(name);
        c.env("SLURM_CONF", &self.conf);
        c
    }

    fn logs(&self) -> String {
        ["slurmctld.log", "slurmd.log"]
            .iter()
            .map(|f| std::fs::read_to_string(self.dir.path().join(f)).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// `scontrol show job ID`'s `key=value` for `key`.
    fn job_field(&self, id: &str, key: &str) -> String {
        let out = run(self.cmd("scontrol").args(["show", "job", id]));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("no {key} in {text}"))
            .to_string()
    }
}

fn stop_by_pid_file(path: &Path) {
    let Ok(pid) = std::fs::read_to_string(path) else {
        return;
    };
    let pid = pid.trim().to_string();
    let _ = Command::new("kill").args(["-TERM", &pid]).status();
    let t0 = Instant::now();
    while Path::new(&format!("/proc/{pid}")).exists() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    if Path::new(&format!("/proc/{pid}")).exists() {
        let _ = Command::new("kill").args(["-KILL", &pid]).status();
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let d = self.dir.path();
        stop_by_pid_file(&d.join("slurmd.pid"));
        stop_by_pid_file(&d.join("slurmctld.pid"));
        stop_by_pid_file(&d.join("munge/munged.pid"));
    }
}

#[test]
fn the_single_node_sbatch_script_runs_to_the_target_under_slurm() {
    let _heavy = rlfleet_tests::heavy();
    let cluster = Cluster::start();
    let d = cluster.dir.path();
    let out_dir = d.join("run");
    let run_cfg = d.join("run.toml");
    std::fs::write(
        &run_cfg,
        format!(
            "name = \"slurm-cartpole\"\nenv = \"CartPole-v1\"\nagent = \"dqn\"\n\
             workflow = \"async\"\ntransport = \"mpi\"\nseed = 1\noutput_dir = \"{}\"\n\
             [stop]\ntarget_eval_return = 475.0\nmax_env_steps = 150000\nmax_episodes = 3000\n",
            out_dir.display()
        ),
    )
    .unwrap();
    let bin = binary("learner-server").parent().unwrap().to_path_buf();
    let job_out = d.join("job.out");
    let out = run(cluster
        .cmd("sbatch")
        .args(["--parsable", "--ntasks=3", "--time=10"])
        .arg(format!("--output={}", job_out.display()))
        .arg(workspace_root().join("slurm/single-node.sbatch"))
        // Submitted from the checkout, as the script asks.
        .current_dir(workspace_root())
        .env("RUN", &run_cfg)
        .env("ENVS", "1")
        .env("BIN", &bin)
        .env("RUST_LOG", "warn")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"));
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let t0 = Instant::now();
    let state = loop {
        let state = cluster.job_field(&id, "JobState");
        if !["PENDING", "CONFIGURING", "RUNNING", "COMPLETING"].contains(&state.as_str()) {
            break state;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(300),
            "job {id} still {state} after 300 s:\n{}",
            std::fs::read_to_string(&job_out).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    let printed = std::fs::read_to_string(&job_out).unwrap_or_default();
    assert_eq!(state, "COMPLETED", "{printed}\n{}", cluster.logs());
    assert_eq!(cluster.job_field(&id, "ExitCode"), "0:0", "{printed}");
    assert!(printed.contains("target reached"), "{printed}");
    // Two actor ranks, each reporting its episodes.
    assert_eq!(printed.matches("actor done:").count(), 2, "{printed}");
    let summary: toml::Value =
        toml::from_str(&std::fs::read_to_string(out_dir.join("summary.toml")).unwrap()).unwrap();
    assert_eq!(summary["target_reached"].as_bool(), Some(true), "{summary}");
    assert!(
        summary["confirm_eval_return"].as_float().unwrap() >= 475.0,
        "{summary}"
    );
    eprintln!("slurm job {id}: {}", summary["reason"]);
}
