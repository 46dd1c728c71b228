//! The CPU-dispatch point: the features detected once per process, or
//! none at all when `RLFLEET_PORTABLE_KERNELS` forces the portable paths.

use std::sync::OnceLock;

/// The environment variable that forces every kernel onto its portable
/// path: any value but empty or `0`. Read once, here, at the first
/// dispatch.
pub const PORTABLE_VAR: &str = "RLFLEET_PORTABLE_KERNELS";

/// The instruction-set extensions the hand-written kernels use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Features {
    /// AVX-512 Foundation (the 16-lane kernels).
    pub avx512f: bool,
    /// Fused multiply-add (with AVX-512F: the convolution's fused pass).
    pub fma: bool,
    /// AVX2 (with FMA: the actors' plain-Rust dense layers).
    pub avx2: bool,
}

impl Features {
    /// No extension: every kernel takes its portable path.
    pub const PORTABLE: Features = Features {
        avx512f: false,
        fma: false,
        avx2: false,
    };

    /// What this CPU has, whatever the switch says.
    pub fn detected() -> Features {
        #[cfg(target_arch = "x86_64")]
        {
            Features {
                avx512f: std::arch::is_x86_feature_detected!("avx512f"),
                fma: std::arch::is_x86_feature_detected!("fma"),
                avx2: std::arch::is_x86_feature_detected!("avx2"),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        Features::PORTABLE
    }

    /// What the kernels may use: `detected`, unless `portable` forces none.
    pub fn decide(portable: bool, detected: Features) -> Features {
        if portable {
            Features::PORTABLE
        } else {
            detected
        }
    }
}

/// Whether a value of [`PORTABLE_VAR`] asks for the portable paths.
pub fn forces_portable(value: Option<&str>) -> bool {
    value.is_some_and(|v| !v.is_empty() && v != "0")
}

/// The features the kernels of this process dispatch on (decided at the
/// first call). Each is also detected on this CPU, so a `true` here is
/// what a `target_feature` function's safety requires.
pub fn features() -> Features {
    static DECIDED: OnceLock<Features> = OnceLock::new();
    *DECIDED.get_or_init(|| {
        let var = std::env::var(PORTABLE_VAR).ok();
        Features::decide(forces_portable(var.as_deref()), Features::detected())
    })
}

/// AVX-512F may be used.
#[inline]
pub fn avx512f() -> bool {
    features().avx512f
}

/// AVX-512F and FMA may be used.
#[inline]
pub fn avx512f_fma() -> bool {
    let f = features();
    f.avx512f && f.fma
}

/// AVX2 and FMA may be used.
#[inline]
pub fn avx2_fma() -> bool {
    let f = features();
    f.avx2 && f.fma
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_switch_reads_empty_and_zero_as_off() {
        assert!(!forces_portable(None));
        assert!(!forces_portable(Some("")));
        assert!(!forces_portable(Some("0")));
        assert!(forces_portable(Some("1")));
        assert!(forces_portable(Some("yes")));
    }

    #[test]
    fn forcing_the_portable_path_turns_every_feature_off() {
        let all = Features {
            avx512f: true,
            fma: true,
            avx2: true,
        };
        assert_eq!(Features::decide(true, all), Features::PORTABLE);
        assert_eq!(Features::decide(false, all), all);
    }

    /// In this process: what the switch says holds, and nothing is used
    /// that the CPU lacks.
    #[test]
    fn this_process_dispatches_as_its_environment_says() {
        let detected = Features::detected();
        let used = features();
        if forces_portable(std::env::var(PORTABLE_VAR).ok().as_deref()) {
            assert_eq!(used, Features::PORTABLE);
        } else {
            assert_eq!(used, detected);
        }
        assert!(!used.avx512f || detected.avx512f);
        assert!(!used.avx2 || detected.avx2);
        assert!(!used.fma || detected.fma);
    }
}
