//! `learner-server mpi RUN.toml` (feature `mpi`): the learner rank of an
//! MPMD job (`mpirun -n 1 learner-server mpi RUN.toml : -n A actor-client
//! mpi`). Every rank learns the layout; the learner checks the config and
//! broadcasts the actors' mailbox geometry; then it runs like embedded mode
//! — the daemon (QUIC listener included, so actors outside the allocation
//! can join the same run: a mixed fleet), one run, the MPI transport thread
//! serving the actor ranks — and ends when the run and every actor rank
//! are done. A rank that cannot go on aborts the whole job with the reason.

use crate::daemon;
use crate::server_config::ServerConfig;
use crate::transport::mpi::{MpiOptions, serve};
use rlfleet_run::workflows::{Learners, RunOptions, RunSummary};
use rlfleet_shared::config::{RunConfig, TransportKind};
use rlfleet_shared::mpi::rsmpi::traits::{Communicator, Root};
use rlfleet_shared::mpi::{self, Geometry, Group, Layout, Role, mailbox};
use std::path::{Path, PathBuf};
use tokio_util::sync::CancellationToken;

/// Flags of `learner-server mpi`.
#[derive(Debug, Clone)]
pub struct MpiRun {
    pub config: PathBuf,
    pub options: RunOptions,
    /// Listeners and tokens for QUIC actors joining from outside the job
    /// (default: loopback, an ephemeral port).
    pub server_config: Option<PathBuf>,
    /// Where to write the QUIC address and certificate fingerprint (JSON)
    /// once listening.
    pub ready_file: Option<PathBuf>,
    /// A new run, or the newest unfinished one of the config's name in the
    /// state directory (`--resume` without a checkpoint: a job started
    /// again after its learner rank died).
    pub start: rlfleet_run::state::Start,
    /// The state directory (`--state-dir`; else the server config's).
    pub state_dir: Option<PathBuf>,
}

/// The mailbox geometry of a run: one slot per batch an actor may have in
/// flight, for the workflows whose actors deposit one-sidedly.
pub fn geometry(cfg: &RunConfig, layout: &Layout) -> Result<Geometry, String> {
    if !cfg.workflow.deposits() {
        return Ok(Geometry::plan(layout, 0, |_| 0));
    }
    let spec = cfg.env_source().spec().map_err(|e| e.to_string())?;
    // Batches carry single frames when observations stack them.
    let obs_dim = (spec.obs_dim() / cfg.frame_stack.max(1) as usize) as u32;
    let action_dim = spec.action_space.flat_dim() as u32;
    let steps = cfg
        .distributed
        .batch_step_frequency
        .max(cfg.distributed.steps_per_round);
    Ok(Geometry::plan(
        layout,
        u64::from(cfg.distributed.in_flight.max(1)),
        |envs| mailbox::slot_bytes(obs_dim, action_dim, steps, envs),
    ))
}

fn load(path: &Path, layout: &mut Layout) -> Result<RunConfig, String> {
    let mut cfg = RunConfig::load(path).map_err(|e| e.to_string())?;
    // From here on an actor is an env group's leader.
    layout.form_groups(cfg.ranks_per_env)?;
    let (learners, actors) = (layout.learners().len(), layout.actors().len());
    let (w, multi) = (cfg.workflow, cfg.workflow.is_multi_learner());
    if multi && learners < 2 {
        return Err(format!(
            "workflow `{w}` trains on 2 or more learner ranks; this job has {learners}: \
             mpirun -n 2 learner-server mpi RUN.toml : -n ACTORS actor-client mpi"
        ));
    }
    if multi && w.deposits() && actors < learners {
        return Err(format!(
            "workflow `{w}` gives every learner rank actors of its own: it needs at least \
             {learners} actor ranks (one per learner rank); this job has {actors}"
        ));
    }
    if !multi && learners != 1 {
        return Err(format!(
            "workflow `{w}` takes one learner rank; this job has {learners} (the multi-learner \
             workflows are ml-async, ml-rma, ml-rma-queue and ml-rma-queue-short)"
        ));
    }
    if !cfg.workflow.is_distributed() {
        return Err(format!(
            "workflow `{}` runs in one process: `learner-server run {}`",
            cfg.workflow,
            path.display()
        ));
    }
    cfg.transport = TransportKind::Mpi;
    cfg.validate().map_err(|e| e.to_string())?;
    if actors == 0 {
        return Err(format!(
            "no actor ranks in this job: `{}`",
            rlfleet_shared::config::MPI_LAUNCH
        ));
    }
    Ok(cfg)
}

/// A helper learner of a multi-learner workflow: its share of the window's allocation,
/// the same agent as the lead's (output under `learner-RANK/`), the lead's
/// commands until the run ends, then the window's collective free.
fn helper(
    world: &mpi::SimpleCommunicator,
    mut cfg: RunConfig,
    commands: Group,
    reduce: Group,
) -> anyhow::Result<()> {
    let window = mpi::Window::allocate(world, 0);
    cfg.output_dir = cfg.output_dir.join(format!("learner-{}", world.rank()));
    std::fs::create_dir_all(&cfg.output_dir)?;
    let spec = cfg.env_source().spec()?;
    let agent =
        rlfleet_learning::agents::build_agent(&cfg, &spec, rlfleet_learning::device::select(1));
    rlfleet_learning::agents::data_parallel::serve_helper(agent, commands, reduce);
    drop(window);
    Ok(())
}

/// Runs a learner rank; returns the run's summary on the lead learner
/// (`None` on a helper learner).
pub fn run(args: MpiRun, cancel: CancellationToken) -> anyhow::Result<Option<RunSummary>> {
    let universe = mpi::init().map_err(anyhow::Error::msg)?;
    let world = universe.world();
    let mut layout = Layout::exchange(&world, Role::Learner, 0, 0).map_err(anyhow::Error::msg)?;
    let cfg = match load(&args.config, &mut layout) {
        Ok(c) => c,
        Err(e) => mpi::abort(&format!("{}: {e}", args.config.display()), 2),
    };
    let mut scfg = match &args.server_config {
        Some(p) => ServerConfig::load(p).unwrap_or_else(|e| mpi::abort(&e.to_string(), 2)),
        None => {
            let mut s = ServerConfig::default();
            s.actors.listen = ([127, 0, 0, 1], 0).into();
            s.api.listen = ([127, 0, 0, 1], 0).into();
            s.actors.tls_dir = cfg.output_dir.join("tls");
            s
        }
    };
    if let Some(dir) = &args.state_dir {
        scfg.state_dir = dir.clone();
    }
    let geometry = geometry(&cfg, &layout).unwrap_or_else(|e| mpi::abort(&e, 2));
    let lead = layout.lead_learner().expect("this rank is a learner");
    let mut words = geometry.to_words();
    world.process_at_rank(lead).broadcast_into(&mut words[..]);
    // (Collective over the world, then over the learners.)
    let learners = mpi::split_by_role(&world, Role::Learner);
    let reduce = learners.duplicate();
    if layout.rank != lead {
        return helper(&world, cfg, Group(learners), Group(reduce)).map(|()| None);
    }
    let mut args = args;
    if cfg.workflow.is_multi_learner() {
        // The run's agent becomes the lead of the data-parallel learners.
        let (commands, reduce) = (Group(learners), Group(reduce));
        let count = commands.0.size() as usize;
        let batch = u64::from(cfg.dqn.batch_size);
        let lead = Box::new(move |agent| {
            let lead = rlfleet_learning::agents::data_parallel::DataParallel::new(
                agent, commands, reduce, batch,
            );
            Box::new(lead) as Box<dyn rlfleet_learning::agents::Agent>
        });
        args.options.learners = Some(Learners::new(count, layout.actors().len(), lead));
    } else {
        // Freed now: after MPI_Finalize it would be an error.
        drop((learners, reduce));
    }
    tracing::info!(
        learner = layout.rank,
        actors = layout.actors().len(),
        mailbox_slots = geometry.slots,
        window_bytes = geometry.total_bytes(),
        ranks_per_env = cfg.ranks_per_env,
        "MPI job: {} learner rank, {} actor ranks",
        layout.learners().len(),
        layout.actors().len()
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let output_dir = cfg.output_dir.clone();
    let result = runtime.block_on(async {
        let shutdown = CancellationToken::new();
        let d = daemon::start(&scfg, shutdown.clone()).await?;
        if let Some(path) = &args.ready_file {
            d.write_ready_file(path)?;
        }
        // The actor ranks wait on this rank: a run that cannot start ends
        // the whole job with the reason.
        let id = crate::embedded::start_or_resume(
            &d.hub,
            cfg,
            args.options.clone(),
            &args.start,
            &scfg.state_dir,
        )
        .unwrap_or_else(|e| mpi::abort(&format!("{e:#}"), 2));
        let opts = MpiOptions {
            layout,
            geometry,
            max_frame_bytes: scfg.actors.max_frame_bytes,
        };
        let (registry, rt) = (d.hub.registry.clone(), tokio::runtime::Handle::current());
        let transport = std::thread::Builder::new()
            .name("mpi-transport".into())
            .spawn(move || serve(registry, opts, rt))?;
        let hub = d.hub.clone();
        let result = crate::embedded::wait_run(&hub, &id, &cancel, &output_dir).await;
        // Actor ranks waiting for a next run are told to stop.
        shutdown.cancel();
        d.wait().await;
        tokio::task::spawn_blocking(move || transport.join())
            .await?
            .map_err(|_| anyhow::anyhow!("the MPI transport thread panicked"))?;
        // Again, with what actor ranks sent after the run ended (counted
        // dropped) now that every one has left.
        crate::embedded::write_metrics(&hub, &output_dir);
        result.map(Some)
    });
    drop(world);
    drop(universe);
    result
}
