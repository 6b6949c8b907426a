//! The loop's half of the eviction manager: it receives the measuring task's
//! [`Observed`], runs the pure [`Manager::step`] and does what it says — a forced container
//! GC pass, or one pod killed with a Failed/Evicted status — and publishes the node
//! conditions (the node status task and the node API read them; admission checks them).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::Loop;
use crate::admission::Rejection;
use crate::api::Pod;
use crate::clock::Clock;
use crate::cri::Runtime;
use crate::eviction::observe::{self, Observed, PodUsage};
use crate::eviction::{self, Action, Candidate, Conditions, Manager, ReclaimStep, Threshold};
use crate::pod_manager::is_mirror_pod;
use crate::pod_workers::UpdatePodOptions;

/// kubelet: `podCleanupTimeout` — how long the next eviction waits for the last one.
const POD_CLEANUP_TIMEOUT: Duration = Duration::from_secs(30);

/// `--eviction-hard` and where the signals are measured.
#[derive(Debug, Clone)]
pub struct EvictionConfig {
    pub thresholds: Vec<Threshold>,
    /// `--eviction-pressure-transition-period`.
    pub transition_period: Duration,
    pub sources: observe::Sources,
    pub statfs: observe::StatFs,
}

/// The eviction manager's state in the loop.
pub(super) struct EvictionState {
    manager: Manager,
    conditions: Conditions,
    /// Where the conditions go (apiserver mode: the node status; the node API).
    pressure: Option<watch::Sender<Conditions>>,
    /// The pod evicted last, and when (kubelet: `waitForPodsCleanup`).
    evicted: Option<(String, tokio::time::Instant)>,
    /// "Nothing to evict" was logged for this episode.
    no_victim_logged: bool,
    /// "Reclaiming node-level resources" was logged for this signal in this episode: a
    /// board whose disk stays over a threshold writes it once, not every 10 s.
    reclaim_logged: Option<eviction::Signal>,
    /// The image manager's reclaim (`None`: image GC is off).
    reclaim_images: Option<eviction::ImageReclaim>,
}

/// The eviction manager's state in the loop; `None` without thresholds.
pub(super) fn loop_state(
    cfg: Option<EvictionConfig>,
    pressure: Option<watch::Sender<Conditions>>,
    reclaim_images: Option<eviction::ImageReclaim>,
) -> Option<EvictionState> {
    let cfg = cfg.filter(|c| !c.thresholds.is_empty())?;
    let mut manager = Manager::new(cfg.thresholds.clone(), cfg.transition_period);
    manager.dedicated_imagefs = cfg.sources.imagefs.is_some();
    let list: Vec<String> = cfg
        .thresholds
        .iter()
        .map(|t| match t.value {
            eviction::Value::Quantity(q) => format!("{}<{}", t.signal, t.signal.format(q)),
            eviction::Value::Percent(p) => format!("{}<{p}%", t.signal),
        })
        .collect();
    log::info!(
        "eviction manager: hard thresholds {}, measured every {:?}",
        list.join(","),
        eviction::MONITORING_PERIOD
    );
    Some(EvictionState {
        manager,
        conditions: Conditions::default(),
        pressure,
        evicted: None,
        no_victim_logged: false,
        reclaim_logged: None,
        reclaim_images,
    })
}

/// `rx.recv()`, or pending forever without a receiver.
pub(super) async fn recv(rx: &mut Option<mpsc::Receiver<Observed>>) -> Option<Observed> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

impl<R: Runtime, C: Clock> Loop<R, C> {
    /// kubelet: the eviction admit handler — `None` admits.
    pub(super) fn eviction_admit(&self, pod: &Pod) -> Option<Rejection> {
        let ev = self.managers.eviction.as_ref()?;
        eviction::admit(pod, &ev.conditions).map(|message| Rejection {
            reason: eviction::REASON_EVICTED,
            message,
        })
    }

    /// One eviction cycle over a new observation.
    pub(super) fn on_eviction_observed(&mut self, observed: Observed) {
        let cleanup_pending = self.eviction_cleanup_pending();
        let Some(ev) = self.managers.eviction.as_mut() else {
            return;
        };
        let decision =
            ev.manager
                .step(&observed.node, tokio::time::Instant::now(), cleanup_pending);
        if decision.conditions != ev.conditions {
            let before = ev.conditions;
            ev.conditions = decision.conditions;
            for c in [
                eviction::Condition::Memory,
                eviction::Condition::Disk,
                eviction::Condition::Pid,
            ] {
                if before.has(c) != decision.conditions.has(c) {
                    log::info!(
                        "eviction manager: node condition {} is now {}",
                        c.as_str(),
                        decision.conditions.has(c)
                    );
                }
            }
            if let Some(tx) = &ev.pressure {
                tx.send_replace(decision.conditions);
            }
        }
        match decision.action {
            Action::None => {
                if decision.conditions == Conditions::default() {
                    ev.no_victim_logged = false;
                    ev.reclaim_logged = None;
                }
            }
            Action::Reclaim {
                threshold,
                observed: o,
                steps,
            } => {
                if ev.reclaim_logged != Some(threshold.signal) {
                    ev.reclaim_logged = Some(threshold.signal);
                    log::info!(
                        "eviction manager: {} is {} (threshold {}): reclaiming node-level resources first (logged once while it lasts)",
                        threshold.signal,
                        threshold.signal.format(o.available),
                        threshold.signal.format(threshold.quantity(o.capacity))
                    );
                }
                for step in steps {
                    self.reclaim(*step);
                }
            }
            Action::Evict {
                threshold,
                observed: o,
            } => self.evict_one(&threshold, &o, &observed.pods),
        }
    }

    /// The pod evicted last has not finished terminating (for at most
    /// [`POD_CLEANUP_TIMEOUT`]).
    fn eviction_cleanup_pending(&self) -> bool {
        let Some((uid, at)) = self
            .managers
            .eviction
            .as_ref()
            .and_then(|e| e.evicted.as_ref())
        else {
            return false;
        };
        at.elapsed() < POD_CLEANUP_TIMEOUT
            && self.workers.is_known(uid)
            && !self.workers.is_finished(uid)
    }

    /// kubelet: `nodeReclaimFuncs`.
    fn reclaim(&mut self, step: ReclaimStep) {
        match step {
            ReclaimStep::DeadContainers => {
                // kubelet: containerGC.DeleteAllUnusedContainers — the GC policy (minimum
                // age, instances kept per container) still holds.
                if !self.garbage_collect_with(true) {
                    log::info!("eviction manager: a container GC pass is already running");
                }
            }
            // kubelet: imageGC.DeleteUnusedImages. A task of its own: its effect is
            // measured at the next cycle (the kubelet re-measures at once).
            ReclaimStep::UnusedImages => {
                match self
                    .managers
                    .eviction
                    .as_ref()
                    .and_then(|e| e.reclaim_images.clone())
                {
                    Some(reclaim) => {
                        crate::local_tasks::spawn_local((reclaim.0)());
                    }
                    None => log::debug!("eviction manager: image GC is off: no images reclaimed"),
                }
            }
        }
    }

    /// kubelet: rank the active pods for the signal and evict the first that may be.
    fn evict_one(
        &mut self,
        threshold: &Threshold,
        observed: &eviction::Observation,
        usage: &std::collections::HashMap<String, PodUsage>,
    ) {
        let active: Vec<Arc<Pod>> = self
            .pods
            .pods()
            .into_iter()
            .filter(|p| {
                !is_mirror_pod(p)
                    && !self.rejected.contains(p.uid())
                    && self.workers.is_known(p.uid())
                    && !self.workers.is_finished(p.uid())
                    && !self.workers.is_terminating(p.uid())
            })
            .collect();
        let mut cands: Vec<Candidate> = active
            .iter()
            .map(|p| candidate(p, usage.get(p.uid())))
            .collect();
        eviction::rank(&mut cands, threshold.signal.condition());
        let Some(victim) = cands.iter().find(|c| !c.critical) else {
            if let Some(ev) = self.managers.eviction.as_mut()
                && !ev.no_victim_logged
            {
                ev.no_victim_logged = true;
                log::info!(
                    "eviction manager: {} is {} (threshold {}) and no pod may be evicted (static and critical pods never are)",
                    threshold.signal,
                    threshold.signal.format(observed.available),
                    threshold
                        .signal
                        .format(threshold.quantity(observed.capacity))
                );
            }
            return;
        };
        let Some(pod) = active.iter().find(|p| p.uid() == victim.uid).cloned() else {
            return;
        };
        let message = eviction::eviction_message(threshold, observed, victim);
        log::warn!(
            "eviction manager: evicting pod {} (uid {}): {message}",
            victim.name,
            victim.uid
        );
        self.out
            .recorder
            .warning(&pod, None, eviction::REASON_EVICTED, message.clone());
        // kubelet: evictPod's status update — Failed, Evicted, and the DisruptionTarget
        // condition (TerminationByKubelet) with the same message.
        let now = self.clock.now();
        self.pod_state
            .fail_pod_disrupted(&pod, eviction::REASON_EVICTED, &message, now);
        // Never started again (housekeeping restarts desired pods without a worker).
        self.rejected.insert(victim.uid.clone());
        self.workers.update_pod(UpdatePodOptions::kill(
            Arc::clone(&pod),
            Some(eviction::EVICTION_GRACE_SECONDS),
        ));
        if let Some(ev) = self.managers.eviction.as_mut() {
            ev.evicted = Some((victim.uid.clone(), tokio::time::Instant::now()));
        }
    }
}

/// The ranking's view of a pod.
fn candidate(pod: &Pod, usage: Option<&PodUsage>) -> Candidate {
    let (_, memory_request) = crate::admission::pod_requests(pod);
    let disk_request: i64 = pod
        .spec
        .containers
        .iter()
        .filter_map(|c| c.resources.as_ref()?.requests.get("ephemeral-storage"))
        .filter_map(|q| q.scaled(0))
        .sum();
    Candidate {
        uid: pod.uid().to_string(),
        name: pod.full_name(),
        priority: pod.spec.priority.unwrap_or(0),
        critical: crate::qos::is_critical(pod),
        memory_request: u64::try_from(memory_request).unwrap_or(0),
        memory_usage: usage.and_then(|u| u.memory),
        disk_request: u64::try_from(disk_request).unwrap_or(0),
        disk_usage: usage.and_then(|u| u.disk),
    }
}
