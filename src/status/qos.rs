//! QoS class of a pod (kubelet: `pkg/apis/core/v1/helper/qos` `ComputePodQOS`).
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
}
