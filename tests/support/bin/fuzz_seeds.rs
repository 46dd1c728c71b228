//! Writes the seed corpora of the fuzz targets (`fuzz/`): one encoded frame
//! of every message type (as a body, and as a stream with its length
//! prefix), and every shipped run config as TOML and as a JSON body.
//! `scripts/fuzz.sh` adds a checkpoint written by a real run.
//!
//! Usage: `fuzz-seeds CORPUS_DIR`.

use rlfleet_shared::config::{AgentKind, RunConfig, WorkflowKind};
use rlfleet_shared::wire::*;
use std::path::Path;
use std::sync::Arc;

fn messages() -> Vec<Message> {
    let start = EpisodeStart {
        env: 1,
        episode: 7,
        seed: 42,
    };
    let weights = WeightsMsg {
        version: 3,
        data: Arc::from(vec![0.5f32, -1.25, 2.0]),
    };
    let fault = EnvFaultReport {
        episode: 6,
        env: 0,
        error: "ValueError: bad action".into(),
    };
    vec![
        Message::Hello(Hello {
            protocol: PROTOCOL_VERSION,
            software: "rlfleet 0.1.0".into(),
            actor_id: "node1-0".into(),
            session_id: 99,
            token: "s3cret".into(),
            env_capacity: 4,
            run: String::new(),
            once: false,
        }),
        Message::Welcome(Welcome {
            run_id: "run-1".into(),
            workflow: WorkflowKind::Async,
            env_id: "gymnasium:CartPole-v1".into(),
            env_kwargs: "{\"sutton_barto_reward\": true}".into(),
            env_wrappers: vec!["gymnasium.wrappers:FlattenObservation".into()],
            python_path: vec!["/opt/envs".into()],
            obs_dim: 4,
            obs_shape: vec![4],
            obs_u8: false,
            frame_stack: 1,
            action_dim: 1,
            action_n: 2,
            agent: AgentKind::Dqn,
            hidden: vec![64, 64],
            dueling: true,
            torso: Some(TorsoMsg {
                input: [4, 84, 84],
                channels_last: false,
                impala: false,
                scaled: true,
                layers: vec![[32, 8, 4], [64, 4, 2], [64, 3, 1]],
            }),
            core: [64, 1],
            onnx: vec![8, 9, 18, 4],
            n_envs: 2,
            seed: 5,
            batch_step_frequency: 16,
            steps_per_round: 32,
            env_step_timeout_secs: 0.0,
            in_flight: 2,
            epsilon: 0.1,
            weights: Some(weights.clone()),
            weights_may_trail: true,
            starts: vec![start],
        }),
        Message::Observations(Observations {
            seq: 3,
            obs: vec![0.1, 0.2, 0.3, 0.4],
            obs_u8: vec![],
            rewards: vec![1.0],
            flags: vec![0],
            faults: vec![fault.clone()],
        }),
        Message::Observations(Observations {
            seq: 4,
            obs: vec![],
            obs_u8: vec![0, 17, 255, 128],
            rewards: vec![0.0],
            flags: vec![1],
            faults: vec![],
        }),
        Message::Actions(Actions {
            seq: 3,
            policy_version: 2,
            actions: vec![1.0],
            starts: vec![start],
        }),
        Message::Experience(Experience {
            actor_id: "node1-0".into(),
            session_id: 99,
            seq: 12,
            policy_version: 2,
            steps: {
                let mut s = Steps::default();
                s.begin(0, 7, 20, &[0.1, 0.2, 0.3, 0.4], false);
                s.step(&[1.0], 1.0, &[0.2, 0.3, 0.4, 0.5], false);
                s.end(false);
                s.into()
            },
            finished: vec![EpisodeResult {
                episode: 7,
                env: 1,
                ret: 21.0,
                length: 21,
            }],
            faults: vec![fault.clone()],
            idle_envs: vec![1],
            last: false,
        }),
        Message::Ack(Ack {
            seq: 12,
            duplicate: false,
            weights: Some(weights),
            weights_apart: None,
            epsilon: 0.05,
            starts: vec![start],
            full: false,
        }),
        Message::Stop(Stop {
            reason: "target reached".into(),
            shutdown: false,
        }),
        ErrorCode::BadShape.message("obs has 3 values, expected 4"),
        Message::WorkRequest(WorkRequest {
            actor_id: "node1-0".into(),
            session_id: 99,
            seq: 13,
            faults: vec![fault],
            idle_envs: vec![0, 1],
            last: true,
        }),
    ]
}

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::create_dir_all(dir).expect("corpus folder");
    std::fs::write(dir.join(name), bytes).expect("corpus file");
}

fn main() {
    let corpus = std::env::args_os()
        .nth(1)
        .expect("usage: fuzz-seeds CORPUS_DIR");
    let corpus = Path::new(&corpus);
    let mut frames = 0;
    for (i, msg) in messages().iter().enumerate() {
        let frame = encode(msg);
        let kind = msg.kind().replace(' ', "-");
        write(
            &corpus.join("frame"),
            &format!("{i:02}-{kind}-body"),
            &frame[4..],
        );
        write(
            &corpus.join("frame"),
            &format!("{i:02}-{kind}-stream"),
            &frame,
        );
        frames += 2;
    }
    let shipped = rlfleet_tests::workspace_root().join("config");
    let mut configs = 0;
    for entry in std::fs::read_dir(&shipped).expect("config/") {
        let path = entry.expect("config entry").path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read(&path).expect("config file");
        write(&corpus.join("config"), &format!("{name}.toml"), &text);
        configs += 1;
        // server.toml is not a run config; as text it is still a good seed.
        if let Ok(cfg) = RunConfig::load(&path) {
            let json = serde_json::to_vec(&cfg).expect("config as JSON");
            write(&corpus.join("config"), &format!("{name}.json"), &json);
            configs += 1;
        }
    }
    println!(
        "fuzz-seeds: {frames} frames, {configs} configs in {}",
        corpus.display()
    );
}
