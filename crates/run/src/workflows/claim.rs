//! A new run's output directory: never another run's. A directory that
//! holds a run's results (its `config.resolved.toml`, `episodes.csv` or
//! `summary.toml`) is left alone and the run writes to the first free
//! sibling, `<output_dir>-2`, `-3`, …; a fresh one is used as given. The
//! claim is the resolved config written with `create_new`, so two runs
//! started at once never share a directory.

use anyhow::Context;
use rlfleet_shared::config::RunConfig;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The resolved config a run writes into its output directory.
pub const RESOLVED_CONFIG: &str = "config.resolved.toml";

/// Files whose presence says a directory holds a run's results.
const RESULTS: [&str; 3] = [RESOLVED_CONFIG, "episodes.csv", "summary.toml"];

fn holds_results(dir: &Path) -> bool {
    RESULTS.iter().any(|f| dir.join(f).exists())
}

/// `base`'s `n`th sibling (`runs/x` → `runs/x-2`).
pub fn sibling(base: &Path, n: u32) -> PathBuf {
    match base.file_name() {
        Some(name) => base.with_file_name(format!("{}-{n}", name.to_string_lossy())),
        None => base.join(format!("run-{n}")),
    }
}

/// Points `cfg.output_dir` at a directory no other run's results are in
/// (creating it) and writes the resolved config there. Returns the
/// directory it holds results of instead, when it moved.
pub fn claim_output_dir(cfg: &mut RunConfig) -> anyhow::Result<Option<PathBuf>> {
    let base = cfg.output_dir.clone();
    for n in 1.. {
        let dir = if n == 1 {
            base.clone()
        } else {
            sibling(&base, n)
        };
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create output_dir {}", dir.display()))?;
        if holds_results(&dir) {
            continue;
        }
        cfg.output_dir = dir.clone();
        let claimed = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(dir.join(RESOLVED_CONFIG));
        match claimed {
            Ok(mut f) => {
                f.write_all(cfg.to_resolved_toml().as_bytes())
                    .with_context(|| format!("cannot write {}", dir.display()))?;
                return Ok((n > 1).then_some(base));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e).with_context(|| format!("cannot write {}", dir.display())),
        }
    }
    unreachable!("a free sibling is found")
}

/// Where a new run writes: a claimed directory ([`claim_output_dir`]),
/// or `output_dir` as given when `opts` continue from a checkpoint or
/// ask to keep it (the run's output then writes its resolved config over
/// the one there). Says where, when it moved.
pub fn settle_output_dir(cfg: &mut RunConfig, opts: &super::RunOptions) -> anyhow::Result<()> {
    if opts.resume.is_some() || opts.keep_output_dir {
        return Ok(());
    }
    if let Some(taken) = claim_output_dir(cfg)? {
        tracing::warn!(
            run = %cfg.name,
            "{} holds another run's results: this run writes to {}",
            taken.display(),
            cfg.output_dir.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(dir: &Path) -> RunConfig {
        let text = format!(
            "name = \"claim\"\nenv = \"CartPole-v1\"\nagent = \"dqn\"\nworkflow = \"single\"\noutput_dir = \"{}\"\n[stop]\nmax_episodes = 1\n",
            dir.display()
        );
        RunConfig::from_toml(&text, "claim").unwrap()
    }

    #[test]
    fn a_directory_with_results_is_left_alone_and_the_next_free_sibling_taken() {
        let root = tempfile::tempdir().unwrap();
        let base = root.path().join("out");
        // Fresh (or holding only other files): used as given.
        std::fs::create_dir_all(base.join("tls")).unwrap();
        let mut a = cfg(&base);
        assert_eq!(claim_output_dir(&mut a).unwrap(), None);
        assert_eq!(a.output_dir, base);
        let written = std::fs::read_to_string(base.join(RESOLVED_CONFIG)).unwrap();
        assert!(written.contains("name = \"claim\""), "{written}");
        // Claimed: the next run of the same config goes to -2, then -3.
        let mut b = cfg(&base);
        assert_eq!(claim_output_dir(&mut b).unwrap(), Some(base.clone()));
        assert_eq!(b.output_dir, root.path().join("out-2"));
        let mut c = cfg(&base);
        claim_output_dir(&mut c).unwrap();
        assert_eq!(c.output_dir, root.path().join("out-3"));
        // Results of an older version (no resolved config) count too.
        let old = root.path().join("old");
        std::fs::create_dir_all(&old).unwrap();
        std::fs::write(old.join("episodes.csv"), "episode\n").unwrap();
        let mut d = cfg(&old);
        claim_output_dir(&mut d).unwrap();
        assert_eq!(d.output_dir, root.path().join("old-2"));
    }
}
