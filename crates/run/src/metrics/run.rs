//! [`RunMetrics`]: one run's series — every family of [`RunFamilies`]
//! with the labels `run` (the run's name) and `run_id` fixed — made when
//! the run starts and removed once it has ended ([`RunFamilies::forget`]).

use super::families::RunFamilies;
use prometheus::core::{MetricVec, MetricVecBuilder};
use prometheus::{Counter, CounterVec, Gauge, Histogram, IntCounter, IntCounterVec, IntGauge};

/// A family with one label beyond the run's, and the values that label
/// takes (each series exists from the run's start, at 0).
#[derive(Debug, Clone)]
pub struct ByLabel<V> {
    vec: V,
    run: [String; 2],
}

impl ByLabel<IntCounterVec> {
    /// The run's series for `value` (`&[reason]`, as `with_label_values`).
    pub fn with_label_values(&self, value: &[&str]) -> IntCounter {
        self.vec
            .with_label_values(&[self.run[0].as_str(), self.run[1].as_str(), value[0]])
    }
}

impl ByLabel<CounterVec> {
    /// The run's series for `value`.
    pub fn with_label_values(&self, value: &[&str]) -> Counter {
        self.vec
            .with_label_values(&[self.run[0].as_str(), self.run[1].as_str(), value[0]])
    }
}

/// One run's series (cheap to update from any thread). Field names are
/// the metrics' without the prefix; see [`RunFamilies`] for the help.
#[derive(Debug, Clone)]
pub struct RunMetrics {
    pub env_steps: IntCounter,
    pub episodes_finished: IntCounter,
    pub episodes_issued: IntCounter,
    pub episodes_reissued: IntCounter,
    pub env_steps_abandoned: IntCounter,
    /// Exceptions actors' (and the learner's own) envs raised.
    pub env_errors: IntCounter,
    pub episode_return: Histogram,
    pub batches_received: IntCounter,
    pub batches_trained: IntCounter,
    pub batches_dropped: ByLabel<IntCounterVec>,
    pub batch_transitions: Histogram,
    pub batches_lost: IntCounter,
    pub checkpoint_snapshot: Histogram,
    pub checkpoint_failures: IntCounter,
    pub transitions_ingested: IntCounter,
    /// Steps counted but not trained on: their frame stack misses frames
    /// of a batch that never reached the learner (`frame_stack` > 1).
    pub transitions_unstacked: IntCounter,
    /// Steps kept from the agent: of an earlier play of their episode, or
    /// given to it before.
    pub transitions_withheld: IntCounter,
    pub inference_requests: IntCounter,
    /// Actor envs' recurrent states the `seed` front zeroed, by cause.
    pub core_states_zeroed: ByLabel<IntCounterVec>,
    pub inference_batch_size: Histogram,
    pub inference_latency: Histogram,
    /// Seconds the `seed` front held a ready batch because training was
    /// behind.
    pub seed_front_stall: Counter,
    pub policy_version: IntGauge,
    pub policy_lag: Histogram,
    pub replay_size: IntGauge,
    pub replay_bytes: IntGauge,
    /// Episodes the agent holds unfinished state of.
    pub open_episodes: IntGauge,
    pub train_steps: IntCounter,
    pub loss: Gauge,
    pub q_value_max: Gauge,
    pub value_divergences: IntCounter,
    /// Seconds the run's loop spent, by activity (`train`, `wait`; and of
    /// `train`, `device` holding the daemon's device for gradient steps
    /// and `device_wait` waiting for other runs' turns on it).
    pub loop_seconds: ByLabel<CounterVec>,
    /// Mean return of the latest evaluation (screening or confirming).
    pub last_eval_return: Gauge,
    /// Best evaluation mean so far.
    pub best_eval_return: Gauge,
    /// Envs of the actors taking part now (the run's share of the fleet).
    pub actor_envs: IntGauge,
    pub env_steps_in_play: IntGauge,
    /// Messages refused, by error code: the daemon's family (a refusal is
    /// counted where the transport counts its own).
    pub protocol_errors: IntCounterVec,
}

/// The values of the extra labels, each series made at a run's start.
const ACTIVITIES: [&str; 4] = ["train", "wait", "device", "device_wait"];
const ZERO_CAUSES: [&str; 2] = ["episode", "session"];

impl RunFamilies {
    /// The series of run `id` named `name` (made now, at 0).
    pub fn run(&self, name: &str, id: &str, protocol_errors: IntCounterVec) -> RunMetrics {
        let l = [name, id];
        let by = |vec: &IntCounterVec, values: &[&str]| {
            let b = ByLabel {
                vec: vec.clone(),
                run: [name.to_string(), id.to_string()],
            };
            for v in values {
                b.with_label_values(&[v]);
            }
            b
        };
        let loop_seconds = ByLabel {
            vec: self.loop_seconds.clone(),
            run: [name.to_string(), id.to_string()],
        };
        for a in ACTIVITIES {
            loop_seconds.with_label_values(&[a]);
        }
        let reasons: Vec<&str> = crate::vocab::DropReason::ALL
            .iter()
            .map(|r| r.label())
            .collect();
        RunMetrics {
            env_steps: self.env_steps.with_label_values(&l),
            episodes_finished: self.episodes_finished.with_label_values(&l),
            episodes_issued: self.episodes_issued.with_label_values(&l),
            episodes_reissued: self.episodes_reissued.with_label_values(&l),
            env_steps_abandoned: self.env_steps_abandoned.with_label_values(&l),
            env_errors: self.env_errors.with_label_values(&l),
            episode_return: self.episode_return.with_label_values(&l),
            batches_received: self.batches_received.with_label_values(&l),
            batches_trained: self.batches_trained.with_label_values(&l),
            batches_dropped: by(&self.batches_dropped, &reasons),
            batch_transitions: self.batch_transitions.with_label_values(&l),
            batches_lost: self.batches_lost.with_label_values(&l),
            checkpoint_snapshot: self.checkpoint_snapshot.with_label_values(&l),
            checkpoint_failures: self.checkpoint_failures.with_label_values(&l),
            transitions_ingested: self.transitions_ingested.with_label_values(&l),
            transitions_unstacked: self.transitions_unstacked.with_label_values(&l),
            transitions_withheld: self.transitions_withheld.with_label_values(&l),
            inference_requests: self.inference_requests.with_label_values(&l),
            core_states_zeroed: by(&self.core_states_zeroed, &ZERO_CAUSES),
            inference_batch_size: self.inference_batch_size.with_label_values(&l),
            inference_latency: self.inference_latency.with_label_values(&l),
            seed_front_stall: self.seed_front_stall.with_label_values(&l),
            policy_version: self.policy_version.with_label_values(&l),
            policy_lag: self.policy_lag.with_label_values(&l),
            replay_size: self.replay_size.with_label_values(&l),
            replay_bytes: self.replay_bytes.with_label_values(&l),
            open_episodes: self.open_episodes.with_label_values(&l),
            train_steps: self.train_steps.with_label_values(&l),
            loss: self.loss.with_label_values(&l),
            q_value_max: self.q_value_max.with_label_values(&l),
            value_divergences: self.value_divergences.with_label_values(&l),
            loop_seconds,
            last_eval_return: self.last_eval_return.with_label_values(&l),
            best_eval_return: self.best_eval_return.with_label_values(&l),
            actor_envs: self.actor_envs.with_label_values(&l),
            env_steps_in_play: self.env_steps_in_play.with_label_values(&l),
            protocol_errors,
        }
    }

    /// Removes every series of run `id` named `name` (its files keep what
    /// they counted).
    pub fn forget(&self, name: &str, id: &str) {
        fn drop_all<B: MetricVecBuilder>(vec: &MetricVec<B>, name: &str, id: &str, extra: &[&str]) {
            if extra.is_empty() {
                let _ = vec.remove_label_values(&[name, id]);
            }
            for v in extra {
                let _ = vec.remove_label_values(&[name, id, v]);
            }
        }
        let reasons: Vec<&str> = crate::vocab::DropReason::ALL
            .iter()
            .map(|r| r.label())
            .collect();
        for v in [
            &self.env_steps,
            &self.episodes_finished,
            &self.episodes_issued,
            &self.episodes_reissued,
            &self.env_steps_abandoned,
            &self.env_errors,
            &self.batches_received,
            &self.batches_trained,
            &self.batches_lost,
            &self.checkpoint_failures,
            &self.value_divergences,
            &self.transitions_ingested,
            &self.transitions_unstacked,
            &self.transitions_withheld,
            &self.inference_requests,
            &self.train_steps,
        ] {
            drop_all(v, name, id, &[]);
        }
        drop_all(&self.batches_dropped, name, id, &reasons);
        drop_all(&self.core_states_zeroed, name, id, &ZERO_CAUSES);
        for v in [
            &self.episode_return,
            &self.batch_transitions,
            &self.checkpoint_snapshot,
            &self.inference_batch_size,
            &self.inference_latency,
            &self.policy_lag,
        ] {
            drop_all(v, name, id, &[]);
        }
        drop_all(&self.seed_front_stall, name, id, &[]);
        drop_all(&self.loop_seconds, name, id, &ACTIVITIES);
        for v in [
            &self.policy_version,
            &self.replay_size,
            &self.replay_bytes,
            &self.open_episodes,
            &self.actor_envs,
            &self.env_steps_in_play,
        ] {
            drop_all(v, name, id, &[]);
        }
        for v in [
            &self.loss,
            &self.q_value_max,
            &self.last_eval_return,
            &self.best_eval_return,
        ] {
            drop_all(v, name, id, &[]);
        }
    }
}
