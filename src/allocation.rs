//! In-place pod resize (kubelet: `pkg/kubelet/allocation`, the resize parts of
//! `kuberuntime_manager.go` and of the status manager): what picolet allocated to each
//! pod's containers, what a running container was given, and the two resize conditions.
//!
//! Owns: the pure rules (which resources a resize changes, the allocated pod, the resizes
//! refused outright), the allocation checkpoint (`ROOT-DIR/allocated_pods_state`: the
//! kubelet's file name, our own JSON), the container annotation that says what a container
//! was created with, and the `PodResizePending` / `PodResizeInProgress` conditions.
//!
//! Must never: decide whether a resize fits beside the other pods (that is admission's,
//! run by the agent), talk to the runtime, or read the clock (`now` comes in).
//!
//! The rules (docs/kubelet-behaviour.md §23): only cpu and memory of containers and
//! sidecars resize in place; the pod workers see the *allocated* pod — the desired pod with
//! the allocated cpu and memory in place of its own — so a resize takes effect only once
//! it is allocated, as a whole. Static pods never resize ("In-place resize of static-pods
//! is not supported"), nor do pod-level resources (picolet behaves as the kubelet with
//! `InPlacePodLevelResourcesVerticalScaling` off). Differences: the checkpoint holds only
//! the pods that can resize (neither static nor BestEffort: the QoS class may not change),
//! so a node of static pods never writes it; deferred resizes are retried in UID order
//! (upstream sorts them by priority and QoS class).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::api::{Container, Pod, PodCondition, ResourceRequirements};

const RESIZABLE: [&str; 2] = ["cpu", "memory"];

/// The feature `in-place-resize` is built in: without it nothing here runs (each entry point
/// checks this constant, so the code goes from the binary).
pub(crate) const ENABLED: bool = cfg!(feature = "in-place-resize");

/// kubelet: the condition types and reasons of a resize.
pub(crate) const POD_RESIZE_PENDING: &str = "PodResizePending";
pub(crate) const POD_RESIZE_IN_PROGRESS: &str = "PodResizeInProgress";
pub(crate) const REASON_INFEASIBLE: &str = "Infeasible";
pub(crate) const REASON_DEFERRED: &str = "Deferred";
pub(crate) const REASON_ERROR: &str = "Error";

/// What picolet created a container with (its cpu and memory, JSON): the actuated values
/// until an `UpdateContainerResources` changes them (kubelet: the actuated state).
pub(crate) const RESOURCES_ANNOTATION: &str = "io.picolet.container.resources";

/// A container's cpu and memory as numbers (kubelet: kuberuntime's `resourceRequirements`):
/// millicores and bytes, 0 when unset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Amounts {
    pub cpu_request: i64,
    pub cpu_limit: i64,
    pub memory_request: i64,
    pub memory_limit: i64,
}

impl Amounts {
    pub(crate) fn of(r: Option<&ResourceRequirements>) -> Self {
        let get = |limits: bool, name: &str| {
            r.and_then(|r| if limits { &r.limits } else { &r.requests }.get(name))
                .and_then(|q| q.scaled(crate::qos::scale_of(name)))
                .unwrap_or(0)
        };
        Amounts {
            cpu_request: get(false, "cpu"),
            cpu_limit: get(true, "cpu"),
            memory_request: get(false, "memory"),
            memory_limit: get(true, "memory"),
        }
    }
}

/// Only the cpu and memory entries of `r` (what resizes).
pub(crate) fn cpu_memory(r: Option<&ResourceRequirements>) -> ResourceRequirements {
    let keep = |m: &BTreeMap<String, crate::api::Quantity>| {
        crate::sort::collect_map(
            m.iter()
                .filter(|(k, _)| RESIZABLE.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone())),
        )
    };
    ResourceRequirements {
        limits: r.map(|r| keep(&r.limits)).unwrap_or_default(),
        requests: r.map(|r| keep(&r.requests)).unwrap_or_default(),
        claims: None,
    }
}

fn is_empty(r: &ResourceRequirements) -> bool {
    r.limits.is_empty() && r.requests.is_empty()
}

/// A short table by key (pod UIDs): searched in order, so that no hash map type per value
/// type is in the binary (a few KB each); the tables here hold one entry per running pod.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ByKey<T>(Vec<(String, T)>);

impl<T> Default for ByKey<T> {
    fn default() -> Self {
        ByKey(Vec::new())
    }
}

impl<T: Default> ByKey<T> {
    pub(crate) fn get(&self, key: &str) -> Option<&T> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub(crate) fn get_mut(&mut self, key: &str) -> Option<&mut T> {
        self.0.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The entry of `key`, made (default) if missing.
    pub(crate) fn entry(&mut self, key: &str) -> &mut T {
        let i = match self.0.iter().position(|(k, _)| k == key) {
            Some(i) => i,
            None => {
                self.0.push((key.to_string(), T::default()));
                self.0.len() - 1
            }
        };
        &mut self.0[i].1
    }

    pub(crate) fn remove(&mut self, key: &str) {
        if let Some(i) = self.0.iter().position(|(k, _)| k == key) {
            self.0.swap_remove(i);
        }
    }
}

/// Requirements by name (containers; updated container IDs). A short list, searched in
/// order: no map type of its own in the binary.
pub(crate) type Named = Vec<(String, ResourceRequirements)>;

/// The requirements of `name` in `list`.
pub(crate) fn named<'a>(list: &'a Named, name: &str) -> Option<&'a ResourceRequirements> {
    list.iter().find(|(n, _)| n == name).map(|(_, r)| r)
}

/// Sets `name`'s requirements in `list`.
pub(crate) fn set_named(list: &mut Named, name: &str, r: ResourceRequirements) {
    match list.iter_mut().find(|(n, _)| n == name) {
        Some(e) => e.1 = r,
        None => list.push((name.to_string(), r)),
    }
}

/// Requirements as JSON (`{"limits": {...}, "requests": {...}}`), by hand: serde's code for
/// it through another serializer or deserializer would be binary size for nothing.
pub(crate) fn rr_to_json(r: &ResourceRequirements) -> Value {
    let side = |m: &BTreeMap<String, crate::api::Quantity>| {
        let mut o = serde_json::Map::new();
        for (k, q) in m {
            o.insert(k.clone(), Value::String(q.as_string()));
        }
        Value::Object(o)
    };
    let mut o = serde_json::Map::new();
    for (k, m) in [("limits", &r.limits), ("requests", &r.requests)] {
        if !m.is_empty() {
            o.insert(k.into(), side(m));
        }
    }
    Value::Object(o)
}

/// [`rr_to_json`] read back (`None`: not an object).
pub(crate) fn rr_of_json(v: &Value) -> Option<ResourceRequirements> {
    let side = |k: &str| {
        let mut m = BTreeMap::new();
        for (n, q) in v.get(k).and_then(Value::as_object).into_iter().flatten() {
            let q = match q {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            m.insert(n.clone(), crate::api::Quantity::Str(q));
        }
        m
    };
    v.as_object()?;
    Some(ResourceRequirements {
        limits: side("limits"),
        requests: side("requests"),
        claims: None,
    })
}

/// `{name: requirements}` as JSON.
pub(crate) fn named_to_json(list: &Named) -> Value {
    let mut o = serde_json::Map::new();
    for (n, r) in list {
        o.insert(n.clone(), rr_to_json(r));
    }
    Value::Object(o)
}

/// [`named_to_json`] read back (what does not decode is left out).
pub(crate) fn named_of_json(v: &Value) -> Named {
    v.as_object()
        .into_iter()
        .flatten()
        .filter_map(|(n, r)| Some((n.clone(), rr_of_json(r)?)))
        .collect()
}

/// What was allocated to one pod: its pod-level and its containers' cpu and memory
/// (containers without any are left out).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct PodAllocation {
    pub pod: Option<ResourceRequirements>,
    pub containers: Named,
}

impl PodAllocation {
    pub(crate) fn of(pod: &Pod) -> Self {
        let containers = pod
            .spec
            .containers
            .iter()
            .chain(&pod.spec.init_containers)
            .map(|c| (c.name.clone(), cpu_memory(c.resources.as_ref())))
            .filter(|(_, r)| !is_empty(r))
            .collect();
        let pod_level = Some(cpu_memory(pod.spec.resources.as_ref())).filter(|r| !is_empty(r));
        PodAllocation {
            pod: pod_level,
            containers,
        }
    }

    /// The same amounts (quantities compared by value: `1` is `1000m`).
    pub(crate) fn same(&self, other: &Self) -> bool {
        let names = self.containers.iter().chain(&other.containers);
        Amounts::of(self.pod.as_ref()) == Amounts::of(other.pod.as_ref())
            && names.into_iter().all(|(n, _)| {
                Amounts::of(named(&self.containers, n)) == Amounts::of(named(&other.containers, n))
            })
    }

    fn to_json(&self) -> Value {
        let mut o = serde_json::Map::new();
        if let Some(p) = &self.pod {
            o.insert("pod".into(), rr_to_json(p));
        }
        o.insert("containers".into(), named_to_json(&self.containers));
        Value::Object(o)
    }

    fn of_json(v: &Value) -> Self {
        PodAllocation {
            pod: v.get("pod").and_then(rr_of_json),
            containers: v.get("containers").map(named_of_json).unwrap_or_default(),
        }
    }
}

/// Whether a pod can ever resize in place: from the apiserver, and not BestEffort (a resize
/// may not change the QoS class, and a BestEffort pod has nothing to change).
pub(crate) fn resizable(pod: &Pod) -> bool {
    ENABLED && !pod.is_static() && crate::qos::pod_qos(pod) != crate::qos::QosClass::BestEffort
}

/// The pod as allocated (kubelet: `UpdatePodFromAllocation`): `alloc`'s cpu and memory in
/// place of the pod's own; `None` when they are the same.
pub(crate) fn apply(pod: &Pod, alloc: &PodAllocation) -> Option<Pod> {
    if PodAllocation::of(pod).same(alloc) {
        return None;
    }
    let mut out = pod.clone();
    let set = |r: &mut Option<ResourceRequirements>, a: Option<&ResourceRequirements>| {
        let mut new = r.take().unwrap_or_default();
        new.limits.retain(|k, _| !RESIZABLE.contains(&k.as_str()));
        new.requests.retain(|k, _| !RESIZABLE.contains(&k.as_str()));
        if let Some(a) = a {
            new.limits.extend(a.limits.clone());
            new.requests.extend(a.requests.clone());
        }
        *r = (!is_empty(&new) || new.claims.is_some()).then_some(new);
    };
    set(&mut out.spec.resources, alloc.pod.as_ref());
    for c in out
        .spec
        .containers
        .iter_mut()
        .chain(out.spec.init_containers.iter_mut())
    {
        set(&mut c.resources, named(&alloc.containers, &c.name));
    }
    Some(out)
}

/// The resizes refused outright, whatever else runs (kubelet: the resize admit handler,
/// reason `Infeasible`): a static pod, a pod-level change, more than the node can give.
/// `allocatable` is the node's cpu (millicores) and memory (bytes).
pub(crate) fn infeasible(
    pod: &Pod,
    allocated: &PodAllocation,
    allocatable: (i64, i64),
    swap: &crate::qos::NodeSwap,
) -> Option<String> {
    if pod.is_static() {
        return Some("In-place resize of static-pods is not supported".into());
    }
    if swap_involved(pod, allocated, swap) {
        return Some("In-place resize of containers with swap is not supported.".into());
    }
    if Amounts::of(PodAllocation::of(pod).pod.as_ref()) != Amounts::of(allocated.pod.as_ref()) {
        return Some("InPlacePodLevelResourcesVerticalScaling is disabled".into());
    }
    let (cpu, memory) = (
        crate::qos::pod_request(pod, "cpu"),
        crate::qos::pod_request(pod, "memory"),
    );
    let over = if memory > allocatable.1 {
        format!("memory, requested: {memory}, capacity: {}", allocatable.1)
    } else if cpu > allocatable.0 {
        format!("cpu, requested: {cpu}, capacity: {}", allocatable.0)
    } else {
        return None;
    };
    Some(format!("Node didn't have enough capacity: {over}"))
}

/// kubelet: `disallowResizeForSwappableContainers` — a container's memory request changes
/// without a `RestartContainer` memory policy, and it may swap before or after.
fn swap_involved(pod: &Pod, allocated: &PodAllocation, swap: &crate::qos::NodeSwap) -> bool {
    use crate::qos::SwapBehavior::NoSwap;
    let Some(before) = apply(pod, allocated) else {
        return false;
    };
    let all = |p: &Pod| -> Vec<Container> {
        p.spec
            .containers
            .iter()
            .chain(&p.spec.init_containers)
            .cloned()
            .collect()
    };
    let request = |c: &Container| Amounts::of(c.resources.as_ref()).memory_request;
    let old = all(&before);
    all(pod).iter().any(|c| {
        old.iter().find(|o| o.name == c.name).is_some_and(|o| {
            request(c) != request(o)
                && !restarts_on(o, "memory")
                && (swap.behavior_for(pod, c) != NoSwap || swap.behavior_for(&before, o) != NoSwap)
        })
    })
}

/// The container's `resizePolicy` restarts it when `resource` changes.
pub(crate) fn restarts_on(c: &Container, resource: &str) -> bool {
    let policies = c.resize_policy.as_ref().and_then(|v| v.as_array());
    policies.into_iter().flatten().any(|p| {
        p.get("resourceName").and_then(|v| v.as_str()) == Some(resource)
            && p.get("restartPolicy").and_then(|v| v.as_str()) == Some("RestartContainer")
    })
}

/// kubelet: the resize events' message (`podResizeMessage`): the prefix, then the
/// containers' resources and the generation as JSON.
pub(crate) fn event_message(prefix: &str, pod: &Pod, generation: i64, error: &str) -> String {
    let list = |cs: &[Container]| {
        cs.iter()
            .map(|c| {
                let r = rr_to_json(&cpu_memory(c.resources.as_ref())).to_string();
                format!("{{\"name\":{:?},\"resources\":{r}}}", c.name)
            })
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut s = format!("{prefix}: {{");
    if !pod.spec.init_containers.is_empty() {
        s += &format!("\"initContainers\":[{}],", list(&pod.spec.init_containers));
    }
    s += &format!(
        "\"containers\":[{}],\"generation\":{generation}",
        list(&pod.spec.containers)
    );
    if !error.is_empty() {
        s += &format!(",\"error\":{error:?}");
    }
    s + "}"
}

/// The container's cpu and memory for [`RESOURCES_ANNOTATION`].
pub(crate) fn annotation(c: &Container) -> String {
    rr_to_json(&cpu_memory(c.resources.as_ref())).to_string()
}

/// What [`RESOURCES_ANNOTATION`] says (`None`: missing or unreadable).
pub(crate) fn from_annotation(
    annotations: &BTreeMap<String, String>,
) -> Option<ResourceRequirements> {
    rr_of_json(&read_json(
        annotations.get(RESOURCES_ANNOTATION)?.as_bytes(),
    )?)
}

/// A small state file's JSON (`None`: missing or unreadable).
pub(crate) fn read_json(bytes: &[u8]) -> Option<Value> {
    serde_json::from_slice(bytes).ok()
}

/// Writes a small state file whole and durably (`checkpoint::write_private`: temporary,
/// fsync, rename, directory fsync, 0600). Only with the feature, which needs `apiserver`.
pub(crate) fn write_file(path: &Path, value: &Value) {
    #[cfg(feature = "in-place-resize")]
    if let Err(e) =
        crate::checkpoint::write_private(path, &serde_json::to_vec(value).unwrap_or_default())
    {
        log::warn!("{}: {e}", path.display());
    }
    #[cfg(not(feature = "in-place-resize"))]
    let _ = (path, value);
}

// ---------------------------------------------------------------------------------------
// The checkpoint

/// The allocations of the pods that can resize, kept in one file (kubelet:
/// `allocated_pods_state`), written whenever one changes.
#[derive(Debug, Default)]
pub(crate) struct Checkpoint {
    path: PathBuf,
    /// By pod UID.
    pods: Vec<(String, PodAllocation)>,
}

impl Checkpoint {
    /// Reads the file; a missing one is empty, an unreadable one is logged and replaced.
    pub(crate) fn load(path: &Path) -> Self {
        let pods = match std::fs::read(path).map(|b| read_json(&b)) {
            Ok(Some(Value::Object(o))) => o
                .iter()
                .map(|(uid, a)| (uid.clone(), PodAllocation::of_json(a)))
                .collect(),
            Ok(_) => {
                log::warn!("{}: unreadable; starting without it", path.display());
                Vec::new()
            }
            Err(_) => Vec::new(),
        };
        Checkpoint {
            path: path.to_path_buf(),
            pods,
        }
    }

    pub(crate) fn get(&self, uid: &str) -> Option<&PodAllocation> {
        self.pods.iter().find(|(u, _)| u == uid).map(|(_, a)| a)
    }

    /// Records a pod's allocation (`None`: forgets it); the file is written on a change.
    pub(crate) fn set(&mut self, uid: &str, alloc: Option<PodAllocation>) {
        let at = self.pods.iter().position(|(u, _)| u == uid);
        let changed = match (alloc, at) {
            (Some(a), Some(i)) => std::mem::replace(&mut self.pods[i].1, a) != self.pods[i].1,
            (Some(a), None) => {
                self.pods.push((uid.to_string(), a));
                true
            }
            (None, Some(i)) => {
                self.pods.swap_remove(i);
                true
            }
            (None, None) => false,
        };
        if changed {
            self.save();
        }
    }

    /// Forgets every pod `keep` does not name (kubelet: `RemoveOrphanedPods`).
    pub(crate) fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        let before = self.pods.len();
        self.pods.retain(|(uid, _)| keep(uid));
        if self.pods.len() != before {
            self.save();
        }
    }

    fn save(&self) {
        let mut o = serde_json::Map::new();
        for (uid, a) in &self.pods {
            o.insert(uid.clone(), a.to_json());
        }
        write_file(&self.path, &Value::Object(o));
    }
}

// ---------------------------------------------------------------------------------------
// The conditions

/// A pod's resize conditions (kubelet: the status manager's `podResizeState`), and what
/// its running containers run with, by name (for `containerStatuses[].resources`).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ResizeState {
    pub pending: Option<PodCondition>,
    pub in_progress: Option<PodCondition>,
    pub actual: Named,
}

fn condition(
    type_: &'static str,
    old: Option<&PodCondition>,
    reason: &str,
    message: &str,
    generation: i64,
    now: Option<String>,
) -> PodCondition {
    let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
    PodCondition {
        type_: Cow::Borrowed(type_),
        status: Cow::Borrowed("True"),
        last_transition_time: match old {
            Some(o) if o.reason.as_deref().unwrap_or("") == reason => {
                o.last_transition_time.clone()
            }
            _ => now,
        },
        reason: some(reason),
        message: some(message),
        observed_generation: generation,
    }
}

impl ResizeState {
    /// kubelet: `SetPodResizePendingCondition` — any reason but Infeasible reads Deferred.
    /// Whether the reason or generation changed (an event is due).
    pub(crate) fn set_pending(
        &mut self,
        reason: &str,
        message: &str,
        generation: i64,
        now: Option<String>,
    ) -> bool {
        let reason = if reason == REASON_INFEASIBLE {
            REASON_INFEASIBLE
        } else {
            REASON_DEFERRED
        };
        let old = self.pending.take();
        let new = condition(
            POD_RESIZE_PENDING,
            old.as_ref(),
            reason,
            message,
            generation,
            now,
        );
        let changed = old.is_none_or(|o| {
            o.reason != new.reason || o.observed_generation != new.observed_generation
        });
        self.pending = Some(new);
        changed
    }

    pub(crate) fn is_deferred(&self) -> bool {
        self.pending
            .as_ref()
            .is_some_and(|c| c.reason.as_deref() == Some(REASON_DEFERRED))
    }

    /// kubelet: `SetPodResizeInProgressCondition` — an existing condition keeps its
    /// generation, and its reason and message unless new ones are given. Whether it changed.
    pub(crate) fn set_in_progress(
        &mut self,
        reason: &str,
        message: &str,
        generation: i64,
        now: Option<String>,
    ) -> bool {
        let old = self.in_progress.take();
        let (reason, message, generation) = match &old {
            Some(o) if reason.is_empty() && message.is_empty() => (
                o.reason.clone().unwrap_or_default(),
                o.message.clone().unwrap_or_default(),
                o.observed_generation,
            ),
            Some(o) => (
                reason.to_string(),
                message.to_string(),
                o.observed_generation,
            ),
            None => (reason.to_string(), message.to_string(), generation),
        };
        let new = condition(
            POD_RESIZE_IN_PROGRESS,
            old.as_ref(),
            &reason,
            &message,
            generation,
            now,
        );
        let changed = old.as_ref().is_none_or(|o| {
            (&o.reason, &o.message, o.observed_generation)
                != (&new.reason, &new.message, new.observed_generation)
        });
        self.in_progress = Some(new);
        changed
    }

    /// Clears `PodResizeInProgress`: the generation it had, if it was set.
    pub(crate) fn clear_in_progress(&mut self) -> Option<i64> {
        self.in_progress.take().map(|c| c.observed_generation)
    }

    pub(crate) fn conditions(&self) -> impl Iterator<Item = &PodCondition> {
        self.pending.iter().chain(&self.in_progress)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Quantity;

    fn pod(cpu: &str, memory: &str) -> Pod {
        let mut p = Pod::default();
        p.metadata.uid = "u1".into();
        let q = |v: &str| Quantity::Str(v.into());
        p.spec.containers = vec![Container {
            name: "c".into(),
            resources: Some(ResourceRequirements {
                requests: [
                    ("cpu".to_string(), q(cpu)),
                    ("memory".to_string(), q(memory)),
                ]
                .into(),
                limits: [
                    ("memory".to_string(), q(memory)),
                    ("example.com/dev".to_string(), q("1")),
                ]
                .into(),
                claims: None,
            }),
            ..Default::default()
        }];
        p
    }

    /// kubelet: disallowResizeForSwappableContainers — a memory request resize of a
    /// container that may swap (before or after) is Infeasible, unless memory restarts it.
    #[test]
    fn resizes_of_swapping_containers_are_infeasible() {
        use crate::qos::{NodeSwap, SwapBehavior};
        let with_request = |request: &str| {
            let mut p = pod("1", "1Gi");
            let r = p.spec.containers[0].resources.as_mut().unwrap();
            r.requests
                .insert("memory".into(), Quantity::Str(request.into()));
            p
        };
        let alloc = PodAllocation::of(&with_request("256Mi"));
        let big = (4000, 4 << 30);
        let limited = NodeSwap {
            behavior: SwapBehavior::LimitedSwap,
            controller: true,
            unified: true,
            capacity: 1 << 30,
        };
        let msg = "In-place resize of containers with swap is not supported.";
        assert_eq!(
            infeasible(&with_request("512Mi"), &alloc, big, &limited).as_deref(),
            Some(msg)
        );
        // Up to request = limit: swapped before, so still refused.
        assert_eq!(
            infeasible(&with_request("1Gi"), &alloc, big, &limited).as_deref(),
            Some(msg)
        );
        // The cpu alone, NoSwap, or a memory policy that restarts: allowed.
        let mut cpu_only = with_request("256Mi");
        cpu_only.spec.containers[0]
            .resources
            .as_mut()
            .unwrap()
            .requests
            .insert("cpu".into(), Quantity::Str("2".into()));
        assert_eq!(infeasible(&cpu_only, &alloc, big, &limited), None);
        let no_swap = NodeSwap {
            behavior: SwapBehavior::NoSwap,
            ..limited
        };
        assert_eq!(
            infeasible(&with_request("512Mi"), &alloc, big, &no_swap),
            None
        );
        let mut restarts = with_request("512Mi");
        restarts.spec.containers[0].resize_policy = Some(serde_json::json!([
            {"resourceName": "memory", "restartPolicy": "RestartContainer"}
        ]));
        let alloc_restarts = {
            let mut p = with_request("256Mi");
            p.spec.containers[0].resize_policy = restarts.spec.containers[0].resize_policy.clone();
            PodAllocation::of(&p)
        };
        assert_eq!(infeasible(&restarts, &alloc_restarts, big, &limited), None);
    }

    #[test]
    fn the_allocated_pod_takes_cpu_and_memory_only() {
        let old = pod("1", "64Mi");
        let alloc = PodAllocation::of(&old);
        // Quantities compare by value.
        assert!(apply(&pod("1000m", "67108864"), &alloc).is_none());
        let resized = apply(&pod("2", "128Mi"), &alloc).unwrap();
        let r = resized.spec.containers[0].resources.clone().unwrap();
        assert_eq!(r.requests["cpu"], Quantity::Str("1".into()));
        assert_eq!(r.limits["memory"], Quantity::Str("64Mi".into()));
        assert_eq!(r.limits["example.com/dev"], Quantity::Str("1".into()));
        assert!(!alloc.same(&PodAllocation::of(&pod("2", "64Mi"))));
    }

    #[test]
    fn infeasible_resizes() {
        let old = pod("1", "64Mi");
        let alloc = PodAllocation::of(&old);
        let big = (4000, 1 << 30);
        assert_eq!(
            infeasible(&pod("2", "64Mi"), &alloc, big, &Default::default()),
            None
        );
        assert_eq!(
            infeasible(&pod("2", "2Gi"), &alloc, big, &Default::default()).unwrap(),
            "Node didn't have enough capacity: memory, requested: 2147483648, capacity: 1073741824"
        );
        assert_eq!(
            infeasible(&pod("5", "64Mi"), &alloc, big, &Default::default()).unwrap(),
            "Node didn't have enough capacity: cpu, requested: 5000, capacity: 4000"
        );
        let mut fixed = pod("2", "64Mi");
        fixed
            .metadata
            .annotations
            .insert(crate::api::ANNOTATION_CONFIG_SOURCE.into(), "file".into());
        assert_eq!(
            infeasible(&fixed, &alloc, big, &Default::default()).unwrap(),
            "In-place resize of static-pods is not supported"
        );
        let mut plr = pod("1", "64Mi");
        plr.spec.resources = Some(cpu_memory(plr.spec.containers[0].resources.as_ref()));
        assert_eq!(
            infeasible(&plr, &alloc, big, &Default::default()).unwrap(),
            "InPlacePodLevelResourcesVerticalScaling is disabled"
        );
    }

    #[test]
    fn conditions_follow_the_status_manager() {
        let mut c = ResizeState::default();
        let t = |s: &str| Some(s.to_string());
        assert!(c.set_pending("OutOfcpu", "no room", 2, t("t1")));
        assert!(c.is_deferred());
        // Same reason and generation: no new event, the transition time stays.
        assert!(!c.set_pending("OutOfmemory", "still none", 2, t("t2")));
        let p = c.pending.clone().unwrap();
        assert_eq!(
            (p.reason.as_deref(), p.message.as_deref()),
            (Some("Deferred"), Some("still none"))
        );
        assert_eq!(p.last_transition_time.as_deref(), Some("t1"));
        assert!(c.set_pending("Infeasible", "too big", 2, t("t3")));
        assert!(!c.is_deferred());
        // In progress keeps its generation, and its error unless a new one is given.
        assert!(c.set_in_progress("", "", 3, t("t4")));
        assert!(c.set_in_progress(REASON_ERROR, "boom", 4, t("t5")));
        assert!(!c.set_in_progress("", "", 5, t("t6")));
        let i = c.in_progress.clone().unwrap();
        assert_eq!(
            (i.observed_generation, i.message.as_deref()),
            (3, Some("boom"))
        );
        assert_eq!(c.conditions().count(), 2);
        assert_eq!(c.clear_in_progress(), Some(3));
        assert_eq!(c.clear_in_progress(), None);
    }

    #[cfg(feature = "in-place-resize")]
    #[test]
    fn the_checkpoint_keeps_what_it_is_given() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("allocated_pods_state");
        let mut cp = Checkpoint::load(&path);
        assert!(!path.exists());
        cp.set("u1", Some(PodAllocation::of(&pod("1", "64Mi"))));
        cp.set("u2", Some(PodAllocation::of(&pod("2", "64Mi"))));
        let back = Checkpoint::load(&path);
        assert_eq!(back.get("u1"), cp.get("u1"));
        cp.retain(|uid| uid == "u2");
        cp.set("u2", None);
        assert!(Checkpoint::load(&path).get("u2").is_none());
        std::fs::write(&path, "{not json").unwrap();
        assert!(Checkpoint::load(&path).get("u1").is_none());
    }

    #[test]
    fn event_messages_read_as_upstreams() {
        let p = pod("1", "64Mi");
        assert_eq!(
            event_message("Pod resize started", &p, 2, ""),
            r#"Pod resize started: {"containers":[{"name":"c","resources":{"limits":{"memory":"64Mi"},"requests":{"cpu":"1","memory":"64Mi"}}}],"generation":2}"#
        );
        assert!(
            event_message("Pod resize error", &p, 2, "x")
                .ends_with(r#""generation":2,"error":"x"}"#)
        );
    }
}
