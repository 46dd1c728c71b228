//! [`Prepacked`]: for a convolutional policy, an ONNX Runtime session over
//! the model with the current weights embedded, built on a thread of its
//! own after each weight update. With the weights constant, ONNX Runtime
//! folds them into its packed convolution layouts when it builds the
//! session, which the `params`-input session cannot do: about twice the
//! observations a second for DQN-Nature's CNN at batch 8. Until the build
//! for the newest weights is done, the `params`-input session acts, so
//! every action is taken with the weights last loaded.

use anyhow::Context;
use ort::session::Session;
use ort::session::builder::GraphOptimizationLevel;
use rlfleet_shared::nets::NetShape;
use rlfleet_shared::onnx::{Head, PolicyGraph};
use std::thread::JoinHandle;

/// A build under way: the weight generation it embeds, and its thread.
type Build = (u64, JoinHandle<anyhow::Result<Session>>);

/// The embedded-weights session of the newest weights built so far, and
/// the build that follows them.
pub struct Prepacked {
    graph: PolicyGraph,
    ready: Option<(u64, Session)>,
    build: Option<Build>,
    /// A build failed: the `params`-input session acts from then on.
    failed: bool,
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
        })
    }

    /// The session for weight generation `generation` (whose weights are
    /// `params`) when it is built; otherwise `None`, and a build of it is
    /// started unless one is under way (each build takes the newest
    /// weights when it starts).
    pub fn session(&mut self, generation: u64, params: &[f32]) -> Option<&mut Session> {
        if self.build.as_ref().is_some_and(|(_, h)| h.is_finished()) {
            let (built, handle) = self.build.take().expect("checked");
            match handle.join() {
                Ok(Ok(session)) => self.ready = Some((built, session)),
                Ok(Err(e)) => self.fail(format!("{e:#}")),
                Err(_) => self.fail("its thread panicked".into()),
            }
        }
        let current = self.ready.as_ref().is_some_and(|(g, _)| *g == generation);
        if !current && self.build.is_none() && !self.failed {
            let (graph, params) = (self.graph.clone(), params.to_vec());
            let handle = std::thread::Builder::new()
                .name("ort-prepack".into())
                .spawn(move || build(&graph.model(Some(&params))));
            match handle {
                Ok(h) => self.build = Some((generation, h)),
                Err(e) => self.fail(format!("cannot start its thread: {e}")),
            }
        }
        match &mut self.ready {
            Some((g, session)) if *g == generation => Some(session),
            _ => None,
        }
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
