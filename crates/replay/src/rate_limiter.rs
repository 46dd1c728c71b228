//! [`RateLimiter`]: Reverb's SampleToInsertRatio in the learner's loop. It
//! keeps `samples_per_insert * inserts - samples` inside a window around
//! `samples_per_insert * min_size_to_sample` of half-width `error_buffer`:
//! inserts wait while the learner is behind (the window's top), samples
//! wait while it is ahead (the bottom) and until `min_size_to_sample`
//! items were inserted. Samples are counted in items (a gradient step on a
//! batch of 64 samples 64). Sans-IO: the workflow asks and reports.

#[derive(Debug, Clone, PartialEq)]
pub struct RateLimiter {
    samples_per_insert: f64,
    min_size: u64,
    min_diff: f64,
    max_diff: f64,
    inserts: u64,
    samples: f64,
}

impl RateLimiter {
    pub fn new(samples_per_insert: f64, min_size_to_sample: u64, error_buffer: f64) -> Self {
        let centre = samples_per_insert * min_size_to_sample as f64;
        RateLimiter {
            samples_per_insert,
            min_size: min_size_to_sample,
            min_diff: centre - error_buffer,
            max_diff: centre + error_buffer,
            inserts: 0,
            samples: 0.0,
        }
    }

    fn diff(&self) -> f64 {
        self.samples_per_insert * self.inserts as f64 - self.samples
    }

    /// An insert may start (it may then overshoot the window's top; the
    /// next waits until samples catch up).
    pub fn can_insert(&self) -> bool {
        self.diff() <= self.max_diff
    }

    pub fn inserted(&mut self, n: u64) {
        self.inserts += n;
    }

    /// A sample of `items` may proceed.
    pub fn can_sample(&self, items: f64) -> bool {
        self.inserts >= self.min_size && self.diff() - items >= self.min_diff
    }

    pub fn sampled(&mut self, items: f64) {
        self.samples += items;
    }

    pub fn inserts(&self) -> u64 {
        self.inserts
    }

    pub fn samples(&self) -> f64 {
        self.samples
    }

    /// A resumed run's limiter carries on from its checkpoint's counts.
    pub fn restore(&mut self, inserts: u64, samples: f64) {
        self.inserts = inserts;
        self.samples = samples;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ratio holds within the buffer, both sides block outside it, and
    /// a window one sample wide (2 * error_buffer >= items per sample, the
    /// rule config validation enforces) never stalls.
    #[test]
    fn keeps_the_ratio_and_blocks_both_sides() {
        let mut r = RateLimiter::new(4.0, 10, 8.0);
        assert!(!r.can_sample(8.0), "below min size");
        r.inserted(10);
        // diff = 40 = centre: a sample of 8 would go below 32.
        assert!(r.can_sample(8.0));
        r.sampled(8.0);
        assert!(!r.can_sample(8.0), "ahead of inserts");
        assert!(r.can_insert());
        r.inserted(4);
        // diff = 48 = top: one more insert may start, then none.
        assert!(r.can_insert());
        r.inserted(1);
        assert!(!r.can_insert(), "behind on samples");
        assert!(r.can_sample(8.0));

        // Random demand on both sides: never stuck, ratio within bounds.
        let mut r = RateLimiter::new(16.0, 64, 4.0);
        let mut x: u64 = 12345;
        for _ in 0..100_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let want_insert = x >> 63 == 1;
            let (ins, smp) = (r.can_insert(), r.can_sample(8.0));
            assert!(ins || smp, "stalled at {r:?}");
            if (want_insert && ins) || !smp {
                r.inserted(1 + (x >> 60 & 3));
            } else {
                r.sampled(8.0);
            }
            let d = 16.0 * r.inserts() as f64 - r.samples();
            assert!(d <= 16.0 * 64.0 + 4.0 + 64.0, "{d}");
            if r.inserts() >= 64 {
                assert!(d >= 16.0 * 64.0 - 4.0, "{d}");
            }
        }
    }
}
