//! [`Prepacked`]: for a convolutional policy, an ONNX Runtime session over
//! the model with the current weights embedded, built on a thread of its
//! own after a weight update. With the weights constant, ONNX Runtime
//! folds them into its packed convolution layouts when it builds the
//! session, which the `params`-input session cannot do: about twice the
//! observations a second for DQN-Nature's CNN at batch 8. Until the build
//! for the newest weights is done, the `params`-input session acts, so
//! every action is taken with the weights last loaded. When weights come
//! faster than a build finishes (a fast learner, replies every few steps),
//! a build would be stale before it is used: none starts until the weights
//! arrive slower again or stop (`worth_building`).

use anyhow::Context;
use ort::session::Session;
use ort::session::builder::GraphOptimizationLevel;
use rlfleet_shared::nets::NetShape;
use rlfleet_shared::onnx::{Head, PolicyGraph};
use std::thread::JoinHandle;
use std::time::Instant;

/// A build under way: the weight generation it embeds, and its thread
/// (which returns the session and the seconds it took).
type Build = (u64, JoinHandle<anyhow::Result<(Session, f64)>>);

/// Whether to start building the session for weights held for `held`
/// seconds, when new weights have come every `interval` seconds (a moving
/// mean) and a build takes `build` seconds: when the session would serve
/// at least half an interval on the mean, or when the weights have
/// outlived two intervals and two builds (the stream of weights paused,
/// not a moment's delay). Without both estimates yet, always.
pub fn worth_building(interval: Option<f64>, build: Option<f64>, held: f64) -> bool {
    match (interval, build) {
        (Some(interval), Some(build)) => {
            interval >= 2.0 * build || held >= 2.0 * interval.max(build)
        }
        _ => true,
    }
}

/// Moving means' weight for the newest value.
const NEWEST: f64 = 0.25;

fn moving_mean(mean: Option<f64>, value: f64) -> Option<f64> {
    Some(mean.map_or(value, |m| m + NEWEST * (value - m)))
}

/// The embedded-weights session of the newest weights built so far, and
/// the build that follows them.
pub struct Prepacked {
    graph: PolicyGraph,
    ready: Option<(u64, Session)>,
    build: Option<Build>,
    /// A build failed: the `params`-input session acts from then on.
    failed: bool,
    /// The newest generation seen, and when it was first seen.
    seen: Option<(u64, Instant)>,
    /// Seconds between weight generations, and a build's: moving means.
    interval: Option<f64>,
    build_secs: Option<f64>,
    /// Builds started.
    builds: u64,
}

impl Prepacked {
    /// For a network with a convolutional torso and no recurrent core (the
    /// networks where packing pays; an MLP runs in plain Rust by default).
    pub fn for_net(net: &NetShape) -> Option<Prepacked> {
        (net.torso().is_some() && net.core().is_none()).then(|| Prepacked {
            // The raw output `out` is the same for every head.
            graph: PolicyGraph {
                net: net.clone(),
                head: Head::Q,
            },
            ready: None,
            build: None,
            failed: false,
            seen: None,
            interval: None,
            build_secs: None,
            builds: 0,
        })
    }

    /// The session for weight generation `generation` (whose weights are
    /// `params`) when it is built; otherwise `None`, and a build of it is
    /// started unless one is under way or it is not worth building (each
    /// build takes the newest weights when it starts).
    pub fn session(&mut self, generation: u64, params: &[f32]) -> Option<&mut Session> {
        if self.build.as_ref().is_some_and(|(_, h)| h.is_finished()) {
            let (built, handle) = self.build.take().expect("checked");
            match handle.join() {
                Ok(Ok((session, secs))) => {
                    self.ready = Some((built, session));
                    self.build_secs = moving_mean(self.build_secs, secs);
                }
                Ok(Err(e)) => self.fail(format!("{e:#}")),
                Err(_) => self.fail("its thread panicked".into()),
            }
        }
        let now = Instant::now();
        let held = match self.seen {
            Some((g, since)) if g == generation => now.duration_since(since).as_secs_f64(),
            Some((g, since)) => {
                let loads = generation.saturating_sub(g).max(1) as f64;
                let per_load = now.duration_since(since).as_secs_f64() / loads;
                self.interval = moving_mean(self.interval, per_load);
                self.seen = Some((generation, now));
                0.0
            }
            None => {
                self.seen = Some((generation, now));
                0.0
            }
        };
        let current = self.ready.as_ref().is_some_and(|(g, _)| *g == generation);
        if !current
            && self.build.is_none()
            && !self.failed
            && worth_building(self.interval, self.build_secs, held)
        {
            let (graph, params) = (self.graph.clone(), params.to_vec());
            let handle = std::thread::Builder::new()
                .name("ort-prepack".into())
                .spawn(move || {
                    let t0 = Instant::now();
                    build(&graph.model(Some(&params))).map(|s| (s, t0.elapsed().as_secs_f64()))
                });
            match handle {
                Ok(h) => {
                    self.build = Some((generation, h));
                    self.builds += 1;
                }
                Err(e) => self.fail(format!("cannot start its thread: {e}")),
            }
        }
        match &mut self.ready {
            Some((g, session)) if *g == generation => Some(session),
            _ => None,
        }
    }

    /// Builds started so far.
    pub fn builds(&self) -> u64 {
        self.builds
    }

    fn fail(&mut self, why: String) {
        tracing::warn!(
            "ONNX Runtime: the session with the weights embedded failed to build ({why}); acting with weights as an input"
        );
        self.failed = true;
    }
}

/// A session over `model` (weights embedded) with every graph
/// optimisation, on one intra-op thread.
fn build(model: &[u8]) -> anyhow::Result<Session> {
    let env = crate::ort_env::environment()?;
    Session::builder(env)
        .and_then(|b| b.with_intra_threads(1).map_err(ort::Error::from))
        .and_then(|b| {
            b.with_optimization_level(GraphOptimizationLevel::All)
                .map_err(ort::Error::from)
        })
        .and_then(|mut b| b.commit_from_memory(model))
        .context("ONNX Runtime refused the policy model with its weights embedded")
}

#[cfg(test)]
mod tests {
    use super::worth_building;

    /// A build starts while weights come at least twice a build apart, or
    /// once the weights held have outlived two intervals and two builds;
    /// before both are measured, it always does.
    #[test]
    fn builds_start_only_when_the_session_would_serve() {
        assert!(worth_building(None, None, 0.0));
        assert!(worth_building(Some(0.001), None, 0.0));
        assert!(worth_building(None, Some(0.04), 0.0));
        assert!(worth_building(Some(0.08), Some(0.04), 0.0));
        assert!(!worth_building(Some(0.079), Some(0.04), 0.0));
        assert!(!worth_building(Some(0.01), Some(0.04), 0.079));
        assert!(worth_building(Some(0.01), Some(0.04), 0.08));
        assert!(!worth_building(Some(0.07), Some(0.04), 0.139));
        assert!(worth_building(Some(0.07), Some(0.04), 0.14));
    }
}
