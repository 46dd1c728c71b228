//! [`OrtForward`]: the policy network run by ONNX Runtime (`ort`, loaded at
//! run time from `ORT_DYLIB_PATH`) from the model the learner ships in
//! `Welcome.onnx`, with the flat weights fed as the graph's `params` input:
//! a weight update never rebuilds the session (a convolutional network
//! also gets one with the weights embedded, built beside it: see
//! `ort_prepacked`). An actor using it does not
//! load libtorch (nor does any actor: the other backend is plain Rust).

use crate::ort_env::environment;
use crate::ort_prepacked::Prepacked;
use anyhow::Context;
use ort::session::Session;
use ort::value::TensorRef;
use rlfleet_shared::nets::{Forward, NetShape, Rows};

/// A session over a policy model whose weights are the `params` input.
pub struct OrtForward {
    net: NetShape,
    session: Session,
    params: Vec<f32>,
    /// Counts weight loads: which weights a prepacked session embeds.
    generation: u64,
    /// For a convolutional network, sessions with the weights embedded.
    prepacked: Option<Prepacked>,
    /// Passes run, and how many of them with the weights embedded.
    passes: (u64, u64),
    out: Vec<f32>,
}

impl std::fmt::Debug for OrtForward {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OrtForward")
            .field("sizes", &self.net.sizes())
            .finish()
    }
}

impl OrtForward {
    /// A session over `model` (as `rlfleet_shared::onnx` writes it, with
    /// `params` an input) for the network `net`; one intra-op thread.
    pub fn new(model: &[u8], net: NetShape) -> anyhow::Result<OrtForward> {
        let env = environment()?;
        let session = Session::builder(env)
            .and_then(|b| b.with_intra_threads(1).map_err(ort::Error::from))
            .and_then(|mut b| b.commit_from_memory(model))
            .context("ONNX Runtime refused the policy model")?;
        let names: Vec<&str> = session.inputs().iter().map(|i| i.name()).collect();
        anyhow::ensure!(
            names.contains(&"obs") && names.contains(&"params"),
            "the policy model's inputs are {names:?}, not obs and params"
        );
        anyhow::ensure!(
            names.contains(&"state") == net.core().is_some(),
            "the policy model's inputs are {names:?}; the network ({}) {} a recurrent state",
            net.describe(),
            if net.core().is_some() {
                "has"
            } else {
                "has no"
            }
        );
        Ok(OrtForward {
            prepacked: Prepacked::for_net(&net),
            net,
            session,
            params: Vec::new(),
            generation: 0,
            passes: (0, 0),
            out: Vec::new(),
        })
    }
}

impl OrtForward {
    /// The same backend with the weights only ever as an input (the
    /// baseline benchmarks compare the embedded sessions with).
    pub fn without_prepacking(mut self) -> OrtForward {
        self.prepacked = None;
        self
    }

    /// Whether the next pass runs the session with the current weights
    /// embedded; when it is not built yet, starts building it.
    pub fn runs_prepacked(&mut self) -> bool {
        let (generation, params) = (self.generation, &self.params);
        self.prepacked
            .as_mut()
            .is_some_and(|p| p.session(generation, params).is_some())
    }

    /// Waits until the next pass runs the session with the current weights
    /// embedded, at most `limit`; returns how long that took (for tests and
    /// benchmarks).
    pub fn wait_prepacked(
        &mut self,
        limit: std::time::Duration,
    ) -> anyhow::Result<std::time::Duration> {
        let t0 = std::time::Instant::now();
        while !self.runs_prepacked() {
            anyhow::ensure!(
                t0.elapsed() < limit,
                "the session with the weights embedded was not built within {limit:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        Ok(t0.elapsed())
    }

    /// How many sessions with the weights embedded were started building.
    pub fn prepack_builds(&self) -> u64 {
        self.prepacked.as_ref().map_or(0, Prepacked::builds)
    }
}

impl Drop for OrtForward {
    fn drop(&mut self) {
        if self.prepacked.is_some() && self.passes.0 > 0 {
            tracing::info!(
                passes = self.passes.0,
                embedded = self.passes.1,
                weight_loads = self.generation,
                builds = self.prepack_builds(),
                "ONNX Runtime: passes with the weights embedded"
            );
        }
    }
}

impl Forward for OrtForward {
    fn net(&self) -> &NetShape {
        &self.net
    }

    fn load(&mut self, params: &[f32]) -> Result<(), String> {
        self.net.check_params(params.len())?;
        self.params.clear();
        self.params.extend_from_slice(params);
        self.generation += 1;
        Ok(())
    }

    fn loaded(&self) -> bool {
        !self.params.is_empty()
    }

    /// Panics if ONNX Runtime fails on inputs of the shapes the model
    /// declares (it does not, short of a broken runtime).
    fn forward(&mut self, x: &[f32], batch: usize) -> &[f32] {
        assert!(
            self.net.core().is_none(),
            "a recurrent network runs through forward_state"
        );
        self.run(x, batch, &mut [])
    }

    /// Feeds each row's `state` as the model's `state` input and writes
    /// `state_out` back into it.
    fn forward_state(&mut self, x: Rows<'_>, batch: usize, state: &mut [f32]) -> &[f32] {
        self.run(&x.values(), batch, state)
    }
}

impl OrtForward {
    fn run(&mut self, x: &[f32], batch: usize, state: &mut [f32]) -> &[f32] {
        assert!(self.loaded(), "forward before any weights were loaded");
        let obs_dim = self.net.obs_dim();
        assert_eq!(x.len(), batch * obs_dim, "input size");
        let len = self.net.state_len();
        assert_eq!(state.len(), batch * len, "recurrent state size");
        let obs = TensorRef::from_array_view(([batch, obs_dim], x)).expect("obs tensor");
        let params = TensorRef::from_array_view(([self.params.len()], &self.params[..]))
            .expect("params tensor");
        // A session with the weights embedded exists only for a network
        // without a core: it takes the observations alone.
        let embedded = self
            .prepacked
            .as_mut()
            .and_then(|p| p.session(self.generation, &self.params));
        self.passes.0 += 1;
        self.passes.1 += u64::from(embedded.is_some());
        let outputs = match embedded {
            Some(session) => session.run(ort::inputs!["obs" => obs]),
            None if len == 0 => self
                .session
                .run(ort::inputs!["obs" => obs, "params" => params]),
            None => {
                let s = TensorRef::from_array_view(([batch, len], &*state)).expect("state tensor");
                self.session
                    .run(ort::inputs!["obs" => obs, "params" => params, "state" => s])
            }
        }
        .expect("ONNX Runtime run");
        if len > 0 {
            let (_, next) = outputs["state_out"]
                .try_extract_tensor::<f32>()
                .expect("f32 state");
            state.copy_from_slice(next);
        }
        let (_, data) = outputs["out"]
            .try_extract_tensor::<f32>()
            .expect("f32 output");
        self.out.clear();
        self.out.extend_from_slice(data);
        &self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlfleet_shared::nets::NetCopy;
    use rlfleet_shared::onnx::{Head, PolicyGraph};

    /// The ort backend computes what the plain-Rust one does, takes new
    /// weights without a new session, and refuses a broken model and a
    /// wrong weight count by name.
    #[test]
    fn agrees_with_the_plain_rust_network_and_refuses_bad_input() {
        let net = NetShape::new(4, &[16, 16], 3);
        let graph = PolicyGraph {
            net: net.clone(),
            head: Head::Q,
        };
        let mut ort = OrtForward::new(&graph.model(None), net.clone()).unwrap();
        let mut rust = NetCopy::new(net.clone());
        let x: Vec<f32> = (0..8 * 4).map(|i| (i % 7) as f32 * 0.3 - 1.0).collect();
        for k in 0..2 {
            let w: Vec<f32> = (0..net.numel())
                .map(|i| ((i * 31 + k * 7) % 17) as f32 * 0.02 - 0.16)
                .collect();
            Forward::load(&mut ort, &w).unwrap();
            Forward::load(&mut rust, &w).unwrap();
            let a = Forward::forward(&mut ort, &x, 8).to_vec();
            let b = Forward::forward(&mut rust, &x, 8).to_vec();
            assert_eq!(a.len(), 24);
            for (p, q) in a.iter().zip(&b) {
                assert!((p - q).abs() < 1e-5, "{p} vs {q}");
            }
        }
        assert_eq!(
            Forward::load(&mut ort, &[0.0; 3]).unwrap_err(),
            format!("weights have 3 values, the network has {}", net.numel())
        );
        let err = OrtForward::new(b"not a model", net).unwrap_err();
        assert!(
            format!("{err:#}").starts_with("ONNX Runtime refused the policy model"),
            "{err:#}"
        );
    }
}

#[cfg(test)]
mod prepacked_tests {
    use super::*;
    use rlfleet_shared::nets::{ConvLayer, ConvTorso, NetCopy, TorsoKind};
    use rlfleet_shared::onnx::{Head, PolicyGraph};
    use std::time::Duration;

    /// A convolutional network acts through the session with its weights
    /// embedded once that is built, computing what the plain-Rust network
    /// does; right after new weights it acts with them through the
    /// `params` session, and then through their own embedded session.
    #[test]
    fn a_cnn_acts_with_the_weights_last_loaded_before_and_after_its_prepacked_session() {
        let layer = |out, kernel, stride| ConvLayer {
            out,
            kernel,
            stride,
        };
        let torso = ConvTorso {
            input: [2, 12, 12],
            channels_last: false,
            bytes: true,
            kind: TorsoKind::Plain,
            layers: vec![layer(8, 4, 2), layer(8, 3, 1)],
        };
        let net = NetShape::with_torso(Some(torso), 2 * 12 * 12, &[16], 3);
        let graph = PolicyGraph {
            net: net.clone(),
            head: Head::Q,
        };
        let mut ort = OrtForward::new(&graph.model(None), net.clone()).unwrap();
        let mut rust = NetCopy::new(net.clone());
        let x: Vec<f32> = (0..4 * 288).map(|i| ((i * 37) % 256) as f32).collect();
        let agree = |ort: &mut OrtForward, rust: &mut NetCopy| {
            let a = Forward::forward(ort, &x, 4).to_vec();
            let b = Forward::forward(rust, &x, 4).to_vec();
            assert_eq!(a.len(), 12);
            for (p, q) in a.iter().zip(&b) {
                assert!((p - q).abs() < 1e-4, "{p} vs {q}");
            }
        };
        // Distinct weights for each `k`, small enough to keep outputs sane.
        let weights = |k: usize| -> Vec<f32> {
            (0..net.numel())
                .map(|i| ((i * 31 + k * 7) % 17) as f32 * 0.01 - 0.08)
                .collect()
        };
        for k in 0..3 {
            let w = weights(k);
            Forward::load(&mut ort, &w).unwrap();
            Forward::load(&mut rust, &w).unwrap();
            // The new weights' embedded session is not built yet.
            assert!(!ort.runs_prepacked(), "weights {k}: a stale session");
            agree(&mut ort, &mut rust);
            ort.wait_prepacked(Duration::from_secs(30)).unwrap();
            agree(&mut ort, &mut rust);
        }
        // Weights loaded before every pass, far faster than a build: after
        // the first builds have measured both rates, no build starts until
        // the weights stop coming; then the newest weights' session is
        // built and acts.
        let loads = 2000;
        let before = ort.prepack_builds();
        for k in 0..loads {
            Forward::load(&mut ort, &weights(3 + k)).unwrap();
            Forward::forward(&mut ort, &x, 4);
        }
        let started = ort.prepack_builds() - before;
        assert!(
            started <= loads as u64 / 200,
            "{started} builds for {loads} loads"
        );
        ort.wait_prepacked(Duration::from_secs(30)).unwrap();
    }
}

#[cfg(test)]
mod continuous_tests {
    use super::*;
    use rlfleet_shared::onnx::{Head, PolicyGraph};
    use rlfleet_shared::policy::{ContinuousHead, ContinuousPolicy};

    /// A continuous policy acts the same through ONNX Runtime as through
    /// the plain-Rust network, for the tanh head and for the Gaussian head
    /// whose weights carry log stds after the network's.
    #[test]
    fn continuous_heads_act_alike_on_both_backends() {
        let (low, high) = ([-2.0f32], [2.0f32]);
        for (head, onnx_head) in [
            (
                ContinuousHead::Tanh,
                Head::Tanh {
                    low: low.to_vec(),
                    high: high.to_vec(),
                },
            ),
            (
                ContinuousHead::Gaussian,
                Head::Gaussian {
                    low: low.to_vec(),
                    high: high.to_vec(),
                },
            ),
        ] {
            let rust = || ContinuousPolicy::new(3, &[16], head, &low, &high, 1);
            let mut plain = rust();
            let graph = PolicyGraph {
                net: plain.net().clone(),
                head: onnx_head,
            };
            let forward = OrtForward::new(&graph.model(None), plain.net().clone()).unwrap();
            let mut ort = rust().with_forward(Box::new(forward)).unwrap();
            let w: Vec<f32> = (0..plain.numel())
                .map(|i| ((i * 13) % 11) as f32 * 0.05 - 0.25)
                .collect();
            plain.load(1, &w).unwrap();
            ort.load(1, &w).unwrap();
            let obs: Vec<f32> = (0..5 * 3).map(|i| (i % 4) as f32 * 0.5 - 1.0).collect();
            let (mut a, mut b) = (Vec::new(), Vec::new());
            plain.act(&obs, 5, false, &mut a);
            ort.act(&obs, 5, false, &mut b);
            for (x, y) in a.iter().zip(&b) {
                assert!((x - y).abs() < 1e-5, "{head:?}: {x} vs {y}");
            }
        }
    }

    /// A network with a recurrent core (two LSTM layers, a convolution-free
    /// MLP before them) steps in ONNX Runtime, its state fed back as the
    /// model's `state` input, to the outputs and states the plain-Rust copy
    /// reaches, row by row over several steps; a model without the state
    /// input is refused for it.
    #[test]
    fn a_recurrent_core_steps_with_its_state_fed_back() {
        use rlfleet_shared::nets::{Core, NetCopy};
        let net = NetShape::new(3, &[8], 4).with_core(Some(Core { size: 5, layers: 2 }));
        let graph = PolicyGraph {
            net: net.clone(),
            head: Head::Logits,
        };
        let mut ort = OrtForward::new(&graph.model(None), net.clone()).unwrap();
        let mut rust = NetCopy::new(net.clone());
        let w: Vec<f32> = (0..net.numel())
            .map(|i| ((i * 31) % 17) as f32 * 0.05 - 0.4)
            .collect();
        Forward::load(&mut ort, &w).unwrap();
        Forward::load(&mut rust, &w).unwrap();
        let (batch, len) = (3, net.state_len());
        let (mut s_ort, mut s_rust) = (vec![0.0; batch * len], vec![0.0; batch * len]);
        for t in 0..6 {
            let x: Vec<f32> = (0..batch * 3)
                .map(|i| ((i + t) % 5) as f32 * 0.4 - 0.8)
                .collect();
            let a = ort
                .forward_state(Rows::Values(&x), batch, &mut s_ort)
                .to_vec();
            let b = rust
                .forward_state(Rows::Values(&x), batch, &mut s_rust)
                .to_vec();
            for (x, y) in a.iter().zip(&b).chain(s_ort.iter().zip(&s_rust)) {
                assert!((x - y).abs() < 1e-5, "step {t}: {x} vs {y}");
            }
        }
        assert!(s_ort.iter().any(|&v| v != 0.0));
        let plain = PolicyGraph {
            net: NetShape::new(3, &[8], 4),
            head: Head::Logits,
        };
        let e = OrtForward::new(&plain.model(None), net).unwrap_err();
        assert!(format!("{e}").contains("has a recurrent state"), "{e}");
    }
}
