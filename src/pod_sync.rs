//! The pod syncer (kubelet: the `podSyncer` the pod workers call — `SyncPod`,
//! `SyncTerminatingPod`, `SyncTerminatedPod`) over the runtime manager, and the pod state
//! the loop owns for it: the PLEG's pod cache, back-offs, statuses ([`PodState`]).
//!
//! The loop (`agent`) owns the [`PodState`] alone; the sync tasks never touch it. A sync
//! asks the loop for what it needs and reports what it did by [`SyncRequest`] messages:
//! `Begin` (the cached view, the back-offs) when it starts, `Finish` (the view after it,
//! which the loop caches and turns into the pod's status) when its runtime work is done.
//! The loop answers them before any other input (its `select!` is biased), so a sync's
//! report is applied before the loop sees that sync end. The loop builds the syncer and
//! hands it to the pod workers; this module never imports the loop.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use tokio_util::sync::CancellationToken;

use crate::allocation::{self, ResizeState};
use crate::api::Pod;
use crate::clock::{Clock, UnixNanos};
use crate::cri::{ContainerState, CriError, PodRuntimeStatus, Runtime};
use crate::kuberuntime::backoff::PodBackoffs;
use crate::kuberuntime::gc::{self, GcPolicy};
use crate::kuberuntime::plan::KillReason;
use crate::kuberuntime::sync::{self, PodSyncResult, StartOutcome, SyncEnv};
use crate::mem_trim::ShrinkSparse;
use crate::messages::{PodEvent, PodEventSender};
use crate::pleg::{self};
use crate::pod_workers::{PodSyncer, SyncFailure, SyncPodOk, UpdateType};
use crate::prober::ProbeHandle;
use crate::recorder::{self};
use crate::status::{self, StatusManager, WaitingReasons};

/// A cached pod view is trusted while the newest successful relist is younger than this,
/// or while the runtime's event stream is watched (kubelet: evented PLEG's
/// `updateGlobalCache`).
const POD_CACHE_TRUST: Duration = Duration::from_secs(10);

/// The pod state the loop owns and the syncs ask for and report to (see the module
/// comment).
#[derive(Default)]
pub(crate) struct PodState {
    pub(crate) statuses: StatusManager,
    pub(crate) backoffs: HashMap<String, PodBackoffs>,
    /// Why picolet killed a container, by container ID, for its terminated state's message
    /// (a liveness or startup probe failure); dropped when the pod is cleaned up.
    pub(crate) kill_messages: HashMap<String, String>,
    /// kubelet: the PLEG's pod cache — the runtime view each pod's last sync ended with,
    /// and when its read began. A sync reuses it unless the relister saw the pod change
    /// after that read (`changed`): an idle resync then costs no CRI call.
    pub(crate) pod_cache: PodCache,
    /// The relister's last change of each pod since its cached view was read.
    pub(crate) changed: HashMap<String, Changed>,
    /// Pods whose change a sync judged older than its cached view (see [`Changed`]): the
    /// next relist compares them against the cache again, whatever its lists show.
    pub(crate) recheck: HashSet<String>,
    /// When the newest successful relist began: a cached view is trusted only if a relist
    /// that began after its read found the pod unchanged (kubelet: `GetNewerThan`).
    pub(crate) relisted_at: Option<tokio::time::Instant>,
    /// Since when the runtime's event stream is watched (`None`: it is not): once a relist
    /// began after that, every change arrives as an event and the cache is confirmed now.
    pub(crate) watching_since: Option<tokio::time::Instant>,
    /// New pods the runtime holds nothing of (the relister's view, taken before any source
    /// update is handled, has no such UID): their first sync needs no status read.
    pub(crate) known_absent: HashSet<String>,
    /// Pods whose worker finished and was forgotten in this process's life (deleted, or
    /// stopped to be started again): if such a UID is wanted again (a static manifest put
    /// back with the same content has the same UID), it is a new pod, and its first sync
    /// removes what the runtime still holds of the old one — exited containers with their
    /// log files, sandboxes not ready — so that its restart counts and logs start over, as
    /// its age does. Upstream leaves them to the next container GC pass (≤ 1 min, or
    /// `--minimum-container-ttl-duration`), and a pod back sooner shows the old restarts
    /// beside a new age. Dropped once the runtime holds nothing of the UID.
    pub(crate) ended: HashSet<String>,
    /// apiserver mode: status changes go to the status syncer.
    pub(crate) events: Option<PodEventSender>,
    /// The prober's status view (its results go into each status; each status goes to it).
    pub(crate) probes: ProbeHandle,
    /// Every pod's `status.hostIP`.
    pub(crate) node_ip: Option<String>,
    /// `--root-dir`: the pods' termination message files.
    pub(crate) root_dir: PathBuf,
    /// In-place resize: each pod's resize conditions (the loop sets PodResizePending and
    /// starts PodResizeInProgress; a sync's report ends it), and what its running
    /// containers run with, by name.
    pub(crate) resize: allocation::ByKey<ResizeState>,
    /// The resize events (`None` in tests).
    pub(crate) recorder: Option<recorder::Recorder>,
}

/// A change the relister saw in a pod.
pub(crate) struct Changed {
    /// When it was seen: when the relist's answer arrived (its lists ran before then, at
    /// the latest) or when the event arrived.
    pub(crate) at: tokio::time::Instant,
    /// When that relist began (its lists ran after).
    pub(crate) began: tokio::time::Instant,
    /// What it saw of the pod; `None` when the view is unknown (an event for a container
    /// the view lacks). A sync whose cached view's reads ended after `began` and that is
    /// ahead of this ([`pleg::is_behind`]) keeps its view: the relist listed the pod halfway
    /// through that sync (the burst of a mass start: its sandbox there, its container not
    /// yet).
    pub(crate) seen: Option<pleg::SeenView>,
}

/// Each pod's view as its last sync ended: when its reads began and ended, and the view.
pub(crate) struct CachedPod {
    pub(crate) read_at: tokio::time::Instant,
    pub(crate) settled_at: tokio::time::Instant,
    pub(crate) status: PodRuntimeStatus,
}

/// The pod cache's map; each view is stored compacted ([`pleg::compact`]: its label and
/// annotation maps only where a reader needs them).
#[derive(Default)]
pub(crate) struct PodCache(HashMap<String, CachedPod>);

impl PodCache {
    pub(crate) fn get(&self, uid: &str) -> Option<&CachedPod> {
        self.0.get(uid)
    }

    pub(crate) fn insert(
        &mut self,
        uid: String,
        read_at: tokio::time::Instant,
        settled_at: tokio::time::Instant,
        mut status: PodRuntimeStatus,
    ) {
        pleg::compact(&mut status);
        self.0.insert(
            uid,
            CachedPod {
                read_at,
                settled_at,
                status,
            },
        );
    }

    pub(crate) fn remove(&mut self, uid: &str) {
        self.0.remove(uid);
    }
}

impl PodState {
    /// Gives back the table space a burst of pods left (see [`crate::mem_trim`]).
    pub(crate) fn compact(&mut self) {
        self.backoffs.shrink_sparse();
        self.kill_messages.shrink_sparse();
        self.pod_cache.0.shrink_sparse();
        self.changed.shrink_sparse();
        self.recheck.shrink_sparse();
        self.known_absent.shrink_sparse();
    }
}

/// What a sync asks of, or reports to, the loop that owns the [`PodState`]. Each is
/// answered (or applied) by [`PodState::answer`] on the loop, in the order sent.
pub(crate) enum SyncRequest {
    /// A `SyncPod` begins: whether the pod had an earlier run to clear, the runtime view to
    /// plan on if the cache still holds it, and the pod's back-offs (given back by
    /// `Backoffs`).
    Begin {
        uid: String,
        create: bool,
        reply: oneshot::Sender<Answer>,
    },
    /// The back-offs a `SyncPod` took with `Begin`, after it (also when it failed or was
    /// cancelled).
    Backoffs { uid: String, backoffs: PodBackoffs },
    /// Why a `SyncPod` killed containers (a liveness or startup probe failure), by
    /// container ID, for their terminated state's message.
    Killed { messages: Vec<(String, String)> },
    /// A `SyncPod`'s runtime work is done: cache the view after it and record the pod's
    /// status from it.
    Finish {
        pod: Arc<Pod>,
        view: SyncedView,
        reasons: WaitingReasons,
        reply: oneshot::Sender<Answer>,
    },
    /// A termination's view after the kill: the pod's status from it.
    Terminated {
        pod: Arc<Pod>,
        after: PodRuntimeStatus,
    },
    /// A `SyncTerminatedPod` cleaned the pod up: its bookkeeping goes.
    CleanedUp {
        uid: String,
        container_ids: Vec<String>,
    },
}

/// The loop's answers, one type for both questions (one channel type in the binary).
pub(crate) enum Answer {
    Start(Box<SyncStart>),
    Recorded(Recorded),
}

/// The loop's answer to [`SyncRequest::Begin`].
pub(crate) struct SyncStart {
    /// The UID's worker finished earlier in this process's life (see [`PodState::ended`]).
    ended: bool,
    /// The view to plan on without reading the runtime, and when its read began.
    cached: Option<(tokio::time::Instant, PodRuntimeStatus)>,
    backoffs: PodBackoffs,
}

/// The runtime view a `SyncPod` ended with.
pub(crate) struct SyncedView {
    /// When the reads it rests on began.
    read_at: tokio::time::Instant,
    /// When they ended; `None`: it is the cached view, unchanged.
    settled_at: Option<tokio::time::Instant>,
    status: PodRuntimeStatus,
    /// In-place resize after the sync: whether a running container still differs from
    /// the allocated pod, the failed step, what the running containers run with.
    resize: (bool, Option<String>, allocation::Named),
}

/// The loop's answer to [`SyncRequest::Finish`].
pub(crate) struct Recorded {
    /// The recorded phase is terminal.
    terminal: bool,
    /// `spec.activeDeadlineSeconds` (kubelet: the activeDeadlineHandler).
    deadline: status::ActiveDeadline,
}

impl PodState {
    /// Answers or applies a sync's request (see [`SyncRequest`]); `now` is the clock's.
    pub(crate) fn answer(&mut self, req: SyncRequest, now: UnixNanos) {
        match req {
            SyncRequest::Begin { uid, create, reply } => {
                let ended = create && self.ended.remove(&uid);
                let cached = if create {
                    // A UID the runtime has never held: nothing to read (start latency).
                    self.known_absent.remove(&uid).then(|| {
                        let empty = PodRuntimeStatus {
                            uid: uid.clone(),
                            ..PodRuntimeStatus::default()
                        };
                        (tokio::time::Instant::now(), empty)
                    })
                } else {
                    self.cached_status(&uid)
                };
                let backoffs = self.backoffs.remove(&uid).unwrap_or_default();
                let _ = reply.send(Answer::Start(Box::new(SyncStart {
                    ended,
                    cached,
                    backoffs,
                })));
            }
            SyncRequest::Backoffs { uid, backoffs } => {
                self.backoffs.insert(uid, backoffs);
            }
            SyncRequest::Killed { messages } => self.kill_messages.extend(messages),
            SyncRequest::Finish {
                pod,
                view,
                reasons,
                reply,
            } => {
                let _ = reply.send(Answer::Recorded(self.finish(&pod, view, &reasons, now)));
            }
            SyncRequest::Terminated { pod, after } => {
                self.record_status(&pod, &after, &WaitingReasons::new(), now);
            }
            SyncRequest::CleanedUp { uid, container_ids } => {
                self.resize.remove(&uid);
                self.backoffs.remove(&uid);
                self.pod_cache.remove(&uid);
                self.changed.remove(&uid);
                self.recheck.remove(&uid);
                for id in &container_ids {
                    self.kill_messages.remove(id);
                }
            }
        }
    }

    /// The cached runtime view of the pod, if the relister saw no change after its read, or
    /// only an earlier stage of it (see [`Changed::seen`]).
    fn cached_status(&mut self, uid: &str) -> Option<(tokio::time::Instant, PodRuntimeStatus)> {
        let cached = self.pod_cache.get(uid)?;
        let at = &cached.read_at;
        // A relister that stopped answering confirms nothing: after a while, read afresh.
        // A watched event stream confirms every view up to now once a relist began after
        // it opened (changes before it opened are that relist's).
        let watched = matches!(
            (self.relisted_at, self.watching_since),
            (Some(r), Some(w)) if r >= w
        );
        let relisted_since = watched
            || self
                .relisted_at
                .is_some_and(|r| r > *at && r.elapsed() < POD_CACHE_TRUST);
        if !relisted_since {
            return None;
        }
        let Some(changed) = self.changed.get(uid).filter(|c| c.at >= *at) else {
            return Some((*at, cached.status.clone()));
        };
        // A relist that began before this view's reads ended and saw an earlier stage of
        // it is no change: keep the view, and have the next relist compare the pod again
        // (what it did not see may have been removed rather than not created yet).
        let behind = changed.began < cached.settled_at
            && changed
                .seen
                .as_deref()
                .is_some_and(|seen| pleg::is_behind(seen, &cached.status));
        if !behind {
            return None;
        }
        let view = (*at, cached.status.clone());
        self.changed.remove(uid);
        self.recheck.insert(uid.to_string());
        Some(view)
    }

    /// A sync's view after it: cached, and the pod's status recorded from it; past its
    /// active deadline the pod is failed.
    fn finish(
        &mut self,
        pod: &Arc<Pod>,
        view: SyncedView,
        reasons: &WaitingReasons,
        now: UnixNanos,
    ) -> Recorded {
        let uid = pod.uid();
        // A change seen before these reads is in them.
        if self.changed.get(uid).is_some_and(|c| c.at < view.read_at) {
            self.changed.remove(uid);
        }
        // The view's reads ended now, or, reused as it was, when they ended before.
        self.resize_report(pod, &view.resize, now);
        let settled_at = view
            .settled_at
            .or_else(|| self.pod_cache.get(uid).map(|c| c.settled_at))
            .unwrap_or_else(tokio::time::Instant::now);
        let terminal = self.record_status(pod, &view.status, reasons, now);
        self.pod_cache
            .insert(uid.to_string(), view.read_at, settled_at, view.status);
        let deadline = status::active_deadline(pod, self.statuses.get(uid), now);
        if matches!(deadline, status::ActiveDeadline::Exceeded) && !terminal {
            log::warn!(
                "pod {}: {} ({}s): failing it",
                pod.full_name(),
                status::MESSAGE_DEADLINE_EXCEEDED,
                pod.spec.active_deadline_seconds.unwrap_or_default()
            );
            self.fail_pod(
                pod,
                status::REASON_DEADLINE_EXCEEDED,
                status::MESSAGE_DEADLINE_EXCEEDED,
            );
        }
        Recorded { terminal, deadline }
    }

    /// kubelet: the PodResizeInProgress condition after a sync (`IsPodResizeInProgress`,
    /// a failed `ResizePodInPlace` step), with the ResizeError and ResizeCompleted events.
    fn resize_report(
        &mut self,
        pod: &Pod,
        (in_progress, error, actual): &(bool, Option<String>, allocation::Named),
        now: UnixNanos,
    ) {
        if !allocation::ENABLED {
            return;
        }
        let uid = pod.uid();
        if self.resize.get(uid).is_none() && error.is_none() && !in_progress && actual.is_empty() {
            return;
        }
        let c = self.resize.entry(uid);
        c.actual.clone_from(actual);
        let generation = pod.metadata.generation;
        let at = crate::clock::rfc3339(now);
        let event = if let Some(e) = error {
            c.set_in_progress(allocation::REASON_ERROR, e, generation, at)
                .then(|| {
                    let g = c
                        .in_progress
                        .as_ref()
                        .map_or(generation, |c| c.observed_generation);
                    (
                        true,
                        "ResizeError",
                        allocation::event_message("Pod resize error", pod, g, e),
                    )
                })
        } else if *in_progress {
            c.set_in_progress("", "", generation, at);
            None
        } else {
            c.clear_in_progress().map(|g| {
                (
                    false,
                    "ResizeCompleted",
                    allocation::event_message("Pod resize completed", pod, g, ""),
                )
            })
        };
        if *c == ResizeState::default() {
            self.resize.remove(uid);
        }
        if let (Some((warning, reason, message)), Some(r)) = (event, &self.recorder) {
            if warning {
                r.warning(pod, None, reason, message);
            } else {
                r.normal(pod, None, reason, message);
            }
        }
    }

    /// Recomputes the API status from a fresh runtime view and stores it (logged on change).
    fn record_status(
        &mut self,
        pod: &Arc<Pod>,
        observed: &PodRuntimeStatus,
        reasons: &WaitingReasons,
        now: UnixNanos,
    ) -> bool {
        let mut observed = observed.clone();
        sync::fill_termination_messages(&self.root_dir, pod, &mut observed);
        // The last state says why picolet killed it (the runtime only knows "Error", 137).
        for c in &mut observed.containers {
            if c.message.is_empty() {
                if let Some(m) = self.kill_messages.get(&c.id) {
                    c.message.clone_from(m);
                }
            }
        }
        let previous = self.statuses.get(pod.uid());
        let probe_results = self.probes.status_results(&observed);
        let st = status::compute_pod_status_with(
            pod,
            &observed,
            reasons,
            previous,
            now,
            self.node_ip.as_deref(),
            &status::StatusOptions {
                probes: Some(&probe_results),
                resize: self.resize.get(pod.uid()),
                ..Default::default()
            },
        );
        self.probes.observe(pod, &st);
        let terminal = st.phase.is_some_and(|p| p.is_terminal());
        self.set_status(pod, st);
        terminal
    }

    /// The pod's status becomes Failed with `reason` and `message` (kubelet: a pod sync
    /// handler's eviction verdict); terminal phases stick, so later syncs keep it.
    pub(crate) fn fail_pod(&mut self, pod: &Arc<Pod>, reason: &str, message: &str) {
        let mut st = self.statuses.get(pod.uid()).cloned().unwrap_or_default();
        st.phase = Some(crate::api::PodPhase::Failed);
        st.reason = Some(reason.to_string());
        st.message = Some(message.to_string());
        self.set_status(pod, st);
    }

    /// [`Self::fail_pod`] for a pod the kubelet itself disrupts (node shutdown, eviction),
    /// with the `DisruptionTarget` condition (kubelet: `TerminationByKubelet`, the status
    /// update of `killPodFunc`; the status generator carries it over).
    pub(crate) fn fail_pod_disrupted(
        &mut self,
        pod: &Arc<Pod>,
        reason: &str,
        message: &str,
        now: UnixNanos,
    ) {
        let mut st = self.statuses.get(pod.uid()).cloned().unwrap_or_default();
        st.phase = Some(crate::api::PodPhase::Failed);
        st.reason = Some(reason.to_string());
        st.message = Some(message.to_string());
        crate::status::set_disruption_target(&mut st, message, now);
        self.set_status(pod, st);
    }

    /// Stores the pod's status; a change goes on to the status syncer (apiserver mode).
    pub(crate) fn set_status(&mut self, pod: &Arc<Pod>, st: crate::api::PodStatus) {
        if self.statuses.set(pod.uid(), &pod.full_name(), st)
            && let (Some(tx), Some(status)) = (&self.events, self.statuses.get_shared(pod.uid()))
        {
            tx.send(PodEvent::Status {
                pod: Arc::clone(pod),
                status,
            });
        }
    }
}

/// kubelet's `podSyncer` (SyncPod / SyncTerminatingPod / SyncTerminatedPod) over the CRI.
#[derive(Clone)]
pub(crate) struct KubeletSyncer<R: Runtime, C: Clock> {
    env: SyncEnv<R, C>,
    /// The prober's results (the plan's input).
    probes: ProbeHandle,
    /// To the loop, which owns the pod state (see [`SyncRequest`]).
    to_loop: mpsc::UnboundedSender<SyncRequest>,
    /// Rung after a sync changed the runtime: the PLEG relists soon even while it runs
    /// slower (every running process watched for its exit).
    pleg_poke: Rc<tokio::sync::Notify>,
    /// The runtime reads (and status work) of terminations before and after their kills,
    /// at most [`TERMINATION_STEPS_IN_FLIGHT`] at once; the kills themselves never wait.
    kill_steps: Rc<tokio::sync::Semaphore>,
    /// SyncTerminatedPods' cleanups (status read, volume teardown, the pod directory), at
    /// most [`TERMINATION_STEPS_IN_FLIGHT`] at once. Apart from `kill_steps` so that a slow
    /// cleanup (a CSI driver's unpublish) never holds up a kill.
    cleanups: Rc<tokio::sync::Semaphore>,
}

/// How many terminations read the runtime, and how many clean up, at once.
///
/// A deliberate difference from the kubelet, whose goroutines run every termination's
/// steps at once: here each step in flight holds its decoded runtime status, its status
/// computation and its CRI call's buffers, and a mass delete of 500 pods took the RSS from
/// 13 to 23 MB, most of which the allocator kept afterwards. Only the bookkeeping waits;
/// the StopContainer calls — which wait out grace periods — are all in flight together,
/// so one pod's grace period never delays another's kill: a kill waits at most for the
/// status reads of the terminations ahead of it (a few milliseconds each).
pub const TERMINATION_STEPS_IN_FLIGHT: usize = 32;

/// A permit from one of the termination bounds; the semaphores are never closed.
async fn step_permit(slots: &tokio::sync::Semaphore) -> Option<tokio::sync::SemaphorePermit<'_>> {
    slots.acquire().await.ok()
}

/// The loop stopped (picolet is shutting down): the sync ends, its work left to the next
/// picolet, which adopts the pods.
fn loop_gone() -> SyncFailure {
    SyncFailure::new("cancelled: the agent is stopping")
}

impl<R: Runtime, C: Clock> KubeletSyncer<R, C> {
    /// The syncer over the runtime manager's `env`, reading the prober's results, asking
    /// and telling the loop on `to_loop`, ringing `pleg_poke` after a change.
    pub(crate) fn new(
        env: SyncEnv<R, C>,
        probes: ProbeHandle,
        to_loop: mpsc::UnboundedSender<SyncRequest>,
        pleg_poke: Rc<tokio::sync::Notify>,
    ) -> Self {
        KubeletSyncer {
            env,
            probes,
            to_loop,
            pleg_poke,
            kill_steps: Rc::new(tokio::sync::Semaphore::new(TERMINATION_STEPS_IN_FLIGHT)),
            cleanups: Rc::new(tokio::sync::Semaphore::new(TERMINATION_STEPS_IN_FLIGHT)),
        }
    }

    /// Sends a report to the loop (dropped when the loop has stopped).
    fn tell(&self, req: SyncRequest) {
        let _ = self.to_loop.send(req);
    }

    /// Asks the loop; its answer, or `None` once it stopped.
    async fn ask(
        &self,
        req: impl FnOnce(oneshot::Sender<Answer>) -> SyncRequest,
    ) -> Option<Answer> {
        let (tx, rx) = oneshot::channel();
        self.to_loop.send(req(tx)).ok()?;
        rx.await.ok()
    }
}

impl<R: Runtime, C: Clock> KubeletSyncer<R, C> {
    /// A pod wanted again after its worker finished: what the runtime holds of the old
    /// incarnation goes first (see `PodState::ended`), as a container GC pass for a pod no
    /// source wants would remove it (`gc::plan` with every dead object removable; nothing
    /// running is touched). A failure is logged; the sync goes on and counts on.
    async fn remove_old_incarnation(
        &self,
        pod: &Pod,
        cancel: &CancellationToken,
    ) -> Result<(), SyncFailure> {
        let old = tokio::select! {
            r = sync::get_pod_status(&self.env.runtime, pod.uid()) => r.map_err(failure)?,
            _ = cancel.cancelled() => return Err(SyncFailure::new("cancelled")),
        };
        let now = self.env.clock.now();
        let plan = gc::plan(std::iter::once(&old), |_| true, now, &GcPolicy::default());
        if plan.is_empty() {
            return Ok(());
        }
        let report = gc::execute(
            &self.env.runtime,
            &plan,
            &self.env.paths.pod_log_dir,
            HashSet::new(),
            now,
            false,
        )
        .await;
        log::info!(
            "pod {}: back after it was stopped; removed {} container(s) and {} sandbox(es) of its previous run",
            pod.full_name(),
            report.containers,
            report.sandboxes
        );
        for e in &report.errors {
            log::warn!("pod {}: previous run: {e}", pod.full_name());
        }
        Ok(())
    }
}

impl<R: Runtime, C: Clock> KubeletSyncer<R, C> {
    /// `SyncPod` with the pod's back-offs, which the caller gives back to the loop.
    async fn sync_pod_with(
        &self,
        pod: &Arc<Pod>,
        start: SyncStart,
        backoffs: &mut PodBackoffs,
        cancel: &CancellationToken,
    ) -> Result<SyncPodOk, SyncFailure> {
        // Step 1: a pod wanted again first loses what the runtime holds of its last run.
        if start.ended {
            self.remove_old_incarnation(pod, cancel).await?;
        }
        // Step 2: the runtime view to plan on, cached or read.
        let observed = self.observe(pod.uid(), start.cached, cancel).await?;
        // Step 3: the runtime manager's SyncPod.
        let verdicts = self.probes.verdicts(&observed.status);
        let result = tokio::select! {
            r = sync::sync_pod(&self.env, pod, &observed.status, backoffs, &verdicts) => Some(r),
            _ = cancel.cancelled() => None,
        };
        let Some(result) = result else {
            self.pleg_poke.notify_one();
            return Err(SyncFailure::new("cancelled"));
        };
        if !(result.actions.is_noop() && result.containers.is_empty()) {
            self.pleg_poke.notify_one();
        }
        // Step 4: why probes killed containers, before the status below is recorded: its
        // last state says why.
        self.report_probe_kills(&result);
        // Step 5: the runtime view after the sync.
        let view = self.view_after_sync(pod, observed, &result).await?;
        // Step 6: the loop caches the view and records the pod's status.
        let reasons = waiting_reasons(&result);
        let Some(Answer::Recorded(recorded)) = self
            .ask(|reply| SyncRequest::Finish {
                pod: Arc::clone(pod),
                view,
                reasons,
                reply,
            })
            .await
        else {
            return Err(loop_gone());
        };
        // Step 7: the outcome for the pod worker.
        sync_outcome(pod, &result, &recorded)
    }

    /// The runtime view a sync plans on: the loop's cached view if it gave one, else a
    /// status read (cancelled with the sync).
    async fn observe(
        &self,
        uid: &str,
        cached: Option<(tokio::time::Instant, PodRuntimeStatus)>,
        cancel: &CancellationToken,
    ) -> Result<Observed, SyncFailure> {
        let read_at = tokio::time::Instant::now();
        Ok(match cached {
            Some((at, status)) => Observed {
                status,
                read_at: at,
                from_cache: true,
            },
            None => Observed {
                status: tokio::select! {
                    r = sync::get_pod_status(&self.env.runtime, uid) => r.map_err(failure)?,
                    _ = cancel.cancelled() => return Err(SyncFailure::new("cancelled")),
                },
                read_at,
                from_cache: false,
            },
        })
    }

    /// Tells the loop why a liveness or startup probe had containers killed (their
    /// terminated state's message).
    fn report_probe_kills(&self, result: &PodSyncResult) {
        let kill_messages: Vec<(String, String)> = result
            .actions
            .containers_to_kill
            .iter()
            .filter(|(_, k)| {
                matches!(
                    k.reason,
                    KillReason::LivenessProbe | KillReason::StartupProbe
                )
            })
            .map(|(id, k)| (id.clone(), k.message.clone()))
            .collect();
        if !kill_messages.is_empty() {
            self.tell(SyncRequest::Killed {
                messages: kill_messages,
            });
        }
    }

    /// The runtime view after the sync, and the resize's state in it.
    ///
    /// A resync that changed nothing (the common case at idle) reuses what it read; one
    /// that only created things reads just those (`refresh_after_sync`: the view keeps
    /// the time of the read it planned on, so that a change the relister saw since then
    /// still invalidates it); anything else is read whole.
    async fn view_after_sync(
        &self,
        pod: &Pod,
        observed: Observed,
        result: &PodSyncResult,
    ) -> Result<SyncedView, SyncFailure> {
        let Observed {
            status: observed,
            mut read_at,
            from_cache,
        } = observed;
        let mut read_now = true;
        let after = if result.actions.is_noop() && result.containers.is_empty() {
            read_now = !from_cache;
            observed
        } else if let Some(after) = sync::refresh_after_sync(&self.env.runtime, &observed, result)
            .await
            .map_err(failure)?
        {
            after
        } else {
            read_at = tokio::time::Instant::now();
            sync::get_pod_status(&self.env.runtime, pod.uid())
                .await
                .map_err(failure)?
        };
        // kubelet: the resize's state after the sync (IsPodResizeInProgress).
        let resize = if allocation::ENABLED && allocation::resizable(pod) {
            let records = self.env.resized.of(&self.env.paths.root_dir, pod.uid());
            let (in_progress, actual) =
                crate::kuberuntime::sync::resize::report(pod, &after, &records);
            (in_progress, result.resize_error.clone(), actual)
        } else {
            Default::default()
        };
        Ok(SyncedView {
            read_at,
            settled_at: read_now.then(tokio::time::Instant::now),
            status: after,
            resize,
        })
    }
}

/// The runtime view a sync planned on ([`KubeletSyncer::observe`]).
struct Observed {
    status: PodRuntimeStatus,
    /// When its read began.
    read_at: tokio::time::Instant,
    /// It is the loop's cached view.
    from_cache: bool,
}

/// What a sync tells its pod worker, once the loop recorded the status.
///
/// kubelet: the activeDeadlineHandler — past spec.activeDeadlineSeconds the pod is
/// Failed (DeadlineExceeded, recorded by the loop) and terminated; before it, sync
/// again when it falls due.
fn sync_outcome(
    pod: &Pod,
    result: &PodSyncResult,
    recorded: &Recorded,
) -> Result<SyncPodOk, SyncFailure> {
    let mut requeue_after = result.requeue_after;
    match recorded.deadline {
        status::ActiveDeadline::Exceeded if !recorded.terminal => {
            return Ok(SyncPodOk {
                terminal: true,
                requeue_after: None,
            });
        }
        status::ActiveDeadline::Remaining(d) => {
            requeue_after = Some(requeue_after.map_or(d, |r| r.min(d)));
        }
        _ => {}
    }
    if result.is_error() {
        return Err(SyncFailure {
            message: describe_failure(pod, result),
            network_not_ready: result.network_not_ready(),
            runtime_down: result.runtime_down(),
        });
    }
    Ok(SyncPodOk {
        terminal: recorded.terminal,
        requeue_after,
    })
}

impl<R: Runtime, C: Clock> PodSyncer for KubeletSyncer<R, C> {
    async fn sync_pod(
        &self,
        update: UpdateType,
        pod: Arc<Pod>,
        cancel: CancellationToken,
    ) -> Result<SyncPodOk, SyncFailure> {
        let uid = pod.uid().to_string();
        let Some(Answer::Start(start)) = self
            .ask(|reply| SyncRequest::Begin {
                uid: uid.clone(),
                create: update == UpdateType::Create,
                reply,
            })
            .await
        else {
            return Err(loop_gone());
        };
        let mut start = *start;
        let mut backoffs = std::mem::take(&mut start.backoffs);
        let result = self
            .sync_pod_with(&pod, start, &mut backoffs, &cancel)
            .await;
        // The back-offs go back whatever the outcome (a failed start counts).
        self.tell(SyncRequest::Backoffs { uid, backoffs });
        result
    }

    async fn sync_terminating_pod(
        &self,
        uid: String,
        pod: Option<Arc<Pod>>,
        grace_secs: i64,
        cancel: CancellationToken,
    ) -> Result<(), SyncFailure> {
        // kubelet: podWorkers cancels the context of a running SyncTerminatingPod when the
        // grace period shrinks; the work then starts over with the shorter one. Dropping the
        // in-flight StopContainer calls is safe: the runtime already sent SIGTERM, and the
        // next StopContainer's shorter timeout brings the SIGKILL forward.
        // kubelet: SyncTerminatingPod → probeManager.StopLivenessAndStartup.
        self.probes.terminating(&uid);
        let kill = async {
            let observed = {
                let _step = step_permit(&self.kill_steps).await;
                sync::get_pod_status(&self.env.runtime, &uid)
                    .await
                    .map_err(failure)?
            };
            sync::kill_pod(&self.env, pod.as_deref(), &observed, Some(grace_secs))
                .await
                .map_err(sync_failure)
        };
        let killed = tokio::select! {
            r = kill => r,
            _ = cancel.cancelled() => {
                self.pleg_poke.notify_one();
                log::info!(
                    "pod {}: termination with grace {grace_secs}s cut short: a shorter grace period arrived",
                    pod.as_deref().map_or_else(|| uid.clone(), Pod::full_name)
                );
                return Err(SyncFailure::new("cancelled: a shorter grace period arrived"));
            }
        };
        self.pleg_poke.notify_one();
        killed?;
        let _step = step_permit(&self.kill_steps).await;
        let after = sync::get_pod_status(&self.env.runtime, &uid)
            .await
            .map_err(failure)?;
        if let Some(pod) = &pod {
            self.tell(SyncRequest::Terminated {
                pod: Arc::clone(pod),
                after: after.clone(),
            });
        }
        // kubelet: SyncTerminatingPod re-reads the runtime; anything still running is an error.
        if let Some(c) = after
            .containers
            .iter()
            .find(|c| c.state == ContainerState::Running)
        {
            // kubelet: killPodNow's events.ExceededGracePeriod — the runtime was given the
            // grace period and the container still runs.
            if let Some(pod) = &pod {
                self.env.managers.recorder.warning(
                    pod,
                    None,
                    recorder::EXCEEDED_GRACE_PERIOD,
                    "Container runtime did not kill the pod within specified grace period.",
                );
            }
            return Err(SyncFailure::new(format!(
                "container {} ({}) is still running after kill",
                c.name, c.id
            )));
        }
        Ok(())
    }

    async fn sync_terminated_pod(
        &self,
        uid: String,
        pod: Option<Arc<Pod>>,
    ) -> Result<(), SyncFailure> {
        let _step = step_permit(&self.cleanups).await;
        let observed = sync::get_pod_status(&self.env.runtime, &uid)
            .await
            .map_err(failure)?;
        sync::cleanup_pod(&self.env, &observed, &uid)
            .await
            .map_err(sync_failure)?;
        // The containers are gone: the pod's cgroup goes (a failure is retried by
        // housekeeping; it never holds the pod's termination up).
        if let Some(cg) = &self.env.node.pod_cgroups
            && let Err(e) = cg.remove(&uid, pod.as_deref()).await
        {
            log::warn!("pod {uid}: cgroup not removed (retried): {e}");
        }
        self.tell(SyncRequest::CleanedUp {
            uid,
            container_ids: observed.containers.into_iter().map(|c| c.id).collect(),
        });
        Ok(())
    }
}

/// kubelet's reasonCache: why each container that should run does not.
fn waiting_reasons(result: &PodSyncResult) -> WaitingReasons {
    result
        .containers
        .iter()
        .filter_map(|c| match &c.outcome {
            StartOutcome::Waiting { reason, message } => Some((
                c.name.clone(),
                (reason.as_str().to_string(), message.clone()),
            )),
            StartOutcome::Started { .. } => None,
        })
        .collect()
}

fn describe_failure(pod: &Pod, result: &PodSyncResult) -> String {
    let mut parts = Vec::new();
    if let Some(e) = &result.kill_error {
        parts.push(e.to_string());
    }
    if let Some(e) = &result.sandbox_error {
        parts.push(format!("sandbox: {}", e.message));
    }
    if let Some(e) = &result.resize_error {
        parts.push(format!("resize: {e}"));
    }
    for c in &result.containers {
        if let StartOutcome::Waiting { reason, message } = &c.outcome {
            if !reason.is_back_off() {
                parts.push(format!("container {}: {reason}: {message}", c.name));
            }
        }
    }
    format!(
        "sync of pod {} failed: {}",
        pod.full_name(),
        parts.join("; ")
    )
}

fn failure(e: CriError) -> SyncFailure {
    if matches!(e, CriError::Unavailable { .. }) {
        SyncFailure::runtime_down(e.to_string())
    } else {
        SyncFailure::new(e.to_string())
    }
}

fn sync_failure(e: sync::SyncError) -> SyncFailure {
    if e.runtime_down() {
        SyncFailure::runtime_down(e.to_string())
    } else {
        SyncFailure::new(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::testutil;

    fn begin(state: &mut PodState, uid: &str, create: bool) -> SyncStart {
        let (reply, mut rx) = oneshot::channel();
        state.answer(
            SyncRequest::Begin {
                uid: uid.to_string(),
                create,
                reply,
            },
            0,
        );
        match rx.try_recv() {
            Ok(Answer::Start(start)) => *start,
            _ => panic!("Begin is answered at once"),
        }
    }

    fn finish(state: &mut PodState, pod: &Arc<Pod>, read_at: tokio::time::Instant) -> Recorded {
        let (reply, mut rx) = oneshot::channel();
        let view = SyncedView {
            read_at,
            settled_at: Some(read_at),
            status: PodRuntimeStatus {
                uid: pod.uid().to_string(),
                ..PodRuntimeStatus::default()
            },
            resize: Default::default(),
        };
        state.answer(
            SyncRequest::Finish {
                pod: Arc::clone(pod),
                view,
                reasons: WaitingReasons::new(),
                reply,
            },
            1_000_000_000,
        );
        match rx.try_recv() {
            Ok(Answer::Recorded(recorded)) => recorded,
            _ => panic!("Finish is answered at once"),
        }
    }

    #[test]
    fn a_new_pod_starts_from_an_empty_view_once_and_an_ended_one_is_cleared_once() {
        let mut state = PodState::default();
        state.known_absent.insert("a".into());
        state.ended.insert("b".into());
        let a = begin(&mut state, "a", true);
        assert!(
            a.cached
                .is_some_and(|(_, v)| v.uid == "a" && v.containers.is_empty())
        );
        assert!(!a.ended);
        assert!(
            begin(&mut state, "a", true).cached.is_none(),
            "known absent only once"
        );
        let b = begin(&mut state, "b", true);
        assert!(b.ended && b.cached.is_none());
        assert!(!begin(&mut state, "b", true).ended, "cleared only once");
        // A resync (not a Create) never takes either.
        state.known_absent.insert("c".into());
        assert!(begin(&mut state, "c", false).cached.is_none());
        assert!(state.known_absent.contains("c"));
    }

    #[test]
    fn the_view_a_sync_finished_with_is_reused_only_after_a_relist_that_saw_no_change() {
        let mut state = PodState::default();
        let pod = Arc::new(testutil::pod(&["app"]));
        let t0 = tokio::time::Instant::now();
        let recorded = finish(&mut state, &pod, t0);
        assert!(!recorded.terminal);
        assert!(
            state.statuses.get("uid-1").is_some(),
            "the status is recorded"
        );
        // No relist since the read: read afresh.
        assert!(begin(&mut state, "uid-1", false).cached.is_none());
        // A relist that began after the read and saw no change: reuse.
        state.relisted_at = Some(t0 + Duration::from_millis(1));
        assert!(begin(&mut state, "uid-1", false).cached.is_some());
        // A change it saw after the read: read afresh.
        state.changed.insert(
            "uid-1".into(),
            Changed {
                at: t0 + Duration::from_millis(2),
                began: t0 + Duration::from_millis(1),
                seen: None,
            },
        );
        assert!(begin(&mut state, "uid-1", false).cached.is_none());
        // The next sync's reads include that change: it is dropped.
        finish(&mut state, &pod, t0 + Duration::from_millis(3));
        assert!(!state.changed.contains_key("uid-1"));
    }

    #[test]
    fn back_offs_go_out_with_begin_and_back_with_backoffs_and_cleanup_drops_everything() {
        let mut state = PodState::default();
        let mut backoffs = PodBackoffs::default();
        backoffs.crash_loop.next("app", 0, 0);
        state.answer(
            SyncRequest::Backoffs {
                uid: "a".into(),
                backoffs: backoffs.clone(),
            },
            0,
        );
        state.answer(
            SyncRequest::Killed {
                messages: vec![("c1".into(), "Liveness probe failed".into())],
            },
            0,
        );
        assert_eq!(begin(&mut state, "a", false).backoffs, backoffs);
        assert!(!state.backoffs.contains_key("a"), "the sync holds them");
        state.answer(
            SyncRequest::Backoffs {
                uid: "a".into(),
                backoffs,
            },
            0,
        );
        state.answer(
            SyncRequest::CleanedUp {
                uid: "a".into(),
                container_ids: vec!["c1".into()],
            },
            0,
        );
        assert!(state.backoffs.is_empty() && state.kill_messages.is_empty());
    }
}
