//! Config parsing and validation: what is accepted, and that every rejection
//! names the problem.

use super::*;

const MINIMAL: &str = r#"
name = "t"
env = "CartPole-v1"
agent = "dqn"
workflow = "single"
output_dir = "runs/t"
[stop]
max_env_steps = 100
"#;

fn err(text: &str) -> String {
    RunConfig::from_toml(text, "test.toml")
        .unwrap_err()
        .to_string()
}

#[test]
fn minimal_config_fills_defaults_and_round_trips() {
    let cfg = RunConfig::from_toml(MINIMAL, "test.toml").unwrap();
    assert_eq!(cfg.transport, TransportKind::Inproc);
    assert_eq!(cfg.dqn, DqnConfig::default());
    let resolved = cfg.to_resolved_toml();
    let again = RunConfig::from_toml(&resolved, "resolved").unwrap();
    assert_eq!(cfg, again);
    assert!(
        resolved.contains("[dqn]") && resolved.contains("gamma = 0.99"),
        "{resolved}"
    );
}

#[test]
fn unknown_key_is_named_with_the_allowed_keys() {
    let e = err(&MINIMAL.replace("[stop]", "[stop]\nmax_stepz = 3"));
    assert!(
        e.contains("unknown field `max_stepz`") && e.contains("max_env_steps"),
        "{e}"
    );
}

#[test]
fn wrong_type_quotes_the_line() {
    let e = err(&MINIMAL.replace("max_env_steps = 100", "max_env_steps = \"many\""));
    assert!(
        e.contains("max_env_steps = \"many\"") && e.contains("invalid type"),
        "{e}"
    );
}

#[test]
fn out_of_range_names_key_value_and_range() {
    let e = err(&format!("{MINIMAL}[dqn]\ngamma = 1.5\n"));
    assert_eq!(e, "`dqn.gamma` = 1.5 is out of range: a number in (0, 1]");
    let e = err(&format!(
        "{MINIMAL}[dqn]\nbatch_size = 128\nbuffer_size = 100\n"
    ));
    assert!(
        e.starts_with("`dqn.buffer_size` = 100 is out of range"),
        "{e}"
    );
}

#[test]
fn unknown_enum_values_list_the_choices() {
    let e = err(&MINIMAL.replace("agent = \"dqn\"", "agent = \"dqn2\""));
    assert!(
        e.contains("unknown variant `dqn2`") && e.contains("`dqn`"),
        "{e}"
    );
    let e = err(&MINIMAL.replace("CartPole-v1", "CartPole-v7"));
    assert!(e.contains("CartPole-v7") && e.contains("Acrobot-v1"), "{e}");
}

#[test]
fn wrong_workflow_pairings_are_rejected() {
    for w in ["ml-async", "ml-rma", "ml-rma-queue", "ml-rma-queue-short"] {
        let e = err(&MINIMAL.replace("\"single\"", &format!("\"{w}\"\ntransport = \"quic\"")));
        assert_eq!(
            e,
            format!(
                "`transport` = \"quic\" is not supported: workflow `{w}` trains on several \
                 learner ranks: use \"mpi\""
            )
        );
    }
    let e = err(
        &(MINIMAL.replace("\"single\"", "\"ml-rma\"\ntransport = \"mpi\"")
            + "[distributed]\nwindow_selector = \"nearest\"\n"),
    );
    assert!(
        e.contains("unknown variant `nearest`, expected `random` or `bin`"),
        "{e}"
    );
    let orchestrated = |distributed: &str| {
        MINIMAL.replace("\"single\"", "\"orchestrated\"\ntransport = \"quic\"")
            + "[distributed]\n"
            + distributed
    };
    let e = err(&orchestrated("error_buffer = 31.5"));
    assert!(
        e.starts_with("`distributed.error_buffer` = 31.5 is out of range: a number >= 32"),
        "{e}"
    );
    let e = err(&(MINIMAL.to_string() + "[dqn]\nlr = 0.001\nlr_end = 0.01\n"));
    assert!(
        e.starts_with(
            "`dqn.lr_end` = 0.01 is out of range: a number in 0..=0.001 (at most dqn.lr)"
        ),
        "{e}"
    );
    let e = err(&orchestrated("min_size_to_sample = 10"));
    assert!(e.contains("an integer >= 64 (dqn.batch_size"), "{e}");
    RunConfig::from_toml(&orchestrated("error_buffer = 32.0"), "t").unwrap();
    let e = err(&MINIMAL.replace("\"single\"", "\"seed-a2c\"\ntransport = \"quic\""));
    assert!(
        e.contains("use agent `a2c`, `ppo` or `impala`, not `dqn`"),
        "{e}"
    );
    // IMPALA runs on unrolls of the episodes it is given, not `rma`'s
    // pools, and needs discrete actions.
    let impala = MINIMAL.replace("agent = \"dqn\"", "agent = \"impala\"");
    let e = err(&impala
        .replace("\"single\"", "\"rma\"\ntransport = \"quic\"")
        .replace("[stop]", "[stop]\nmax_episodes = 10"));
    assert!(e.contains("agent `impala` trains on unrolls"), "{e}");
    let e = err(&(impala.clone() + "[impala]\nrho_bar = 0.0\n"));
    assert!(e.starts_with("`impala.rho_bar` = 0"), "{e}");
    let e = err(&impala.replace("CartPole-v1", "Pendulum-v1"));
    assert!(
        e.contains("agent `impala` needs a discrete action space"),
        "{e}"
    );
    RunConfig::from_toml(&impala, "t").unwrap();
    // R2D2 needs a recurrent core, a workflow that delivers episodes in
    // order, discrete actions, and its table in range; its evaluation
    // explores at 1e-3 unless `eval.epsilon` says more.
    let r2d2 = MINIMAL.replace("agent = \"dqn\"", "agent = \"r2d2\"");
    let e = err(&r2d2);
    assert!(e.contains("set `[model] core = \"lstm\"`"), "{e}");
    let r2d2 = r2d2 + "[model]\ncore = \"lstm\"\n";
    let e = err(&r2d2
        .replace("\"single\"", "\"rma\"\ntransport = \"quic\"")
        .replace("[stop]", "[stop]\nmax_episodes = 10"));
    assert!(
        e.contains("use workflow `single`, `sync`, `async` or `seed`, not `rma`"),
        "{e}"
    );
    let e = err(&(r2d2.clone() + "[r2d2]\npriority_eta = 1.5\n"));
    assert!(e.starts_with("`r2d2.priority_eta` = 1.5"), "{e}");
    let e = err(&(r2d2.clone() + "[r2d2]\neps_ladder = 0\n"));
    assert!(e.starts_with("`r2d2.eps_ladder` = 0"), "{e}");
    let e = err(&r2d2.replace("CartPole-v1", "Pendulum-v1"));
    assert!(
        e.contains("agent `r2d2` needs a discrete action space"),
        "{e}"
    );
    let cfg = RunConfig::from_toml(&r2d2, "t").unwrap();
    assert_eq!(cfg.eval_epsilon(), 1e-3);
    let cfg = RunConfig::from_toml(
        &r2d2.replace("[stop]", "[eval]\nepsilon = 0.05\n[stop]"),
        "t",
    )
    .unwrap();
    assert_eq!(cfg.eval_epsilon(), 0.05);
    // DQN's update rule: RMSprop's settings are checked.
    let rms = MINIMAL.to_string() + "[dqn]\noptimizer = \"rmsprop\"\n";
    let cfg = RunConfig::from_toml(&rms, "t").unwrap();
    assert_eq!(cfg.dqn.optimizer, OptimizerKind::Rmsprop);
    assert!(cfg.dqn.rmsprop_centered && cfg.dqn.rmsprop_eps == 0.01);
    let e = err(&(rms.clone() + "rmsprop_alpha = 1.0\n"));
    assert!(e.starts_with("`dqn.rmsprop_alpha` = 1"), "{e}");
    let e = err(&MINIMAL.replace("[stop]", "[dqn]\noptimizer = \"sgd\"\n[stop]"));
    assert!(e.contains("sgd"), "{e}");
    let e = err(&MINIMAL
        .replace("\"single\"", "\"rma\"\ntransport = \"quic\"")
        .replace("agent = \"dqn\"", "agent = \"a2c\"")
        .replace("[stop]", "[stop]\nmax_episodes = 10"));
    assert!(
        e.contains("agent `a2c` trains on each finished episode"),
        "{e}"
    );
    for wf in ["rma", "rma-queue-pop-all", "nb-async", "random"] {
        let e = err(&MINIMAL.replace("\"single\"", &format!("\"{wf}\"\ntransport = \"quic\"")));
        assert!(
            e.contains(&format!("workflow `{wf}` ends when all episodes")),
            "{e}"
        );
    }
    let with = |wf: &str, distributed: &str| {
        MINIMAL.replace("\"single\"", &format!("\"{wf}\"\ntransport = \"quic\""))
            + "[distributed]\n"
            + distributed
    };
    let e = err(&with("async-window", "in_flight = 33"));
    assert!(
        e.starts_with("`distributed.in_flight` = 33 is out of range"),
        "{e}"
    );
    for ahead in [0, 1025] {
        let e = err(&with("seed", &format!("max_batches_ahead = {ahead}")));
        let want = format!("`distributed.max_batches_ahead` = {ahead} is out of range");
        assert!(e.starts_with(&want), "{e}");
    }
    let e = err(&with("sync", "fixed_policy = \"ck.safetensors\""));
    assert!(e.contains("fixed_policy is for workflow `random`"), "{e}");
    let e = err(&MINIMAL.replace("\"single\"", "\"ml-async\"\ntransport = \"quic\""));
    assert!(e.contains("use \"mpi\""), "{e}");
    let e = err(&MINIMAL
        .replace("\"single\"", "\"ml-async\"\ntransport = \"mpi\"")
        .replace("\"dqn\"", "\"a2c\""));
    assert!(e.contains("data-parallel DQN"), "{e}");
    let e = err(&MINIMAL.replace("\"single\"", "\"single\"\ntransport = \"mpi\""));
    assert!(e.contains("workflow `single` runs in one process"), "{e}");
    let e = err(&MINIMAL.replace("\"single\"", "\"async\"\ntransport = \"quic\""));
    assert!(e.contains("set stop.max_episodes"), "{e}");
    let e = err(&MINIMAL.replace("CartPole-v1", "Pendulum-v1"));
    assert!(
        e.contains("discrete action space") && e.contains("Pendulum-v1"),
        "{e}"
    );
    let e = err(&MINIMAL.replace("[stop]\nmax_env_steps = 100", ""));
    assert!(e.contains("[stop] sets no condition"), "{e}");
}

/// Which agent fits which action space and workflow, and the new tables'
/// ranges.
#[test]
fn continuous_agents_and_ppo_rules() {
    let with_agent = |agent: &str, env: &str| {
        MINIMAL
            .replace("agent = \"dqn\"", &format!("agent = \"{agent}\""))
            .replace("CartPole-v1", env)
    };
    for agent in ["td3", "ddpg", "sac", "ppo"] {
        RunConfig::from_toml(&with_agent(agent, "Pendulum-v1"), "t").unwrap();
    }
    RunConfig::from_toml(&with_agent("ppo", "CartPole-v1"), "t").unwrap();
    assert_eq!(
        err(&with_agent("sac", "CartPole-v1")),
        "agent `sac` needs a continuous action space, and `CartPole-v1` has a discrete one"
    );
    // eval.epsilon: a probability, for discrete actions.
    let eps = |agent: &str, env: &str, e: &str| {
        with_agent(agent, env).replace("[stop]", &format!("[eval]\nepsilon = {e}\n[stop]"))
    };
    let ok = RunConfig::from_toml(&eps("dqn", "CartPole-v1", "0.05"), "t").unwrap();
    assert_eq!(ok.eval.epsilon, 0.05);
    let e = err(&eps("dqn", "CartPole-v1", "1.0"));
    assert!(e.contains("eval.epsilon") && e.contains("[0, 1)"), "{e}");
    assert_eq!(
        err(&eps("sac", "Pendulum-v1", "0.05")),
        "eval.epsilon = 0.05 takes random discrete actions, and `Pendulum-v1` has a continuous action space"
    );
    let e = err(&with_agent("td3", "Pendulum-v1")
        .replace("\"single\"", "\"random\"\ntransport = \"quic\"")
        .replace("[stop]", "[stop]\nmax_episodes = 3"));
    assert_eq!(
        e,
        "workflow `random` plays discrete actions only; agent `td3` on `Pendulum-v1` acts in a box"
    );
    RunConfig::from_toml(
        &with_agent("sac", "Pendulum-v1").replace("\"single\"", "\"seed\"\ntransport = \"quic\""),
        "t",
    )
    .unwrap();
    RunConfig::from_toml(
        &with_agent("td3", "Pendulum-v1").replace("\"single\"", "\"sync\"\ntransport = \"quic\""),
        "t",
    )
    .unwrap();
    let e = err(&with_agent("ppo", "CartPole-v1")
        .replace("\"single\"", "\"nb-async\"\ntransport = \"quic\"")
        .replace("[stop]", "[stop]\nmax_episodes = 3"));
    assert!(
        e.contains("use workflow `single`, `sync` or `seed-a2c`"),
        "{e}"
    );
    RunConfig::from_toml(
        &with_agent("ppo", "CartPole-v1")
            .replace("\"single\"", "\"seed-a2c\"\ntransport = \"quic\""),
        "t",
    )
    .unwrap();
    assert_eq!(
        err(&format!(
            "{}[ppo]\nbatch_size = 512\n",
            with_agent("ppo", "CartPole-v1")
        )),
        "`ppo.batch_size` = 512 is out of range: an integer in 1..=256 (at most ppo.n_steps)"
    );
    assert_eq!(
        err(&format!(
            "{}[sac]\ntau = 0.0\n",
            with_agent("sac", "Pendulum-v1")
        )),
        "`sac.tau` = 0 is out of range: a number in (0, 1]"
    );
    assert_eq!(
        err(&format!(
            "{}[ddpg]\nbuffer_size = 10\n",
            with_agent("ddpg", "Pendulum-v1")
        )),
        "`ddpg.buffer_size` = 10 is out of range: an integer in 256..=100000000 (at least the batch size)"
    );
    assert_eq!(
        err(&format!("{MINIMAL}[dqn]\nn_step = 0\n")),
        "`dqn.n_step` = 0 is out of range: an integer in 1..=100"
    );
}

/// Every leaf of a resolved config, as a dotted path (`stop.max_episodes`,
/// `dqn.hidden[0]`), with its JSON value.
fn leaves(v: &serde_json::Value, path: String, out: &mut Vec<(String, serde_json::Value)>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                leaves(v, p, out);
            }
        }
        serde_json::Value::Array(a) if !a.is_empty() => {
            for (i, v) in a.iter().enumerate() {
                leaves(v, format!("{path}[{i}]"), out);
            }
        }
        other => out.push((path, other.clone())),
    }
}

/// Sets the leaf at a path `leaves` produced.
fn set(v: &mut serde_json::Value, path: &str, to: serde_json::Value) {
    let mut at = v;
    for part in path.split('.') {
        let (key, index) = match part.split_once('[') {
            Some((k, i)) => (k, Some(i.trim_end_matches(']').parse::<usize>().unwrap())),
            None => (part, None),
        };
        at = &mut at[key];
        if let Some(i) = index {
            at = &mut at[i];
        }
    }
    *at = to;
}

/// The same JSON without nulls (TOML has none: an unset option is absent).
fn without_nulls(v: &serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Object(m) => serde_json::Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[test]
fn every_wrong_typed_field_names_its_key_path_in_toml_and_json() {
    let cfg = RunConfig::from_toml(MINIMAL, "test.toml").unwrap();
    let json = serde_json::to_value(&cfg).unwrap();
    let mut all = Vec::new();
    leaves(&json, String::new(), &mut all);
    assert!(all.len() > 80, "only {} leaves", all.len());
    for (path, value) in &all {
        // A value of the wrong type for this key.
        let wrong = match value {
            serde_json::Value::String(_) => serde_json::json!(7),
            // An unset option: a table fits none of them.
            serde_json::Value::Null => serde_json::json!({"seven": 7}),
            _ => serde_json::json!("seven"),
        };
        let mut bad = json.clone();
        set(&mut bad, path, wrong.clone());
        let e = from_json_keyed::<RunConfig>(&serde_json::to_vec(&bad).unwrap()).unwrap_err();
        assert!(e.starts_with(&format!("{path}: ")), "JSON {path}: {e}");
        let toml_text = toml::to_string(&without_nulls(&bad)).unwrap();
        let e = RunConfig::from_toml(&toml_text, "t.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("{path}: ")), "TOML {path}: {e}");
    }
}

#[test]
fn a_negative_count_names_its_key_path_in_toml_and_json() {
    let cfg = RunConfig::from_toml(MINIMAL, "test.toml").unwrap();
    let json = serde_json::to_value(&cfg).unwrap();
    for path in [
        "stop.max_episodes",
        "seed",
        "eval.episodes",
        "distributed.batch_step_frequency",
        "probe.train_every",
        "dqn.hidden[0]",
    ] {
        let mut bad = json.clone();
        set(&mut bad, path, serde_json::json!(-5));
        let e = from_json_keyed::<RunConfig>(&serde_json::to_vec(&bad).unwrap()).unwrap_err();
        assert!(e.starts_with(&format!("{path}: ")), "JSON {path}: {e}");
        assert!(e.contains("-5"), "JSON {path}: {e}");
        let toml_text = toml::to_string(&without_nulls(&bad)).unwrap();
        let e = RunConfig::from_toml(&toml_text, "t.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("{path}: ")), "TOML {path}: {e}");
    }
}

/// `layout = "auto"` reads the axis smaller than both others as channels,
/// and refuses by name when none is; boolean planes are bytes the network
/// does not scale, uint8 images bytes it does.
#[test]
fn auto_layout_finds_channels_or_asks_and_only_uint8_is_scaled() {
    use crate::env::{EnvSpec, ObsDtype, Space};
    let spec = |shape: &[usize], dtype| EnvSpec {
        id: "python:suite:Game".into(),
        observation_space: Space::uniform_box(shape.iter().product(), 0.0, 1.0),
        obs_shape: shape.to_vec(),
        obs_dtype: dtype,
        action_space: Space::Discrete { n: 3 },
        max_episode_steps: None,
        reward_threshold: None,
    };
    let model = ModelConfig {
        torso: Torso::NatureCnn,
        channels: Some(vec![16]),
        kernels: Some(vec![3]),
        strides: Some(vec![1]),
        ..ModelConfig::default()
    };
    let bools = model
        .torso_for(&spec(&[10, 10, 4], ObsDtype::Bool))
        .unwrap()
        .unwrap();
    assert_eq!(
        (bools.input, bools.channels_last, bools.bytes),
        ([4, 10, 10], true, false)
    );
    let frames = model
        .torso_for(&spec(&[4, 84, 84], ObsDtype::U8))
        .unwrap()
        .unwrap();
    assert_eq!(
        (frames.input, frames.channels_last, frames.bytes),
        ([4, 84, 84], false, true)
    );
    let err = model
        .torso_for(&spec(&[10, 10, 10], ObsDtype::Bool))
        .unwrap_err();
    assert!(
        err.contains("cannot tell the channels") && err.contains("layout = \"chw\""),
        "{err}"
    );
    let told = ModelConfig {
        layout: ImageLayout::Hwc,
        ..model
    };
    let ok = told
        .torso_for(&spec(&[10, 10, 10], ObsDtype::Bool))
        .unwrap()
        .unwrap();
    assert!(ok.channels_last);
}

/// `[model] core = "lstm"`: sizes in range, PPO on discrete actions (under
/// each of its workflows) so far; every other pairing refused by name; the
/// policy network the run publishes has the core.
#[test]
fn a_recurrent_core_is_checked_and_reaches_the_policy_network() {
    let ppo = MINIMAL
        .replace("agent = \"dqn\"", "agent = \"ppo\"")
        .replace("[stop]", "[model]\ncore = \"lstm\"\ncore_size = 16\n[stop]");
    let cfg = RunConfig::from_toml(&ppo, "test.toml").unwrap();
    let spec = cfg.env_source().spec().unwrap();
    let shape = cfg.policy_shape(&spec, 2);
    assert_eq!(
        shape.core(),
        Some(&crate::nets::Core {
            size: 16,
            layers: 1
        })
    );
    assert_eq!(shape.state_len(), 32);
    for workflow in ["sync", "seed-a2c"] {
        let other = ppo.replace("\"single\"", &format!("\"{workflow}\""));
        RunConfig::from_toml(&other, "test.toml").unwrap();
    }
    let e = err(&ppo.replace("core_size = 16", "core_size = 0"));
    assert!(
        e.contains("model.core_size") && e.contains("1..=4096"),
        "{e}"
    );
    let e = err(&ppo.replace("core_size = 16", "core_layers = 5"));
    assert!(e.contains("model.core_layers"), "{e}");
    let e = err(&ppo.replace("agent = \"ppo\"", "agent = \"dqn\""));
    assert!(
        e.contains("model.core")
            && e.contains("agents ppo, impala, a2c and r2d2 take a recurrent core"),
        "{e}"
    );
    let e = err(&ppo.replace("CartPole-v1", "Pendulum-v1"));
    assert!(e.contains("discrete actions so far"), "{e}");
    let e = err(&ppo.replace("core = \"lstm\"", "core = \"gru\""));
    assert!(e.contains("gru") && e.contains("lstm"), "{e}");
}

/// `text` with the key `key` of `[section]` (`""`: the top level)
/// written as `typo`.
fn misspell(text: &str, section: &str, key: &str, typo: &str) -> String {
    let start = match section {
        "" => 0,
        s => text
            .find(&format!("[{s}]"))
            .expect("the section is in the config"),
    };
    let at = start
        + text[start..]
            .find(&format!("\n{key} ="))
            .expect("the key is in the section");
    format!(
        "{}\n{typo} ={}",
        &text[..at],
        &text[at + 1 + key.len() + 2..]
    )
}

/// Ten misspellings of keys the shipped configs set, each answered with
/// the key that was meant.
#[test]
fn a_misspelled_key_gets_the_intended_one_suggested() {
    let cases = [
        ("cartpole-dqn-single", "", "output_dir", "outputdir"),
        (
            "cartpole-dqn-single",
            "stop",
            "max_env_steps",
            "max_env_step",
        ),
        (
            "cartpole-dqn-single",
            "stop",
            "target_eval_return",
            "target_eval_retrun",
        ),
        ("cartpole-dqn-single", "eval", "period_steps", "period_step"),
        (
            "cartpole-dqn-single",
            "checkpoint",
            "period_steps",
            "periodsteps",
        ),
        (
            "cartpole-dqn-single",
            "dqn",
            "learning_starts",
            "learning_start",
        ),
        ("cartpole-dqn-single", "dqn", "batch_size", "batchsize"),
        (
            "cartpole-dqn-seed",
            "distributed",
            "inference_max_batch",
            "inference_max_bach",
        ),
        ("cartpole-ppo-single", "ppo", "clip_range", "clip_rang"),
        ("cartpole-ppo-single", "ppo", "gae_lambda", "gae_lamda"),
    ];
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config");
    for (config, section, key, typo) in cases {
        let text = std::fs::read_to_string(dir.join(format!("{config}.toml"))).unwrap();
        RunConfig::from_toml(&text, config).expect("the shipped config is valid");
        let e = err(&misspell(&text, section, key, typo));
        assert!(
            e.contains(&format!("unknown field `{typo}`"))
                && e.trim_end().ends_with(&format!("did you mean `{key}`?")),
            "{config} [{section}] {typo}: {e}"
        );
    }
}
