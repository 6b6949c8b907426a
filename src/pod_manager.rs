//! The desired pods: what the merged sources want on this node right now
//! (kubelet: `pkg/kubelet/pod/pod_manager.go`, `basicManager`).
//!
//! Owns: the desired pods indexed by UID and by full name (`namespace/name`), and — kept
//! apart from them — mirror pods (the apiserver copies of static pods, recognised by the
//! `kubernetes.io/config.mirror` annotation; they arrive only once an apiserver source
//! exists). The agent feeds it from `PodUpdate`s: ADD/UPDATE/DELETE/RECONCILE →
//! [`PodManager::add_or_update`], REMOVE → [`PodManager::remove`].
//!
//! Must never: decide lifecycle (that is `pod_workers`), or answer "is it running?" — a pod
//! removed from here may still be terminating in its worker, and a pod still here may be
//! finished.

use std::collections::HashMap;
use std::sync::Arc;

use crate::api::{ANNOTATION_CONFIG_MIRROR, Pod};

/// A mirror pod: the apiserver's copy of a static pod (kubelet: `IsMirrorPod`).
pub(crate) fn is_mirror_pod(pod: &Pod) -> bool {
    pod.annotation(ANNOTATION_CONFIG_MIRROR).is_some()
}

#[derive(Debug, Default)]
pub(crate) struct PodManager {
    by_uid: HashMap<String, Arc<Pod>>,
    /// full name → UID of the regular pod holding that name.
    by_full_name: HashMap<String, String>,
    mirror_by_uid: HashMap<String, Arc<Pod>>,
    /// full name → UID of the mirror pod holding that name.
    mirror_by_full_name: HashMap<String, String>,
}

impl PodManager {
    /// Gives back the table space a burst of pods left (see [`crate::mem_trim`]).
    pub(crate) fn compact(&mut self) {
        use crate::mem_trim::ShrinkSparse;
        self.by_uid.shrink_sparse();
        self.by_full_name.shrink_sparse();
        self.mirror_by_uid.shrink_sparse();
        self.mirror_by_full_name.shrink_sparse();
    }

    #[cfg(test)]
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Stores `pod` (a regular or a mirror pod), replacing the one with its UID.
    ///
    /// A full name points at the latest pod stored under it: when an edited static pod is
    /// added under a new UID before the old UID is removed, the name follows the new one.
    pub(crate) fn add_or_update(&mut self, pod: Arc<Pod>) {
        let (by_uid, by_name) = if is_mirror_pod(&pod) {
            (&mut self.mirror_by_uid, &mut self.mirror_by_full_name)
        } else {
            (&mut self.by_uid, &mut self.by_full_name)
        };
        let uid = pod.uid().to_string();
        if let Some(old) = by_uid.get(&uid) {
            // A UID keeps its name in practice; if it did not, drop the stale name.
            let old_name = old.full_name();
            if by_name.get(&old_name) == Some(&uid) && old_name != pod.full_name() {
                by_name.remove(&old_name);
            }
        }
        by_name.insert(pod.full_name(), uid.clone());
        by_uid.insert(uid, pod);
    }

    /// Forgets the pod (regular or mirror) with `uid`, returning it.
    ///
    /// The full-name entry goes only if it still points at this UID, so removing an old
    /// static pod never hides the new one that took over its name.
    pub(crate) fn remove(&mut self, uid: &str) -> Option<Arc<Pod>> {
        for (by_uid, by_name) in [
            (&mut self.by_uid, &mut self.by_full_name),
            (&mut self.mirror_by_uid, &mut self.mirror_by_full_name),
        ] {
            if let Some(pod) = by_uid.remove(uid) {
                let name = pod.full_name();
                if by_name.get(&name).map(String::as_str) == Some(uid) {
                    by_name.remove(&name);
                }
                return Some(pod);
            }
        }
        None
    }

    /// The regular (non-mirror) pod with `uid`.
    pub(crate) fn get_by_uid(&self, uid: &str) -> Option<&Arc<Pod>> {
        self.by_uid.get(uid)
    }

    #[cfg(test)]
    /// The regular (non-mirror) pod holding `full_name` (`namespace/name`).
    pub(crate) fn get_by_full_name(&self, full_name: &str) -> Option<&Arc<Pod>> {
        self.by_full_name
            .get(full_name)
            .and_then(|uid| self.by_uid.get(uid))
    }

    #[cfg(test)]
    /// The mirror pod of a static pod, found by full name (kubelet: `GetMirrorPodByPod`).
    pub(crate) fn mirror_pod_of(&self, pod: &Pod) -> Option<&Arc<Pod>> {
        self.mirror_by_full_name
            .get(&pod.full_name())
            .and_then(|uid| self.mirror_by_uid.get(uid))
    }

    #[cfg(test)]
    /// The static pod a mirror pod stands for (kubelet: `GetPodByMirrorPod`).
    pub(crate) fn pod_of_mirror(&self, mirror: &Pod) -> Option<&Arc<Pod>> {
        self.get_by_full_name(&mirror.full_name())
    }

    /// All regular pods, sorted by full name then UID (stable for logs and tests).
    pub(crate) fn pods(&self) -> Vec<Arc<Pod>> {
        let mut pods: Vec<Arc<Pod>> = self.by_uid.values().cloned().collect();
        sort_by_name(&mut pods);
        pods
    }

    /// The regular pods `keep` selects, sorted as [`PodManager::pods`]; nothing is
    /// allocated when it selects none (the housekeeping's case at idle).
    pub(crate) fn pods_where(&self, keep: impl Fn(&Pod) -> bool) -> Vec<Arc<Pod>> {
        let mut pods: Vec<Arc<Pod>> = self.by_uid.values().filter(|p| keep(p)).cloned().collect();
        sort_by_name(&mut pods);
        pods
    }

    /// Whether a regular pod with this UID is desired.
    pub(crate) fn contains(&self, uid: &str) -> bool {
        self.by_uid.contains_key(uid)
    }

    /// All mirror pods, sorted by full name then UID.
    pub(crate) fn mirror_pods(&self) -> Vec<Arc<Pod>> {
        let mut pods: Vec<Arc<Pod>> = self.mirror_by_uid.values().cloned().collect();
        sort_by_name(&mut pods);
        pods
    }

    /// UIDs of the regular pods: the desired set for `PodWorkers::sync_known_pods`.
    pub(crate) fn uids(&self) -> std::collections::HashSet<String> {
        self.by_uid.keys().cloned().collect()
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.by_uid.len()
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.by_uid.is_empty()
    }
}

/// Namespace, name, UID order without building a `full_name` string per comparison
/// (this runs every housekeeping pass).
fn sort_by_name(pods: &mut [Arc<Pod>]) {
    fn key(p: &Pod) -> (&str, &str, &str) {
        (&p.metadata.namespace, &p.metadata.name, &p.metadata.uid)
    }
    crate::sort::sort_by(pods, |a, b| key(a).cmp(&key(b)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ANNOTATION_CONFIG_SOURCE;

    fn pod(ns: &str, name: &str, uid: &str) -> Arc<Pod> {
        let mut p = Pod::default();
        p.metadata.namespace = ns.into();
        p.metadata.name = name.into();
        p.metadata.uid = uid.into();
        p.metadata
            .annotations
            .insert(ANNOTATION_CONFIG_SOURCE.into(), "file".into());
        Arc::new(p)
    }

    fn mirror(ns: &str, name: &str, uid: &str) -> Arc<Pod> {
        let mut p = Pod::clone(&pod(ns, name, uid));
        p.metadata.annotations.clear();
        p.metadata
            .annotations
            .insert(ANNOTATION_CONFIG_MIRROR.into(), "hash".into());
        Arc::new(p)
    }

    fn uids(pods: &[Arc<Pod>]) -> Vec<&str> {
        pods.iter().map(|p| p.uid()).collect()
    }

    #[test]
    fn add_get_update_remove() {
        let mut m = PodManager::new();
        assert!(m.is_empty());
        m.add_or_update(pod("default", "web", "a"));
        m.add_or_update(pod("kube-system", "dns", "b"));
        assert_eq!(m.len(), 2);
        assert_eq!(m.get_by_uid("a").map(|p| p.uid()), Some("a"));
        assert_eq!(
            m.get_by_full_name("kube-system/dns").map(|p| p.uid()),
            Some("b")
        );
        assert!(m.get_by_full_name("default/dns").is_none());
        assert_eq!(uids(&m.pods()), ["a", "b"]);
        assert!(m.contains("a") && !m.contains("c"));
        m.add_or_update(pod("default", "api", "c"));
        assert_eq!(
            uids(&m.pods_where(|p| p.uid() != "b")),
            ["c", "a"],
            "sorted by name"
        );
        assert!(m.pods_where(|_| false).is_empty());
        m.remove("c");

        let mut changed = Pod::clone(&pod("default", "web", "a"));
        changed.metadata.labels.insert("k".into(), "v".into());
        m.add_or_update(Arc::new(changed));
        assert_eq!(m.len(), 2);
        assert!(
            m.get_by_uid("a")
                .is_some_and(|p| p.metadata.labels.contains_key("k"))
        );

        assert_eq!(m.remove("a").map(|p| p.uid().to_string()), Some("a".into()));
        assert!(m.get_by_uid("a").is_none());
        assert!(m.get_by_full_name("default/web").is_none());
        assert!(m.remove("a").is_none());
        assert_eq!(m.uids(), ["b".to_string()].into_iter().collect());
    }

    #[test]
    fn edited_static_pod_name_follows_the_new_uid() {
        // Upstream order is REMOVE then ADD, but the name must stay right either way.
        let mut m = PodManager::new();
        m.add_or_update(pod("default", "web", "old"));
        m.add_or_update(pod("default", "web", "new"));
        assert_eq!(
            m.get_by_full_name("default/web").map(|p| p.uid()),
            Some("new")
        );
        m.remove("old");
        assert_eq!(
            m.get_by_full_name("default/web").map(|p| p.uid()),
            Some("new")
        );
        assert_eq!(uids(&m.pods()), ["new"]);
    }

    #[test]
    fn mirror_pods_are_kept_apart() {
        let mut m = PodManager::new();
        let static_pod = pod("default", "web", "s");
        m.add_or_update(Arc::clone(&static_pod));
        m.add_or_update(mirror("default", "web", "m"));
        assert_eq!(m.len(), 1, "mirror pods are not desired pods");
        assert!(m.get_by_uid("m").is_none());
        assert_eq!(
            m.get_by_full_name("default/web").map(|p| p.uid()),
            Some("s")
        );
        assert_eq!(m.mirror_pod_of(&static_pod).map(|p| p.uid()), Some("m"));
        let mp = Arc::clone(&m.mirror_pods()[0]);
        assert_eq!(m.pod_of_mirror(&mp).map(|p| p.uid()), Some("s"));
        assert!(m.remove("m").is_some());
        assert!(m.mirror_pod_of(&static_pod).is_none());
        assert!(m.get_by_uid("s").is_some());
    }
}
