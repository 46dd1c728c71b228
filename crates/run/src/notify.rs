//! systemd's notify protocol (`Type=notify`, `WatchdogSec=`), through the
//! `sd-notify` crate: `READY=1` once the daemon listens, `STATUS=` with the
//! active run's progress, `STOPPING=1` when it drains, and `WATCHDOG=1`
//! from the loop of the thread that trains — so a run thread that is stuck
//! stops the pings and systemd restarts the daemon. While no distributed
//! run holds the watchdog (an idle daemon), a timer pings instead. Without
//! `NOTIFY_SOCKET` every call does nothing.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sd_notify::NotifyState;

/// Tells systemd the daemon is ready.
pub fn ready() {
    send(&[NotifyState::Ready]);
}

/// Tells systemd the daemon is stopping.
pub fn stopping() {
    send(&[NotifyState::Stopping]);
}

fn send(states: &[NotifyState]) {
    if std::env::var_os("NOTIFY_SOCKET").is_none() {
        return;
    }
    if let Err(e) = sd_notify::notify(states) {
        tracing::warn!("systemd notify: {e}");
    }
}

/// The daemon's watchdog: who pings, and how often.
#[derive(Debug)]
pub struct Watchdog {
    /// Half of `WATCHDOG_USEC` (`None`: systemd asked for no watchdog).
    every: Option<Duration>,
    /// A run thread pings (the idle timer does not).
    held: AtomicBool,
    last: Mutex<Option<Instant>>,
}

impl Watchdog {
    /// From the environment systemd sets (`WATCHDOG_USEC`, `WATCHDOG_PID`).
    pub fn from_env() -> Watchdog {
        Watchdog {
            every: sd_notify::watchdog_enabled().map(|d| d / 2),
            held: AtomicBool::new(false),
            last: Mutex::new(None),
        }
    }

    /// How often the idle timer wakes (when there is a watchdog).
    pub fn period(&self) -> Option<Duration> {
        self.every
    }

    /// A run thread takes over the pings (`true`) or gives them back.
    pub fn hold(&self, held: bool) {
        self.held.store(held, Ordering::Release);
    }

    /// The idle timer's ping: only while no run thread holds the watchdog.
    pub fn idle_ping(&self) {
        if !self.held.load(Ordering::Acquire) {
            self.ping(None);
        }
    }

    /// A ping from the loop that trains, with the run's progress as
    /// `STATUS=`; sent at most once per period.
    pub fn ping(&self, status: Option<&str>) {
        let Some(every) = self.every else {
            return;
        };
        let mut last = self.last.lock().expect("watchdog lock");
        if last.is_some_and(|t| t.elapsed() < every) {
            return;
        }
        *last = Some(Instant::now());
        drop(last);
        match status {
            Some(s) => send(&[NotifyState::Watchdog, NotifyState::Status(s)]),
            None => send(&[NotifyState::Watchdog]),
        }
    }
}
