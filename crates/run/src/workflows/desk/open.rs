//! Opening a run's books: from nothing, or from a checkpoint — the agent
//! loaded (and its replay, with `checkpoint.replay`), the output files cut
//! back to what the checkpoint counted — and the evaluator started.

use super::Desk;
use crate::state::{Books, CheckpointWriter, truncate_to};
use crate::vocab::ResumedFrom;
use crate::workflows::Evaluator;
use crate::workflows::RunOptions;
use crate::workflows::book::{Opening, RunBook};
use crate::workflows::progress::Progress;
use anyhow::Context;
use rlfleet_checkpoint::Checkpoint;
use rlfleet_learning::agents::{self, Agent};
use rlfleet_output::RunOutput;
use rlfleet_shared::config::RunConfig;
use std::time::Instant;

impl Desk {
    /// Opens the output directory and, when resuming, loads the checkpoint
    /// into `agent`; starts the evaluator. The book's session starts now.
    pub fn open(
        cfg: &RunConfig,
        opts: &RunOptions,
        agent: &mut dyn Agent,
    ) -> anyhow::Result<(RunBook, Desk)> {
        let mut opening = match &opts.resume {
            Some(path) => resume(cfg, path, agent)?,
            None => Opening::default(),
        };
        opening.train_steps = agent.train_steps();
        // The files say what the checkpoint says: rows written after it
        // go (the episodes they record are played again).
        for (name, &len) in &opening.book.files {
            truncate_to(&cfg.output_dir.join(name), len)
                .with_context(|| format!("cannot cut `{name}` back to the checkpoint"))?;
        }
        let out = RunOutput::create(cfg, opts.resume.is_some()).with_context(|| {
            format!(
                "cannot write the output directory `{}`",
                cfg.output_dir.display()
            )
        })?;
        let spec = cfg.env_source().spec()?;
        let evaluator = Evaluator::spawn(
            cfg.env_source().make()?,
            agents::build_policy(cfg, &spec),
            cfg.eval.episodes,
            cfg.seed,
        );
        let progress = Progress::new(
            opts.progress,
            cfg.stop.max_env_steps,
            opening.counters.env_steps,
        );
        let book = RunBook::new(cfg, opening, Instant::now());
        let desk = Desk {
            out,
            evaluator: Some(evaluator),
            writer: CheckpointWriter::spawn(),
            progress,
            record: opts.record.clone(),
            keep: cfg.checkpoint.keep as usize,
            max_failed: std::time::Duration::from_secs_f64(cfg.checkpoint.max_failed_secs),
            output_failing: false,
        };
        Ok((book, desk))
    }
}

/// What the checkpoint at `path` holds for the book; its agent state (and
/// replay) go into `agent`.
fn resume(
    cfg: &RunConfig,
    path: &std::path::Path,
    agent: &mut dyn Agent,
) -> anyhow::Result<Opening> {
    let ck = Checkpoint::load(path)?;
    ck.check_matches(path, &cfg.env, &cfg.agent.to_string())?;
    agent.load_state(&ck.agent_state).with_context(|| {
        format!(
            "checkpoint `{}` does not fit this run's agent",
            path.display()
        )
    })?;
    if cfg.checkpoint.replay
        && let Some(img) = &ck.replay
    {
        agent
            .restore_replay(img)
            .with_context(|| format!("the replay in `{}` does not fit", path.display()))?;
        tracing::info!(
            transitions = agent.replay_len(),
            "replay restored from the checkpoint"
        );
    }
    let books: Books = match &ck.books {
        Some(json) => serde_json::from_str(json)
            .with_context(|| format!("the books in checkpoint `{}` are damaged", path.display()))?,
        None => Books::default(),
    };
    let counters = ck.counters;
    tracing::info!(
        env_steps = counters.env_steps,
        episodes = counters.episodes,
        train_steps = agent.train_steps(),
        "resumed from {}",
        path.display()
    );
    Ok(Opening {
        counters,
        best: ck.best,
        book: books.book,
        run: books.run,
        resumed_from: Some(ResumedFrom {
            checkpoint: path.display().to_string(),
            env_steps: counters.env_steps,
            wall_secs: counters.wall_secs,
            batches_lost: 0,
        }),
        train_steps: 0,
    })
}
