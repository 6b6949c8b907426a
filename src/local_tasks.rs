//! Spawning the agent's tasks on its one thread, and waking them together.
//!
//! Owns: [`spawn_local`], the one way picolet's code starts a `!Send` task, and the grid
//! its periodic passes wake on ([`interval`], [`align_up`]). Must never: import another
//! module of picolet.
//!
//! tokio instantiates its whole task machinery (the task cell, its poll, completion,
//! cancellation and join-handle code, about 650 bytes of aarch64 code) once per future
//! type spawned. picolet spawns some thirty kinds of task; boxed here behind one
//! `dyn Future` per output type they share a single copy. The price is one small
//! allocation per spawn, which is nothing beside the task's own.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::{Instant, Interval, MissedTickBehavior};

/// Sleeps until `at`; with no deadline, never wakes (a `select!` branch that waits for
/// nothing).
pub(crate) async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// `tokio::task::spawn_local` with the future boxed (see the module docs).
pub(crate) fn spawn_local<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    let boxed: Pin<Box<dyn Future<Output = F::Output>>> = Box::pin(future);
    tokio::task::spawn_local(boxed)
}

// ---------------------------------------------------------------------------------------
// The wake-up grid
//
// An idle node's cost is mostly its wake-ups: each one brings the thread, its cold caches
// and the timer wheel's cascades back (measured on a real runtime with 50 idle pods: about
// four wake-ups a second when housekeeping (2 s), eviction, log rotation and the CSI
// rescan (10 s), the manifest relist (20 s) and fifty resync timers (60 s, jittered) each
// kept their own phase). On one grid they share a wake-up: every period is a multiple of
// [`GRID`], every tick falls on a grid point, and a resync deadline is rounded up to one.
// picolet differs from the kubelet here only in phase: the kubelet's loops each keep the
// phase of their start, and its pod resyncs are spread by jitter.

/// The spacing of the grid: the housekeeping period (kubelet: `housekeepingPeriod`).
pub(crate) const GRID: Duration = Duration::from_secs(2);

thread_local! {
    /// The grid's first point: the first instant asked for on this thread (picolet's
    /// tasks all run on one thread; each test has its own, with its own clock).
    static ORIGIN: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// The first grid point at or after `at`.
pub(crate) fn align_up(at: Instant) -> Instant {
    let origin = ORIGIN.with(|o| {
        let origin = o.get().unwrap_or(at);
        o.set(Some(origin));
        origin
    });
    let Some(since) = at.checked_duration_since(origin) else {
        return at;
    };
    let grid = GRID.as_nanos();
    let rest = since.as_nanos() % grid;
    if rest == 0 {
        return at;
    }
    // < GRID, so it fits.
    at + Duration::from_nanos(u64::try_from(grid - rest).unwrap_or(0))
}

/// `tokio::time::interval` on the grid: the first tick at the next grid point (at most
/// [`GRID`] away), then every `period` (a multiple of [`GRID`]). A tick the thread was too
/// busy to take is skipped, not delayed, so the phase is kept.
pub(crate) fn interval(period: Duration) -> Interval {
    interval_at(Instant::now(), period)
}

/// [`interval`] whose first tick is the first grid point at or after `start`.
pub(crate) fn interval_at(start: Instant, period: Duration) -> Interval {
    let mut tick = tokio::time::interval_at(align_up(start), period);
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    tick
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    #[tokio::test(flavor = "current_thread")]
    async fn a_boxed_task_runs_and_gives_its_output() {
        let local = tokio::task::LocalSet::new();
        let shared = Rc::new(41); // !Send: the task must run on this thread
        let out = local
            .run_until(async move { super::spawn_local(async move { *shared + 1 }).await })
            .await;
        assert_eq!(out.unwrap(), 42);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn passes_of_different_periods_share_their_wake_ups() {
        use super::{GRID, Instant, align_up, interval};
        use std::time::Duration;
        let t0 = Instant::now();
        let mut short = interval(GRID);
        // Created later, off the grid: its first tick waits for the next grid point.
        tokio::time::advance(Duration::from_millis(700)).await;
        let mut long = interval(GRID * 5);
        assert_eq!(short.tick().await, t0);
        assert_eq!(long.tick().await, t0 + GRID);
        // Both polled as the agent polls them: every long tick is also a short one.
        let (mut shorts, mut longs) = (Vec::new(), Vec::new());
        while longs.len() < 3 {
            tokio::select! {
                t = short.tick() => shorts.push(t),
                t = long.tick() => longs.push(t),
            }
        }
        for t in &longs {
            assert_eq!((*t - t0).as_nanos() % GRID.as_nanos(), 0, "on the grid");
            assert!(
                shorts.contains(t) || short.tick().await == *t,
                "{t:?} not in {shorts:?}"
            );
        }
        // Rounding up: on a point it stays, between points it goes to the next.
        let on = t0 + GRID * 40;
        assert_eq!(align_up(on), on);
        assert_eq!(align_up(on + Duration::from_millis(1)), on + GRID);
        assert_eq!(align_up(on - Duration::from_millis(1)), on);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_late_tick_keeps_the_phase() {
        use super::{GRID, Instant, interval};
        use std::time::Duration;
        let t0 = Instant::now();
        let mut tick = interval(GRID);
        tick.tick().await;
        // The thread is busy for 3.5 s: the missed ticks are skipped, the next is on the grid.
        tokio::time::advance(Duration::from_millis(3500)).await;
        assert_eq!(tick.tick().await, t0 + GRID, "the late one, at once");
        assert_eq!(tick.tick().await, t0 + GRID * 2);
        assert_eq!(tick.tick().await, t0 + GRID * 3);
    }
}
