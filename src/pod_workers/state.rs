//! The per-pod lifecycle state machine (kubelet: `pkg/kubelet/pod_workers.go`).
//!
//! Pure: no tokio, no I/O, no clock. Callers feed it inputs — an update from the config
//! loop ([`WorkerStates::update_pod`]), the end of a piece of work
//! ([`WorkerStates::complete`]), a fired requeue timer ([`WorkerStates::resync`]),
//! housekeeping ([`WorkerStates::sync_known_pods`]) — and it answers with [`Effect`]s that
//! `pod_workers/mod.rs` executes: start a piece of work, cancel the one in flight, arm a
//! requeue timer, forget a UID.
//!
//! # Lifecycle
//!
//! Every pod UID the kubelet hears of gets one worker. A worker moves through three
//! states and then finishes; it never moves backwards:
//!
//! ```text
//!            create/update/sync                 kill, deletionTimestamp,
//!          ┌──────────────────┐                 terminal phase (update or sync result)
//!          ▼                  │
//!   ──▶ SyncPod ──────────────┴──────────────────────────▶ TerminatingPod
//!       work: SyncPod (set the pod up, start and         work: SyncTerminatingPod
//!       restart containers); resync every 60–90 s        (stop every container and the
//!                                                        sandbox with the grace period)
//!                                                                 │ succeeded
//!                                                                 ▼
//!   forgotten ◀── sync_known_pods ◀── finished ◀─succeeded── TerminatedPod
//!   (UID not desired any more,                              work: SyncTerminatedPod
//!    or re-created with the same UID)                       (volumes, directories, final
//!                                                            status)
//! ```
//!
//! The state names the *kind* of work the worker does next. A worker whose pod is only
//! known from the runtime (found after an agent restart, or orphaned — there is no spec to
//! sync) is born terminating: a kill with no pod goes straight to TerminatingPod.
//!
//! # Invariants
//!
//! 1. **One piece of work in flight per UID.** An update that arrives while work runs is
//!    kept as the *pending* update and replaces any earlier pending one: latest wins. The
//!    pod spec itself is always the latest one seen; the pending slot only records that
//!    work is owed and of which update type.
//! 2. **Termination is sticky; a kill is never dropped.** Termination starts on a kill
//!    (the source removed the pod, housekeeping, eviction), a `deletionTimestamp`, a
//!    terminal `status.phase` in the update, or a SyncPod reporting the pod terminal. The
//!    request is recorded in the state at once, so a later update (even one that replaces
//!    the pending kill) cannot undo it; a UID never returns to SyncPod.
//! 3. **The grace period only shrinks.** At the start of termination it is the smaller of
//!    `deletionGracePeriodSeconds` and the kill's override if either is given, otherwise
//!    `spec.terminationGracePeriodSeconds` (default 30 s; 1 s for a runtime-only pod, which
//!    has no spec). Later values count only if smaller. Never below 1 s
//!    (kubelet: `calculateEffectiveGracePeriod`).
//! 4. **Cancellation.** Becoming terminating cancels an in-flight SyncPod; a shrinking
//!    grace period cancels an in-flight SyncTerminatingPod, which then runs again with
//!    the shorter grace. Cancelled work reports back like any other; the next work starts
//!    when it has.
//! 5. **Static pods start one full name at a time** (kubelet: `allowStaticPodStart`). A
//!    static pod (annotation `kubernetes.io/config.source` other than `api`) may not run
//!    SyncPod while another UID with the same `namespace/name` has started and not yet
//!    finished — i.e. until the old UID's SyncTerminatedPod succeeded. Editing a manifest
//!    changes the UID, so without this the new pod would start next to the old one
//!    (k8s#52939, k8s#104648). Waiting UIDs start in arrival order, as soon as the name is
//!    released (no polling). A static pod terminated before it ever started finishes
//!    without doing any work (kubelet: `cleanupUnstartedPod`) — unless its UID was also
//!    seen in the runtime, in which case it runs SyncTerminatingPod to stop what is there.
//! 6. **Requeue after work.** A state change (terminal sync, terminating → terminated) or
//!    a pending update starts the next work at once. Otherwise: success → resync in
//!    60 s, jittered up to 90 s; failure → retry in 10 s, jittered up to 15 s; failure
//!    because the pod network is not ready → 1 s (up to 1.5 s) (kubelet: `completeWork`).
//!    The jitter is deterministic (a hash of the UID and a counter): tests reproduce it.
//! 7. **Finished workers are remembered** so a terminated UID is not restarted by the next
//!    update from the source; [`WorkerStates::sync_known_pods`] forgets them once the UID
//!    is no longer desired, or once a create arrived for the same UID after termination
//!    began (a static pod with a fixed UID that was removed and put back) — the caller
//!    then re-sends that pod as a create. An orphan (not desired, never told to stop) is
//!    driven to termination by housekeeping itself.
//!
//! Deliberate differences from upstream: a runtime-only pod also runs
//! SyncTerminatedPod (with no pod) so the agent can clean up by UID, and a static pod
//! waiting for its full name is started when the name is released instead of being
//! polled every 10 s.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use crate::api::Pod;

/// `spec.terminationGracePeriodSeconds` when the pod does not say.
pub(crate) const DEFAULT_TERMINATION_GRACE_SECS: i64 = 30;
/// The worker never asks for less (kubelet: `calculateEffectiveGracePeriod`).
pub(crate) const MIN_GRACE_SECS: i64 = 1;
/// Grace for a pod known only from the runtime (kubelet: `SyncTerminatingRuntimePod`).
pub(crate) const RUNTIME_POD_GRACE_SECS: i64 = 1;
/// Resync after a successful SyncPod (kubelet: `--sync-frequency`, 1 min).
pub(crate) const RESYNC_INTERVAL: Duration = Duration::from_secs(60);
/// Retry after failed work (kubelet: `backOffPeriod`).
pub(crate) const BACKOFF_PERIOD: Duration = Duration::from_secs(10);
/// Retry when the pod network is not ready yet (kubelet: `backOffOnTransientErrorPeriod`).
pub(crate) const NETWORK_NOT_READY_BACKOFF: Duration = Duration::from_secs(1);
/// Every requeue delay is stretched by up to this many permille (kubelet: jitter 0.5).
const JITTER_MAX_PERMILLE: u32 = 500;

/// Why the config loop calls (kubelet: `kubetypes.SyncPodType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum UpdateType {
    /// The pod is new to the sources.
    Create,
    /// The pod changed.
    Update,
    /// Periodic resync, nothing changed.
    Sync,
    /// Stop the pod.
    Kill,
}

/// One update for one pod UID (kubelet: `UpdatePodOptions`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct UpdatePodOptions {
    pub update_type: UpdateType,
    /// The pod; `None` for a pod known only from the runtime, which can only be killed.
    pub pod: Option<Arc<Pod>>,
    /// The pod's UID (taken from `pod` when it is set).
    pub uid: String,
    /// A shorter grace period for this kill (kubelet:
    /// `PodTerminationGracePeriodSecondsOverride`); ignored unless the pod is terminating.
    pub kill_grace_override: Option<i64>,
}

impl UpdatePodOptions {
    /// A create, update or sync for `pod`.
    pub(crate) fn new(update_type: UpdateType, pod: Arc<Pod>) -> Self {
        UpdatePodOptions {
            update_type,
            uid: pod.uid().to_string(),
            pod: Some(pod),
            kill_grace_override: None,
        }
    }

    /// Kill `pod` (e.g. removed from its source).
    pub(crate) fn kill(pod: Arc<Pod>, grace_override: Option<i64>) -> Self {
        UpdatePodOptions {
            kill_grace_override: grace_override,
            ..Self::new(UpdateType::Kill, pod)
        }
    }

    /// Kill a pod found only in the runtime (kubelet: `RunningPod` without `Pod`).
    pub(crate) fn kill_runtime_pod(uid: impl Into<String>, grace_override: Option<i64>) -> Self {
        UpdatePodOptions {
            update_type: UpdateType::Kill,
            pod: None,
            uid: uid.into(),
            kill_grace_override: grace_override,
        }
    }
}

/// Where a worker is in its lifecycle (kubelet: `PodWorkerState` + `finished`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum PodWorkerState {
    /// The pod should be running: SyncPod sets it up and restarts containers.
    SyncPod,
    /// Termination was requested: SyncTerminatingPod stops its containers.
    TerminatingPod,
    /// Nothing runs any more: SyncTerminatedPod cleans up.
    TerminatedPod,
    /// SyncTerminatedPod succeeded; the UID ignores updates until forgotten.
    Finished,
}

/// The kind of a piece of work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum WorkKind {
    Sync,
    Terminating,
    Terminated,
}

/// A piece of work for the pod syncer, with everything it needs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Work {
    Sync {
        update_type: UpdateType,
        pod: Arc<Pod>,
    },
    /// `pod` is `None` for a runtime-only pod.
    Terminating {
        pod: Option<Arc<Pod>>,
        grace_secs: i64,
    },
    Terminated {
        pod: Option<Arc<Pod>>,
    },
}

impl Work {
    pub(crate) fn kind(&self) -> WorkKind {
        match self {
            Work::Sync { .. } => WorkKind::Sync,
            Work::Terminating { .. } => WorkKind::Terminating,
            Work::Terminated { .. } => WorkKind::Terminated,
        }
    }
}

/// How a piece of work ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// It succeeded; for a SyncPod, `terminal` says the pod reached Succeeded/Failed.
    Succeeded { terminal: bool },
    /// It stopped early because it was cancelled.
    Cancelled,
    /// It failed and will be retried.
    Failed { network_not_ready: bool },
}

/// What the scheduler must do.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Effect {
    /// Start `work` for `uid` (nothing else is in flight for it). Supersedes any requeue
    /// timer armed for `uid`.
    StartWork { uid: String, work: Work },
    /// Cancel the work in flight for `uid`; it still reports back through `complete`.
    Cancel { uid: String },
    /// Call [`WorkerStates::resync`] for `uid` after `after` (replaces an earlier timer).
    Requeue { uid: String, after: Duration },
    /// `uid` has no worker any more: drop its timer.
    Forget { uid: String },
}

#[derive(Debug, Clone, Copy)]
struct InFlight {
    kind: WorkKind,
    cancelled: bool,
}

#[derive(Debug)]
struct Worker {
    state: PodWorkerState,
    /// The latest pod seen; `None` only for a runtime-only pod.
    pod: Option<Arc<Pod>>,
    full_name: Option<String>,
    is_static: bool,
    /// Work is owed, with the latest update type (latest wins).
    pending: Option<UpdateType>,
    in_flight: Option<InFlight>,
    /// Some work has run for this UID (kubelet: `startedAt` set).
    started: bool,
    /// The effective grace period once termination was requested.
    grace: Option<i64>,
    /// A runtime-only kill arrived: containers may exist even if we never started any.
    observed_runtime: bool,
    /// A create arrived after termination began (kubelet: `restartRequested`).
    restart_requested: bool,
}

/// All workers, by UID, plus the static-pod full-name bookkeeping.
#[derive(Debug, Default)]
pub(crate) struct WorkerStates {
    workers: HashMap<String, Worker>,
    /// full name → the static pod UID that holds it (kubelet:
    /// `startedStaticPodsByFullname`).
    started_static: HashMap<String, String>,
    /// full name → static pod UIDs waiting to start, in arrival order (kubelet:
    /// `waitingToStartStaticPodsByFullname`).
    waiting_static: HashMap<String, VecDeque<String>>,
    /// Counts requeues; seeds the jitter.
    requeues: u64,
    /// `--sync-frequency`; `None`: [`RESYNC_INTERVAL`].
    resync_interval: Option<Duration>,
}

/// The grace period after a (further) termination request, and whether it shortened the
/// current one (kubelet: `calculateEffectiveGracePeriod`).
pub(crate) fn effective_grace(
    current: Option<i64>,
    pod: Option<&Pod>,
    kill_override: Option<i64>,
) -> (i64, bool) {
    let mut grace = current;
    let candidates = [
        pod.and_then(|p| p.metadata.deletion_grace_period_seconds),
        kill_override,
    ];
    for candidate in candidates.into_iter().flatten() {
        if grace.is_none_or(|g| candidate < g) {
            grace = Some(candidate);
        }
    }
    let grace = grace
        .unwrap_or_else(|| match pod {
            Some(p) => p
                .spec
                .termination_grace_period_seconds
                .unwrap_or(DEFAULT_TERMINATION_GRACE_SECS),
            None => RUNTIME_POD_GRACE_SECS,
        })
        .max(MIN_GRACE_SECS);
    (grace, current.is_some_and(|c| c != grace))
}

/// The pod itself says it must stop: deleted, or in a terminal phase.
fn pod_requests_termination(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
        || pod
            .status
            .as_ref()
            .and_then(|s| s.phase)
            .is_some_and(|p| p.is_terminal())
}

/// The UID an update is for: the pod's own when it carries one (a mismatch is logged);
/// `None` when the update is ignored (a runtime-only pod can only be killed).
fn update_uid(pod: Option<&Pod>, uid: String, update_type: UpdateType) -> Option<String> {
    if let Some(p) = pod {
        if p.uid() != uid {
            log::warn!(
                "pod worker: update for uid {uid} carries pod {} with uid {}; using the \
                 pod's",
                p.full_name(),
                p.uid()
            );
            return Some(p.uid().to_string());
        }
    } else if update_type != UpdateType::Kill {
        log::debug!(
            "pod worker {uid}: {update_type:?} ignored, a runtime-only pod can only be killed"
        );
        return None;
    }
    Some(uid)
}

impl Worker {
    /// Whether the worker's state ignores this update (a create while terminating only
    /// asks for a restart once finished).
    fn ignores(
        &mut self,
        uid: &str,
        first_time: bool,
        update_type: UpdateType,
        has_pod: bool,
    ) -> bool {
        // Finished --any update--> Finished (a create marks a restart for housekeeping)
        // TerminatingPod/TerminatedPod --create--> unchanged, restart requested
        if !first_time && self.state != PodWorkerState::SyncPod && update_type == UpdateType::Create
        {
            log::debug!("pod worker {uid}: create while terminating; restart after it finished");
            self.restart_requested = true;
            return true;
        }
        if self.state == PodWorkerState::Finished {
            log::debug!("pod worker {uid}: finished, {update_type:?} ignored");
            return true;
        }
        // TerminatedPod --runtime-only kill--> ignored: its containers are known stopped;
        // a stale runtime listing must not re-trigger cleanup (kubelet: UpdatePod).
        if !has_pod && self.state == PodWorkerState::TerminatedPod {
            log::debug!("pod worker {uid}: already terminated, runtime-only kill ignored");
            return true;
        }
        false
    }

    /// The termination arrows of an update: whether the worker became terminating now,
    /// and whether a kill shortened its grace period.
    fn request_termination(
        &mut self,
        uid: &str,
        update_type: UpdateType,
        kill_grace_override: Option<i64>,
    ) -> (bool, bool) {
        // SyncPod --kill | deletionTimestamp | terminal phase--> TerminatingPod
        let mut became_terminating = false;
        if self.state == PodWorkerState::SyncPod
            && (update_type == UpdateType::Kill
                || self.pod.as_deref().is_some_and(pod_requests_termination))
        {
            log::info!(
                "pod worker {uid} ({}): termination requested ({update_type:?})",
                self.full_name.as_deref().unwrap_or("runtime-only")
            );
            self.state = PodWorkerState::TerminatingPod;
            became_terminating = true;
        }
        // TerminatingPod --kill with a shorter grace--> TerminatingPod (grace shrinks)
        let mut shortened = false;
        if self.state == PodWorkerState::TerminatingPod {
            let (grace, s) = effective_grace(self.grace, self.pod.as_deref(), kill_grace_override);
            self.grace = Some(grace);
            shortened = s;
        }
        (became_terminating, shortened)
    }
}

impl WorkerStates {
    /// Gives back the table space a burst of pods left (see [`crate::mem_trim`]).
    pub(crate) fn compact(&mut self) {
        use crate::mem_trim::ShrinkSparse;
        self.workers.shrink_sparse();
        self.started_static.shrink_sparse();
        self.waiting_static.shrink_sparse();
    }
}

impl WorkerStates {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// The periodic resync after a successful SyncPod (kubelet: `--sync-frequency`).
    #[must_use]
    pub(crate) fn with_resync_interval(mut self, every: Duration) -> Self {
        self.resync_interval = Some(every);
        self
    }

    /// kubelet: `UpdatePod`. Records the update and starts work if the worker is idle.
    pub(crate) fn update_pod(&mut self, opts: UpdatePodOptions) -> Vec<Effect> {
        let mut out = Vec::new();
        let UpdatePodOptions {
            update_type,
            pod,
            uid,
            kill_grace_override,
        } = opts;
        let Some(uid) = update_uid(pod.as_deref(), uid, update_type) else {
            return out;
        };
        let first_time = self.ensure_worker(&uid, pod.as_deref());
        let Some(w) = self.workers.get_mut(&uid) else {
            return out;
        };
        if w.ignores(&uid, first_time, update_type, pod.is_some()) {
            return out;
        }
        match pod {
            Some(p) => {
                if w.full_name.is_none() {
                    w.full_name = Some(p.full_name());
                }
                w.pod = Some(p);
            }
            None => w.observed_runtime = true,
        }
        let (became_terminating, shortened) =
            w.request_termination(&uid, update_type, kill_grace_override);

        w.pending = Some(update_type);
        match &mut w.in_flight {
            Some(flight) => {
                let cancel = (became_terminating && flight.kind == WorkKind::Sync)
                    || (shortened && flight.kind == WorkKind::Terminating);
                if cancel && !flight.cancelled {
                    flight.cancelled = true;
                    out.push(Effect::Cancel { uid });
                }
            }
            None => self.start_next(&uid, &mut out),
        }
        out
    }

    /// A worker for `uid`, created in `SyncPod` on its first update (a static pod also
    /// queues for its full name); whether it was created now.
    fn ensure_worker(&mut self, uid: &str, pod: Option<&Pod>) -> bool {
        if self.workers.contains_key(uid) {
            return false;
        }
        let full_name = pod.map(|p| p.full_name());
        let is_static = pod.is_some_and(|p| p.is_static());
        if let (true, Some(name)) = (is_static, &full_name) {
            self.waiting_static
                .entry(name.clone())
                .or_default()
                .push_back(uid.to_string());
        }
        self.workers.insert(
            uid.to_string(),
            Worker {
                state: PodWorkerState::SyncPod,
                pod: None,
                full_name,
                is_static,
                pending: None,
                in_flight: None,
                started: false,
                grace: None,
                observed_runtime: false,
                restart_requested: false,
            },
        );
        true
    }

    #[cfg(test)]
    /// kubelet: the tail of `podWorkerLoop` — `completeSync`, `completeTerminating`,
    /// `completeTerminated`, `completeWork`. The work in flight for `uid` ended.
    pub(crate) fn complete(&mut self, uid: &str, outcome: Outcome) -> Vec<Effect> {
        self.complete_with_hint(uid, outcome, None)
    }

    /// As [`complete`](Self::complete), with the sync's own wish for the next resync: a
    /// container waiting out a crash-loop or image-pull back-off asks to be synced again
    /// when its back-off ends, not at the next periodic resync (kubelet gets the same effect
    /// from reporting the back-off as a sync error and from PLEG events).
    pub(crate) fn complete_with_hint(
        &mut self,
        uid: &str,
        outcome: Outcome,
        requeue_hint: Option<Duration>,
    ) -> Vec<Effect> {
        let mut out = Vec::new();
        let Some(w) = self.workers.get_mut(uid) else {
            log::warn!("pod worker {uid}: completion for an unknown worker ignored");
            return out;
        };
        let Some(flight) = w.in_flight.take() else {
            log::warn!("pod worker {uid}: completion without work in flight ignored");
            return out;
        };
        match (flight.kind, outcome) {
            // SyncPod --sync reports terminal--> TerminatingPod
            // (if termination was requested meanwhile, it already is terminating)
            (WorkKind::Sync, Outcome::Succeeded { terminal: true })
                if w.state == PodWorkerState::SyncPod =>
            {
                log::info!("pod worker {uid}: pod reached a terminal phase, terminating");
                w.state = PodWorkerState::TerminatingPod;
                w.grace = Some(effective_grace(w.grace, w.pod.as_deref(), None).0);
            }
            // TerminatingPod --succeeded--> TerminatedPod
            (WorkKind::Terminating, Outcome::Succeeded { .. }) => {
                w.state = PodWorkerState::TerminatedPod;
            }
            // TerminatedPod --succeeded--> Finished
            (WorkKind::Terminated, Outcome::Succeeded { .. }) => {
                self.finish(uid, &mut out);
                return out;
            }
            _ => {}
        }
        let next_kind = match w.state {
            PodWorkerState::SyncPod => WorkKind::Sync,
            PodWorkerState::TerminatingPod => WorkKind::Terminating,
            PodWorkerState::TerminatedPod => WorkKind::Terminated,
            PodWorkerState::Finished => return out,
        };
        // A state change, a pending update or a cancellation: go on at once.
        if w.pending.is_some() || next_kind != flight.kind || outcome == Outcome::Cancelled {
            self.start_next(uid, &mut out);
            return out;
        }
        let base = match outcome {
            Outcome::Succeeded { .. } => self.resync_interval.unwrap_or(RESYNC_INTERVAL),
            Outcome::Failed {
                network_not_ready: true,
            } => NETWORK_NOT_READY_BACKOFF,
            Outcome::Failed { .. } | Outcome::Cancelled => BACKOFF_PERIOD,
        };
        let after = match (outcome, requeue_hint) {
            // SyncPod --succeeded, waiting out a back-off--> requeue when it ends
            (Outcome::Succeeded { .. }, Some(hint)) if hint < base => hint,
            _ => self.jitter(uid, base),
        };
        out.push(Effect::Requeue {
            uid: uid.to_string(),
            after,
        });
        out
    }

    /// A requeue timer fired: redo the work the state calls for (as a `Sync` update).
    pub(crate) fn resync(&mut self, uid: &str) -> Vec<Effect> {
        let mut out = Vec::new();
        let Some(w) = self.workers.get_mut(uid) else {
            return out;
        };
        if w.state == PodWorkerState::Finished {
            return out;
        }
        if w.pending.is_none() {
            w.pending = Some(UpdateType::Sync);
        }
        if w.in_flight.is_none() {
            self.start_next(uid, &mut out);
        }
        out
    }

    /// kubelet: `SyncKnownPods` + `removeTerminatedWorker`. `desired` holds the UIDs the
    /// sources still want. Forgets finished workers that are not desired (or whose UID
    /// was re-created: the caller must then re-send that pod as a create), forgets
    /// never-started workers that are not desired, and starts terminating workers that
    /// are not desired but were never told to stop.
    pub(crate) fn sync_known_pods(&mut self, desired: impl Fn(&str) -> bool) -> Vec<Effect> {
        let mut out = Vec::new();
        // Only the workers with something to do, in UID order: at idle (every worker
        // desired, no restart requested) nothing is copied or sorted. Nothing below sets
        // `restart_requested` or changes what is desired, so choosing them first is the
        // same as checking each in turn.
        let mut uids: Vec<String> = self
            .workers
            .iter()
            .filter(|(uid, w)| w.restart_requested || !desired(uid))
            .map(|(uid, _)| uid.clone())
            .collect();
        crate::sort::sort(&mut uids);
        for uid in uids {
            let Some(w) = self.workers.get_mut(&uid) else {
                continue;
            };
            let orphan = !desired(&uid);
            // Finished --sync_known_pods (not desired, or restart requested)--> forgotten
            if w.state == PodWorkerState::Finished {
                self.forget(&uid, &mut out);
                continue;
            }
            if !orphan {
                // Restart requested, but the old incarnation is still stopping.
                continue;
            }
            // SyncPod (never started, e.g. a waiting static pod) --orphaned--> forgotten
            if !w.started && !w.observed_runtime && w.in_flight.is_none() {
                log::debug!("pod worker {uid}: orphaned before it started; forgotten");
                self.forget(&uid, &mut out);
                continue;
            }
            // SyncPod --orphaned--> TerminatingPod
            if w.state == PodWorkerState::SyncPod {
                log::info!("pod worker {uid}: no source wants it any more; terminating");
                w.state = PodWorkerState::TerminatingPod;
                w.grace = Some(effective_grace(w.grace, w.pod.as_deref(), None).0);
                w.pending = Some(UpdateType::Kill);
                match &mut w.in_flight {
                    Some(flight) => {
                        if !flight.cancelled {
                            flight.cancelled = true;
                            out.push(Effect::Cancel { uid: uid.clone() });
                        }
                    }
                    None => self.start_next(&uid, &mut out),
                }
            }
            // TerminatingPod / TerminatedPod orphans retry on their own requeue timers.
        }
        out
    }

    // ----- queries -------------------------------------------------------------------

    pub(crate) fn state(&self, uid: &str) -> Option<PodWorkerState> {
        self.workers.get(uid).map(|w| w.state)
    }

    pub(crate) fn is_known(&self, uid: &str) -> bool {
        self.workers.contains_key(uid)
    }

    /// Termination was requested and has not finished: containers may still run
    /// (TerminatingPod) or cleanup is pending (TerminatedPod).
    pub(crate) fn is_terminating(&self, uid: &str) -> bool {
        matches!(
            self.state(uid),
            Some(PodWorkerState::TerminatingPod | PodWorkerState::TerminatedPod)
        )
    }

    pub(crate) fn is_finished(&self, uid: &str) -> bool {
        self.state(uid) == Some(PodWorkerState::Finished)
    }

    #[cfg(test)]
    /// Containers of this UID may be running (kubelet: `CouldHaveRunningContainers`).
    pub(crate) fn could_have_running_containers(&self, uid: &str) -> bool {
        matches!(
            self.state(uid),
            Some(PodWorkerState::SyncPod | PodWorkerState::TerminatingPod)
        )
    }

    #[cfg(test)]
    /// A static pod waiting for another UID with its full name to finish.
    pub(crate) fn is_waiting_to_start(&self, uid: &str) -> bool {
        self.workers.get(uid).is_some_and(|w| {
            w.state == PodWorkerState::SyncPod && !w.started && w.pending.is_some()
        })
    }

    #[cfg(test)]
    /// The kind of work in flight for `uid`.
    pub(crate) fn work_in_flight(&self, uid: &str) -> Option<WorkKind> {
        self.workers
            .get(uid)
            .and_then(|w| w.in_flight.map(|f| f.kind))
    }

    #[cfg(test)]
    /// The effective grace period once termination was requested.
    pub(crate) fn grace_secs(&self, uid: &str) -> Option<i64> {
        self.workers.get(uid).and_then(|w| w.grace)
    }

    /// Every UID with a worker, sorted.
    pub(crate) fn known_uids(&self) -> Vec<String> {
        let mut uids: Vec<String> = self.workers.keys().cloned().collect();
        crate::sort::sort(&mut uids);
        uids
    }

    // ----- internals -----------------------------------------------------------------

    /// Starts the work the worker's state calls for, if it may; the worker is idle.
    fn start_next(&mut self, uid: &str, out: &mut Vec<Effect>) {
        let Some(w) = self.workers.get_mut(uid) else {
            return;
        };
        if w.in_flight.is_some() {
            return;
        }
        let update_type = w.pending.take().unwrap_or(UpdateType::Sync);
        let work = match w.state {
            PodWorkerState::SyncPod => {
                let Some(pod) = w.pod.clone() else {
                    // Unreachable: a worker without a spec is born terminating.
                    log::warn!("pod worker {uid}: nothing to sync without a pod spec");
                    return;
                };
                if !w.started && w.is_static {
                    let name = w.full_name.clone().unwrap_or_default();
                    if !self.allow_static_start(&name, uid) {
                        // SyncPod (static, name held by another UID) --update--> waiting
                        log::info!(
                            "pod worker {uid} ({name}): waiting for the previous pod with \
                             this name to finish terminating"
                        );
                        if let Some(w) = self.workers.get_mut(uid) {
                            w.pending = Some(update_type);
                        }
                        return;
                    }
                }
                Work::Sync { update_type, pod }
            }
            PodWorkerState::TerminatingPod => {
                if !w.started && w.is_static && !w.observed_runtime {
                    // TerminatingPod (static, never started) --> Finished, no work
                    // (kubelet: cleanupUnstartedPod)
                    log::debug!("pod worker {uid}: terminated before it started");
                    self.finish(uid, out);
                    return;
                }
                Work::Terminating {
                    pod: w.pod.clone(),
                    grace_secs: w.grace.unwrap_or(MIN_GRACE_SECS),
                }
            }
            PodWorkerState::TerminatedPod => Work::Terminated { pod: w.pod.clone() },
            PodWorkerState::Finished => return,
        };
        let Some(w) = self.workers.get_mut(uid) else {
            return;
        };
        w.started = true;
        w.in_flight = Some(InFlight {
            kind: work.kind(),
            cancelled: false,
        });
        out.push(Effect::StartWork {
            uid: uid.to_string(),
            work,
        });
    }

    /// kubelet: `allowStaticPodStart`. True (and the name is taken) if no other UID holds
    /// `full_name` and `uid` is first among the UIDs still waiting for it.
    fn allow_static_start(&mut self, full_name: &str, uid: &str) -> bool {
        if let Some(holder) = self.started_static.get(full_name) {
            return holder == uid;
        }
        if let Some(queue) = self.waiting_static.get_mut(full_name) {
            while let Some(front) = queue.front() {
                let still_waiting = self
                    .workers
                    .get(front)
                    .is_some_and(|w| w.state == PodWorkerState::SyncPod);
                if !still_waiting {
                    queue.pop_front();
                    continue;
                }
                if front != uid {
                    return false;
                }
                queue.pop_front();
                break;
            }
            if queue.is_empty() {
                self.waiting_static.remove(full_name);
            }
        }
        self.started_static
            .insert(full_name.to_string(), uid.to_string());
        true
    }

    /// The worker is done: release its static name and let the next UID start.
    fn finish(&mut self, uid: &str, out: &mut Vec<Effect>) {
        let Some(w) = self.workers.get_mut(uid) else {
            return;
        };
        w.state = PodWorkerState::Finished;
        w.pending = None;
        w.in_flight = None;
        log::info!(
            "pod worker {uid} ({}): finished",
            w.full_name.as_deref().unwrap_or("runtime-only")
        );
        if let Some(name) = w.full_name.clone() {
            self.release_name(&name, uid, out);
        }
    }

    fn forget(&mut self, uid: &str, out: &mut Vec<Effect>) {
        if let Some(w) = self.workers.remove(uid) {
            if let Some(name) = w.full_name {
                if let Some(queue) = self.waiting_static.get_mut(&name) {
                    queue.retain(|u| u != uid);
                    if queue.is_empty() {
                        self.waiting_static.remove(&name);
                    }
                }
                self.release_name(&name, uid, out);
            }
        }
        out.push(Effect::Forget {
            uid: uid.to_string(),
        });
    }

    /// Drops `uid`'s hold on `full_name` (if it has it) and starts the first UID still
    /// waiting for the name (kubelet polls for this; we start it right away).
    fn release_name(&mut self, full_name: &str, uid: &str, out: &mut Vec<Effect>) {
        if self.started_static.get(full_name).map(String::as_str) == Some(uid) {
            self.started_static.remove(full_name);
        }
        if self.started_static.contains_key(full_name) {
            return;
        }
        let next = self.waiting_static.get(full_name).and_then(|queue| {
            queue
                .iter()
                .find(|u| {
                    self.workers
                        .get(*u)
                        .is_some_and(|w| w.state == PodWorkerState::SyncPod)
                })
                .cloned()
        });
        if let Some(next) = next {
            let idle_with_work = self
                .workers
                .get(&next)
                .is_some_and(|w| w.in_flight.is_none() && w.pending.is_some());
            if idle_with_work {
                log::info!("pod worker {next} ({full_name}): previous pod finished, starting");
                self.start_next(&next, out);
            }
        }
    }

    /// `base` stretched by up to 50 %, deterministically from the UID and a counter
    /// (kubelet: `wait.Jitter(d, 0.5)`).
    fn jitter(&mut self, uid: &str, base: Duration) -> Duration {
        self.requeues = self.requeues.wrapping_add(1);
        // FNV-1a over the UID and the counter.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in uid.bytes().chain(self.requeues.to_le_bytes()) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        let permille = u32::try_from(h % u64::from(JITTER_MAX_PERMILLE)).unwrap_or(0);
        base + base * permille / 1000
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ANNOTATION_CONFIG_SOURCE, PodPhase, PodStatus};
    use std::collections::HashSet;

    use Outcome::{Cancelled, Failed, Succeeded};
    use PodWorkerState::{Finished, SyncPod, TerminatedPod, TerminatingPod};
    use UpdateType::{Create, Sync, Update};

    const OK: Outcome = Succeeded { terminal: false };
    const TERMINAL: Outcome = Succeeded { terminal: true };
    const ERR: Outcome = Failed {
        network_not_ready: false,
    };
    const NET: Outcome = Failed {
        network_not_ready: true,
    };

    /// A static (file) pod; `name` is its full name's name part.
    fn pod(name: &str, uid: &str) -> Arc<Pod> {
        let mut p = Pod::default();
        p.metadata.namespace = "default".into();
        p.metadata.name = name.into();
        p.metadata.uid = uid.into();
        p.metadata
            .annotations
            .insert(ANNOTATION_CONFIG_SOURCE.into(), "file".into());
        Arc::new(p)
    }

    fn api_pod(name: &str, uid: &str) -> Arc<Pod> {
        let mut p = Pod::clone(&pod(name, uid));
        p.metadata
            .annotations
            .insert(ANNOTATION_CONFIG_SOURCE.into(), "api".into());
        Arc::new(p)
    }

    fn edit(p: &Arc<Pod>, f: impl FnOnce(&mut Pod)) -> Arc<Pod> {
        let mut p = Pod::clone(p);
        f(&mut p);
        Arc::new(p)
    }

    fn with_grace(p: &Arc<Pod>, secs: i64) -> Arc<Pod> {
        edit(p, |p| p.spec.termination_grace_period_seconds = Some(secs))
    }

    fn deleted(p: &Arc<Pod>, grace: Option<i64>) -> Arc<Pod> {
        edit(p, |p| {
            p.metadata.deletion_timestamp = Some("2026-01-01T00:00:00Z".into());
            p.metadata.deletion_grace_period_seconds = grace;
        })
    }

    fn phase(p: &Arc<Pod>, ph: PodPhase) -> Arc<Pod> {
        edit(p, |p| {
            p.status = Some(PodStatus {
                phase: Some(ph),
                ..PodStatus::default()
            })
        })
    }

    fn up(t: UpdateType, p: &Arc<Pod>) -> UpdatePodOptions {
        UpdatePodOptions::new(t, Arc::clone(p))
    }

    fn kill(p: &Arc<Pod>, grace: Option<i64>) -> UpdatePodOptions {
        UpdatePodOptions::kill(Arc::clone(p), grace)
    }

    /// Effects with pods reduced to their UID, for compact assertions.
    #[derive(Debug, PartialEq)]
    enum E {
        Sync(&'static str, UpdateType),
        Terminating(&'static str, i64, bool),
        Terminated(&'static str, bool),
        Cancel(&'static str),
        Requeue(&'static str),
        Forget(&'static str),
    }

    fn short(effects: Vec<Effect>) -> Vec<E> {
        let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
        effects
            .into_iter()
            .map(|e| match e {
                Effect::StartWork { uid, work } => match work {
                    Work::Sync { update_type, pod } => {
                        assert_eq!(pod.uid(), uid);
                        E::Sync(leak(uid), update_type)
                    }
                    Work::Terminating { pod, grace_secs } => {
                        E::Terminating(leak(uid), grace_secs, pod.is_some())
                    }
                    Work::Terminated { pod } => E::Terminated(leak(uid), pod.is_some()),
                },
                Effect::Cancel { uid } => E::Cancel(leak(uid)),
                Effect::Requeue { uid, .. } => E::Requeue(leak(uid)),
                Effect::Forget { uid } => E::Forget(leak(uid)),
            })
            .collect()
    }

    fn requeue_after(effects: &[Effect]) -> Duration {
        match effects {
            [Effect::Requeue { after, .. }] => *after,
            other => panic!("expected one requeue, got {other:?}"),
        }
    }

    /// A running worker for pod `p` (one Sync done, idle, resync armed).
    fn running(p: &Arc<Pod>) -> WorkerStates {
        let mut m = WorkerStates::new();
        m.update_pod(up(Create, p));
        m.complete(p.uid(), OK);
        assert_eq!(m.state(p.uid()), Some(SyncPod));
        m
    }

    /// The "desired" predicate of `sync_known_pods` for these UIDs.
    fn set(uids: &[&str]) -> impl Fn(&str) -> bool {
        let uids: HashSet<String> = uids.iter().map(|s| s.to_string()).collect();
        move |uid| uids.contains(uid)
    }

    // ----- SyncPod -------------------------------------------------------------------

    #[test]
    fn create_starts_sync() {
        // (new) --create--> SyncPod, SyncPod work starts at once
        let mut m = WorkerStates::new();
        let a = pod("web", "a");
        assert_eq!(short(m.update_pod(up(Create, &a))), [E::Sync("a", Create)]);
        assert_eq!(m.state("a"), Some(SyncPod));
        assert_eq!(m.work_in_flight("a"), Some(WorkKind::Sync));
        assert!(m.is_known("a") && !m.is_terminating("a") && !m.is_finished("a"));
        assert!(m.could_have_running_containers("a"));
    }

    #[test]
    fn one_sync_in_flight_latest_update_wins() {
        // SyncPod --update while a sync runs--> pending; the latest pending wins
        let mut m = WorkerStates::new();
        let a = pod("web", "a");
        m.update_pod(up(Create, &a));
        assert!(m.update_pod(up(Update, &a)).is_empty());
        let a2 = edit(&a, |p| p.spec.hostname = Some("v2".into()));
        assert!(m.update_pod(up(Sync, &a2)).is_empty());
        // The next sync starts when the first completes, with the latest pod and type.
        let effects = m.complete("a", OK);
        match effects.as_slice() {
            [
                Effect::StartWork {
                    work: Work::Sync { update_type, pod },
                    ..
                },
            ] => {
                assert_eq!(*update_type, Sync);
                assert_eq!(pod.spec.hostname.as_deref(), Some("v2"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn sync_completion_requeues_by_outcome() {
        // SyncPod --ok--> resync in [60, 90) s; --error--> [10, 15) s; --network--> [1, 1.5) s
        let cases = [
            (OK, RESYNC_INTERVAL),
            (ERR, BACKOFF_PERIOD),
            (NET, NETWORK_NOT_READY_BACKOFF),
        ];
        for (outcome, base) in cases {
            let mut m = WorkerStates::new();
            m.update_pod(up(Create, &pod("web", "a")));
            let after = requeue_after(&m.complete("a", outcome));
            assert!(
                after >= base && after < base * 3 / 2,
                "{outcome:?}: {after:?} not in [{base:?}, 1.5×)"
            );
            assert_eq!(m.state("a"), Some(SyncPod));
            assert_eq!(m.work_in_flight("a"), None);
        }
    }

    #[test]
    fn sync_completion_honours_a_back_off_hint() {
        // SyncPod --ok, a container waits out a 7 s back-off--> requeue in exactly 7 s;
        // a hint beyond the resync period, or on an error, is ignored.
        let hint = Duration::from_secs(7);
        let cases = [
            (OK, Some(hint), Some(hint)),
            (OK, Some(RESYNC_INTERVAL * 2), None),
            (ERR, Some(hint), None),
        ];
        for (outcome, given, want) in cases {
            let mut m = WorkerStates::new();
            m.update_pod(up(Create, &pod("web", "a")));
            let after = requeue_after(&m.complete_with_hint("a", outcome, given));
            match want {
                Some(w) => assert_eq!(after, w, "{outcome:?} {given:?}"),
                None => assert!(after >= BACKOFF_PERIOD, "{outcome:?} {given:?}: {after:?}"),
            }
        }
    }

    #[test]
    fn jitter_is_deterministic_and_varies() {
        let run = || {
            let mut m = WorkerStates::new();
            let a = pod("web", "a");
            m.update_pod(up(Create, &a));
            (0..20)
                .map(|_| {
                    let after = requeue_after(&m.complete("a", OK));
                    m.resync("a");
                    after
                })
                .collect::<Vec<_>>()
        };
        let first = run();
        assert_eq!(first, run(), "same inputs, same delays");
        let distinct: HashSet<_> = first.iter().collect();
        assert!(distinct.len() > 10, "jitter spreads: {first:?}");
        assert!(
            first
                .iter()
                .all(|d| *d >= RESYNC_INTERVAL && *d < RESYNC_INTERVAL * 3 / 2)
        );
    }

    #[test]
    fn resync_timer_restarts_sync() {
        // SyncPod --timer--> SyncPod work (update type Sync)
        let mut m = running(&pod("web", "a"));
        assert_eq!(short(m.resync("a")), [E::Sync("a", Sync)]);
        // A timer while work runs only marks work pending.
        assert!(m.resync("a").is_empty());
        assert_eq!(short(m.complete("a", OK)), [E::Sync("a", Sync)]);
        // Unknown UID: nothing.
        assert!(m.resync("zzz").is_empty());
    }

    #[test]
    fn failed_sync_with_pending_update_runs_again_at_once() {
        let mut m = WorkerStates::new();
        let a = pod("web", "a");
        m.update_pod(up(Create, &a));
        m.update_pod(up(Update, &a));
        assert_eq!(short(m.complete("a", ERR)), [E::Sync("a", Update)]);
    }

    #[test]
    fn runtime_only_update_that_is_not_a_kill_is_ignored() {
        let mut m = WorkerStates::new();
        let opts = UpdatePodOptions {
            update_type: Sync,
            ..UpdatePodOptions::kill_runtime_pod("r", None)
        };
        assert!(m.update_pod(opts).is_empty());
        assert!(!m.is_known("r"));
    }

    #[test]
    fn uid_comes_from_the_pod() {
        let mut m = WorkerStates::new();
        let opts = UpdatePodOptions {
            uid: "wrong".into(),
            ..up(Create, &pod("web", "a"))
        };
        assert_eq!(short(m.update_pod(opts)), [E::Sync("a", Create)]);
        assert!(!m.is_known("wrong"));
    }

    // ----- SyncPod → TerminatingPod ----------------------------------------------------

    #[test]
    fn termination_triggers() {
        // SyncPod --kill | deletionTimestamp | terminal phase (Succeeded, Failed)--> TerminatingPod
        let a = with_grace(&pod("web", "a"), 20);
        let cases: Vec<(&str, UpdatePodOptions, i64)> = vec![
            ("kill", kill(&a, None), 20),
            ("kill with override", kill(&a, Some(5)), 5),
            ("deletionTimestamp", up(Update, &deleted(&a, Some(7))), 7),
            (
                "deletionTimestamp, no grace",
                up(Update, &deleted(&a, None)),
                20,
            ),
            ("succeeded", up(Update, &phase(&a, PodPhase::Succeeded)), 20),
            ("failed", up(Update, &phase(&a, PodPhase::Failed)), 20),
        ];
        for (name, opts, grace) in cases {
            let mut m = running(&a);
            assert_eq!(
                short(m.update_pod(opts)),
                [E::Terminating("a", grace, true)],
                "{name}"
            );
            assert_eq!(m.state("a"), Some(TerminatingPod), "{name}");
            assert!(m.is_terminating("a"));
        }
        // A running phase is not a trigger.
        let mut m = running(&a);
        assert_eq!(
            short(m.update_pod(up(Update, &phase(&a, PodPhase::Running)))),
            [E::Sync("a", Update)]
        );
    }

    #[test]
    fn kill_during_sync_cancels_it_then_terminates() {
        // SyncPod (sync in flight) --kill--> TerminatingPod + Cancel;
        // --sync returns (cancelled)--> SyncTerminatingPod starts
        let mut m = WorkerStates::new();
        let a = pod("web", "a");
        m.update_pod(up(Create, &a));
        assert_eq!(short(m.update_pod(kill(&a, None))), [E::Cancel("a")]);
        assert_eq!(m.state("a"), Some(TerminatingPod));
        // A second kill does not cancel twice.
        assert!(m.update_pod(kill(&a, None)).is_empty());
        assert_eq!(
            short(m.complete("a", Cancelled)),
            [E::Terminating("a", DEFAULT_TERMINATION_GRACE_SECS, true)]
        );
    }

    #[test]
    fn sync_that_finished_despite_cancel_still_leads_to_terminating() {
        for outcome in [OK, ERR, TERMINAL, Cancelled] {
            let mut m = WorkerStates::new();
            let a = pod("web", "a");
            m.update_pod(up(Create, &a));
            m.update_pod(kill(&a, None));
            assert_eq!(
                short(m.complete("a", outcome)),
                [E::Terminating("a", 30, true)],
                "{outcome:?}"
            );
        }
    }

    #[test]
    fn kill_is_never_dropped_by_a_later_update() {
        // TerminatingPod --update--> TerminatingPod (never back to SyncPod)
        let mut m = WorkerStates::new();
        let a = pod("web", "a");
        m.update_pod(up(Create, &a));
        m.update_pod(kill(&a, None));
        assert!(m.update_pod(up(Update, &a)).is_empty());
        assert!(m.update_pod(up(Sync, &a)).is_empty());
        assert_eq!(
            short(m.complete("a", Cancelled)),
            [E::Terminating("a", 30, true)]
        );
        assert_eq!(m.state("a"), Some(TerminatingPod));
    }

    #[test]
    fn sync_reporting_terminal_starts_terminating_immediately() {
        // SyncPod --sync reports terminal--> TerminatingPod, no timer
        let mut m = WorkerStates::new();
        m.update_pod(up(Create, &with_grace(&pod("job", "a"), 3)));
        assert_eq!(
            short(m.complete("a", TERMINAL)),
            [E::Terminating("a", 3, true)]
        );
        assert_eq!(m.grace_secs("a"), Some(3));
    }

    // ----- TerminatingPod ----------------------------------------------------------------

    #[test]
    fn terminating_then_terminated_then_finished() {
        // TerminatingPod --ok--> TerminatedPod --ok--> Finished
        let a = pod("web", "a");
        let mut m = running(&a);
        m.update_pod(kill(&a, None));
        assert_eq!(short(m.complete("a", OK)), [E::Terminated("a", true)]);
        assert_eq!(m.state("a"), Some(TerminatedPod));
        assert!(m.is_terminating("a"));
        assert!(!m.could_have_running_containers("a"));
        assert!(m.complete("a", OK).is_empty());
        assert_eq!(m.state("a"), Some(Finished));
        assert!(m.is_finished("a") && !m.is_terminating("a"));
        assert_eq!(m.work_in_flight("a"), None);
    }

    #[test]
    fn failed_termination_retries_after_backoff() {
        // TerminatingPod --error--> requeue [10, 15) s --timer--> SyncTerminatingPod again
        let a = pod("web", "a");
        let mut m = running(&a);
        m.update_pod(kill(&a, Some(4)));
        let after = requeue_after(&m.complete("a", ERR));
        assert!(after >= BACKOFF_PERIOD && after < BACKOFF_PERIOD * 3 / 2);
        assert_eq!(m.state("a"), Some(TerminatingPod));
        assert_eq!(short(m.resync("a")), [E::Terminating("a", 4, true)]);
        // TerminatedPod --error--> requeue --timer--> SyncTerminatedPod again
        m.complete("a", OK);
        requeue_after(&m.complete("a", ERR));
        assert_eq!(short(m.resync("a")), [E::Terminated("a", true)]);
    }

    #[test]
    fn grace_shrink_cancels_terminating_and_restarts_it() {
        // TerminatingPod --kill with a shorter grace--> Cancel, then restart with it
        let a = pod("web", "a");
        let mut m = running(&a);
        assert_eq!(
            short(m.update_pod(kill(&a, None))),
            [E::Terminating("a", 30, true)]
        );
        assert_eq!(short(m.update_pod(kill(&a, Some(10)))), [E::Cancel("a")]);
        assert_eq!(m.grace_secs("a"), Some(10));
        assert_eq!(
            short(m.complete("a", Cancelled)),
            [E::Terminating("a", 10, true)]
        );
        // Longer or equal grace: no cancel; the pending kill re-runs with the same grace.
        assert!(m.update_pod(kill(&a, Some(20))).is_empty());
        assert!(m.update_pod(kill(&a, Some(10))).is_empty());
        assert_eq!(m.grace_secs("a"), Some(10));
        assert_eq!(short(m.complete("a", ERR)), [E::Terminating("a", 10, true)]);
        // A deletionGracePeriodSeconds shrink counts too.
        assert_eq!(
            short(m.update_pod(up(Update, &deleted(&a, Some(2))))),
            [E::Cancel("a")]
        );
        assert_eq!(
            short(m.complete("a", Cancelled)),
            [E::Terminating("a", 2, true)]
        );
    }

    #[test]
    fn grace_shrink_while_idle_restarts_at_once() {
        let a = pod("web", "a");
        let mut m = running(&a);
        m.update_pod(kill(&a, None));
        requeue_after(&m.complete("a", ERR));
        assert_eq!(
            short(m.update_pod(kill(&a, Some(1)))),
            [E::Terminating("a", 1, true)]
        );
    }

    #[test]
    fn effective_grace_table() {
        let p = |spec: Option<i64>, deletion: Option<i64>| {
            let mut p = Pod::default();
            p.spec.termination_grace_period_seconds = spec;
            p.metadata.deletion_grace_period_seconds = deletion;
            p
        };
        // (current, spec, deletion grace, override, pod known) → (grace, shortened)
        #[allow(clippy::type_complexity)]
        let cases: &[(
            Option<i64>,
            Option<i64>,
            Option<i64>,
            Option<i64>,
            bool,
            (i64, bool),
        )] = &[
            (None, None, None, None, true, (30, false)),
            (None, Some(45), None, None, true, (45, false)),
            (None, Some(45), Some(60), None, true, (60, false)), // apiserver's word wins
            (None, Some(45), Some(60), Some(5), true, (5, false)),
            (None, Some(45), None, Some(50), true, (50, false)),
            (None, Some(0), None, None, true, (1, false)), // never below 1 s
            (None, None, Some(0), None, true, (1, false)),
            (None, None, None, Some(-3), true, (1, false)),
            (None, None, None, None, false, (1, false)), // runtime-only pod
            (None, None, None, Some(7), false, (7, false)),
            (Some(30), None, None, Some(10), true, (10, true)), // shrinks
            (Some(10), None, None, Some(30), true, (10, false)), // never grows
            (Some(10), Some(5), None, None, true, (10, false)), // spec no longer counts
            (Some(10), None, Some(3), Some(8), true, (3, true)),
            (Some(1), None, Some(0), None, true, (1, false)),
        ];
        for (i, (current, spec, deletion, over, known, want)) in cases.iter().enumerate() {
            let pod = p(*spec, *deletion);
            let got = effective_grace(*current, known.then_some(&pod), *over);
            assert_eq!(got, *want, "row {i}");
        }
    }

    #[test]
    fn updates_to_terminated_or_finished_are_ignored() {
        // TerminatedPod --kill with shorter grace--> no cancel, no new work
        let a = pod("web", "a");
        let mut m = running(&a);
        m.update_pod(kill(&a, None));
        m.complete("a", OK);
        assert!(m.update_pod(kill(&a, Some(1))).is_empty());
        assert_eq!(m.grace_secs("a"), Some(30));
        // The pending kill is consumed by the finish; Finished --any--> ignored
        assert!(m.complete("a", OK).is_empty());
        for opts in [up(Update, &a), up(Sync, &a), kill(&a, Some(1))] {
            assert!(m.update_pod(opts).is_empty());
        }
        assert!(m.resync("a").is_empty());
        assert_eq!(m.state("a"), Some(Finished));
    }

    // ----- Finished, housekeeping -----------------------------------------------------

    fn finished(a: &Arc<Pod>) -> WorkerStates {
        let mut m = running(a);
        m.update_pod(kill(a, None));
        m.complete(a.uid(), OK);
        m.complete(a.uid(), OK);
        assert!(m.is_finished(a.uid()));
        m
    }

    #[test]
    fn sync_known_pods_forgets_finished_workers_not_desired() {
        // Finished --sync_known_pods, not desired--> forgotten
        let a = pod("web", "a");
        let mut m = finished(&a);
        assert!(
            m.sync_known_pods(set(&["a"])).is_empty(),
            "still desired: kept"
        );
        assert_eq!(short(m.sync_known_pods(set(&[]))), [E::Forget("a")]);
        assert!(!m.is_known("a"));
        assert!(m.known_uids().is_empty());
        // Forgotten: a create starts a fresh worker.
        assert_eq!(short(m.update_pod(up(Create, &a))), [E::Sync("a", Create)]);
    }

    #[test]
    fn create_after_termination_began_restarts_after_housekeeping() {
        // TerminatingPod --create--> ignored, restart requested;
        // Finished + restart requested --sync_known_pods (desired)--> forgotten
        let a = pod("web", "a");
        let mut m = running(&a);
        m.update_pod(kill(&a, None));
        assert!(m.update_pod(up(Create, &a)).is_empty());
        assert!(
            m.sync_known_pods(set(&["a"])).is_empty(),
            "not finished yet"
        );
        m.complete("a", OK);
        m.complete("a", OK);
        assert_eq!(short(m.sync_known_pods(set(&["a"]))), [E::Forget("a")]);
        assert_eq!(short(m.update_pod(up(Create, &a))), [E::Sync("a", Create)]);
    }

    #[test]
    fn create_on_finished_worker_requests_restart() {
        let a = pod("web", "a");
        let mut m = finished(&a);
        assert!(m.update_pod(up(Create, &a)).is_empty());
        assert_eq!(short(m.sync_known_pods(set(&["a"]))), [E::Forget("a")]);
    }

    #[test]
    fn sync_known_pods_terminates_orphans() {
        // SyncPod (started, idle) --orphaned--> TerminatingPod, work starts
        let a = with_grace(&pod("web", "a"), 12);
        let mut m = running(&a);
        assert_eq!(
            short(m.sync_known_pods(set(&[]))),
            [E::Terminating("a", 12, true)]
        );
        // TerminatingPod orphans are left to their own retries.
        assert!(m.sync_known_pods(set(&[])).is_empty());
        // SyncPod (sync in flight) --orphaned--> TerminatingPod + Cancel
        let mut m = WorkerStates::new();
        m.update_pod(up(Create, &a));
        assert_eq!(short(m.sync_known_pods(set(&[]))), [E::Cancel("a")]);
        assert_eq!(
            short(m.complete("a", Cancelled)),
            [E::Terminating("a", 12, true)]
        );
    }

    // ----- runtime-only pods ------------------------------------------------------------

    #[test]
    fn runtime_only_kill_goes_straight_to_terminating() {
        // (new, no spec) --kill--> TerminatingPod (grace 1) --ok--> TerminatedPod --ok--> Finished
        let mut m = WorkerStates::new();
        assert_eq!(
            short(m.update_pod(UpdatePodOptions::kill_runtime_pod("r", None))),
            [E::Terminating("r", RUNTIME_POD_GRACE_SECS, false)]
        );
        assert_eq!(m.state("r"), Some(TerminatingPod));
        assert_eq!(short(m.complete("r", OK)), [E::Terminated("r", false)]);
        assert!(m.complete("r", OK).is_empty());
        assert!(m.is_finished("r"));
        // A stale second runtime kill while finished is ignored; housekeeping forgets it.
        assert!(
            m.update_pod(UpdatePodOptions::kill_runtime_pod("r", None))
                .is_empty()
        );
        assert_eq!(short(m.sync_known_pods(set(&[]))), [E::Forget("r")]);
    }

    #[test]
    fn runtime_only_kill_of_a_terminated_pod_is_ignored() {
        // TerminatedPod --runtime-only kill--> ignored (no new work, even when idle)
        let a = pod("web", "a");
        let mut m = running(&a);
        m.update_pod(kill(&a, None));
        m.complete("a", OK);
        requeue_after(&m.complete("a", ERR));
        assert!(
            m.update_pod(UpdatePodOptions::kill_runtime_pod("a", None))
                .is_empty()
        );
        assert_eq!(m.state("a"), Some(TerminatedPod));
    }

    #[test]
    fn runtime_only_kill_of_a_known_pod_keeps_its_spec() {
        let a = with_grace(&pod("web", "a"), 9);
        let mut m = running(&a);
        assert_eq!(
            short(m.update_pod(UpdatePodOptions::kill_runtime_pod("a", None))),
            [E::Terminating("a", 9, true)]
        );
    }

    // ----- static pods: one full name at a time ------------------------------------------

    #[test]
    fn edited_static_pod_waits_for_the_old_uid_to_finish() {
        // SyncPod (static, name held) --create--> waiting; old Finished --> new starts
        let old = pod("web", "old");
        let new = pod("web", "new");
        let mut m = running(&old);
        // REMOVE old, ADD new (merge order).
        assert_eq!(
            short(m.update_pod(kill(&old, None))),
            [E::Terminating("old", 30, true)]
        );
        assert!(m.update_pod(up(Create, &new)).is_empty(), "name still held");
        assert!(m.is_waiting_to_start("new"));
        assert_eq!(m.state("new"), Some(SyncPod));
        // Updates while waiting are kept (latest wins) but start nothing.
        assert!(m.update_pod(up(Update, &new)).is_empty());
        assert_eq!(short(m.complete("old", OK)), [E::Terminated("old", true)]);
        // Terminated is not enough: the name is held until SyncTerminatedPod succeeded.
        requeue_after(&m.complete("old", ERR));
        assert!(m.is_waiting_to_start("new"));
        m.resync("old");
        assert_eq!(short(m.complete("old", OK)), [E::Sync("new", Update)]);
        assert!(!m.is_waiting_to_start("new"));
        assert!(m.is_finished("old"));
    }

    #[test]
    fn add_before_remove_also_waits() {
        let old = pod("web", "old");
        let new = pod("web", "new");
        let mut m = running(&old);
        assert!(m.update_pod(up(Create, &new)).is_empty());
        m.update_pod(kill(&old, None));
        m.complete("old", OK);
        assert_eq!(short(m.complete("old", OK)), [E::Sync("new", Create)]);
    }

    #[test]
    fn waiting_static_pods_start_in_arrival_order() {
        let a = pod("web", "a");
        let (b, c) = (pod("web", "b"), pod("web", "c"));
        let mut m = running(&a);
        assert!(m.update_pod(up(Create, &b)).is_empty());
        assert!(m.update_pod(up(Create, &c)).is_empty());
        m.update_pod(kill(&a, None));
        m.complete("a", OK);
        assert_eq!(short(m.complete("a", OK)), [E::Sync("b", Create)]);
        assert!(m.is_waiting_to_start("c"));
        // c still waits while b runs; b finishes → c starts.
        assert!(m.resync("c").is_empty());
        m.complete("b", OK);
        m.update_pod(kill(&b, None));
        m.complete("b", OK);
        assert_eq!(short(m.complete("b", OK)), [E::Sync("c", Create)]);
    }

    #[test]
    fn waiting_static_pod_killed_before_start_finishes_without_work() {
        // TerminatingPod (static, never started) --> Finished, no work
        let a = pod("web", "a");
        let (b, c) = (pod("web", "b"), pod("web", "c"));
        let mut m = running(&a);
        m.update_pod(up(Create, &b));
        m.update_pod(up(Create, &c));
        assert!(m.update_pod(kill(&b, None)).is_empty());
        assert!(m.is_finished("b"));
        // c is next in line once a finishes.
        m.update_pod(kill(&a, None));
        m.complete("a", OK);
        assert_eq!(short(m.complete("a", OK)), [E::Sync("c", Create)]);
    }

    #[test]
    fn waiting_static_pod_seen_in_runtime_is_really_terminated() {
        // TerminatingPod (static, never started, observed in runtime) --> SyncTerminatingPod
        let a = pod("web", "a");
        let b = with_grace(&pod("web", "b"), 6);
        let mut m = running(&a);
        m.update_pod(up(Create, &b));
        assert_eq!(
            short(m.update_pod(UpdatePodOptions::kill_runtime_pod("b", None))),
            [E::Terminating("b", 6, true)]
        );
    }

    #[test]
    fn orphaned_waiting_static_pod_is_forgotten_and_releases_the_line() {
        let a = pod("web", "a");
        let (b, c) = (pod("web", "b"), pod("web", "c"));
        let mut m = running(&a);
        m.update_pod(up(Create, &b));
        m.update_pod(up(Create, &c));
        assert_eq!(short(m.sync_known_pods(set(&["a", "c"]))), [E::Forget("b")]);
        m.update_pod(kill(&a, None));
        m.complete("a", OK);
        assert_eq!(short(m.complete("a", OK)), [E::Sync("c", Create)]);
    }

    #[test]
    fn static_pod_terminal_in_first_update_finishes_without_work() {
        let mut m = WorkerStates::new();
        let a = phase(&pod("web", "a"), PodPhase::Succeeded);
        assert!(m.update_pod(up(Create, &a)).is_empty());
        assert!(m.is_finished("a"));
    }

    #[test]
    fn api_pod_terminating_on_first_sight_still_stops_its_containers() {
        // Not static: a deleted pod seen first after a restart must be torn down.
        let mut m = WorkerStates::new();
        let a = deleted(&api_pod("web", "a"), Some(3));
        assert_eq!(
            short(m.update_pod(up(Create, &a))),
            [E::Terminating("a", 3, true)]
        );
    }

    #[test]
    fn non_static_pods_with_one_name_do_not_wait() {
        let mut m = running(&api_pod("web", "a"));
        assert_eq!(
            short(m.update_pod(up(Create, &api_pod("web", "b")))),
            [E::Sync("b", Create)]
        );
    }

    #[test]
    fn static_pods_with_other_names_do_not_wait() {
        let mut m = running(&pod("web", "a"));
        assert_eq!(
            short(m.update_pod(up(Create, &pod("db", "b")))),
            [E::Sync("b", Create)]
        );
        let other_ns = edit(&pod("web", "c"), |p| {
            p.metadata.namespace = "kube-system".into()
        });
        assert_eq!(
            short(m.update_pod(up(Create, &other_ns))),
            [E::Sync("c", Create)]
        );
    }

    #[test]
    fn stray_completions_are_ignored() {
        let mut m = running(&pod("web", "a"));
        assert!(m.complete("a", OK).is_empty(), "nothing in flight");
        assert!(m.complete("nope", OK).is_empty());
    }
}
