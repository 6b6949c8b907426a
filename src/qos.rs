//! QoS class of a pod (kubelet: `pkg/apis/core/v1/helper/qos` `ComputePodQOS`) and the
//! OOM score its containers get (kubelet: `pkg/kubelet/qos/policy.go`), and the swap they
//! get by it ([`NodeSwap`]; kubelet: `kuberuntime_container_linux.go`'s swap helpers).
//!
//! Over all containers, init containers included, only `cpu` and `memory` count and only
//! positive quantities: nothing requested or limited → BestEffort; every container limits
//! both cpu and memory and the summed requests equal the summed limits → Guaranteed; else
//! Burstable. A request left out defaults to the limit, as API defaulting does for manifests
//! (`SetDefaults_Pod`), so limits alone give Guaranteed.

use std::collections::BTreeMap;

use crate::api::{Pod, Quantity};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QosClass {
    Guaranteed,
    Burstable,
    BestEffort,
}

impl QosClass {
    /// The API spelling (`status.qosClass`).
    pub fn as_str(self) -> &'static str {
        match self {
            QosClass::Guaranteed => "Guaranteed",
            QosClass::Burstable => "Burstable",
            QosClass::BestEffort => "BestEffort",
        }
    }
}

const QOS_RESOURCES: [&str; 2] = ["cpu", "memory"];

/// The resources `spec.resources` may name (kubelet: `IsSupportedPodLevelResource`; upstream
/// also takes `hugepages-*`, which picolet does not manage).
pub(crate) const POD_LEVEL_RESOURCES: [&str; 2] = QOS_RESOURCES;

/// The scale a resource is counted in: cpu in millicores, memory in bytes.
pub(crate) fn scale_of(name: &str) -> i32 {
    if name == "cpu" { 3 } else { 0 }
}

/// A pod-level value (`spec.resources.limits` or `.requests` of `name`), when positive.
pub(crate) fn pod_level(pod: &Pod, limits: bool, name: &str) -> Option<i64> {
    let r = pod.spec.resources.as_ref()?;
    let map = if limits { &r.limits } else { &r.requests };
    map.get(name)
        .and_then(|q| q.scaled(scale_of(name)))
        .filter(|v| *v > 0)
}

/// kubelet: `IsPodLevelResourcesSet` — a pod-level request or limit of cpu or memory.
pub(crate) fn pod_level_set(pod: &Pod) -> bool {
    POD_LEVEL_RESOURCES
        .iter()
        .any(|n| pod_level(pod, true, n).is_some() || pod_level(pod, false, n).is_some())
}

/// kubelet (component-helpers): `aggregateContainerResourcesByFn` — what a pod needs of
/// something each container needs `value` of: the regular containers' and sidecars' sum, or,
/// when more, the largest init container's own value plus the sidecars started before it
/// (they keep running while it runs).
pub(crate) fn aggregate(pod: &Pod, value: impl Fn(&crate::api::Container) -> i64) -> i64 {
    let mut sum = 0i64;
    for c in &pod.spec.containers {
        sum = sum.saturating_add(value(c));
    }
    let (mut sidecars, mut init_max) = (0i64, 0i64);
    for c in &pod.spec.init_containers {
        let v = value(c);
        if c.restart_policy == Some(crate::api::RestartPolicy::Always) {
            sum = sum.saturating_add(v);
            sidecars = sidecars.saturating_add(v);
            init_max = init_max.max(sidecars);
        } else {
            init_max = init_max.max(v.saturating_add(sidecars));
        }
    }
    sum.max(init_max)
}

/// A container's request (`limits: false`; left out, its limit: API defaulting) or limit of
/// `name`, in [`scale_of`] units; 0 when it sets none.
pub(crate) fn container_value(c: &crate::api::Container, limits: bool, name: &str) -> i64 {
    c.resources
        .as_ref()
        .and_then(|r| {
            if limits {
                r.limits.get(name)
            } else {
                r.requests.get(name).or_else(|| r.limits.get(name))
            }
        })
        .and_then(|q| q.scaled(scale_of(name)))
        .unwrap_or(0)
        .max(0)
}

/// kubelet: `AggregateContainerRequests` of `name` ([`aggregate`] of the containers'
/// requests). In [`scale_of`] units.
pub(crate) fn container_requests(pod: &Pod, name: &str) -> i64 {
    aggregate(pod, |c| container_value(c, false, name))
}

/// kubelet: `ResourceConfigForPod`'s limit of `name` — pod-level when set; else, when every
/// container (init containers included) limits it, `AggregateContainerLimits`. In
/// [`scale_of`] units; None: not limited.
pub(crate) fn pod_limit(pod: &Pod, name: &str) -> Option<i64> {
    pod_level(pod, true, name).or_else(|| {
        let all = pod
            .spec
            .containers
            .iter()
            .chain(&pod.spec.init_containers)
            .all(|c| container_value(c, true, name) > 0);
        let v = aggregate(pod, |c| container_value(c, true, name));
        (all && v > 0).then_some(v)
    })
}

/// kubelet: `PodRequests` — the pod-level request of `name` when set (pod-level resources
/// take precedence), else [`container_requests`]. In [`scale_of`] units.
pub(crate) fn pod_request(pod: &Pod, name: &str) -> i64 {
    pod_level(pod, false, name).unwrap_or_else(|| container_requests(pod, name))
}

/// The pod's QoS class.
pub(crate) fn pod_qos(pod: &Pod) -> QosClass {
    let mut requests: BTreeMap<&str, i64> = BTreeMap::new();
    let mut limits: BTreeMap<&str, i64> = BTreeMap::new();
    let mut guaranteed = true;
    if pod_level_set(pod) {
        // kubelet: ComputePodQOS — pod-level resources, when set, decide the class alone:
        // Guaranteed needs pod-level cpu and memory limits equal to the requests.
        for name in QOS_RESOURCES {
            if let Some(v) = pod_level(pod, false, name) {
                requests.insert(name, v);
            }
            if let Some(v) = pod_level(pod, true, name) {
                limits.insert(name, v);
            }
        }
        if !limits.is_empty() && limits.len() < QOS_RESOURCES.len() {
            guaranteed = false;
        }
        return classify(&requests, &limits, guaranteed);
    }
    for c in pod.spec.containers.iter().chain(&pod.spec.init_containers) {
        let res = c.resources.as_ref();
        let mut limited = 0;
        for name in QOS_RESOURCES {
            let limit = res.and_then(|r| r.limits.get(name)).and_then(milli);
            let request = res
                .and_then(|r| r.requests.get(name))
                .map(milli)
                .unwrap_or(limit);
            if let Some(v) = request.filter(|v| *v > 0) {
                *requests.entry(name).or_default() += v;
            }
            if let Some(v) = limit.filter(|v| *v > 0) {
                *limits.entry(name).or_default() += v;
                limited += 1;
            }
        }
        if limited < QOS_RESOURCES.len() {
            guaranteed = false;
        }
    }
    classify(&requests, &limits, guaranteed)
}

fn classify(
    requests: &BTreeMap<&str, i64>,
    limits: &BTreeMap<&str, i64>,
    guaranteed: bool,
) -> QosClass {
    if requests.is_empty() && limits.is_empty() {
        return QosClass::BestEffort;
    }
    if guaranteed
        && requests.len() == limits.len()
        && requests.iter().all(|(k, v)| limits.get(k) == Some(v))
    {
        return QosClass::Guaranteed;
    }
    QosClass::Burstable
}

/// kubelet: `guaranteedOOMScoreAdj`, `besteffortOOMScoreAdj`.
pub(crate) const GUARANTEED_OOM_SCORE_ADJ: i64 = -997;
pub(crate) const BESTEFFORT_OOM_SCORE_ADJ: i64 = 1000;

/// `system-node-critical` (kubelet: `scheduling.SystemNodeCritical`).
pub(crate) const SYSTEM_NODE_CRITICAL: &str = "system-node-critical";
/// kubelet: `scheduling.SystemCriticalPriority` (2 × 10⁹).
pub(crate) const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;

/// kubelet: `IsCriticalPod` — a static or mirror pod, or a priority of at least
/// system-critical.
pub(crate) fn is_critical(pod: &Pod) -> bool {
    pod.is_static()
        || pod
            .metadata
            .annotations
            .contains_key("kubernetes.io/config.mirror")
        || pod
            .spec
            .priority
            .is_some_and(|p| p >= SYSTEM_CRITICAL_PRIORITY)
}

/// kubelet: `IsNodeCriticalPod` — `IsCriticalPod` (a static or mirror pod, or a priority
/// of at least system-critical) with `priorityClassName: system-node-critical`.
pub(crate) fn is_node_critical(pod: &Pod) -> bool {
    is_critical(pod) && pod.spec.priority_class_name.as_deref() == Some(SYSTEM_NODE_CRITICAL)
}

/// kubelet: `GetContainerOOMScoreAdjust` — node-critical and Guaranteed pods −997,
/// BestEffort 1000, Burstable `1000 − 1000 × memoryRequest / memoryCapacity` kept within
/// 3 (`1000 + guaranteedOOMScoreAdj`) … 999. `memory_capacity` 0 (unknown) counts as a
/// request of nothing. The container's memory request defaults to its limit.
pub(crate) fn oom_score_adj(
    pod: &Pod,
    container: &crate::api::Container,
    memory_capacity: u64,
) -> i64 {
    if is_node_critical(pod) {
        return GUARANTEED_OOM_SCORE_ADJ;
    }
    match pod_qos(pod) {
        QosClass::Guaranteed => return GUARANTEED_OOM_SCORE_ADJ,
        QosClass::BestEffort => return BESTEFFORT_OOM_SCORE_ADJ,
        QosClass::Burstable => {}
    }
    let res = container.resources.as_ref();
    let mut request = res
        .and_then(|r| r.requests.get("memory").or_else(|| r.limits.get("memory")))
        .and_then(|q| q.scaled(0))
        .unwrap_or(0)
        .max(0) as i128;
    // kubelet: with a pod-level memory request, the part of it no container requests is
    // shared equally among all containers (init containers included) for the score
    // (`remainingPodMemReqPerContainer`).
    if let Some(pod_request) = pod_level(pod, false, "memory") {
        let n = (pod.spec.containers.len() + pod.spec.init_containers.len()).max(1) as i128;
        let remaining = i128::from(pod_request) - i128::from(container_requests(pod, "memory"));
        request += remaining / n;
    }
    let adj = if memory_capacity == 0 {
        1000
    } else {
        1000 - (1000 * request) / memory_capacity as i128
    };
    if adj < 1000 + GUARANTEED_OOM_SCORE_ADJ as i128 {
        return 1000 + GUARANTEED_OOM_SCORE_ADJ;
    }
    if adj == BESTEFFORT_OOM_SCORE_ADJ as i128 {
        return BESTEFFORT_OOM_SCORE_ADJ - 1;
    }
    adj as i64
}

/// kubelet `memorySwap.swapBehavior` (`NoSwap` when unset).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SwapBehavior {
    #[default]
    NoSwap,
    LimitedSwap,
}

/// The node's swap as containers get it (kubelet: `NodeSwap`, GA in 1.34): the configured
/// behavior and what the host offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NodeSwap {
    pub behavior: SwapBehavior,
    /// kubelet `getSwapControllerAvailable`: v1 `memory.memsw.limit_in_bytes` at the memory
    /// hierarchy's root, v2 `memory.swap.max` in picolet's own cgroup.
    pub controller: bool,
    /// The cgroup v2 unified hierarchy.
    pub unified: bool,
    /// `SwapTotal` in bytes.
    pub capacity: u64,
}

impl NodeSwap {
    /// kubelet: `GetContainerSwapBehavior` — `LimitedSwap` only on cgroup v2 with a swap
    /// controller, for a Burstable, non-critical pod's container whose memory request is
    /// set and below its limit (a request left out is the limit, as API defaulting).
    pub fn behavior_for(&self, pod: &Pod, container: &crate::api::Container) -> SwapBehavior {
        if self.behavior == SwapBehavior::NoSwap
            || !self.controller
            || !self.unified
            || is_critical(pod)
            || pod_qos(pod) != QosClass::Burstable
        {
            return SwapBehavior::NoSwap;
        }
        let (request, limit) = container_memory(container);
        if request == 0 || request == limit {
            return SwapBehavior::NoSwap;
        }
        SwapBehavior::LimitedSwap
    }

    /// kubelet: `configureContainerSwapResources` — CRI `memory_swap_limit_in_bytes`
    /// (cgroup v1) and `unified["memory.swap.max"]` (v2; `None`: not set). Nothing without a
    /// swap controller; `NoSwap` is memory+swap = the memory limit on v1, `memory.swap.max`
    /// 0 on v2; `LimitedSwap` is the container's share of the node's memory, of the swap
    /// (`request / MemTotal × SwapTotal`).
    pub fn container(
        &self,
        pod: &Pod,
        container: &crate::api::Container,
        memory_limit: i64,
        memory_capacity: u64,
    ) -> (i64, Option<i64>) {
        if !self.controller {
            return (0, None);
        }
        let request = container_memory(container).0;
        // kubelet: calcSwapForBurstablePods — a request above the node's memory, or an
        // unknown capacity, disallows swap.
        let limited = (self.behavior_for(pod, container) == SwapBehavior::LimitedSwap
            && memory_capacity > 0
            && request as u64 <= memory_capacity)
            .then(|| (request as f64 / memory_capacity as f64 * self.capacity as f64) as i64);
        match (limited, self.unified) {
            (Some(swap), _) => (0, Some(swap)),
            (None, false) => (memory_limit, None),
            (None, true) => (0, Some(0)),
        }
    }
}

/// A container's memory request (its limit when left out) and limit, in bytes.
fn container_memory(container: &crate::api::Container) -> (i64, i64) {
    let Some(r) = container.resources.as_ref() else {
        return (0, 0);
    };
    let get = |q: Option<&Quantity>| q.and_then(|q| q.scaled(0)).unwrap_or(0).max(0);
    let limit = get(r.limits.get("memory"));
    match get(r.requests.get("memory")) {
        0 => (limit, limit),
        request => (request, limit),
    }
}

/// Requests and limits are compared in milli-units (exact for every quantity Kubernetes
/// accepts for cpu and memory), with the one parser in `api`.
fn milli(q: &Quantity) -> Option<i64> {
    q.scaled(3)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{Container, ResourceRequirements};

    fn q(s: &str) -> Quantity {
        Quantity::Str(s.to_string())
    }

    #[test]
    fn quantities_compare_in_milli_units() {
        assert_eq!(milli(&q("1000m")), milli(&q("1")));
        assert_eq!(milli(&q("67108864")), milli(&q("64Mi")));
        assert_eq!(milli(&Quantity::Int(2)), Some(2000));
        assert_eq!(milli(&Quantity::Float(0.25)), Some(250));
        assert_eq!(milli(&q("abc")), None);
    }

    fn res(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> Option<ResourceRequirements> {
        let m = |kv: &[(&str, &str)]| kv.iter().map(|(k, v)| (k.to_string(), q(v))).collect();
        Some(ResourceRequirements {
            requests: m(requests),
            limits: m(limits),
            claims: None,
        })
    }

    fn pod_with(
        resources: Vec<Option<ResourceRequirements>>,
        init: Vec<Option<ResourceRequirements>>,
    ) -> Pod {
        let mk = |rs: Vec<Option<ResourceRequirements>>| {
            rs.into_iter()
                .enumerate()
                .map(|(i, r)| Container {
                    name: format!("c{i}"),
                    resources: r,
                    ..Container::default()
                })
                .collect()
        };
        let mut pod = Pod::default();
        pod.spec.containers = mk(resources);
        pod.spec.init_containers = mk(init);
        pod
    }

    #[test]
    fn aggregates_as_the_kubelet_with_sidecars() {
        // (case, regular cpu requests, init containers (cpu request, sidecar), cpu limits of
        // every container or none, want: requests, limit)
        type Case<'a> = (
            &'a str,
            Vec<&'a str>,
            Vec<(&'a str, bool)>,
            bool,
            i64,
            Option<i64>,
        );
        let cases: Vec<Case> = vec![
            (
                "regular only",
                vec!["100m", "200m"],
                vec![],
                true,
                300,
                Some(300),
            ),
            (
                "a larger init container",
                vec!["100m"],
                vec![("500m", false)],
                true,
                500,
                Some(500),
            ),
            (
                "sidecars add up",
                vec!["100m"],
                vec![("50m", true), ("50m", true)],
                true,
                200,
                Some(200),
            ),
            // kubelet: an init container runs beside the sidecars started before it.
            (
                "init after a sidecar counts it",
                vec!["10m"],
                vec![("100m", false), ("50m", true), ("200m", false)],
                true,
                250,
                Some(250),
            ),
            (
                "a container without a limit: none",
                vec!["100m"],
                vec![("50m", false)],
                false,
                100,
                None,
            ),
        ];
        for (case, regular, init, limited, want_req, want_lim) in cases {
            let r = |v: &str, limit: bool| {
                if limit {
                    res(&[("cpu", v)], &[("cpu", v)])
                } else {
                    res(&[("cpu", v)], &[])
                }
            };
            let last = regular.len() - 1;
            let mut pod = pod_with(
                regular
                    .iter()
                    .enumerate()
                    .map(|(i, v)| r(v, limited || i != last))
                    .collect(),
                init.iter().map(|(v, _)| r(v, true)).collect(),
            );
            for (c, (_, sidecar)) in pod.spec.init_containers.iter_mut().zip(&init) {
                if *sidecar {
                    c.restart_policy = Some(crate::api::RestartPolicy::Always);
                }
            }
            assert_eq!(
                container_requests(&pod, "cpu"),
                want_req,
                "{case}: requests"
            );
            assert_eq!(pod_request(&pod, "cpu"), want_req, "{case}: pod request");
            assert_eq!(pod_limit(&pod, "cpu"), want_lim, "{case}: limit");
            assert_eq!(pod_limit(&pod, "memory"), None, "{case}: no memory limits");
        }
        // A pod-level limit is the pod's, declared whatever the containers say.
        let mut pod = pod_with(vec![res(&[("cpu", "100m")], &[])], vec![]);
        pod.spec.resources = res(&[], &[("cpu", "2")]);
        assert_eq!(pod_limit(&pod, "cpu"), Some(2000));
    }

    #[test]
    fn qos_table() {
        let both = &[("cpu", "500m"), ("memory", "64Mi")];
        let cases: Vec<(&str, Pod, QosClass)> = vec![
            (
                "nothing",
                pod_with(vec![None, None], vec![]),
                QosClass::BestEffort,
            ),
            (
                "zero requests do not count",
                pod_with(vec![res(&[("cpu", "0")], &[])], vec![]),
                QosClass::BestEffort,
            ),
            (
                "only other resources",
                pod_with(vec![res(&[("ephemeral-storage", "1Gi")], &[])], vec![]),
                QosClass::BestEffort,
            ),
            (
                "requests = limits",
                pod_with(vec![res(both, both)], vec![]),
                QosClass::Guaranteed,
            ),
            (
                "limits only (requests default to limits)",
                pod_with(vec![res(&[], both), res(&[], both)], vec![]),
                QosClass::Guaranteed,
            ),
            (
                "equal in other spellings",
                pod_with(
                    vec![res(
                        &[("cpu", "0.5"), ("memory", "67108864")],
                        &[("cpu", "500m"), ("memory", "64Mi")],
                    )],
                    vec![],
                ),
                QosClass::Guaranteed,
            ),
            (
                "requests below limits",
                pod_with(
                    vec![res(&[("cpu", "100m"), ("memory", "64Mi")], both)],
                    vec![],
                ),
                QosClass::Burstable,
            ),
            (
                "requests only",
                pod_with(vec![res(both, &[])], vec![]),
                QosClass::Burstable,
            ),
            (
                "memory limit missing",
                pod_with(vec![res(&[], &[("cpu", "1")])], vec![]),
                QosClass::Burstable,
            ),
            (
                "one container without limits",
                pod_with(vec![res(both, both), None], vec![]),
                QosClass::Burstable,
            ),
            (
                "init container without limits",
                pod_with(vec![res(both, both)], vec![None]),
                QosClass::Burstable,
            ),
            (
                "init container limited too",
                pod_with(vec![res(both, both)], vec![res(&[], both)]),
                QosClass::Guaranteed,
            ),
        ];
        for (name, pod, want) in cases {
            assert_eq!(pod_qos(&pod), want, "{name}");
        }
        assert_eq!(QosClass::Burstable.as_str(), "Burstable");
    }

    fn with_pod_level(mut pod: Pod, r: Option<ResourceRequirements>) -> Pod {
        pod.spec.resources = r;
        pod
    }

    /// kubelet: ComputePodQOS with pod-level resources — they decide alone.
    #[test]
    fn qos_with_pod_level_resources() {
        let both = &[("cpu", "1"), ("memory", "128Mi")];
        let cases: Vec<(&str, Pod, QosClass)> = vec![
            (
                "pod-level requests = limits, containers with nothing",
                with_pod_level(pod_with(vec![None, None], vec![]), res(both, both)),
                QosClass::Guaranteed,
            ),
            (
                "pod-level Guaranteed whatever the containers say",
                with_pod_level(
                    pod_with(vec![res(&[("cpu", "100m")], &[])], vec![]),
                    res(both, both),
                ),
                QosClass::Guaranteed,
            ),
            (
                "pod-level cpu limit only",
                with_pod_level(
                    pod_with(vec![None], vec![]),
                    res(&[("cpu", "1")], &[("cpu", "1")]),
                ),
                QosClass::Burstable,
            ),
            (
                "pod-level requests only",
                with_pod_level(pod_with(vec![None], vec![]), res(both, &[])),
                QosClass::Burstable,
            ),
            (
                "pod-level requests below limits",
                with_pod_level(
                    pod_with(vec![None], vec![]),
                    res(&[("cpu", "500m"), ("memory", "128Mi")], both),
                ),
                QosClass::Burstable,
            ),
            (
                "containers Guaranteed but pod-level requests only: Burstable",
                with_pod_level(pod_with(vec![res(both, both)], vec![]), res(both, &[])),
                QosClass::Burstable,
            ),
            (
                "pod-level with only other resources: the containers decide",
                with_pod_level(
                    pod_with(vec![res(both, both)], vec![]),
                    res(&[("ephemeral-storage", "1Gi")], &[]),
                ),
                QosClass::Guaranteed,
            ),
        ];
        for (name, pod, want) in cases {
            assert_eq!(pod_qos(&pod), want, "{name}");
        }
    }

    /// kubelet: remainingPodMemReqPerContainer — the pod-level memory request no container
    /// asks for is shared among all containers for the OOM score.
    #[test]
    fn oom_score_adj_with_a_pod_level_memory_request() {
        const GI: u64 = 1 << 30;
        // 4 GiB node; pod asks 1 GiB at pod level, limit 2 GiB (Burstable); two containers,
        // one asking 256 MiB: the other 768 MiB are 384 MiB each.
        let pod = with_pod_level(
            pod_with(vec![res(&[("memory", "256Mi")], &[]), None], vec![]),
            res(&[("memory", "1Gi")], &[("memory", "2Gi")]),
        );
        assert_eq!(pod_qos(&pod), QosClass::Burstable);
        let want = |mib: i128| (1000 - 1000 * mib * (1 << 20) / (4 * GI as i128)) as i64;
        assert_eq!(
            oom_score_adj(&pod, &pod.spec.containers[0], 4 * GI),
            want(256 + 384)
        );
        assert_eq!(
            oom_score_adj(&pod, &pod.spec.containers[1], 4 * GI),
            want(384)
        );
        assert_eq!(pod_request(&pod, "memory"), 1 << 30);
        assert_eq!(pod_request(&pod, "cpu"), 0);
        assert_eq!(container_requests(&pod, "memory"), 256 << 20);
    }

    #[test]
    fn oom_score_adj_follows_the_kubelet_policy() {
        let gi = 1u64 << 30;
        let with = |r: Option<ResourceRequirements>| {
            let mut p = Pod::default();
            p.spec.containers = vec![Container {
                name: "c".into(),
                resources: r,
                ..Default::default()
            }];
            p
        };
        // (resources, capacity, want)
        let rows = [
            (None, gi, 1000),
            (
                res(
                    &[("cpu", "1"), ("memory", "1Gi")],
                    &[("cpu", "1"), ("memory", "1Gi")],
                ),
                gi,
                -997,
            ),
            (res(&[("memory", "100Mi")], &[]), gi, 903), // 1000 - 1000*100/1024
            (res(&[("memory", "1Gi")], &[]), gi, 3),     // all of it: kept above Guaranteed
            (res(&[("memory", "2Gi")], &[]), gi, 3),
            (res(&[("memory", "1")], &[]), gi, 999), // rounds to 1000: kept below BestEffort
            (res(&[("cpu", "100m")], &[]), gi, 999), // no memory request
            (res(&[], &[("memory", "512Mi")]), gi, 500), // the request defaults to the limit
            (res(&[("memory", "100Mi")], &[]), 0, 999), // capacity unknown
        ];
        for (i, (r, cap, want)) in rows.into_iter().enumerate() {
            let p = with(r);
            assert_eq!(
                oom_score_adj(&p, &p.spec.containers[0], cap),
                want,
                "row {i}"
            );
        }
        // A static pod with priorityClassName system-node-critical (kubeadm's etcd): -997
        // whatever its resources; without the static marker and the priority it is not.
        let mut p = with(res(&[("memory", "100Mi")], &[]));
        p.spec.priority_class_name = Some(SYSTEM_NODE_CRITICAL.into());
        assert_eq!(oom_score_adj(&p, &p.spec.containers[0], gi), 903);
        p.metadata
            .annotations
            .insert("kubernetes.io/config.source".into(), "file".into());
        assert!(p.is_static());
        assert_eq!(oom_score_adj(&p, &p.spec.containers[0], gi), -997);
        let mut api = with(None);
        api.spec.priority_class_name = Some(SYSTEM_NODE_CRITICAL.into());
        api.spec.priority = Some(2_000_001_000);
        assert_eq!(oom_score_adj(&api, &api.spec.containers[0], gi), -997);
    }

    /// kubelet: GetContainerSwapBehavior and configureContainerSwapResources
    /// (`kuberuntime_container_linux_test.go`'s cases, as (memsw, memory.swap.max)).
    #[test]
    fn swap_table() {
        let gib = 1u64 << 30;
        let v2 = NodeSwap {
            behavior: SwapBehavior::LimitedSwap,
            controller: true,
            unified: true,
            capacity: 2 * gib,
        };
        let burstable = pod_with(
            vec![res(&[("memory", "1Gi")], &[("memory", "2Gi")])],
            vec![],
        );
        let request_only = pod_with(vec![res(&[("memory", "256Mi")], &[])], vec![]);
        let equal = pod_with(
            vec![
                res(&[("memory", "1Gi")], &[("memory", "1Gi")]),
                res(&[("cpu", "1")], &[]),
            ],
            vec![],
        );
        let guaranteed = pod_with(vec![res(&[], &[("cpu", "1"), ("memory", "1Gi")])], vec![]);
        let no_memory = pod_with(vec![res(&[("cpu", "1")], &[])], vec![]);
        let mut critical = burstable.clone();
        critical.spec.priority = Some(SYSTEM_CRITICAL_PRIORITY);
        let limit = 2i64 << 30;
        type Want = (i64, Option<i64>);
        let cases: Vec<(&str, NodeSwap, &Pod, Want)> = vec![
            // request 1Gi of 4Gi memory → a quarter of the 2Gi swap.
            (
                "LimitedSwap, Burstable",
                v2,
                &burstable,
                (0, Some(512 << 20)),
            ),
            (
                "request without a limit",
                v2,
                &request_only,
                (0, Some(128 << 20)),
            ),
            ("request = limit", v2, &equal, (0, Some(0))),
            ("Guaranteed", v2, &guaranteed, (0, Some(0))),
            ("no memory request", v2, &no_memory, (0, Some(0))),
            ("critical pod", v2, &critical, (0, Some(0))),
            (
                "NoSwap on v2",
                NodeSwap {
                    behavior: SwapBehavior::NoSwap,
                    ..v2
                },
                &burstable,
                (0, Some(0)),
            ),
            (
                "no swap controller",
                NodeSwap {
                    controller: false,
                    ..v2
                },
                &burstable,
                (0, None),
            ),
            (
                "v1: memory+swap = the limit",
                NodeSwap {
                    unified: false,
                    behavior: SwapBehavior::NoSwap,
                    ..v2
                },
                &burstable,
                (limit, None),
            ),
            (
                "v1 never LimitedSwap",
                NodeSwap {
                    unified: false,
                    ..v2
                },
                &burstable,
                (limit, None),
            ),
        ];
        for (what, swap, pod, want) in cases {
            let c = &pod.spec.containers[0];
            assert_eq!(swap.container(pod, c, limit, 4 * gib), want, "{what}");
        }
        // A request above the node's memory, or an unknown capacity: no swap.
        let c = &burstable.spec.containers[0];
        assert_eq!(v2.container(&burstable, c, limit, gib / 2), (0, Some(0)));
        assert_eq!(v2.container(&burstable, c, limit, 0), (0, Some(0)));
        assert_eq!(v2.behavior_for(&burstable, c), SwapBehavior::LimitedSwap);
        assert_eq!(
            v2.behavior_for(&equal, &equal.spec.containers[0]),
            SwapBehavior::NoSwap
        );
    }
}
