//! schemathesis against a real daemon's `/openapi.json`, with a token and
//! without one: every check (no 5xx, documented status codes, content
//! types and bodies, schema-invalid input refused, schema-valid input
//! accepted) on every operation, for a bounded time per pass.
//!
//! A schema-valid `POST /v1/runs` would start a run that writes wherever
//! its generated `output_dir` says, so an idle run is kept active through
//! the passes that post runs (a valid body is answered 409), and the stop
//! operation, which could end it, is tried in a pass of its own, last.
//! Sweeps and populations the fuzzer submits queue their runs behind it
//! the same way, and are stopped before that last pass.

use rlfleet_tests::daemon::Daemon;
use rlfleet_tests::{wait_output, workspace_root};
use std::process::{Command, Stdio};
use std::time::Duration;

fn schemathesis() -> String {
    std::env::var("RLFLEET_SCHEMATHESIS").expect(
        "RLFLEET_SCHEMATHESIS is not set: run the tests through scripts/test.sh, which installs \
         schemathesis",
    )
}

/// One `st run` pass; panics with its report unless it found nothing. The
/// document is read with the token (it is not an open route) and given to
/// schemathesis as a file.
fn pass(d: &Daemon, token: Option<&str>, secs: u32, ops: &[&str]) {
    let (status, doc) = d.get("/openapi.json");
    assert_eq!(status, 200, "{doc}");
    let file = d.dir.path().join("openapi.json");
    std::fs::write(&file, doc).unwrap();
    let mut cmd = Command::new(schemathesis());
    cmd.arg("--config-file")
        .arg(workspace_root().join("tests/schemathesis/schemathesis.toml"))
        .arg("run")
        .arg(&file)
        .args(["--url", &d.api])
        .args(["--checks", "all", "--workers", "1", "--seed", "1"])
        .args(["--max-time", &secs.to_string()])
        .args(ops)
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(t) = token {
        cmd.args(["-H", &format!("Authorization: Bearer {t}")]);
    }
    let child = cmd.spawn().expect("schemathesis starts");
    let out = wait_output(
        child,
        Duration::from_secs(u64::from(secs) + 120),
        "schemathesis",
    );
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "schemathesis found problems (token: {}):\n{report}\n{}",
        token.is_some(),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(report.contains("generated"), "{report}");
}

fn conforms(api_extra: &str, token: Option<&str>) {
    let _heavy = rlfleet_tests::heavy();
    // One slot: a valid config the fuzzer posts is accepted and waits
    // queued behind the idle run, so no generated run ever plays.
    let d = Daemon::start("", &format!("{api_extra}\n[runs]\nmax_active = 1"));
    let mut cfg = crate::daemon_accounting::short_run("async", 1_000_000, d.dir.path());
    cfg.stop.max_wall_secs = Some(600.0);
    let id = d.start_run(&cfg);
    pass(&d, token, 20, &["--exclude-path", "/v1/runs/{id}/stop"]);
    if token.is_some() {
        // The same daemon, asked without the token.
        pass(&d, None, 5, &[]);
    }
    // Sweeps and populations the passes submitted are stopped first, so
    // that none submits another run.
    for kind in ["sweeps", "populations"] {
        for s in d.json(&format!("/v1/{kind}")).as_array().unwrap() {
            let stop = format!("/v1/{kind}/{}/stop", s["id"].as_str().unwrap());
            assert_eq!(d.post(&stop, "").0, 202);
        }
    }
    // Nothing the passes sent started a run or ended the idle one: what
    // they submitted is queued (or was stopped there); those are stopped
    // now, so that none starts when the stop pass ends the idle run.
    let runs = d.json("/v1/runs");
    let runs = runs.as_array().unwrap();
    assert_eq!(runs[0]["id"], id.as_str(), "{runs:?}");
    assert_eq!(runs[0]["state"], "running", "{runs:?}");
    for r in &runs[1..] {
        assert!(
            r["state"] == "queued" || r["reason"] == "stopped while queued",
            "a generated run played: {r}"
        );
        if r["state"] == "queued" {
            let stop = format!("/v1/runs/{}/stop", r["id"].as_str().unwrap());
            assert_eq!(d.post(&stop, "").0, 202);
        }
    }
    pass(&d, token, 5, &["--include-path", "/v1/runs/{id}/stop"]);
    assert_eq!(d.get("/healthz").0, 200);
}

#[test]
fn the_openapi_document_and_the_server_agree_with_a_token() {
    conforms("token = \"s3cret\"", Some("s3cret"));
}

#[test]
fn the_openapi_document_and_the_server_agree_without_a_token() {
    conforms("", None);
}
