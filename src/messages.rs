//! Messages between layers: the snapshots sources send the agent ([`SourceUpdate`]), what
//! the agent tells observers (the apiserver's status syncer) about pods ([`PodEvent`]),
//! and the mailbox pod events travel in.
//!
//! A leaf module: it imports only the API model (and its decoded ConfigMaps/Secrets), so the senders (sources, the agent) and
//! the receivers (the agent, the status syncer) both depend on it and not on each other.
//!
//! The mailbox coalesces instead of queueing: it holds the latest desired-pods view, the
//! latest status of each pod and the set of finished UIDs — so its size is bounded by the
//! number of pods however long the receiver is busy (an apiserver away for an hour costs
//! nothing more than one status per pod; kubelet's status manager also keeps only the
//! latest status per pod). A receiver gets what is pending in this order: the pods view,
//! then statuses, then finished UIDs.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::sync::Arc;

use tokio::sync::Notify;

use crate::api::{Pod, PodStatus};
use crate::config_data::Object;

/// A full snapshot of one pod source. The first one a source emits (even empty) marks the
/// source as seen (kubelet: `sourcesReady`).
#[derive(Debug, Clone, PartialEq)]
pub struct SourceUpdate {
    /// `"file"`, `"http"` or `"api"` (the `kubernetes.io/config.source` value).
    pub source: &'static str,
    /// Sorted by the source's own order (file: by file name); full names are unique.
    /// Shared with the source's own cache and, unchanged, with the merge and the pod
    /// manager: one copy of each pod however many layers hold it.
    pub pods: Vec<Arc<Pod>>,
    /// The local ConfigMaps and Secrets of the file source (its full set); `None` for the
    /// sources that carry none.
    pub objects: Option<Vec<Object>>,
}

/// The IDs of the containers the agent's runtime view (the relister's, kept current by the
/// runtime's events) shows running, sorted. The agent publishes them on a `watch` channel
/// whenever they change; the container log manager reads them instead of listing the
/// runtime itself.
pub(crate) type RunningContainers = Vec<String>;

/// What the agent tells observers about pods.
#[derive(Debug, Clone, PartialEq)]
pub enum PodEvent {
    /// A pod's status changed (in more than timestamps).
    Status {
        pod: Arc<Pod>,
        /// Shared with the status manager that stored it (one copy however many observers).
        status: Arc<PodStatus>,
    },
    /// The desired pods and the mirror pods after a change; `sources_ready`: every source
    /// has been seen.
    Pods {
        pods: Vec<Arc<Pod>>,
        mirrors: Vec<Arc<Pod>>,
        sources_ready: bool,
    },
    /// The pod worker of `uid` finished: stopped and cleaned up.
    Finished { uid: String },
}

#[derive(Default)]
struct Pending {
    pods: Option<PodEvent>,
    /// By UID: only the latest status of a pod matters.
    statuses: BTreeMap<String, PodEvent>,
    finished: BTreeSet<String>,
}

impl Pending {
    fn len(&self) -> usize {
        usize::from(self.pods.is_some()) + self.statuses.len() + self.finished.len()
    }
}

struct Mailbox {
    pending: RefCell<Pending>,
    notify: Notify,
    senders: Cell<usize>,
}

/// A new mailbox: its sending half (cheap to clone) and its receiving half.
pub fn pod_events() -> (PodEventSender, PodEventReceiver) {
    let mailbox = Rc::new(Mailbox {
        pending: RefCell::new(Pending::default()),
        notify: Notify::new(),
        senders: Cell::new(1),
    });
    (
        PodEventSender(vec![Rc::clone(&mailbox)]),
        PodEventReceiver(mailbox),
    )
}

/// The agent's half: one or more mailboxes (the status syncer's, the node API's), each
/// gets every event. Never blocks, never grows past one entry per pod.
pub struct PodEventSender(Vec<Rc<Mailbox>>);

impl Clone for PodEventSender {
    fn clone(&self) -> Self {
        for m in &self.0 {
            m.senders.set(m.senders.get() + 1);
        }
        PodEventSender(self.0.clone())
    }
}

impl Drop for PodEventSender {
    fn drop(&mut self) {
        for m in &self.0 {
            m.senders.set(m.senders.get() - 1);
            m.notify.notify_one();
        }
    }
}

impl std::fmt::Debug for PodEventSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PodEventSender({} pending)", self.pending())
    }
}

impl PodEventSender {
    /// One sender for both: every event goes to the mailboxes of each.
    pub fn join(mut self, mut other: PodEventSender) -> PodEventSender {
        let mut boxes = std::mem::take(&mut self.0);
        boxes.append(&mut other.0);
        PodEventSender(boxes)
    }

    /// Replaces what is pending of the same kind (the pods view; this pod's status).
    pub fn send(&self, event: PodEvent) {
        if let Some((last, rest)) = self.0.split_last() {
            for m in rest {
                m.put(event.clone());
            }
            last.put(event);
        }
    }

    /// How many entries wait (one per kind and pod at most), in the fullest mailbox.
    pub fn pending(&self) -> usize {
        self.0
            .iter()
            .map(|m| m.pending.borrow().len())
            .max()
            .unwrap_or(0)
    }
}

impl Mailbox {
    fn put(&self, event: PodEvent) {
        {
            let mut p = self.pending.borrow_mut();
            match event {
                PodEvent::Pods { .. } => p.pods = Some(event),
                PodEvent::Status { ref pod, .. } => {
                    p.statuses.insert(pod.uid().to_string(), event);
                }
                PodEvent::Finished { uid } => {
                    p.finished.insert(uid);
                }
            }
        }
        self.notify.notify_one();
    }
}

/// The observer's half.
pub struct PodEventReceiver(Rc<Mailbox>);

impl PodEventReceiver {
    /// Everything pending, waiting for something if there is nothing; `None` once every
    /// sender is gone and nothing is left.
    pub async fn recv(&mut self) -> Option<Vec<PodEvent>> {
        loop {
            let batch = self.try_recv();
            if !batch.is_empty() {
                return Some(batch);
            }
            if self.0.senders.get() == 0 {
                return None;
            }
            self.0.notify.notified().await;
        }
    }

    /// Everything pending now (possibly nothing): the pods view, statuses, finished UIDs.
    pub fn try_recv(&mut self) -> Vec<PodEvent> {
        let p = std::mem::take(&mut *self.0.pending.borrow_mut());
        let mut out = Vec::with_capacity(p.len());
        out.extend(p.pods);
        out.extend(p.statuses.into_values());
        out.extend(p.finished.into_iter().map(|uid| PodEvent::Finished { uid }));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::PodPhase;

    fn pod(uid: &str) -> Arc<Pod> {
        let mut p = Pod::default();
        p.metadata.uid = uid.into();
        Arc::new(p)
    }

    fn status(uid: &str, phase: PodPhase) -> PodEvent {
        PodEvent::Status {
            pod: pod(uid),
            status: Arc::new(PodStatus {
                phase: Some(phase),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn coalesces_to_one_entry_per_kind_and_pod() {
        let (tx, mut rx) = pod_events();
        for _ in 0..10_000 {
            tx.send(status("a", PodPhase::Pending));
            tx.send(PodEvent::Pods {
                pods: vec![pod("a"), pod("b")],
                mirrors: vec![],
                sources_ready: false,
            });
        }
        tx.send(status("b", PodPhase::Running));
        tx.send(status("a", PodPhase::Running));
        tx.send(PodEvent::Finished { uid: "c".into() });
        tx.send(PodEvent::Finished { uid: "c".into() });
        assert_eq!(tx.pending(), 4, "bounded by the pods, not by the sends");
        let got = rx.try_recv();
        assert!(matches!(got[0], PodEvent::Pods { .. }));
        assert_eq!(
            got[1],
            status("a", PodPhase::Running),
            "the latest status wins"
        );
        assert_eq!(got[2], status("b", PodPhase::Running));
        assert_eq!(got[3], PodEvent::Finished { uid: "c".into() });
        assert!(rx.try_recv().is_empty());
    }

    #[tokio::test]
    async fn recv_waits_and_ends_when_every_sender_is_gone() {
        let (tx, mut rx) = pod_events();
        let tx2 = tx.clone();
        tx.send(PodEvent::Finished { uid: "x".into() });
        drop(tx);
        assert_eq!(rx.recv().await.map(|b| b.len()), Some(1));
        tokio::task::LocalSet::new()
            .run_until(async move {
                tokio::task::spawn_local(async move {
                    tokio::task::yield_now().await;
                    tx2.send(PodEvent::Finished { uid: "y".into() });
                });
                assert_eq!(rx.recv().await.map(|b| b.len()), Some(1));
                assert_eq!(rx.recv().await, None);
            })
            .await;
    }

    #[test]
    fn a_joined_sender_fills_both_mailboxes() {
        let (a, mut rx_a) = pod_events();
        let (b, mut rx_b) = pod_events();
        let both = a.join(b);
        both.send(status("x", PodPhase::Running));
        assert_eq!(rx_a.try_recv(), vec![status("x", PodPhase::Running)]);
        assert_eq!(rx_b.try_recv(), vec![status("x", PodPhase::Running)]);
        drop(both);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        assert_eq!(rt.block_on(rx_a.recv()), None, "every sender gone");
        assert_eq!(rt.block_on(rx_b.recv()), None);
    }
}
