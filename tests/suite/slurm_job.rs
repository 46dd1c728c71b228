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
    /// Emulated node names (empty: one node, this host).
    nodes: Vec<String>,
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
    /// One node: this host.
    fn start() -> Cluster {
        Cluster::start_nodes(0)
    }

    /// `nodes` emulated nodes `node1..` on this host (0: one node, this
    /// host itself): one slurmd per node name (`slurmd -N`), each with its
    /// own port, and `%n` in every per-node path (`TmpFS` too, or the PMIx
    /// plugins of two nodes' steps share a directory); node1 declares a GPU
    /// (`/dev/null`) for the scripts that ask for one.
    fn start_nodes(nodes: usize) -> Cluster {
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
        let (names, node_lines, per_node) = if nodes == 0 {
            let line = format!("NodeName={host} NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN\n");
            (vec![None], line, String::new())
        } else {
            let lines: String = (1..=nodes)
                .map(|i| {
                    let gpu = if i == 1 { " Gres=gpu:1" } else { "" };
                    format!(
                        "NodeName=node{i} NodeAddr=127.0.0.1 NodeHostname={host} Port={} \
                         CPUs=4{gpu} State=UNKNOWN\n",
                        free_port()
                    )
                })
                .collect();
            std::fs::write(
                d.join("gres.conf"),
                "NodeName=node1 Name=gpu File=/dev/null\n",
            )
            .unwrap();
            for i in 1..=nodes {
                std::fs::create_dir_all(d.join(format!("tmp/node{i}"))).unwrap();
                std::fs::create_dir(d.join(format!("spool-node{i}"))).unwrap();
            }
            let names = (1..=nodes).map(|i| Some(format!("node{i}"))).collect();
            (
                names,
                lines,
                format!("GresTypes=gpu\nTmpFS={}/%n\n", p("tmp")),
            )
        };
        let n = if nodes == 0 { "" } else { "-%n" };
        let conf = d.join("slurm.conf");
        // Only the backfill scheduler starts a heterogeneous job: every
        // second rather than its default 30.
        std::fs::write(
            &conf,
            format!(
                "ClusterName=rlfleet-test\n\
                 SlurmctldHost={host}(127.0.0.1)\n\
                 SlurmctldPort={ctld}\nSlurmdPort={slurmd}\n\
                 SlurmUser=root\nSlurmdUser=root\n\
                 AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket={socket}\n\
                 StateSaveLocation={state}\nSlurmdSpoolDir={spool}{n}\n\
                 SlurmctldPidFile={ctld_pid}\nSlurmdPidFile={slurmd_pid}{n}\n\
                 SlurmctldLogFile={ctld_log}\nSlurmdLogFile={slurmd_log}{n}\n\
                 ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n\
                 SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\n\
                 SlurmdParameters=config_overrides\n\
                 JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n\
                 MpiDefault=none\nReturnToService=2\nMinJobAge=600\n\
                 SchedulerParameters=bf_interval=1\n{per_node}\
                 {node_lines}\
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
        let cluster = Cluster {
            dir,
            conf,
            nodes: names.iter().flatten().cloned().collect(),
        };
        run(Command::new("slurmctld")
            .arg("-i")
            .arg("-f")
            .arg(&cluster.conf));
        for name in &names {
            let mut slurmd = Command::new("slurmd");
            slurmd.arg("-f").arg(&cluster.conf);
            if let Some(name) = name {
                slurmd.args(["-N", name]);
            }
            run(&mut slurmd);
        }
        let t0 = Instant::now();
        loop {
            let out = rlfleet_tests::output_within(
                cluster.cmd("sinfo").args(["-h", "-N", "-o", "%T"]),
                Duration::from_secs(60),
                "sinfo",
            );
            let states = String::from_utf8_lossy(&out.stdout).into_owned();
            if states.lines().count() == names.len() && states.lines().all(|l| l.trim() == "idle") {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "the nodes never became idle: {states}\n{}",
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

    /// The daemons' logs (`slurmctld.log`, `slurmd.log*`).
    fn logs(&self) -> String {
        let mut files: Vec<PathBuf> = std::fs::read_dir(self.dir.path())
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        files.retain(|f| f.to_string_lossy().contains(".log"));
        files.sort();
        files
            .iter()
            .map(|f| std::fs::read_to_string(f).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// `sbatch --parsable` of run config `run_cfg` (with one env per
    /// actor rank and this build's binaries), printing to `job_out`,
    /// submitted from the checkout as the scripts ask; the caller adds
    /// the allocation and the script.
    fn sbatch(&self, run_cfg: &Path, job_out: &Path) -> Command {
        let bin = binary("learner-server").parent().unwrap().to_path_buf();
        let mut c = self.cmd("sbatch");
        c.args(["--parsable", "--time=10"])
            .arg(format!("--output={}", job_out.display()))
            .current_dir(workspace_root())
            .env("RUN", run_cfg)
            .env("ENVS", "1")
            .env("BIN", &bin)
            .env("RUST_LOG", "warn")
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
        c
    }

    /// Waits for job `id` to end (at most 300 s); its state.
    fn wait_job(&self, id: &str, job_out: &Path) -> String {
        let t0 = Instant::now();
        loop {
            let state = self.job_field(id, "JobState");
            if !["PENDING", "CONFIGURING", "RUNNING", "COMPLETING"].contains(&state.as_str()) {
                return state;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(300),
                "job {id} still {state} after 300 s:\n{}\n{}\n{}",
                std::fs::read_to_string(job_out).unwrap_or_default(),
                job_processes(),
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Every `key=value` of `scontrol show job ID` for `key` (one per
    /// component of a heterogeneous job).
    fn job_fields(&self, id: &str, key: &str) -> Vec<String> {
        let out = run(self.cmd("scontrol").args(["show", "job", id]));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.split_whitespace()
            .filter_map(|kv| kv.strip_prefix(&format!("{key}=")))
            .map(str::to_string)
            .collect()
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

/// What the job's processes are doing: for every `learner-server`,
/// `actor-client`, `srun` and `slurmstepd` process, its threads' names, states and
/// kernel wait channels, and their stacks from `gdb` where it is installed
/// (a job that outlives its run says where it waits).
fn job_processes() -> String {
    let read = |p: PathBuf| std::fs::read_to_string(p).unwrap_or_default();
    let mut out = String::from("the job's processes:\n");
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let dir = entry.path();
        let cmdline = read(dir.join("cmdline")).replace('\0', " ");
        if !["learner-server", "actor-client", "slurmstepd", "srun"]
            .iter()
            .any(|b| cmdline.contains(b))
        {
            continue;
        }
        let pid = entry.file_name().to_string_lossy().into_owned();
        out += &format!("pid {pid}: {cmdline}\n");
        for task in std::fs::read_dir(dir.join("task"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let t = task.path();
            let state = read(t.join("status"))
                .lines()
                .find(|l| l.starts_with("State:"))
                .unwrap_or_default()
                .to_string();
            out += &format!(
                "  thread {} {}: {state}, waits in {}\n",
                task.file_name().to_string_lossy(),
                read(t.join("comm")).trim(),
                read(t.join("wchan"))
            );
        }
        let gdb = Command::new("gdb")
            .args(["-p", &pid, "-batch", "-ex", "thread apply all bt 12"])
            .stdin(std::process::Stdio::null())
            .output();
        if let Ok(o) = gdb {
            out += &String::from_utf8_lossy(&o.stdout);
        }
    }
    out
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
        for n in &self.nodes {
            stop_by_pid_file(&d.join(format!("slurmd.pid-{n}")));
        }
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
    let job_out = d.join("job.out");
    let mut sbatch = cluster.sbatch(&run_cfg, &job_out);
    sbatch
        .args(["--ntasks=3"])
        .arg(workspace_root().join("slurm/single-node.sbatch"));
    let id = String::from_utf8_lossy(&run(&mut sbatch).stdout)
        .trim()
        .to_string();
    let state = cluster.wait_job(&id, &job_out);
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

/// `slurm/multi-node.sbatch` as a heterogeneous job on three emulated
/// nodes: the learner rank on node1, two env groups of 2 ranks
/// (`RANKS_PER_ENV=2`) on node2 and node3, `HeatRod-v0` split over each
/// group's ranks across the job's one MPI_COMM_WORLD; exact episode counts.
#[test]
fn the_multi_node_hetjob_runs_env_groups_of_two_ranks_on_two_nodes() {
    let _heavy = rlfleet_tests::heavy();
    let cluster = Cluster::start_nodes(3);
    let d = cluster.dir.path();
    let out_dir = d.join("run");
    let run_cfg = d.join("run.toml");
    std::fs::write(
        &run_cfg,
        format!(
            "name = \"slurm-heat\"\nenv = \"HeatRod-v0\"\nagent = \"probe\"\n\
             workflow = \"async\"\ntransport = \"mpi\"\nranks_per_env = 2\nseed = 1\n\
             output_dir = \"{}\"\n[stop]\nmax_episodes = 40\n[eval]\nperiod_steps = 1000000\n",
            out_dir.display()
        ),
    )
    .unwrap();
    let job_out = d.join("job.out");
    let t0 = Instant::now();
    // The script's components, made small: one learner task, and 2 nodes
    // of 2 actor tasks.
    let mut sbatch = cluster.sbatch(&run_cfg, &job_out);
    sbatch
        .args([
            "--nodes=1",
            "--ntasks=1",
            "--cpus-per-task=1",
            "--gres=gpu:1",
        ])
        .args([":", "--nodes=2", "--ntasks-per-node=2", "--cpus-per-task=1"])
        .arg(workspace_root().join("slurm/multi-node.sbatch"))
        // One host playing three: OpenMPI's shared-memory transport
        // crashes when ranks on one host are told they are on different
        // nodes (docs/deploying.md, "Slurm").
        .env("OMPI_MCA_btl", "self,tcp")
        .env("OMPI_MCA_pml", "ob1");
    let id = String::from_utf8_lossy(&run(&mut sbatch).stdout)
        .trim()
        .to_string();
    cluster.wait_job(&id, &job_out);
    let printed = std::fs::read_to_string(&job_out).unwrap_or_default();
    let states = cluster.job_fields(&id, "JobState");
    assert_eq!(
        states,
        ["COMPLETED", "COMPLETED"],
        "{printed}\n{}",
        cluster.logs()
    );
    assert_eq!(
        cluster.job_fields(&id, "ExitCode"),
        ["0:0", "0:0"],
        "{printed}"
    );
    assert_eq!(
        cluster.job_fields(&id, "NodeList"),
        ["node1", "node[2-3]"],
        "{printed}"
    );
    assert!(
        printed.contains("episode limit reached"),
        "{printed}\n{}",
        cluster.logs()
    );
    // Two leaders, two followers that stepped with them.
    assert_eq!(printed.matches("actor done:").count(), 2, "{printed}");
    assert_eq!(printed.matches("env rank ").count(), 2, "{printed}");
    let summary: toml::Value =
        toml::from_str(&std::fs::read_to_string(out_dir.join("summary.toml")).unwrap()).unwrap();
    assert_eq!(summary["episodes"].as_integer(), Some(40), "{summary}");
    assert_eq!(
        summary["env_steps"].as_integer(),
        Some(40 * 100),
        "{summary}"
    );
    assert_eq!(summary["env_errors"].as_integer(), Some(0), "{summary}");
    eprintln!(
        "slurm hetjob {id}: {} in {:.1} s (submission to end)",
        summary["reason"],
        t0.elapsed().as_secs_f64()
    );
}
