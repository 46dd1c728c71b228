//! systemd's notify protocol (`Type=notify`, `WatchdogSec=`), through the
//! `sd-notify` crate: `READY=1` once the daemon listens, `STATUS=` with a
//! run's progress, `STOPPING=1` when it drains, and `WATCHDOG=1` from the
//! loops of the threads that train — sent only while every run holding
//! the watchdog has beaten within the watchdog's time, so one run thread
//! that is stuck stops the pings (whatever the others do) and systemd
//! restarts the daemon. While no distributed run holds the watchdog (an
//! idle daemon), a timer pings instead. Without `NOTIFY_SOCKET` every call
//! does nothing.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
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
    /// The run threads holding the watchdog, each with its last beat (the
    /// idle timer pings only while there is none).
    holders: Mutex<BTreeMap<u64, Instant>>,
    next_holder: AtomicU64,
    last: Mutex<Option<Instant>>,
}

/// A run thread's hold on the watchdog: its beats keep the daemon alive,
/// and its silence stops the pings. Released when dropped (a run that
/// ends, however it ends).
#[derive(Debug)]
pub struct WatchdogHold {
    dog: Arc<Watchdog>,
    id: u64,
}

impl WatchdogHold {
    /// The run's loop is alive: its beat, with its progress as `STATUS=`.
    pub fn ping(&self, status: Option<&str>) {
        self.dog.beat(self.id, status);
    }
}

impl Drop for WatchdogHold {
    fn drop(&mut self) {
        self.dog
            .holders
            .lock()
            .expect("watchdog lock")
            .remove(&self.id);
    }
}

impl Watchdog {
    /// From the environment systemd sets (`WATCHDOG_USEC`, `WATCHDOG_PID`).
    pub fn from_env() -> Watchdog {
        Watchdog {
            every: sd_notify::watchdog_enabled().map(|d| d / 2),
            holders: Mutex::default(),
            next_holder: AtomicU64::new(1),
            last: Mutex::new(None),
        }
    }

    /// How often the idle timer wakes (when there is a watchdog).
    pub fn period(&self) -> Option<Duration> {
        self.every
    }

    /// A run thread takes part in the pings until the hold is dropped.
    pub fn hold(self: &Arc<Self>) -> WatchdogHold {
        let id = self.next_holder.fetch_add(1, Ordering::Relaxed);
        self.holders
            .lock()
            .expect("watchdog lock")
            .insert(id, Instant::now());
        WatchdogHold {
            dog: self.clone(),
            id,
        }
    }

    /// The idle timer's ping: only while no run thread holds the watchdog.
    pub fn idle_ping(&self) {
        if self.holders.lock().expect("watchdog lock").is_empty() {
            self.ping(None);
        }
    }

    /// Holder `id` beat: a ping, unless another holder has been silent for
    /// the watchdog's whole time (it is stuck: systemd should see silence).
    fn beat(&self, id: u64, status: Option<&str>) {
        let Some(every) = self.every else {
            return;
        };
        let all_alive = {
            let mut holders = self.holders.lock().expect("watchdog lock");
            holders.insert(id, Instant::now());
            holders.values().all(|t| t.elapsed() < 2 * every)
        };
        if all_alive {
            self.ping(status);
        }
    }

    /// A ping, with a run's progress as `STATUS=`; sent at most once per
    /// period.
    fn ping(&self, status: Option<&str>) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn dog(every: Duration) -> Arc<Watchdog> {
        Arc::new(Watchdog {
            every: Some(every),
            holders: Mutex::default(),
            next_holder: AtomicU64::new(1),
            last: Mutex::new(None),
        })
    }

    fn pinged(d: &Watchdog) -> bool {
        d.last.lock().unwrap().take().is_some()
    }

    /// One stuck run stops the pings whatever the others do; a run that
    /// ends (its hold dropped, however it ended) no longer counts, and with
    /// none holding the idle timer pings again.
    #[test]
    fn a_silent_holder_stops_the_pings_and_a_dropped_one_no_longer_counts() {
        let d = dog(Duration::from_millis(20));
        let (a, b) = (d.hold(), d.hold());
        d.idle_ping();
        assert!(!pinged(&d), "the idle timer pings while runs hold");
        a.ping(None);
        assert!(pinged(&d));
        std::thread::sleep(Duration::from_millis(50));
        a.ping(None);
        assert!(!pinged(&d), "b has been silent past the watchdog's time");
        drop(b);
        a.ping(None);
        assert!(pinged(&d));
        drop(a);
        d.idle_ping();
        assert!(pinged(&d));
    }
}
