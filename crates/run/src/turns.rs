//! The learner's device, shared by a daemon's runs: a run takes a turn on
//! it for its gradient steps, and runs that contend for it get turns by
//! their `[fleet] weight` — weighted fair queueing on the seconds each
//! turn held (the run that has held the least, per unit of weight, goes
//! next). [`Turns`] is the arithmetic, sans-IO; [`DeviceTurns`] blocks
//! and times; a run holds a [`Turn`].

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long the device stays reserved for a run that gave it back while
/// it would still go next.
pub const RESERVE: Duration = Duration::from_millis(20);

/// How runs share the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sharing {
    /// One run at a time, in turns by weight.
    Weighted,
    /// Every run at once, as the operating system schedules their threads
    /// (turns are timed, never waited for).
    Free,
}

/// Who may take the device next, by start-time fair queueing: a run that
/// starts to wait gets a start tag (the later of the device's virtual time
/// and its last turn's finish tag); the waiting run with the least start
/// goes next; a turn of `s` seconds finishes `s / weight` after its
/// start. A run that waits again at once keeps its place; one that idled
/// starts from the device's virtual time, so idling earns no credit to
/// spend later in one long monopoly.
///
/// A run that gives the device back while it would still go next keeps
/// it reserved for [`RESERVE`]: between two turns it ingests its next
/// batch, and without the reservation a run that waits meanwhile would
/// take every other turn whatever the weights.
#[derive(Debug, Default)]
pub struct Turns {
    holder: Option<u64>,
    /// The run the device is kept for, until when.
    reserved: Option<(u64, Instant)>,
    /// The start tag of the turn taken last.
    virtual_secs: f64,
    seats: BTreeMap<u64, Seat>,
    next: u64,
}

#[derive(Debug)]
struct Seat {
    weight: f64,
    start: f64,
    finish: f64,
    waiting: bool,
}

impl Turns {
    /// Seats a run of `weight` (> 0); returns its key.
    pub fn join(&mut self, weight: f64) -> u64 {
        let key = self.next;
        self.next += 1;
        let now = self.virtual_secs;
        self.seats.insert(
            key,
            Seat {
                weight: weight.max(f64::MIN_POSITIVE),
                start: now,
                finish: now,
                waiting: false,
            },
        );
        key
    }

    /// Unseats run `key` (its turn, if it held one, ends).
    pub fn leave(&mut self, key: u64) {
        self.seats.remove(&key);
        if self.holder == Some(key) {
            self.holder = None;
        }
        if self.reserved.is_some_and(|(k, _)| k == key) {
            self.reserved = None;
        }
    }

    /// Run `key` wants a turn.
    pub fn want(&mut self, key: u64) {
        let now = self.virtual_secs;
        if let Some(seat) = self.seats.get_mut(&key)
            && !seat.waiting
        {
            seat.waiting = true;
            seat.start = now.max(seat.finish);
        }
    }

    /// Run `key` may take the device at `now`: nobody holds it, it is not
    /// kept for another run, and no waiting run has an earlier start (ties
    /// go to the earlier seated).
    pub fn may_take(&self, key: u64, now: Instant) -> bool {
        let Some(me) = self.seats.get(&key) else {
            return true;
        };
        let kept = self
            .reserved
            .is_some_and(|(k, until)| k != key && now < until);
        self.holder.is_none()
            && !kept
            && self
                .seats
                .iter()
                .all(|(&k, s)| k == key || !s.waiting || (me.start, key) < (s.start, k))
    }

    /// Until when the device is kept for another run than `key`, if it is.
    pub fn kept_until(&self, key: u64) -> Option<Instant> {
        self.reserved.filter(|&(k, _)| k != key).map(|(_, t)| t)
    }

    pub fn take(&mut self, key: u64) {
        self.holder = Some(key);
        self.reserved = None;
        if let Some(seat) = self.seats.get_mut(&key) {
            seat.waiting = false;
            self.virtual_secs = self.virtual_secs.max(seat.start);
        }
    }

    /// Run `key`'s turn ended at `now` after `secs` on the device. While
    /// its next turn would start before every waiting run's, the device
    /// is kept for it until [`RESERVE`] from `now`.
    pub fn give_back(&mut self, key: u64, secs: f64, now: Instant) {
        if self.holder == Some(key) {
            self.holder = None;
        }
        let Some(seat) = self.seats.get_mut(&key) else {
            return;
        };
        seat.finish = seat.start + secs / seat.weight;
        let next = (self.virtual_secs.max(seat.finish), key);
        // The waiting run that would go next otherwise.
        let rival = self
            .seats
            .iter()
            .filter(|&(&k, s)| k != key && s.waiting)
            .map(|(&k, s)| (s.start, k))
            .min_by(|a, b| a.partial_cmp(b).expect("finite tags"));
        self.reserved = rival
            .is_some_and(|r| next < r)
            .then_some((key, now + RESERVE));
    }
}

/// The daemon's device turns: one per daemon, shared by its runs.
#[derive(Debug)]
pub struct DeviceTurns {
    sharing: Sharing,
    turns: Mutex<Turns>,
    freed: Condvar,
}

impl DeviceTurns {
    pub fn new(sharing: Sharing) -> Arc<DeviceTurns> {
        Arc::new(DeviceTurns {
            sharing,
            turns: Mutex::default(),
            freed: Condvar::new(),
        })
    }

    pub fn sharing(&self) -> Sharing {
        self.sharing
    }

    /// Seats a run of `weight`; it leaves when the last clone of the
    /// returned [`Turn`] is dropped.
    pub fn seat(self: &Arc<Self>, weight: f64) -> Turn {
        let key = self.turns.lock().expect("turns lock").join(weight);
        Turn {
            seat: Arc::new(SeatHandle {
                turns: self.clone(),
                key,
            }),
        }
    }
}

#[derive(Debug)]
struct SeatHandle {
    turns: Arc<DeviceTurns>,
    key: u64,
}

impl Drop for SeatHandle {
    fn drop(&mut self) {
        self.turns.turns.lock().expect("turns lock").leave(self.key);
        self.turns.freed.notify_all();
    }
}

/// A run's seat at the device.
#[derive(Debug, Clone)]
pub struct Turn {
    seat: Arc<SeatHandle>,
}

impl Turn {
    /// Waits for the run's turn (at once under [`Sharing::Free`]) and
    /// holds it until the returned [`Held`] is released or dropped.
    pub fn hold(&self) -> Held<'_> {
        let asked = Instant::now();
        let d = &self.seat.turns;
        if d.sharing == Sharing::Weighted {
            let key = self.seat.key;
            let mut turns = d.turns.lock().expect("turns lock");
            turns.want(key);
            loop {
                let now = Instant::now();
                if turns.may_take(key, now) {
                    break;
                }
                turns = match turns.kept_until(key) {
                    Some(until) if until > now => {
                        d.freed
                            .wait_timeout(turns, until - now)
                            .expect("turns lock")
                            .0
                    }
                    _ => d.freed.wait(turns).expect("turns lock"),
                };
            }
            turns.take(key);
        }
        let since = Instant::now();
        Held {
            turn: self,
            waited: since - asked,
            since,
            open: true,
        }
    }
}

/// A turn on the device, held.
#[derive(Debug)]
pub struct Held<'a> {
    turn: &'a Turn,
    waited: Duration,
    since: Instant,
    open: bool,
}

impl Held<'_> {
    /// Ends the turn; returns the seconds it held the device and the
    /// seconds it waited for it.
    pub fn release(mut self) -> (Duration, Duration) {
        (self.end(), self.waited)
    }

    fn end(&mut self) -> Duration {
        let held = self.since.elapsed();
        if std::mem::take(&mut self.open) {
            let d = &self.turn.seat.turns;
            if d.sharing == Sharing::Weighted {
                d.turns.lock().expect("turns lock").give_back(
                    self.turn.seat.key,
                    held.as_secs_f64(),
                    Instant::now(),
                );
                d.freed.notify_all();
            }
        }
        held
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs that always want the device, each turn `secs[key]` long:
    /// how many turns each takes out of `n`.
    fn share(weights: &[f64], secs: &[f64], n: usize) -> Vec<usize> {
        let now = Instant::now();
        let mut t = Turns::default();
        let keys: Vec<u64> = weights.iter().map(|&w| t.join(w)).collect();
        let mut taken = vec![0; keys.len()];
        for _ in 0..n {
            for &k in &keys {
                t.want(k);
            }
            let i = keys
                .iter()
                .position(|&k| t.may_take(k, now))
                .expect("someone may take a free device");
            assert_eq!(
                keys.iter().filter(|&&k| t.may_take(k, now)).count(),
                1,
                "exactly one run may take it"
            );
            t.take(keys[i]);
            assert!(
                keys.iter().all(|&k| !t.may_take(k, now)),
                "held: nobody else"
            );
            t.give_back(keys[i], secs[i], now);
            taken[i] += 1;
        }
        taken
    }

    /// `got` within one turn of `want`, each.
    fn close(got: Vec<usize>, want: &[usize]) {
        let near = got.iter().zip(want).all(|(&g, &w)| g.abs_diff(w) <= 1);
        assert!(near, "turns {got:?}, expected {want:?}");
    }

    #[test]
    fn contending_runs_get_turns_by_weight() {
        close(share(&[1.0, 3.0], &[0.01, 0.01], 400), &[100, 300]);
        close(share(&[1.0, 1.0, 2.0], &[0.01; 3], 400), &[100, 100, 200]);
        // Shares are of seconds, not of turns: a run whose turns are
        // twice as long takes half as many at equal weight.
        close(share(&[1.0, 1.0], &[0.02, 0.01], 300), &[100, 200]);
    }

    #[test]
    fn an_idle_run_earns_no_credit_and_a_leaver_frees_the_device() {
        let now = Instant::now();
        let mut t = Turns::default();
        let (a, b) = (t.join(1.0), t.join(1.0));
        // `a` alone for 100 turns while `b` idles.
        for _ in 0..100 {
            t.want(a);
            assert!(t.may_take(a, now));
            t.take(a);
            t.give_back(a, 0.01, now);
        }
        // `b` comes back: it does not get 100 turns in a row.
        let mut run = 0;
        for _ in 0..10 {
            t.want(a);
            t.want(b);
            let k = if t.may_take(b, now) { b } else { a };
            t.take(k);
            t.give_back(k, 0.01, now);
            run = if k == b { run + 1 } else { 0 };
            assert!(run <= 1, "b took {run} turns in a row after idling");
        }
        // A run that leaves while holding frees the device.
        t.want(a);
        t.take(a);
        assert!(!t.may_take(b, now));
        t.leave(a);
        t.want(b);
        assert!(t.may_take(b, now));
        // A latecomer starts level with those contending: it goes before
        // a run whose next turn starts later.
        let c = t.join(1.0);
        t.take(b);
        t.give_back(b, 0.05, now);
        t.want(b);
        t.want(c);
        assert!(
            t.may_take(c, now),
            "c, level with b's last start, goes before b"
        );
        assert!(!t.may_take(b, now));
    }

    /// Runs that are not waiting when they give the device back (each
    /// ingests its next batch between turns) while the other always is.
    #[test]
    fn a_run_between_turns_keeps_its_place_for_a_moment() {
        let now = Instant::now();
        let mut t = Turns::default();
        let (light, heavy) = (t.join(1.0), t.join(3.0));
        let mut taken = [0, 0];
        t.want(light);
        t.want(heavy);
        for _ in 0..400 {
            let k = if t.may_take(light, now) { light } else { heavy };
            assert!(t.may_take(k, now), "the device is free for someone");
            t.take(k);
            t.give_back(k, 0.01, now);
            taken[usize::from(k == heavy)] += 1;
            // The other waited meanwhile; the giver comes back in time.
            t.want(if k == light { heavy } else { light });
            t.want(k);
        }
        close(taken.to_vec(), &[100, 300]);
        // One that does not come back in time loses its place.
        let mut u = Turns::default();
        let (a, b) = (u.join(1.0), u.join(1.0));
        u.want(a);
        u.want(b);
        u.take(a);
        u.give_back(a, 0.0, now);
        assert_eq!(u.kept_until(b), Some(now + RESERVE));
        assert!(!u.may_take(b, now), "kept for a");
        assert!(u.may_take(b, now + RESERVE), "a did not come back");
    }

    #[test]
    fn weighted_turns_exclude_each_other_across_threads() {
        let d = DeviceTurns::new(Sharing::Weighted);
        let inside = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let threads: Vec<_> = [1.0, 3.0]
            .into_iter()
            .map(|w| {
                let (turn, inside) = (d.seat(w), inside.clone());
                std::thread::spawn(move || {
                    let mut held = Duration::ZERO;
                    for _ in 0..50 {
                        let h = turn.hold();
                        let n = inside.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        assert_eq!(n, 0, "two runs on the device at once");
                        std::thread::sleep(Duration::from_millis(1));
                        inside.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                        held += h.release().0;
                    }
                    held
                })
            })
            .collect();
        for t in threads {
            assert!(t.join().expect("thread") >= Duration::from_millis(50));
        }
        // Free sharing never waits.
        let free = DeviceTurns::new(Sharing::Free);
        let (a, b) = (free.seat(1.0), free.seat(1.0));
        let ha = a.hold();
        let (_, waited) = b.hold().release();
        assert!(waited < Duration::from_millis(50));
        drop(ha);
    }
}
