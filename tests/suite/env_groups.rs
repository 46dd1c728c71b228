//! Envs that span MPI ranks (`ranks_per_env`, issue 31) under real
//! `mpirun`: a Python env that steps through its group's mpi4py
//! communicator runs on every rank of every group, every step, with exact
//! episode ids, for K = 1, 2 and 4 under `async` and `rma`, and K = 2
//! under `rma-queue-pop-all`, `seed`, `ml-async` and `ml-rma`; a rank that
//! raises, or hangs past `env_step_timeout_secs`, costs its group one
//! episode (re-issued, the job goes on, the learner's log names the group
//! and the rank); ranks that disagree are refused by name; the built-in
//! `HeatRod-v0` learns with 2 ranks per env.

use rlfleet_shared::config::RunConfig;
use rlfleet_tests::{episode_ids_and_steps, heavy, run_mpi_groups, workspace_root};
use std::collections::BTreeMap;
use std::path::Path;

/// The GroupCounting test env, `episodes` episodes, writing its step
/// counts to `dir/steps-RANK`.
fn counting(workflow: &str, k: u32, episodes: u64, extra: &str, dir: &Path) -> RunConfig {
    let text = format!(
        r#"
name = "groups"
env = "python:rlfleet_test_envs:GroupCounting"
env_kwargs = {{ log_dir = "{log}"{extra} }}
python_path = ["{envs}"]
agent = "probe"
workflow = "{workflow}"
transport = "mpi"
ranks_per_env = {k}
seed = 3
output_dir = "{out}"
[stop]
max_episodes = {episodes}
max_wall_secs = 120.0
[eval]
period_steps = 1000000
episodes = 1
"#,
        log = dir.display(),
        envs = workspace_root().join("tests/envs").display(),
        out = dir.join("out").display(),
    );
    std::fs::create_dir_all(dir).unwrap();
    RunConfig::from_toml(&text, "groups").unwrap()
}

/// `steps-RANK` files: world rank → (steps that rank took, ranks its last
/// step's allreduce counted).
fn step_counts(dir: &Path) -> BTreeMap<i32, (u64, u64)> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let e = e.unwrap();
            let name = e.file_name().into_string().unwrap();
            let rank: i32 = name.strip_prefix("steps-")?.parse().ok()?;
            let text = std::fs::read_to_string(e.path()).unwrap();
            let mut w = text.split_whitespace().map(|x| x.parse::<u64>().unwrap());
            Some((rank, (w.next().unwrap(), w.next().unwrap())))
        })
        .collect()
}

/// Runs `cfg` with `learners` learner ranks and `actors` actor ranks
/// given `--ranks-per-env k --envs 2`; checks the job ended 0 with every
/// episode once, and that every rank of each group stepped as often as
/// its leader. Returns stderr.
fn run_groups(cfg: &RunConfig, learners: usize, actors: usize, k: u32, dir: &Path) -> String {
    let flag = k.to_string();
    let args = ["--ranks-per-env", &flag, "--envs", "2"];
    let out = run_mpi_groups(cfg, dir, learners, &[(actors, &args[..])]);
    let (stdout, stderr) = (&out.stdout, &out.stderr);
    let what = format!("{} K={k}", cfg.workflow);
    assert!(out.success, "{what}: {stdout}\n{stderr}");
    assert!(
        stdout.starts_with("episode limit reached"),
        "{what}: {stdout}"
    );
    let episodes = cfg.stop.max_episodes.unwrap();
    let (ids, steps) = episode_ids_and_steps(&cfg.output_dir);
    assert_eq!(ids, (0..episodes).collect::<Vec<u64>>(), "{what}");
    let summary = rlfleet_tests::read_summary(&cfg.output_dir);
    let abandoned = summary["learner"]["env_steps_abandoned"]
        .as_integer()
        .unwrap();
    let faults = summary["env_errors"].as_integer().unwrap();
    assert_eq!(
        summary["env_steps"].as_integer(),
        Some(steps as i64 + abandoned),
        "{what}"
    );
    // The actor ranks are the world ranks after the learners'.
    let counts = step_counts(dir);
    let first = learners as i32;
    let mut leaders_steps = 0;
    for group in (first..first + actors as i32)
        .collect::<Vec<_>>()
        .chunks(k as usize)
    {
        let lead = counts.get(&group[0]).copied().unwrap_or((0, 0));
        leaders_steps += lead.0;
        for r in group {
            assert_eq!(
                counts.get(r).copied(),
                Some((lead.0, u64::from(k))),
                "{what}: rank {r} against its leader {} ({counts:?})",
                group[0]
            );
        }
    }
    // (A faulted episode's steps before the fault were stepped too.)
    if faults == 0 {
        assert_eq!(leaders_steps, steps, "{what}: {counts:?}");
    }
    stderr.clone()
}

#[test]
fn every_rank_of_every_group_steps_every_step_for_k_1_2_and_4() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    for workflow in ["async", "rma"] {
        for k in [1, 2, 4] {
            let d = dir.path().join(format!("{workflow}-{k}"));
            let cfg = counting(workflow, k, 40, "", &d);
            let stderr = run_groups(&cfg, 1, 8, k, &d);
            let followers = stderr
                .lines()
                .filter(|l| l.starts_with("env rank "))
                .count();
            assert_eq!(followers, 8 - 8 / k as usize, "{workflow} K={k}: {stderr}");
        }
    }
    // The other families, groups of 2: the queue-draining `rma`, SEED
    // inference, and two learner ranks.
    for (workflow, learners) in [
        ("rma-queue-pop-all", 1),
        ("seed", 1),
        ("ml-async", 2),
        ("ml-rma", 2),
    ] {
        let d = dir.path().join(format!("{workflow}-2"));
        let cfg = counting(workflow, 2, 40, "", &d);
        run_groups(&cfg, learners, 4, 2, &d);
    }
}

#[test]
fn a_rank_that_hangs_past_the_step_limit_costs_its_group_one_episode() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("hang");
    // Rank 1 of each group sleeps 20 s at its 5th step, before the
    // allreduce its leader waits in; the limit is 0.5 s.
    let mut cfg = counting("async", 2, 30, ", sleep_rank = 1, sleep_at = 5", &d);
    cfg.distributed.env_step_timeout_secs = 0.5;
    let stderr = run_groups(&cfg, 1, 4, 2, &d);
    let summary = rlfleet_tests::read_summary(&cfg.output_dir);
    assert_eq!(summary["env_errors"].as_integer(), Some(2), "{stderr}");
    for group in [0, 1] {
        let place = format!("(on rank 0 of env group {group} ");
        assert!(
            stderr.lines().any(|l| l.contains("rlfleet_run::")
                && l.contains(
                    "TimeoutError: the step took longer than env_step_timeout_secs (0.5 s)"
                )
                && l.contains(&place)),
            "{stderr}"
        );
    }
    // The sleeping ranks gave up on the step once told.
    assert_eq!(
        stderr
            .lines()
            .filter(|l| l.starts_with("env rank ") && l.ends_with("0 raised, 1 abandoned"))
            .count(),
        2,
        "{stderr}"
    );
}

#[test]
fn a_rank_that_raises_costs_its_group_one_episode_and_the_job_goes_on() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    // Group rank 1 (then the leader) of each group raises at its 7th
    // step, before the step's allreduce: the other rank is left waiting in
    // it, and gives up.
    for raising in [1, 0] {
        let d = dir.path().join(format!("fault-{raising}"));
        let extra = format!(", raise_rank = {raising}, raise_at = 7");
        let cfg = counting("async", 2, 40, &extra, &d);
        let stderr = run_groups(&cfg, 1, 4, 2, &d);
        let summary = rlfleet_tests::read_summary(&cfg.output_dir);
        assert_eq!(summary["env_errors"].as_integer(), Some(2), "{stderr}");
        for (group, leader) in [(0, 1), (1, 3)] {
            let named = format!(
                "RuntimeError: simulated failure of group rank {raising} (at {}",
                workspace_root()
                    .join("tests/envs/rlfleet_test_envs.py")
                    .display()
            );
            let world = leader + raising;
            let place = format!(
                "(on rank {raising} of env group {group} (world rank {world}; the group's ranks: [{leader}, {}]))",
                leader + 1
            );
            assert!(
                stderr.lines().any(|l| l.contains("rlfleet_run::")
                    && l.contains(&named)
                    && l.contains(&place)
                    && l.contains("requeued=true")),
                "the learner's log names group {group}'s rank {raising}: {stderr}"
            );
            // Two envs built, one rebuilt; the follower raised or gave up
            // once.
            let (raised, abandoned) = if raising == 1 { (1, 0) } else { (0, 1) };
            let report = format!("env rank {}: 3 env builds,", leader + 1);
            let tail = format!("{raised} raised, {abandoned} abandoned");
            assert!(
                stderr
                    .lines()
                    .any(|l| l.starts_with(&report) && l.ends_with(&tail)),
                "{report} … {tail}: {stderr}"
            );
        }
    }
}

#[test]
fn ranks_that_disagree_are_refused_by_name() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    // One rank started with another --ranks-per-env: the job ends with
    // the reason before anything runs.
    let d = dir.path().join("flag");
    let cfg = counting("async", 2, 10, "", &d);
    let (two, one) = (["--ranks-per-env", "2"], ["--ranks-per-env", "1"]);
    let out = run_mpi_groups(&cfg, &d, 1, &[(3, &two[..]), (1, &one[..])]);
    assert!(!out.success, "{}", out.stdout);
    assert!(
        out.stderr.contains(
            "actor rank 4 was started with --ranks-per-env 1; the run says ranks_per_env = 2"
        ),
        "{}",
        out.stderr
    );
    // World rank 4 builds an env with another observation size: its
    // group is refused (its leader leaves the run, naming the rank), the
    // other group finishes the run.
    let d = dir.path().join("obs");
    let cfg = counting("async", 2, 20, ", wide_world_rank = 4", &d);
    let args = ["--ranks-per-env", "2"];
    let out = run_mpi_groups(&cfg, &d, 1, &[(4, &args[..])]);
    assert!(out.success, "{}\n{}", out.stdout, out.stderr);
    let (ids, _) = episode_ids_and_steps(&cfg.output_dir);
    assert_eq!(ids, (0..20).collect::<Vec<u64>>());
    assert!(
        out.stderr.contains(
            "rank 1 of env group 1 (world rank 4; the group's ranks: [3, 4]): built \
             `python:rlfleet_test_envs:GroupCounting` with 4 observation values"
        ),
        "{}",
        out.stderr
    );
}

/// Learning-to-target tests of this area (selected by `learn::`).
mod learn {
    use super::*;

    #[test]
    fn heat_rod_learns_with_two_ranks_per_env_under_async() {
        let _heavy = heavy();
        let dir = tempfile::tempdir().unwrap();
        let shipped = workspace_root().join("config/heatrod-dqn-async.toml");
        let mut cfg = RunConfig::load(&shipped).unwrap();
        cfg.output_dir = dir.path().join("heat");
        let args = ["--ranks-per-env", "2"];
        let out = run_mpi_groups(&cfg, dir.path(), 1, &[(4, &args[..])]);
        let (stdout, stderr) = (&out.stdout, &out.stderr);
        assert!(out.success, "{stdout}\n{stderr}");
        assert!(
            stdout.starts_with("target reached (evaluation mean")
                && stdout.contains("confirmed over 100 episodes"),
            "{stdout}"
        );
        // Both followers stepped.
        let followers: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("env rank "))
            .collect();
        assert_eq!(followers.len(), 2, "{stderr}");
        eprintln!("HeatRod-v0, K = 2: {}", stdout.trim());
    }
}
