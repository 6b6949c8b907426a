//! The event sink (kubelet: client-go `EventBroadcaster.StartRecordingToSink`): sends the
//! events of the node's [`Recorder`] to the apiserver.
//!
//! Owns: one task that reads the recorder by [`Recorder::since`] after each
//! [`Recorder::changed`], so recording never waits on the network. A new event is a
//! `POST /api/v1/namespaces/{ns}/events`; an aggregated bump of an event already sent is a
//! strategic-merge `PATCH` of its `count`, `lastTimestamp` and `message` (kubelet:
//! `recordToSink`: `Count > 1` → patch); a PATCH answered 404 or 409 (the apiserver's
//! one-hour TTL removed it) creates the event afresh, and a POST answered AlreadyExists
//! patches it.
//!
//! Rate limits (kubelet: `eventRecordQPS` 50, `eventBurst` 100): a token bucket in front of
//! every request. While the bucket is empty the task waits; the ring meanwhile keeps
//! recording (and evicts the oldest if it fills — the recorder counts those).
//!
//! An event the apiserver answers with a 4xx status (a namespace being terminated, or gone;
//! no RBAC for events; invalid) is dropped alone and the next one is sent as usual
//! (client-go `recordEvent`: a `StatusError` is not retried, the rest goes on): one WARN
//! for the first such rejection and then at most one every 10 minutes with the count, none
//! for a namespace being terminated (the e2e suites delete a namespace a second).
//!
//! While the apiserver is away (no answer, 5xx, 429, 401), events are dropped, not queued:
//! one WARN when the outage begins, and one line with the number dropped when it answers
//! again. After a failure the next request waits a back-off (1 s doubling to 30 s); events
//! recorded before then are dropped without a request. Deliberate difference: upstream
//! retries each event up to 12 times, 10 s apart; on a node whose uplink is away for hours
//! that is memory for nothing — the events stay readable in the ring (the node's own API).
//!
//! Must never: block or slow the agent's loop, log one line per dropped event, or hold a
//! borrow of the recorder across an `.await`.

use std::cell::Cell;
use std::collections::HashSet;
use std::rc::Rc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::clock;
use crate::kube::{ApiError, Backoff, Client, PatchKind};
use crate::recorder::{RecordedEvent, Recorder};

/// kubelet: `eventRecordQPS` default.
pub(crate) const DEFAULT_QPS: f64 = 50.0;
/// kubelet: `eventBurst` default.
pub(crate) const DEFAULT_BURST: u32 = 100;

#[derive(Debug, Clone)]
pub struct EventSinkOptions {
    /// Requests per second once the burst is spent (`--event-qps`); ≤ 0: no limit.
    pub qps: f64,
    /// Requests that may go at once (`--event-burst`).
    pub burst: u32,
    /// The first wait after a failed request (doubling up to `max_retry`).
    pub retry: Duration,
    pub max_retry: Duration,
}

impl Default for EventSinkOptions {
    fn default() -> Self {
        EventSinkOptions {
            qps: DEFAULT_QPS,
            burst: DEFAULT_BURST,
            retry: Duration::from_secs(1),
            max_retry: Duration::from_secs(30),
        }
    }
}

/// What the sink did, for tests and metrics.
#[derive(Debug, Default)]
pub struct SinkStats {
    /// Events created (POST).
    pub created: Cell<u64>,
    /// Aggregated events updated (PATCH).
    pub patched: Cell<u64>,
    /// Events not sent: the apiserver was away or refused them.
    pub dropped: Cell<u64>,
    /// Of those, events the apiserver answered with a 4xx of their own (the sink went on).
    pub rejected: Cell<u64>,
}

/// An answer about the event itself, not about the apiserver (client-go: a `StatusError`),
/// and whether it is a namespace being terminated (NamespaceLifecycle's words).
fn rejection(e: &ApiError) -> Option<bool> {
    match e {
        ApiError::Status { code, message, .. }
            if (400..500).contains(code) && *code != 401 && *code != 429 =>
        {
            Some(message.contains("because it is being terminated"))
        }
        _ => None,
    }
}

/// The minimum time between two WARNs about rejected events.
const REJECTION_LOG_EVERY: Duration = Duration::from_secs(600);

fn bump(c: &Cell<u64>) {
    c.set(c.get() + 1);
}

/// A token bucket (client-go's `flowcontrol.NewTokenBucketRateLimiter`): starts full with
/// `burst` tokens, refills `qps` per second.
#[derive(Debug, Clone)]
pub(crate) struct TokenBucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    pub(crate) fn new(qps: f64, burst: u32, now: Instant) -> Self {
        let burst = f64::from(burst.max(1));
        TokenBucket {
            qps,
            burst,
            tokens: burst,
            last: now,
        }
    }

    /// Takes a token at `now`, or says how long until one is there.
    pub(crate) fn try_take(&mut self, now: Instant) -> Result<(), Duration> {
        if self.qps <= 0.0 {
            return Ok(());
        }
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return Ok(());
        }
        Err(Duration::from_secs_f64((1.0 - self.tokens) / self.qps))
    }
}

/// The outage in progress: since when events are dropped, how many, when to try again.
struct Outage {
    dropped: u64,
    retry_at: Instant,
}

pub struct EventSink {
    client: Client,
    recorder: Recorder,
    options: EventSinkOptions,
    stats: Rc<SinkStats>,
    /// Names of the events the apiserver has (a bump of one is a PATCH).
    sent: HashSet<String>,
}

impl EventSink {
    pub fn new(client: Client, recorder: Recorder) -> Self {
        EventSink {
            client,
            recorder,
            options: EventSinkOptions::default(),
            stats: Rc::default(),
            sent: HashSet::new(),
        }
    }

    pub fn with_options(mut self, options: EventSinkOptions) -> Self {
        self.options = options;
        self
    }

    pub fn stats(&self) -> Rc<SinkStats> {
        Rc::clone(&self.stats)
    }

    /// Sends events until `shutdown`, from the oldest the ring still holds.
    pub async fn run(mut self, shutdown: CancellationToken) {
        let mut bucket = TokenBucket::new(self.options.qps, self.options.burst, Instant::now());
        let mut backoff = Backoff::new(
            self.options.retry,
            self.options.max_retry,
            self.recorder.node_name(),
        );
        let mut outage: Option<Outage> = None;
        // Rejections since the last WARN about them, and when that was.
        let mut rejected: (u64, Option<Instant>) = (0, None);
        let mut last_rv = 0;
        loop {
            let batch = self.recorder.since(last_rv);
            if batch.is_empty() {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = self.recorder.changed() => continue,
                }
            }
            for event in batch {
                last_rv = event.resource_version;
                if let Some(o) = &mut outage {
                    if Instant::now() < o.retry_at {
                        o.dropped += 1;
                        bump(&self.stats.dropped);
                        continue;
                    }
                }
                // kubelet: the events client's rate limiter (eventRecordQPS, eventBurst).
                while let Err(wait) = bucket.try_take(Instant::now()) {
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = tokio::time::sleep(wait) => {}
                    }
                }
                let sent = tokio::select! {
                    _ = shutdown.cancelled() => return,
                    r = self.send(&event) => r,
                };
                // An answer about the event itself: it alone is dropped, and the apiserver
                // is there.
                let alone = sent.as_ref().err().and_then(rejection);
                if sent.is_ok() || alone.is_some() {
                    if let Some(o) = outage.take() {
                        log::info!(
                            "events: the apiserver takes events again; {} dropped while it did not",
                            o.dropped
                        );
                        backoff.reset();
                    }
                }
                if alone.is_some() {
                    bump(&self.stats.dropped);
                    bump(&self.stats.rejected);
                }
                match sent {
                    Ok(()) => {}
                    Err(e) if alone == Some(true) => log::debug!("events: {e}"),
                    Err(e) if alone == Some(false) => {
                        rejected.0 += 1;
                        let now = Instant::now();
                        if rejected.1.is_none_or(|t| now >= t + REJECTION_LOG_EVERY) {
                            log::warn!(
                                "events: {} rejected by the apiserver, the last: {e}",
                                rejected.0
                            );
                            rejected = (0, Some(now));
                        }
                    }
                    Err(e) => {
                        bump(&self.stats.dropped);
                        let retry_at = Instant::now() + backoff.next_delay();
                        match &mut outage {
                            Some(o) => {
                                o.dropped += 1;
                                o.retry_at = retry_at;
                            }
                            None => {
                                log::warn!(
                                    "events: cannot send to the apiserver: {e}; dropping events until it takes them"
                                );
                                outage = Some(Outage {
                                    dropped: 1,
                                    retry_at,
                                });
                            }
                        }
                    }
                }
            }
        }
    }

    /// One event: PATCH if the apiserver has it, else POST (kubelet: `recordToSink`).
    async fn send(&mut self, event: &RecordedEvent) -> Result<(), ApiError> {
        let collection = format!("/api/v1/namespaces/{}/events", event.namespace);
        let path = format!("{collection}/{}", event.name);
        if self.sent.contains(&event.name) {
            match self.patch(&path, event).await {
                Ok(()) => return Ok(()),
                // kubelet: a patch of an event the apiserver no longer has creates it anew.
                Err(e) if e.is_not_found() || e.is_conflict() => {
                    self.sent.remove(&event.name);
                }
                Err(e) => return Err(e),
            }
        }
        match self
            .client
            .create::<_, Value>(&collection, &body(event))
            .await
        {
            Ok(_) => bump(&self.stats.created),
            Err(e) if e.is_already_exists() => self.patch(&path, event).await?,
            Err(e) => return Err(e),
        }
        self.remember(&event.name);
        Ok(())
    }

    async fn patch(&self, path: &str, event: &RecordedEvent) -> Result<(), ApiError> {
        let patch = json!({
            "count": event.count,
            "lastTimestamp": clock::rfc3339(event.last_timestamp),
            "message": event.message,
        });
        self.client
            .patch::<Value>(path, PatchKind::StrategicMerge, &patch)
            .await?;
        bump(&self.stats.patched);
        Ok(())
    }

    /// Names of events the ring no longer holds can never be bumped: forget them when the
    /// set outgrows the ring.
    fn remember(&mut self, name: &str) {
        self.sent.insert(name.to_string());
        if self.sent.len() > 2 * self.recorder.capacity() {
            let live: HashSet<String> = self
                .recorder
                .list()
                .iter()
                .map(|e| e.name.clone())
                .collect();
            self.sent.retain(|n| live.contains(n));
        }
    }
}

/// The event as POSTed: the recorder's resource version means nothing to the apiserver.
fn body(event: &RecordedEvent) -> Value {
    let mut v = event.to_json();
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
        meta.remove("creationTimestamp");
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn token_bucket_bursts_then_refills_at_qps() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(10.0, 3, t0);
        for _ in 0..3 {
            assert_eq!(b.try_take(t0), Ok(()));
        }
        let wait = b.try_take(t0).unwrap_err();
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-9, "{wait:?}");
        // After 250 ms two tokens are back, not three.
        let t1 = t0 + Duration::from_millis(250);
        assert_eq!(b.try_take(t1), Ok(()));
        assert_eq!(b.try_take(t1), Ok(()));
        assert!(b.try_take(t1).is_err());
        // A long pause refills to the burst only.
        let t2 = t1 + Duration::from_secs(60);
        for _ in 0..3 {
            assert_eq!(b.try_take(t2), Ok(()));
        }
        assert!(b.try_take(t2).is_err());
        // No limit.
        let mut free = TokenBucket::new(0.0, 1, t0);
        for _ in 0..1000 {
            assert_eq!(free.try_take(t0), Ok(()));
        }
    }
}
