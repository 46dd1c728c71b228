//! `reference`: learning per frame and per second against a published
//! reference's algorithm (issue 33). For each MinAtar or Atari game and
//! seed, one after the other on this machine: `bench/python/minatar_dqn.py`
//! (MinAtar's DQN as its paper describes it, in PyTorch) or `ppo.py` (PPO
//! with CleanRL's settings for one env) and rlfleet's
//! `config/SUITE-GAME-AGENT.toml` (`single`, the same settings), for the
//! same frames. Reported: the mean return of the last 100 episodes ended
//! by each quarter of the frames (and by 100k, 250k and 500k frames
//! inside a longer run) and by each quarter of the reference's
//! wall time, frames/s, and rlfleet's figures against the reference's.

use serde::{Deserialize, Serialize};
use std::path::Path;

/// The algorithm compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Agent {
    /// MinAtar's DQN (`minatar_dqn.py`, `config/minatar-GAME-dqn.toml`).
    Dqn,
    /// PPO (`ppo.py`, `config/SUITE-GAME-ppo.toml`), the learning rate
    /// annealed over the config's `lr_anneal_steps` on both sides (a
    /// shorter run is the start of the config's).
    Ppo,
}

/// The games compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Suite {
    /// MinAtar's five (`breakout`, `space_invaders`, …).
    Minatar,
    /// ALE's (`breakout`, `pong`, …), as `ALE/GAME-v5` under
    /// AtariPreprocessing with 4 frames stacked; PPO only.
    Atari,
}

impl Suite {
    fn name(self) -> &'static str {
        match self {
            Suite::Minatar => "minatar",
            Suite::Atari => "atari",
        }
    }
}

impl Agent {
    fn name(self) -> &'static str {
        match self {
            Agent::Dqn => "dqn",
            Agent::Ppo => "ppo",
        }
    }
}

/// One finished episode: when it ended (frames, seconds) and its return.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Episode {
    pub frames: u64,
    #[serde(rename = "return")]
    pub ret: f64,
    pub secs: f64,
}

/// One run's curve, summarised.
#[derive(Debug, Serialize, Deserialize)]
pub struct Curve {
    pub game: String,
    pub seed: u64,
    /// `reference` or `rlfleet`.
    pub side: String,
    pub frames: u64,
    pub frames_per_sec: f64,
    /// (frames, mean return of the last 100 episodes ended by then).
    pub by_frames: Vec<(u64, f64)>,
    /// (seconds, the same).
    pub by_secs: Vec<(f64, f64)>,
}

/// Mean return of the last 100 episodes for which `ended` holds.
fn recent(eps: &[Episode], ended: impl Fn(&Episode) -> bool) -> f64 {
    let done: Vec<f64> = eps.iter().filter(|e| ended(e)).map(|e| e.ret).collect();
    let tail = &done[done.len().saturating_sub(100)..];
    if tail.is_empty() {
        f64::NAN
    } else {
        tail.iter().sum::<f64>() / tail.len() as f64
    }
}

/// Frames at which a curve is read: each quarter of the run, and the
/// issue's 100k, 250k and 500k marks that fall inside it, in order.
fn frame_marks(frames: u64) -> Vec<u64> {
    let mut marks: Vec<u64> = (1..=4).map(|q| frames * q / 4).collect();
    marks.extend(
        [100_000, 250_000, 500_000]
            .into_iter()
            .filter(|&m| m < frames),
    );
    marks.sort_unstable();
    marks.dedup();
    marks
}

fn curve(game: &str, seed: u64, side: &str, frames: u64, eps: &[Episode], secs: f64) -> Curve {
    let wall = eps.last().map_or(0.0, |e| e.secs);
    Curve {
        game: game.into(),
        seed,
        side: side.into(),
        frames,
        frames_per_sec: eps.last().map_or(0, |e| e.frames) as f64 / wall.max(1e-9),
        by_frames: frame_marks(frames)
            .into_iter()
            .map(|mark| (mark, recent(eps, |e| e.frames <= mark)))
            .collect(),
        by_secs: (1..=4)
            .map(|q| {
                let mark = secs * q as f64 / 4.0;
                (mark, recent(eps, |e| e.secs <= mark))
            })
            .collect(),
    }
}

/// A game's own name in its suite (`space_invaders` → `SpaceInvaders`).
fn camel(game: &str) -> String {
    game.split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_uppercase().chain(c).collect::<String>())
                .unwrap_or_default()
        })
        .collect()
}

/// The Gymnasium id of a game (`space_invaders` →
/// `MinAtar/SpaceInvaders-v0`: the full action set, as the reference;
/// Atari's `pong` → `ALE/Pong-v5`).
fn gym_id(suite: Suite, game: &str) -> String {
    match suite {
        Suite::Minatar => format!("gymnasium:MinAtar/{}-v0", camel(game)),
        Suite::Atari => format!("gymnasium:ALE/{}-v5", camel(game)),
    }
}

/// `config/SUITE-GAME-AGENT.toml`, checked to run `game`.
fn shipped_config(
    suite: Suite,
    agent: Agent,
    game: &str,
) -> anyhow::Result<rlfleet_shared::config::RunConfig> {
    anyhow::ensure!(
        (suite, agent) != (Suite::Atari, Agent::Dqn),
        "no Atari DQN reference: CleanRL's dqn_atari starts learning after 80,000 steps \
         of a 1,000,000-step replay, beyond this machine's budget (use --agent ppo)"
    );
    let shipped = crate::workflows::shipped(&format!(
        "config/{}-{}-{}.toml",
        suite.name(),
        game.replace('_', "-"),
        agent.name()
    ));
    let cfg = rlfleet_shared::config::RunConfig::load(&shipped)?;
    anyhow::ensure!(
        cfg.env == gym_id(suite, game),
        "{} runs {}",
        shipped.display(),
        cfg.env
    );
    Ok(cfg)
}

/// MinAtar's DQN as its paper describes it (embedded too).
const MINATAR_DQN: &str = include_str!("../python/minatar_dqn.py");
/// PPO with CleanRL's settings for one env, on MinAtar or Atari.
const PPO: &str = include_str!("../python/ppo.py");

/// The episodes of the reference `agent` on `suite`'s `game` (`breakout`,
/// `space_invaders`, …) for `frames` frames with `seed`; PPO anneals its
/// learning rate over `shipped`'s `ppo.lr_anneal_steps` (the torch Python
/// needs the envs: `scripts/torch-venv.sh` installs them).
fn python_side(
    suite: Suite,
    agent: Agent,
    shipped: &rlfleet_shared::config::RunConfig,
    game: &str,
    seed: u64,
    frames: u64,
) -> Result<Vec<Episode>, String> {
    let name = match suite {
        Suite::Minatar => game.to_string(),
        Suite::Atari => camel(game),
    };
    let mut args = vec![name, seed.to_string(), frames.to_string()];
    let script = match agent {
        Agent::Dqn => MINATAR_DQN,
        Agent::Ppo => {
            args.insert(0, suite.name().to_string());
            args.push(shipped.ppo.lr_anneal_steps.to_string());
            PPO
        }
    };
    crate::torch_python::json_lines(script, &args)
}

/// rlfleet's side: the shipped config `shipped` with the seed and frames,
/// run by `learner-server run` from this build (state and files in `dir`).
fn rlfleet(
    shipped: &rlfleet_shared::config::RunConfig,
    game: &str,
    seed: u64,
    frames: u64,
    dir: &Path,
) -> anyhow::Result<Vec<Episode>> {
    let mut cfg = shipped.clone();
    cfg.seed = seed;
    cfg.stop.max_env_steps = Some(frames);
    cfg.stop.max_wall_secs = None;
    cfg.output_dir = dir.join(format!("{game}-{seed}"));
    // `single`: no actor processes.
    crate::workflows::run_local(&cfg, 0, dir)?;
    let eps = rlfleet_output::read_episodes(&cfg.output_dir.join("episodes.csv"))?;
    Ok(eps
        .iter()
        .map(|e| Episode {
            frames: e.env_steps,
            ret: e.ret,
            secs: e.wall_secs,
        })
        .collect())
}

/// Runs every game and seed both ways; prints the comparison and writes
/// `reference_minatar.json` (MinAtar's DQN) or `reference_SUITE_ppo.json`.
pub fn bench(
    suite: Suite,
    agent: Agent,
    games: &[String],
    seeds: &[u64],
    frames: u64,
    out: &Path,
) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut curves = Vec::new();
    for game in games {
        let shipped = shipped_config(suite, agent, game)?;
        for &seed in seeds {
            let reference = python_side(suite, agent, &shipped, game, seed, frames)
                .map_err(anyhow::Error::msg)?;
            let ours = rlfleet(&shipped, game, seed, frames, dir.path())?;
            let secs = reference.last().map_or(1.0, |e| e.secs);
            let r = curve(game, seed, "reference", frames, &reference, secs);
            let o = curve(game, seed, "rlfleet", frames, &ours, secs);
            println!(
                "{game} seed {seed}: frames/s {:.0} vs {:.0} ({:.2}×)",
                o.frames_per_sec,
                r.frames_per_sec,
                o.frames_per_sec / r.frames_per_sec
            );
            for ((f, a), (_, b)) in o.by_frames.iter().zip(&r.by_frames) {
                println!("  by {f:>7} frames: rlfleet {a:>6.2}  reference {b:>6.2}");
            }
            for ((s, a), (_, b)) in o.by_secs.iter().zip(&r.by_secs) {
                println!("  by {s:>7.0} s:      rlfleet {a:>6.2}  reference {b:>6.2}");
            }
            curves.extend([r, o]);
        }
    }
    let name = match agent {
        Agent::Dqn => "reference_minatar".to_string(),
        Agent::Ppo => format!("reference_{}_ppo", suite.name()),
    };
    crate::measure::write_json(out, &name, &curves)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn game_names_become_gymnasium_ids() {
        assert_eq!(
            gym_id(Suite::Minatar, "breakout"),
            "gymnasium:MinAtar/Breakout-v0"
        );
        assert_eq!(
            gym_id(Suite::Minatar, "space_invaders"),
            "gymnasium:MinAtar/SpaceInvaders-v0"
        );
        assert_eq!(gym_id(Suite::Atari, "pong"), "gymnasium:ALE/Pong-v5");
    }

    #[test]
    fn atari_has_no_dqn_reference() {
        let err = shipped_config(Suite::Atari, Agent::Dqn, "pong").unwrap_err();
        assert!(err.to_string().contains("no Atari DQN reference"), "{err}");
    }

    #[test]
    fn every_shipped_reference_config_runs_its_game() {
        for game in [
            "breakout",
            "asterix",
            "freeway",
            "seaquest",
            "space_invaders",
        ] {
            shipped_config(Suite::Minatar, Agent::Dqn, game).unwrap();
        }
        shipped_config(Suite::Minatar, Agent::Ppo, "breakout").unwrap();
        for game in ["breakout", "pong"] {
            shipped_config(Suite::Atari, Agent::Ppo, game).unwrap();
        }
    }

    #[test]
    fn recent_means_take_the_last_hundred_ended() {
        let eps: Vec<Episode> = (0..150)
            .map(|i| Episode {
                frames: 10 * i,
                ret: if i < 50 { 0.0 } else { 1.0 },
                secs: i as f64,
            })
            .collect();
        assert_eq!(recent(&eps, |_| true), 1.0);
        assert_eq!(recent(&eps, |e| e.frames < 1000), 0.5);
        assert!(recent(&eps, |_| false).is_nan());
    }

    #[test]
    fn long_runs_are_also_read_at_the_issues_marks() {
        assert_eq!(frame_marks(100_000), [25_000, 50_000, 75_000, 100_000]);
        assert_eq!(
            frame_marks(500_000),
            [100_000, 125_000, 250_000, 375_000, 500_000]
        );
        assert_eq!(
            frame_marks(300_000),
            [75_000, 100_000, 150_000, 225_000, 250_000, 300_000]
        );
    }
}
