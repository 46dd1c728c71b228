//! [`LossWatch`]: whether the link to the learner is losing datagrams, from
//! QUIC's own counts of the packets it sent and declared lost.

use std::time::{Duration, Instant};

/// The share lost over a window at which the link counts as losing...
const LOSING: f64 = 0.02;
/// ...and the share below which it no longer does.
const RECOVERED: f64 = 0.005;
/// A window is judged once it is this long and holds this many packets.
const WINDOW: Duration = Duration::from_secs(1);
const WINDOW_PACKETS: u64 = 20;

/// Judges the link window by window, with hysteresis: losing from a
/// window that lost at least 2 % of its packets until one that lost
/// under 0.5 %.
#[derive(Debug)]
pub struct LossWatch {
    /// The window's start: when, packets sent and lost by then.
    mark: Option<(Instant, u64, u64)>,
    losing: bool,
}

impl LossWatch {
    pub fn new() -> Self {
        LossWatch {
            mark: None,
            losing: false,
        }
    }

    /// The judgement of the last window.
    pub fn losing(&self) -> bool {
        self.losing
    }

    /// Takes the connection's totals at `now` (packets sent, packets
    /// declared lost) and says whether the link is losing.
    pub fn observe(&mut self, now: Instant, sent: u64, lost: u64) -> bool {
        let Some((t0, sent0, lost0)) = self.mark else {
            self.mark = Some((now, sent, lost));
            return self.losing;
        };
        let packets = sent.saturating_sub(sent0);
        if now.duration_since(t0) < WINDOW || packets < WINDOW_PACKETS {
            return self.losing;
        }
        let share = lost.saturating_sub(lost0) as f64 / packets as f64;
        let was = self.losing;
        self.losing = if was {
            share >= RECOVERED
        } else {
            share >= LOSING
        };
        if self.losing != was {
            tracing::info!(
                lost_percent = format!("{:.1}", share * 100.0),
                "the link to the learner is {}: batches {}",
                if self.losing {
                    "losing datagrams"
                } else {
                    "clean again"
                },
                if self.losing {
                    "now run to every env's episode end (up to batch_step_frequency steps)"
                } else {
                    "end at an episode end again"
                }
            );
        }
        self.mark = Some((now, sent, lost));
        self.losing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_that_loses_two_percent_turns_it_on_and_one_under_half_a_percent_off() {
        let t = Instant::now();
        let s = |secs: u64| t + Duration::from_secs(secs);
        let mut w = LossWatch::new();
        assert!(!w.observe(s(0), 0, 0));
        // Too short a window, however lossy, is not judged.
        assert!(!w.observe(t + Duration::from_millis(500), 100, 50));
        // 1 of 100 lost: clean.
        assert!(!w.observe(s(1), 100, 1));
        // 2 of 100: losing.
        assert!(w.observe(s(2), 200, 3));
        // Too few packets to judge: as it was.
        assert!(w.observe(s(3), 210, 3));
        // 1 of 200 (0.5 %): still losing.
        assert!(w.observe(s(4), 400, 4));
        // 0 of 200: clean again.
        assert!(!w.observe(s(5), 600, 4));
    }
}
