//! What every benchmark shares: a rate measured over a fixed time, the
//! JSON results file, and the runtime the QUIC benchmarks run on.

use serde::Serialize;
use std::time::Instant;

/// Runs `f` repeatedly for about `secs` seconds (after a warm-up); returns
/// calls per second.
pub fn rate(secs: f64, mut f: impl FnMut()) -> f64 {
    let warm = Instant::now();
    while warm.elapsed().as_secs_f64() < secs * 0.1 {
        f();
    }
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed().as_secs_f64() < secs {
        for _ in 0..16 {
            f();
        }
        n += 16;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// Writes `value` as `OUT/NAME.json`.
pub fn write_json<T: Serialize>(
    out: &std::path::Path,
    name: &str,
    value: &T,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(out)?;
    let path = out.join(format!("{name}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(value)?)?;
    println!("wrote {}", path.display());
    Ok(())
}

/// The runtime the QUIC benchmarks run on (2 workers: this machine's cores).
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}
