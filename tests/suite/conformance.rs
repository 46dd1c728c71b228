//! The workflow conformance suite, in the spirit of EXARL's FakeEnv /
//! FakeAgent tests but with exact counts. Every single-learner workflow
//! (and each `rma` data structure and overflow rule) runs on `inproc` and
//! on `quic` with the counting env (`Counting-v0`: every transition is
//! recognisable by its episode tag and step index) and the `probe` agent,
//! which writes every transition it is given to `probe.csv` — and, built
//! with the `mpi` feature, over `mpi` under real `mpirun` (1 learner rank,
//! 3 actor ranks; the `rma` workflows deposit into RMA windows; the `ml-*`
//! workflows with 2 learner ranks and 4 actor ranks, whose weights must
//! end bit-identical), and once more with each actor an env group of 2
//! ranks (`ranks_per_env = 2`). From the run's
//! own output — `episodes.csv`, `batches.csv` (the learner's audit of every
//! batch), `probe.csv`, `summary.toml`, `metrics.prom` — and the actors'
//! reports it checks that:
//!
//! - episode ids 0..N are finished exactly once each, with the length and
//!   return the env's rules give for their seed, and the run ends on them;
//! - every step the actors took reached the learner in exactly one batch,
//!   which was trained or dropped for a reason the workflow allows;
//! - the agent saw each trained transition once, intact (s, a, r, s', done
//!   as the env defines them), and none twice; each episode's steps in
//!   order, or after a break the probe marks (`cut`: the agent was told
//!   to end what it held first); lossless workflows deliver every step of
//!   every episode;
//! - no batch carries a policy version newer than the learner's, and with
//!   `max_policy_lag` trained batches stay within it and stale ones are
//!   dropped;
//! - the actors' counts, the learner's counts and `/metrics` agree.
//!   (Policy versions an actor sees are monotonic: the actor refuses older
//!   weights and would fail the run.)

// (Panics when a series is missing: a renamed metric fails, never reads 0.)
use rlfleet_learning::agents::ProbeLine;
use rlfleet_run::workflows::remote::BatchLine;
use rlfleet_shared::config::{
    AgentKind, DataStructure, Overflow, RunConfig, TransportKind, WindowSelector,
};
use rlfleet_tests::daemon::{ActorCounts, actor_counts};
use rlfleet_tests::metric_value as metric;
use rlfleet_tests::{counting_probe, heavy, run_embedded, run_mpi, run_mpi_groups};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;

const EPISODES: u64 = 60;
const SEED: u64 = 3;

/// One workflow variant of the suite.
struct Case {
    /// The case's test name (`conformance::TRANSPORT::NAME`).
    name: &'static str,
    workflow: &'static str,
    /// Drop reasons its semantics allow.
    allowed: &'static [&'static str],
    tweak: fn(&mut RunConfig),
    /// `rma`: the pool's data structure and overflow rule.
    pool: Option<(DataStructure, Overflow)>,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "async_blocking",
            workflow: "async",
            allowed: &[],
            tweak: |_| {},
            pool: None,
        },
        Case {
            name: "sync",
            workflow: "sync",
            allowed: &[],
            tweak: |_| {},
            pool: None,
        },
        Case {
            name: "nb_async",
            workflow: "nb-async",
            allowed: &["stale"],
            // A tight staleness bound, so that some batches are dropped.
            tweak: |c| c.distributed.max_policy_lag = Some(1),
            pool: None,
        },
        Case {
            name: "async_window",
            workflow: "async-window",
            allowed: &[],
            tweak: |c| c.distributed.window_ms = 5,
            pool: None,
        },
        Case {
            name: "rma_queue_drop_oldest",
            workflow: "rma",
            allowed: &["overflow"],
            tweak: |_| {},
            pool: Some((DataStructure::Queue, Overflow::DropOldest)),
        },
        Case {
            name: "rma_queue_reject",
            workflow: "rma",
            allowed: &[],
            tweak: |_| {},
            pool: Some((DataStructure::Queue, Overflow::Reject)),
        },
        Case {
            name: "rma_stack_drop_oldest",
            workflow: "rma",
            allowed: &["overflow"],
            tweak: |_| {},
            pool: Some((DataStructure::Stack, Overflow::DropOldest)),
        },
        Case {
            name: "rma_stack_reject",
            workflow: "rma",
            allowed: &[],
            tweak: |_| {},
            pool: Some((DataStructure::Stack, Overflow::Reject)),
        },
        Case {
            name: "rma_buff_checked",
            workflow: "rma",
            allowed: &["overwritten"],
            tweak: |_| {},
            pool: Some((DataStructure::BuffChecked, Overflow::DropOldest)),
        },
        Case {
            name: "rma_buff_unchecked",
            workflow: "rma",
            allowed: &["overwritten"],
            tweak: |_| {},
            pool: Some((DataStructure::BuffUnchecked, Overflow::DropOldest)),
        },
        Case {
            name: "rma_queue_pop_all",
            workflow: "rma-queue-pop-all",
            allowed: &[],
            tweak: |c| c.distributed.data_structure_length = 3,
            pool: None,
        },
        Case {
            name: "random",
            workflow: "random",
            allowed: &[],
            tweak: |_| {},
            pool: None,
        },
        Case {
            name: "seed",
            workflow: "seed",
            allowed: &[],
            tweak: |_| {},
            pool: None,
        },
        Case {
            name: "orchestrated",
            workflow: "orchestrated",
            allowed: &[],
            tweak: |c| {
                c.distributed.samples_per_insert = 0.5;
                c.distributed.min_size_to_sample = 4;
                c.distributed.error_buffer = 2.0;
            },
            pool: None,
        },
        Case {
            name: "seed_a2c",
            workflow: "seed-a2c",
            allowed: &[],
            tweak: |_| {},
            pool: None,
        },
        // The front answering up to 64 batches ahead of training: acting
        // goes on while the run trains, and the books stay exact.
        Case {
            name: "seed_a2c_ahead",
            workflow: "seed-a2c",
            allowed: &[],
            tweak: |c| c.distributed.max_batches_ahead = 64,
            pool: None,
        },
        // Over MPI only: 2 learner ranks (each learner's probe records the
        // transitions of its share of the episodes).
        Case {
            name: "ml_async",
            workflow: "ml-async",
            allowed: &[],
            tweak: |_| {},
            pool: None,
        },
        Case {
            name: "ml_rma_random",
            workflow: "ml-rma",
            allowed: &[],
            tweak: |c| c.distributed.window_selector = WindowSelector::Random,
            pool: Some((DataStructure::Queue, Overflow::Reject)),
        },
        Case {
            name: "ml_rma_bin",
            workflow: "ml-rma",
            allowed: &["overflow"],
            tweak: |c| c.distributed.window_selector = WindowSelector::Bin,
            pool: Some((DataStructure::Stack, Overflow::DropOldest)),
        },
        Case {
            name: "ml_rma_queue",
            workflow: "ml-rma-queue",
            allowed: &[],
            tweak: |c| c.distributed.data_structure_length = 3,
            pool: None,
        },
        // Ends when the first learner's actor group is exhausted: episodes
        // other actors were still playing never finish, and what is left
        // in their queues is dropped.
        Case {
            name: "ml_rma_queue_short",
            workflow: "ml-rma-queue-short",
            allowed: &["run_ended"],
            tweak: |c| c.distributed.data_structure_length = 3,
            pool: None,
        },
    ]
}

/// Learner ranks a case runs with.
fn learners(case: &Case) -> usize {
    if case.workflow.starts_with("ml-") {
        2
    } else {
        1
    }
}

fn config(case: &Case, transport: TransportKind, dir: &Path, n: usize) -> RunConfig {
    let out = dir.join(format!("{}-{n}-{transport}", case.workflow));
    let mut cfg = counting_probe(
        "conformance",
        case.workflow,
        transport,
        SEED,
        EPISODES,
        &out,
    );
    cfg.distributed.steps_per_round = 3;
    cfg.distributed.in_flight = 3;
    cfg.distributed.batch_log = true;
    cfg.dqn.hidden = vec![8];
    (case.tweak)(&mut cfg);
    if let Some((structure, overflow)) = case.pool {
        cfg.distributed.data_structure = structure;
        cfg.distributed.overflow = overflow;
        cfg.distributed.data_structure_length = 3;
    }
    cfg.validate().unwrap();
    assert_eq!(cfg.agent, AgentKind::Probe);
    cfg
}

/// The expected length of an episode of `Counting-v0` for its id.
fn length_of(episode: u64) -> u64 {
    let seed = rlfleet_run::workflows::episode_seed(SEED, episode);
    rlfleet_shared::env::Counting::episode_length(seed)
        .min(u64::from(rlfleet_shared::env::COUNTING_MAX_STEPS))
}

/// The rows of one of the run's CSV files, read as the learner wrote them.
fn read_rows<T: serde::de::DeserializeOwned>(path: &Path) -> Vec<T> {
    rlfleet_output::read_csv(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn check(case: &Case, cfg: &RunConfig, reports: &[ActorCounts], actors: usize) {
    let what = format!(
        "{} ({:?}/{:?}) over {}",
        case.workflow, cfg.distributed.data_structure, cfg.distributed.overflow, cfg.transport
    );
    let dir = &cfg.output_dir;
    let summary: toml::Value =
        toml::from_str(&std::fs::read_to_string(dir.join("summary.toml")).unwrap()).unwrap();
    // `ml-rma-queue-short` ends early, on a group; every other workflow
    // finishes every episode.
    let short = case.workflow == "ml-rma-queue-short";
    let reason = summary["reason"].as_str().unwrap();
    if short {
        assert!(
            ["learner 0", "learner 1"]
                .iter()
                .any(|l| reason == format!("{l}'s actor group is exhausted")),
            "{what}: {reason}"
        );
    } else {
        assert_eq!(reason, "episode limit reached", "{what}");
    }

    // Episodes: ids 0..N once each, lengths and returns as the env says.
    let eps = rlfleet_output::read_episodes(&dir.join("episodes.csv")).unwrap();
    let finished = eps.len() as u64;
    assert_eq!(summary["episodes"].as_integer(), Some(finished as i64));
    let mut ids: Vec<u64> = eps.iter().map(|e| e.episode).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(
        ids.len() as u64,
        finished,
        "{what}: an episode finished twice"
    );
    if short {
        assert!(ids.iter().all(|&i| i < EPISODES), "{what}: {ids:?}");
    } else {
        assert_eq!(ids, (0..EPISODES).collect::<Vec<_>>(), "{what}");
    }
    for e in &eps {
        let l = length_of(e.episode);
        assert_eq!(u64::from(e.length), l, "{what}: episode {}", e.episode);
        assert_eq!(
            e.ret,
            (l * (l + 1) / 2) as f64,
            "{what}: episode {}",
            e.episode
        );
    }
    let all_steps: u64 = (0..EPISODES).map(length_of).sum();

    // Actors: every step they took belongs to a counted episode (in a
    // short run, at least the finished episodes' steps were taken).
    assert_eq!(reports.len(), actors, "{what}");
    let actor_steps: u64 = reports.iter().map(|r| r.env_steps).sum();
    let actor_episodes: u64 = reports.iter().map(|r| r.episodes).sum();
    if short {
        let finished_steps: u64 = ids.iter().map(|&i| length_of(i)).sum();
        assert!(actor_steps >= finished_steps, "{what}: actor steps");
        assert!(actor_episodes >= finished, "{what}: actor episodes");
    } else {
        assert_eq!(actor_steps, all_steps, "{what}: actor steps");
        assert_eq!(actor_episodes, EPISODES, "{what}: actor episodes");
    }
    assert!(reports.iter().all(|r| r.sessions == 1), "{what}");

    // Batches: each sent batch has exactly one line; steps add up.
    let batches: Vec<BatchLine> = read_rows(&dir.join("batches.csv"));
    let key = |b: &BatchLine| (b.actor.clone(), b.session, b.seq);
    let sent: u64 = reports.iter().map(|r| r.batches + r.resent).sum();
    assert_eq!(batches.len() as u64, sent, "{what}: batch lines vs sent");
    let keys: HashSet<_> = batches.iter().map(key).collect();
    assert_eq!(keys.len(), batches.len(), "{what}: a batch accounted twice");
    let logged_steps: u64 = batches.iter().map(|b| b.transitions).sum();
    let central = case.workflow.starts_with("seed");
    if central {
        assert_eq!(sent, 0, "{what}");
    } else if short {
        // Steps of a batch being filled when the run ended were never sent.
        assert!(logged_steps <= actor_steps, "{what}: batch steps");
    } else {
        assert_eq!(
            logged_steps, actor_steps,
            "{what}: batch steps vs actor steps"
        );
    }
    let mut outcomes: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for b in &batches {
        let o = outcomes.entry(b.outcome.as_str()).or_default();
        o.0 += 1;
        o.1 += b.transitions;
        assert!(
            b.policy_version <= b.learner_version,
            "{what}: batch {:?} from the future: {} > {}",
            key(b),
            b.policy_version,
            b.learner_version
        );
        assert!(
            b.outcome == "trained" || case.allowed.contains(&b.outcome.as_str()),
            "{what}: batch {:?} dropped as `{}`",
            key(b),
            b.outcome
        );
        if let Some(lag) = cfg.distributed.max_policy_lag {
            let over = b.learner_version - b.policy_version > lag;
            match b.outcome.as_str() {
                "trained" => assert!(!over, "{what}: {b:?} trained beyond the lag"),
                "stale" => assert!(over, "{what}: {b:?} dropped within the lag"),
                _ => {}
            }
        }
    }
    eprintln!(
        "{what}: {outcomes:?} (batches, steps) by outcome; {actor_steps} actor steps; \
         {finished} episodes; {reason}"
    );
    let (trained_batches, trained_steps) = outcomes.get("trained").copied().unwrap_or_default();

    // The agent: each trained transition once, intact (over the learners
    // of a multi-learner run, each with its own probe.csv).
    // (Each row with the learner that trained on it.)
    let mut probe: Vec<(usize, ProbeLine)> = Vec::new();
    for k in 0..learners(case) {
        let file = match k {
            0 => dir.join("probe.csv"),
            k => dir.join(format!("learner-{k}/probe.csv")),
        };
        let rows: Vec<ProbeLine> = read_rows(&file);
        if case.workflow != "random" {
            assert!(!rows.is_empty(), "{what}: learner {k} trained on nothing");
        }
        probe.extend(rows.into_iter().map(|r| (k, r)));
    }
    // Learners that keep to their own actors (`bin`; `short`, which never
    // helps): each trained only on episodes its actor group played (the
    // 4 actors split 2 + 2; finished episodes say who played them).
    let keeps_to_group = short
        || (case.workflow == "ml-rma" && cfg.distributed.window_selector == WindowSelector::Bin);
    let player: BTreeMap<u64, u32> = eps.iter().map(|e| (e.episode, e.actor)).collect();
    if learners(case) > 1 {
        let l = std::fs::read_to_string(dir.join("learners.toml")).unwrap();
        assert!(
            l.contains("learners = 2") && l.contains("identical = true"),
            "{what}: {l}"
        );
    }
    let mut seen = HashSet::new();
    // Per (learner, episode): the step that continues what it was given.
    let mut goes_on: BTreeMap<(usize, u64), u32> = BTreeMap::new();
    let tags: BTreeMap<u64, u64> = (0..EPISODES)
        .map(|e| (rlfleet_run::workflows::episode_seed(SEED, e) % (1 << 24), e))
        .collect();
    for (learner, p) in &probe {
        let nums = |s: &str| -> Vec<f64> { s.split(';').map(|v| v.parse().unwrap()).collect() };
        let (action, reward, terminated) = (
            p.action.parse::<f64>().unwrap(),
            f64::from(p.reward),
            p.terminated,
        );
        let (obs, next) = (nums(&p.obs), nums(&p.next_obs));
        let episode = tags[&(obs[0] as u64)];
        let t = obs[1] as u64;
        assert_eq!(next[0], obs[0], "{what}: {p:?}");
        assert_eq!(next[1] as u64, t + 1, "{what}: {p:?}");
        assert_eq!(next[2], action, "{what}: {p:?}");
        assert_eq!(reward, (t + 1) as f64, "{what}: {p:?}");
        let natural = rlfleet_shared::env::Counting::episode_length(
            rlfleet_run::workflows::episode_seed(SEED, episode),
        );
        assert_eq!(terminated, t + 1 == natural, "{what}: {p:?}");
        assert!(t < length_of(episode), "{what}: {p:?}");
        assert!(seen.insert((episode, t)), "{what}: ({episode}, {t}) twice");
        // In order, or the break marked where the agent was told of it.
        assert_eq!(
            (p.episode, u64::from(p.step)),
            (episode, t),
            "{what}: {p:?}"
        );
        let prev = goes_on.insert((*learner, episode), p.step + 1);
        assert!(
            p.cut || prev.map_or(p.step == 0, |n| n == p.step),
            "{what}: ({episode}, {t}) follows {prev:?} with no break marked"
        );
        if keeps_to_group && let Some(&actor) = player.get(&episode) {
            assert_eq!(
                actor as usize * 2 / actors,
                *learner,
                "{what}: learner {learner} trained on actor {actor}'s episode {episode}"
            );
        }
    }
    let lossless = case.allowed.is_empty();
    match case.workflow {
        "random" => assert!(probe.is_empty(), "{what}: random trained"),
        "seed" | "seed-a2c" => assert_eq!(probe.len() as u64, all_steps, "{what}"),
        _ => {
            assert_eq!(
                probe.len() as u64,
                trained_steps,
                "{what}: probe vs trained"
            );
            if lossless {
                assert_eq!(trained_steps, all_steps, "{what}: lossless");
            }
            if short {
                let ended = outcomes.get("run_ended").map_or(0, |o| o.1);
                assert_eq!(trained_steps + ended, logged_steps, "{what}");
            }
        }
    }

    // The learner's own counts and the metrics agree with the log.
    let learner = &summary["learner"];
    let int = |v: &toml::Value| v.as_integer().unwrap() as u64;
    // A short run's summary is written while the other group's actors may
    // still deposit: each batch it has not seen is one the log says was
    // dropped because the run had ended.
    let late = sent - int(&learner["batches_received"]);
    if !short {
        assert_eq!(late, 0, "{what}: batches received");
    }
    assert_eq!(int(&learner["batches_trained"]), trained_batches, "{what}");
    // The summary's mean policy lag is the log's, over the trained batches.
    let lag_mean = learner["policy_lag_mean"].as_float().unwrap();
    if !central && learners(case) == 1 {
        let lags: Vec<u64> = batches
            .iter()
            .filter(|b| b.outcome == "trained")
            .map(|b| b.learner_version - b.policy_version)
            .collect();
        if lags.is_empty() {
            assert!(lag_mean.is_nan(), "{what}: lag {lag_mean} with no batch");
        } else {
            let mean = lags.iter().sum::<u64>() as f64 / lags.len() as f64;
            assert!(
                (lag_mean - mean).abs() < 1e-9,
                "{what}: lag {lag_mean} vs {mean}"
            );
        }
    }
    let prom = std::fs::read_to_string(dir.join("metrics.prom")).unwrap();
    assert_eq!(metric(&prom, "rlfleet_batches_received_total"), sent as f64);
    assert_eq!(
        metric(&prom, "rlfleet_batches_trained_total"),
        trained_batches as f64,
        "{what}"
    );
    for (reason, (n, _)) in &outcomes {
        if *reason != "trained" {
            let after = if *reason == "run_ended" { late } else { 0 };
            let counted = learner["batches_dropped"].get(*reason).map_or(0, int);
            assert_eq!(counted + after, *n, "{what}: {reason}");
            assert_eq!(
                metric(
                    &prom,
                    &format!("rlfleet_batches_dropped_total{{reason=\"{reason}\"}}")
                ),
                *n as f64,
                "{what}: {reason}"
            );
        }
    }
    let learner_steps = if central { all_steps } else { trained_steps };
    assert_eq!(int(&summary["env_steps"]), learner_steps, "{what}");
    assert_eq!(
        metric(&prom, "rlfleet_env_steps_total"),
        learner_steps as f64
    );
    assert_eq!(
        metric(&prom, "rlfleet_episodes_finished_total"),
        finished as f64
    );
    assert_eq!(
        metric(&prom, "rlfleet_episodes_issued_total"),
        EPISODES as f64
    );
    // Over MPI the `rma` workflows' batches travel one-sidedly: every
    // sending of one (a refused one goes again) is one deposit into the
    // learner's RMA window; nothing else deposits.
    let one_sided = cfg.transport == TransportKind::Mpi && case.workflow.contains("rma");
    let sendings: u64 = reports
        .iter()
        .map(|r| r.batches + r.resent + r.refused)
        .sum();
    assert_eq!(
        metric(&prom, "rlfleet_rma_deposits_total"),
        if one_sided { sendings as f64 } else { 0.0 },
        "{what}: RMA deposits"
    );
    let requests: u64 = reports.iter().map(|r| r.inference_requests).sum();
    assert_eq!(
        metric(&prom, "rlfleet_inference_requests_total"),
        requests as f64,
        "{what}"
    );
    // The front's own figures: every step played was chosen by exactly
    // one row of one of its forward passes (an episode's last observation
    // gets none), and its passes are the histogram's.
    let passes = int(&learner["inference_batches"]);
    if central {
        assert_eq!(int(&learner["inference_rows"]), all_steps, "{what}: rows");
        assert_eq!(
            metric(&prom, "rlfleet_inference_batch_size_count"),
            passes as f64,
            "{what}: passes"
        );
        assert!(passes >= 1 && passes <= requests, "{what}: {passes} passes");
        let mean = learner["inference_batch_mean"].as_float().unwrap();
        assert_eq!(mean, all_steps as f64 / passes as f64, "{what}");
        assert!(learner["inference_latency_mean_ms"].as_float().unwrap() > 0.0);
        assert!(learner["front_stall_secs"].as_float().unwrap() >= 0.0);
    } else {
        assert_eq!(passes, 0, "{what}: passes");
        assert!(learner["front_stall_secs"].as_float().unwrap().is_nan());
    }
}

/// The case named `name` over `transport`; over MPI with `ranks_per_env`
/// ranks per env (each actor an env group of that many ranks).
fn run_case(name: &str, transport: TransportKind, ranks_per_env: u32) {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    let k = ranks_per_env.to_string();
    let args = ["--envs", "2", "--ranks-per-env", &k];
    let ranks = ranks_per_env as usize;
    let (n, case) = cases()
        .into_iter()
        .enumerate()
        .find(|(_, c)| c.name == name)
        .unwrap_or_else(|| panic!("no conformance case {name}"));
    assert!(
        learners(&case) == 1 || transport == TransportKind::Mpi,
        "{name}: several learners need MPI"
    );
    let mut cfg = config(&case, transport, dir.path(), n);
    cfg.ranks_per_env = ranks_per_env;
    let (out, actors) = if learners(&case) > 1 {
        let groups = [(4 * ranks, &args[..])];
        let out = run_mpi_groups(&cfg, dir.path(), learners(&case), &groups);
        (out, 4)
    } else if transport == TransportKind::Mpi {
        (run_mpi(&cfg, dir.path(), 3 * ranks, &args), 3)
    } else {
        (
            run_embedded(&cfg, dir.path(), &["--envs-per-actor", "2"]),
            4,
        )
    };
    assert!(
        out.success,
        "{} over {transport}: {}\n{}",
        case.workflow, out.stdout, out.stderr
    );
    check(&case, &cfg, &actor_reports(&out.stderr), actors);
}

/// Every actor's exit line in `stderr`.
fn actor_reports(stderr: &str) -> Vec<ActorCounts> {
    stderr
        .lines()
        .filter(|l| l.starts_with("actor done:"))
        .map(|l| actor_counts(l).unwrap())
        .collect()
}

/// The `seed` workflows with each actor process's two envs split over two
/// connections (`--lanes-per-actor 2`): eight actors of one env in the
/// books, every count exact.
#[test]
fn seed_actors_in_two_lanes_conform_over_quic() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    let seeds = cases().into_iter().enumerate();
    for (n, case) in seeds.filter(|(_, c)| c.workflow.starts_with("seed")) {
        let cfg = config(&case, TransportKind::Quic, dir.path(), n);
        let lanes = ["--envs-per-actor", "2", "--lanes-per-actor", "2"];
        let out = run_embedded(&cfg, dir.path(), &lanes);
        assert!(
            out.success,
            "{}: {}\n{}",
            case.workflow, out.stdout, out.stderr
        );
        check(&case, &cfg, &actor_reports(&out.stderr), 8);
    }
    // In-process actors are tasks already: lanes are refused by name.
    let case = &cases()[0];
    let cfg = config(case, TransportKind::Inproc, dir.path(), 99);
    let out = run_embedded(&cfg, dir.path(), &["--lanes-per-actor", "2"]);
    assert!(!out.success, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("--lanes-per-actor 2: lanes are for actor processes"),
        "{}",
        out.stderr
    );
}

/// One test per case and transport (`conformance::quic::rma_stack_reject`),
/// so that a failure names its case and the other cases still run.
macro_rules! cases_over {
    ($(#[$attr:meta])* $transport:ident, $kind:expr, $ranks:expr, [$($case:ident),* $(,)?]) => {
        $(#[$attr])*
        mod $transport {
            use super::*;
            /// The cases this module tests.
            pub const CASES: &[&str] = &[$(stringify!($case)),*];
            $(
                #[test]
                fn $case() {
                    run_case(stringify!($case), $kind, $ranks);
                }
            )*
        }
    };
}

/// Every single-learner case (the `ml-*` workflows need learner ranks).
macro_rules! single_learner_cases_over {
    ($(#[$attr:meta])* $transport:ident, $kind:expr, $ranks:expr $(, $extra:ident)*) => {
        cases_over!($(#[$attr])* $transport, $kind, $ranks, [
            async_blocking, sync, nb_async, async_window,
            rma_queue_drop_oldest, rma_queue_reject, rma_stack_drop_oldest, rma_stack_reject,
            rma_buff_checked, rma_buff_unchecked, rma_queue_pop_all,
            random, seed, orchestrated, seed_a2c, seed_a2c_ahead
            $(, $extra)*
        ]);
    };
}

/// Every case, the `ml-*` workflows' too (MPI only).
macro_rules! every_case_over {
    ($(#[$attr:meta])* $transport:ident, $kind:expr, $ranks:expr) => {
        single_learner_cases_over!($(#[$attr])* $transport, $kind, $ranks,
            ml_async, ml_rma_random, ml_rma_bin, ml_rma_queue, ml_rma_queue_short);
    };
}

single_learner_cases_over!(inproc, TransportKind::Inproc, 1);
single_learner_cases_over!(quic, TransportKind::Quic, 1);
every_case_over!(
    #[cfg(feature = "mpi")]
    mpi,
    TransportKind::Mpi,
    1
);
// Each actor an env group of 2 ranks (issue 31): the same books.
every_case_over!(
    #[cfg(feature = "mpi")]
    mpi_env_groups_of_two_ranks,
    TransportKind::Mpi,
    2
);

/// Every case runs over every transport it can (a case added to `cases`
/// but to no test list would be silently skipped).
#[test]
fn every_case_has_its_tests() {
    for case in cases() {
        let mut lists = vec![("inproc", inproc::CASES), ("quic", quic::CASES)];
        if learners(&case) > 1 {
            lists.clear();
        }
        #[cfg(feature = "mpi")]
        lists.extend([
            ("mpi", mpi::CASES),
            (
                "mpi_env_groups_of_two_ranks",
                mpi_env_groups_of_two_ranks::CASES,
            ),
        ]);
        for (transport, list) in lists {
            assert!(
                list.contains(&case.name),
                "{} has no test over {transport}",
                case.name
            );
        }
    }
}
