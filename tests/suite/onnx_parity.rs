//! ONNX parity: for every architecture rlfleet publishes (MLP Q-network,
//! dueling head, softmax logits, tanh, squashed-Gaussian and Gaussian
//! policy heads), ONNX Runtime running the exported graph gives the tch
//! network's outputs on random inputs (max abs diff <= 1e-5), before and
//! after a weight update fed to the same session as its `params` input;
//! the standalone file (`learner-server export`) loads in Python's
//! `onnxruntime` and gives the same numbers.

use ort::session::Session;
use ort::value::TensorRef;
use rand::{Rng, SeedableRng};
use rlfleet_learning::agents::Persist;
use rlfleet_learning::agents::{Dqn, build_agent};
use rlfleet_learning::nets::FlatNet;
use rlfleet_shared::config::{AgentKind, RunConfig};
use rlfleet_shared::env::{self, EnvSpec};
use rlfleet_shared::onnx::{Head, PolicyGraph};
use rlfleet_tests::{binary, reference_python, workspace_root};
use std::process::Command;
use tch::{Device, Kind, Tensor};

pub(crate) const ROWS: usize = 64;
pub(crate) const TOLERANCE: f32 = 1e-5;

fn environment() -> &'static ort::environment::Environment {
    static ENV: std::sync::OnceLock<ort::environment::Environment> = std::sync::OnceLock::new();
    ENV.get_or_init(|| {
        let path = std::env::var_os("ORT_DYLIB_PATH")
            .expect("ORT_DYLIB_PATH is not set: run the tests through scripts/test.sh");
        ort::init_from(path).unwrap().build().unwrap()
    })
}

pub(crate) fn session(model: &[u8]) -> Session {
    Session::builder(environment())
        .unwrap()
        .commit_from_memory(model)
        .unwrap()
}

/// `(out, head)` from an ONNX session; `params` when it is an input.
pub(crate) fn run_ort(
    s: &mut Session,
    head: &str,
    obs: &[f32],
    od: usize,
    params: Option<&[f32]>,
) -> (Vec<f32>, Vec<f32>) {
    let obs = TensorRef::from_array_view(([obs.len() / od, od], obs)).unwrap();
    let outputs = match params {
        Some(p) => {
            let p = TensorRef::from_array_view(([p.len()], p)).unwrap();
            s.run(ort::inputs!["obs" => obs, "params" => p]).unwrap()
        }
        None => s.run(ort::inputs!["obs" => obs]).unwrap(),
    };
    let get = |name: &str| {
        outputs[name]
            .try_extract_tensor::<f32>()
            .unwrap()
            .1
            .to_vec()
    };
    (get("out"), get(head))
}

/// What tch computes for the published weights: the raw output and the
/// head's output.
pub(crate) fn run_tch(
    cfg: &RunConfig,
    spec: &EnvSpec,
    graph: &PolicyGraph,
    w: &[f32],
    obs: &[f32],
) -> (Vec<f32>, Vec<f32>) {
    let net = FlatNet::from_shape(graph.net.clone());
    let od = graph.net.obs_dim();
    // The network's part of the weights (a Gaussian head's log stds follow).
    let params = Tensor::from_slice(w).narrow(0, 0, net.numel());
    let x = Tensor::from_slice(obs).view([-1, od as i64]);
    let out = tch::no_grad(|| net.forward(&params, &x));
    let bounds = |low: &[f32], high: &[f32]| (Tensor::from_slice(low), Tensor::from_slice(high));
    let head = match &graph.head {
        Head::Q | Head::Logits => out.shallow_clone(),
        Head::DuelingQ => {
            // The agent's own Q-values, through its dueling head.
            let mut dqn = Dqn::new(&cfg.dqn, spec, cfg.torso(spec), 0, Device::Cpu);
            dqn.load_weights(&rlfleet_learning::agents::Weights {
                version: 0,
                data: w.to_vec(),
            })
            .unwrap();
            dqn.q_values(obs, obs.len() / od)
        }
        Head::Tanh { low, high } | Head::SquashedGaussian { low, high } => {
            let d = low.len() as i64;
            let (lo, hi) = bounds(low, high);
            let mean = out.narrow(1, 0, d);
            (&lo + &hi) / 2.0 + mean.tanh() * ((&hi - &lo) / 2.0)
        }
        Head::Gaussian { low, high } => {
            let (lo, hi) = bounds(low, high);
            out.minimum(&hi).maximum(&lo)
        }
    };
    let flat =
        |t: &Tensor| Vec::<f32>::try_from(t.contiguous().view([-1]).to_kind(Kind::Float)).unwrap();
    (flat(&out), flat(&head))
}

pub(crate) fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// The architectures, from shipped configs.
const CASES: &[(&str, &str)] = &[
    ("cartpole-dqn-single", "q"),
    ("acrobot-dqn-single", "dueling q"),
    ("cartpole-ppo-single", "logits"),
    ("pendulum-td3-single", "tanh"),
    ("pendulum-sac-single", "squashed gaussian"),
    ("pendulum-ppo-single", "gaussian"),
];

#[test]
fn ort_matches_tch_for_every_head_before_and_after_a_weight_update() {
    let mut rng = rand_pcg::Pcg64::seed_from_u64(7);
    for (name, what) in CASES {
        let cfg = RunConfig::load(&workspace_root().join(format!("config/{name}.toml"))).unwrap();
        let spec = env::spec(&cfg.env).unwrap();
        let graph = PolicyGraph::for_run(&cfg, &spec);
        let head = graph.head.output();
        let agent = build_agent(&cfg, &spec, Device::Cpu);
        let mut w = agent.weights().data;
        assert_eq!(w.len(), graph.numel(), "{name}");
        let od = spec.obs_dim();
        let obs: Vec<f32> = (0..ROWS * od)
            .map(|_| rng.random::<f32>() * 4.0 - 2.0)
            .collect();
        let mut s = session(&graph.model(None));
        for round in ["initial", "updated"] {
            let (out, h) = run_ort(&mut s, head, &obs, od, Some(&w));
            let (t_out, t_h) = run_tch(&cfg, &spec, &graph, &w, &obs);
            let (d_out, d_h) = (max_diff(&out, &t_out), max_diff(&h, &t_h));
            eprintln!(
                "{name} ({what}), {round} weights: max |ort - tch| out {d_out:.2e}, {head} {d_h:.2e}"
            );
            assert!(
                d_out <= TOLERANCE && d_h <= TOLERANCE,
                "{name} {round}: {d_out} {d_h}"
            );
            // The standalone model with the weights embedded agrees too.
            let mut standalone = session(&graph.model(Some(&w)));
            let (_, s_h) = run_ort(&mut standalone, head, &obs, od, None);
            assert!(max_diff(&s_h, &t_h) <= TOLERANCE, "{name} standalone");
            // A weight update: the same session takes the new params.
            for v in w.iter_mut() {
                *v += (rng.random::<f32>() - 0.5) * 0.2;
            }
        }
        if cfg.agent == AgentKind::Ppo && !spec.action_space.is_discrete() {
            // The log std travels at the end of the weights.
            assert_eq!(w.len(), graph.net.numel() + 1);
        }
    }
}

/// A trained run exported with `learner-server export` gives, in Python's
/// onnxruntime, the numbers tch computes from the checkpoint's weights.
#[test]
fn exported_file_loads_in_python_onnxruntime_with_the_same_numbers() {
    let dir = tempfile::tempdir().unwrap();
    for (name, _) in [CASES[1], CASES[4]] {
        // A short run leaves a checkpoint with trained weights.
        let mut cfg =
            RunConfig::load(&workspace_root().join(format!("config/{name}.toml"))).unwrap();
        cfg.output_dir = dir.path().join(name);
        cfg.stop.target_eval_return = None;
        cfg.stop.max_env_steps = Some(1_500);
        cfg.eval.period_steps = 500;
        let run = rlfleet_tests::run_single(&cfg, dir.path());
        assert!(run.success, "{}\n{}", run.stdout, run.stderr);
        let onnx = dir.path().join(format!("{name}.onnx"));
        let stdout = export(&cfg.output_dir, &onnx);
        assert!(
            stdout.starts_with(&format!("wrote {}", onnx.display())),
            "{stdout}"
        );

        let spec = env::spec(&cfg.env).unwrap();
        let graph = PolicyGraph::for_run(&cfg, &spec);
        let ck =
            rlfleet_checkpoint::Checkpoint::load(&cfg.output_dir.join("checkpoint.safetensors"))
                .unwrap();
        let w = ck.best.expect("evaluated").weights.data;
        let od = spec.obs_dim();
        let obs: Vec<f32> = (0..ROWS * od)
            .map(|i| ((i * 37 % 101) as f32) * 0.04 - 2.0)
            .collect();
        let (_, want) = run_tch(&cfg, &spec, &graph, &w, &obs);
        let got = python_onnxruntime(&onnx, graph.head.output(), &obs, od);
        let d = max_diff(&got, &want);
        eprintln!(
            "{name}: python onnxruntime vs tch, max |diff| {d:.2e} over {} values",
            got.len()
        );
        assert!(d <= TOLERANCE, "{name}: {d}");
    }
}

/// What Python's onnxruntime computes for output `output` of the model file
/// `onnx` on `obs` (rows of `od` values).
pub(crate) fn python_onnxruntime(
    onnx: &std::path::Path,
    output: &str,
    obs: &[f32],
    od: usize,
) -> Vec<f32> {
    let obs_path = onnx.with_extension("obs.f32");
    std::fs::write(
        &obs_path,
        obs.iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    let script = format!(
        "import sys, numpy as np, onnxruntime as ort\n\
         s = ort.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider'])\n\
         obs = np.fromfile(sys.argv[2], dtype='<f4').reshape(-1, {od})\n\
         (y,) = s.run(['{output}'], {{'obs': obs}})\n\
         sys.stdout.write(' '.join(repr(float(v)) for v in y.ravel()))\n"
    );
    let py = rlfleet_tests::output_within(
        Command::new(reference_python())
            .arg("-c")
            .arg(&script)
            .arg(onnx)
            .arg(&obs_path),
        std::time::Duration::from_secs(120),
        "Python's onnxruntime",
    );
    assert!(
        py.status.success(),
        "{}",
        String::from_utf8_lossy(&py.stderr)
    );
    String::from_utf8_lossy(&py.stdout)
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect()
}

/// Runs `learner-server export RUN_DIR --onnx ONNX`; its stdout.
pub(crate) fn export(run_dir: &std::path::Path, onnx: &std::path::Path) -> String {
    let export = rlfleet_tests::output_within(
        Command::new(binary("learner-server"))
            .arg("export")
            .arg(run_dir)
            .arg("--onnx")
            .arg(onnx),
        std::time::Duration::from_secs(120),
        "learner-server export",
    );
    let stdout = String::from_utf8_lossy(&export.stdout).into_owned();
    assert!(
        export.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&export.stderr)
    );
    stdout
}
