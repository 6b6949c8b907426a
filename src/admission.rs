//! Pod admission (kubelet: `canAdmitPod` with the admit handlers of
//! `lifecycle/predicate.go`): the checks a pod passes before anything of it is started.
//!
//! Owns: the pure [`admit`] decision for one pod, from the pod and the node's facts.
//! Checks, in the kubelet's order where it has one: the field policy's refusals
//! (`manifest::fields`, picolet's own: fields it cannot honour), then `nodeSelector`
//! against the node's labels (`NodeAffinity`). A rejected pod is `Failed` with the reason
//! and message, as the kubelet's `rejectPod` does; the field policy's warnings are returned
//! for the caller to log once per pod.
//!
//! Must never: do I/O, or look at other pods (host ports and resources: not yet).
//! Deliberately different from upstream: picolet does not evaluate `spec.affinity` (the
//! scheduler placed cluster pods; for static pods use `nodeSelector`).

use std::collections::BTreeMap;

use crate::api::Pod;
use crate::manifest::fields::{self, Finding, Policy};

/// The node facts admission reads.
#[derive(Debug, Clone, Default)]
pub struct NodeFacts {
    /// `node::node_labels`: the defaults and `--node-labels`.
    pub labels: BTreeMap<String, String>,
}

/// Why a pod is not admitted: the pod's `status.reason` and `status.message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub reason: &'static str,
    pub message: String,
}

/// The verdict for one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    /// `None`: admitted.
    pub rejection: Option<Rejection>,
    /// Warned fields (one WARN per pod, by the caller).
    pub warnings: Vec<Finding>,
}

/// The status reason for a pod refused by the field policy (picolet's own; the kubelet has
/// no such check because it implements every field).
pub const REASON_UNSUPPORTED: &str = "UnsupportedField";
/// kubelet: `NodeAffinity` predicate failure.
pub const REASON_NODE_AFFINITY: &str = "NodeAffinity";

/// kubelet: `canAdmitPod`.
pub fn admit(pod: &Pod, node: &NodeFacts) -> Admission {
    let findings = match serde_json::to_value(pod) {
        Ok(json) => fields::findings(&json),
        Err(_) => Vec::new(),
    };
    let (refused, warnings): (Vec<Finding>, Vec<Finding>) = findings
        .into_iter()
        .partition(|f| f.policy == Policy::Refused);
    let rejection = if !refused.is_empty() {
        let list: Vec<String> = refused.iter().map(ToString::to_string).collect();
        Some(Rejection {
            reason: REASON_UNSUPPORTED,
            message: format!("picolet cannot run this pod: {}", list.join("; ")),
        })
    } else {
        node_selector_mismatch(pod, node).map(|missing| Rejection {
            reason: REASON_NODE_AFFINITY,
            message: format!(
                "Predicate NodeAffinity failed: the node's labels do not match spec.nodeSelector ({})",
                missing.join(", ")
            ),
        })
    };
    Admission {
        rejection,
        warnings,
    }
}

/// The `nodeSelector` entries the node's labels do not satisfy (`key=value`, or
/// `key=value (node has other)`).
fn node_selector_mismatch(pod: &Pod, node: &NodeFacts) -> Option<Vec<String>> {
    let missing: Vec<String> = pod
        .spec
        .node_selector
        .iter()
        .filter(|(k, v)| node.labels.get(*k) != Some(*v))
        .map(|(k, v)| match node.labels.get(k) {
            Some(have) => format!("{k}={v} (node has {have:?})"),
            None => format!("{k}={v} (node has no such label)"),
        })
        .collect();
    (!missing.is_empty()).then_some(missing)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Container;

    fn pod() -> Pod {
        let mut p = Pod::default();
        p.metadata.name = "p".into();
        p.spec.containers = vec![Container {
            name: "c".into(),
            image: "busybox".into(),
            ..Default::default()
        }];
        p
    }

    fn node() -> NodeFacts {
        NodeFacts {
            labels: crate::node::node_labels(
                "edge-1",
                &BTreeMap::from([("zone".into(), "garage".into())]),
            ),
        }
    }

    #[test]
    fn table() {
        type Edit = fn(&mut Pod);
        type Row = (
            &'static str,
            Edit,
            Option<(&'static str, &'static str)>,
            usize,
        );
        let rows: Vec<Row> = vec![
            ("plain pod", |_| {}, None, 0),
            (
                "matching nodeSelector",
                |p| {
                    p.spec
                        .node_selector
                        .insert("kubernetes.io/os".into(), "linux".into());
                    p.spec.node_selector.insert("zone".into(), "garage".into());
                },
                None,
                0,
            ),
            (
                "nodeSelector with a missing label",
                |p| {
                    p.spec.node_selector.insert("disk".into(), "ssd".into());
                },
                Some((REASON_NODE_AFFINITY, "disk=ssd (node has no such label)")),
                0,
            ),
            (
                "nodeSelector with another value",
                |p| {
                    p.spec
                        .node_selector
                        .insert("kubernetes.io/hostname".into(), "edge-2".into());
                },
                Some((
                    REASON_NODE_AFFINITY,
                    "kubernetes.io/hostname=edge-2 (node has \"edge-1\")",
                )),
                0,
            ),
            (
                "refused field",
                |p| p.spec.host_users = Some(false),
                Some((REASON_UNSUPPORTED, "spec.hostUsers (user namespaces")),
                0,
            ),
            (
                "refusal wins over a selector mismatch",
                |p| {
                    p.spec.resource_claims = Some(serde_json::json!([{"name": "gpu"}]));
                    p.spec.node_selector.insert("disk".into(), "ssd".into());
                },
                Some((REASON_UNSUPPORTED, "spec.resourceClaims")),
                0,
            ),
            (
                "warned field",
                |p| p.spec.containers[0].liveness_probe = Some(serde_json::json!({"exec": {}})),
                None,
                1,
            ),
        ];
        for (name, edit, want, warnings) in rows {
            let mut p = pod();
            edit(&mut p);
            let got = admit(&p, &node());
            match (&got.rejection, want) {
                (None, None) => {}
                (Some(r), Some((reason, text))) => {
                    assert_eq!(r.reason, reason, "{name}");
                    assert!(r.message.contains(text), "{name}: {}", r.message);
                }
                (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
            }
            assert_eq!(got.warnings.len(), warnings, "{name}: {:?}", got.warnings);
        }
    }
}
