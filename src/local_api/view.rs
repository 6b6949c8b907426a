//! What the node API serves about pods: the agent's desired pods with the status it last
//! computed, kept from the agent's pod events (the same events the cluster-mode status
//! syncer gets), with a resource version per change and a short history for watches.
//!
//! Owns: the served copy of each pod (rendered to JSON once per change, on first request),
//! the resource-version counter, the watchers.
//!
//! Must never: decide anything about a pod or hold more than one entry per pod plus the
//! bounded history; a slow watcher is cut off, never waited for.

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::mpsc;

use crate::api::{Pod, PodStatus};
use crate::clock::{self, UnixNanos};
use crate::messages::PodEvent;
use crate::metrics::Histogram;

/// Changes kept for watches that start from an older resource version (kubectl lists, then
/// watches from the list's version: a change in between must not be lost).
const HISTORY: usize = 256;
/// … and for this long at most (the apiserver's watch cache keeps about as long,
/// `eventFreshDuration`): a watch from an older version is answered 410 and re-lists.
/// Kept longer, the history would hold deleted pods' objects and superseded statuses.
pub(crate) const HISTORY_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(75);
/// Events a watcher may lag behind before it is cut off (it re-lists, as client-go does).
const WATCH_BUFFER: usize = 128;

/// One pod as served.
#[derive(Debug)]
pub struct PodEntry {
    pub pod: Arc<Pod>,
    pub status: Option<Arc<PodStatus>>,
    pub resource_version: u64,
    /// When the view first saw the pod: its `creationTimestamp` when it has none (static
    /// pods have none; the kubelet's come from their mirror pods).
    pub first_seen: UnixNanos,
    /// Seen Running after a status that was not (the pod start SLI is taken then once).
    started: bool,
    json: RefCell<Option<Rc<Value>>>,
}

impl PodEntry {
    fn new(pod: Arc<Pod>, status: Option<Arc<PodStatus>>, rv: u64, first_seen: UnixNanos) -> Self {
        PodEntry {
            pod,
            status,
            resource_version: rv,
            first_seen,
            started: false,
            json: RefCell::new(None),
        }
    }

    pub fn namespace(&self) -> &str {
        &self.pod.metadata.namespace
    }

    pub fn name(&self) -> &str {
        &self.pod.metadata.name
    }

    /// The `v1.Pod` object, rendered once per change.
    pub fn json(&self) -> Rc<Value> {
        if let Some(v) = &*self.json.borrow() {
            return Rc::clone(v);
        }
        let mut v = serde_json::to_value(&*self.pod).unwrap_or(Value::Null);
        if let Value::Object(m) = &mut v {
            m.insert("apiVersion".into(), "v1".into());
            m.insert("kind".into(), "Pod".into());
            if let Some(Value::Object(meta)) = m.get_mut("metadata") {
                meta.insert(
                    "resourceVersion".into(),
                    self.resource_version.to_string().into(),
                );
                if !meta.contains_key("creationTimestamp")
                    && let Some(t) = clock::rfc3339(self.first_seen)
                {
                    meta.insert("creationTimestamp".into(), t.into());
                }
            }
            if let Some(s) = &self.status {
                m.insert(
                    "status".into(),
                    serde_json::to_value(&**s).unwrap_or(Value::Null),
                );
            }
        }
        let v = Rc::new(v);
        *self.json.borrow_mut() = Some(Rc::clone(&v));
        v
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

impl ChangeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Added => "ADDED",
            ChangeKind::Modified => "MODIFIED",
            ChangeKind::Deleted => "DELETED",
        }
    }
}

/// One change of one pod, as a watch sends it.
#[derive(Debug)]
pub struct Change {
    pub kind: ChangeKind,
    pub entry: Rc<PodEntry>,
}

/// The watch asked for a version older than the history holds (HTTP 410, client-go
/// re-lists).
#[derive(Debug, PartialEq, Eq)]
pub struct TooOld;

#[derive(Debug)]
struct Inner {
    /// kubelet: `kubelet_pod_start_duration_seconds` — first seen to Running (pods found
    /// running at start, adopted, are not counted).
    pod_start: Histogram,
    rv: u64,
    pods: BTreeMap<String, Rc<PodEntry>>,
    /// Oldest first, each with when it was published.
    history: VecDeque<(UnixNanos, Rc<Change>)>,
    watchers: Vec<mpsc::Sender<Rc<Change>>>,
}

impl Default for Inner {
    fn default() -> Self {
        Inner {
            pod_start: Histogram::new(crate::metrics::POD_START_BUCKETS),
            rv: 0,
            pods: BTreeMap::new(),
            history: VecDeque::new(),
            watchers: Vec::new(),
        }
    }
}

impl Inner {
    fn publish(&mut self, change: Change, now: UnixNanos) {
        let change = Rc::new(change);
        if self.history.len() == HISTORY {
            self.history.pop_front();
        }
        self.history.push_back((now, Rc::clone(&change)));
        // A watcher that lags WATCH_BUFFER changes behind (or went away) is dropped.
        self.watchers
            .retain(|w| w.try_send(Rc::clone(&change)).is_ok());
    }

    fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }
}

/// The served pods (cheap to clone; one thread).
#[derive(Debug, Clone, Default)]
pub struct View(Rc<RefCell<Inner>>);

impl View {
    pub fn new() -> Self {
        View::default()
    }

    /// The agent's pod events: the pods view adds and removes entries, a status replaces
    /// the pod's. Mirror pods are not served: a static pod is served itself.
    pub fn apply(&self, events: Vec<PodEvent>, now: UnixNanos) {
        let mut inner = self.0.borrow_mut();
        for event in events {
            match event {
                PodEvent::Pods { pods, .. } => {
                    let wanted: BTreeMap<&str, &Arc<Pod>> =
                        pods.iter().map(|p| (p.uid(), p)).collect();
                    let gone: Vec<String> = inner
                        .pods
                        .keys()
                        .filter(|uid| !wanted.contains_key(uid.as_str()))
                        .cloned()
                        .collect();
                    for uid in gone {
                        if let Some(old) = inner.pods.remove(&uid) {
                            let rv = inner.next_rv();
                            let entry = Rc::new(PodEntry::new(
                                Arc::clone(&old.pod),
                                old.status.clone(),
                                rv,
                                old.first_seen,
                            ));
                            inner.publish(
                                Change {
                                    kind: ChangeKind::Deleted,
                                    entry,
                                },
                                now,
                            );
                        }
                    }
                    for (uid, pod) in wanted {
                        let (kind, status, first_seen) = match inner.pods.get(uid) {
                            Some(old) if Arc::ptr_eq(&old.pod, pod) || old.pod == *pod => {
                                continue;
                            }
                            Some(old) => (ChangeKind::Modified, old.status.clone(), old.first_seen),
                            None => (ChangeKind::Added, None, now),
                        };
                        let rv = inner.next_rv();
                        let entry = Rc::new(PodEntry::new(Arc::clone(pod), status, rv, first_seen));
                        inner.pods.insert(uid.to_string(), Rc::clone(&entry));
                        inner.publish(Change { kind, entry }, now);
                    }
                }
                PodEvent::Status { pod, status } => {
                    let Some(old) = inner.pods.get(pod.uid()).cloned() else {
                        continue;
                    };
                    if old.status.as_deref() == Some(&*status) {
                        continue;
                    }
                    let first_seen = old.first_seen;
                    let running = |s: &PodStatus| s.phase == Some(crate::api::PodPhase::Running);
                    let was_pending = old.status.as_deref().is_some_and(|s| !running(s));
                    let mut started = old.started;
                    if !started && was_pending && running(&status) {
                        started = true;
                        let took = (now - first_seen).max(0) as f64 / 1e9;
                        inner.pod_start.observe(took);
                    }
                    let pod = Arc::clone(&old.pod);
                    let rv = inner.next_rv();
                    let mut entry = PodEntry::new(pod, Some(status), rv, first_seen);
                    entry.started = started;
                    let entry = Rc::new(entry);
                    inner
                        .pods
                        .insert(entry.pod.uid().to_string(), Rc::clone(&entry));
                    inner.publish(
                        Change {
                            kind: ChangeKind::Modified,
                            entry,
                        },
                        now,
                    );
                }
                PodEvent::Finished { .. } => {}
            }
        }
    }

    /// Drops the history's changes older than [`HISTORY_MAX_AGE`]; returns how many it
    /// dropped and when the oldest one left falls due.
    pub fn expire_history(&self, now: UnixNanos) -> (usize, Option<UnixNanos>) {
        let max_age = HISTORY_MAX_AGE.as_nanos() as UnixNanos;
        let mut inner = self.0.borrow_mut();
        let mut dropped = 0;
        while inner
            .history
            .front()
            .is_some_and(|(at, _)| now.saturating_sub(*at) >= max_age)
        {
            inner.history.pop_front();
            dropped += 1;
        }
        if dropped > 0 {
            crate::mem_trim::ShrinkSparse::shrink_sparse(&mut inner.history);
        }
        let due = inner
            .history
            .front()
            .map(|(at, _)| at.saturating_add(max_age));
        (dropped, due)
    }

    /// The current resource version and every pod (by UID order).
    pub fn pods(&self) -> (u64, Vec<Rc<PodEntry>>) {
        let inner = self.0.borrow();
        (inner.rv, inner.pods.values().cloned().collect())
    }

    pub fn get(&self, namespace: &str, name: &str) -> Option<Rc<PodEntry>> {
        self.0
            .borrow()
            .pods
            .values()
            .find(|e| e.namespace() == namespace && e.name() == name)
            .cloned()
    }

    pub fn get_uid(&self, uid: &str) -> Option<Rc<PodEntry>> {
        self.0.borrow().pods.get(uid).cloned()
    }

    pub fn resource_version(&self) -> u64 {
        self.0.borrow().rv
    }

    /// A watch of every change after `since` (None or 0: from now on).
    pub fn watch(&self, since: Option<u64>) -> Result<mpsc::Receiver<Rc<Change>>, TooOld> {
        let mut inner = self.0.borrow_mut();
        let (tx, rx) = mpsc::channel(WATCH_BUFFER);
        if let Some(since) = since.filter(|&s| s > 0 && s < inner.rv) {
            // The history must reach back to the change right after `since`.
            let oldest = inner
                .history
                .front()
                .map(|(_, c)| c.entry.resource_version)
                .unwrap_or(u64::MAX);
            if oldest > since + 1 {
                return Err(TooOld);
            }
            for (_, c) in inner
                .history
                .iter()
                .filter(|(_, c)| c.entry.resource_version > since)
            {
                if tx.try_send(Rc::clone(c)).is_err() {
                    return Err(TooOld);
                }
            }
        }
        inner.watchers.push(tx);
        Ok(rx)
    }

    /// `kubelet_running_pods`, `kubelet_running_containers` and the pod start SLI.
    pub fn render_metrics(&self, out: &mut String) {
        let inner = self.0.borrow();
        let statuses = || inner.pods.values().filter_map(|e| e.status.as_deref());
        let pods = statuses()
            .filter(|s| s.phase == Some(crate::api::PodPhase::Running))
            .count();
        let containers: usize = statuses()
            .map(|s| {
                s.container_statuses
                    .iter()
                    .chain(&s.init_container_statuses)
                    .filter(|c| c.state.running.is_some())
                    .count()
            })
            .sum();
        crate::metrics::render_single(
            out,
            "kubelet_running_pods",
            "gauge",
            "[ALPHA] Number of pods that have a running pod sandbox",
            pods,
        );
        crate::metrics::render_single(
            out,
            "kubelet_running_containers",
            "gauge",
            "[ALPHA] Number of containers currently running",
            containers,
        );
        out.push_str("# HELP kubelet_pod_start_duration_seconds [ALPHA] Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run\n# TYPE kubelet_pod_start_duration_seconds histogram\n");
        inner
            .pod_start
            .render(out, "kubelet_pod_start_duration_seconds", "");
    }

    /// How many watches are open (tests, metrics).
    pub fn watchers(&self) -> usize {
        let mut inner = self.0.borrow_mut();
        inner.watchers.retain(|w| !w.is_closed());
        inner.watchers.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::PodPhase;

    fn pod(uid: &str, name: &str) -> Arc<Pod> {
        let mut p = Pod::default();
        p.metadata.uid = uid.into();
        p.metadata.name = name.into();
        p.metadata.namespace = "default".into();
        Arc::new(p)
    }

    fn pods_event(pods: &[&Arc<Pod>]) -> PodEvent {
        PodEvent::Pods {
            pods: pods.iter().map(|p| Arc::clone(p)).collect(),
            mirrors: vec![],
            sources_ready: true,
        }
    }

    fn status(p: &Arc<Pod>, phase: PodPhase) -> PodEvent {
        PodEvent::Status {
            pod: Arc::clone(p),
            status: Arc::new(PodStatus {
                phase: Some(phase),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn changes_get_versions_and_reach_watchers() {
        let view = View::new();
        let (a, b) = (pod("a", "web"), pod("b", "db"));
        view.apply(vec![pods_event(&[&a, &b])], 1_000_000_000);
        assert_eq!(view.resource_version(), 2);
        let mut w = view.watch(None).unwrap();
        view.apply(vec![status(&a, PodPhase::Running)], 2);
        // The same status again is no change.
        view.apply(vec![status(&a, PodPhase::Running)], 3);
        view.apply(vec![pods_event(&[&a])], 4);
        let c = w.try_recv().unwrap();
        assert_eq!(
            (c.kind, c.entry.name(), c.entry.resource_version),
            (ChangeKind::Modified, "web", 3)
        );
        let c = w.try_recv().unwrap();
        assert_eq!((c.kind, c.entry.name()), (ChangeKind::Deleted, "db"));
        assert!(w.try_recv().is_err());
        let json = view.get("default", "web").unwrap().json();
        assert_eq!(json["status"]["phase"], "Running");
        assert_eq!(json["metadata"]["resourceVersion"], "3");
        assert_eq!(
            json["metadata"]["creationTimestamp"],
            "1970-01-01T00:00:01Z"
        );
        assert_eq!(json["kind"], "Pod");
        let mut out = String::new();
        view.render_metrics(&mut out);
        assert!(out.contains("kubelet_running_pods 1\n"), "{out}");
        assert!(
            out.contains("kubelet_pod_start_duration_seconds_count 0\n"),
            "straight to Running (adopted): not a start: {out}"
        );
        let c = pod("c", "new");
        view.apply(vec![pods_event(&[&a, &c])], 10_000_000_000);
        view.apply(vec![status(&c, PodPhase::Pending)], 10_500_000_000);
        view.apply(vec![status(&c, PodPhase::Running)], 12_000_000_000);
        let mut out = String::new();
        view.render_metrics(&mut out);
        assert!(
            out.contains("kubelet_pod_start_duration_seconds_bucket{le=\"2\"} 1\n"),
            "{out}"
        );
        assert!(
            out.contains("kubelet_pod_start_duration_seconds_sum 2\n"),
            "{out}"
        );
    }

    #[test]
    fn a_watch_from_an_older_version_replays_the_history_or_is_too_old() {
        let view = View::new();
        let a = pod("a", "web");
        view.apply(vec![pods_event(&[&a])], 0);
        view.apply(vec![status(&a, PodPhase::Pending)], 0);
        view.apply(vec![status(&a, PodPhase::Running)], 0);
        let mut w = view.watch(Some(1)).unwrap();
        assert_eq!(w.try_recv().unwrap().entry.resource_version, 2);
        assert_eq!(w.try_recv().unwrap().entry.resource_version, 3);
        assert!(w.try_recv().is_err());
        for i in 0..HISTORY {
            let phase = if i % 2 == 0 {
                PodPhase::Pending
            } else {
                PodPhase::Running
            };
            view.apply(vec![status(&a, phase)], 0);
        }
        assert_eq!(view.watch(Some(1)).unwrap_err(), TooOld);
        assert!(view.watch(Some(view.resource_version() - 5)).is_ok());
    }

    #[test]
    fn the_history_lets_changes_go_once_older_than_its_max_age() {
        let view = View::new();
        let a = pod("a", "web");
        let t0: UnixNanos = 1_000_000_000_000;
        let age = HISTORY_MAX_AGE.as_nanos() as UnixNanos;
        view.apply(vec![pods_event(&[&a])], t0);
        view.apply(vec![status(&a, PodPhase::Running)], t0 + age / 2);
        assert_eq!(view.expire_history(t0 + age - 1), (0, Some(t0 + age)));
        assert_eq!(view.expire_history(t0 + age), (1, Some(t0 + age / 2 + age)));
        // The change after version 1 is still there; the one after 0 is not.
        let mut w = view.watch(Some(1)).unwrap();
        assert_eq!(w.try_recv().unwrap().entry.resource_version, 2);
        assert_eq!(view.expire_history(t0 + age / 2 + age), (1, None));
        assert_eq!(view.watch(Some(1)).unwrap_err(), TooOld);
        // Nothing missed from the current version on.
        assert!(view.watch(Some(view.resource_version())).is_ok());
        assert!(view.get("default", "web").is_some(), "the pods stay");
    }

    #[test]
    fn a_watcher_that_does_not_read_is_cut_off() {
        let view = View::new();
        let a = pod("a", "web");
        view.apply(vec![pods_event(&[&a])], 0);
        let w = view.watch(None).unwrap();
        for i in 0..WATCH_BUFFER + 1 {
            let phase = if i % 2 == 0 {
                PodPhase::Pending
            } else {
                PodPhase::Running
            };
            view.apply(vec![status(&a, phase)], 0);
        }
        assert_eq!(view.watchers(), 0, "dropped, not waited for");
        drop(w);
    }
}
