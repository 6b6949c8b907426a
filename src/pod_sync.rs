//! The pod syncer (kubelet: the `podSyncer` the pod workers call — `SyncPod`,
//! `SyncTerminatingPod`, `SyncTerminatedPod`) over the runtime manager, and the
//! bookkeeping it shares with the loop: the PLEG's pod cache, back-offs, statuses.
//!
//! The loop (`agent`) builds it and hands it to the pod workers; it never imports the
//! loop.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::api::Pod;
use crate::clock::Clock;
use crate::cri::{ContainerState, CriError, PodRuntimeStatus, Runtime};
use crate::kuberuntime::backoff::PodBackoffs;
use crate::kuberuntime::gc::{self, GcPolicy};
use crate::kuberuntime::plan::KillReason;
use crate::kuberuntime::sync::{self, PodSyncResult, StartOutcome, SyncEnv};
use crate::messages::{PodEvent, PodEventSender};
use crate::pleg::{self};
use crate::pod_workers::{PodSyncer, SyncFailure, SyncPodOk, UpdateType};
use crate::prober::ProbeHandle;
use crate::recorder::{self};
use crate::shrink::ShrinkSparse;
use crate::status::{self, StatusManager, WaitingReasons};

/// A cached pod view is trusted while the newest successful relist is younger than this,
/// or while the runtime's event stream is watched (kubelet: evented PLEG's
/// `updateGlobalCache`).
const POD_CACHE_TRUST: Duration = Duration::from_secs(10);

#[derive(Default)]
pub(crate) struct Shared {
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

impl Shared {
    /// Gives back the table space a burst of pods left (see [`crate::shrink`]).
    pub(crate) fn compact(&mut self) {
        self.backoffs.shrink_sparse();
        self.kill_messages.shrink_sparse();
        self.pod_cache.0.shrink_sparse();
        self.changed.shrink_sparse();
        self.recheck.shrink_sparse();
        self.known_absent.shrink_sparse();
    }
}

/// kubelet's `podSyncer` (SyncPod / SyncTerminatingPod / SyncTerminatedPod) over the CRI.
#[derive(Clone)]
pub struct AgentSyncer<R: Runtime, C: Clock> {
    pub(crate) env: SyncEnv<R, C>,
    /// The prober's results (plan and status input) and status view (its output).
    pub(crate) probes: ProbeHandle,
    pub(crate) shared: Rc<RefCell<Shared>>,
    pub(crate) node_ip: Option<String>,
    /// Rung after a sync changed the runtime: the PLEG relists soon even while it runs
    /// slower (every running process watched for its exit).
    pub(crate) pleg_poke: Rc<tokio::sync::Notify>,
    /// The runtime reads (and status work) of terminations before and after their kills,
    /// at most [`TERMINATION_STEPS_IN_FLIGHT`] at once; the kills themselves never wait.
    pub(crate) kill_steps: Rc<tokio::sync::Semaphore>,
    /// SyncTerminatedPods' cleanups (status read, volume teardown, the pod directory), at
    /// most [`TERMINATION_STEPS_IN_FLIGHT`] at once. Apart from `kill_steps` so that a slow
    /// cleanup (a CSI driver's unpublish) never holds up a kill.
    pub(crate) cleanups: Rc<tokio::sync::Semaphore>,
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

impl<R: Runtime, C: Clock> AgentSyncer<R, C> {
    /// The cached runtime view of the pod, if the relister saw no change after its read, or
    /// only an earlier stage of it (see [`Changed::seen`]).
    fn cached_status(&self, uid: &str) -> Option<(tokio::time::Instant, PodRuntimeStatus)> {
        let mut shared = self.shared.borrow_mut();
        let cached = shared.pod_cache.get(uid)?;
        let at = &cached.read_at;
        // A relister that stopped answering confirms nothing: after a while, read afresh.
        // A watched event stream confirms every view up to now once a relist began after
        // it opened (changes before it opened are that relist's).
        let watched = matches!(
            (shared.relisted_at, shared.watching_since),
            (Some(r), Some(w)) if r >= w
        );
        let relisted_since = watched
            || shared
                .relisted_at
                .is_some_and(|r| r > *at && r.elapsed() < POD_CACHE_TRUST);
        if !relisted_since {
            return None;
        }
        let Some(changed) = shared.changed.get(uid).filter(|c| c.at >= *at) else {
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
        shared.changed.remove(uid);
        shared.recheck.insert(uid.to_string());
        Some(view)
    }

    /// Recomputes the API status from a fresh runtime view and stores it (logged on change).
    fn record_status(
        &self,
        pod: &Arc<Pod>,
        observed: &PodRuntimeStatus,
        reasons: &WaitingReasons,
    ) -> bool {
        let now = self.env.clock.now();
        let mut observed = observed.clone();
        sync::fill_termination_messages(&self.env.root_dir, pod, &mut observed);
        let mut shared = self.shared.borrow_mut();
        // The last state says why picolet killed it (the runtime only knows "Error", 137).
        for c in &mut observed.containers {
            if c.message.is_empty() {
                if let Some(m) = shared.kill_messages.get(&c.id) {
                    c.message.clone_from(m);
                }
            }
        }
        let previous = shared.statuses.get(pod.uid()).cloned();
        let probe_results = self.probes.status_results(&observed);
        let st = status::compute_pod_status_with(
            pod,
            &observed,
            reasons,
            previous.as_ref(),
            now,
            self.node_ip.as_deref(),
            &status::StatusOptions {
                probes: Some(&probe_results),
                ..Default::default()
            },
        );
        self.probes.observe(pod, &st);
        let terminal = st.phase.is_some_and(|p| p.is_terminal());
        let changed = shared.statuses.set(pod.uid(), &pod.full_name(), st);
        // apiserver mode: the status syncer sends it on.
        if let (true, Some(tx), Some(status)) = (
            changed,
            &shared.events,
            shared.statuses.get_shared(pod.uid()),
        ) {
            tx.send(PodEvent::Status {
                pod: Arc::clone(pod),
                status,
            });
        }
        terminal
    }
}

impl<R: Runtime, C: Clock> AgentSyncer<R, C> {
    /// The pod's status becomes Failed with `reason` and `message` (kubelet: a pod sync
    /// handler's eviction verdict); terminal phases stick, so later syncs keep it.
    fn fail_pod(&self, pod: &Arc<Pod>, reason: &str, message: &str) {
        let mut shared = self.shared.borrow_mut();
        let mut st = shared.statuses.get(pod.uid()).cloned().unwrap_or_default();
        st.phase = Some(crate::api::PodPhase::Failed);
        st.reason = Some(reason.to_string());
        st.message = Some(message.to_string());
        if shared.statuses.set(pod.uid(), &pod.full_name(), st)
            && let (Some(tx), Some(status)) =
                (&shared.events, shared.statuses.get_shared(pod.uid()))
        {
            tx.send(PodEvent::Status {
                pod: Arc::clone(pod),
                status,
            });
        }
    }
}

impl<R: Runtime, C: Clock> AgentSyncer<R, C> {
    /// A pod wanted again after its worker finished: what the runtime holds of the old
    /// incarnation goes first (see `Shared::ended`), as a container GC pass for a pod no
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
            &self.env.pod_log_dir,
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

impl<R: Runtime, C: Clock> PodSyncer for AgentSyncer<R, C> {
    async fn sync_pod(
        &self,
        update: UpdateType,
        pod: Arc<Pod>,
        cancel: CancellationToken,
    ) -> Result<SyncPodOk, SyncFailure> {
        let uid = pod.uid().to_string();
        let ended = update == UpdateType::Create && self.shared.borrow_mut().ended.remove(&uid);
        if ended {
            self.remove_old_incarnation(&pod, &cancel).await?;
        }
        let cached = if update == UpdateType::Create {
            // A UID the runtime has never held: nothing to read (start latency).
            let absent = self.shared.borrow_mut().known_absent.remove(&uid);
            absent.then(|| {
                let empty = PodRuntimeStatus {
                    uid: uid.clone(),
                    ..PodRuntimeStatus::default()
                };
                (tokio::time::Instant::now(), empty)
            })
        } else {
            self.cached_status(&uid)
        };
        let mut read_at = tokio::time::Instant::now();
        let from_cache = cached.is_some();
        let observed = match cached {
            Some((at, status)) => {
                read_at = at;
                status
            }
            None => tokio::select! {
                r = sync::get_pod_status(&self.env.runtime, &uid) => r.map_err(failure)?,
                _ = cancel.cancelled() => return Err(SyncFailure::new("cancelled")),
            },
        };
        let mut backoffs = self
            .shared
            .borrow_mut()
            .backoffs
            .remove(&uid)
            .unwrap_or_default();
        let verdicts = self.probes.verdicts(&observed);
        let result = tokio::select! {
            r = sync::sync_pod(&self.env, &pod, &observed, &mut backoffs, &verdicts) => Some(r),
            _ = cancel.cancelled() => None,
        };
        self.shared
            .borrow_mut()
            .backoffs
            .insert(uid.clone(), backoffs);
        let Some(result) = result else {
            self.pleg_poke.notify_one();
            return Err(SyncFailure::new("cancelled"));
        };
        if !(result.actions.is_noop() && result.containers.is_empty()) {
            self.pleg_poke.notify_one();
        }
        for (id, k) in &result.actions.containers_to_kill {
            if matches!(
                k.reason,
                KillReason::LivenessProbe | KillReason::StartupProbe
            ) {
                self.shared
                    .borrow_mut()
                    .kill_messages
                    .insert(id.clone(), k.message.clone());
            }
        }
        // A resync that changed nothing (the common case at idle) reuses what it read; one
        // that only created things reads just those (`refresh_after_sync`: the view keeps
        // the time of the read it planned on, so that a change the relister saw since then
        // still invalidates it); anything else is read whole.
        let mut read_now = true;
        let after = if result.actions.is_noop() && result.containers.is_empty() {
            read_now = !from_cache;
            observed
        } else if let Some(after) = sync::refresh_after_sync(&self.env.runtime, &observed, &result)
            .await
            .map_err(failure)?
        {
            after
        } else {
            read_at = tokio::time::Instant::now();
            sync::get_pod_status(&self.env.runtime, &uid)
                .await
                .map_err(failure)?
        };
        {
            let mut shared = self.shared.borrow_mut();
            // A change seen before these reads is in them.
            if shared.changed.get(&uid).is_some_and(|c| c.at < read_at) {
                shared.changed.remove(&uid);
            }
            // The view's reads ended now, or, reused as it was, when they ended before.
            let settled_at = if read_now {
                None
            } else {
                shared.pod_cache.get(&uid).map(|c| c.settled_at)
            };
            let settled_at = settled_at.unwrap_or_else(tokio::time::Instant::now);
            shared
                .pod_cache
                .insert(uid.clone(), read_at, settled_at, after.clone());
        }
        let reasons = waiting_reasons(&result);
        let terminal = self.record_status(&pod, &after, &reasons);
        // kubelet: the activeDeadlineHandler — past spec.activeDeadlineSeconds the pod is
        // Failed (DeadlineExceeded) and terminated; before it, sync again when it falls due.
        let mut requeue_after = result.requeue_after;
        let recorded = self.shared.borrow().statuses.get(&uid).cloned();
        match status::active_deadline(&pod, recorded.as_ref(), self.env.clock.now()) {
            status::ActiveDeadline::Exceeded if !terminal => {
                log::warn!(
                    "pod {}: {} ({}s): failing it",
                    pod.full_name(),
                    status::MESSAGE_DEADLINE_EXCEEDED,
                    pod.spec.active_deadline_seconds.unwrap_or_default()
                );
                self.fail_pod(
                    &pod,
                    status::REASON_DEADLINE_EXCEEDED,
                    status::MESSAGE_DEADLINE_EXCEEDED,
                );
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
                message: describe_failure(&pod, &result),
                network_not_ready: result.network_not_ready(),
                runtime_down: result.runtime_down(),
            });
        }
        Ok(SyncPodOk {
            terminal,
            requeue_after,
        })
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
            self.record_status(pod, &after, &WaitingReasons::new());
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
                self.env.recorder.warning(
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
        if let Some(cg) = &self.env.pod_cgroups
            && let Err(e) = cg.remove(&uid, pod.as_deref()).await
        {
            log::warn!("pod {uid}: cgroup not removed (retried): {e}");
        }
        let mut shared = self.shared.borrow_mut();
        shared.backoffs.remove(&uid);
        shared.pod_cache.remove(&uid);
        shared.changed.remove(&uid);
        shared.recheck.remove(&uid);
        for c in &observed.containers {
            shared.kill_messages.remove(&c.id);
        }
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
