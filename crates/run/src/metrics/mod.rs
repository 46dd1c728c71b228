//! [`Metrics`]: everything the learner counts, as Prometheus metrics with
//! the `rlfleet_` prefix, base units, `_total` counters and histograms for
//! latencies and sizes. One registry per daemon; `GET /metrics` renders it.
//! Each run's series carry its name and id (`run`, `run_id`) and leave
//! once it has ended ([`Metrics::forget_run`]); daemon-wide series carry
//! neither.

mod families;
mod run;

pub use run::{ByLabel, RunMetrics};

use families::RunFamilies;
use prometheus::{Encoder, IntCounter, IntCounterVec, IntGauge, Opts, Registry, TextEncoder};
use std::sync::Arc;

/// The daemon's metrics (cheap to update from any thread): the
/// daemon-wide series here, each run's through [`Metrics::run`].
#[derive(Debug, Clone)]
pub struct Metrics {
    registry: Registry,
    runs: RunFamilies,
    pub connections_refused: IntCounter,
    /// Actors dropped for silence (`[actors] actor_timeout_secs`).
    pub actors_timed_out: IntCounter,
    /// Batches that reached a session which had never joined a run.
    pub batches_unrouted: IntCounter,
    pub runs_resumed: IntCounter,
    /// Weights frames encoded for QUIC and MPI actors (one per version
    /// sent, shared by every actor's session).
    pub weights_frames_encoded: IntCounter,
    /// Weights sent to actors (in acknowledgements and welcomes), by
    /// transport.
    pub weights_sent: IntCounterVec,
    /// Batches MPI actor ranks deposited one-sidedly (`rma` workflows).
    pub rma_deposits: IntCounter,
    pub connected_actors: IntGauge,
    pub bytes_received: IntCounterVec,
    pub bytes_sent: IntCounterVec,
    pub protocol_errors: IntCounterVec,
    pub runs_started: IntCounter,
    pub active_runs: IntGauge,
    /// Runs accepted and waiting for a slot (`[runs] max_active`).
    pub queued_runs: IntGauge,
    /// Actors moved from one run to another to keep the runs' shares.
    pub actors_moved: IntCounter,
    /// Population-based training: members that copied a better member
    /// (and perturbed its hyperparameters), by population id.
    pub pbt_exploits: IntCounterVec,
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

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let r = Registry::new();
        let m = Metrics {
            runs: RunFamilies::new(&r),
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
            batches_unrouted: counter(
                &r,
                "rlfleet_batches_unrouted_total",
                "Experience batches that reached a connection which had never joined a run (dropped).",
            ),
            runs_resumed: counter(
                &r,
                "rlfleet_runs_resumed_total",
                "Runs resumed from their last checkpoint (at start-up or through the API).",
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
            rma_deposits: counter(
                &r,
                "rlfleet_rma_deposits_total",
                "Batches actor ranks deposited into the learner's MPI RMA window (rma workflows).",
            ),
            connected_actors: gauge(&r, "rlfleet_connected_actors", "Actor connections open."),
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
            queued_runs: gauge(
                &r,
                "rlfleet_queued_runs",
                "Runs accepted and waiting for a slot ([runs] max_active).",
            ),
            actors_moved: counter(
                &r,
                "rlfleet_actors_moved_total",
                "Actors moved from one active run to another to keep the runs' shares of the fleet.",
            ),
            pbt_exploits: counter_vec(
                &r,
                "rlfleet_pbt_exploits_total",
                "Population members that copied a better member's state and perturbed its hyperparameters.",
                "population",
            ),
            registry: r,
        };
        // Every label value a dashboard may query exists from start-up,
        // at 0, so a healthy server shows 0, not "no data".
        for code in rlfleet_shared::wire::ErrorCode::ALL {
            m.protocol_errors.with_label_values(&[code.label()]);
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

    /// The series of run `id` named `name`, labelled `run="NAME"` and
    /// `run_id="ID"`: every one exists from now on, at 0.
    pub fn run(&self, name: &str, id: &str) -> Arc<RunMetrics> {
        Arc::new(self.runs.run(name, id, self.protocol_errors.clone()))
    }

    /// Removes the series of an ended run from `/metrics`.
    pub fn forget_run(&self, name: &str, id: &str) {
        self.runs.forget(name, id);
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
        // A fresh registry with one run, nothing counted yet.
        let m = Metrics::new();
        let _run = m.run("cartpole", "cartpole-1");
        let text = m.render();
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

    /// A run's series carry its name and id, exist at 0 from its start,
    /// and leave when it is forgotten; the daemon's stay.
    #[test]
    fn a_runs_series_are_labelled_and_leave_with_it() {
        let m = Metrics::new();
        let a = m.run("a", "a-1");
        let b = m.run("b", "b-1");
        a.env_steps.inc_by(5);
        b.batches_dropped.with_label_values(&["stale"]).inc();
        let text = m.render();
        assert!(
            text.contains("rlfleet_env_steps_total{run=\"a\",run_id=\"a-1\"} 5"),
            "{text}"
        );
        assert!(
            text.contains("rlfleet_env_steps_total{run=\"b\",run_id=\"b-1\"} 0"),
            "{text}"
        );
        assert!(
            text.contains(
                "rlfleet_batches_dropped_total{reason=\"stale\",run=\"b\",run_id=\"b-1\"} 1"
            ),
            "{text}"
        );
        m.forget_run("a", "a-1");
        let text = m.render();
        assert!(!text.contains("run=\"a\""), "{text}");
        assert!(text.contains("run=\"b\""), "{text}");
        assert!(text.contains("rlfleet_connected_actors 0"), "{text}");
    }
}
