//! Pod status to the apiserver, mirror pods, and the end of a deletion (kubelet: the
//! status manager's `syncPod` / `syncBatch`, `mirror_client.go`, `HandlePodCleanups`'
//! orphaned mirror pods, `canBeDeleted`).
//!
//! Owns: what was last sent per pod, the mirror-pod bookkeeping, and the pods whose
//! deletion it still has to finish. It learns everything from [`PodEvent`]s the agent sends
//! (messages in, no shared state): a pod's new status, the desired and mirror pods after
//! every change, a pod worker that finished.
//!
//! Behaviour:
//! - **Status**: `PATCH pods/<name>/status`, strategic merge, with `metadata.uid` as the
//!   precondition, right after a change (changes that arrive together are coalesced; the
//!   latest wins) plus a reconcile pass every 10 s that re-sends what failed and what the
//!   apiserver shows differently (timestamps and conditions set by others aside). A pod is
//!   never moved out of a terminal phase, whatever the apiserver or the agent says. Static
//!   pods report on their mirror pod (none yet: skipped, retried later).
//! - **Mirror pods**: for each static pod, a copy with annotation
//!   `kubernetes.io/config.mirror` = its config hash and exactly one owner reference to the
//!   Node (`controller: true`, no blockOwnerDeletion — NodeRestriction accepts nothing
//!   else); created once the Node's UID is known, re-created when deleted, replaced when
//!   its hash is stale, deleted (grace 0, UID precondition) when the static pod goes —
//!   orphans only once every source has been seen.
//! - **Deletion**: a pod with a `deletionTimestamp` whose worker finished (stopped and
//!   cleaned up; its final status sent first) is deleted with grace 0 and its UID as the
//!   precondition, so a re-created pod of the same name is never touched.
//!
//! Must never: block the event loop (it is its own task), panic, or give up: failures stay
//! pending and are retried at the next pass.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::api::{
    ANNOTATION_CONFIG_HASH, ANNOTATION_CONFIG_MIRROR, OwnerReference, Pod, PodStatus,
};
use crate::kube::{ApiError, Client, DeleteOptions, PatchKind, pod_path};
use crate::messages::{PodEvent, PodEventReceiver};
use crate::pod_manager::is_mirror_pod;
use crate::status;

/// kubelet: `syncPeriod` of the status manager.
pub(crate) const RECONCILE_PERIOD: Duration = Duration::from_secs(10);
/// A mirror pod just created is not created again before this (the watch may lag).
const MIRROR_CREATE_HOLD: Duration = Duration::from_secs(10);

/// One pod's status as the syncer tracks it.
#[derive(Debug, Clone)]
struct Entry {
    pod: Arc<Pod>,
    /// Shared with the status manager that stored it.
    status: Arc<PodStatus>,
    /// The last status the apiserver accepted.
    sent: Option<PodStatus>,
}

/// The status syncer task.
pub struct StatusSyncer {
    client: Client,
    node_name: String,
    node_uid: watch::Receiver<Option<String>>,
    events: PodEventReceiver,
    reconcile_period: Duration,
    state: SyncState,
}

#[derive(Default)]
struct SyncState {
    /// Desired pods (static and API), by UID.
    pods: HashMap<String, Arc<Pod>>,
    /// Mirror pods the apiserver has, by full name.
    mirrors: HashMap<String, Arc<Pod>>,
    sources_ready: bool,
    statuses: HashMap<String, Entry>,
    /// UIDs with a status to send now.
    dirty: HashSet<String>,
    /// UIDs whose pod worker finished.
    finished: HashSet<String>,
    /// UIDs already deleted (the watch has not caught up yet).
    deleted: HashSet<String>,
    /// full name → (config hash, when) of mirror pods created but not yet seen.
    mirror_created: HashMap<String, (String, Instant)>,
    /// Mirror pod UIDs deleted and not yet gone from the watch.
    mirror_deleted: HashMap<String, Instant>,
    /// full name → config hash of static pods whose mirror pod the apiserver would refuse
    /// (see [`mirror_forbidden`]), said once per version.
    mirror_refused: HashMap<String, String>,
    /// In a streak of failures (one log line per streak).
    failing: bool,
}

impl StatusSyncer {
    pub fn new(
        client: Client,
        node_name: String,
        node_uid: watch::Receiver<Option<String>>,
        events: PodEventReceiver,
    ) -> Self {
        StatusSyncer {
            client,
            node_name,
            node_uid,
            events,
            reconcile_period: RECONCILE_PERIOD,
            state: SyncState::default(),
        }
    }

    pub fn with_reconcile_period(mut self, period: Duration) -> Self {
        self.reconcile_period = period;
        self
    }

    pub async fn run(mut self, shutdown: CancellationToken) {
        let mut tick = crate::local_tasks::interval(self.reconcile_period);
        loop {
            let mut reconcile = false;
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => return,
                batch = self.events.recv() => {
                    // Already coalesced by the mailbox: the latest status of each pod.
                    let Some(batch) = batch else { return };
                    for msg in batch {
                        self.state.handle(msg);
                    }
                }
                _ = self.node_uid.changed() => {}
                _ = tick.tick() => reconcile = true,
            }
            if reconcile {
                self.state.mark_unsynced();
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = self.flush(reconcile) => {}
            }
        }
    }

    /// Sends dirty statuses, keeps mirror pods, finishes deletions.
    async fn flush(&mut self, reconcile: bool) {
        let mut ok = true;
        let dirty: Vec<String> = self.state.dirty.iter().cloned().collect();
        for uid in dirty {
            ok &= self.sync_status(&uid).await;
        }
        ok &= self.sync_mirrors(reconcile).await;
        ok &= self.finish_deletions().await;
        if ok && self.state.failing {
            log::info!(
                "status sync: apiserver {} answers again",
                self.client.server()
            );
            self.state.failing = false;
        }
    }

    fn failed(&mut self, what: String) {
        if self.state.failing {
            log::debug!("status sync: {what}");
        } else {
            log::warn!(
                "status sync: {what}; retrying every {:?}",
                self.reconcile_period
            );
            self.state.failing = true;
        }
    }

    /// kubelet: status manager `syncPod`. `true` unless the apiserver could not be reached.
    async fn sync_status(&mut self, uid: &str) -> bool {
        let Some(entry) = self.state.statuses.get(uid).cloned() else {
            self.state.dirty.remove(uid);
            return true;
        };
        // The object to patch: the API pod itself, or the mirror pod of a static pod.
        let target = if entry.pod.is_static() {
            match self.state.mirrors.get(&entry.pod.full_name()) {
                Some(m) if is_mirror_of(m, &entry.pod) => Arc::clone(m),
                _ => {
                    log::debug!(
                        "status sync: static pod {} has no mirror pod yet; status waits",
                        entry.pod.full_name()
                    );
                    return true;
                }
            }
        } else {
            Arc::clone(&entry.pod)
        };
        let mut status = PodStatus::clone(&entry.status);
        // Never out of a terminal phase (kubelet: `checkContainerStateTransition` and the
        // phase guard of `mergePodStatus`).
        if let Some(p) = target
            .status
            .as_ref()
            .and_then(|s| s.phase)
            .filter(|p| p.is_terminal())
        {
            if status.phase != Some(p) {
                log::debug!(
                    "status sync: pod {} stays {p:?} (not {:?})",
                    target.full_name(),
                    status.phase
                );
                status.phase = Some(p);
            }
        }
        let path = format!(
            "{}/status",
            pod_path(&target.metadata.namespace, Some(&target.metadata.name))
        );
        let body = json!({"metadata": {"uid": target.uid()}, "status": status_patch(&status, target.status.as_ref())});
        match self
            .client
            .patch::<serde_json::Value>(&path, PatchKind::StrategicMerge, &body)
            .await
        {
            Ok(_) => {
                log::debug!("status sync: pod {} status sent", target.full_name());
                if let Some(e) = self.state.statuses.get_mut(uid) {
                    e.sent = Some(status);
                }
                self.state.dirty.remove(uid);
                true
            }
            Err(e) if e.is_not_found() || e.is_conflict() => {
                // Gone, or another object of the same name now: nothing to report to.
                log::info!(
                    "status sync: pod {} (uid {}) is gone from the apiserver: {e}",
                    target.full_name(),
                    target.uid()
                );
                self.state.dirty.remove(uid);
                true
            }
            Err(e) => {
                self.failed(format!(
                    "cannot update pod {} status: {e}",
                    target.full_name()
                ));
                !is_network(&e)
            }
        }
    }

    /// kubelet: mirror pods in `syncPod` and `HandlePodCleanups`.
    async fn sync_mirrors(&mut self, reconcile: bool) -> bool {
        let Some(node_uid) = self.node_uid.borrow().clone() else {
            return true;
        };
        let now = Instant::now();
        let plan = plan_mirrors(&self.state, now, reconcile);
        // The refusals of static pods that are gone are forgotten (nothing to do, and no
        // allocation, while there are none).
        if !self.state.mirror_refused.is_empty() {
            let statics: HashSet<String> = (self.state.pods.values())
                .filter(|p| p.is_static())
                .map(|p| p.full_name())
                .collect();
            self.state
                .mirror_refused
                .retain(|name, _| statics.contains(name));
        }
        let mut ok = true;
        for action in plan {
            match action {
                MirrorAction::Refused { pod, why } => {
                    log::warn!(
                        "static pod {}: no mirror pod in the apiserver: {why}, and NodeRestriction lets a node create only mirror pods that reference no service account, Secret, ConfigMap or volume claim (the pod runs; the cluster does not see it)",
                        pod.full_name()
                    );
                    self.state
                        .mirror_refused
                        .insert(pod.full_name(), config_hash(&pod).to_string());
                }
                MirrorAction::Delete { mirror, why } => {
                    ok &= self.delete_mirror(&mirror, why, now).await;
                }
                MirrorAction::Create { pod } => {
                    ok &= self.create_mirror(&pod, &node_uid, now).await;
                }
            }
        }
        ok
    }

    /// kubelet: `DeleteMirrorPod` — with grace 0 and the mirror's UID; gone already or
    /// replaced counts as deleted. False when the request failed.
    async fn delete_mirror(&mut self, mirror: &Pod, why: &str, now: Instant) -> bool {
        log::info!(
            "mirror pod {} (uid {}): {why}; deleting it",
            mirror.full_name(),
            mirror.uid()
        );
        let path = pod_path(&mirror.metadata.namespace, Some(&mirror.metadata.name));
        let opts = DeleteOptions {
            grace_period_seconds: Some(0),
            uid: Some(mirror.uid().to_string()),
        };
        match self.client.delete(&path, &opts).await {
            Ok(()) => {
                self.state
                    .mirror_deleted
                    .insert(mirror.uid().to_string(), now);
            }
            Err(e) if e.is_not_found() || e.is_conflict() => {
                self.state
                    .mirror_deleted
                    .insert(mirror.uid().to_string(), now);
            }
            Err(e) => {
                self.failed(format!(
                    "cannot delete mirror pod {}: {e}",
                    mirror.full_name()
                ));
                return false;
            }
        }
        true
    }

    /// kubelet: `CreateMirrorPod` — the static pod's mirror, owned by the node; one that
    /// exists already counts as created (the watch shows it). False when the request failed.
    async fn create_mirror(&mut self, pod: &Pod, node_uid: &str, now: Instant) -> bool {
        let mirror = mirror_pod(pod, &self.node_name, node_uid);
        let hash = config_hash(pod).to_string();
        let path = pod_path(&mirror.metadata.namespace, None);
        // As a Value: `Pod`'s Serialize code is instantiated for Values only.
        let body = serde_json::to_value(&mirror).unwrap_or_default();
        match self
            .client
            .create::<_, serde_json::Value>(&path, &body)
            .await
        {
            Ok(created) => {
                log::info!(
                    "mirror pod {} created (uid {})",
                    pod.full_name(),
                    created
                        .pointer("/metadata/uid")
                        .and_then(serde_json::Value::as_str)
                        .unwrap_or_default()
                );
                self.state
                    .mirror_created
                    .insert(pod.full_name(), (hash, now));
            }
            Err(e) if e.is_already_exists() => {
                // The watch will show it (stale or not) shortly.
                self.state
                    .mirror_created
                    .insert(pod.full_name(), (hash, now));
            }
            Err(e) => {
                self.failed(format!("cannot create mirror pod {}: {e}", pod.full_name()));
                return false;
            }
        }
        true
    }

    /// kubelet: status manager `canBeDeleted` + `DeletePod` with grace 0 and the UID.
    async fn finish_deletions(&mut self) -> bool {
        let ready: Vec<Arc<Pod>> = self
            .state
            .finished
            .iter()
            .filter_map(|uid| self.state.pods.get(uid))
            .filter(|p| {
                p.metadata.deletion_timestamp.is_some()
                    && !p.is_static()
                    && !self.state.deleted.contains(p.uid())
                    && !self.state.dirty.contains(p.uid())
            })
            .cloned()
            .collect();
        let mut ok = true;
        for pod in ready {
            let path = pod_path(&pod.metadata.namespace, Some(&pod.metadata.name));
            let opts = DeleteOptions {
                grace_period_seconds: Some(0),
                uid: Some(pod.uid().to_string()),
            };
            match self.client.delete(&path, &opts).await {
                Ok(()) => {
                    log::info!(
                        "pod {} (uid {}) terminated and cleaned up: deleted from the apiserver",
                        pod.full_name(),
                        pod.uid()
                    );
                    self.state.deleted.insert(pod.uid().to_string());
                }
                Err(e) if e.is_not_found() || e.is_conflict() => {
                    self.state.deleted.insert(pod.uid().to_string());
                }
                Err(e) => {
                    self.failed(format!("cannot delete pod {}: {e}", pod.full_name()));
                    ok = false;
                }
            }
        }
        ok
    }
}

impl SyncState {
    fn handle(&mut self, msg: PodEvent) {
        match msg {
            PodEvent::Status { pod, status } => {
                let uid = pod.uid().to_string();
                let changed = self.statuses.get(&uid).is_none_or(|e| e.status != status);
                let sent = self.statuses.get(&uid).and_then(|e| e.sent.clone());
                self.statuses
                    .insert(uid.clone(), Entry { pod, status, sent });
                if changed {
                    self.dirty.insert(uid);
                }
            }
            PodEvent::Pods {
                pods,
                mirrors,
                sources_ready,
            } => {
                self.pods = pods
                    .into_iter()
                    .filter(|p| !is_mirror_pod(p))
                    .map(|p| (p.uid().to_string(), p))
                    .collect();
                let old_mirrors: HashSet<String> =
                    self.mirrors.values().map(|m| m.uid().to_string()).collect();
                self.mirrors = mirrors.into_iter().map(|m| (m.full_name(), m)).collect();
                self.sources_ready = sources_ready;
                // Keep each entry's pod current (the apiserver's status moves with it).
                for (uid, e) in &mut self.statuses {
                    if let Some(p) = self.pods.get(uid) {
                        e.pod = Arc::clone(p);
                    }
                }
                // A mirror pod that just appeared: its static pod's status can go now.
                for e in self.statuses.values() {
                    if let Some(m) = self.mirrors.get(&e.pod.full_name()) {
                        if e.pod.is_static() && !old_mirrors.contains(m.uid()) {
                            self.dirty.insert(e.pod.uid().to_string());
                        }
                    }
                }
                let mirror_uids: HashSet<&str> = self.mirrors.values().map(|m| m.uid()).collect();
                self.mirror_deleted
                    .retain(|uid, _| mirror_uids.contains(uid.as_str()));
                let mirror_names: HashSet<&String> = self.mirrors.keys().collect();
                self.mirror_created
                    .retain(|name, _| !mirror_names.contains(name));
                // Forget pods no source lists any more.
                let pods = &self.pods;
                self.deleted.retain(|uid| pods.contains_key(uid));
                self.finished.retain(|uid| pods.contains_key(uid));
                self.statuses.retain(|uid, _| pods.contains_key(uid));
                self.dirty.retain(|uid| pods.contains_key(uid));
            }
            PodEvent::Finished { uid } => {
                self.finished.insert(uid);
            }
        }
    }

    /// The reconcile pass: statuses the apiserver did not accept, or shows differently.
    fn mark_unsynced(&mut self) {
        for (uid, e) in &self.statuses {
            let api = if e.pod.is_static() {
                self.mirrors
                    .get(&e.pod.full_name())
                    .and_then(|m| m.status.clone())
            } else {
                e.pod.status.clone()
            };
            let accepted = e.sent.as_ref() == Some(&e.status);
            let shown = api.as_ref().is_some_and(|api| api_shows(api, &e.status));
            if !accepted || !shown {
                self.dirty.insert(uid.clone());
            }
        }
    }
}

/// The status as a strategic merge patch that leaves the apiserver's copy equal to it in
/// what the kubelet owns (kubelet: the status manager sends a two-way merge patch from the
/// apiserver's status to its own, in which a field it no longer has is `null`, i.e.
/// deleted). Conditions merge by type, so a condition's `reason` and `message` that ours
/// lack now are sent as `null`: else a Ready condition back to True kept "containers with
/// unready status" from its False days, and never matched ours again — a PATCH of every
/// pod's status at every 10 s reconcile, found against the real apiserver. The pod's own
/// `reason` and `message` likewise; container statuses are replaced whole by the server.
/// Only the kubelet's own conditions and DisruptionTarget are sent (kubelet:
/// `mergePodStatus`): the others (readiness gates') are their writers', and our copy of them
/// may be older than the apiserver's.
///
/// A kubelet-owned condition the apiserver's copy (`api`) has and ours no longer has (a
/// resize condition cleared) is deleted by a `$patch: delete` directive: conditions merge
/// by type, so leaving it out would keep it.
fn status_patch(status: &PodStatus, api: Option<&PodStatus>) -> serde_json::Value {
    use serde_json::Value;
    let mut ours = status.clone();
    ours.conditions
        .retain(|c| status::owned_by_kubelet(&c.type_) || c.type_ == status::DISRUPTION_TARGET);
    let mut v = serde_json::to_value(&ours).unwrap_or_default();
    let fill = |o: &mut serde_json::Map<String, Value>| {
        for k in ["reason", "message"] {
            o.entry(k).or_insert(Value::Null);
        }
    };
    if let Some(o) = v.as_object_mut() {
        fill(o);
        if let Some(conditions) = o.get_mut("conditions").and_then(Value::as_array_mut) {
            conditions
                .iter_mut()
                .filter_map(Value::as_object_mut)
                .for_each(fill);
        }
        let gone = api.into_iter().flat_map(|a| &a.conditions).filter(|c| {
            status::owned_by_kubelet(&c.type_)
                && !ours.conditions.iter().any(|o| o.type_ == c.type_)
        });
        for c in gone {
            let mut del = serde_json::Map::new();
            del.insert("type".into(), Value::String(c.type_.to_string()));
            del.insert("$patch".into(), Value::String("delete".into()));
            let del = Value::Object(del);
            match o.get_mut("conditions").and_then(Value::as_array_mut) {
                Some(list) => list.push(del),
                None => {
                    o.insert("conditions".into(), Value::Array(vec![del]));
                }
            }
        }
    }
    v
}

/// kubelet: `needsReconcile` — does the apiserver's status say what ours says? The one
/// rule of [`status::equal_apart_from_timestamps`], over the kubelet-owned conditions
/// only, by type: the apiserver's copy also carries other writers' conditions
/// (DisruptionTarget, readiness gates) in the order of the server's merges, and neither is
/// ours to reconcile.
pub(crate) fn api_shows(api: &PodStatus, ours: &PodStatus) -> bool {
    status::equal_apart_from_timestamps(
        &kubelet_conditions_only(api),
        &kubelet_conditions_only(ours),
    )
}

fn kubelet_conditions_only(s: &PodStatus) -> PodStatus {
    let mut s = s.clone();
    s.conditions.retain(|c| status::owned_by_kubelet(&c.type_));
    crate::sort::sort_by(&mut s.conditions, |a, b| a.type_.cmp(&b.type_));
    s
}

fn is_network(e: &ApiError) -> bool {
    matches!(
        e,
        ApiError::Connect { .. } | ApiError::Timeout { .. } | ApiError::Body { .. }
    )
}

/// The config hash of a static pod (its UID when the annotation is missing).
fn config_hash(pod: &Pod) -> &str {
    pod.annotation(ANNOTATION_CONFIG_HASH)
        .unwrap_or_else(|| pod.uid())
}

/// kubelet: `IsMirrorPodOf` — the mirror carries the static pod's current hash.
pub(crate) fn is_mirror_of(mirror: &Pod, pod: &Pod) -> bool {
    mirror.full_name() == pod.full_name()
        && mirror.annotation(ANNOTATION_CONFIG_MIRROR) == Some(config_hash(pod))
}

/// The mirror pod of a static pod (kubelet: `CreateMirrorPod`).
pub(crate) fn mirror_pod(pod: &Pod, node_name: &str, node_uid: &str) -> Pod {
    let mut m = pod.clone();
    m.api_version = "v1".into();
    m.kind = "Pod".into();
    m.metadata.uid.clear();
    m.metadata.resource_version.clear();
    m.metadata.creation_timestamp = None;
    m.metadata.deletion_timestamp = None;
    m.metadata.deletion_grace_period_seconds = None;
    m.metadata.annotations.insert(
        ANNOTATION_CONFIG_MIRROR.to_string(),
        config_hash(pod).to_string(),
    );
    m.metadata.owner_references = vec![OwnerReference {
        api_version: "v1".into(),
        kind: "Node".into(),
        name: node_name.to_string(),
        uid: node_uid.to_string(),
        controller: Some(true),
    }];
    m.status = None;
    m
}

/// What to do about mirror pods.
#[derive(Debug, Clone, PartialEq)]
enum MirrorAction {
    Create {
        pod: Arc<Pod>,
    },
    Delete {
        mirror: Arc<Pod>,
        why: &'static str,
    },
    /// No mirror pod: the apiserver would refuse it (said once per version of the pod).
    Refused {
        pod: Arc<Pod>,
        why: String,
    },
}

/// Why NodeRestriction would refuse this static pod's mirror pod, if it would: a node may
/// create only mirror pods that reference no service account, Secret, ConfigMap,
/// PersistentVolumeClaim, ClusterTrustBundle or ResourceClaim (kubelet side: the gate
/// `PreventStaticPodAPIReferences`, beta since 1.34, rejects such static pods outright with
/// "static pods may not reference …"). A deliberate difference: picolet runs them — their
/// ConfigMaps and Secrets are the node's local objects (`config_data`), which the
/// apiserver does not know — and only leaves out the mirror pod, so the cluster does not
/// see them.
pub(crate) fn mirror_forbidden(pod: &Pod) -> Option<String> {
    use crate::config_data::Kind;
    if let Some(sa) = pod
        .spec
        .service_account_name
        .as_deref()
        .filter(|s| !s.is_empty())
    {
        return Some(format!("it names service account {sa:?}"));
    }
    if let Some(key) = crate::config_data::references(pod).into_iter().next() {
        return Some(match key.kind {
            Kind::ConfigMap => format!("it references ConfigMap {:?}", key.name),
            Kind::Secret => format!("it references Secret {:?}", key.name),
            Kind::Token => "it projects a service account token".to_string(),
        });
    }
    for v in &pod.spec.volumes {
        for kind in ["persistentVolumeClaim", "ephemeral"] {
            if v.other.contains_key(kind) {
                return Some(format!("volume {:?} is a {kind} volume", v.name));
            }
        }
        let ctb = v.projected.iter().flat_map(|p| &p.sources);
        if ctb.into_iter().any(|s| s.cluster_trust_bundle.is_some()) {
            return Some(format!("volume {:?} projects a ClusterTrustBundle", v.name));
        }
    }
    None
}

/// The mirror-pod plan (pure): create missing ones, replace stale ones, delete orphans.
fn plan_mirrors(state: &SyncState, now: Instant, retry_all: bool) -> Vec<MirrorAction> {
    let mut out = Vec::new();
    let recently_deleted = |m: &Pod| {
        state
            .mirror_deleted
            .get(m.uid())
            .is_some_and(|at| !retry_all && now.duration_since(*at) < MIRROR_CREATE_HOLD)
    };
    let mut statics: Vec<&Arc<Pod>> = state.pods.values().filter(|p| p.is_static()).collect();
    crate::sort::sort_by_key(&mut statics, |p| p.full_name());
    let static_names: HashSet<String> = statics.iter().map(|p| p.full_name()).collect();
    for pod in statics {
        let name = pod.full_name();
        match state.mirrors.get(&name) {
            Some(m) if m.metadata.deletion_timestamp.is_some() => {} // going away: wait
            Some(m) if is_mirror_of(m, pod) => {}
            Some(m) if state.mirror_deleted.contains_key(m.uid()) && recently_deleted(m) => {}
            Some(m) => out.push(MirrorAction::Delete {
                mirror: Arc::clone(m),
                why: "stale (its static pod changed)",
            }),
            // (No `if let` guard here: the 32-bit ARM builds use Rust 1.90.)
            None => {
                if let Some(why) = mirror_forbidden(pod) {
                    if state.mirror_refused.get(&name).map(String::as_str) != Some(config_hash(pod))
                    {
                        out.push(MirrorAction::Refused {
                            pod: Arc::clone(pod),
                            why,
                        });
                    }
                    continue;
                }
                let held = state.mirror_created.get(&name).is_some_and(|(hash, at)| {
                    hash == config_hash(pod) && now.duration_since(*at) < MIRROR_CREATE_HOLD
                });
                if !held {
                    out.push(MirrorAction::Create {
                        pod: Arc::clone(pod),
                    });
                }
            }
        }
    }
    if state.sources_ready {
        let mut orphans: Vec<&Arc<Pod>> = state
            .mirrors
            .iter()
            .filter(|(name, m)| {
                !static_names.contains(*name)
                    && m.metadata.deletion_timestamp.is_none()
                    && !recently_deleted(m)
            })
            .map(|(_, m)| m)
            .collect();
        crate::sort::sort_by_key(&mut orphans, |m| m.full_name());
        for m in orphans {
            out.push(MirrorAction::Delete {
                mirror: Arc::clone(m),
                why: "its static pod is gone",
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ANNOTATION_CONFIG_SOURCE, PodCondition, PodPhase};

    fn static_pod(name: &str, hash: &str) -> Arc<Pod> {
        let mut p = Pod::default();
        p.metadata.name = name.into();
        p.metadata.namespace = "default".into();
        p.metadata.uid = hash.into();
        p.metadata
            .annotations
            .insert(ANNOTATION_CONFIG_SOURCE.into(), "file".into());
        p.metadata
            .annotations
            .insert(ANNOTATION_CONFIG_HASH.into(), hash.into());
        Arc::new(p)
    }

    fn mirror(name: &str, hash: &str, uid: &str) -> Arc<Pod> {
        let mut m = mirror_pod(&static_pod(name, hash), "pi", "node-uid");
        m.metadata.uid = uid.into();
        m.metadata
            .annotations
            .insert(ANNOTATION_CONFIG_SOURCE.into(), "api".into());
        Arc::new(m)
    }

    fn state(pods: Vec<Arc<Pod>>, mirrors: Vec<Arc<Pod>>, ready: bool) -> SyncState {
        let mut s = SyncState::default();
        s.handle(PodEvent::Pods {
            pods,
            mirrors,
            sources_ready: ready,
        });
        s
    }

    fn summary(plan: &[MirrorAction]) -> Vec<String> {
        plan.iter()
            .map(|a| match a {
                MirrorAction::Create { pod } => format!("create {}", pod.metadata.name),
                MirrorAction::Delete { mirror, .. } => format!("delete {}", mirror.uid()),
                MirrorAction::Refused { pod, why } => {
                    format!("refuse {}: {why}", pod.metadata.name)
                }
            })
            .collect()
    }

    #[test]
    fn mirror_pod_shape() {
        let m = mirror_pod(&static_pod("web-pi", "h1"), "pi", "node-uid");
        assert_eq!(m.annotation(ANNOTATION_CONFIG_MIRROR), Some("h1"));
        assert_eq!(
            m.metadata.owner_references,
            vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Node".into(),
                name: "pi".into(),
                uid: "node-uid".into(),
                controller: Some(true),
            }]
        );
        assert!(m.metadata.uid.is_empty() && m.status.is_none());
        assert!(is_mirror_pod(&m));
    }

    #[test]
    fn mirror_plan_table() {
        let now = Instant::now();
        // (static pods, mirrors, sources ready) → actions
        type Case = (Vec<Arc<Pod>>, Vec<Arc<Pod>>, bool, Vec<&'static str>);
        let cases: Vec<Case> = vec![
            (vec![static_pod("a", "h1")], vec![], true, vec!["create a"]),
            (
                vec![static_pod("a", "h1")],
                vec![mirror("a", "h1", "m1")],
                true,
                vec![],
            ),
            (
                vec![static_pod("a", "h2")],
                vec![mirror("a", "h1", "m1")],
                true,
                vec!["delete m1"],
            ),
            (
                vec![],
                vec![mirror("a", "h1", "m1")],
                true,
                vec!["delete m1"],
            ),
            (vec![], vec![mirror("a", "h1", "m1")], false, vec![]),
            (
                vec![static_pod("b", "h1")],
                vec![mirror("a", "h1", "m1")],
                false,
                vec!["create b"],
            ),
        ];
        for (i, (pods, mirrors, ready, want)) in cases.into_iter().enumerate() {
            let s = state(pods, mirrors, ready);
            assert_eq!(summary(&plan_mirrors(&s, now, false)), want, "case {i}");
        }
        // A mirror being deleted is waited for; a just-created one is not created again.
        let mut going = Pod::clone(&mirror("a", "h1", "m1"));
        going.metadata.deletion_timestamp = Some("2026-01-01T00:00:00Z".into());
        let s = state(vec![static_pod("a", "h2")], vec![Arc::new(going)], true);
        assert!(plan_mirrors(&s, now, false).is_empty());
        let mut s = state(vec![static_pod("a", "h1")], vec![], true);
        s.mirror_created
            .insert("default/a".into(), ("h1".into(), now));
        assert!(plan_mirrors(&s, now, false).is_empty());
        assert_eq!(
            summary(&plan_mirrors(&s, now + MIRROR_CREATE_HOLD, false)),
            ["create a"]
        );
    }

    #[test]
    fn a_static_pod_that_references_api_objects_gets_no_mirror_pod_and_it_is_said_once() {
        let now = Instant::now();
        let with = |f: &dyn Fn(&mut Pod)| {
            let mut p = Pod::clone(&static_pod("a", "h1"));
            f(&mut p);
            Arc::new(p)
        };
        let volume = |v: serde_json::Value| -> crate::api::Volume {
            serde_json::from_value(v).expect("a volume")
        };
        let cases: Vec<(Arc<Pod>, &str)> = vec![
            (
                with(&|p| p.spec.service_account_name = Some("robot".into())),
                "refuse a: it names service account \"robot\"",
            ),
            (
                with(&|p| {
                    p.spec.volumes.push(volume(
                        serde_json::json!({"name": "s", "secret": {"secretName": "tls"}}),
                    ))
                }),
                "refuse a: it references Secret \"tls\"",
            ),
            (
                with(&|p| {
                    p.spec.volumes.push(volume(
                        serde_json::json!({"name": "c", "configMap": {"name": "conf"}}),
                    ))
                }),
                "refuse a: it references ConfigMap \"conf\"",
            ),
            (
                with(&|p| {
                    p.spec.volumes.push(volume(serde_json::json!(
                        {"name": "d", "persistentVolumeClaim": {"claimName": "data"}}
                    )))
                }),
                "refuse a: volume \"d\" is a persistentVolumeClaim volume",
            ),
            (
                with(&|p| {
                    p.spec
                        .volumes
                        .push(volume(serde_json::json!({"name": "e", "emptyDir": {}})))
                }),
                "create a",
            ),
        ];
        for (pod, want) in cases {
            let mut s = state(vec![Arc::clone(&pod)], vec![], true);
            assert_eq!(summary(&plan_mirrors(&s, now, false)), [want]);
            if want.starts_with("refuse") {
                // Said once per version of the pod; an edit says it again.
                s.mirror_refused.insert("default/a".into(), "h1".into());
                assert!(plan_mirrors(&s, now, true).is_empty());
                s.mirror_refused.insert("default/a".into(), "h0".into());
                assert_eq!(plan_mirrors(&s, now, true).len(), 1);
            }
        }
    }

    /// What the apiserver keeps after our patch shows what we sent (conditions merged by
    /// type), so the next reconcile finds nothing to send.
    #[cfg(feature = "mock-apiserver")]
    #[test]
    fn a_condition_back_to_true_loses_its_old_reason_and_message() {
        let cond = |s: &'static str, why: Option<&str>| PodCondition {
            type_: "Ready".into(),
            status: s.into(),
            last_transition_time: Some("t".into()),
            reason: why.map(|_| "ContainersNotReady".to_string()),
            message: why.map(str::to_string),
            observed_generation: 0,
        };
        let before = PodStatus {
            phase: Some(PodPhase::Pending),
            message: Some("old".into()),
            conditions: vec![cond("False", Some("containers with unready status: [app]"))],
            ..PodStatus::default()
        };
        let after = PodStatus {
            phase: Some(PodPhase::Running),
            conditions: vec![cond("True", None)],
            ..PodStatus::default()
        };
        let mut server = serde_json::to_value(&before).unwrap();
        crate::kube::mock::merge(&mut server, &status_patch(&after, None), true);
        let kept: PodStatus = serde_json::from_value(server).unwrap();
        assert!(api_shows(&kept, &after), "{kept:#?}");
        assert_eq!(kept.conditions[0].message, None);
        assert_eq!(kept.message, None);
        // The patch of an unchanged status is a no-op on the server's copy.
        let mut again = serde_json::to_value(&kept).unwrap();
        crate::kube::mock::merge(&mut again, &status_patch(&after, None), true);
        assert_eq!(serde_json::from_value::<PodStatus>(again).unwrap(), kept);
    }

    /// A readiness gate's condition set by someone else after our last look is not put back
    /// by our patch (kubelet: `mergePodStatus` sends the kubelet's own conditions only).
    #[cfg(feature = "mock-apiserver")]
    #[test]
    fn the_patch_leaves_other_writers_conditions_alone() {
        let cond = |t: &str, s: &str| PodCondition {
            type_: t.to_string().into(),
            status: s.to_string().into(),
            ..PodCondition::default()
        };
        let server = PodStatus {
            conditions: vec![cond("k8s.io/gate", "False"), cond("Ready", "True")],
            ..PodStatus::default()
        };
        let ours = PodStatus {
            conditions: vec![
                cond("k8s.io/gate", "True"),
                cond("DisruptionTarget", "True"),
                cond("Ready", "False"),
            ],
            ..PodStatus::default()
        };
        let mut v = serde_json::to_value(&server).unwrap();
        crate::kube::mock::merge(&mut v, &status_patch(&ours, None), true);
        let kept: PodStatus = serde_json::from_value(v).unwrap();
        let get = |t: &str| {
            kept.conditions
                .iter()
                .find(|c| c.type_ == t)
                .map(|c| &*c.status)
        };
        assert_eq!(get("k8s.io/gate"), Some("False"));
        assert_eq!(get("Ready"), Some("False"));
        assert_eq!(get("DisruptionTarget"), Some("True"));

        // A kubelet-owned condition ours no longer has (a resize done) is deleted; the
        // others' stay.
        let mut server = ours.clone();
        server.conditions.push(cond("PodResizeInProgress", "True"));
        let mut v = serde_json::to_value(&server).unwrap();
        crate::kube::mock::merge(&mut v, &status_patch(&ours, Some(&server)), true);
        let kept: PodStatus = serde_json::from_value(v).unwrap();
        assert!(
            !kept
                .conditions
                .iter()
                .any(|c| c.type_ == "PodResizeInProgress")
        );
        assert_eq!(kept.conditions.len(), 3);
    }

    #[test]
    fn api_status_comparison_ignores_times_and_foreign_conditions() {
        let cond = |t: &str, s: &str, at: &str| PodCondition {
            type_: t.to_string().into(),
            status: s.to_string().into(),
            last_transition_time: Some(at.into()),
            ..PodCondition::default()
        };
        let ours = PodStatus {
            phase: Some(PodPhase::Running),
            conditions: vec![cond("Ready", "True", "t1")],
            start_time: Some("t0".into()),
            ..PodStatus::default()
        };
        let api = PodStatus {
            phase: Some(PodPhase::Running),
            conditions: vec![
                cond("DisruptionTarget", "True", "t5"),
                cond("Ready", "True", "t2"),
            ],
            ..PodStatus::default()
        };
        assert!(api_shows(&api, &ours));
        let mut other = api.clone();
        other.conditions[1].status = "False".into();
        assert!(!api_shows(&other, &ours));
        // The server's order of the kubelet's conditions is not ours to reconcile either,
        // nor a condition of another writer that only our copy still carries.
        let mut ours2 = ours.clone();
        ours2
            .conditions
            .insert(0, cond("Initialized", "True", "t1"));
        ours2
            .conditions
            .push(cond("example.com/gate", "True", "t1"));
        let mut api2 = api.clone();
        api2.conditions.push(cond("Initialized", "True", "t3"));
        assert!(api_shows(&api2, &ours2));
        // Times aside, the rest of the status counts.
        let mut ours3 = ours.clone();
        ours3.phase = Some(PodPhase::Succeeded);
        assert!(!api_shows(&api, &ours3));
    }

    #[test]
    fn status_messages_mark_dirty_and_forget_gone_pods() {
        let p = static_pod("a", "h1");
        let mut s = state(vec![Arc::clone(&p)], vec![], true);
        let st = PodStatus {
            phase: Some(PodPhase::Running),
            ..PodStatus::default()
        };
        s.handle(PodEvent::Status {
            pod: Arc::clone(&p),
            status: Arc::new(st.clone()),
        });
        assert!(s.dirty.contains("h1"));
        s.dirty.clear();
        s.handle(PodEvent::Status {
            pod: Arc::clone(&p),
            status: Arc::new(st),
        });
        assert!(s.dirty.is_empty(), "same status: nothing to send");
        // Never accepted → the reconcile pass marks it again.
        s.mark_unsynced();
        assert!(s.dirty.contains("h1"));
        s.handle(PodEvent::Finished { uid: "h1".into() });
        s.handle(PodEvent::Pods {
            pods: vec![],
            mirrors: vec![],
            sources_ready: true,
        });
        assert!(s.statuses.is_empty() && s.dirty.is_empty() && s.finished.is_empty());
    }
}
