//! Crash-loop and image-pull back-off (kubelet: `client-go/util/flowcontrol.Backoff`).
//!
//! Owns: a keyed exponential back-off — initial 10 s, doubling, capped at 300 s — and the
//! keys the kubelet uses for it. Times are wall-clock `UnixNanos` passed in by the caller
//! (from the injected `Clock`), because the event a crash-loop back-off is measured from is
//! the runtime's `finishedAt`, a wall-clock stamp.
//!
//! The "reset after a container ran 10 minutes without failing" rule is upstream's
//! `hasExpired`: an entry whose last update is more than 2 × max (= 600 s) older than the
//! new event starts over at the initial delay; `gc` drops entries idle that long.
//!
//! The wall clock can go back (a board without a real-time clock corrected by NTP, an
//! operator's `date`): an event stamped after `now` is measured from when that was first
//! seen, so a back-off is never longer than its delay (the kubelet's, measured from the
//! stamp alone, waits out the jump). A jump forward counts as time gone by, as upstream: the
//! back-off ends, and the next one starts over at the initial delay.
//!
//! Must never: read a clock, sleep, or do I/O. It is plain state owned by a pod worker
//! (one `PodBackoffs` per pod: the keys carry the pod UID anyway).

use std::collections::HashMap;
use std::time::Duration;

use crate::api;
use crate::clock::{UnixNanos, nanos};
use crate::kuberuntime::labels;

/// kubelet: `backOffPeriod` / `MaxContainerBackOff` (also the image pull back-off).
pub(crate) const INITIAL_BACKOFF: Duration = Duration::from_secs(10);
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(300);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    /// Current delay, nanoseconds.
    backoff: i64,
    /// When `next` last moved this entry (wall clock).
    last_update: UnixNanos,
    /// The clock went back: an event time stamped after `now`, and when it was first
    /// seen so (the back-off runs from then).
    clock_back: Option<(UnixNanos, UnixNanos)>,
}

/// A keyed exponential back-off (kubelet: `flowcontrol.Backoff`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Backoff {
    initial: i64,
    max: i64,
    entries: HashMap<String, Entry>,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new(INITIAL_BACKOFF, MAX_BACKOFF)
    }
}

impl Backoff {
    pub(crate) fn new(initial: Duration, max: Duration) -> Self {
        Backoff {
            initial: nanos(initial),
            max: nanos(max),
            entries: HashMap::new(),
        }
    }

    /// The current delay for `key` (zero if none).
    pub(crate) fn get(&self, key: &str) -> Duration {
        self.entries
            .get(key)
            .map(|e| Duration::from_nanos(u64::try_from(e.backoff).unwrap_or(0)))
            .unwrap_or_default()
    }

    /// Record a failure at `event_time`: start at the initial delay (no entry, or the
    /// entry is stale — the thing ran fine for 2 × max), else double up to max.
    /// `now` becomes the entry's last update (kubelet: `Backoff.Next`).
    pub(crate) fn next(&mut self, key: &str, event_time: UnixNanos, now: UnixNanos) {
        let (initial, max) = (self.initial, self.max);
        let entry = self.entries.entry(key.to_string()).or_insert(Entry {
            backoff: 0,
            last_update: now,
            clock_back: None,
        });
        if entry.backoff == 0 || expired(event_time, entry.last_update, max) {
            entry.backoff = initial;
        } else {
            entry.backoff = entry.backoff.saturating_mul(2).min(max);
        }
        entry.last_update = now;
        entry.clock_back = None;
    }

    /// Forget `key` (kubelet: `Backoff.Reset`).
    #[cfg(test)]
    pub(crate) fn reset(&mut self, key: &str) {
        self.entries.remove(key);
    }

    /// Is less than the current delay elapsed since `event_time`? (kubelet:
    /// `IsInBackOffSince`; crash loops pass the container's `finishedAt`.)
    #[cfg(test)]
    pub(crate) fn is_in_backoff_since(
        &mut self,
        key: &str,
        event_time: UnixNanos,
        now: UnixNanos,
    ) -> bool {
        self.remaining_since(key, event_time, now).is_some()
    }

    /// How much of the delay is left, measured from `event_time` (or, when that is after
    /// `now` because the clock went back, from when that was first seen); `None` when not
    /// in back-off.
    pub(crate) fn remaining_since(
        &mut self,
        key: &str,
        event_time: UnixNanos,
        now: UnixNanos,
    ) -> Option<Duration> {
        let max = self.max;
        let e = self.entries.get_mut(key)?;
        if expired(event_time, e.last_update, max) {
            return None;
        }
        let from = match e.clock_back {
            Some((event, seen)) if event == event_time && seen <= now => seen,
            _ if now < event_time => {
                e.clock_back = Some((event_time, now));
                now
            }
            _ => event_time,
        };
        let elapsed = now.saturating_sub(from);
        (elapsed < e.backoff).then(|| nanos_to_duration(e.backoff - elapsed))
    }

    /// Is less than the current delay elapsed since the last failure was recorded?
    /// (kubelet: `IsInBackOffSinceUpdate`; used for image pulls with `now`.)
    #[cfg(test)]
    pub(crate) fn is_in_backoff_since_update(&mut self, key: &str, now: UnixNanos) -> bool {
        self.remaining_since_update(key, now).is_some()
    }

    pub(crate) fn remaining_since_update(&mut self, key: &str, now: UnixNanos) -> Option<Duration> {
        let max = self.max;
        let e = self.entries.get_mut(key)?;
        if now < e.last_update {
            // The clock went back: the delay runs from now.
            e.last_update = now;
        }
        if expired(now, e.last_update, max) {
            return None;
        }
        let elapsed = now.saturating_sub(e.last_update);
        (elapsed < e.backoff).then(|| nanos_to_duration(e.backoff - elapsed))
    }

    /// Drop entries not updated for 2 × max (kubelet: `Backoff.GC`).
    pub(crate) fn gc(&mut self, now: UnixNanos) {
        let max = self.max;
        self.entries
            .retain(|_, e| now.saturating_sub(e.last_update) <= max.saturating_mul(2));
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// After 2 × max without a new failure the thing counts as stable: start over.
fn expired(event_time: UnixNanos, last_update: UnixNanos, max: i64) -> bool {
    event_time.saturating_sub(last_update) > max.saturating_mul(2)
}

fn nanos_to_duration(n: i64) -> Duration {
    Duration::from_nanos(u64::try_from(n).unwrap_or(0))
}

/// The crash-loop key: `<pod>_<namespace>_<uid>_<container>_<hash>` (kubelet:
/// `GetStableKey`) — a changed container (new hash) starts with a clean slate.
pub(crate) fn crash_loop_key(pod: &api::Pod, container: &api::Container) -> String {
    format!(
        "{}_{}_{}_{}_{}",
        pod.metadata.name,
        pod.metadata.namespace,
        pod.metadata.uid,
        container.name,
        labels::container_hash(container)
    )
}

/// The image pull key: `<pod uid>_<image>` (kubelet: `EnsureImageExists`).
pub(crate) fn image_pull_key(pod_uid: &str, image: &str) -> String {
    format!("{pod_uid}_{image}")
}

/// The two back-offs `sync_pod` uses. Owned by the pod worker, one per pod.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PodBackoffs {
    pub crash_loop: Backoff,
    pub image_pull: Backoff,
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;
    const T0: i64 = 1_700_000_000 * S;

    #[test]
    fn sequence_doubles_to_max() {
        let mut b = Backoff::default();
        let mut seen = vec![b.get("k").as_secs()];
        for i in 0..8 {
            b.next("k", T0 + i * S, T0 + i * S);
            seen.push(b.get("k").as_secs());
        }
        assert_eq!(seen, vec![0, 10, 20, 40, 80, 160, 300, 300, 300]);
    }

    #[test]
    fn in_backoff_since_table() {
        // (delay after `next`, event time offset, now offset, expected)
        let cases: &[(&str, i64, i64, bool)] = &[
            ("just failed", 0, 0, true),
            ("9s after the event", 0, 9, true),
            ("10s after the event", 0, 10, false),
            ("event long ago", -100, 0, false),
            // event after the last update by more than 2×max → stable, not in back-off
            ("stable for 10 min+", 601, 602, false),
            ("stable for exactly 10 min", 600, 601, true),
        ];
        for (name, event, now, want) in cases {
            let mut b = Backoff::default();
            b.next("k", T0, T0);
            assert_eq!(
                b.is_in_backoff_since("k", T0 + event * S, T0 + now * S),
                *want,
                "{name}"
            );
        }
        let mut b = Backoff::default();
        assert!(!b.is_in_backoff_since("unknown", T0, T0), "no entry");
    }

    #[test]
    fn remaining_since() {
        let mut b = Backoff::default();
        b.next("k", T0, T0);
        b.next("k", T0 + 12 * S, T0 + 12 * S); // 20 s now
        assert_eq!(
            b.remaining_since("k", T0 + 30 * S, T0 + 35 * S),
            Some(Duration::from_secs(15))
        );
        assert_eq!(b.remaining_since("k", T0 + 30 * S, T0 + 50 * S), None);
    }

    #[test]
    fn a_clock_gone_back_never_lengthens_a_back_off() {
        const DAY: i64 = 86_400 * S;
        let mut b = Backoff::default();
        b.next("k", T0, T0);
        b.next("k", T0 + 12 * S, T0 + 12 * S); // 20 s
        // The container finished at T0 + 30 s; the clock then went back a day.
        let finished = T0 + 30 * S;
        let back = finished + 5 * S - DAY;
        assert_eq!(
            b.remaining_since("k", finished, back),
            Some(Duration::from_secs(20)),
            "the whole delay, from when the jump was seen"
        );
        assert_eq!(
            b.remaining_since("k", finished, back + 15 * S),
            Some(Duration::from_secs(5))
        );
        assert_eq!(b.remaining_since("k", finished, back + 20 * S), None);
        // Back again while waiting: from the second sighting.
        let mut b2 = b.clone();
        assert_eq!(
            b2.remaining_since("k", finished, back - DAY),
            Some(Duration::from_secs(20))
        );
        // A new failure after the jump doubles as usual (40 s), from its own stamp.
        b.next("k", back + 25 * S, back + 25 * S);
        assert_eq!(b.get("k"), Duration::from_secs(40));
        assert_eq!(
            b.remaining_since("k", back + 25 * S, back + 30 * S),
            Some(Duration::from_secs(35))
        );
        // Forward a day: the back-off is over, and the next one starts at 10 s.
        assert_eq!(
            b.remaining_since("k", back + 25 * S, back + 30 * S + DAY),
            None
        );
        b.next("k", back + 31 * S + DAY, back + 31 * S + DAY);
        assert_eq!(b.get("k"), Duration::from_secs(10));
        // Image pulls (since the last update): back a day, at most the delay.
        let mut p = Backoff::default();
        p.next("img", T0, T0);
        assert_eq!(
            p.remaining_since_update("img", T0 + 3 * S - DAY),
            Some(Duration::from_secs(10))
        );
        assert_eq!(p.remaining_since_update("img", T0 + 13 * S - DAY), None);
    }

    #[test]
    fn reset_after_running_ten_minutes() {
        // kubelet: a container that ran > 10 min (2 × max) after its last restart starts
        // over at 10 s.
        let mut b = Backoff::default();
        for i in 0..5 {
            b.next("k", T0 + i * S, T0 + i * S);
        }
        assert_eq!(b.get("k"), Duration::from_secs(160));
        let restarted = T0 + 5 * S;
        b.next("k", restarted, restarted); // 300 s, last update = restart time
        let finished = restarted + 601 * S; // ran 10 min 1 s
        assert!(!b.is_in_backoff_since("k", finished, finished + S));
        b.next("k", finished, finished + S);
        assert_eq!(b.get("k"), Duration::from_secs(10));
        // a crash within 10 min keeps doubling
        let mut b = Backoff::default();
        b.next("k", T0, T0);
        b.next("k", T0 + 599 * S, T0 + 599 * S);
        assert_eq!(b.get("k"), Duration::from_secs(20));
    }

    #[test]
    fn since_update_for_image_pulls() {
        let mut b = Backoff::default();
        b.next("img", T0, T0);
        assert!(b.is_in_backoff_since_update("img", T0 + 9 * S));
        assert!(!b.is_in_backoff_since_update("img", T0 + 10 * S));
        b.next("img", T0 + 10 * S, T0 + 10 * S);
        assert_eq!(
            b.remaining_since_update("img", T0 + 15 * S),
            Some(Duration::from_secs(15))
        );
        assert!(!b.is_in_backoff_since_update("other", T0));
    }

    #[test]
    fn gc_drops_idle_entries_and_reset_forgets() {
        let mut b = Backoff::default();
        b.next("old", T0, T0);
        b.next("new", T0 + 500 * S, T0 + 500 * S);
        b.gc(T0 + 600 * S);
        assert_eq!(b.len(), 2, "exactly 2 × max idle is kept");
        b.gc(T0 + 601 * S);
        assert_eq!(b.len(), 1);
        assert_eq!(b.get("old"), Duration::ZERO);
        b.reset("new");
        assert!(b.is_empty());
    }

    #[test]
    fn keys() {
        let mut pod = api::Pod::default();
        pod.metadata.name = "web".into();
        pod.metadata.namespace = "default".into();
        pod.metadata.uid = "u1".into();
        let c = api::Container {
            name: "nginx".into(),
            image: "nginx:1".into(),
            ..Default::default()
        };
        assert_eq!(
            crash_loop_key(&pod, &c),
            format!("web_default_u1_nginx_{}", labels::container_hash(&c))
        );
        assert_eq!(image_pull_key("u1", "nginx:1"), "u1_nginx:1");
    }
}
