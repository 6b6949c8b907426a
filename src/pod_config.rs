//! PodConfig: merges full source snapshots into ordered, minimal pod updates
//! (kubelet: `pkg/kubelet/config/config.go`, `podStorage.merge`).
//!
//! Owns: the last snapshot of every source (`source → pods`, in snapshot order) and the set
//! of sources that have delivered at least one snapshot. Each call to [`PodConfig::merge`]
//! diffs one source's new full snapshot against its previous one and returns the changes
//! in the upstream order `REMOVE, ADD, UPDATE, DELETE, RECONCILE`:
//!
//! - `REMOVE`    a UID present before is missing from the snapshot;
//! - `ADD`       a UID not seen before (the first snapshot of a source always yields an
//!   `ADD`, even an empty one: "this source has been seen");
//! - `UPDATE`    a *semantic* change (spec, generation, labels, deletionTimestamp,
//!   deletionGracePeriodSeconds, or annotations other than the kubelet-local
//!   `config.source` / `config.seen` / `config.mirror`; `config.hash` counts);
//! - `DELETE`    a semantic change that carries a deletionTimestamp (graceful deletion);
//! - `RECONCILE` only the status differs.
//!
//! Must never: do I/O, look at the runtime, or decide what happens to a pod — it only
//! describes what changed. The agent turns `PodUpdate`s into pod manager and pod worker
//! calls.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::api::{ANNOTATION_CONFIG_MIRROR, ANNOTATION_CONFIG_SEEN, ANNOTATION_CONFIG_SOURCE, Pod};
use crate::messages::SourceUpdate;

/// The kind of a merged change (kubelet: `kubetypes.PodOperation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum PodOp {
    /// Pods new to this source.
    Add,
    /// Pods whose spec, labels, deletion fields or annotations changed.
    Update,
    /// Pods that changed and carry a deletionTimestamp (graceful deletion).
    Delete,
    /// Pods the source no longer lists.
    Remove,
    /// Pods whose status alone changed.
    Reconcile,
}

/// One merged change for the pods of one source.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PodUpdate {
    pub op: PodOp,
    pub source: &'static str,
    pub pods: Vec<Arc<Pod>>,
}

/// Merges full snapshots from the configured sources (kubelet: `PodConfig` + `podStorage`).
#[derive(Debug, Default)]
pub(crate) struct PodConfig {
    configured: Vec<&'static str>,
    /// Sources that delivered at least one snapshot (kubelet: `sourcesSeen`).
    seen: HashSet<&'static str>,
    /// source → its pods, in the order of its last snapshot.
    pods: HashMap<&'static str, Vec<Arc<Pod>>>,
}

/// Annotations the kubelet itself adds; a difference in them is not a change of the pod
/// (kubelet: `localAnnotations`).
const LOCAL_ANNOTATIONS: [&str; 3] = [
    ANNOTATION_CONFIG_SOURCE,
    ANNOTATION_CONFIG_MIRROR,
    ANNOTATION_CONFIG_SEEN,
];

fn is_local_annotation(key: &str) -> bool {
    LOCAL_ANNOTATIONS.contains(&key)
}

/// How an incoming pod relates to the stored pod with the same UID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    None,
    StatusOnly,
    Semantic,
}

impl PodConfig {
    /// `configured_sources`: every source the agent runs; [`PodConfig::sources_ready`]
    /// waits for one snapshot from each.
    pub(crate) fn new(configured_sources: &[&'static str]) -> Self {
        PodConfig {
            configured: configured_sources.to_vec(),
            seen: HashSet::new(),
            pods: HashMap::new(),
        }
    }

    /// True once every configured source has delivered a snapshot (kubelet:
    /// `SeenAllSources`). Destructive cleanup — killing runtime pods no source wants —
    /// must wait for this, or a slow source makes its pods look orphaned (k8s#112814).
    pub(crate) fn sources_ready(&self) -> bool {
        self.configured.iter().all(|s| self.seen.contains(s))
    }

    /// Diffs `update` (a full snapshot of `update.source`) against that source's previous
    /// snapshot and returns the changes in the order REMOVE, ADD, UPDATE, DELETE,
    /// RECONCILE, leaving out empty ones — except that the first snapshot of a source
    /// always yields an `ADD` (kubelet: `podStorage.Merge`, incremental mode).
    pub(crate) fn merge(&mut self, update: SourceUpdate) -> Vec<PodUpdate> {
        let source = update.source;
        if !self.configured.contains(&source) {
            log::warn!("pod config: snapshot from unconfigured source {source:?}");
        }
        let first_snapshot = self.seen.insert(source);
        let old = self.pods.remove(source).unwrap_or_default();
        let old_by_uid: HashMap<&str, &Arc<Pod>> = old.iter().map(|p| (p.uid(), p)).collect();

        let mut kept: Vec<Arc<Pod>> = Vec::with_capacity(update.pods.len());
        let mut names = HashSet::new();
        let mut uids = HashSet::new();
        let (mut adds, mut updates, mut deletes, mut reconciles) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());

        for mut pod in update.pods {
            // kubelet: filterInvalidPods — one pod per namespace/name within a source.
            let full_name = pod.full_name();
            if !names.insert(full_name.clone()) {
                log::warn!(
                    "pod config: source {source:?} lists pod {full_name} twice; ignoring the \
                     later one (uid {})",
                    pod.uid()
                );
                continue;
            }
            if !uids.insert(pod.uid().to_string()) {
                log::warn!(
                    "pod config: source {source:?} lists uid {} twice; ignoring pod {full_name}",
                    pod.uid()
                );
                continue;
            }
            // Annotate with the source before any comparison (kubelet: updatePodsFunc).
            // Sources that already did keep their copy shared (no clone).
            if pod.annotation(ANNOTATION_CONFIG_SOURCE) != Some(source) {
                Arc::make_mut(&mut pod)
                    .metadata
                    .annotations
                    .insert(ANNOTATION_CONFIG_SOURCE.to_string(), source.to_string());
            }

            let Some(existing) = old_by_uid.get(pod.uid()) else {
                adds.push(Arc::clone(&pod));
                kept.push(pod);
                continue;
            };
            // The source's own copy, unchanged since the last snapshot: equal without a
            // field-by-field comparison (with N pods, each written file compared N pods).
            if Arc::ptr_eq(existing, &pod) {
                kept.push(pod);
                continue;
            }
            match compare(existing, &pod) {
                Change::None => kept.push(Arc::clone(existing)),
                Change::StatusOnly => {
                    let mut merged = Pod::clone(existing);
                    merged.status = pod.status.clone();
                    let merged = Arc::new(merged);
                    reconciles.push(Arc::clone(&merged));
                    kept.push(merged);
                }
                Change::Semantic => {
                    let merged =
                        Arc::new(apply_semantic_change(existing, Arc::unwrap_or_clone(pod)));
                    if merged.metadata.deletion_timestamp.is_some() {
                        deletes.push(Arc::clone(&merged));
                    } else {
                        updates.push(Arc::clone(&merged));
                    }
                    kept.push(merged);
                }
            }
        }

        let removes: Vec<Arc<Pod>> = old
            .iter()
            .filter(|p| !uids.contains(p.uid()))
            .cloned()
            .collect();
        self.pods.insert(source, kept);

        let mut out = Vec::new();
        let mut emit = |op, pods: Vec<Arc<Pod>>, always: bool| {
            if always || !pods.is_empty() {
                out.push(PodUpdate { op, source, pods });
            }
        };
        emit(PodOp::Remove, removes, false);
        emit(PodOp::Add, adds, first_snapshot);
        emit(PodOp::Update, updates, false);
        emit(PodOp::Delete, deletes, false);
        emit(PodOp::Reconcile, reconciles, false);
        out
    }
}

/// kubelet: `podsDifferSemantically` / `checkAndUpdatePod`.
fn compare(existing: &Pod, incoming: &Pod) -> Change {
    let (e, i) = (&existing.metadata, &incoming.metadata);
    // The generation too: the apiserver bumps it for every spec change, also of fields
    // picolet's model does not keep (tolerations), and the status reports it
    // (observedGeneration).
    let semantic = existing.spec != incoming.spec
        || e.generation != i.generation
        || e.labels != i.labels
        || e.deletion_timestamp != i.deletion_timestamp
        || e.deletion_grace_period_seconds != i.deletion_grace_period_seconds
        || !annotations_equal_ignoring_local(existing, incoming);
    if semantic {
        Change::Semantic
    } else if existing.status != incoming.status {
        Change::StatusOnly
    } else {
        Change::None
    }
}

fn annotations_equal_ignoring_local(a: &Pod, b: &Pod) -> bool {
    fn strip(p: &Pod) -> impl Iterator<Item = (&String, &String)> {
        p.metadata
            .annotations
            .iter()
            .filter(|(k, _)| !is_local_annotation(k))
    }
    // BTreeMap iteration is ordered, so the filtered sequences compare directly.
    strip(a).eq(strip(b))
}

/// The stored pod after a semantic change: the incoming spec, generation, labels, deletion
/// fields, status and annotations, keeping the existing pod's kubelet-local annotations — above
/// all the first-seen `config.seen` (kubelet: `checkAndUpdatePod`, `updateAnnotations`).
fn apply_semantic_change(existing: &Pod, incoming: Pod) -> Pod {
    let mut merged = existing.clone();
    let mut annotations = incoming.metadata.annotations;
    for key in LOCAL_ANNOTATIONS {
        if let Some(v) = existing.metadata.annotations.get(key) {
            annotations.insert(key.to_string(), v.clone());
        }
    }
    merged.spec = incoming.spec;
    merged.metadata.generation = incoming.metadata.generation;
    merged.status = incoming.status;
    merged.metadata.labels = incoming.metadata.labels;
    merged.metadata.deletion_timestamp = incoming.metadata.deletion_timestamp;
    merged.metadata.deletion_grace_period_seconds = incoming.metadata.deletion_grace_period_seconds;
    merged.metadata.annotations = annotations;
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ANNOTATION_CONFIG_HASH, Container, PodPhase, PodStatus};

    fn pod(name: &str, uid: &str) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = name.to_string();
        p.metadata.namespace = "default".to_string();
        p.metadata.uid = uid.to_string();
        p.metadata
            .annotations
            .insert(ANNOTATION_CONFIG_HASH.to_string(), uid.to_string());
        p.metadata
            .annotations
            .insert(ANNOTATION_CONFIG_SEEN.to_string(), "t0".to_string());
        p.spec.containers.push(Container {
            name: "c".to_string(),
            image: "busybox".to_string(),
            ..Container::default()
        });
        p
    }

    fn snap(pods: Vec<Pod>) -> SourceUpdate {
        SourceUpdate {
            source: "file",
            pods: pods.into_iter().map(Arc::new).collect(),
            objects: None,
        }
    }

    /// One copy of each pod: a pod the source already annotated is stored as the source's
    /// own allocation, on add and while unchanged; only a pod without the annotation is
    /// copied to add it.
    #[test]
    fn a_pod_the_source_annotated_is_shared_not_copied() {
        let mut c = PodConfig::new(&["file"]);
        let mut p = pod("p", "a");
        p.metadata
            .annotations
            .insert(ANNOTATION_CONFIG_SOURCE.to_string(), "file".to_string());
        let sent = Arc::new(p);
        let update = |pods: Vec<Arc<Pod>>| SourceUpdate {
            source: "file",
            pods,
            objects: None,
        };
        let got = c.merge(update(vec![Arc::clone(&sent)]));
        assert!(Arc::ptr_eq(&got[0].pods[0], &sent), "copied on add");
        assert!(c.merge(update(vec![Arc::clone(&sent)])).is_empty());
        assert!(
            Arc::ptr_eq(&c.pods["file"][0], &sent),
            "copied while unchanged"
        );

        let bare = Arc::new(pod("q", "b"));
        let got = c.merge(update(vec![Arc::clone(&sent), Arc::clone(&bare)]));
        assert!(!Arc::ptr_eq(&got[0].pods[0], &bare));
        assert_eq!(
            got[0].pods[0].annotation(ANNOTATION_CONFIG_SOURCE),
            Some("file")
        );
    }

    /// (op, uids) of each emitted update, for compact assertions.
    fn summary(updates: &[PodUpdate]) -> Vec<(PodOp, Vec<String>)> {
        updates
            .iter()
            .map(|u| {
                assert_eq!(u.source, "file");
                (u.op, u.pods.iter().map(|p| p.uid().to_string()).collect())
            })
            .collect()
    }

    fn ops(list: &[(PodOp, &[&str])]) -> Vec<(PodOp, Vec<String>)> {
        list.iter()
            .map(|(op, uids)| (*op, uids.iter().map(|s| s.to_string()).collect()))
            .collect()
    }

    type Edit = fn(&mut Pod);
    type Expected = &'static [(PodOp, &'static [&'static str])];

    /// Each row: a pod edit applied between two snapshots, and the expected op.
    #[test]
    fn second_snapshot_classifies_every_kind_of_edit() {
        let cases: &[(&str, Edit, Expected)] = &[
            ("unchanged", |_| {}, &[]),
            (
                "spec",
                |p| p.spec.containers[0].image = "nginx".into(),
                &[(PodOp::Update, &["a"])],
            ),
            (
                "labels",
                |p| {
                    p.metadata.labels.insert("k".into(), "v".into());
                },
                &[(PodOp::Update, &["a"])],
            ),
            (
                "user annotation",
                |p| {
                    p.metadata.annotations.insert("x".into(), "y".into());
                },
                &[(PodOp::Update, &["a"])],
            ),
            (
                "config.hash counts",
                |p| {
                    p.metadata
                        .annotations
                        .insert(ANNOTATION_CONFIG_HASH.into(), "other".into());
                },
                &[(PodOp::Update, &["a"])],
            ),
            (
                "config.seen is local",
                |p| {
                    p.metadata
                        .annotations
                        .insert(ANNOTATION_CONFIG_SEEN.into(), "t9".into());
                },
                &[],
            ),
            (
                "config.mirror is local",
                |p| {
                    p.metadata
                        .annotations
                        .insert(ANNOTATION_CONFIG_MIRROR.into(), "h".into());
                },
                &[],
            ),
            (
                "config.source is local",
                |p| {
                    p.metadata
                        .annotations
                        .insert(ANNOTATION_CONFIG_SOURCE.into(), "http".into());
                },
                &[],
            ),
            (
                "deletionTimestamp",
                |p| p.metadata.deletion_timestamp = Some("2026-01-01T00:00:00Z".into()),
                &[(PodOp::Delete, &["a"])],
            ),
            (
                "deletionGracePeriodSeconds alone",
                |p| p.metadata.deletion_grace_period_seconds = Some(5),
                &[(PodOp::Update, &["a"])],
            ),
            (
                "status only",
                |p| {
                    p.status = Some(PodStatus {
                        phase: Some(PodPhase::Running),
                        ..PodStatus::default()
                    })
                },
                &[(PodOp::Reconcile, &["a"])],
            ),
            (
                "spec and status: update wins",
                |p| {
                    p.spec.restart_policy = Some(crate::api::RestartPolicy::Never);
                    p.status = Some(PodStatus::default());
                },
                &[(PodOp::Update, &["a"])],
            ),
            (
                // A spec change of a field the model does not keep (tolerations) shows
                // only in the generation, which the status reports.
                "generation alone",
                |p| p.metadata.generation = 2,
                &[(PodOp::Update, &["a"])],
            ),
            (
                "resourceVersion is not semantic",
                |p| p.metadata.resource_version = "7".into(),
                &[],
            ),
        ];
        for (name, edit, want) in cases {
            let mut c = PodConfig::new(&["file"]);
            c.merge(snap(vec![pod("p", "a")]));
            let mut edited = pod("p", "a");
            edit(&mut edited);
            let got = c.merge(snap(vec![edited.clone()]));
            assert_eq!(summary(&got), ops(want), "case {name}");
            if let Some(u) = got.first() {
                assert_eq!(
                    u.pods[0].metadata.generation, edited.metadata.generation,
                    "case {name}: the stored generation"
                );
            }
        }
    }

    #[test]
    fn first_snapshot_always_adds_even_empty() {
        let mut c = PodConfig::new(&["file"]);
        assert_eq!(summary(&c.merge(snap(vec![]))), ops(&[(PodOp::Add, &[])]));
        // The second empty snapshot is a no-op.
        assert!(c.merge(snap(vec![])).is_empty());

        let mut c = PodConfig::new(&["file"]);
        assert_eq!(
            summary(&c.merge(snap(vec![pod("p", "a"), pod("q", "b")]))),
            ops(&[(PodOp::Add, &["a", "b"])])
        );
    }

    #[test]
    fn add_sets_the_source_annotation() {
        let mut c = PodConfig::new(&["file"]);
        let got = c.merge(snap(vec![pod("p", "a")]));
        assert_eq!(
            got[0].pods[0].annotation(ANNOTATION_CONFIG_SOURCE),
            Some("file")
        );
        assert!(got[0].pods[0].is_static());
    }

    #[test]
    fn ops_come_in_upstream_order() {
        let mut c = PodConfig::new(&["file"]);
        c.merge(snap(vec![
            pod("gone", "r"),
            pod("edit", "u"),
            pod("del", "d"),
            pod("stat", "s"),
        ]));
        let mut edit = pod("edit", "u");
        edit.spec.hostname = Some("h".into());
        let mut del = pod("del", "d");
        del.metadata.deletion_timestamp = Some("2026-01-01T00:00:00Z".into());
        let mut stat = pod("stat", "s");
        stat.status = Some(PodStatus::default());
        let got = c.merge(snap(vec![stat, del, pod("new", "n"), edit]));
        assert_eq!(
            summary(&got),
            ops(&[
                (PodOp::Remove, &["r"]),
                (PodOp::Add, &["n"]),
                (PodOp::Update, &["u"]),
                (PodOp::Delete, &["d"]),
                (PodOp::Reconcile, &["s"]),
            ])
        );
    }

    #[test]
    fn edited_static_pod_is_remove_then_add() {
        // A changed manifest changes the UID: the old one is removed, the new one added,
        // REMOVE first so the pod workers learn of the kill before the new start.
        let mut c = PodConfig::new(&["file"]);
        c.merge(snap(vec![pod("web", "old")]));
        let got = c.merge(snap(vec![pod("web", "new")]));
        assert_eq!(
            summary(&got),
            ops(&[(PodOp::Remove, &["old"]), (PodOp::Add, &["new"])])
        );
    }

    #[test]
    fn removes_follow_previous_snapshot_order() {
        let mut c = PodConfig::new(&["file"]);
        c.merge(snap(vec![pod("z", "3"), pod("a", "1"), pod("m", "2")]));
        let got = c.merge(snap(vec![]));
        assert_eq!(summary(&got), ops(&[(PodOp::Remove, &["3", "1", "2"])]));
    }

    #[test]
    fn update_keeps_first_seen_timestamp() {
        let mut c = PodConfig::new(&["file"]);
        c.merge(snap(vec![pod("p", "a")]));
        let mut edited = pod("p", "a");
        edited
            .metadata
            .annotations
            .insert(ANNOTATION_CONFIG_SEEN.into(), "t5".into());
        edited.metadata.labels.insert("k".into(), "v".into());
        let got = c.merge(snap(vec![edited]));
        let p = &got[0].pods[0];
        assert_eq!(p.annotation(ANNOTATION_CONFIG_SEEN), Some("t0"));
        assert_eq!(p.metadata.labels.get("k").map(String::as_str), Some("v"));
        // The stored pod is the merged one: an identical third snapshot is a no-op.
        let mut again = pod("p", "a");
        again.metadata.labels.insert("k".into(), "v".into());
        assert!(c.merge(snap(vec![again])).is_empty());
    }

    #[test]
    fn reconcile_updates_stored_status() {
        let mut c = PodConfig::new(&["file"]);
        c.merge(snap(vec![pod("p", "a")]));
        let mut s = pod("p", "a");
        s.status = Some(PodStatus {
            phase: Some(PodPhase::Succeeded),
            ..PodStatus::default()
        });
        let got = c.merge(snap(vec![s.clone()]));
        assert_eq!(
            got[0].pods[0].status.as_ref().and_then(|s| s.phase),
            Some(PodPhase::Succeeded)
        );
        assert!(c.merge(snap(vec![s])).is_empty());
    }

    #[test]
    fn duplicate_name_within_a_source_drops_the_second() {
        let mut c = PodConfig::new(&["file"]);
        let got = c.merge(snap(vec![pod("p", "a"), pod("p", "b"), pod("q", "c")]));
        assert_eq!(summary(&got), ops(&[(PodOp::Add, &["a", "c"])]));
        // Same name in another namespace is a different pod.
        let mut other_ns = pod("p", "d");
        other_ns.metadata.namespace = "kube-system".into();
        let got = c.merge(snap(vec![pod("p", "a"), pod("q", "c"), other_ns]));
        assert_eq!(summary(&got), ops(&[(PodOp::Add, &["d"])]));
    }

    #[test]
    fn duplicate_uid_within_a_source_drops_the_second() {
        let mut c = PodConfig::new(&["file"]);
        let got = c.merge(snap(vec![pod("p", "a"), pod("q", "a")]));
        assert_eq!(summary(&got), ops(&[(PodOp::Add, &["a"])]));
        assert_eq!(got[0].pods[0].metadata.name, "p");
    }

    #[test]
    fn sources_are_independent_and_ready_after_each_delivered() {
        let mut c = PodConfig::new(&["file", "http"]);
        assert!(!c.sources_ready());
        c.merge(snap(vec![pod("p", "a")]));
        assert!(!c.sources_ready(), "http has not delivered yet");
        let got = c.merge(SourceUpdate {
            source: "http",
            pods: vec![],
            objects: None,
        });
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].op, got[0].source), (PodOp::Add, "http"));
        assert!(got[0].pods.is_empty());
        assert!(c.sources_ready());
        // An empty http snapshot does not remove the file source's pods.
        assert!(c.merge(snap(vec![pod("p", "a")])).is_empty());
    }

    #[test]
    fn no_configured_sources_is_ready() {
        assert!(PodConfig::new(&[]).sources_ready());
    }
}
