//! systemd's notify protocol, read from a real datagram socket that the
//! daemon is pointed at with `NOTIFY_SOCKET` (and `WATCHDOG_USEC`, as
//! systemd sets them for `Type=notify` and `WatchdogSec=`): `READY=1` once
//! it listens, `WATCHDOG=1` while idle and from the run's loop while a run
//! trains (with `STATUS=`), none while the run thread is stuck in a slow
//! train step, and `STOPPING=1` on SIGTERM.

use rlfleet_shared::config::TransportKind;
use rlfleet_tests::daemon::Daemon;
use std::os::unix::net::UnixDatagram;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Every datagram received, with when.
type Heard = Arc<Mutex<Vec<(Instant, String)>>>;

fn listen(socket: UnixDatagram) -> Heard {
    let heard: Heard = Arc::default();
    let h = heard.clone();
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        // Ends when the test drops `heard` and stops looking.
        while Arc::strong_count(&h) > 1 {
            if let Ok(n) = socket.recv(&mut buf) {
                let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                h.lock().unwrap().push((Instant::now(), text));
            }
        }
    });
    heard
}

/// Waits until a datagram after `since` satisfies `want`.
fn wait_for(
    heard: &Heard,
    since: Instant,
    limit: Duration,
    want: impl Fn(&str) -> bool,
) -> Instant {
    let t0 = Instant::now();
    loop {
        if let Some((at, _)) = heard
            .lock()
            .unwrap()
            .iter()
            .find(|(at, m)| *at >= since && want(m))
        {
            return *at;
        }
        assert!(
            t0.elapsed() < limit,
            "not heard in {limit:?}: {:?}",
            heard.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_daemon_notifies_systemd_and_its_watchdog_follows_the_run_thread() {
    let _heavy = rlfleet_tests::heavy();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify.sock");
    let heard = listen(UnixDatagram::bind(&path).unwrap());
    let socket = path.display().to_string();
    // A 0.6 s watchdog: pings every 0.3 s.
    let d = Daemon::start_with_env(
        "",
        "",
        &[("NOTIFY_SOCKET", &socket), ("WATCHDOG_USEC", "600000")],
    );
    let t0 = Instant::now() - Duration::from_secs(60);
    let ready = wait_for(&heard, t0, Duration::from_secs(5), |m| {
        m.contains("READY=1")
    });
    // Idle: the timer pings.
    wait_for(&heard, ready, Duration::from_secs(3), |m| {
        m.contains("WATCHDOG=1")
    });

    // A run whose every train step takes 2.5 s (the probe sleeps): the
    // run's loop pings with its status until the first step, then nothing
    // for as long as the run thread is stuck.
    let mut cfg = rlfleet_tests::counting_probe(
        "stuck",
        "async",
        TransportKind::Quic,
        3,
        400,
        &d.dir.path().join("stuck"),
    );
    cfg.probe.train_every = 40;
    cfg.probe.train_sleep_ms = 2500;
    let id = d.start_run(&cfg);
    let actor = d.actor("a", 1, &["--once"]);
    let running = wait_for(&heard, ready, Duration::from_secs(10), |m| {
        m.contains("WATCHDOG=1") && m.contains("STATUS=run stuck")
    });
    // The longest silence after the run's first ping covers a train step.
    std::thread::sleep(Duration::from_secs(6));
    let pings: Vec<Instant> = heard
        .lock()
        .unwrap()
        .iter()
        .filter(|(at, m)| *at >= running && m.contains("WATCHDOG=1"))
        .map(|(at, _)| *at)
        .collect();
    let mut times = vec![running];
    times.extend(pings);
    times.push(Instant::now());
    let longest = times.windows(2).map(|w| w[1] - w[0]).max().unwrap();
    assert!(
        longest >= Duration::from_secs(2),
        "pings went on while the run thread was stuck (longest gap {longest:?})"
    );
    assert_eq!(d.post(&format!("/v1/runs/{id}/stop"), "").0, 202);
    d.wait_finished(&id, Duration::from_secs(30));
    drop(actor);
    // SIGTERM: STOPPING=1.
    let term = Instant::now();
    d.terminate();
    wait_for(&heard, term, Duration::from_secs(10), |m| {
        m.contains("STOPPING=1")
    });
}
