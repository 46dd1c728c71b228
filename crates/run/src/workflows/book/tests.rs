//! The book with no driver: what it queues, in which order, with the time
//! it is given (no clock, no file anywhere here).

use super::{Effect, Opening, RunBook};
use crate::workflows::{EvalResult, StopReason};
use rlfleet_learning::agents::{self, Agent};
use rlfleet_shared::config::RunConfig;
use std::time::{Duration, Instant};

fn run(extra: &str) -> (RunConfig, Box<dyn Agent>) {
    let text = format!(
        "name = \"book\"\nenv = \"CartPole-v1\"\nagent = \"dqn\"\nworkflow = \"single\"\noutput_dir = \"never-written\"\n{extra}\n"
    );
    let cfg = RunConfig::from_toml(&text, "book").expect("a valid config");
    let spec = cfg.env_source().spec().expect("CartPole");
    let agent = agents::build_agent(&cfg, &spec, rlfleet_learning::device::select(1));
    (cfg, agent)
}

fn effects(book: &mut RunBook) -> Vec<Effect> {
    std::iter::from_fn(|| book.poll_effect()).collect()
}

fn result(agent: &dyn Agent, env_steps: u64, returns: Vec<f64>, confirming: bool) -> EvalResult {
    EvalResult {
        env_steps,
        weights: agent.weights(),
        returns,
        confirming,
    }
}

#[test]
fn rows_publications_and_checkpoints_are_queued_in_order_with_the_time_given() {
    let (cfg, agent) = run(
        "[stop]\nmax_env_steps = 10000\n[eval]\nperiod_steps = 100\n[checkpoint]\nperiod_steps = 200\n",
    );
    let t0 = Instant::now();
    let mut book = RunBook::new(&cfg, Opening::default(), t0);
    assert!(book.poll(t0 + Duration::from_secs(2)).is_none());
    assert_eq!(book.counters.wall_secs, 2.0);

    book.counters.env_steps = 150;
    book.episode(0, 3, 12.5, 150, 7);
    book.flush();
    book.after_steps(0, agent.as_ref(), t0 + Duration::from_secs(3));
    let got = effects(&mut book);
    assert_eq!(got.len(), 3, "{got:?}");
    assert!(
        matches!(&got[0], Effect::Episode(r) if r.episode == 0 && r.actor == 3 && r.env_steps == 150 && r.wall_secs == 2.0),
        "{got:?}"
    );
    assert!(matches!(got[1], Effect::Flush));
    assert!(matches!(got[2], Effect::Publish { env_steps: 150, .. }));
    assert_eq!(book.counters.episodes, 1);
    assert_eq!(book.recent_mean(), Some(12.5));

    // 250 crosses both periods: weights published, then the checkpoint,
    // its snapshot holding the counters of that moment.
    book.counters.env_steps = 250;
    book.after_steps(150, agent.as_ref(), t0 + Duration::from_secs(4));
    book.counters.env_steps = 260;
    let got = effects(&mut book);
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(matches!(got[0], Effect::Publish { env_steps: 250, .. }));
    let Effect::Checkpoint(job) = &got[1] else {
        panic!("a checkpoint: {got:?}")
    };
    assert_eq!(
        (job.ck.counters.env_steps, job.ck.counters.episodes),
        (250, 1)
    );
    assert!(!job.wait && job.run.is_none());
    assert_eq!(job.book.recent, [12.5]);
    assert!(job.book.files.is_empty(), "the desk measures the files");
    assert!(effects(&mut book).is_empty());
    assert!(!std::path::Path::new("never-written").exists());
}

#[test]
fn a_distributed_run_only_marks_its_checkpoints_due() {
    let (cfg, agent) = run("[stop]\nmax_env_steps = 10000\n[checkpoint]\nperiod_steps = 200\n");
    let t0 = Instant::now();
    let mut book = RunBook::new(&cfg, Opening::default(), t0);
    book.defer_checkpoints = true;
    book.counters.env_steps = 200;
    book.after_steps(199, agent.as_ref(), t0);
    assert!(
        !effects(&mut book)
            .iter()
            .any(|e| matches!(e, Effect::Checkpoint(_)))
    );
    assert!(book.take_checkpoint_due());
    assert!(!book.checkpoint_due());
}

#[test]
fn a_screening_pass_asks_for_a_confirmation_which_stops_the_run_at_the_next_poll() {
    let (cfg, agent) = run("[stop]\ntarget_eval_return = 100.0\n[eval]\nconfirm_episodes = 100\n");
    let t0 = Instant::now();
    let mut book = RunBook::new(&cfg, Opening::default(), t0);
    let agent = agent.as_ref();

    book.evaluated(&result(agent, 1000, vec![150.0; 10], false));
    let got = effects(&mut book);
    assert!(matches!(&got[0], Effect::Eval(r) if r.mean_return == 150.0 && !r.confirming));
    assert!(
        matches!(
            got[1],
            Effect::Confirm {
                env_steps: 1000,
                episodes: 100,
                ..
            }
        ),
        "{got:?}"
    );
    assert!(book.poll(t0).is_none(), "a screening pass does not stop it");

    book.evaluated(&result(agent, 1000, vec![120.0; 100], true));
    // A later screening pass is recorded, not judged.
    book.evaluated(&result(agent, 2000, vec![500.0; 10], false));
    let got = effects(&mut book);
    assert_eq!(got.len(), 2, "two rows and no confirmation: {got:?}");
    assert!(got.iter().all(|e| matches!(e, Effect::Eval(_))));
    assert_eq!(
        book.poll(t0),
        Some(StopReason::TargetReached {
            mean_return: 120.0,
            env_steps: 1000,
            confirmed_over: 100
        })
    );
    assert_eq!(book.best_eval(), Some(500.0));
}
