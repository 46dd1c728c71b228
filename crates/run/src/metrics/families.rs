//! [`RunFamilies`]: the per-run metric families — their names, help and
//! buckets, each with the labels `run` and `run_id` (and one more for a
//! few) — registered once in the daemon's registry.

use prometheus::core::Collector;
use prometheus::{
    CounterVec, GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry,
};

/// The labels every per-run series carries, in this order.
pub(super) const RUN_LABELS: [&str; 2] = ["run", "run_id"];

/// The per-run families, registered in the daemon's registry once.
#[derive(Debug, Clone)]
pub(super) struct RunFamilies {
    pub(super) env_steps: IntCounterVec,
    pub(super) episodes_finished: IntCounterVec,
    pub(super) episodes_issued: IntCounterVec,
    pub(super) episodes_reissued: IntCounterVec,
    pub(super) env_steps_abandoned: IntCounterVec,
    pub(super) env_errors: IntCounterVec,
    pub(super) episode_return: HistogramVec,
    pub(super) batches_received: IntCounterVec,
    pub(super) batches_trained: IntCounterVec,
    pub(super) batches_dropped: IntCounterVec,
    pub(super) batch_transitions: HistogramVec,
    pub(super) batches_lost: IntCounterVec,
    pub(super) checkpoint_failures: IntCounterVec,
    pub(super) checkpoint_snapshot: HistogramVec,
    pub(super) transitions_ingested: IntCounterVec,
    pub(super) transitions_unstacked: IntCounterVec,
    pub(super) transitions_withheld: IntCounterVec,
    pub(super) inference_requests: IntCounterVec,
    pub(super) core_states_zeroed: IntCounterVec,
    pub(super) inference_batch_size: HistogramVec,
    pub(super) inference_latency: HistogramVec,
    pub(super) seed_front_stall: CounterVec,
    pub(super) policy_version: IntGaugeVec,
    pub(super) policy_lag: HistogramVec,
    pub(super) replay_size: IntGaugeVec,
    pub(super) replay_bytes: IntGaugeVec,
    pub(super) open_episodes: IntGaugeVec,
    pub(super) train_steps: IntCounterVec,
    pub(super) loss: GaugeVec,
    pub(super) q_value_max: GaugeVec,
    pub(super) value_divergences: IntCounterVec,
    pub(super) loop_seconds: CounterVec,
    pub(super) last_eval_return: GaugeVec,
    pub(super) best_eval_return: GaugeVec,
    pub(super) actor_envs: IntGaugeVec,
    pub(super) env_steps_in_play: IntGaugeVec,
}

/// Registers `vec` and returns it.
fn reg<C: Collector + Clone + 'static>(r: &Registry, vec: C) -> C {
    r.register(Box::new(vec.clone())).expect("unique metric");
    vec
}

fn labels(extra: Option<&'static str>) -> Vec<&'static str> {
    RUN_LABELS.iter().copied().chain(extra).collect()
}

fn counter(r: &Registry, name: &str, help: &str, extra: Option<&'static str>) -> IntCounterVec {
    reg(
        r,
        IntCounterVec::new(Opts::new(name, help), &labels(extra)).expect("valid metric"),
    )
}

fn float_counter(r: &Registry, name: &str, help: &str, extra: Option<&'static str>) -> CounterVec {
    reg(
        r,
        CounterVec::new(Opts::new(name, help), &labels(extra)).expect("valid metric"),
    )
}

fn gauge(r: &Registry, name: &str, help: &str) -> IntGaugeVec {
    reg(
        r,
        IntGaugeVec::new(Opts::new(name, help), &RUN_LABELS).expect("valid metric"),
    )
}

fn float_gauge(r: &Registry, name: &str, help: &str) -> GaugeVec {
    reg(
        r,
        GaugeVec::new(Opts::new(name, help), &RUN_LABELS).expect("valid metric"),
    )
}

fn histogram(r: &Registry, name: &str, help: &str, buckets: Vec<f64>) -> HistogramVec {
    reg(
        r,
        HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), &RUN_LABELS)
            .expect("valid metric"),
    )
}

/// Powers of two from 1 to `2^n`.
fn pow2(n: i32) -> Vec<f64> {
    (0..=n).map(|i| 2f64.powi(i)).collect()
}

impl RunFamilies {
    pub(super) fn new(r: &Registry) -> RunFamilies {
        RunFamilies {
            env_steps: counter(
                r,
                "rlfleet_env_steps_total",
                "Environment steps ingested by the learner.",
                None,
            ),
            episodes_finished: counter(
                r,
                "rlfleet_episodes_finished_total",
                "Episodes finished and counted.",
                None,
            ),
            episodes_issued: counter(
                r,
                "rlfleet_episodes_issued_total",
                "Distinct episode ids handed out to actors.",
                None,
            ),
            episodes_reissued: counter(
                r,
                "rlfleet_episodes_reissued_total",
                "Unfinished episodes handed out again after their actor left.",
                None,
            ),
            env_steps_abandoned: counter(
                r,
                "rlfleet_env_steps_abandoned_total",
                "Env steps ingested for episodes whose actor left before finishing them \
                 (the episode was re-issued and played again from its start).",
                None,
            ),
            env_errors: counter(
                r,
                "rlfleet_env_errors_total",
                "Exceptions environments raised in reset or step (Python envs); each \
                 abandoned its episode, which was re-issued, and the env was rebuilt.",
                None,
            ),
            episode_return: histogram(
                r,
                "rlfleet_episode_return",
                "Return of finished episodes.",
                vec![
                    -500.0, -200.0, -100.0, -50.0, 0.0, 10.0, 25.0, 50.0, 100.0, 200.0, 300.0,
                    400.0, 475.0, 500.0,
                ],
            ),
            batches_received: counter(
                r,
                "rlfleet_batches_received_total",
                "Experience batches received from actors.",
                None,
            ),
            batches_trained: counter(
                r,
                "rlfleet_batches_trained_total",
                "Experience batches put into replay and trained on.",
                None,
            ),
            batches_dropped: counter(
                r,
                "rlfleet_batches_dropped_total",
                "Experience batches not trained on, by reason.",
                Some("reason"),
            ),
            batch_transitions: histogram(
                r,
                "rlfleet_batch_transitions",
                "Transitions per received experience batch.",
                pow2(14),
            ),
            batches_lost: counter(
                r,
                "rlfleet_batches_lost_total",
                "Batches a learner process received after its run's last checkpoint and lost when it died (counted by the process that resumed the run).",
                None,
            ),
            checkpoint_failures: counter(
                r,
                "rlfleet_checkpoint_failures_total",
                "Checkpoint writes that failed (a full disk, an I/O error, a permission); each is retried with back-off while training goes on.",
                None,
            ),
            checkpoint_snapshot: histogram(
                r,
                "rlfleet_checkpoint_snapshot_seconds",
                "Time the run thread spends copying its state out for a checkpoint (the writer thread does the rest).",
                prometheus::exponential_buckets(1e-4, 2.0, 16).expect("buckets"),
            ),
            transitions_ingested: counter(
                r,
                "rlfleet_transitions_ingested_total",
                "Transitions put into replay.",
                None,
            ),
            transitions_unstacked: counter(
                r,
                "rlfleet_transitions_unstacked_total",
                "Steps not trained on because earlier frames of their stack never reached the learner (frame_stack > 1, a batch an rma pool pushed out).",
                None,
            ),
            transitions_withheld: counter(
                r,
                "rlfleet_transitions_withheld_total",
                "Steps of trained or dropped batches kept from the agent: of an earlier play of their episode (superseded) or given to it before (duplicate).",
                None,
            ),
            inference_requests: counter(
                r,
                "rlfleet_inference_requests_total",
                "Observation requests answered (seed).",
                None,
            ),
            core_states_zeroed: counter(
                r,
                "rlfleet_core_states_zeroed_total",
                "Actor envs' recurrent core states the seed front zeroed, by cause: episode (an episode's first observation) or session (the envs of a new connection, such as a reconnected actor's).",
                Some("cause"),
            ),
            inference_batch_size: histogram(
                r,
                "rlfleet_inference_batch_size",
                "Environments per inference batch (seed).",
                pow2(12),
            ),
            inference_latency: histogram(
                r,
                "rlfleet_inference_latency_seconds",
                "Time from an observation request's arrival to its reply (seed).",
                prometheus::exponential_buckets(25e-6, 2.0, 16).expect("buckets"),
            ),
            seed_front_stall: float_counter(
                r,
                "rlfleet_seed_front_stall_seconds_total",
                "Seconds the seed inference front held a ready batch until training caught up.",
                None,
            ),
            policy_version: gauge(
                r,
                "rlfleet_policy_version",
                "Version of the latest weights.",
            ),
            policy_lag: histogram(
                r,
                "rlfleet_policy_lag",
                "Versions between a trained batch's weights and the learner's.",
                vec![
                    0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0,
                ],
            ),
            replay_size: gauge(r, "rlfleet_replay_size", "Transitions held in replay."),
            replay_bytes: gauge(
                r,
                "rlfleet_replay_bytes",
                "Bytes the replay holds, by its own accounting (allocated up front; uint8 observations stored as uint8).",
            ),
            open_episodes: gauge(
                r,
                "rlfleet_agent_open_episodes",
                "Episodes the agent holds unfinished state of (n-step windows, open trajectories, recurrent states between updates); each is let go at its episode's end.",
            ),
            train_steps: counter(
                r,
                "rlfleet_train_steps_total",
                "Gradient steps taken.",
                None,
            ),
            loss: float_gauge(r, "rlfleet_loss", "Loss of the latest gradient step."),
            q_value_max: float_gauge(
                r,
                "rlfleet_q_value_max",
                "Largest |Q| the value network (DQN) gives its latest sampled batch: past max |reward| / (1 - gamma) no return can reach it (rlfleet_value_divergences_total).",
            ),
            value_divergences: counter(
                r,
                "rlfleet_value_divergences_total",
                "Times the Q-values went past twice the largest discounted return the rewards seen allow (max |reward| / (1 - gamma)), or became NaN: diverged values, which the policy then follows down; each streak is logged once.",
                None,
            ),
            loop_seconds: float_counter(
                r,
                "rlfleet_run_loop_seconds_total",
                "Seconds the learner loop spent: `train` (busy) or `wait` (for data); of `train`, `device` holding the daemon's device for gradient steps and `device_wait` waiting for other runs' turns on it.",
                Some("activity"),
            ),
            last_eval_return: float_gauge(
                r,
                "rlfleet_eval_return",
                "Mean return of the run's latest evaluation.",
            ),
            best_eval_return: float_gauge(
                r,
                "rlfleet_eval_return_best",
                "Best evaluation mean of the run so far.",
            ),
            env_steps_in_play: gauge(
                r,
                "rlfleet_env_steps_in_play",
                "Env steps of episodes still being played; once the run has ended, of those its stop cut off (env steps = finished lengths + abandoned + these).",
            ),
            actor_envs: gauge(
                r,
                "rlfleet_run_envs",
                "Envs of the actors taking part in the run now (its share of the daemon's fleet).",
            ),
        }
    }
}
