//! Bad input on the QUIC port: a frame that fails validation, an oversized
//! frame, a wrong protocol version, a wrong token, observations of the
//! wrong shape or with NaN. Each gets an `Error` back and a closed
//! connection, a counter in `/metrics`, and a run in progress carries on
//! unharmed with its real actor.

use crate::daemon_accounting::short_run;
use rlfleet_quic::{FramedStream, Liveness, Trust, client_endpoint};
use rlfleet_shared::wire::{self, ErrorCode, Hello, Message, Observations, flags};
use rlfleet_tests::daemon::{Daemon, finish_actor};
use std::time::Duration;

fn hello(protocol: u32, token: &str) -> Message {
    Message::Hello(Hello {
        protocol,
        software: "test".into(),
        actor_id: "intruder".into(),
        session_id: 1,
        token: token.into(),
        env_capacity: 1,
        run: String::new(),
        once: false,
    })
}

/// Opens a connection, sends `frames` (raw bytes) and returns the first
/// message the learner answers with.
async fn exchange(d: &Daemon, frames: Vec<Vec<u8>>) -> Message {
    let ep = client_endpoint(&Trust::Pin(d.fingerprint.clone()), Liveness::default()).unwrap();
    let conn = ep
        .connect(d.actors.parse().unwrap(), "localhost")
        .unwrap()
        .await
        .unwrap();
    let (send, recv) = conn.open_bi().await.unwrap();
    let mut fs = FramedStream::new(send, recv, 1 << 20);
    let mut last = None;
    for f in frames {
        fs.send_raw(&f).await.unwrap();
        // Every frame here gets an answer at once (a Welcome or an Error):
        // a silent learner fails the test instead of hanging it.
        let answer = tokio::time::timeout(Duration::from_secs(20), fs.recv()).await;
        if let Ok(Ok(Some(m))) = answer {
            last = Some(m);
            if matches!(last, Some(Message::Error(_))) {
                break;
            }
        }
    }
    let m = last.expect("an answer");
    // The learner closes the connection after an error.
    let closed = tokio::time::timeout(Duration::from_secs(5), conn.closed()).await;
    if matches!(m, Message::Error(_)) {
        assert!(closed.is_ok(), "connection left open after {m:?}");
    }
    m
}

fn expect_error(m: Message, code: ErrorCode, text: &str) {
    match m {
        Message::Error(e) => {
            assert_eq!(e.code, code, "{}", e.text);
            assert!(
                e.text.contains(text),
                "`{}` does not mention `{text}`",
                e.text
            );
        }
        other => panic!("expected error {code:?}, got {other:?}"),
    }
}

#[test]
fn malformed_input_is_refused_counted_and_harmless() {
    let _heavy = rlfleet_tests::heavy();
    let d = Daemon::start("token = \"actor-secret\"\nmax_frame_bytes = 65536", "");
    // More episodes than the test lets it play: the run must still be in
    // progress when the bad input arrives (a fast learner finishes 60
    // CartPole episodes in well under a second), so it is stopped by hand.
    let cfg = short_run("seed", 1_000_000, d.dir.path());
    let id = d.start_run(&cfg);
    let good = d.actor("good", 2, &["--once", "--token", "actor-secret"]);
    d.wait_until(&id, Duration::from_secs(30), |v| {
        v["env_steps"].as_u64().unwrap() > 50
    });

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let hello_ok = wire::encode(&hello(wire::PROTOCOL_VERSION, "actor-secret"));
    rt.block_on(async {
        // Garbage that passes the length check but not validation.
        let mut garbage = 64u32.to_le_bytes().to_vec();
        garbage.extend([0xAB; 64]);
        expect_error(
            exchange(&d, vec![garbage]).await,
            ErrorCode::BadFrame,
            "validation",
        );
        // A length prefix above the maximum.
        let huge = (10u32 << 20).to_le_bytes().to_vec();
        expect_error(
            exchange(&d, vec![huge]).await,
            ErrorCode::FrameTooLarge,
            "larger than the maximum",
        );
        // Another protocol version.
        let old = wire::encode(&hello(99, "actor-secret"));
        expect_error(
            exchange(&d, vec![old]).await,
            ErrorCode::ProtocolVersion,
            "protocol version 99",
        );
        // No token.
        let anon = wire::encode(&hello(wire::PROTOCOL_VERSION, ""));
        expect_error(
            exchange(&d, vec![anon]).await,
            ErrorCode::Unauthorized,
            "token",
        );
        // Welcome, then observations of the wrong shape (CartPole has 4).
        let obs = |values: Vec<f32>, flag: u8| {
            wire::encode(&Message::Observations(Observations {
                seq: 1,
                obs: values,
                obs_u8: vec![],
                rewards: vec![0.0],
                flags: vec![flag],
                faults: vec![],
            }))
        };
        let m = exchange(&d, vec![hello_ok.clone(), obs(vec![0.1; 3], flags::FRESH)]).await;
        expect_error(m, ErrorCode::BadShape, "`obs` has 3 values, expected 4");
        let m = exchange(
            &d,
            vec![
                hello_ok.clone(),
                obs(vec![0.1, f32::NAN, 0.0, 0.0], flags::FRESH),
            ],
        )
        .await;
        expect_error(m, ErrorCode::NonFinite, "NaN");
    });
    for code in [
        "bad_frame",
        "frame_too_large",
        "protocol_version",
        "unauthorized",
        "bad_shape",
        "non_finite",
    ] {
        assert_eq!(
            d.metric(&format!("rlfleet_protocol_errors_total{{code=\"{code}\"}}")),
            1.0,
            "{code}"
        );
    }
    // The run and its real actor carry on: 30 more episodes, then a stop
    // on request, with each finished episode in the books once.
    let now = d.json(&format!("/v1/runs/{id}"));
    assert_eq!(now["state"], "running", "{now}");
    let before = now["episodes_finished"].as_u64().unwrap();
    d.wait_until(&id, Duration::from_secs(60), |v| {
        v["episodes_finished"].as_u64().unwrap() >= before + 30
    });
    let (code, body) = d.post(&format!("/v1/runs/{id}/stop"), "");
    assert_eq!(code, 202, "{body}");
    let status = d.wait_finished(&id, Duration::from_secs(60));
    assert_eq!(status["state"], "finished", "{status}");
    assert_eq!(status["reason"], "stopped on request", "{status}");
    let episodes = status["episodes_finished"].as_u64().unwrap();
    assert!(episodes >= before + 30, "{status}");
    let (mut ids, lengths) = rlfleet_tests::episode_ids_and_steps(&cfg.output_dir);
    ids.dedup();
    assert_eq!(ids.len() as u64, episodes, "each episode once: {status}");
    // Steps of the episodes still in flight at the stop are not in the file.
    assert!(lengths <= status["env_steps"].as_u64().unwrap(), "{status}");
    let (ok, err) = finish_actor(good);
    assert!(ok, "{err}");
}

/// Opens a connection and its stream, and sends `bytes`; `None` when the
/// learner refused the connection.
async fn raw(
    d: &Daemon,
    ep: &quinn::Endpoint,
    bytes: &[u8],
) -> Option<(quinn::Connection, FramedStream)> {
    let conn = ep
        .connect(d.actors.parse().unwrap(), "localhost")
        .unwrap()
        .await
        .ok()?;
    let (send, recv) = conn.open_bi().await.ok()?;
    let mut fs = FramedStream::new(send, recv, 1 << 20);
    fs.send_raw(bytes).await.ok()?;
    Some((conn, fs))
}

/// Before its `Hello` is accepted a connection cannot make the learner hold
/// memory: a declared maximum-size frame is refused at once (64 KiB until
/// hello), a frame trickled in holds only what arrived, the hello deadline
/// ends it, and connections past the cap of unauthenticated ones are
/// refused before their handshake.
#[test]
fn unauthenticated_connections_cannot_pin_memory() {
    let _heavy = rlfleet_tests::heavy();
    let d = Daemon::start("max_unauthenticated = 60\nhello_timeout_ms = 4000", "");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let before = d.rss_bytes();
    rt.block_on(async {
        let ep = client_endpoint(&Trust::Pin(d.fingerprint.clone()), Liveness::default()).unwrap();
        // 50 connections each declare a 64 MiB frame (the configured
        // maximum once authenticated): refused as too large.
        for _ in 0..50 {
            let declared = (64u32 << 20).to_le_bytes();
            let (_conn, mut fs) = raw(&d, &ep, &declared).await.expect("accepted");
            match fs.recv().await {
                Ok(Some(m)) => expect_error(m, ErrorCode::FrameTooLarge, "65536"),
                other => panic!("expected an error frame, got {other:?}"),
            }
        }
        // (Their tasks end within the close's grace of 0.5 s.)
        tokio::time::sleep(Duration::from_secs(2)).await;
        // 50 more declare 60 KiB and send 10 bytes of it, then wait.
        let mut trickling = Vec::new();
        for _ in 0..50 {
            let mut bytes = (60u32 << 10).to_le_bytes().to_vec();
            bytes.extend_from_slice(&[0u8; 10]);
            trickling.push(raw(&d, &ep, &bytes).await.expect("accepted"));
        }
        // The cap is 60 not past hello: of 20 more, at most 10 get in.
        let mut extra = Vec::new();
        for _ in 0..20 {
            if let Some(c) = raw(&d, &ep, &[]).await {
                extra.push(c);
            }
        }
        assert!(extra.len() <= 10, "{} of 20 got past the cap", extra.len());
        let grown = d.rss_bytes().saturating_sub(before);
        eprintln!(
            "daemon RSS grew by {} KiB for 120 unauthenticated connections",
            grown >> 10
        );
        assert!(grown < 48 << 20, "the daemon grew by {grown} bytes");
        // The hello deadline ends the trickling ones.
        for (_conn, fs) in &mut trickling {
            let m = tokio::time::timeout(Duration::from_secs(10), fs.recv())
                .await
                .expect("answered before 10 s");
            match m {
                Ok(Some(m)) => expect_error(m, ErrorCode::Unexpected, "no hello within"),
                other => panic!("expected an error frame, got {other:?}"),
            }
        }
    });
    assert!(d.metric("rlfleet_connections_refused_total") >= 10.0);
    assert_eq!(
        d.metric("rlfleet_protocol_errors_total{code=\"frame_too_large\"}"),
        50.0
    );
    // Authenticated actors still get the full frame size.
    assert_eq!(d.get("/healthz").0, 200);
}
