//! The event loop's stall guard: a stuck loop ends the process, so the service manager
//! restarts picolet (which adopts its running pods untouched).
//!
//! Under systemd, `WatchdogSec=` does this from outside (`node::Watchdog`). procd, OpenRC's
//! supervise-daemon and busybox init restart a service that exits, but have no watchdog: a
//! loop stuck in a deadlock or an endless pass would stay stuck for good. So the loop beats
//! on its housekeeping tick ([`beat`]) and a thread of its own ([`start_guard`]) checks the
//! beats; [`TIMEOUT`] without one and it logs and exits with status 70 (`EX_SOFTWARE`).
//! picolet's own (the kubelet relies on systemd or its healthz port being watched).
//!
//! A process that was frozen as a whole (SIGSTOP, a starved machine) must not be taken for a
//! stuck loop when it thaws: the guard freezes with it, and a check that comes much later
//! than it was due starts the count again ([`Guard::check`]).
//!
//! Must never: touch pods or the runtime.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long the loop may go without a beat (its housekeeping tick comes every 2 s).
pub(crate) const TIMEOUT: Duration = Duration::from_secs(120);

/// The guard checks this often.
const CHECK_EVERY: Duration = Duration::from_secs(10);

/// The exit status of a stalled loop (`EX_SOFTWARE`).
pub(crate) const EXIT_STATUS: i32 = 70;

fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

/// Milliseconds since [`origin`] of the last beat.
static LAST_BEAT: AtomicU64 = AtomicU64::new(0);

fn millis(at: Instant) -> u64 {
    u64::try_from(at.saturating_duration_since(origin()).as_millis()).unwrap_or(u64::MAX)
}

/// The loop is alive (called on its housekeeping tick).
pub(crate) fn beat() {
    LAST_BEAT.store(millis(Instant::now()), Ordering::Relaxed);
}

/// The guard's pure decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Guard {
    timeout: Duration,
    every: Duration,
    last_check: Option<Instant>,
    /// The last check that came late (the guard was frozen): silence counts from then.
    thawed_at: Option<Instant>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Alive,
    /// Silent for this long: exit.
    Stalled(Duration),
}

impl Guard {
    pub(crate) fn new(timeout: Duration, every: Duration) -> Self {
        Guard {
            timeout,
            every,
            last_check: None,
            thawed_at: None,
        }
    }

    /// A check at `now`, the last beat at `last_beat`.
    pub(crate) fn check(&mut self, now: Instant, last_beat: Instant) -> Verdict {
        let late = self
            .last_check
            .is_some_and(|c| now.saturating_duration_since(c) > self.every * 3);
        self.last_check = Some(now);
        if late {
            // The guard itself was frozen: the silence counts from now.
            self.thawed_at = Some(now);
            return Verdict::Alive;
        }
        let since = self.thawed_at.map_or(last_beat, |t| t.max(last_beat));
        let silent = now.saturating_duration_since(since);
        if silent > self.timeout {
            Verdict::Stalled(silent)
        } else {
            Verdict::Alive
        }
    }
}

/// Starts the guard's thread (once, in `picolet run`).
pub(crate) fn start_guard() {
    beat();
    let spawned = std::thread::Builder::new()
        .name("stall-guard".into())
        .spawn(|| {
            let mut guard = Guard::new(TIMEOUT, CHECK_EVERY);
            loop {
                std::thread::sleep(CHECK_EVERY);
                let last = origin() + Duration::from_millis(LAST_BEAT.load(Ordering::Relaxed));
                if let Verdict::Stalled(silent) = guard.check(Instant::now(), last) {
                    log::error!(
                        "the event loop has not ticked for {} s: exiting (status {EXIT_STATUS}) \
                         so that the service manager starts picolet again; the pods keep running",
                        silent.as_secs()
                    );
                    std::process::exit(EXIT_STATUS);
                }
            }
        });
    if let Err(e) = spawned {
        log::warn!("stall guard: cannot start its thread: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_silent_loop_is_stalled_after_the_timeout_and_a_frozen_process_is_not() {
        let s = Duration::from_secs;
        let t0 = Instant::now();
        let mut g = Guard::new(s(120), s(10));
        // Beating every 2 s: alive.
        for i in 1..20 {
            assert_eq!(g.check(t0 + s(10 * i), t0 + s(10 * i - 1)), Verdict::Alive);
        }
        // The loop's last beat at 200 s; checks every 10 s on time.
        let last = t0 + s(200);
        let mut verdicts = Vec::new();
        for i in 21..=34 {
            verdicts.push((i * 10, g.check(t0 + s(i * 10), last)));
        }
        assert!(
            verdicts[..12].iter().all(|(_, v)| *v == Verdict::Alive),
            "{verdicts:?}"
        );
        assert_eq!(verdicts[12], (330, Verdict::Stalled(s(130))));
        // Frozen as a whole (SIGSTOP) for 10 min: the first check after the thaw is late
        // and starts the count again; the loop beats right after.
        let mut g = Guard::new(s(120), s(10));
        assert_eq!(g.check(t0 + s(10), t0 + s(9)), Verdict::Alive);
        assert_eq!(g.check(t0 + s(610), t0 + s(9)), Verdict::Alive);
        assert_eq!(g.check(t0 + s(620), t0 + s(611)), Verdict::Alive);
        // ... but a loop that stays silent after the thaw is stalled a timeout later.
        let mut g = Guard::new(s(120), s(10));
        assert_eq!(g.check(t0 + s(10), t0 + s(9)), Verdict::Alive);
        assert_eq!(g.check(t0 + s(610), t0 + s(9)), Verdict::Alive);
        let mut at = 610;
        let stalled = loop {
            at += 10;
            if let Verdict::Stalled(d) = g.check(t0 + s(at), t0 + s(9)) {
                break (at, d);
            }
            assert!(at < 1000);
        };
        assert_eq!(stalled, (740, s(130)));
    }
}
