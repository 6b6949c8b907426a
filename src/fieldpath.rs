//! Values a pod's fields give to its containers and volumes (kubelet: `pkg/fieldpath`,
//! `resource.ExtractContainerResourceValue`, `third_party/forked/golang/expansion`):
//! `metadata.labels['k']`-style subscripts, `resourceFieldRef` values, `$(VAR)` expansion,
//! and the node's facts they depend on ([`NodeParams`]).
//!
//! A leaf shared by the container config (`kuberuntime::cri_config`: env, command, args)
//! and the volumes (downwardAPI items, `subPathExpr`). Imports only `api` and
//! `config_data`'s object set. Must never do I/O.

use std::collections::BTreeMap;
use std::path::Path;

use crate::api;
use crate::config_data::ConfigObjects;

/// The node's facts a container's config depends on.
#[derive(Debug, Clone, Copy)]
pub struct NodeParams<'a> {
    /// `<root-dir>/seccomp`: `Localhost` seccomp profiles are relative to it (kubelet:
    /// `seccompProfileRoot`).
    pub seccomp_root: &'a Path,
    /// `--seccomp-default`: `RuntimeDefault` instead of `Unconfined` when nothing is asked.
    pub seccomp_default: bool,
    /// The node's memory (`MemTotal`, bytes): Burstable containers' `oom_score_adj`, and
    /// `resourceFieldRef` `limits.memory` of a container without a limit.
    pub memory_capacity: u64,
    /// The node's CPUs in millicores: `resourceFieldRef` `limits.cpu` without a limit.
    pub cpu_capacity_milli: i64,
    /// The node's swap (`memorySwap.swapBehavior`, what the host offers).
    pub swap: crate::qos::NodeSwap,
    /// The node's IP (`status.hostIP`); "" if unknown.
    pub host_ip: &'a str,
    /// The ConfigMaps and Secrets env refs read (`None`: none known).
    pub objects: Option<&'a ConfigObjects>,
}

/// `metadata.labels['key']` / `metadata.annotations['key']` (double quotes too): the value,
/// "" when the key is not set; `None` for any other path.
pub(crate) fn metadata_subscript(pod: &api::Pod, path: &str) -> Option<String> {
    let m = &pod.metadata;
    let (map, rest) = if let Some(rest) = path.strip_prefix("metadata.labels") {
        (&m.labels, rest)
    } else if let Some(rest) = path.strip_prefix("metadata.annotations") {
        (&m.annotations, rest)
    } else {
        return None;
    };
    let key = rest
        .strip_prefix("['")
        .and_then(|r| r.strip_suffix("']"))
        .or_else(|| rest.strip_prefix("[\"").and_then(|r| r.strip_suffix("\"]")))?;
    Some(map.get(key).cloned().unwrap_or_default())
}

/// Why a `resourceFieldRef` has no value; the caller names its item.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ResourceFieldError {
    /// `containerName` names no container of the pod.
    NoContainer(String),
    /// A resource other than `limits`/`requests` of cpu, memory, ephemeral-storage.
    UnsupportedResource(String),
    DivisorNotQuantity(serde_json::Value),
    DivisorNotPositive(serde_json::Value),
    /// The container's value of the resource (`limits.cpu`) is not a quantity.
    NotAQuantity(String),
}

impl std::fmt::Display for ResourceFieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResourceFieldError::NoContainer(name) => write!(f, "no container named {name:?}"),
            ResourceFieldError::UnsupportedResource(r) => write!(f, "unsupported resource {r:?}"),
            ResourceFieldError::DivisorNotQuantity(d) => write!(f, "divisor {d} is not a quantity"),
            ResourceFieldError::DivisorNotPositive(d) => {
                write!(f, "divisor {d} must be a positive quantity")
            }
            ResourceFieldError::NotAQuantity(resource) => write!(f, "{resource} is not a quantity"),
        }
    }
}

impl std::error::Error for ResourceFieldError {}

/// A `resourceFieldRef` value (env and downwardAPI volume items); the error is the reason,
/// for the caller to name its item.
pub(crate) fn resource_field_value(
    pod: &api::Pod,
    container: &api::Container,
    rf: &serde_json::Value,
    node: NodeParams<'_>,
) -> Result<String, ResourceFieldError> {
    resource_field_ref(pod, container, rf, node)
}

/// kubelet: `resource.ExtractContainerResourceValue` over the container's resources merged
/// with the node's allocatable (`MergeContainerResourceLimits`: a missing cpu or memory limit
/// is the node's). The value is divided by `divisor` (default 1, also when zero) and rounded up.
fn resource_field_ref(
    pod: &api::Pod,
    container: &api::Container,
    rf: &serde_json::Value,
    node: NodeParams<'_>,
) -> Result<String, ResourceFieldError> {
    let resource = rf.get("resource").and_then(|v| v.as_str()).unwrap_or("");
    let target = match rf.get("containerName").and_then(|v| v.as_str()) {
        None | Some("") => container,
        Some(name) => pod
            .spec
            .containers
            .iter()
            .chain(&pod.spec.init_containers)
            .find(|c| c.name == name)
            .ok_or_else(|| ResourceFieldError::NoContainer(name.to_string()))?,
    };
    let (which, name) = resource
        .split_once('.')
        .ok_or_else(|| ResourceFieldError::UnsupportedResource(resource.to_string()))?;
    // cpu in millicores, everything else in units.
    let scale = if name == "cpu" { 3 } else { 0 };
    let divisor = match rf.get("divisor") {
        None | Some(serde_json::Value::Null) => 10i64.pow(scale as u32),
        Some(d) => {
            let q: api::Quantity = api::from_value(d)
                .map_err(|_| ResourceFieldError::DivisorNotQuantity(d.clone()))?;
            match q.scaled(scale) {
                // kubelet: `ExtractContainerResourceValue` takes a zero divisor as 1 (a client
                // that leaves it unset sends the zero Quantity, "0": the e2e suite does).
                Some(0) => 10i64.pow(scale as u32),
                Some(v) => v,
                None => return Err(ResourceFieldError::DivisorNotPositive(d.clone())),
            }
        }
    };
    let res = target.resources.clone().unwrap_or_default();
    // `which.name` is the whole resource: its name in the error.
    let get = |map: &BTreeMap<String, api::Quantity>| -> Result<Option<i64>, ResourceFieldError> {
        map.get(name)
            .map(|q| {
                q.scaled(scale)
                    .ok_or_else(|| ResourceFieldError::NotAQuantity(resource.to_string()))
            })
            .transpose()
    };
    let value = match (which, name) {
        ("limits", "cpu") => get(&res.limits)?.unwrap_or(node.cpu_capacity_milli),
        ("limits", "memory") => {
            get(&res.limits)?.unwrap_or(i64::try_from(node.memory_capacity).unwrap_or(i64::MAX))
        }
        ("requests", "cpu" | "memory") => get(&res.requests)?.or(get(&res.limits)?).unwrap_or(0),
        ("limits" | "requests", "ephemeral-storage") => match which {
            "limits" => get(&res.limits)?.unwrap_or(0),
            _ => get(&res.requests)?.unwrap_or(0),
        },
        _ => {
            return Err(ResourceFieldError::UnsupportedResource(
                resource.to_string(),
            ));
        }
    };
    // ceil(value / divisor)
    let out = value / divisor + i64::from(value % divisor != 0);
    Ok(out.to_string())
}

/// Kubernetes variable expansion (kubelet: `third_party/forked/golang/expansion`):
/// `$(NAME)` is replaced when `lookup` knows NAME and kept verbatim otherwise; `$$` is an
/// escaped `$`; a `$` followed by anything else, or an unclosed `$(`, stays as written.
pub(crate) fn expand(input: &str, lookup: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        match after.chars().next() {
            Some('$') => {
                out.push('$');
                rest = &after[1..];
            }
            Some('(') => match after[1..].find(')') {
                Some(end) => {
                    let name = &after[1..1 + end];
                    match lookup(name) {
                        Some(v) => out.push_str(&v),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &after[1 + end + 1..];
                }
                None => {
                    out.push_str("$(");
                    rest = &after[1..];
                }
            },
            Some(c) => {
                out.push('$');
                out.push(c);
                rest = &after[c.len_utf8()..];
            }
            None => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}
