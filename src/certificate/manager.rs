//! When a certificate must be renewed (client-go util/certificate/certificate_manager.go),
//! as pure functions of the certificate's validity, the time and a random draw.
//!
//! ```text
//!   None ──────────────────────────────▶ Missing   (bootstrap / request one)
//!   now < deadline ────────────────────▶ Valid { deadline }
//!   deadline ≤ now < NotAfter ─────────▶ RenewDue
//!   NotAfter ≤ now ────────────────────▶ Expired   (a client cert: bootstrap again)
//! ```
//! deadline = NotBefore + (70 % + 20 % × jitter) of the lifetime (kubelet: `nextRotationDeadline`,
//! `wait.Jitter(0.7 × total, 0.2)`).

use std::time::Duration;

/// What a certificate's validity says at `now` (Unix seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Missing,
    Valid { deadline: i64 },
    RenewDue,
    Expired,
}

/// The rotation deadline of a certificate valid from `not_before` to `not_after`; `jitter`
/// in [0, 1] (clamped).
pub(crate) fn deadline(not_before: i64, not_after: i64, jitter: f64) -> i64 {
    let total = (not_after - not_before).max(0) as f64;
    let j = jitter.clamp(0.0, 1.0);
    not_before + (total * (0.7 + 0.2 * j)).round() as i64
}

/// The phase of an optional certificate (`(not_before, not_after)`) at `now`.
pub(crate) fn assess(validity: Option<(i64, i64)>, now: i64, jitter: f64) -> Phase {
    match validity {
        None => Phase::Missing,
        Some((_, not_after)) if now >= not_after => Phase::Expired,
        Some((nb, na)) => {
            let d = deadline(nb, na, jitter);
            if now >= d {
                Phase::RenewDue
            } else {
                Phase::Valid { deadline: d }
            }
        }
    }
}

/// kubelet: after a failed rotation, back off 2 s doubling for 5 steps, then every 32 s
/// (`wait.Backoff{Duration: 2s, Factor: 2, Steps: 5, Cap: ...}` and the 32 s retry).
pub(crate) fn retry_delay(failures: u32) -> Duration {
    Duration::from_secs(2u64 << failures.min(4))
}

/// A uniform draw in [0, 1) from the system's random source (0.5 if it fails).
pub(crate) fn jitter() -> f64 {
    use ring::rand::SecureRandom;
    let mut b = [0u8; 4];
    match ring::rand::SystemRandom::new().fill(&mut b) {
        Ok(()) => u32::from_be_bytes(b) as f64 / (u32::MAX as f64 + 1.0),
        Err(_) => 0.5,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deadline_is_between_70_and_90_percent() {
        // (not_before, not_after, jitter, deadline)
        for (nb, na, j, want) in [
            (0, 1000, 0.0, 700),
            (0, 1000, 1.0, 900),
            (0, 1000, 0.5, 800),
            (0, 1000, 7.0, 900),
            (0, 1000, -1.0, 700),
            (100, 1100, 0.25, 850),
            (500, 400, 0.5, 500),
        ] {
            assert_eq!(deadline(nb, na, j), want, "{nb} {na} {j}");
        }
    }

    #[test]
    fn phases() {
        let cert = Some((1000, 2000));
        // (validity, now, jitter, phase)
        for (v, now, j, want) in [
            (None, 0, 0.5, Phase::Missing),
            (cert, 1000, 0.0, Phase::Valid { deadline: 1700 }),
            (cert, 1699, 0.0, Phase::Valid { deadline: 1700 }),
            (cert, 1700, 0.0, Phase::RenewDue),
            (cert, 1850, 1.0, Phase::Valid { deadline: 1900 }),
            (cert, 1999, 1.0, Phase::RenewDue),
            (cert, 2000, 0.0, Phase::Expired),
            (cert, 9000, 0.0, Phase::Expired),
            // Not yet valid (a clock behind): still valid for the rotation's purposes.
            (cert, 500, 0.0, Phase::Valid { deadline: 1700 }),
        ] {
            assert_eq!(assess(v, now, j), want, "{v:?} at {now}");
        }
    }

    #[test]
    fn retries_back_off_to_32_seconds() {
        let got: Vec<u64> = (0..8).map(|n| retry_delay(n).as_secs()).collect();
        assert_eq!(got, vec![2, 4, 8, 16, 32, 32, 32, 32]);
    }

    #[test]
    fn jitter_is_a_fraction() {
        for _ in 0..100 {
            let j = jitter();
            assert!((0.0..1.0).contains(&j));
        }
    }
}
