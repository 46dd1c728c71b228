//! The environments' random generator: PCG64 with NumPy's `uniform` formula.

use rand::{RngCore, SeedableRng};
use rand_pcg::Pcg64;

/// Per-environment generator. Seeded resets are reproducible; an unseeded
/// environment draws its first seed from the clock.
#[derive(Debug, Clone)]
pub struct EnvRng(Pcg64);

impl EnvRng {
    pub fn from_seed(seed: u64) -> Self {
        EnvRng(Pcg64::seed_from_u64(seed))
    }

    pub fn from_clock() -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        Self::from_seed(nanos ^ u64::from(std::process::id()).rotate_left(32))
    }

    /// A double in `[0, 1)` with 53 random bits, as NumPy's `random()`.
    pub fn next_f64(&mut self) -> f64 {
        (self.0.next_u64() >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0)
    }

    /// `low + (high - low) * u`, NumPy's `uniform(low, high)`.
    pub fn uniform(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.next_f64()
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }
}
