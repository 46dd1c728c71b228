//! [`Metrics`]: everything the learner counts, as Prometheus metrics with
//! the `rlfleet_` prefix, base units, `_total` counters and histograms for
//! latencies and sizes. One registry per daemon; `GET /metrics` renders it.

use prometheus::{
    Counter, CounterVec, Encoder, Gauge, Histogram, HistogramOpts, IntCounter, IntCounterVec,
    IntGauge, Opts, Registry, TextEncoder,
};

/// The daemon's metrics (cheap to update from any thread).
#[derive(Debug, Clone)]
pub struct Metrics {
    registry: Registry,
    pub env_steps: IntCounter,
    pub episodes_finished: IntCounter,
    pub episodes_issued: IntCounter,
    pub episodes_reissued: IntCounter,
    pub env_steps_abandoned: IntCounter,
    /// Exceptions actors' (and the learner's own) envs raised.
    pub env_errors: IntCounter,
    pub connections_refused: IntCounter,
    /// Actors dropped for silence (`[actors] actor_timeout_secs`).
    pub actors_timed_out: IntCounter,
    pub episode_return: Histogram,
    pub batches_received: IntCounter,
    pub batches_trained: IntCounter,
    pub batches_dropped: IntCounterVec,
    pub batch_transitions: Histogram,
    pub batches_lost: IntCounter,
    pub checkpoint_snapshot: Histogram,
    pub runs_resumed: IntCounter,
    pub transitions_ingested: IntCounter,
    /// Steps counted but not trained on: their frame stack misses frames
    /// of a batch that never reached the learner (`frame_stack` > 1).
    pub transitions_unstacked: IntCounter,
    /// Weights frames encoded for QUIC and MPI actors (one per version
    /// sent, shared by every actor's session).
    pub weights_frames_encoded: IntCounter,
    /// Weights sent to actors (in acknowledgements and welcomes), by
    /// transport.
    pub weights_sent: IntCounterVec,
    pub inference_requests: IntCounter,
    /// Actor envs' recurrent states the `seed` front zeroed, by cause
    /// (`episode`: an episode's first observation; `session`: a new
    /// connection's envs).
    pub core_states_zeroed: IntCounterVec,
    /// Batches MPI actor ranks deposited one-sidedly (`rma` workflows).
    pub rma_deposits: IntCounter,
    pub inference_batch_size: Histogram,
    pub inference_latency: Histogram,
    /// Seconds the `seed` front held a ready batch because training was
    /// behind.
    pub seed_front_stall: Counter,
    pub policy_version: IntGauge,
    pub policy_lag: Histogram,
    pub connected_actors: IntGauge,
    pub replay_size: IntGauge,
    pub replay_bytes: IntGauge,
    pub train_steps: IntCounter,
    pub loss: Gauge,
    pub bytes_received: IntCounterVec,
    pub bytes_sent: IntCounterVec,
    pub protocol_errors: IntCounterVec,
    pub runs_started: IntCounter,
    pub active_runs: IntGauge,
    /// Seconds the learner loop of distributed runs spent, by activity
    /// (`train`: ingesting and gradient steps; `wait`: idle, waiting for
    /// data).
    pub loop_seconds: CounterVec,
}

fn counter(r: &Registry, name: &str, help: &str) -> IntCounter {
    let c = IntCounter::with_opts(Opts::new(name, help)).expect("valid metric");
    r.register(Box::new(c.clone())).expect("unique metric");
    c
}

fn counter_vec(r: &Registry, name: &str, help: &str, label: &str) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), &[label]).expect("valid metric");
    r.register(Box::new(c.clone())).expect("unique metric");
    c
}

fn gauge(r: &Registry, name: &str, help: &str) -> IntGauge {
    let g = IntGauge::with_opts(Opts::new(name, help)).expect("valid metric");
    r.register(Box::new(g.clone())).expect("unique metric");
    g
}

fn histogram(r: &Registry, name: &str, help: &str, buckets: Vec<f64>) -> Histogram {
    let h = Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets))
        .expect("valid metric");
    r.register(Box::new(h.clone())).expect("unique metric");
    h
}

/// Powers of two from 1 to `2^n`.
fn pow2(n: i32) -> Vec<f64> {
    (0..=n).map(|i| 2f64.powi(i)).collect()
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let r = Registry::new();
        let loss = Gauge::with_opts(Opts::new(
            "rlfleet_loss",
            "Loss of the latest gradient step.",
        ))
        .expect("valid metric");
        r.register(Box::new(loss.clone())).expect("unique metric");
        let m = Metrics {
            env_steps: counter(
                &r,
                "rlfleet_env_steps_total",
                "Environment steps ingested by the learner.",
            ),
            episodes_finished: counter(
                &r,
                "rlfleet_episodes_finished_total",
                "Episodes finished and counted.",
            ),
            episodes_issued: counter(
                &r,
                "rlfleet_episodes_issued_total",
                "Distinct episode ids handed out to actors.",
            ),
            episodes_reissued: counter(
                &r,
                "rlfleet_episodes_reissued_total",
                "Unfinished episodes handed out again after their actor left.",
            ),
            connections_refused: counter(
                &r,
                "rlfleet_connections_refused_total",
                "QUIC connections refused before their handshake: too many were not past hello yet.",
            ),
            actors_timed_out: counter(
                &r,
                "rlfleet_actors_timed_out_total",
                "Actor connections dropped because the actor sent nothing for \
                 actor_timeout_secs while the run waited on it (its episodes go to others).",
            ),
            env_steps_abandoned: counter(
                &r,
                "rlfleet_env_steps_abandoned_total",
                "Env steps ingested for episodes whose actor left before finishing them \
                 (the episode was re-issued and played again from its start).",
            ),
            env_errors: counter(
                &r,
                "rlfleet_env_errors_total",
                "Exceptions environments raised in reset or step (Python envs); each \
                 abandoned its episode, which was re-issued, and the env was rebuilt.",
            ),
            episode_return: histogram(
                &r,
                "rlfleet_episode_return",
                "Return of finished episodes.",
                vec![
                    -500.0, -200.0, -100.0, -50.0, 0.0, 10.0, 25.0, 50.0, 100.0, 200.0, 300.0,
                    400.0, 475.0, 500.0,
                ],
            ),
            batches_received: counter(
                &r,
                "rlfleet_batches_received_total",
                "Experience batches received from actors.",
            ),
            batches_trained: counter(
                &r,
                "rlfleet_batches_trained_total",
                "Experience batches put into replay and trained on.",
            ),
            batches_dropped: counter_vec(
                &r,
                "rlfleet_batches_dropped_total",
                "Experience batches not trained on, by reason.",
                "reason",
            ),
            batch_transitions: histogram(
                &r,
                "rlfleet_batch_transitions",
                "Transitions per received experience batch.",
                pow2(14),
            ),
            batches_lost: counter(
                &r,
                "rlfleet_batches_lost_total",
                "Batches a learner process received after its run's last checkpoint and lost when it died (counted by the process that resumed the run).",
            ),
            checkpoint_snapshot: histogram(
                &r,
                "rlfleet_checkpoint_snapshot_seconds",
                "Time the run thread spends copying its state out for a checkpoint (the writer thread does the rest).",
                prometheus::exponential_buckets(1e-4, 2.0, 16).expect("buckets"),
            ),
            runs_resumed: counter(
                &r,
                "rlfleet_runs_resumed_total",
                "Runs resumed from their last checkpoint (at start-up or through the API).",
            ),
            transitions_ingested: counter(
                &r,
                "rlfleet_transitions_ingested_total",
                "Transitions put into replay.",
            ),
            transitions_unstacked: counter(
                &r,
                "rlfleet_transitions_unstacked_total",
                "Steps not trained on because earlier frames of their stack never reached the learner (frame_stack > 1, a batch an rma pool pushed out).",
            ),
            weights_frames_encoded: counter(
                &r,
                "rlfleet_weights_frames_encoded_total",
                "Weights frames encoded for QUIC and MPI actors: one per version sent, its bytes shared by every actor's acknowledgement and welcome.",
            ),
            weights_sent: counter_vec(
                &r,
                "rlfleet_weights_sent_total",
                "Weights sent to actors in acknowledgements and welcomes, by transport (over QUIC and MPI each is a copy of the version's one weights frame; in process, a shared reference).",
                "transport",
            ),
            inference_requests: counter(
                &r,
                "rlfleet_inference_requests_total",
                "Observation requests answered (seed).",
            ),
            core_states_zeroed: counter_vec(
                &r,
                "rlfleet_core_states_zeroed_total",
                "Actor envs' recurrent core states the seed front zeroed, by cause: episode (an episode's first observation) or session (the envs of a new connection, such as a reconnected actor's).",
                "cause",
            ),
            rma_deposits: counter(
                &r,
                "rlfleet_rma_deposits_total",
                "Batches actor ranks deposited into the learner's MPI RMA window (rma workflows).",
            ),
            inference_batch_size: histogram(
                &r,
                "rlfleet_inference_batch_size",
                "Environments per inference batch (seed).",
                pow2(12),
            ),
            inference_latency: histogram(
                &r,
                "rlfleet_inference_latency_seconds",
                "Time from an observation request's arrival to its reply (seed).",
                prometheus::exponential_buckets(25e-6, 2.0, 16).expect("buckets"),
            ),
            seed_front_stall: {
                let c = Counter::with_opts(Opts::new(
                    "rlfleet_seed_front_stall_seconds_total",
                    "Seconds the seed inference front held a ready batch until training caught up.",
                ))
                .expect("valid metric");
                r.register(Box::new(c.clone())).expect("unique metric");
                c
            },
            policy_version: gauge(
                &r,
                "rlfleet_policy_version",
                "Version of the latest weights.",
            ),
            policy_lag: histogram(
                &r,
                "rlfleet_policy_lag",
                "Versions between a trained batch's weights and the learner's.",
                vec![
                    0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0,
                ],
            ),
            connected_actors: gauge(&r, "rlfleet_connected_actors", "Actor connections open."),
            replay_size: gauge(&r, "rlfleet_replay_size", "Transitions held in replay."),
            replay_bytes: gauge(
                &r,
                "rlfleet_replay_bytes",
                "Bytes the replay holds, by its own accounting (allocated up front; uint8 \
                 observations stored as uint8).",
            ),
            train_steps: counter(&r, "rlfleet_train_steps_total", "Gradient steps taken."),
            loss,
            bytes_received: counter_vec(
                &r,
                "rlfleet_transport_received_bytes_total",
                "Bytes received from actors, by transport.",
                "transport",
            ),
            bytes_sent: counter_vec(
                &r,
                "rlfleet_transport_sent_bytes_total",
                "Bytes sent to actors, by transport.",
                "transport",
            ),
            protocol_errors: counter_vec(
                &r,
                "rlfleet_protocol_errors_total",
                "Messages refused, by error code.",
                "code",
            ),
            runs_started: counter(&r, "rlfleet_runs_started_total", "Runs started."),
            active_runs: gauge(&r, "rlfleet_active_runs", "Runs in progress."),
            loop_seconds: {
                let c = CounterVec::new(
                    Opts::new(
                        "rlfleet_run_loop_seconds_total",
                        "Seconds the learner loop spent training or waiting for data.",
                    ),
                    &["activity"],
                )
                .expect("valid metric");
                r.register(Box::new(c.clone())).expect("unique metric");
                c
            },
            registry: r,
        };
        // Every label value a dashboard may query exists from start-up,
        // at 0, so a healthy server shows 0, not "no data".
        for reason in crate::vocab::DropReason::ALL {
            m.batches_dropped.with_label_values(&[reason.label()]);
        }
        for code in rlfleet_shared::wire::ErrorCode::ALL {
            m.protocol_errors.with_label_values(&[code.label()]);
        }
        for activity in ["train", "wait"] {
            m.loop_seconds.with_label_values(&[activity]);
        }
        for transport in ["quic", "mpi"] {
            m.bytes_received.with_label_values(&[transport]);
            m.bytes_sent.with_label_values(&[transport]);
        }
        for transport in ["quic", "mpi", "inproc"] {
            m.weights_sent.with_label_values(&[transport]);
        }
        m
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut out)
            .expect("text encoding cannot fail");
        String::from_utf8(out).expect("the text format is UTF-8")
    }
}

/// The metric names a Grafana dashboard's JSON queries.
pub fn dashboard_metrics(dashboard: &str) -> Vec<String> {
    let mut names: Vec<String> = dashboard
        .match_indices("rlfleet_")
        .map(|(i, _)| {
            let rest = &dashboard[i..];
            let end = rest
                .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
                .unwrap_or(rest.len());
            rest[..end].to_string()
        })
        .filter(|n| n != "rlfleet_" && !n.starts_with("rlfleet_learner"))
        .collect();
    names.sort();
    names.dedup();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every metric the Grafana dashboard queries exists under that name.
    #[test]
    fn the_dashboard_queries_only_exported_metrics() {
        // A fresh registry, nothing counted yet.
        let text = Metrics::new().render();
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../dashboards/rlfleet-learner.json"
        );
        let names = dashboard_metrics(&std::fs::read_to_string(path).unwrap());
        assert!(names.len() >= 15, "{names:?}");
        for n in names {
            assert!(
                text.lines().any(|l| l.starts_with(n.as_str())),
                "the dashboard queries `{n}`, which /metrics does not export"
            );
        }
    }
}
