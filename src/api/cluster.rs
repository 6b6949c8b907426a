//! The API objects of cluster mode besides `Pod` (in [`crate::api`]): Node, Lease
//! (`coordination.k8s.io/v1`), lists, watch events and `Status`. The apiserver client
//! (`kube`) and the managers that use it exchange them; they live here, with every other
//! Kubernetes type, so that one module holds them all.
//!
//! Must never: do I/O. Unknown fields are tolerated, as in `crate::api`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::ObjectMeta;

/// One line of a watch stream (`metav1.WatchEvent`). `object` stays raw JSON so that one
/// object that does not decode is logged and skipped, not fatal to the stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WatchEvent {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR`.
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(default)]
    pub object: serde_json::Value,
}

/// A list answer (`PodList`, …) with its items kept raw, for the same reason.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ObjectList {
    #[serde(default)]
    pub metadata: ListMeta,
    #[serde(default)]
    pub items: Vec<serde_json::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListMeta {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    #[serde(default, rename = "continue", skip_serializing_if = "String::is_empty")]
    pub continue_: String,
}

/// `metav1.Status`, the body of every error answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Status {
    #[serde(default)]
    pub code: u16,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub message: String,
}

/// `v1/Node`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Node {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: NodeSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<NodeStatus>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSpec {
    #[serde(default, rename = "podCIDR", skip_serializing_if = "Option::is_none")]
    pub pod_cidr: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unschedulable: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<serde_json::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatus {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub capacity: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub allocatable: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<NodeCondition>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<NodeAddress>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daemon_endpoints: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_info: Option<NodeSystemInfo>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeCondition {
    #[serde(rename = "type")]
    pub type_: String,
    /// `"True"` | `"False"` | `"Unknown"`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_heartbeat_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeAddress {
    /// `Hostname` | `InternalIP` | `ExternalIP` | …
    #[serde(rename = "type")]
    pub type_: String,
    pub address: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSystemInfo {
    #[serde(default, rename = "machineID")]
    pub machine_id: String,
    #[serde(default, rename = "systemUUID")]
    pub system_uuid: String,
    #[serde(default, rename = "bootID")]
    pub boot_id: String,
    #[serde(default)]
    pub kernel_version: String,
    #[serde(default)]
    pub os_image: String,
    #[serde(default)]
    pub container_runtime_version: String,
    #[serde(default)]
    pub kubelet_version: String,
    #[serde(default)]
    pub kube_proxy_version: String,
    #[serde(default)]
    pub operating_system: String,
    #[serde(default)]
    pub architecture: String,
    /// `{"capacity": bytes}` (NodeSwapStatus), when the node has swap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap: Option<serde_json::Value>,
}

/// `coordination.k8s.io/v1` Lease.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lease {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: LeaseSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder_identity: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_duration_seconds: Option<i64>,
    /// `metav1.MicroTime`: RFC 3339 with microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renew_time: Option<String>,
}

/// `metav1.DeleteOptions` as picolet sends it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteOptionsBody {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_period_seconds: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preconditions: Option<Preconditions>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Preconditions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
}
