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

/// `async` through the relay: the clean link plays, the mild and the
/// lossy ones lose datagrams both ways and still finish episodes, each
/// figure is its rate against the clean one, and every run's books close.
/// On the lossy link the actors see their datagrams lost and send fewer,
/// larger batches.
#[test]
fn the_lossy_link_benchmark_measures_every_link_with_exact_books() {
    let (text, v) = bench(&[
        "lossy",
        "--secs",
        "4",
        "--loss",
        "0.2",
        "--delay-ms",
        "10",
        "--blackout-secs",
        "0.5",
        "--mild-loss",
        "0.05",
        "--mild-delay-ms",
        "5",
    ]);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{v}");
    let (clean, mild, lossy) = (&rows[0], &rows[1], &rows[2]);
    assert_eq!(
        (
            clean["link"].as_str(),
            mild["link"].as_str(),
            lossy["link"].as_str()
        ),
        (Some("clean"), Some("mild"), Some("lossy"))
    );
    assert_eq!(clean["datagrams_dropped"].as_u64(), Some(0), "{v}");
    for (row, least) in [(mild, 0.02), (lossy, 0.1)] {
        let (lost, passed) = (
            row["datagrams_dropped"].as_u64().unwrap() as f64,
            row["datagrams_passed"].as_u64().unwrap() as f64,
        );
        assert!(lost / (lost + passed) > least, "{v}");
        let ratio =
            row["episodes_per_sec"].as_f64().unwrap() / clean["episodes_per_sec"].as_f64().unwrap();
        assert!(
            (row["ratio_vs_clean"].as_f64().unwrap() - ratio).abs() < 1e-9,
            "{v}"
        );
    }
    for row in rows {
        assert!(row["episodes"].as_u64().unwrap() > 0, "{v}");
        let b = &row["books"];
        let n = |k: &str| b[k].as_u64().unwrap();
        assert_eq!(
            n("episode_lengths") + n("env_steps_abandoned") + n("env_steps_cut_off"),
            n("env_steps"),
            "{v}"
        );
        assert_eq!(
            n("batches_trained") + n("batches_dropped"),
            n("batches_received"),
            "{v}"
        );
        assert_eq!(b["exact"], true, "{v}");
    }
    let per_batch = |r: &serde_json::Value| r["episodes_per_batch"].as_f64().unwrap();
    assert!(
        per_batch(lossy) > 1.3 * per_batch(clean),
        "episodes a batch: {} on the lossy link, {} on the clean one",
        per_batch(lossy),
        per_batch(clean)
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
