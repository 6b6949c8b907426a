//! Pod workers: one lifecycle per pod UID, driven on the agent's single thread
//! (kubelet: `pkg/kubelet/pod_workers.go`).
//!
//! Owns: the per-UID state machine ([`state`], pure — read its header for the lifecycle
//! and invariants), the work in flight (one `spawn_local` task per UID, each with its own
//! `CancellationToken`), and the requeue timers (a deadline per UID, one `sleep_until` on
//! the earliest). Only this module mutates worker state.
//!
//! **At most [`MAX_SYNCS_IN_FLIGHT`] SyncPods run at once**; more wait, first come first
//! served, and start as running ones end. A deliberate difference from the kubelet, whose
//! goroutines cost a few kB each: a SyncPod's future here is ~8 kB plus the CRI calls it
//! has open and their buffers, all allocated when it runs, so a burst of 500 pods (a
//! board's first start, an apiserver relist) held all of that at once (~35 kB per pod
//! before the CRI futures were boxed) and left the heap that large. Terminations never wait: a kill must not queue behind 500 creates, and a queued
//! SyncPod that is cancelled (its pod is being killed) ends at once as cancelled, without
//! running. To the state machine queued work is simply work in flight.
//!
//! How the agent uses it (kubelet: `HandlePod*`, `HandlePodCleanups`):
//! - config changes: ADD → `update_pod(new(Create, pod))`; UPDATE and DELETE →
//!   `new(Update, pod)`; REMOVE → `kill(pod, None)`; RECONCILE only refreshes the pod
//!   manager, plus `new(Sync, pod)` if the new status phase is terminal;
//! - await [`PodWorkers::next`] in the one `tokio::select!` loop — it returns when work
//!   completed or a timer fired, having already advanced the state machine and started
//!   whatever comes next (resyncs and retries need no help from the agent);
//! - housekeeping (every 2 s, only once all sources are ready): `sync_known_pods(desired)`,
//!   then re-send every desired pod that is not [`PodWorkers::is_known`] as a create, then
//!   kill every pod running in the runtime whose UID is not known
//!   (`kill_runtime_pod(uid, Some(1))`).
//!
//! Must run inside a `tokio::task::LocalSet` (the syncer's futures are not `Send`).
//!
//! Must never: talk to the runtime itself (that is the [`PodSyncer`]'s job), block, or
//! hold worker state across an `.await` — [`PodWorkers::next`] only awaits the
//! completion channel and the timer, then updates state synchronously, so dropping it
//! (another `select!` branch won) loses nothing.

pub(crate) mod state;

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::api::Pod;
use crate::local_tasks::sleep_until_opt;

use state::Effect;
#[cfg(test)]
pub(crate) use state::PodWorkerState;
pub(crate) use state::{Outcome, UpdatePodOptions, UpdateType, Work, WorkKind, WorkerStates};

/// How many SyncPods run at once (see the module doc). A board's usual burst — its
/// static pods at boot, 20 pods in the bench — stays below it and never waits.
pub(crate) const MAX_SYNCS_IN_FLIGHT: usize = 32;

/// Requeues at least this far away are rounded up to the wake-up grid (`task::align_up`).
const ALIGNED_REQUEUE: Duration = Duration::from_secs(10);

/// A successful SyncPod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct SyncPodOk {
    /// The pod reached a terminal phase (Succeeded/Failed): terminate it.
    pub terminal: bool,
    /// Sync again after this (a back-off ends) rather than at the periodic resync.
    pub requeue_after: Option<Duration>,
}

/// A failed sync; the worker retries it (after 10 s, or 1 s if the network is not ready).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub(crate) struct SyncFailure {
    pub message: String,
    /// The pod network is not ready yet (kubelet: `NetworkNotReadyErrorMsg`): retry soon.
    pub network_not_ready: bool,
    /// The container runtime does not answer at all: the relister logs that outage once,
    /// so the worker's retries are logged at debug level only.
    pub runtime_down: bool,
}

impl SyncFailure {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        SyncFailure {
            message: message.into(),
            network_not_ready: false,
            runtime_down: false,
        }
    }

    #[cfg(test)]
    pub(crate) fn network_not_ready(message: impl Into<String>) -> Self {
        SyncFailure {
            network_not_ready: true,
            ..SyncFailure::new(message)
        }
    }

    pub(crate) fn runtime_down(message: impl Into<String>) -> Self {
        SyncFailure {
            runtime_down: true,
            ..SyncFailure::new(message)
        }
    }
}

/// The work the pod workers schedule (kubelet: `podSyncer`); the agent implements it over
/// the runtime. Calls for one UID never overlap; calls for different UIDs do.
pub(crate) trait PodSyncer: Clone + 'static {
    /// Set the pod up, start and restart its containers. Should return early (any error)
    /// once `cancel` fires.
    fn sync_pod(
        &self,
        update: UpdateType,
        pod: Arc<Pod>,
        cancel: CancellationToken,
    ) -> impl Future<Output = Result<SyncPodOk, SyncFailure>>;

    /// Stop every container and the sandbox of `uid` within `grace_secs`; `pod` is `None`
    /// for a pod known only from the runtime. Must not succeed while anything still runs.
    /// `cancel` fires when a shorter grace period arrived (the work is then restarted).
    fn sync_terminating_pod(
        &self,
        uid: String,
        pod: Option<Arc<Pod>>,
        grace_secs: i64,
        cancel: CancellationToken,
    ) -> impl Future<Output = Result<(), SyncFailure>>;

    /// Clean up after the pod stopped (volumes, directories, final status); `pod` is `None`
    /// for a pod known only from the runtime.
    fn sync_terminated_pod(
        &self,
        uid: String,
        pod: Option<Arc<Pod>>,
    ) -> impl Future<Output = Result<(), SyncFailure>>;
}

/// What [`PodWorkers::next`] observed. The state machine has already moved on.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum WorkerEvent {
    /// A piece of work for `uid` ended; `failure` holds the syncer's error, if any.
    Completed {
        uid: String,
        work: WorkKind,
        outcome: Outcome,
        failure: Option<SyncFailure>,
    },
    /// The requeue timer of `uid` fired; its work was restarted (or marked pending).
    Resynced { uid: String },
}

struct Task {
    id: u64,
    kind: WorkKind,
    cancel: CancellationToken,
    run: TaskRun,
}

enum TaskRun {
    /// A SyncPod waiting for a slot (its UID is in `PodWorkers::queue`).
    Queued(Work),
    Running(JoinHandle<()>),
    /// Cancelled while queued: its `Done` (Cancelled) is on the way.
    Dropped,
}

impl Task {
    fn abort(&self) {
        self.cancel.cancel();
        if let TaskRun::Running(handle) = &self.run {
            handle.abort();
        }
    }

    fn holds_sync_slot(&self) -> bool {
        self.kind == WorkKind::Sync && matches!(self.run, TaskRun::Running(_))
    }
}

struct Done {
    uid: String,
    id: u64,
    kind: WorkKind,
    outcome: Outcome,
    failure: Option<SyncFailure>,
    requeue_hint: Option<Duration>,
}

/// The pod workers (kubelet: `podWorkers`).
pub(crate) struct PodWorkers<S: PodSyncer> {
    syncer: S,
    states: WorkerStates,
    tasks: HashMap<String, Task>,
    /// SyncPods waiting for a slot, in arrival order: (uid, task id). An entry whose task
    /// is gone or no longer queued is skipped.
    queue: VecDeque<(String, u64)>,
    /// Running SyncPods (tasks that hold a slot).
    syncs_running: usize,
    max_syncs: usize,
    deadlines: HashMap<String, Instant>,
    done_tx: mpsc::UnboundedSender<Done>,
    done_rx: mpsc::UnboundedReceiver<Done>,
    next_id: u64,
    /// The last failure logged per pod: the same failure again (a pod waiting for its
    /// ConfigMap, its image, its network) is logged at debug, so a board waiting an hour
    /// does not log it 300 times.
    last_failure: HashMap<String, String>,
    /// `kubelet_pod_worker_duration_seconds` (None: not measured, tests).
    metrics: Option<Rc<crate::metrics::AgentMetrics>>,
}

impl<S: PodSyncer> PodWorkers<S> {
    /// Gives back the table space a burst of pods left (see [`crate::mem_trim`]).
    pub(crate) fn compact(&mut self) {
        use crate::mem_trim::ShrinkSparse;
        self.tasks.shrink_sparse();
        self.queue.shrink_sparse();
        self.deadlines.shrink_sparse();
        self.last_failure.shrink_sparse();
        self.states.compact();
    }

    pub(crate) fn new(syncer: S) -> Self {
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        PodWorkers {
            syncer,
            states: WorkerStates::new(),
            tasks: HashMap::new(),
            queue: VecDeque::new(),
            syncs_running: 0,
            max_syncs: MAX_SYNCS_IN_FLIGHT,
            deadlines: HashMap::new(),
            done_tx,
            done_rx,
            next_id: 0,
            last_failure: HashMap::new(),
            metrics: None,
        }
    }

    /// Measures every work's duration into `metrics`.
    pub(crate) fn with_metrics(mut self, metrics: Rc<crate::metrics::AgentMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The periodic resync of a running pod (kubelet: `--sync-frequency`, default 1 min).
    #[must_use]
    pub(crate) fn with_resync_interval(mut self, every: Duration) -> Self {
        self.states = std::mem::take(&mut self.states).with_resync_interval(every);
        self
    }

    #[cfg(test)]
    /// At most `n` SyncPods at once (at least 1).
    #[must_use]
    pub(crate) fn with_max_syncs_in_flight(mut self, n: usize) -> Self {
        self.max_syncs = n.max(1);
        self
    }

    /// kubelet: `UpdatePod`. Records the update; starts work at once if the UID is idle.
    pub(crate) fn update_pod(&mut self, opts: UpdatePodOptions) {
        let effects = self.states.update_pod(opts);
        self.apply(effects);
    }

    /// Waits until a piece of work completes or a requeue timer fires, advances the state
    /// machine (starting the next work) and reports what happened. Cancel-safe. Pending
    /// forever while nothing is in flight and no timer is armed.
    pub(crate) async fn next(&mut self) -> WorkerEvent {
        loop {
            let timer = self
                .deadlines
                .iter()
                .min_by(|a, b| (a.1, a.0).cmp(&(b.1, b.0)))
                .map(|(uid, at)| (uid.clone(), *at));
            let wake_at = timer.as_ref().map(|(_, at)| *at);
            tokio::select! {
                biased;
                done = self.done_rx.recv() => {
                    // `self` holds a sender, so the channel never closes.
                    let Some(done) = done else { continue };
                    if let Some(event) = self.on_done(done) {
                        return event;
                    }
                }
                () = sleep_until_opt(wake_at) => {
                    let Some((uid, _)) = timer else { continue };
                    self.deadlines.remove(&uid);
                    log::debug!("pod worker {uid}: requeue timer fired");
                    let effects = self.states.resync(&uid);
                    self.apply(effects);
                    return WorkerEvent::Resynced { uid };
                }
            }
        }
    }

    /// kubelet: `SyncKnownPods`. `desired`: the UIDs the pod manager holds. Forgets
    /// finished workers that are no longer desired (or were re-created under the same
    /// UID), terminates orphans, and returns the forgotten UIDs. Afterwards the caller
    /// re-sends every desired pod that is not [`PodWorkers::is_known`] as a create.
    pub(crate) fn sync_known_pods(&mut self, desired: impl Fn(&str) -> bool) -> Vec<String> {
        let effects = self.states.sync_known_pods(desired);
        let forgotten = effects
            .iter()
            .filter_map(|e| match e {
                Effect::Forget { uid } => Some(uid.clone()),
                _ => None,
            })
            .collect();
        self.apply(effects);
        forgotten
    }

    pub(crate) fn is_known(&self, uid: &str) -> bool {
        self.states.is_known(uid)
    }

    /// Termination was requested and the worker has not finished.
    pub(crate) fn is_terminating(&self, uid: &str) -> bool {
        self.states.is_terminating(uid)
    }

    /// SyncTerminatedPod succeeded: nothing of the pod runs or remains to clean up.
    pub(crate) fn is_finished(&self, uid: &str) -> bool {
        self.states.is_finished(uid)
    }

    #[cfg(test)]
    pub(crate) fn state(&self, uid: &str) -> Option<PodWorkerState> {
        self.states.state(uid)
    }

    #[cfg(test)]
    /// A static pod waiting for the previous UID with its full name to finish.
    pub(crate) fn is_waiting_to_start(&self, uid: &str) -> bool {
        self.states.is_waiting_to_start(uid)
    }

    /// Every UID with a worker, sorted.
    pub(crate) fn known_uids(&self) -> Vec<String> {
        self.states.known_uids()
    }

    /// How many pieces of work run right now or wait for a slot.
    pub(crate) fn in_flight(&self) -> usize {
        self.tasks.len()
    }

    #[cfg(test)]
    /// How many SyncPods wait for a slot.
    pub(crate) fn queued(&self) -> usize {
        self.tasks
            .values()
            .filter(|t| matches!(t.run, TaskRun::Queued(_)))
            .count()
    }

    #[cfg(test)]
    /// When the requeue timer of `uid` fires, if one is armed.
    pub(crate) fn requeue_at(&self, uid: &str) -> Option<Instant> {
        self.deadlines.get(uid).copied()
    }

    #[cfg(test)]
    /// Cancels and aborts all work in flight and drops all timers. Containers keep
    /// running: stopping the agent never stops pods.
    pub(crate) fn shutdown(&mut self) {
        for (_, task) in self.tasks.drain() {
            task.abort();
        }
        self.queue.clear();
        self.syncs_running = 0;
        self.deadlines.clear();
    }

    fn on_done(&mut self, done: Done) -> Option<WorkerEvent> {
        let Done {
            uid,
            id,
            kind,
            outcome,
            failure,
            requeue_hint,
        } = done;
        if self.tasks.get(&uid).map(|t| t.id) != Some(id) {
            log::debug!("pod worker {uid}: stale completion of {kind:?} ignored");
            return None;
        }
        self.remove_task(&uid);
        match (&outcome, &failure) {
            (Outcome::Failed { .. }, Some(f)) if f.runtime_down => {
                log::debug!("pod worker {uid}: {kind:?} failed: {f}");
            }
            (Outcome::Failed { .. }, Some(f)) => {
                let text = f.to_string();
                if self.last_failure.get(&uid) == Some(&text) {
                    log::debug!("pod worker {uid}: {kind:?} failed again: {f}");
                } else {
                    log::warn!("pod worker {uid}: {kind:?} failed: {f}");
                    self.last_failure.insert(uid.clone(), text);
                }
            }
            (Outcome::Cancelled, _) => log::debug!("pod worker {uid}: {kind:?} cancelled"),
            _ => {
                if self.last_failure.remove(&uid).is_some() {
                    log::info!("pod worker {uid}: {kind:?} succeeded again");
                }
                log::debug!("pod worker {uid}: {kind:?} done ({outcome:?})");
            }
        }
        let effects = self.states.complete_with_hint(&uid, outcome, requeue_hint);
        self.apply(effects);
        Some(WorkerEvent::Completed {
            uid,
            work: kind,
            outcome,
            failure,
        })
    }

    fn apply(&mut self, effects: Vec<Effect>) {
        for effect in effects {
            match effect {
                Effect::StartWork { uid, work } => {
                    self.deadlines.remove(&uid);
                    self.spawn(uid, work);
                }
                Effect::Cancel { uid } => self.cancel(&uid),
                Effect::Requeue { uid, after } => {
                    // A resync or a long back-off waits for the next point of the agent's
                    // wake-up grid (at most 2 s more), so an idle node's resyncs share the
                    // housekeeping's wake-ups (kubelet: spread by jitter alone). Short
                    // hints (a back-off about to end, network not ready) stay exact.
                    let mut at = Instant::now() + after;
                    if after >= ALIGNED_REQUEUE {
                        at = crate::local_tasks::align_up(at);
                    }
                    self.deadlines.insert(uid, at);
                }
                Effect::Forget { uid } => {
                    self.deadlines.remove(&uid);
                    self.last_failure.remove(&uid);
                    if let Some(task) = self.remove_task(&uid) {
                        task.abort();
                    }
                }
            }
        }
        self.start_queued();
    }

    /// Removes `uid`'s task, giving back its SyncPod slot if it held one.
    fn remove_task(&mut self, uid: &str) -> Option<Task> {
        let task = self.tasks.remove(uid)?;
        if task.holds_sync_slot() {
            self.syncs_running -= 1;
        }
        Some(task)
    }

    /// Cancels `uid`'s work: a running one sees its token fire; a queued one ends now,
    /// as cancelled, without having run.
    fn cancel(&mut self, uid: &str) {
        let Some(task) = self.tasks.get_mut(uid) else {
            return;
        };
        task.cancel.cancel();
        if matches!(task.run, TaskRun::Queued(_)) {
            task.run = TaskRun::Dropped;
            log::debug!("pod worker {uid}: queued SyncPod cancelled before it started");
            // Through the channel like any completion, so `next` reports it.
            let _ = self.done_tx.send(Done {
                uid: uid.to_string(),
                id: task.id,
                kind: task.kind,
                outcome: Outcome::Cancelled,
                failure: Some(SyncFailure::new("cancelled before it started")),
                requeue_hint: None,
            });
        }
    }

    /// Starts queued SyncPods while slots are free, oldest first.
    fn start_queued(&mut self) {
        while self.syncs_running < self.max_syncs {
            let Some((uid, id)) = self.queue.pop_front() else {
                return;
            };
            if !matches!(self.tasks.get(&uid), Some(t) if t.id == id && matches!(t.run, TaskRun::Queued(_)))
            {
                continue; // cancelled, forgotten or replaced meanwhile
            }
            if let Some(Task {
                cancel,
                run: TaskRun::Queued(work),
                ..
            }) = self.tasks.remove(&uid)
            {
                self.start(uid, id, cancel, work);
            }
        }
    }

    fn spawn(&mut self, uid: String, work: Work) {
        self.next_id += 1;
        let id = self.next_id;
        let kind = work.kind();
        let cancel = CancellationToken::new();
        // Behind earlier waiters too, so a freed slot goes to the oldest.
        if kind == WorkKind::Sync
            && (self.syncs_running >= self.max_syncs || !self.queue.is_empty())
        {
            log::debug!(
                "pod worker {uid}: SyncPod waits for a slot ({} running)",
                self.syncs_running
            );
            self.queue.push_back((uid.clone(), id));
            self.tasks.insert(
                uid,
                Task {
                    id,
                    kind,
                    cancel,
                    run: TaskRun::Queued(work),
                },
            );
            return;
        }
        self.start(uid, id, cancel, work);
    }

    fn start(&mut self, uid: String, id: u64, cancel: CancellationToken, work: Work) {
        let kind = work.kind();
        let token = cancel.clone();
        let syncer = self.syncer.clone();
        let tx = self.done_tx.clone();
        let task_uid = uid.clone();
        let metrics = self.metrics.clone();
        log::debug!("pod worker {uid}: starting {kind:?}");
        // Each kind's future boxed on its own: a termination does not pay for the size of
        // a SyncPod's future (the task's own future is then a few hundred bytes).
        // kubelet: `SyncPod` observes `updateType.String()`; the terminated pod's worker
        // `"terminated"`; a termination is not measured (nor a sync of kind Kill, which the
        // kubelet routes to termination too).
        let operation = match &work {
            Work::Sync { update_type, .. } => match update_type {
                UpdateType::Create => "create",
                UpdateType::Update => "update",
                UpdateType::Sync => "sync",
                UpdateType::Kill => "",
            },
            Work::Terminating { .. } => "",
            Work::Terminated { .. } => "terminated",
        };
        type WorkFuture =
            std::pin::Pin<Box<dyn Future<Output = Result<(bool, Option<Duration>), SyncFailure>>>>;
        let (work_token, work_uid) = (token.clone(), task_uid.clone());
        let syncer_work: WorkFuture = match work {
            Work::Sync { update_type, pod } => Box::pin(async move {
                syncer
                    .sync_pod(update_type, pod, work_token)
                    .await
                    .map(|ok| (ok.terminal, ok.requeue_after))
            }),
            Work::Terminating { pod, grace_secs } => Box::pin(async move {
                syncer
                    .sync_terminating_pod(work_uid, pod, grace_secs, work_token)
                    .await
                    .map(|()| (false, None))
            }),
            Work::Terminated { pod } => Box::pin(async move {
                syncer
                    .sync_terminated_pod(work_uid, pod)
                    .await
                    .map(|()| (false, None))
            }),
        };
        let handle = crate::local_tasks::spawn_local(async move {
            let started = Instant::now();
            let result = syncer_work.await;
            if let Some(m) = &metrics {
                m.pod_worker(operation, started.elapsed());
            }
            let (outcome, failure, requeue_hint) = match result {
                Ok((terminal, hint)) => (Outcome::Succeeded { terminal }, None, hint),
                Err(f) if token.is_cancelled() => (Outcome::Cancelled, Some(f), None),
                Err(f) => (
                    Outcome::Failed {
                        network_not_ready: f.network_not_ready,
                    },
                    Some(f),
                    None,
                ),
            };
            // The receiver is gone only if the PodWorkers was dropped: nothing to report.
            let _ = tx.send(Done {
                uid: task_uid,
                id,
                kind,
                outcome,
                failure,
                requeue_hint,
            });
        });
        if kind == WorkKind::Sync {
            self.syncs_running += 1;
        }
        self.tasks.insert(
            uid,
            Task {
                id,
                kind,
                cancel,
                run: TaskRun::Running(handle),
            },
        );
    }
}

impl<S: PodSyncer> Drop for PodWorkers<S> {
    fn drop(&mut self) {
        for task in self.tasks.values() {
            if let TaskRun::Running(handle) = &task.run {
                handle.abort();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ANNOTATION_CONFIG_SOURCE;
    use std::cell::RefCell;
    use std::collections::HashSet;
    use std::collections::VecDeque;
    use std::rc::Rc;
    use std::time::Duration;
    use tokio::task::LocalSet;

    /// What the fake does for one call: take `delay` (unless cancelled), then return.
    #[derive(Debug, Clone, Copy)]
    struct Step {
        delay: Duration,
        result: FakeResult,
    }

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum FakeResult {
        Ok,
        Terminal,
        Fail,
        NetworkNotReady,
    }

    #[derive(Debug, Clone, PartialEq)]
    struct Call {
        /// Seconds since the test started (paused clock), as milliseconds.
        at_ms: u128,
        uid: String,
        kind: WorkKind,
        update: Option<UpdateType>,
        grace: Option<i64>,
        has_pod: bool,
        /// For syncs: the pod's hostname, to tell versions apart.
        version: Option<String>,
    }

    #[derive(Default)]
    struct FakeState {
        calls: Vec<Call>,
        /// (uid, kind, cancelled, at_ms) when each call ended.
        ended: Vec<(String, WorkKind, bool, u128)>,
        script: HashMap<(String, WorkKind), VecDeque<Step>>,
        in_flight: HashMap<String, u32>,
        /// SyncPod calls running now, and the most ever at once.
        syncs_now: usize,
        syncs_peak: usize,
    }

    /// A PodSyncer that records calls, follows a per-(uid, kind) script (default: succeed
    /// at once), and panics if two calls for one UID ever overlap.
    #[derive(Clone)]
    struct Fake {
        start: Instant,
        s: Rc<RefCell<FakeState>>,
    }

    impl Fake {
        fn new() -> Self {
            Fake {
                start: Instant::now(),
                s: Rc::default(),
            }
        }

        fn script(&self, uid: &str, kind: WorkKind, steps: &[(u64, FakeResult)]) {
            let mut s = self.s.borrow_mut();
            let q = s.script.entry((uid.to_string(), kind)).or_default();
            for (secs, result) in steps {
                q.push_back(Step {
                    delay: Duration::from_secs(*secs),
                    result: *result,
                });
            }
        }

        fn calls(&self) -> Vec<Call> {
            self.s.borrow().calls.clone()
        }

        /// (uid, kind, at seconds) of every call.
        fn timeline(&self) -> Vec<(String, WorkKind, u128)> {
            self.calls()
                .into_iter()
                .map(|c| (c.uid, c.kind, c.at_ms / 1000))
                .collect()
        }

        fn syncs_peak(&self) -> usize {
            self.s.borrow().syncs_peak
        }

        fn ended(&self) -> Vec<(String, WorkKind, bool, u128)> {
            self.s.borrow().ended.clone()
        }

        fn now_ms(&self) -> u128 {
            Instant::now().duration_since(self.start).as_millis()
        }

        fn run(
            &self,
            call: Call,
            cancel: Option<CancellationToken>,
        ) -> impl Future<Output = Result<bool, SyncFailure>> + use<> {
            let (uid, kind) = (call.uid.clone(), call.kind);
            let step = {
                let mut s = self.s.borrow_mut();
                s.calls.push(call);
                let n = s.in_flight.entry(uid.clone()).or_default();
                *n += 1;
                assert_eq!(*n, 1, "two calls in flight for {uid}");
                if kind == WorkKind::Sync {
                    s.syncs_now += 1;
                    s.syncs_peak = s.syncs_peak.max(s.syncs_now);
                }
                s.script
                    .get_mut(&(uid.clone(), kind))
                    .and_then(VecDeque::pop_front)
                    .unwrap_or(Step {
                        delay: Duration::ZERO,
                        result: FakeResult::Ok,
                    })
            };
            let me = self.clone();
            async move {
                let cancel = cancel.unwrap_or_default();
                let cancelled = tokio::select! {
                    biased;
                    () = cancel.cancelled() => true,
                    () = tokio::time::sleep(step.delay) => false,
                };
                {
                    let at = me.now_ms();
                    let mut s = me.s.borrow_mut();
                    *s.in_flight.entry(uid.clone()).or_default() -= 1;
                    if kind == WorkKind::Sync {
                        s.syncs_now -= 1;
                    }
                    s.ended.push((uid, kind, cancelled, at));
                }
                if cancelled {
                    return Err(SyncFailure::new("cancelled"));
                }
                match step.result {
                    FakeResult::Ok => Ok(false),
                    FakeResult::Terminal => Ok(true),
                    FakeResult::Fail => Err(SyncFailure::new("boom")),
                    FakeResult::NetworkNotReady => Err(SyncFailure::network_not_ready("no cni")),
                }
            }
        }
    }

    impl PodSyncer for Fake {
        fn sync_pod(
            &self,
            update: UpdateType,
            pod: Arc<Pod>,
            cancel: CancellationToken,
        ) -> impl Future<Output = Result<SyncPodOk, SyncFailure>> {
            let call = Call {
                at_ms: self.now_ms(),
                uid: pod.uid().to_string(),
                kind: WorkKind::Sync,
                update: Some(update),
                grace: None,
                has_pod: true,
                version: pod.spec.hostname.clone(),
            };
            let fut = self.run(call, Some(cancel));
            async move {
                fut.await.map(|terminal| SyncPodOk {
                    terminal,
                    requeue_after: None,
                })
            }
        }

        fn sync_terminating_pod(
            &self,
            uid: String,
            pod: Option<Arc<Pod>>,
            grace_secs: i64,
            cancel: CancellationToken,
        ) -> impl Future<Output = Result<(), SyncFailure>> {
            let call = Call {
                at_ms: self.now_ms(),
                uid,
                kind: WorkKind::Terminating,
                update: None,
                grace: Some(grace_secs),
                has_pod: pod.is_some(),
                version: None,
            };
            let fut = self.run(call, Some(cancel));
            async move { fut.await.map(|_| ()) }
        }

        fn sync_terminated_pod(
            &self,
            uid: String,
            pod: Option<Arc<Pod>>,
        ) -> impl Future<Output = Result<(), SyncFailure>> {
            let call = Call {
                at_ms: self.now_ms(),
                uid,
                kind: WorkKind::Terminated,
                update: None,
                grace: None,
                has_pod: pod.is_some(),
                version: None,
            };
            let fut = self.run(call, None);
            async move { fut.await.map(|_| ()) }
        }
    }

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

    fn version(p: &Arc<Pod>, v: &str) -> Arc<Pod> {
        let mut p = Pod::clone(p);
        p.spec.hostname = Some(v.into());
        Arc::new(p)
    }

    /// Handles events until `secs` of (paused) time passed since the fake started.
    async fn run_until(w: &mut PodWorkers<Fake>, fake: &Fake, secs: u64) -> Vec<WorkerEvent> {
        let deadline = fake.start + Duration::from_secs(secs);
        let mut events = Vec::new();
        while let Ok(ev) = tokio::time::timeout_at(deadline, w.next()).await {
            events.push(ev);
        }
        events
    }

    fn local<F: Future>(f: F) -> impl Future<Output = F::Output> {
        let set = LocalSet::new();
        async move { set.run_until(f).await }
    }

    use FakeResult::{Fail, NetworkNotReady, Ok as Pass, Terminal};
    use WorkKind::{Sync, Terminated, Terminating};

    fn tl(rows: &[(&str, WorkKind, u128)]) -> Vec<(String, WorkKind, u128)> {
        rows.iter()
            .map(|(u, k, t)| (u.to_string(), *k, *t))
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn one_sync_in_flight_per_uid_latest_wins() {
        local(async {
            let fake = Fake::new();
            fake.script("a", Sync, &[(5, Pass)]);
            let mut w = PodWorkers::new(fake.clone());
            let a = pod("web", "a");
            w.update_pod(UpdatePodOptions::new(UpdateType::Create, version(&a, "v1")));
            run_until(&mut w, &fake, 1).await;
            w.update_pod(UpdatePodOptions::new(UpdateType::Update, version(&a, "v2")));
            w.update_pod(UpdatePodOptions::new(UpdateType::Update, version(&a, "v3")));
            run_until(&mut w, &fake, 10).await;
            let calls = fake.calls();
            assert_eq!(calls.len(), 2, "{calls:?}");
            assert_eq!(
                (calls[0].at_ms, calls[0].version.as_deref()),
                (0, Some("v1"))
            );
            assert_eq!(calls[0].update, Some(UpdateType::Create));
            // The second sync starts when the first ends, with the latest version only.
            assert_eq!(
                (calls[1].at_ms, calls[1].version.as_deref()),
                (5000, Some("v3"))
            );
            assert_eq!(calls[1].update, Some(UpdateType::Update));
        })
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn different_uids_sync_concurrently() {
        local(async {
            let fake = Fake::new();
            fake.script("a", Sync, &[(5, Pass)]);
            fake.script("b", Sync, &[(5, Pass)]);
            let mut w = PodWorkers::new(fake.clone());
            w.update_pod(UpdatePodOptions::new(UpdateType::Create, pod("a", "a")));
            w.update_pod(UpdatePodOptions::new(UpdateType::Create, pod("b", "b")));
            let events = run_until(&mut w, &fake, 6).await;
            assert_eq!(fake.timeline(), tl(&[("a", Sync, 0), ("b", Sync, 0)]));
            let ends: Vec<u128> = fake.ended().iter().map(|e| e.3).collect();
            assert_eq!(ends, [5000, 5000]);
            assert_eq!(events.len(), 2);
        })
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn kill_during_slow_sync_cancels_it_and_terminates() {
        local(async {
            let fake = Fake::new();
            fake.script("a", Sync, &[(100, Pass)]);
            fake.script("a", Terminating, &[(3, Pass)]);
            let mut w = PodWorkers::new(fake.clone());
            let a = pod("web", "a");
            w.update_pod(UpdatePodOptions::new(UpdateType::Create, Arc::clone(&a)));
            run_until(&mut w, &fake, 1).await;
            w.update_pod(UpdatePodOptions::kill(Arc::clone(&a), None));
            assert!(w.is_terminating("a"));
            let events = run_until(&mut w, &fake, 10).await;
            assert_eq!(
                fake.timeline(),
                tl(&[("a", Sync, 0), ("a", Terminating, 1), ("a", Terminated, 4)])
            );
            assert_eq!(
                fake.ended()[0],
                ("a".into(), Sync, true, 1000),
                "sync cancelled at 1 s"
            );
            assert_eq!(fake.calls()[1].grace, Some(30));
            assert!(matches!(
                &events[0],
                WorkerEvent::Completed {
                    work: Sync,
                    outcome: Outcome::Cancelled,
                    ..
                }
            ));
            assert!(w.is_finished("a"));
            assert!(!w.is_terminating("a"));
            assert_eq!(w.requeue_at("a"), None, "a finished worker has no timer");
        })
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn grace_shrink_restarts_termination_with_the_shorter_grace() {
        local(async {
            let fake = Fake::new();
            // The first attempt would take the full 30 s grace.
            fake.script("a", Terminating, &[(30, Pass), (2, Pass)]);
            let mut w = PodWorkers::new(fake.clone());
            let a = pod("web", "a");
            w.update_pod(UpdatePodOptions::new(UpdateType::Create, Arc::clone(&a)));
            run_until(&mut w, &fake, 1).await;
            w.update_pod(UpdatePodOptions::kill(Arc::clone(&a), None));
            run_until(&mut w, &fake, 3).await;
            w.update_pod(UpdatePodOptions::kill(Arc::clone(&a), Some(5)));
            // A longer one later changes nothing.
            w.update_pod(UpdatePodOptions::kill(Arc::clone(&a), Some(20)));
            run_until(&mut w, &fake, 60).await;
            let calls = fake.calls();
            let terminating: Vec<(u128, Option<i64>)> = calls
                .iter()
                .filter(|c| c.kind == Terminating)
                .map(|c| (c.at_ms, c.grace))
                .collect();
            // Cancelled at 3 s and restarted once with 5 s: both later kills were pending
            // together and collapse into that one restart (latest wins).
            assert_eq!(terminating, [(1000, Some(30)), (3000, Some(5))]);
            assert_eq!(fake.ended()[1], ("a".into(), Terminating, true, 3000));
            assert!(w.is_finished("a"));
        })
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn edited_static_pod_starts_after_old_uid_finished_terminated() {
        local(async {
            let fake = Fake::new();
            fake.script("old", Terminating, &[(3, Pass)]);
            fake.script("old", Terminated, &[(1, Fail), (2, Pass)]);
            let mut w = PodWorkers::new(fake.clone());
            let old = pod("web", "old");
            let new = pod("web", "new");
            w.update_pod(UpdatePodOptions::new(UpdateType::Create, Arc::clone(&old)));
            run_until(&mut w, &fake, 1).await;
            // The manifest was edited: REMOVE old, ADD new (merge order).
            w.update_pod(UpdatePodOptions::kill(Arc::clone(&old), None));
            w.update_pod(UpdatePodOptions::new(UpdateType::Create, Arc::clone(&new)));
            assert!(w.is_waiting_to_start("new"));
            run_until(&mut w, &fake, 60).await;
            // old: Terminating 1→4, Terminated 4→5 fails, retried after [10, 15) s, and
            // only when that retry finished does new start.
            let timeline = fake.timeline();
            assert_eq!(
                timeline[..4],
                tl(&[
                    ("old", Sync, 0),
                    ("old", Terminating, 1),
                    ("old", Terminated, 4),
                    ("old", Terminated, timeline[3].2),
                ])[..]
            );
            let retry_at = fake.calls()[3].at_ms;
            assert!(
                (15_000..20_000).contains(&retry_at),
                "retry at {retry_at} ms"
            );
            let new_sync = fake
                .calls()
                .into_iter()
                .find(|c| c.uid == "new")
                .expect("new pod synced");
            let old_done = fake.ended()[3].3;
            assert_eq!(
                new_sync.at_ms, old_done,
                "new starts the moment old finished"
            );
            assert_eq!(new_sync.update, Some(UpdateType::Create));
            assert!(w.is_finished("old"));
            assert_eq!(w.state("new"), Some(PodWorkerState::SyncPod));
        })
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn requeue_timings() {
        local(async {
            let fake = Fake::new();
            // ok → resync in [60, 90) s; fail → [10, 15) s; network → [1, 1.5) s
            fake.script(
                "a",
                Sync,
                &[(0, Pass), (0, Fail), (0, NetworkNotReady), (0, Pass)],
            );
            let mut w = PodWorkers::new(fake.clone());
            w.update_pod(UpdatePodOptions::new(UpdateType::Create, pod("web", "a")));
            run_until(&mut w, &fake, 200).await;
            let at: Vec<u128> = fake.calls().iter().map(|c| c.at_ms).collect();
            let gaps: Vec<u128> = at.windows(2).map(|p| p[1] - p[0]).collect();
            assert!((60_000..90_000).contains(&gaps[0]), "{gaps:?}");
            assert!((10_000..15_000).contains(&gaps[1]), "{gaps:?}");
            assert!((1_000..1_500).contains(&gaps[2]), "{gaps:?}");
            assert!((60_000..90_000).contains(&gaps[3]), "{gaps:?}");
            assert!(
                fake.calls()[1..]
                    .iter()
                    .all(|c| c.update == Some(UpdateType::Sync))
            );
        })
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn an_update_supersedes_the_resync_timer() {
        local(async {
            let fake = Fake::new();
            let mut w = PodWorkers::new(fake.clone());
            let a = pod("web", "a");
            w.update_pod(UpdatePodOptions::new(UpdateType::Create, Arc::clone(&a)));
            run_until(&mut w, &fake, 30).await;
            assert!(w.requeue_at("a").is_some());
            w.update_pod(UpdatePodOptions::new(UpdateType::Update, Arc::clone(&a)));
            run_until(&mut w, &fake, 89).await;
            // Syncs at 0 and 30 only: the timer armed at 0 (due in [60, 90)) was replaced
            // by the one armed after the sync at 30 (due in [90, 120)).
            assert_eq!(fake.timeline(), tl(&[("a", Sync, 0), ("a", Sync, 30)]));
        })
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn terminal_sync_terminates_at_once() {
        local(async {
            let fake = Fake::new();
            fake.script("a", Sync, &[(2, Terminal)]);
            let mut w = PodWorkers::new(fake.clone());
            w.update_pod(UpdatePodOptions::new(UpdateType::Create, pod("job", "a")));
            run_until(&mut w, &fake, 10).await;
            assert_eq!(
                fake.timeline(),
                tl(&[("a", Sync, 0), ("a", Terminating, 2), ("a", Terminated, 2)])
            );
            assert!(w.is_finished("a"));
            // Updates from the source do not restart a finished pod.
            w.update_pod(UpdatePodOptions::new(UpdateType::Update, pod("job", "a")));
            run_until(&mut w, &fake, 20).await;
            assert_eq!(fake.calls().len(), 3);
        })
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn runtime_only_pod_kill_terminates_without_spec_and_is_forgotten() {
        local(async {
            let fake = Fake::new();
            let mut w = PodWorkers::new(fake.clone());
            w.update_pod(UpdatePodOptions::kill_runtime_pod("r", None));
            assert!(w.is_terminating("r"));
            run_until(&mut w, &fake, 5).await;
            let calls = fake.calls();
            assert_eq!(
                fake.timeline(),
                tl(&[("r", Terminating, 0), ("r", Terminated, 0)])
            );
            assert_eq!((calls[0].grace, calls[0].has_pod), (Some(1), false));
            assert!(!calls[1].has_pod);
            assert!(w.is_finished("r"));
            assert_eq!(w.sync_known_pods(|_| false), ["r".to_string()]);
            assert!(!w.is_known("r"));
            assert!(w.known_uids().is_empty());
        })
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn failed_termination_retries_until_it_succeeds() {
        local(async {
            let fake = Fake::new();
            fake.script("a", Terminating, &[(0, Fail), (0, Fail), (0, Pass)]);
            let mut w = PodWorkers::new(fake.clone());
            let a = pod("web", "a");
            w.update_pod(UpdatePodOptions::new(UpdateType::Create, Arc::clone(&a)));
            w.update_pod(UpdatePodOptions::kill(a, Some(2)));
            let events = run_until(&mut w, &fake, 60).await;
            let kinds: Vec<WorkKind> = fake.calls().iter().map(|c| c.kind).collect();
            assert_eq!(kinds, [Sync, Terminating, Terminating, Terminating, Terminated]);
            assert!(fake.calls()[1..4].iter().all(|c| c.grace == Some(2)));
            let failures = events
                .iter()
                .filter(|e| matches!(e, WorkerEvent::Completed { failure: Some(f), .. } if f.message == "boom"))
                .count();
            assert_eq!(failures, 2);
            assert!(w.is_finished("a"));
        })
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn sync_known_pods_terminates_orphans_and_forgets_finished() {
        local(async {
            let fake = Fake::new();
            let mut w = PodWorkers::new(fake.clone());
            w.update_pod(UpdatePodOptions::new(UpdateType::Create, pod("web", "a")));
            w.update_pod(UpdatePodOptions::new(UpdateType::Create, pod("db", "b")));
            run_until(&mut w, &fake, 1).await;
            let desired: HashSet<String> = ["b".to_string()].into();
            assert!(w.sync_known_pods(|uid| desired.contains(uid)).is_empty());
            run_until(&mut w, &fake, 2).await;
            assert!(w.is_finished("a"));
            assert_eq!(
                w.sync_known_pods(|uid| desired.contains(uid)),
                ["a".to_string()]
            );
            assert_eq!(w.known_uids(), ["b".to_string()]);
        })
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn next_is_cancel_safe() {
        local(async {
            let fake = Fake::new();
            fake.script("a", Sync, &[(5, Pass)]);
            let mut w = PodWorkers::new(fake.clone());
            w.update_pod(UpdatePodOptions::new(UpdateType::Create, pod("web", "a")));
            // Drop next() repeatedly before anything is ready; nothing is lost.
            for _ in 0..4 {
                let r = tokio::time::timeout(Duration::from_secs(1), w.next()).await;
                assert!(r.is_err());
            }
            let ev = w.next().await;
            assert!(matches!(ev, WorkerEvent::Completed { work: Sync, .. }));
            assert!(w.requeue_at("a").is_some());
        })
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn syncs_beyond_the_bound_wait_their_turn_in_arrival_order() {
        local(async {
            let fake = Fake::new();
            for u in ["a", "b", "c", "d", "e"] {
                fake.script(u, Sync, &[(10, Pass)]);
            }
            let mut w = PodWorkers::new(fake.clone()).with_max_syncs_in_flight(2);
            for u in ["a", "b", "c", "d", "e"] {
                w.update_pod(UpdatePodOptions::new(UpdateType::Create, pod(u, u)));
            }
            assert_eq!((w.in_flight(), w.queued()), (5, 3));
            run_until(&mut w, &fake, 35).await;
            assert_eq!(
                fake.timeline(),
                tl(&[
                    ("a", Sync, 0),
                    ("b", Sync, 0),
                    ("c", Sync, 10),
                    ("d", Sync, 10),
                    ("e", Sync, 20),
                ])
            );
            assert_eq!(fake.syncs_peak(), 2);
            assert_eq!((w.in_flight(), w.queued()), (0, 0));
            // Every one is a synced pod with its resync armed, as without a bound.
            for u in ["a", "b", "c", "d", "e"] {
                assert_eq!(w.state(u), Some(PodWorkerState::SyncPod), "{u}");
                assert!(w.requeue_at(u).is_some(), "{u}");
            }
        })
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_slot_freed_goes_to_the_oldest_waiter_not_to_new_work() {
        local(async {
            let fake = Fake::new();
            fake.script("a", Sync, &[(10, Pass)]);
            fake.script("b", Sync, &[(10, Pass)]);
            let mut w = PodWorkers::new(fake.clone()).with_max_syncs_in_flight(1);
            w.update_pod(UpdatePodOptions::new(UpdateType::Create, pod("a", "a")));
            w.update_pod(UpdatePodOptions::new(UpdateType::Create, pod("b", "b")));
            run_until(&mut w, &fake, 1).await;
            // An update of the running pod is pending behind its sync; when that ends, the
            // slot goes to b (waiting since t=0), and a's pending update waits behind it.
            w.update_pod(UpdatePodOptions::new(
                UpdateType::Update,
                version(&pod("a", "a"), "v2"),
            ));
            run_until(&mut w, &fake, 25).await;
            assert_eq!(
                fake.timeline(),
                tl(&[("a", Sync, 0), ("b", Sync, 10), ("a", Sync, 20)])
            );
            assert_eq!(fake.calls()[2].version.as_deref(), Some("v2"));
        })
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn kills_never_wait_for_a_slot_and_a_queued_sync_is_dropped() {
        local(async {
            let fake = Fake::new();
            fake.script("a", Sync, &[(10, Pass)]);
            let mut w = PodWorkers::new(fake.clone()).with_max_syncs_in_flight(1);
            let (a, b) = (pod("a", "a"), pod("b", "b"));
            w.update_pod(UpdatePodOptions::new(UpdateType::Create, Arc::clone(&a)));
            w.update_pod(UpdatePodOptions::new(UpdateType::Create, Arc::clone(&b)));
            assert_eq!(w.queued(), 1);
            // b is killed while its SyncPod waits: it never runs; b terminates at once.
            w.update_pod(UpdatePodOptions::kill(Arc::clone(&b), Some(5)));
            // A pod known only from the runtime is stopped at once too.
            w.update_pod(UpdatePodOptions::kill_runtime_pod("orphan", None));
            let events = run_until(&mut w, &fake, 30).await;
            assert!(events.contains(&WorkerEvent::Completed {
                uid: "b".into(),
                work: Sync,
                outcome: Outcome::Cancelled,
                failure: Some(SyncFailure::new("cancelled before it started")),
            }));
            // (b's termination starts once its dropped sync reported back; the order
            // between b and the orphan does not matter.)
            let mut timeline = fake.timeline();
            timeline.sort_by_key(|(u, k, at)| (*at, u.clone(), *k as u8));
            assert_eq!(
                timeline,
                tl(&[
                    ("a", Sync, 0),
                    ("b", Terminating, 0),
                    ("b", Terminated, 0),
                    ("orphan", Terminating, 0),
                    ("orphan", Terminated, 0),
                ])
            );
            assert!(w.is_finished("b") && w.is_finished("orphan"));
            assert_eq!(w.state("a"), Some(PodWorkerState::SyncPod));
        })
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_drops_queued_syncs() {
        local(async {
            let fake = Fake::new();
            fake.script("a", Sync, &[(10, Pass)]);
            let mut w = PodWorkers::new(fake.clone()).with_max_syncs_in_flight(1);
            w.update_pod(UpdatePodOptions::new(UpdateType::Create, pod("a", "a")));
            w.update_pod(UpdatePodOptions::new(UpdateType::Create, pod("b", "b")));
            run_until(&mut w, &fake, 1).await;
            w.shutdown();
            run_until(&mut w, &fake, 30).await;
            assert_eq!(fake.timeline(), tl(&[("a", Sync, 0)]));
            assert_eq!((w.in_flight(), w.queued()), (0, 0));
        })
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_stops_work_and_timers() {
        local(async {
            let fake = Fake::new();
            fake.script("a", Sync, &[(100, Pass)]);
            let mut w = PodWorkers::new(fake.clone());
            w.update_pod(UpdatePodOptions::new(UpdateType::Create, pod("web", "a")));
            w.update_pod(UpdatePodOptions::new(UpdateType::Create, pod("db", "b")));
            run_until(&mut w, &fake, 1).await;
            w.shutdown();
            let r = tokio::time::timeout(Duration::from_secs(500), w.next()).await;
            assert!(r.is_err(), "no events after shutdown");
            assert_eq!(fake.calls().len(), 2);
        })
        .await;
    }
}
