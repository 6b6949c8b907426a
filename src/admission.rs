//! Pod admission (kubelet: `canAdmitPod` with the admit handlers of
//! `lifecycle/predicate.go`): the checks a pod passes before anything of it is started.
//!
//! Owns: the pure [`admit`] decision for one pod, from the pod and the node's facts.
//! Checks: the sysctls of the pod's security context against the node's allowlist
//! (`SysctlForbidden`: the safe sysctls and `allowedUnsafeSysctls`), then the field
//! policy's refusals (`manifest::fields`, picolet's own: fields it
//! cannot honour), then the kubelet's general predicates in its order — resources
//! (`OutOfcpu`, `OutOfmemory`, `OutOfpods`: requests against the node's allocatable minus
//! what the admitted pods request), `spec.nodeName` (`NodeName`), host ports (`NodePorts`),
//! `nodeSelector` and the required node affinity terms against the node's labels and name
//! (`NodeAffinity`). A rejected pod is `Failed`
//! with the reason and message, as the kubelet's `rejectPod` does; the field policy's
//! warnings are returned for the caller to log once per pod.
//!
//! Must never: do I/O. Deliberately different from upstream: of `spec.affinity` only the
//! required node affinity terms are evaluated (pod affinity needs the scheduler's view), and a
//! critical pod (static, mirror, or system-critical priority) that does not fit is admitted
//! without evicting others (the kubelet preempts lower-priority pods to make room).

use std::collections::BTreeMap;

use crate::api::Pod;
use crate::manifest::fields::{self, Finding, Policy};

/// What admission reads of the node (kubelet: the admit handlers' `nodeInfo`; not the
/// machine facts of `node::status::NodeFacts`).
#[derive(Debug, Clone, Default)]
pub struct NodeInfo {
    pub node_name: String,
    /// `node::node_labels`: the defaults and `--node-labels`.
    pub labels: BTreeMap<String, String>,
    /// Allocatable cpu (millicores; 0: unknown, not checked), memory (bytes; 0: unknown),
    /// pods (`--max-pods`; 0: not checked). picolet reserves nothing, so allocatable is
    /// the capacity.
    pub cpu_milli: i64,
    pub memory_bytes: i64,
    pub max_pods: u32,
    /// The safe sysctls for the node's kernel and `allowedUnsafeSysctls`.
    pub sysctls: Sysctls,
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
pub(crate) const REASON_UNSUPPORTED: &str = "UnsupportedField";
/// kubelet: `NodeAffinity` predicate failure.
pub(crate) const REASON_NODE_AFFINITY: &str = "NodeAffinity";
/// kubelet: `PodOSNotSupported` (lifecycle/predicate.go), a pod whose `spec.os.name` is not
/// the node's.
pub(crate) const REASON_POD_OS: &str = "PodOSNotSupported";
/// kubelet: the `NodeName` plugin.
pub(crate) const REASON_NODE_NAME: &str = "NodeName";
/// kubelet: the `NodePorts` plugin ("node(s) didn't have free ports for the requested pod
/// ports").
pub(crate) const REASON_NODE_PORTS: &str = "NodePorts";

/// kubelet: `canAdmitPod`. `admitted`: the pods admitted before and still active (kubelet:
/// `filterOutInactivePods`), for resources and host ports.
pub fn admit(pod: &Pod, node: &NodeInfo, admitted: &[&Pod]) -> Admission {
    let findings = match serde_json::to_value(pod) {
        Ok(json) => fields::findings(&json),
        Err(_) => Vec::new(),
    };
    let (refused, warnings): (Vec<Finding>, Vec<Finding>) = findings
        .into_iter()
        .partition(|f| f.policy == Policy::Refused);
    // kubelet: predicate admission checks the pod's OS field first
    // (`rejectPodAdmissionBasedOnOSField`), before any resource or field.
    let os = pod.spec.os.as_ref().and_then(|o| o.get("name")?.as_str());
    // kubelet: the sysctl allowlist is an admit handler of its own, before the predicates.
    let rejection = if let Some(r) = node.sysctls.admit(pod) {
        Some(r)
    } else if os.is_some_and(|name| name != "linux") {
        Some(Rejection {
            reason: REASON_POD_OS,
            message: "Failed to admit pod as the OS field doesn't match node OS".into(),
        })
    } else if !refused.is_empty() {
        let list: Vec<String> = refused.iter().map(ToString::to_string).collect();
        Some(Rejection {
            reason: REASON_UNSUPPORTED,
            message: format!("picolet cannot run this pod: {}", list.join("; ")),
        })
    } else {
        general_predicates(pod, node, admitted)
    };
    Admission {
        rejection,
        warnings,
    }
}

/// kubelet: `generalFilter` — the first failing predicate.
fn general_predicates(pod: &Pod, node: &NodeInfo, admitted: &[&Pod]) -> Option<Rejection> {
    let others: Vec<&&Pod> = admitted.iter().filter(|p| p.uid() != pod.uid()).collect();
    if !crate::qos::is_critical(pod) {
        if let Some(r) = resources(pod, node, &others) {
            return Some(r);
        }
    }
    if !pod.spec.node_name.is_empty()
        && !node.node_name.is_empty()
        && pod.spec.node_name != node.node_name
    {
        return Some(Rejection {
            reason: REASON_NODE_NAME,
            message: format!(
                "Predicate NodeName failed: the pod is bound to node {:?}, this is {:?}",
                pod.spec.node_name, node.node_name
            ),
        });
    }
    let mine = host_ports(pod);
    for other in &others {
        for theirs in host_ports(other) {
            if let Some(p) = mine.iter().find(|p| p.conflicts(&theirs)) {
                return Some(Rejection {
                    reason: REASON_NODE_PORTS,
                    message: format!(
                        "Predicate NodePorts failed: host port {}/{} on {} is taken by pod {}",
                        p.port,
                        p.protocol,
                        if p.ip.is_empty() { "0.0.0.0" } else { &p.ip },
                        other.full_name()
                    ),
                });
            }
        }
    }
    if let Some(missing) = node_selector_mismatch(pod, node) {
        return Some(Rejection {
            reason: REASON_NODE_AFFINITY,
            message: format!(
                "Predicate NodeAffinity failed: the node's labels do not match spec.nodeSelector ({})",
                missing.join(", ")
            ),
        });
    }
    required_node_affinity(pod, node).err().map(|why| Rejection {
        reason: REASON_NODE_AFFINITY,
        message: format!(
            "Predicate NodeAffinity failed: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution: {why}"
        ),
    })
}

/// kubelet: the NodeAffinity plugin's required terms — `nodeSelectorTerms` are ORed, the
/// `matchExpressions` (In, NotIn, Exists, DoesNotExist, Gt, Lt on the node's labels) and
/// `matchFields` (`metadata.name`) of a term ANDed; an empty term list matches no node.
/// `Err` says why the node does not match (or what in the terms is malformed).
fn required_node_affinity(pod: &Pod, node: &NodeInfo) -> Result<(), AffinityError> {
    let Some(required) = pod
        .spec
        .affinity
        .as_ref()
        .and_then(|a| a.pointer("/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution"))
        .filter(|v| !v.is_null())
    else {
        return Ok(());
    };
    let terms = required
        .get("nodeSelectorTerms")
        .and_then(|t| t.as_array())
        .cloned()
        .unwrap_or_default();
    if terms.is_empty() {
        return Err(AffinityError::NoTerms);
    }
    let mut why = Vec::new();
    for term in &terms {
        match term_matches(term, node) {
            Ok(()) => return Ok(()),
            Err(e) => why.push(e),
        }
    }
    Err(AffinityError::NoTermMatches(why))
}

fn term_matches(term: &serde_json::Value, node: &NodeInfo) -> Result<(), TermError> {
    let list = |key: &str| {
        term.get(key)
            .and_then(|v| v.as_array())
            .cloned()
            .unwrap_or_default()
    };
    let (exprs, fields) = (list("matchExpressions"), list("matchFields"));
    if exprs.is_empty() && fields.is_empty() {
        return Err(TermError::Empty);
    }
    for e in &exprs {
        let key = e.get("key").and_then(|v| v.as_str()).unwrap_or("");
        requirement(e, node.labels.get(key).map(String::as_str)).map_err(|why| {
            TermError::Label {
                key: key.to_string(),
                why,
            }
        })?;
    }
    for f in &fields {
        let key = f.get("key").and_then(|v| v.as_str()).unwrap_or("");
        if key != "metadata.name" {
            return Err(TermError::UnsupportedField(key.to_string()));
        }
        requirement(f, Some(&node.node_name)).map_err(|why| TermError::Field {
            key: key.to_string(),
            why,
        })?;
    }
    Ok(())
}

/// One `NodeSelectorRequirement` against the node's value for its key.
fn requirement(r: &serde_json::Value, have: Option<&str>) -> Result<(), RequirementError> {
    let op = r.get("operator").and_then(|v| v.as_str()).unwrap_or("");
    let values: Vec<&str> = r
        .get("values")
        .and_then(|v| v.as_array())
        .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    let ok = match op {
        "In" => have.is_some_and(|h| values.contains(&h)),
        "NotIn" => !have.is_some_and(|h| values.contains(&h)),
        "Exists" => have.is_some(),
        "DoesNotExist" => have.is_none(),
        "Gt" | "Lt" => {
            let (Some(h), [v]) = (have.and_then(|h| h.parse::<i64>().ok()), values.as_slice())
            else {
                return Err(RequirementError::NeedsIntegers { op: op.to_string() });
            };
            let v: i64 = v.parse().map_err(|_| RequirementError::NotAnInteger {
                op: op.to_string(),
                value: v.to_string(),
            })?;
            if op == "Gt" { h > v } else { h < v }
        }
        other => return Err(RequirementError::UnknownOperator(other.to_string())),
    };
    if ok {
        Ok(())
    } else {
        Err(RequirementError::DoesNotHold {
            op: op.to_string(),
            values: values.iter().map(|v| v.to_string()).collect(),
            have: have.map(str::to_string),
        })
    }
}

/// Why the node does not satisfy the pod's required node affinity (or what in its terms is
/// malformed): the text of the `NodeAffinity` rejection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AffinityError {
    /// `nodeSelectorTerms` is empty.
    NoTerms,
    /// No term matches: why each one fails, in order.
    NoTermMatches(Vec<TermError>),
}

/// Why one `NodeSelectorTerm` does not match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TermError {
    /// Neither `matchExpressions` nor `matchFields`.
    Empty,
    /// A `matchFields` key other than `metadata.name`.
    UnsupportedField(String),
    /// The requirement on the label `key` fails.
    Label { key: String, why: RequirementError },
    /// The requirement on the field `key` fails.
    Field { key: String, why: RequirementError },
}

/// Why one `NodeSelectorRequirement` does not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RequirementError {
    /// `Gt`/`Lt` without one integer value and an integer label.
    NeedsIntegers {
        op: String,
    },
    NotAnInteger {
        op: String,
        value: String,
    },
    UnknownOperator(String),
    /// The node's value (`have`) fails the operator.
    DoesNotHold {
        op: String,
        values: Vec<String>,
        have: Option<String>,
    },
}

impl std::fmt::Display for AffinityError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AffinityError::NoTerms => f.write_str("no nodeSelectorTerms: no node matches"),
            AffinityError::NoTermMatches(why) => {
                for (i, e) in why.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    write!(f, "nodeSelectorTerms[{i}]: {e}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::fmt::Display for TermError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TermError::Empty => f.write_str("an empty term matches no node"),
            TermError::UnsupportedField(key) => write!(
                f,
                "matchFields key {key:?} is not supported (only metadata.name)"
            ),
            TermError::Label { key, why } => write!(f, "label {key:?}: {why}"),
            TermError::Field { key, why } => write!(f, "field {key}: {why}"),
        }
    }
}

impl std::fmt::Display for RequirementError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequirementError::NeedsIntegers { op } => {
                write!(f, "{op} needs one integer value and an integer label")
            }
            RequirementError::NotAnInteger { op, value } => {
                write!(f, "{op} value {value:?} is not an integer")
            }
            RequirementError::UnknownOperator(op) => write!(f, "unknown operator {op:?}"),
            RequirementError::DoesNotHold { op, values, have } => {
                write!(f, "{op} {values:?} does not hold (node has {have:?})")
            }
        }
    }
}

impl std::error::Error for AffinityError {}
impl std::error::Error for TermError {}
impl std::error::Error for RequirementError {}

/// kubelet: the `NodeResourcesFit` check — pods, cpu and memory requests.
fn resources(pod: &Pod, node: &NodeInfo, others: &[&&Pod]) -> Option<Rejection> {
    let insufficient = |resource: &str, what: String| Rejection {
        reason: match resource {
            "cpu" => "OutOfcpu",
            "memory" => "OutOfmemory",
            _ => "OutOfpods",
        },
        message: format!("Node didn't have enough resource: {resource}, {what}"),
    };
    if node.max_pods > 0 && others.len() >= node.max_pods as usize {
        return Some(insufficient(
            "pods",
            format!(
                "requested: 1, used: {}, capacity: {}",
                others.len(),
                node.max_pods
            ),
        ));
    }
    let (cpu, mem) = pod_requests(pod);
    let (used_cpu, used_mem) = others.iter().fold((0i64, 0i64), |(c, m), p| {
        let (pc, pm) = pod_requests(p);
        (c.saturating_add(pc), m.saturating_add(pm))
    });
    if node.cpu_milli > 0 && cpu > 0 && used_cpu.saturating_add(cpu) > node.cpu_milli {
        return Some(insufficient(
            "cpu",
            format!(
                "requested: {cpu}m, used: {used_cpu}m, capacity: {}m",
                node.cpu_milli
            ),
        ));
    }
    if node.memory_bytes > 0 && mem > 0 && used_mem.saturating_add(mem) > node.memory_bytes {
        return Some(insufficient(
            "memory",
            format!(
                "requested: {mem}, used: {used_mem}, capacity: {}",
                node.memory_bytes
            ),
        ));
    }
    None
}

/// kubelet: `PodRequests` — the pod-level requests when set, else the sum over regular
/// containers and sidecars, or the largest init container's if that is more; a request left
/// out is its limit (API defaulting). (cpu millicores, memory bytes)
pub(crate) fn pod_requests(pod: &Pod) -> (i64, i64) {
    (
        crate::qos::pod_request(pod, "cpu"),
        crate::qos::pod_request(pod, "memory"),
    )
}

/// One host port a pod asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
struct HostPort {
    protocol: String,
    /// "" or 0.0.0.0: every address.
    ip: String,
    port: i32,
}

impl HostPort {
    /// kubelet `HostPortInfo`: same protocol and port, and the same address or a wildcard.
    fn conflicts(&self, other: &HostPort) -> bool {
        let wild = |ip: &str| ip.is_empty() || ip == "0.0.0.0" || ip == "::";
        self.protocol == other.protocol
            && self.port == other.port
            && (wild(&self.ip) || wild(&other.ip) || self.ip == other.ip)
    }
}

fn host_ports(pod: &Pod) -> Vec<HostPort> {
    pod.spec
        .containers
        .iter()
        .chain(&pod.spec.init_containers)
        .flat_map(|c| &c.ports)
        .filter_map(|p| {
            let port = p
                .host_port
                .filter(|h| *h > 0)
                .or_else(|| pod.spec.host_network.then_some(p.container_port))?;
            Some(HostPort {
                protocol: p.protocol.clone().unwrap_or_else(|| "TCP".to_string()),
                ip: p.host_ip.clone().unwrap_or_default(),
                port,
            })
        })
        .collect()
}

/// The `nodeSelector` entries the node's labels do not satisfy (`key=value`, or
/// `key=value (node has other)`).
fn node_selector_mismatch(pod: &Pod, node: &NodeInfo) -> Option<Vec<String>> {
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

// ---------------------------------------------------------------------------------------
// Sysctls (kubelet: `sysctl.patternAllowlist`, the admit handler before the predicates)

/// kubelet: `sysctl.ForbiddenReason`.
pub(crate) const REASON_SYSCTL_FORBIDDEN: &str = "SysctlForbidden";

/// The kernel namespace a sysctl belongs to (kubelet: component-helpers' `sysctl.Namespace`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SysctlNamespace {
    Ipc,
    Net,
}

impl SysctlNamespace {
    fn as_str(self) -> &'static str {
        match self {
            SysctlNamespace::Ipc => "IPC",
            SysctlNamespace::Net => "Net",
        }
    }
}

/// kubelet: `SafeSysctlAllowlist` — namespaced and isolated; the last three only on the
/// kernels that namespace them (3.16, 4.15, 4.15).
pub(crate) fn safe_sysctls(kernel: Option<(u32, u32)>) -> Vec<&'static str> {
    let mut out = vec![
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
    ];
    for (name, since) in [
        ("net.ipv4.ip_local_reserved_ports", (3, 16)),
        ("net.ipv4.tcp_rmem", (4, 15)),
        ("net.ipv4.tcp_wmem", (4, 15)),
    ] {
        if kernel.is_some_and(|k| k >= since) {
            out.push(name);
        }
    }
    out
}

/// The kernel's `major.minor` from `uname -r` text (`6.1.0-27-arm64` → (6, 1)).
pub(crate) fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.trim().split(['.', '-']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// kubelet: `namespaceOf`.
fn sysctl_namespace(name: &str) -> Option<SysctlNamespace> {
    const IPC_NAMES: [&str; 10] = [
        "kernel.sem",
        "kernel.shmall",
        "kernel.shmmax",
        "kernel.shmmni",
        "kernel.shm_rmid_forced",
        "kernel.shm",
        "kernel.msgmax",
        "kernel.msgmnb",
        "kernel.msgmni",
        "kernel.msg",
    ];
    if IPC_NAMES.contains(&name) {
        Some(SysctlNamespace::Ipc)
    } else if name.starts_with("net.") {
        Some(SysctlNamespace::Net)
    } else if name.starts_with("fs.mqueue.") {
        Some(SysctlNamespace::Ipc)
    } else {
        None
    }
}

/// A sysctl the allowlist refuses, or an allowlist entry the kubelet refuses to start with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SysctlError {
    /// An allowlist entry (name or prefix) not known to be namespaced.
    NotNamespaced(String),
    /// A pod's sysctl not on the allowlist.
    NotAllowlisted(String),
    /// A pod's sysctl of a namespace the pod shares with the host.
    HostNamespace(String, SysctlNamespace),
}

impl std::fmt::Display for SysctlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SysctlError::NotNamespaced(name) => {
                write!(f, "the sysctls {name:?} are not known to be namespaced")
            }
            SysctlError::NotAllowlisted(name) => write!(f, "{name:?} not allowlisted"),
            SysctlError::HostNamespace(name, ns) => {
                write!(f, "{name:?} not allowed with host {} enabled", ns.as_str())
            }
        }
    }
}

impl std::error::Error for SysctlError {}

/// The node's sysctl allowlist: the safe sysctls and `allowedUnsafeSysctls` (names, or
/// prefixes ending in `*`), each known to be namespaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sysctls {
    names: BTreeMap<String, SysctlNamespace>,
    prefixes: Vec<(String, SysctlNamespace)>,
}

impl Default for Sysctls {
    /// The safe sysctls of an old kernel (no admin's list).
    fn default() -> Self {
        Sysctls::new(&safe_sysctls(None)).unwrap_or(Sysctls {
            names: BTreeMap::new(),
            prefixes: Vec::new(),
        })
    }
}

impl Sysctls {
    /// kubelet: `NewAllowlist`; an entry not known to be namespaced is an error (the
    /// kubelet refuses to start).
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Result<Sysctls, SysctlError> {
        let mut out = Sysctls {
            names: BTreeMap::new(),
            prefixes: Vec::new(),
        };
        for p in patterns {
            let p = crate::api::sysctl_dots(p.as_ref());
            let (name, prefixed) = match p.find('*') {
                Some(i) => (p[..i].to_string(), true),
                None => (p.clone(), false),
            };
            let Some(ns) = sysctl_namespace(&name) else {
                return Err(SysctlError::NotNamespaced(name));
            };
            if prefixed {
                out.prefixes.push((name, ns));
            } else {
                out.names.insert(name, ns);
            }
        }
        Ok(out)
    }

    /// kubelet: `validateSysctl`.
    fn validate(&self, name: &str, host_net: bool, host_ipc: bool) -> Result<(), SysctlError> {
        let name = crate::api::sysctl_dots(name);
        let ns = self.names.get(&name).copied().or_else(|| {
            self.prefixes
                .iter()
                .find(|(p, _)| name.starts_with(p.as_str()))
                .map(|(_, ns)| *ns)
        });
        match ns {
            None => Err(SysctlError::NotAllowlisted(name)),
            Some(ns @ SysctlNamespace::Ipc) if host_ipc => {
                Err(SysctlError::HostNamespace(name, ns))
            }
            Some(ns @ SysctlNamespace::Net) if host_net => {
                Err(SysctlError::HostNamespace(name, ns))
            }
            Some(_) => Ok(()),
        }
    }

    /// kubelet: the allowlist's `Admit`: every sysctl of the pod's security context.
    pub fn admit(&self, pod: &Pod) -> Option<Rejection> {
        let sc = pod.spec.security_context.as_ref()?;
        for s in &sc.sysctls {
            if let Err(e) = self.validate(&s.name, pod.spec.host_network, pod.spec.host_ipc) {
                return Some(Rejection {
                    reason: REASON_SYSCTL_FORBIDDEN,
                    message: format!("forbidden sysctl: {e}"),
                });
            }
        }
        None
    }
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

    fn node() -> NodeInfo {
        NodeInfo {
            node_name: "edge-1".into(),
            labels: crate::node::node_labels(
                "edge-1",
                &BTreeMap::from([("zone".into(), "garage".into())]),
            ),
            cpu_milli: 4000,
            memory_bytes: 1 << 30,
            max_pods: 3,
            sysctls: Sysctls::default(),
        }
    }

    #[test]
    fn sysctls_table() {
        let safe = Sysctls::new(&safe_sysctls(kernel_version("6.1.0-27-arm64"))).unwrap();
        let mut all = safe_sysctls(Some((6, 1)));
        all.extend(["net.core.somaxconn", "kernel.msg*", "fs.mqueue.*"]);
        let admin = Sysctls::new(&all).unwrap();
        // (name, sysctl, host network, host ipc, allowlist, want message)
        type Row<'a> = (&'a str, &'a str, bool, bool, &'a Sysctls, Option<&'a str>);
        let rows: &[Row] = &[
            (
                "a safe one",
                "net.ipv4.ip_local_port_range",
                false,
                false,
                &safe,
                None,
            ),
            (
                "slash spelling",
                "net/ipv4/ip_local_port_range",
                false,
                false,
                &safe,
                None,
            ),
            (
                "kernel-gated, 6.1",
                "net.ipv4.tcp_rmem",
                false,
                false,
                &safe,
                None,
            ),
            (
                "unsafe, not allowed",
                "kernel.msgmax",
                false,
                false,
                &safe,
                Some("forbidden sysctl: \"kernel.msgmax\" not allowlisted"),
            ),
            (
                "allowed by the admin's prefix",
                "kernel.msgmax",
                false,
                false,
                &admin,
                None,
            ),
            (
                "allowed by name",
                "net.core.somaxconn",
                false,
                false,
                &admin,
                None,
            ),
            (
                "net with host network",
                "net.ipv4.tcp_syncookies",
                true,
                false,
                &safe,
                Some(
                    "forbidden sysctl: \"net.ipv4.tcp_syncookies\" not allowed with host Net enabled",
                ),
            ),
            (
                "ipc with host ipc",
                "kernel.shm_rmid_forced",
                false,
                true,
                &safe,
                Some(
                    "forbidden sysctl: \"kernel.shm_rmid_forced\" not allowed with host IPC enabled",
                ),
            ),
            (
                "ipc with host network",
                "kernel.shm_rmid_forced",
                true,
                false,
                &safe,
                None,
            ),
            (
                "not namespaced at all",
                "vm.swappiness",
                false,
                false,
                &admin,
                Some("forbidden sysctl: \"vm.swappiness\" not allowlisted"),
            ),
        ];
        for (name, sysctl, host_net, host_ipc, list, want) in rows {
            let mut p = pod();
            p.spec.host_network = *host_net;
            p.spec.host_ipc = *host_ipc;
            p.spec.security_context = Some(crate::api::PodSecurityContext {
                sysctls: vec![crate::api::Sysctl {
                    name: (*sysctl).into(),
                    value: "1".into(),
                }],
                ..Default::default()
            });
            let node = NodeInfo {
                sysctls: (*list).clone(),
                ..node()
            };
            let got = admit(&p, &node, &[]).rejection;
            assert_eq!(
                got.as_ref().map(|r| (r.reason, r.message.as_str())),
                want.map(|m| (REASON_SYSCTL_FORBIDDEN, m)),
                "{name}"
            );
        }
        // Old kernels: the gated ones are unsafe there.
        assert!(
            !safe_sysctls(kernel_version("3.10.0")).contains(&"net.ipv4.ip_local_reserved_ports")
        );
        assert!(
            safe_sysctls(kernel_version("4.14.1")).contains(&"net.ipv4.ip_local_reserved_ports")
        );
        assert!(!safe_sysctls(kernel_version("4.14.1")).contains(&"net.ipv4.tcp_wmem"));
        // The admin's list must be namespaced (the kubelet refuses to start otherwise).
        assert_eq!(
            Sysctls::new(&["vm.swappiness"]).unwrap_err().to_string(),
            "the sysctls \"vm.swappiness\" are not known to be namespaced"
        );
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
                |p| {
                    p.spec.containers[0].volume_devices =
                        Some(serde_json::json!([{"name": "v", "devicePath": "/dev/x"}]))
                },
                Some((REASON_UNSUPPORTED, "spec.containers[0].volumeDevices")),
                0,
            ),
            (
                // Conformance: "PodOSRejection ... should reject pod when the node OS doesn't
                // match pod's OS" (the kubelet's reason, not the refused field's).
                "another OS",
                |p| p.spec.os = Some(serde_json::json!({"name": "windows"})),
                Some((REASON_POD_OS, "OS field doesn't match node OS")),
                0,
            ),
            (
                "linux OS",
                |p| p.spec.os = Some(serde_json::json!({"name": "linux"})),
                None,
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
                |p| {
                    p.spec.containers[0].lifecycle = Some(Box::new(crate::api::Lifecycle {
                        stop_signal: Some(serde_json::json!("SIGUSR1")),
                        ..Default::default()
                    }))
                },
                None,
                1,
            ),
        ];
        for (name, edit, want, warnings) in rows {
            let mut p = pod();
            edit(&mut p);
            let got = admit(&p, &node(), &[]);
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

    fn with_resources(name: &str, cpu: &str, mem: &str) -> Pod {
        let mut p = pod();
        p.metadata.name = name.into();
        p.metadata.uid = format!("uid-{name}");
        p.spec.containers[0].resources = Some(crate::api::ResourceRequirements {
            requests: [
                ("cpu".into(), crate::api::Quantity::Str(cpu.into())),
                ("memory".into(), crate::api::Quantity::Str(mem.into())),
            ]
            .into(),
            ..Default::default()
        });
        p
    }

    fn with_port(name: &str, port: i32, ip: Option<&str>, protocol: Option<&str>) -> Pod {
        let mut p = pod();
        p.metadata.name = name.into();
        p.metadata.uid = format!("uid-{name}");
        p.spec.containers[0].ports = vec![crate::api::ContainerPort {
            container_port: 80,
            host_port: Some(port),
            host_ip: ip.map(Into::into),
            protocol: protocol.map(Into::into),
            ..Default::default()
        }];
        p
    }

    fn reason(p: &Pod, admitted: &[&Pod]) -> Option<&'static str> {
        admit(p, &node(), admitted).rejection.map(|r| r.reason)
    }

    #[test]
    fn resources_against_the_admitted_pods() {
        let a = with_resources("a", "3", "512Mi");
        let b = with_resources("b", "1", "256Mi");
        assert_eq!(reason(&b, &[&a]), None, "3 + 1 cpus fit 4");
        let c = with_resources("c", "500m", "64Mi");
        assert_eq!(reason(&c, &[&a, &b]), Some("OutOfcpu"));
        let d = with_resources("d", "0", "512Mi");
        assert_eq!(reason(&d, &[&a, &b]), Some("OutOfmemory"));
        let e = pod();
        assert_eq!(reason(&e, &[&a, &b, &c]), Some("OutOfpods"), "max 3 pods");
        assert_eq!(
            reason(&a, &[&a]),
            None,
            "a pod does not count against itself"
        );
        // A critical pod (here: static) is admitted anyway.
        let mut s = with_resources("s", "1", "64Mi");
        s.metadata
            .annotations
            .insert("kubernetes.io/config.source".into(), "file".into());
        assert_eq!(reason(&s, &[&a, &b]), None);
        let msg = admit(&c, &node(), &[&a, &b]).rejection.unwrap().message;
        assert!(
            msg.contains("requested: 500m, used: 4000m, capacity: 4000m"),
            "{msg}"
        );
    }

    #[test]
    fn init_containers_count_at_their_largest() {
        let mut p = with_resources("p", "500m", "100Mi");
        let mut init = p.spec.containers[0].clone();
        init.name = "init".into();
        init.resources = with_resources("x", "2", "10Mi").spec.containers[0]
            .resources
            .clone();
        p.spec.init_containers = vec![init.clone()];
        assert_eq!(pod_requests(&p), (2000, 100 << 20));
        init.restart_policy = Some(crate::api::RestartPolicy::Always);
        p.spec.init_containers = vec![init];
        assert_eq!(pod_requests(&p), (2500, 110 << 20), "a sidecar adds up");
    }

    #[test]
    fn host_ports_conflict_on_protocol_port_and_address() {
        let web = with_port("web", 8080, None, None);
        assert_eq!(
            reason(&with_port("x", 8080, None, None), &[&web]),
            Some("NodePorts")
        );
        assert_eq!(
            reason(&with_port("x", 8080, Some("127.0.0.1"), None), &[&web]),
            Some("NodePorts")
        );
        assert_eq!(
            reason(&with_port("x", 8080, None, Some("UDP")), &[&web]),
            None
        );
        assert_eq!(reason(&with_port("x", 8081, None, None), &[&web]), None);
        let lo = with_port("lo", 9000, Some("127.0.0.1"), None);
        assert_eq!(
            reason(&with_port("x", 9000, Some("10.0.0.2"), None), &[&lo]),
            None
        );
        let msg = admit(&with_port("x", 8080, None, None), &node(), &[&web])
            .rejection
            .unwrap()
            .message;
        assert!(msg.contains("8080/TCP") && msg.contains("web"), "{msg}");
    }

    #[test]
    fn a_pod_bound_to_another_node_is_refused() {
        let mut p = pod();
        p.spec.node_name = "edge-2".into();
        assert_eq!(reason(&p, &[]), Some("NodeName"));
        p.spec.node_name = "edge-1".into();
        assert_eq!(reason(&p, &[]), None);
    }

    #[test]
    fn required_node_affinity_terms() {
        use serde_json::json;
        let with = |terms: serde_json::Value| {
            let mut p = pod();
            p.spec.affinity = Some(json!({"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms},
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {}}]
            }}));
            p
        };
        let expr = |key: &str, op: &str, values: &[&str]| json!({"key": key, "operator": op, "values": values});
        let rows = vec![
            (
                json!([{"matchExpressions": [expr("kubernetes.io/arch", "In", &["riscv64", crate::node::go_arch()])]}]),
                true,
            ),
            (
                json!([{"matchExpressions": [expr("zone", "NotIn", &["attic"])]}]),
                true,
            ),
            (
                json!([{"matchExpressions": [expr("zone", "In", &["attic"])]}]),
                false,
            ),
            (
                json!([{"matchExpressions": [expr("gpu", "Exists", &[])]}]),
                false,
            ),
            (
                json!([{"matchExpressions": [expr("gpu", "DoesNotExist", &[])]}]),
                true,
            ),
            // ORed terms: the second matches
            (
                json!([{"matchExpressions": [expr("gpu", "Exists", &[])]},
                    {"matchExpressions": [expr("zone", "In", &["garage"])]}]),
                true,
            ),
            // ANDed expressions: one fails
            (
                json!([{"matchExpressions": [expr("zone", "In", &["garage"]), expr("gpu", "Exists", &[])]}]),
                false,
            ),
            // a DaemonSet pod's matchFields on the node name
            (
                json!([{"matchFields": [expr("metadata.name", "In", &["edge-1"])]}]),
                true,
            ),
            (
                json!([{"matchFields": [expr("metadata.name", "In", &["edge-2"])]}]),
                false,
            ),
            (json!([]), false),
            (json!([{}]), false),
            (
                json!([{"matchExpressions": [expr("zone", "Like", &["g*"])]}]),
                false,
            ),
        ];
        for (i, (terms, admitted)) in rows.into_iter().enumerate() {
            let got = admit(&with(terms), &node(), &[]).rejection;
            assert_eq!(got.is_none(), admitted, "row {i}: {got:?}");
            if let Some(r) = got {
                assert_eq!(r.reason, REASON_NODE_AFFINITY, "row {i}");
            }
        }
        // Gt/Lt on an integer label
        let mut n = node();
        n.labels.insert("cores".into(), "4".into());
        let p = with(json!([{"matchExpressions": [expr("cores", "Gt", &["2"])]}]));
        assert!(admit(&p, &n, &[]).rejection.is_none());
        let p = with(json!([{"matchExpressions": [expr("cores", "Lt", &["2"])]}]));
        assert!(admit(&p, &n, &[]).rejection.is_some());
    }
}
