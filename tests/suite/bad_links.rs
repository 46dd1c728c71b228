//! The benchmarks that measure transports against a bad link or many
//! connections, run short so they cannot rot: `rlfleet-bench lossy` (real
//! actors through the user-space lossy relay) and `rlfleet-bench ingest`
//! (which fails itself when the learner's count of transitions differs
//! from what the clients had acknowledged).

use std::time::Duration;

fn bench(args: &[&str]) -> (String, serde_json::Value) {
    let out = tempfile::tempdir().unwrap();
    let child = std::process::Command::new(rlfleet_tests::binary("rlfleet-bench"))
        .arg("--out")
        .arg(out.path())
        .args(args)
        .env("RUST_LOG", "error")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let o = rlfleet_tests::wait_output(child, Duration::from_secs(180), "rlfleet-bench");
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let json = std::fs::read_to_string(out.path().join(format!("{}.json", args[0]))).unwrap();
    (text, serde_json::from_str(&json).unwrap())
}

/// `async` through the relay: the clean link plays, the lossy one loses
/// datagrams both ways and still finishes episodes, and the figure is
/// their ratio.
#[test]
fn the_lossy_link_benchmark_measures_both_links() {
    let (text, v) = bench(&[
        "lossy",
        "--secs",
        "3",
        "--loss",
        "0.2",
        "--delay-ms",
        "10",
        "--blackout-secs",
        "0.5",
    ]);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{v}");
    let (clean, lossy) = (&rows[0], &rows[1]);
    assert_eq!(
        (clean["link"].as_str(), lossy["link"].as_str()),
        (Some("clean"), Some("lossy"))
    );
    assert!(clean["episodes"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(clean["datagrams_dropped"].as_u64(), Some(0), "{v}");
    assert!(lossy["episodes"].as_u64().unwrap() > 0, "{v}");
    let (lost, passed) = (
        lossy["datagrams_dropped"].as_u64().unwrap() as f64,
        lossy["datagrams_passed"].as_u64().unwrap() as f64,
    );
    assert!(lost / (lost + passed) > 0.1, "{v}");
    let ratio =
        lossy["episodes_per_sec"].as_f64().unwrap() / clean["episodes_per_sec"].as_f64().unwrap();
    assert!(
        (lossy["ratio_vs_clean"].as_f64().unwrap() - ratio).abs() < 1e-9,
        "{v}"
    );
    assert!(text.contains("the clean link's"), "{text}");
}

/// The ingest benchmark's generator plays like an actor (each env its own
/// episode, each batch where the last left off), so every acknowledged
/// transition reaches replay.
#[test]
fn the_ingest_benchmark_counts_every_acknowledged_transition() {
    let (_, v) = bench(&["ingest", "--secs", "1"]);
    let rows = v.as_array().unwrap();
    assert_eq!(rows.len(), 2, "{v}");
    for r in rows {
        assert!(r["learner_counted"].as_u64().unwrap() > 10_000, "{v}");
    }
}
