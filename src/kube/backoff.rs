//! Reconnect and retry back-off: doubling from `initial` to `max`, each delay jittered
//! down to 3/4 of its value so a fleet of nodes that lost the apiserver together does not
//! come back in lock step. The jitter is deterministic (a hash of a seed — the node name —
//! and the attempt number): no random number generator, tests reproduce it.

use std::time::Duration;

#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    initial: Duration,
    max: Duration,
    current: Option<Duration>,
    seed: u64,
    attempt: u64,
}

impl Backoff {
    pub(crate) fn new(initial: Duration, max: Duration, seed: &str) -> Self {
        Backoff {
            initial,
            max: max.max(initial),
            current: None,
            seed: fnv1a64(seed.as_bytes()),
            attempt: 0,
        }
    }

    /// The delay before the next attempt; grows with every call until [`Backoff::reset`].
    pub(crate) fn next_delay(&mut self) -> Duration {
        let base = match self.current {
            None => self.initial,
            Some(d) => (d * 2).min(self.max),
        };
        self.current = Some(base);
        self.attempt = self.attempt.wrapping_add(1);
        // A fraction in [0, 1) from the hash; the delay is in [3/4 base, base].
        let u = (splitmix64(self.seed ^ self.attempt) >> 11) as f64 / (1u64 << 53) as f64;
        base.mul_f64(1.0 - 0.25 * u)
    }

    /// After a success: the next failure starts again from `initial`.
    pub(crate) fn reset(&mut self) {
        self.current = None;
    }
}

fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_to_max_with_bounded_jitter_and_resets() {
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(30), "pi-1");
        let bases = [1, 2, 4, 8, 16, 30, 30, 30];
        let mut delays = Vec::new();
        for base in bases {
            let d = b.next_delay();
            let base = Duration::from_secs(base);
            assert!(d <= base && d >= base.mul_f64(0.75), "{d:?} vs {base:?}");
            delays.push(d);
        }
        // Jitter differs between attempts and between nodes, and is reproducible.
        assert_ne!(delays[5], delays[6]);
        let mut other = Backoff::new(Duration::from_secs(1), Duration::from_secs(30), "pi-2");
        let other_delays: Vec<Duration> = bases.iter().map(|_| other.next_delay()).collect();
        assert_ne!(delays, other_delays);
        let mut again = Backoff::new(Duration::from_secs(1), Duration::from_secs(30), "pi-1");
        let again: Vec<Duration> = bases.iter().map(|_| again.next_delay()).collect();
        assert_eq!(delays, again);

        b.reset();
        assert!(b.next_delay() <= Duration::from_secs(1));
    }
}
