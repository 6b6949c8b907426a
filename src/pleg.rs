//! The pod lifecycle event generator, its runtime half (kubelet: `pkg/kubelet/pleg`, the
//! generic PLEG's relist and the evented PLEG's event stream): a task of its own that
//! lists the runtime and watches its `GetContainerEvents` stream, and sends what it saw to
//! the loop as [`PlegMessage`]s. The loop (`agent`) owns the view built from them and
//! decides which pods to sync; [`apply_event`] is how one event edits that view.
//!
//! Must never: hold pod state (the loop owns it), or block the loop (a hung list or a hung
//! stream holds up only this task).
//!
//! The event stream's lifecycle (kubelet: `EventedPLEG.watchEventsChannel`):
//!
//! ```text
//!  Opening --accepted--> Watching --broke / ended--> Waiting (back-off) --> Opening
//!  Opening --Unimplemented--> Off      (containerd 1.6; INFO once; for good)
//!  Opening/Watching --5th failure in a row--> Off   (WARN once; for good)
//! ```
//!
//! The relist runs every [`RELIST_PERIOD`] (1 s) unless the stream is watched and a relist
//! has run since it opened: then every [`EVENTED_RELIST_PERIOD`] (300 s), a safety net for
//! events the runtime never sent. Events are not replayed, so every (re)open is followed by a
//! relist at once, and a break forces one (kubelet: `e.Relist()` on a stream error).
//!
//! Without a stream (containerd 1.6) the relist runs every second — unless every running
//! container and sandbox is watched through a pidfd ([`exits`], picolet's own addition):
//! then an exit wakes the relist at once, the loop asks for a relist within
//! [`RELIST_PERIOD`] after each change it made itself (`poke`), and the relist in between
//! runs every [`EXIT_WATCHED_RELIST_PERIOD`] (10 s) as the safety net.
//!
//! Deliberate differences from the kubelet: it reconnects at once and counts every
//! failure of the process's life toward the 5; picolet waits 1 s, 2 s, 4 s … (at most
//! 30 s) between attempts, a stream that delivered an event or stayed up a minute starts
//! the count afresh, and a runtime that is unreachable (`Unavailable`: containerd
//! restarting, or not started yet) is retried without counting — it is the runtime that is
//! away, not its stream that does not work. While the stream is not watched the relist is
//! the 1 s one (the kubelet keeps 300 s while it reconnects).

use std::collections::HashMap;
use std::pin::Pin;
use std::rc::Rc;
use std::time::Duration;

use futures_util::StreamExt as _;
use futures_util::future::LocalBoxFuture;
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

mod exits;

use crate::cri::{
    ContainerEvent, ContainerEventKind, ContainerEvents, ContainerState, CriError,
    PodRuntimeStatus, RelistDigest, Runtime, SandboxState,
};
use crate::kuberuntime::sync;

/// kubelet: genericPlegRelistPeriod.
pub(crate) const RELIST_PERIOD: Duration = Duration::from_secs(1);
/// kubelet: eventedPlegRelistPeriod — the relist while the event stream is watched.
pub(crate) const EVENTED_RELIST_PERIOD: Duration = Duration::from_secs(300);
/// picolet: the relist while every running process is watched for its exit ([`exits`]).
pub(crate) const EXIT_WATCHED_RELIST_PERIOD: Duration = Duration::from_secs(10);
/// After a watched exit, a relist that shows no change is tried again this soon …
const EXIT_RELIST_RETRY: Duration = Duration::from_millis(100);
/// … for this long (then the runtime was not going to show it: back to the periods).
const EXIT_SHOWN_WITHIN: Duration = Duration::from_secs(2);
/// kubelet: eventedPlegMaxStreamRetries.
pub(crate) const MAX_STREAM_RETRIES: u32 = 5;
/// The first wait before reopening a stream; it doubles up to [`RETRY_MAX`].
const RETRY_BASE: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(30);
/// A stream up this long (or that delivered an event) was healthy: its break starts the
/// failure count afresh.
const HEALTHY_AFTER: Duration = Duration::from_secs(60);
/// Messages waiting for the loop at most (a burst of events waits in the stream beyond).
const CHANNEL_CAPACITY: usize = 32;

/// What the PLEG task tells the loop, in the order it saw it.
#[derive(Debug)]
pub(crate) enum PlegMessage {
    /// A relist: when its list calls started, and what they answered, grouped by pod
    /// (`Ok(None)`: the same as the previous relist).
    Relisted {
        started: Instant,
        result: Result<Option<Vec<PodRuntimeStatus>>, CriError>,
    },
    /// One container event, and when this task received it.
    Event {
        received: Instant,
        event: ContainerEvent,
    },
    /// `Some(since)`: the event stream is watched since then (every change after it
    /// arrives as an event); `None`: it is not (broke, or off for good).
    Watching(Option<Instant>),
}

/// Starts the PLEG task on the current `LocalSet`; its messages arrive on the receiver.
/// `poke` is how the loop says it changed something in the runtime: the next relist then
/// runs within [`RELIST_PERIOD`] even while a slower period applies.
pub(crate) fn spawn<R: Runtime>(
    runtime: R,
    shutdown: CancellationToken,
    poke: Rc<Notify>,
) -> mpsc::Receiver<PlegMessage> {
    let (tx, rx) = mpsc::channel(CHANNEL_CAPACITY);
    crate::local_tasks::spawn_local(run(runtime, tx, shutdown, poke));
    rx
}

/// The event stream's state (see the module docs for its arrows).
enum Stream {
    Opening(LocalBoxFuture<'static, Result<ContainerEvents, CriError>>),
    Watching {
        events: ContainerEvents,
        since: Instant,
        delivered: bool,
    },
    Waiting(Pin<Box<tokio::time::Sleep>>),
    Off,
}

/// What the stream did.
enum Step {
    Opened(Result<ContainerEvents, CriError>),
    Item(Option<Result<ContainerEvent, CriError>>),
    Retry,
}

impl Stream {
    fn open<R: Runtime>(runtime: &R) -> Stream {
        let runtime = runtime.clone();
        Stream::Opening(Box::pin(async move { runtime.container_events().await }))
    }

    /// Waits for the current state's next step; cancel-safe (everything lives in `self`).
    async fn step(&mut self) -> Step {
        match self {
            Stream::Opening(opening) => Step::Opened(opening.await),
            Stream::Watching { events, .. } => Step::Item(events.next().await),
            Stream::Waiting(sleep) => {
                sleep.as_mut().await;
                Step::Retry
            }
            Stream::Off => std::future::pending().await,
        }
    }

    /// Whether every change since `t` arrives as an event.
    fn watched_since(&self, t: Instant) -> bool {
        matches!(self, Stream::Watching { since, .. } if *since <= t)
    }
}

/// The stream's bookkeeping across attempts.
#[derive(Default)]
struct Attempts {
    /// Failures in a row that count toward [`MAX_STREAM_RETRIES`].
    failures: u32,
    /// Attempts in a row that failed, for the back-off.
    in_a_row: u32,
    watched_before: bool,
}

impl Attempts {
    fn backoff(&self) -> Duration {
        let exp = self.in_a_row.saturating_sub(1).min(5);
        (RETRY_BASE * 2u32.pow(exp)).min(RETRY_MAX)
    }
}

/// kubelet: the generic PLEG's relist loop and the evented PLEG's watcher, in one task
/// (plus picolet's exit watch).
async fn run<R: Runtime>(
    runtime: R,
    tx: mpsc::Sender<PlegMessage>,
    shutdown: CancellationToken,
    poke: Rc<Notify>,
) {
    let send = |msg| {
        let tx = tx.clone();
        let shutdown = shutdown.clone();
        async move {
            tokio::select! {
                _ = shutdown.cancelled() => false,
                sent = tx.send(msg) => sent.is_ok(),
            }
        }
    };
    let mut digest = RelistDigest::default();
    let mut stream = Stream::open(&runtime);
    let mut attempts = Attempts::default();
    let mut exits = exits::ExitWatch::default();
    let mut exits_logged = false;
    // When the last watched exit was seen, until a relist showed a change.
    let mut exit_seen: Option<Instant> = None;
    let relist_at = tokio::time::sleep_until(Instant::now());
    tokio::pin!(relist_at);
    loop {
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => return,
            () = &mut relist_at => {
                let started = Instant::now();
                let mut result = tokio::select! {
                    _ = shutdown.cancelled() => return,
                    r = sync::relist_runtime_pods(&runtime, &mut digest) => r,
                };
                if let Ok(Some(pods)) = &mut result {
                    // The loop holds this as its view until the next change.
                    pods.iter_mut().for_each(compact);
                    exits.update(pods);
                }
                let evented = stream.watched_since(started);
                // The runtime is steady (the lists did not change): open what runs and is
                // not watched yet, so the next relists may slow down.
                let steady = matches!(result, Ok(None)) && !evented;
                let period = if evented {
                    EVENTED_RELIST_PERIOD
                } else if result.is_ok() && exits.covers_all() {
                    EXIT_WATCHED_RELIST_PERIOD
                } else {
                    RELIST_PERIOD
                };
                relist_at.as_mut().reset(started + period);
                // A process exited and the runtime did not show it yet (containerd handles
                // the exit a few milliseconds after the kernel): look again shortly.
                match exit_seen {
                    Some(at) if steady && started < at + EXIT_SHOWN_WITHIN => {
                        relist_at.as_mut().reset(started + EXIT_RELIST_RETRY);
                    }
                    _ => exit_seen = None,
                }
                if !send(PlegMessage::Relisted { started, result }).await {
                    return;
                }
                if steady && exit_seen.is_none() {
                    let opened = open_exits(&runtime, &mut exits, &shutdown).await;
                    if opened && exits.covers_all() {
                        relist_at.as_mut().reset(started + EXIT_WATCHED_RELIST_PERIOD);
                        if !exits_logged {
                            exits_logged = true;
                            log::info!(
                                "container exits: watching {} processes through pidfds; relisting every {EXIT_WATCHED_RELIST_PERIOD:?} while all are watched",
                                exits.watched()
                            );
                        }
                    }
                }
            }
            // A watched process exited: relist now (it is what the 1 s relist would find).
            exited = exits.next_exit() => {
                if let Some(id) = exited {
                    log::debug!("container exits: {id} exited; relisting");
                    let now = Instant::now();
                    exit_seen = Some(now);
                    relist_at.as_mut().reset(now);
                }
            }
            // The loop changed something: relist within the generic period.
            () = poke.notified() => {
                if matches!(stream, Stream::Watching { .. }) {
                    continue; // its events tell
                }
                let soon = Instant::now() + RELIST_PERIOD;
                if relist_at.deadline() > soon {
                    relist_at.as_mut().reset(soon);
                }
            }
            step = stream.step() => {
                let (next, msg, relist_now) = advance(stream, step, &mut attempts, &runtime);
                stream = next;
                if relist_now {
                    relist_at.as_mut().reset(Instant::now());
                }
                if let Some(PlegMessage::Event { .. }) = &msg {
                    // The view changed since the last relist's digest: the next relist
                    // compares everything (a safety net must not trust a digest).
                    digest = RelistDigest::default();
                }
                if let Some(msg) = msg {
                    if !send(msg).await {
                        return;
                    }
                }
            }
        }
    }
}

/// Opens the running processes the exit watch does not hold yet (one verbose status call
/// each); whether any was tried. A call that fails leaves its process for the next round.
async fn open_exits<R: Runtime>(
    runtime: &R,
    exits: &mut exits::ExitWatch,
    shutdown: &CancellationToken,
) -> bool {
    let todo = exits.to_open();
    for (id, sandbox) in &todo {
        let handle = tokio::select! {
            _ = shutdown.cancelled() => return false,
            h = runtime.exit_handle(id, *sandbox) => h,
        };
        match handle {
            Ok(handle) => {
                log::debug!("container exits: {id}: {handle:?}");
                exits.opened(id, handle);
            }
            Err(e) if e.is_not_found() => {}
            Err(e) => {
                log::debug!("container exits: {id}: {e}");
                break;
            }
        }
    }
    !todo.is_empty()
}

/// One arrow of the stream's state machine: the next state, what to tell the loop, and
/// whether to relist now.
fn advance<R: Runtime>(
    stream: Stream,
    step: Step,
    attempts: &mut Attempts,
    runtime: &R,
) -> (Stream, Option<PlegMessage>, bool) {
    match (stream, step) {
        // Opening --accepted--> Watching; relist at once: nothing before now is replayed.
        (Stream::Opening(_), Step::Opened(Ok(events))) => {
            if attempts.watched_before {
                log::info!("container events: watching the runtime's stream again");
            } else {
                log::info!(
                    "container events: watching the runtime's stream; relisting every {EVENTED_RELIST_PERIOD:?} as a safety net"
                );
            }
            attempts.watched_before = true;
            attempts.in_a_row = 0;
            let since = Instant::now();
            let watching = Stream::Watching {
                events,
                since,
                delivered: false,
            };
            (watching, Some(PlegMessage::Watching(Some(since))), true)
        }
        // Opening --Unimplemented--> Off: the generic PLEG alone, as before.
        (Stream::Opening(_), Step::Opened(Err(CriError::Unimplemented { .. }))) => {
            log::info!(
                "container events: the runtime does not implement GetContainerEvents; relisting every {RELIST_PERIOD:?}"
            );
            (Stream::Off, None, false)
        }
        (Stream::Opening(_), Step::Opened(Err(e))) => {
            let counts = !matches!(e, CriError::Unavailable { .. });
            (failed(attempts, counts, &e, false), None, false)
        }
        (
            Stream::Watching {
                events,
                since,
                delivered: _,
            },
            Step::Item(Some(Ok(event))),
        ) => {
            let watching = Stream::Watching {
                events,
                since,
                delivered: true,
            };
            let received = Instant::now();
            (
                watching,
                Some(PlegMessage::Event { received, event }),
                false,
            )
        }
        // Watching --broke / ended--> Waiting (or Off), relisting now (kubelet: a stream
        // error forces a relist).
        (
            Stream::Watching {
                since, delivered, ..
            },
            Step::Item(end),
        ) => {
            if delivered || since.elapsed() >= HEALTHY_AFTER {
                attempts.failures = 0;
            }
            let e = match end {
                Some(Err(e)) => e,
                _ => CriError::Rpc {
                    method: "GetContainerEvents",
                    code: "Ok".to_string(),
                    message: "the runtime closed the stream".to_string(),
                },
            };
            let counts = !matches!(e, CriError::Unavailable { .. });
            let next = failed(attempts, counts, &e, true);
            (next, Some(PlegMessage::Watching(None)), true)
        }
        // Waiting --> Opening
        (Stream::Waiting(_), Step::Retry) => (Stream::open(runtime), None, false),
        (state, _) => (state, None, false),
    }
}

/// A failed attempt: back off and retry, or give up for good after the 5th in a row.
fn failed(attempts: &mut Attempts, counts: bool, e: &CriError, broke: bool) -> Stream {
    if counts {
        attempts.failures += 1;
    }
    attempts.in_a_row += 1;
    // kubelet: numAttempts >= eventedPlegMaxStreamRetries → fall back to the generic PLEG.
    if attempts.failures >= MAX_STREAM_RETRIES {
        log::warn!(
            "container events: {e}; {MAX_STREAM_RETRIES} failures in a row, relisting every {RELIST_PERIOD:?} from now on"
        );
        return Stream::Off;
    }
    let wait = attempts.backoff();
    if broke {
        log::info!(
            "container events: the stream broke: {e}; relisting every {RELIST_PERIOD:?} and reopening in {wait:?}"
        );
    } else {
        log::debug!("container events: {e}; retrying in {wait:?}");
    }
    Stream::Waiting(Box::pin(tokio::time::sleep(wait)))
}

/// What an event did to the relister's view of its pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Applied {
    /// The view holds what the runtime holds, and it is what it was.
    Unchanged,
    /// The view holds what the runtime holds, and a sandbox or container changed.
    Changed,
    /// The event had no sandbox status: the pod's view is unknown, read it afresh.
    Unknown,
}

/// kubelet: evented PLEG's `processCRIEvents` → the pod cache, here the relister's view:
/// the event's sandbox and its containers replace what the view held of that sandbox.
/// Returns the pod UID it concerns and what it did, or `None` for an event of no known pod
/// (kubelet: such events are ignored; the next relist sees the truth).
pub(crate) fn apply_event(
    pods: &mut HashMap<String, PodRuntimeStatus>,
    event: &ContainerEvent,
) -> Option<(String, Applied)> {
    let id = &event.container_id;
    let Some(sandbox) = &event.sandbox else {
        // No sandbox status: the sandbox is gone (containerd, after RemovePodSandbox) or
        // was not found. Find the pod by the id.
        let (uid, pod) = pods.iter_mut().find(|(_, p)| {
            p.sandboxes.iter().any(|s| s.id == *id) || p.containers.iter().any(|c| c.id == *id)
        })?;
        let uid = uid.clone();
        if event.kind != ContainerEventKind::Deleted {
            return Some((uid, Applied::Unknown));
        }
        pod.sandboxes.retain(|s| s.id != *id);
        pod.containers
            .retain(|c| c.id != *id && c.sandbox_id != *id);
        if pod.sandboxes.is_empty() && pod.containers.is_empty() {
            pods.remove(&uid);
        }
        return Some((uid, Applied::Changed));
    };
    let uid = if sandbox.uid.is_empty() {
        crate::kuberuntime::labels::pod_uid(&sandbox.labels)?.to_string()
    } else {
        sandbox.uid.clone()
    };
    let pod = pods.entry(uid.clone()).or_insert_with(|| PodRuntimeStatus {
        uid: uid.clone(),
        ..PodRuntimeStatus::default()
    });
    let before: Vec<(String, u8)> = fingerprint(pod)
        .into_iter()
        .map(|(id, st)| (id.to_string(), st))
        .collect();
    pod.sandboxes.retain(|s| s.id != sandbox.id);
    pod.containers.retain(|c| c.sandbox_id != sandbox.id);
    let sandbox_deleted = event.kind == ContainerEventKind::Deleted && *id == sandbox.id;
    if !sandbox_deleted {
        // The view holds what the relist's lists hold: no annotations (the status calls
        // carry them, and the syncs' own views keep them). An event's copy with them
        // would cost a second full runtime view per pod.
        pod.sandboxes.push(crate::cri::Sandbox {
            annotations: Default::default(),
            ..sandbox.clone()
        });
        pod.containers
            .extend(event.containers.iter().map(|c| crate::cri::ContainerInfo {
                annotations: Default::default(),
                ..c.clone()
            }));
    }
    sync::regroup(pod);
    compact(pod);
    let after = fingerprint(pod);
    let changed = after.len() != before.len()
        || after
            .iter()
            .zip(&before)
            .any(|((a, x), (b, y))| a != b || x != y);
    if pod.sandboxes.is_empty() && pod.containers.is_empty() {
        pods.remove(&uid);
    }
    let applied = if changed {
        Applied::Changed
    } else {
        Applied::Unchanged
    };
    Some((uid, applied))
}

/// Drops from a held view of the runtime (the relister's, the pod cache's) what no reader of
/// a held view reads, so that a pod there costs its ids and states rather than its label
/// and annotation maps (a `BTreeMap` holds a 544-byte node as soon as it has one entry):
/// - a sandbox's annotations: only the status answer that carries them reads them;
/// - a sandbox's labels, when its UID, name and namespace fields say what the labels say
///   (absent or empty labels read as the fields: `labels::sandbox_info`);
/// - a container's labels, when its name field is the container's name
///   (`labels::container_name`) and the pod's identity is held by the view and by every
///   sandbox in it (a container's identity labels are read only when no sandbox names the
///   pod: `fill_identity`);
/// - the spare capacity of the sandbox and container vectors.
///
/// A container's annotations stay: its hash, restart count, grace periods and preStop hook
/// are read from them. Everything a view is read for gives the same answer after this.
pub(crate) fn compact(p: &mut PodRuntimeStatus) {
    use crate::kuberuntime::labels::{
        CONTAINER_NAME_LABEL, POD_NAME_LABEL, POD_NAMESPACE_LABEL, POD_UID_LABEL,
    };
    // A label that is absent or empty reads as `field`, or says the same.
    let same = |labels: &std::collections::BTreeMap<String, String>, key: &str, field: &str| {
        labels
            .get(key)
            .is_none_or(|v| v.is_empty() || v.as_str() == field)
    };
    for s in &mut p.sandboxes {
        s.annotations = Default::default();
        if same(&s.labels, POD_UID_LABEL, &s.uid)
            && same(&s.labels, POD_NAME_LABEL, &s.name)
            && same(&s.labels, POD_NAMESPACE_LABEL, &s.namespace)
        {
            s.labels = Default::default();
        }
    }
    let named_by_sandboxes = !p.name.is_empty()
        && !p.sandboxes.is_empty()
        && p.sandboxes.iter().all(|s| {
            let i = crate::kuberuntime::labels::sandbox_info(s);
            i.pod_name == p.name && i.pod_namespace == p.namespace
        });
    if named_by_sandboxes {
        for c in &mut p.containers {
            let l = &c.labels;
            let identity = |key: &str, field: &str| l.get(key).is_some_and(|v| v == field);
            if same(l, CONTAINER_NAME_LABEL, &c.name)
                && identity(POD_UID_LABEL, &p.uid)
                && identity(POD_NAME_LABEL, &p.name)
                && identity(POD_NAMESPACE_LABEL, &p.namespace)
                && l.keys().all(|k| {
                    matches!(
                        k.as_str(),
                        CONTAINER_NAME_LABEL | POD_UID_LABEL | POD_NAME_LABEL | POD_NAMESPACE_LABEL
                    )
                })
            {
                c.labels = Default::default();
            }
        }
    }
    p.sandboxes.shrink_to_fit();
    p.containers.shrink_to_fit();
}

/// What a relist compares between two views of a pod: sandbox and container ids with
/// states (kubelet: the generic PLEG's per-container state diff).
pub(crate) fn fingerprint(rp: &PodRuntimeStatus) -> Vec<(&str, u8)> {
    let mut fp: Vec<(&str, u8)> = rp
        .sandboxes
        .iter()
        .map(|s| (s.id.as_str(), u8::from(s.state == SandboxState::Ready)))
        .chain(
            rp.containers
                .iter()
                .map(|c| (c.id.as_str(), c.state as u8 + 2)),
        )
        .collect();
    crate::sort::sort(&mut fp);
    fp
}

/// A sandbox's or container's stage, for [`is_behind`]: states only move forward (a
/// sandbox Ready → NotReady; a container Created → Running → Exited). `Unknown` is
/// [`STAGE_UNKNOWN`], which orders against nothing.
fn sandbox_stage(state: SandboxState) -> u8 {
    match state {
        SandboxState::Ready => 0,
        SandboxState::NotReady => 1,
    }
}

fn container_stage(state: ContainerState) -> u8 {
    match state {
        ContainerState::Created => 0,
        ContainerState::Running => 1,
        ContainerState::Exited => 2,
        ContainerState::Unknown => STAGE_UNKNOWN,
    }
}

const STAGE_UNKNOWN: u8 = u8::MAX;

/// What a relist saw of one pod: each sandbox's and container's id and stage (kept only
/// while a change it showed is pending, see [`is_behind`]).
pub(crate) type SeenView = Box<[(Box<str>, u8)]>;

pub(crate) fn seen_view(rp: &PodRuntimeStatus) -> SeenView {
    rp.sandboxes
        .iter()
        .map(|s| (s.id.as_str().into(), sandbox_stage(s.state)))
        .chain(
            rp.containers
                .iter()
                .map(|c| (c.id.as_str().into(), container_stage(c.state))),
        )
        .collect()
}

/// Whether a relist's view of a pod is older than a view read by a sync (the pod cache):
/// every sandbox and container the relist saw is in `cached` at the same or a later stage.
/// A relist that began before a sync ended can list the pod halfway through that sync (the
/// sandbox there, its container not started yet); that is not a change to read the pod
/// again for (kubelet: the cache is only replaced by a newer status, `GetNewerThan`).
///
/// What the relist did not see is not judged (created after it listed, or removed before):
/// a caller that trusts the cache on a `true` has the next relist compare the pod again.
pub(crate) fn is_behind(seen: &[(Box<str>, u8)], cached: &PodRuntimeStatus) -> bool {
    let cached_stage = |id: &str| {
        cached
            .sandboxes
            .iter()
            .find(|s| s.id == id)
            .map(|s| sandbox_stage(s.state))
            .or_else(|| {
                cached
                    .containers
                    .iter()
                    .find(|c| c.id == id)
                    .map(|c| container_stage(c.state))
            })
    };
    seen.iter().all(|(id, stage)| match cached_stage(id) {
        Some(c) => *stage == c || (*stage < c && c != STAGE_UNKNOWN),
        None => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cri::{ContainerInfo, ContainerState, Sandbox};
    use std::collections::BTreeMap;

    fn sandbox(id: &str, uid: &str, state: SandboxState) -> Sandbox {
        Sandbox {
            id: id.into(),
            name: "web".into(),
            namespace: "default".into(),
            uid: uid.into(),
            attempt: 0,
            state,
            created_at: 10,
            labels: [("io.kubernetes.pod.uid".to_string(), uid.to_string())].into(),
            annotations: Default::default(),
            ip: None,
            network: None,
        }
    }

    fn container(id: &str, sandbox_id: &str, state: ContainerState, at: i64) -> ContainerInfo {
        ContainerInfo {
            id: id.into(),
            sandbox_id: sandbox_id.into(),
            name: "app".into(),
            state,
            created_at: at,
            ..ContainerInfo::default()
        }
    }

    fn event(
        id: &str,
        kind: ContainerEventKind,
        sandbox: Option<Sandbox>,
        containers: Vec<ContainerInfo>,
    ) -> ContainerEvent {
        ContainerEvent {
            container_id: id.into(),
            kind,
            created_at: 0,
            sandbox,
            containers,
        }
    }

    /// A view as picolet's own objects give it: identity labels on both, the pod's own
    /// labels and annotations on the sandbox, the contract's annotations on the container.
    fn labelled_view() -> PodRuntimeStatus {
        use crate::kuberuntime::labels::*;
        let identity = |extra: &[(&str, &str)]| -> BTreeMap<String, String> {
            [
                (POD_UID_LABEL, "u1"),
                (POD_NAME_LABEL, "web"),
                (POD_NAMESPACE_LABEL, "default"),
            ]
            .iter()
            .chain(extra)
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
        };
        let mut s = sandbox("s0", "u1", SandboxState::Ready);
        s.labels = identity(&[("app", "web")]);
        s.annotations = identity(&[("kubernetes.io/config.source", "file")]);
        let mut c = container("c0", "s0", ContainerState::Running, 11);
        c.labels = identity(&[(CONTAINER_NAME_LABEL, "app")]);
        c.annotations = [
            (CONTAINER_HASH_ANNOTATION, "abc"),
            (CONTAINER_RESTART_COUNT_ANNOTATION, "2"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .into();
        let mut p = PodRuntimeStatus {
            uid: "u1".into(),
            sandboxes: Vec::with_capacity(8),
            containers: vec![c],
            ..PodRuntimeStatus::default()
        };
        p.sandboxes.push(s);
        sync::regroup(&mut p);
        p
    }

    /// What the readers of a held view read from it.
    fn as_read(p: &PodRuntimeStatus) -> impl PartialEq + std::fmt::Debug + use<> {
        use crate::kuberuntime::labels;
        let mut copy = p.clone();
        sync::regroup(&mut copy);
        (
            (copy.uid, copy.name, copy.namespace),
            p.sandboxes
                .iter()
                .map(|s| {
                    let i = labels::sandbox_info(s);
                    (
                        s.id.clone(),
                        s.state,
                        s.created_at,
                        i.pod_uid,
                        i.pod_name,
                        i.pod_namespace,
                    )
                })
                .collect::<Vec<_>>(),
            p.containers
                .iter()
                .map(|c| {
                    (
                        c.id.clone(),
                        c.state,
                        labels::container_name(c).to_string(),
                        labels::container_annotation_info(c),
                    )
                })
                .collect::<Vec<_>>(),
            fingerprint(p)
                .into_iter()
                .map(|(id, st)| (id.to_string(), st))
                .collect::<Vec<_>>(),
        )
    }

    #[test]
    fn a_compacted_view_reads_the_same_without_its_maps() {
        let full = labelled_view();
        let mut compacted = full.clone();
        compact(&mut compacted);
        assert_eq!(as_read(&compacted), as_read(&full));
        let s = &compacted.sandboxes[0];
        assert!(s.labels.is_empty() && s.annotations.is_empty());
        let c = &compacted.containers[0];
        assert!(c.labels.is_empty());
        assert_eq!(c.annotations, full.containers[0].annotations);
        assert_eq!(compacted.sandboxes.capacity(), 1);
        // Compacting again changes nothing.
        let again = {
            let mut a = compacted.clone();
            compact(&mut a);
            a
        };
        assert_eq!(again, compacted);
    }

    #[test]
    fn compacting_keeps_labels_that_say_more_than_the_fields() {
        use crate::kuberuntime::labels::*;
        // A sandbox whose name label differs from its metadata name keeps its labels.
        let mut p = labelled_view();
        p.sandboxes[0].name = "other".into();
        let before = as_read(&p);
        compact(&mut p);
        assert_eq!(as_read(&p), before);
        assert!(!p.sandboxes[0].labels.is_empty());
        // A container named otherwise in its label than in its metadata keeps them.
        let mut p = labelled_view();
        p.containers[0].name = "app-0".into();
        let before = as_read(&p);
        compact(&mut p);
        assert_eq!(as_read(&p), before);
        assert!(!p.containers[0].labels.is_empty());
        // No sandbox names the pod: the containers' identity labels are what name it.
        let mut p = labelled_view();
        p.sandboxes.clear();
        let before = as_read(&p);
        compact(&mut p);
        assert_eq!(as_read(&p), before);
        assert_eq!(
            p.containers[0]
                .labels
                .get(POD_NAME_LABEL)
                .map(String::as_str),
            Some("web")
        );
        // A label picolet does not write stays.
        let mut p = labelled_view();
        p.containers[0].labels.insert("team".into(), "x".into());
        compact(&mut p);
        assert!(p.containers[0].labels.contains_key("team"));
    }

    #[test]
    fn an_event_replaces_its_sandbox_and_its_containers_only() {
        let mut pods = HashMap::new();
        // An older sandbox of the pod with a dead container stays untouched.
        let old = event(
            "s0",
            ContainerEventKind::Stopped,
            Some(sandbox("s0", "u1", SandboxState::NotReady)),
            vec![container("c0", "s0", ContainerState::Exited, 11)],
        );
        assert_eq!(
            apply_event(&mut pods, &old),
            Some(("u1".into(), Applied::Changed))
        );
        let mut s1 = sandbox("s1", "u1", SandboxState::Ready);
        s1.created_at = 20;
        let started = event(
            "c1",
            ContainerEventKind::Started,
            Some(s1.clone()),
            vec![container("c1", "s1", ContainerState::Running, 21)],
        );
        apply_event(&mut pods, &started);
        let before = fingerprint(&pods["u1"]).len();
        assert_eq!(before, 4);
        let exited = event(
            "c1",
            ContainerEventKind::Stopped,
            Some(s1),
            vec![container("c1", "s1", ContainerState::Exited, 21)],
        );
        assert_eq!(
            apply_event(&mut pods, &exited),
            Some(("u1".into(), Applied::Changed))
        );
        // The same again (a duplicate after a reconnect) changes nothing.
        assert_eq!(
            apply_event(&mut pods, &exited),
            Some(("u1".into(), Applied::Unchanged))
        );
        let pod = &pods["u1"];
        assert_eq!(pod.name, "web");
        assert_eq!(pod.sandboxes[0].id, "s1", "newest first");
        assert_eq!(pod.containers[0].state, ContainerState::Exited);
        assert_eq!(pod.containers[1].id, "c0");
    }

    #[test]
    fn a_removed_sandbox_without_status_leaves_the_view() {
        let mut pods = HashMap::new();
        let s0 = sandbox("s0", "u1", SandboxState::NotReady);
        let e = event(
            "c0",
            ContainerEventKind::Stopped,
            Some(s0),
            vec![container("c0", "s0", ContainerState::Exited, 11)],
        );
        apply_event(&mut pods, &e);
        // A container event without a sandbox status: known pod, view not exact.
        let e = event("c0", ContainerEventKind::Stopped, None, vec![]);
        assert_eq!(
            apply_event(&mut pods, &e),
            Some(("u1".into(), Applied::Unknown))
        );
        let e = event("s0", ContainerEventKind::Deleted, None, vec![]);
        assert_eq!(
            apply_event(&mut pods, &e),
            Some(("u1".into(), Applied::Changed))
        );
        assert!(pods.is_empty(), "{pods:?}");
        // Unknown ids concern no pod.
        let e = event("zz", ContainerEventKind::Deleted, None, vec![]);
        assert_eq!(apply_event(&mut pods, &e), None);
    }

    #[test]
    fn back_off_doubles_up_to_its_cap() {
        let mut a = Attempts::default();
        let waits: Vec<Duration> = (0..8)
            .map(|_| {
                a.in_a_row += 1;
                a.backoff()
            })
            .collect();
        let secs: Vec<u64> = waits.iter().map(Duration::as_secs).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 30, 30, 30]);
    }

    #[test]
    fn is_behind_table() {
        use ContainerState::{Created, Exited, Running, Unknown};
        use SandboxState::{NotReady, Ready};
        let pod = |sb: Option<SandboxState>, cs: &[(&str, ContainerState)]| PodRuntimeStatus {
            uid: "u".into(),
            sandboxes: sb.map(|st| sandbox("s1", "u", st)).into_iter().collect(),
            containers: cs
                .iter()
                .map(|(id, st)| container(id, "s1", *st, 0))
                .collect(),
            ..Default::default()
        };
        let running = pod(Some(Ready), &[("c1", Running)]);
        let cases: &[(&str, PodRuntimeStatus, &PodRuntimeStatus, bool)] = &[
            ("the same view", running.clone(), &running, true),
            (
                "only the sandbox listed yet",
                pod(Some(Ready), &[]),
                &running,
                true,
            ),
            (
                "the container not started yet",
                pod(Some(Ready), &[("c1", Created)]),
                &running,
                true,
            ),
            ("the pod not listed at all", pod(None, &[]), &running, true),
            (
                "the container exited since",
                pod(Some(Ready), &[("c1", Exited)]),
                &running,
                false,
            ),
            (
                "the sandbox died since",
                pod(Some(NotReady), &[("c1", Running)]),
                &running,
                false,
            ),
            (
                "a container the cache lacks",
                pod(Some(Ready), &[("c1", Running), ("c2", Running)]),
                &running,
                false,
            ),
            (
                "unknown against running",
                pod(Some(Ready), &[("c1", Unknown)]),
                &running,
                false,
            ),
            (
                "created against unknown",
                pod(Some(Ready), &[("c1", Created)]),
                &pod(Some(Ready), &[("c1", Unknown)]),
                false,
            ),
            (
                "unknown against unknown",
                pod(Some(Ready), &[("c1", Unknown)]),
                &pod(Some(Ready), &[("c1", Unknown)]),
                true,
            ),
            (
                "exited against exited",
                pod(Some(NotReady), &[("c1", Exited)]),
                &pod(Some(NotReady), &[("c1", Exited)]),
                true,
            ),
        ];
        for (what, seen, cached, want) in cases {
            assert_eq!(is_behind(&seen_view(seen), cached), *want, "{what}");
        }
    }
}
