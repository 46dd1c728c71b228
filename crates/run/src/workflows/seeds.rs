//! The seeds environments are reset with: every one below 2^32 (numpy's
//! legacy `RandomState`, which many third-party envs seed, takes no
//! larger), training episodes, screening evaluations and confirming
//! evaluations each in a range of their own, so no evaluation replays a
//! start state training saw or a screening one scored.

/// Training seeds are below this.
const TRAIN_SEEDS: u64 = 1 << 31;
/// Screening evaluations take `[2^31, 2^31 + 2^30)`, confirming ones
/// `[2^31 + 2^30, 2^32)`.
const EVAL_SEEDS: u64 = 1 << 30;

/// The seed of training episode `episode` (reproducible across resumes and
/// the same for a re-issued episode).
pub fn episode_seed(run_seed: u64, episode: u64) -> u64 {
    run_seed.wrapping_mul(1_000_003).wrapping_add(episode) % TRAIN_SEEDS
}

/// The seed of episode `i` of an evaluation of a run seeded `run_seed`
/// (the same start states at every evaluation of the run; a confirming
/// evaluation's are others).
pub fn eval_seed(run_seed: u64, i: u32, confirming: bool) -> u64 {
    let base = TRAIN_SEEDS + if confirming { EVAL_SEEDS } else { 0 };
    base + run_seed.wrapping_mul(1000).wrapping_add(u64::from(i)) % EVAL_SEEDS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_fit_in_32_bits_and_keep_to_their_ranges() {
        for run in [0, 1, 7, 4_294_967_295, u64::MAX / 3, u64::MAX] {
            for e in [0, 1, 999, 1 << 40, u64::MAX] {
                assert!(episode_seed(run, e) < TRAIN_SEEDS, "run {run}, episode {e}");
            }
            for i in [0, 9, 99, 999] {
                let (screen, confirm) = (eval_seed(run, i, false), eval_seed(run, i, true));
                assert!((TRAIN_SEEDS..TRAIN_SEEDS + EVAL_SEEDS).contains(&screen));
                assert!((TRAIN_SEEDS + EVAL_SEEDS..1 << 32).contains(&confirm));
            }
        }
        // The same episode keeps its seed; episodes and evaluation
        // episodes differ.
        assert_eq!(episode_seed(3, 17), episode_seed(3, 17));
        assert_ne!(episode_seed(3, 17), episode_seed(3, 18));
        assert_ne!(eval_seed(3, 0, false), eval_seed(3, 1, false));
    }
}
