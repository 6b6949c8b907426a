//! The status manager: the latest status of every pod, in memory only (kubelet:
//! `status_manager.go` without the apiserver sync), and the one-line summary it logs.
//!
//! A status is "changed" when it differs in anything but timestamps
//! ([`equal_apart_from_timestamps`], the one definition, which the apiserver's status
//! syncer uses too); only then is it logged, so an idle node logs nothing. A terminal
//! phase, once stored, is kept.

use std::collections::BTreeMap;
use std::sync::Arc;

#[cfg(test)]
use crate::api::Pod;
use crate::api::{ContainerState, ContainerStatus, PodStatus};

#[derive(Debug, Clone, PartialEq)]
struct Entry {
    full_name: String,
    /// Shared with the pod events that carry it (the node API's view, the status syncer).
    status: Arc<PodStatus>,
}

/// The latest status per pod UID. Owned by the event loop; nothing is ever written to disk.
#[derive(Debug, Clone, Default)]
pub(crate) struct StatusManager {
    pods: BTreeMap<String, Entry>,
}

impl StatusManager {
    #[cfg(test)]
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Store `status` for `uid`. Returns `true` (and logs the summary at info) when it
    /// differs from the stored one in more than timestamps; a timestamp-only difference is
    /// stored silently. A stored terminal phase is never replaced by another phase.
    pub(crate) fn set(&mut self, uid: &str, pod_full_name: &str, mut status: PodStatus) -> bool {
        let old = self.pods.get(uid);
        // kubelet status manager: pods do not leave a terminal phase.
        if let Some(p) = old.and_then(|e| e.status.phase).filter(|p| p.is_terminal()) {
            if status.phase != Some(p) {
                log::debug!(
                    "pod {pod_full_name}: illegal phase transition {p:?} -> {:?}, keeping {p:?}",
                    status.phase
                );
                status.phase = Some(p);
            }
        }
        // The same status again (every resync of a steady pod): the stored one stays, so
        // that it is one allocation with the copy the last pod event handed out.
        if old.is_some_and(|e| *e.status == status && e.full_name == pod_full_name) {
            return false;
        }
        let changed = old.is_none_or(|e| !equal_apart_from_timestamps(&e.status, &status));
        if changed {
            log::info!("pod status: {}", summary_for(pod_full_name, &status));
        }
        self.pods.insert(
            uid.to_string(),
            Entry {
                full_name: pod_full_name.to_string(),
                status: Arc::new(status),
            },
        );
        changed
    }

    pub(crate) fn get(&self, uid: &str) -> Option<&PodStatus> {
        self.pods.get(uid).map(|e| &*e.status)
    }

    /// The stored status itself, to hand to observers without a copy.
    pub(crate) fn get_shared(&self, uid: &str) -> Option<Arc<PodStatus>> {
        self.pods.get(uid).map(|e| Arc::clone(&e.status))
    }

    /// Forget a pod (once its worker finished); returns what was stored.
    pub(crate) fn remove(&mut self, uid: &str) -> Option<PodStatus> {
        self.pods
            .remove(uid)
            .map(|e| Arc::unwrap_or_clone(e.status))
    }

    /// `(uid, full name, status)` of every pod, by UID.
    #[cfg(test)]
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &str, &PodStatus)> {
        self.pods
            .iter()
            .map(|(uid, e)| (uid.as_str(), e.full_name.as_str(), &*e.status))
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.pods.len()
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }
}

/// "Pod status changed" is `!equal_apart_from_timestamps(old, new)`: the two say the same
/// once `startTime`, the conditions' `lastTransitionTime` and the containers' `startedAt` /
/// `finishedAt` (state and last state, init containers too) are set aside (kubelet:
/// `isPodStatusByKubeletEqual` compares conditions without their times).
///
/// Stricter than upstream on conditions, on purpose: every condition counts, in order.
/// Between two statuses picolet computed that is exact — the order is always the same
/// (other writers' conditions first, then the kubelet's five in upstream order), and a
/// condition another writer changed on the API pod is carried into the next status, so it
/// is a change to pass on. Comparing with the apiserver's copy (where other writers add
/// conditions and the order is the server's) is a different question: the status syncer's
/// `api_shows` first keeps only the kubelet-owned conditions, by type, then asks this.
pub(crate) fn equal_apart_from_timestamps(a: &PodStatus, b: &PodStatus) -> bool {
    without_timestamps(a) == without_timestamps(b)
}

fn without_timestamps(s: &PodStatus) -> PodStatus {
    let mut s = s.clone();
    s.start_time = None;
    for c in &mut s.conditions {
        c.last_transition_time = None;
    }
    for c in s
        .init_container_statuses
        .iter_mut()
        .chain(&mut s.container_statuses)
    {
        clear_state_times(&mut c.state);
        clear_state_times(&mut c.last_state);
    }
    s
}

fn clear_state_times(state: &mut ContainerState) {
    if let Some(r) = &mut state.running {
        r.started_at = None;
    }
    if let Some(t) = &mut state.terminated {
        t.started_at = None;
        t.finished_at = None;
    }
}

/// A one-line human summary for the log, e.g.
/// `default/web-node1 Running 1/2 ready: app Running (restarts 0), side Waiting CrashLoopBackOff (restarts 3)`.
///
/// The ready count is over regular containers; init containers are listed (as `init:<name>`)
/// unless they completed successfully; a running regular container that is not ready reads
/// `Running unready`.
#[cfg(test)]
pub(crate) fn summary(pod: &Pod, status: &PodStatus) -> String {
    summary_for(&pod.full_name(), status)
}

fn summary_for(full_name: &str, status: &PodStatus) -> String {
    let phase = status
        .phase
        .map_or_else(|| "Unknown".to_string(), |p| format!("{p:?}"));
    let mut line = format!("{full_name} {phase}");
    if let Some(reason) = &status.reason {
        line.push_str(&format!(" ({reason})"));
    }
    let ready = status.container_statuses.iter().filter(|c| c.ready).count();
    line.push_str(&format!(
        " {ready}/{} ready",
        status.container_statuses.len()
    ));
    let completed = |c: &&ContainerStatus| {
        c.state
            .terminated
            .as_ref()
            .is_some_and(|t| t.exit_code == 0)
    };
    let parts: Vec<String> = status
        .init_container_statuses
        .iter()
        .filter(|c| !completed(c))
        .map(|c| format!("init:{}", container_part(c, false)))
        .chain(
            status
                .container_statuses
                .iter()
                .map(|c| container_part(c, true)),
        )
        .collect();
    if !parts.is_empty() {
        line.push_str(": ");
        line.push_str(&parts.join(", "));
    }
    line
}

/// `with_readiness`: say `unready` for a running container that is not ready (not for init
/// containers: a running init container is never "ready").
fn container_part(c: &ContainerStatus, with_readiness: bool) -> String {
    let state = if c.state.running.is_some() {
        if c.ready || !with_readiness {
            "Running"
        } else {
            "Running unready"
        }
        .to_string()
    } else if let Some(t) = &c.state.terminated {
        match &t.reason {
            Some(reason) => format!("Terminated {reason} exit {}", t.exit_code),
            None => format!("Terminated exit {}", t.exit_code),
        }
    } else if let Some(w) = &c.state.waiting {
        match &w.reason {
            Some(reason) => format!("Waiting {reason}"),
            None => "Waiting".to_string(),
        }
    } else {
        "Unknown".to_string()
    };
    format!("{} {state} (restarts {})", c.name, c.restart_count)
}
