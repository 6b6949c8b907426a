//! QoS class of a pod (kubelet: `pkg/apis/core/v1/helper/qos` `ComputePodQOS`) and the
//! OOM score its containers get (kubelet: `pkg/kubelet/qos/policy.go`).
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

/// The pod's QoS class.
pub fn pod_qos(pod: &Pod) -> QosClass {
    let mut requests: BTreeMap<&str, i64> = BTreeMap::new();
    let mut limits: BTreeMap<&str, i64> = BTreeMap::new();
    let mut guaranteed = true;
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
pub const GUARANTEED_OOM_SCORE_ADJ: i64 = -997;
pub const BESTEFFORT_OOM_SCORE_ADJ: i64 = 1000;

/// `system-node-critical` (kubelet: `scheduling.SystemNodeCritical`).
pub const SYSTEM_NODE_CRITICAL: &str = "system-node-critical";
/// kubelet: `scheduling.SystemCriticalPriority` (2 × 10⁹).
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;

/// kubelet: `IsCriticalPod` — a static or mirror pod, or a priority of at least
/// system-critical.
pub fn is_critical(pod: &Pod) -> bool {
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
pub fn is_node_critical(pod: &Pod) -> bool {
    is_critical(pod) && pod.spec.priority_class_name.as_deref() == Some(SYSTEM_NODE_CRITICAL)
}

/// kubelet: `GetContainerOOMScoreAdjust` — node-critical and Guaranteed pods −997,
/// BestEffort 1000, Burstable `1000 − 1000 × memoryRequest / memoryCapacity` kept within
/// 3 (`1000 + guaranteedOOMScoreAdj`) … 999. `memory_capacity` 0 (unknown) counts as a
/// request of nothing. The container's memory request defaults to its limit.
pub fn oom_score_adj(pod: &Pod, container: &crate::api::Container, memory_capacity: u64) -> i64 {
    if is_node_critical(pod) {
        return GUARANTEED_OOM_SCORE_ADJ;
    }
    match pod_qos(pod) {
        QosClass::Guaranteed => return GUARANTEED_OOM_SCORE_ADJ,
        QosClass::BestEffort => return BESTEFFORT_OOM_SCORE_ADJ,
        QosClass::Burstable => {}
    }
    let res = container.resources.as_ref();
    let request = res
        .and_then(|r| r.requests.get("memory").or_else(|| r.limits.get("memory")))
        .and_then(|q| q.scaled(0))
        .unwrap_or(0)
        .max(0) as i128;
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
}
