//! Shipped configs made to play until stopped (no target, no checkpoints),
//! for the benchmarks that stop their runs themselves.

use crate::soak::Server;
use crate::workflows::shipped;
use rlfleet_shared::config::RunConfig;

/// The main job's config, playing until stopped, its output in `s`'s
/// folder.
pub(crate) fn endless(s: &Server, name: &str) -> anyhow::Result<RunConfig> {
    endless_of(&shipped("config/cartpole-dqn-async.toml"), s, name)
}

/// The config at `path`, playing until stopped (no checkpoints), its
/// output in `s`'s folder.
pub(crate) fn endless_of(
    path: &std::path::Path,
    s: &Server,
    name: &str,
) -> anyhow::Result<RunConfig> {
    let mut cfg = RunConfig::load(path)?;
    cfg.name = name.to_string();
    cfg.output_dir = s.dir().join(name);
    cfg.stop = Default::default();
    cfg.stop.max_wall_secs = Some(3600.0);
    cfg.stop.max_episodes = Some(u64::MAX / 2);
    cfg.checkpoint.period_steps = 0;
    Ok(cfg)
}
