//! Building CRI configs from a pod (kubelet: `generatePodSandboxConfig`,
//! `generateContainerConfig`, `makeEnvironmentVariables`, `expansion.Expand`, `GetPodDNS`,
//! `milliCPUToShares` / `milliCPUToQuota`, `determineEffectiveSecurityContext`).
//!
//! Owns: the pure translation `api::Pod` → `SandboxConfig` / `ContainerConfig`: labels,
//! hostname, DNS, port mappings, namespace options, environment (with `$(VAR)` expansion
//! and `fieldRef`s), command/args expansion, resources (quantity parsing), security
//! context, image name defaulting and pull policy.
//!
//! Must never: do I/O. The host's resolv.conf text, the pod IP and the prepared mounts are
//! passed in by `sync.rs`; filesystem work for volumes lives in `mounts.rs`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::api::{self, PullPolicy, sysctl_dots};
use crate::config_data::{self, Kind, ObjectKey, Scope};
use crate::cri::{
    ContainerConfig, ContainerSecurity, DnsConfig, ImageUser, Mount, NamespaceMode,
    NamespaceOptions, PortMapping, ProfileKind, Protocol, Resources, SandboxConfig,
    SecurityProfile,
};
pub use crate::fieldpath::NodeParams;
pub(crate) use crate::fieldpath::{expand, metadata_subscript};
use crate::kuberuntime::labels;

/// Why a container config cannot be built: the container waits with
/// `CreateContainerConfigError` (or `InvalidImageName`) and this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("env {env:?}: valueFrom.{source_kind} is not supported by picolet")]
    EnvSourceUnsupported { env: String, source_kind: String },
    #[error("env {env:?}: fieldRef {path:?} is not supported by picolet")]
    EnvFieldPathUnsupported { env: String, path: String },
    #[error("env {env:?}: resourceFieldRef: {message}")]
    EnvResourceFieldRef { env: String, message: String },
    #[error("env {env:?}: valueFrom has no usable source")]
    EnvValueFromInvalid { env: String },
    /// A referenced ConfigMap or Secret, or one of its keys, is missing (upstream's messages:
    /// `configmap "x" not found`, `couldn't find key k in Secret ns/x`).
    #[error("{0}")]
    ConfigData(String),
    #[error("resources.{field}: invalid quantity {value:?}")]
    InvalidQuantity { field: String, value: String },
    /// kubelet: verifyRunAsNonRoot's messages; `pod` is `name_namespace(uid)`.
    #[error("container's runAsUser breaks non-root policy (pod: {pod:?}, container: {container})")]
    RunAsNonRootUid0 { pod: String, container: String },
    #[error(
        "container has runAsNonRoot and image will run as root (pod: {pod:?}, container: {container})"
    )]
    RunAsNonRootImageRoot { pod: String, container: String },
    #[error(
        "container has runAsNonRoot and image has non-numeric user ({user}), cannot verify user is non-root (pod: {pod:?}, container: {container})"
    )]
    RunAsNonRootUnverifiable {
        pod: String,
        container: String,
        user: String,
    },
    #[error("invalid image name {image:?}: {reason}")]
    InvalidImageName { image: String, reason: &'static str },
    #[error("{field}: {message}")]
    SecurityProfile { field: String, message: String },
}

// ---------------------------------------------------------------------------------------
// Sandbox

/// Inputs of the sandbox config that are not in the pod.
#[derive(Debug, Clone, Copy)]
pub struct SandboxParams<'a> {
    /// `--pod-log-dir` root, e.g. `/var/log/pods`.
    pub pod_log_dir: &'a Path,
    /// "" = the runtime's default.
    pub cgroup_parent: &'a str,
    /// The host's DNS (parsed resolv.conf) for `Default`-like policies; `None` when it
    /// could not be read (the runtime then applies its own default).
    pub host_dns: Option<&'a DnsConfig>,
    pub node: NodeParams<'a>,
}

/// kubelet: `generatePodSandboxConfig`.
pub fn sandbox_config(pod: &api::Pod, attempt: u32, p: SandboxParams<'_>) -> SandboxConfig {
    SandboxConfig {
        name: pod.metadata.name.clone(),
        namespace: pod.metadata.namespace.clone(),
        uid: pod.metadata.uid.clone(),
        attempt,
        hostname: if pod.spec.host_network {
            // containerd refuses a hostname without a private UTS namespace
            String::new()
        } else {
            pod_hostname(pod)
        },
        log_directory: pod_log_directory(p.pod_log_dir, pod)
            .to_string_lossy()
            .into_owned(),
        dns: pod_dns(pod, p.host_dns),
        port_mappings: port_mappings(pod),
        labels: labels::sandbox_labels(pod),
        annotations: labels::sandbox_annotations(pod),
        cgroup_parent: p.cgroup_parent.to_string(),
        namespace_options: namespace_options(pod),
        privileged: pod
            .spec
            .init_containers
            .iter()
            .chain(&pod.spec.containers)
            .any(is_privileged),
        sysctls: crate::sort::collect_map(
            pod.spec
                .security_context
                .iter()
                .flat_map(|sc| &sc.sysctls)
                .map(|s| (sysctl_dots(&s.name), s.value.clone())),
        ),
        // An invalid pod-level profile fails each container's config with its message; the
        // sandbox then runs with the safe default.
        seccomp: seccomp_profile(pod, None, p.node).unwrap_or(SecurityProfile {
            kind: ProfileKind::RuntimeDefault,
            localhost_ref: String::new(),
        }),
        // kubelet: the RuntimeClass object's `handler`. picolet has no RuntimeClass objects
        // (offline there is no apiserver to hold them): the class name is the handler, the
        // convention of every RuntimeClass an edge runtime ships (nvidia, kata, crun, gvisor).
        runtime_handler: pod.spec.runtime_class_name.clone().unwrap_or_default(),
    }
}

/// `<pod_log_dir>/<namespace>_<name>_<uid>` (kubelet: `BuildPodLogsDirectory`).
pub(crate) fn pod_log_directory(pod_log_dir: &Path, pod: &api::Pod) -> PathBuf {
    pod_log_dir.join(format!(
        "{}_{}_{}",
        pod.metadata.namespace, pod.metadata.name, pod.metadata.uid
    ))
}

/// `<container>/<restartCount>.log`, relative to the pod log directory (kubelet:
/// `buildContainerLogsPath`).
pub(crate) fn container_log_path(container: &str, restart_count: u32) -> String {
    format!("{container}/{restart_count}.log")
}

/// `spec.hostnameOverride`, else `spec.hostname`, else the pod name, cut to 63 characters
/// without a trailing `-`/`.` (kubelet: `GeneratePodHostNameAndDomain`,
/// `truncatePodHostnameIfNeeded`; the apiserver validates the override as a DNS subdomain
/// and refuses it beside hostNetwork or setHostnameAsFQDN).
pub(crate) fn pod_hostname(pod: &api::Pod) -> String {
    let name = match (
        pod.spec.hostname_override.as_deref(),
        pod.spec.hostname.as_deref(),
    ) {
        (Some(o), _) if !o.is_empty() => o,
        (_, Some(h)) if !h.is_empty() => h,
        _ => &pod.metadata.name,
    };
    if name.len() <= 63 {
        return name.to_string();
    }
    let cut: String = name.chars().take(63).collect();
    cut.trim_end_matches(['-', '.']).to_string()
}

/// The pod's namespace modes (kubelet: `NamespacesForPod`): network/IPC per host flag,
/// PID private to each container unless shared (`shareProcessNamespace`) or the host's.
/// Containers must carry the same options, or containerd makes the pause process PID 1 of
/// every container.
pub(crate) fn namespace_options(pod: &api::Pod) -> NamespaceOptions {
    NamespaceOptions {
        network: if pod.spec.host_network {
            NamespaceMode::Node
        } else {
            NamespaceMode::Pod
        },
        pid: if pod.spec.host_pid {
            NamespaceMode::Node
        } else if pod.spec.share_process_namespace == Some(true) {
            NamespaceMode::Pod
        } else {
            NamespaceMode::Container
        },
        ipc: if pod.spec.host_ipc {
            NamespaceMode::Node
        } else {
            NamespaceMode::Pod
        },
        // The pod's user namespace is the sync's to add: its IDs are allocated on disk
        // (`kuberuntime::userns`).
        userns: None,
    }
}

/// Port mappings for every container port that asks for a host port.
pub(crate) fn port_mappings(pod: &api::Pod) -> Vec<PortMapping> {
    pod.spec
        .containers
        .iter()
        .flat_map(|c| &c.ports)
        .filter(|p| p.host_port.is_some_and(|hp| hp > 0))
        .map(|p| PortMapping {
            protocol: match p.protocol.as_deref() {
                Some("UDP") => Protocol::Udp,
                Some("SCTP") => Protocol::Sctp,
                _ => Protocol::Tcp,
            },
            container_port: p.container_port,
            host_port: p.host_port.unwrap_or(0),
            host_ip: p.host_ip.clone().unwrap_or_default(),
        })
        .collect()
}

fn is_privileged(c: &api::Container) -> bool {
    c.security_context
        .as_ref()
        .and_then(|sc| sc.privileged)
        .unwrap_or(false)
}

// ---------------------------------------------------------------------------------------
// DNS

/// kubelet: `MaxDNSNameservers`, `MaxDNSSearchPaths`.
const MAX_NAMESERVERS: usize = 3;
const MAX_SEARCHES: usize = 32;

/// Parse resolv.conf text: `nameserver` lines accumulate, the last `search` line wins,
/// `options` accumulate (kubelet: `parseResolvConf`).
pub fn parse_resolv_conf(text: &str) -> DnsConfig {
    let mut dns = DnsConfig::default();
    for line in text.lines() {
        let line = line.split(['#', ';']).next().unwrap_or("");
        let mut fields = line.split_whitespace();
        match fields.next() {
            Some("nameserver") => dns.servers.extend(fields.next().map(str::to_string)),
            Some("search") => dns.searches = fields.map(str::to_string).collect(),
            Some("options") => dns.options = merge_options(&dns.options, fields),
            _ => {}
        }
    }
    dns
}

/// The pod's DNS (kubelet: `GetPodDNS`). picolet has no cluster DNS, so `ClusterFirst`
/// and `ClusterFirstWithHostNet` fall back to `Default` (the host's resolv.conf), as the
/// kubelet does without `--cluster-dns`; `None` uses only `spec.dnsConfig`, which is
/// merged on top for every other policy. `None` (no DNS config in the request) only when
/// the host's DNS is unknown and the pod adds nothing: containerd then copies the host's
/// resolv.conf itself.
pub(crate) fn pod_dns(pod: &api::Pod, host: Option<&DnsConfig>) -> Option<DnsConfig> {
    let policy = pod.spec.dns_policy.as_deref().unwrap_or("ClusterFirst");
    let base = match policy {
        "None" => Some(DnsConfig::default()),
        "Default" | "ClusterFirst" | "ClusterFirstWithHostNet" => host.cloned(),
        other => {
            log::warn!(
                "pod {}: unknown dnsPolicy {other:?}, using the host's DNS",
                pod.full_name()
            );
            host.cloned()
        }
    };
    let mut dns = match (base, &pod.spec.dns_config) {
        (Some(d), _) => d,
        (None, Some(_)) => DnsConfig::default(),
        (None, None) => return None,
    };
    if let Some(extra) = &pod.spec.dns_config {
        dns.servers = dedup(dns.servers.iter().chain(&extra.nameservers));
        dns.searches = dedup(dns.searches.iter().chain(&extra.searches));
        let opts: Vec<String> = extra
            .options
            .iter()
            .map(|o| match &o.value {
                Some(v) => format!("{}:{v}", o.name),
                None => o.name.clone(),
            })
            .collect();
        dns.options = merge_options(&dns.options, opts.iter().map(String::as_str));
    }
    if dns.servers.len() > MAX_NAMESERVERS {
        log::warn!(
            "pod {}: {} nameservers, only the first {MAX_NAMESERVERS} are used",
            pod.full_name(),
            dns.servers.len()
        );
        dns.servers.truncate(MAX_NAMESERVERS);
    }
    dns.searches.truncate(MAX_SEARCHES);
    Some(dns)
}

fn dedup<'a>(items: impl Iterator<Item = &'a String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for i in items {
        if !out.contains(i) {
            out.push(i.clone());
        }
    }
    out
}

/// Options by name (`ndots:5` → `ndots`); a later one replaces an earlier one in place.
fn merge_options<'a>(base: &[String], more: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut out = base.to_vec();
    for o in more {
        let name = o.split(':').next().unwrap_or(o);
        match out
            .iter_mut()
            .find(|x| x.split(':').next().unwrap_or(x) == name)
        {
            Some(slot) => *slot = o.to_string(),
            None => out.push(o.to_string()),
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// Container

/// kubelet: `generateContainerConfig` (mounts prepared by `mounts.rs`).
pub fn container_config(
    pod: &api::Pod,
    container: &api::Container,
    restart_count: u32,
    pod_ip: &str,
    mounts: Vec<Mount>,
    node: NodeParams<'_>,
    image_user: &ImageUser,
) -> Result<ContainerConfig, ConfigError> {
    let envs = container_env(pod, container, pod_ip, node)?;
    let (command, args) = expand_command_and_args(container, &envs);
    Ok(ContainerConfig {
        name: container.name.clone(),
        attempt: restart_count,
        image: container.image.clone(),
        command,
        args,
        working_dir: container.working_dir.clone().unwrap_or_default(),
        envs,
        mounts,
        labels: labels::container_labels(pod, container),
        annotations: labels::container_annotations(pod, container, restart_count),
        log_path: container_log_path(&container.name, restart_count),
        stdin: container.stdin,
        stdin_once: container.stdin_once,
        tty: container.tty,
        resources: resources(pod, container, node.memory_capacity, &node.swap)?,
        security: security(pod, container, node, image_user)?,
        devices: Vec::new(),
        cdi_devices: Vec::new(),
    })
}

/// The container's environment in declaration order (a repeated name keeps its first
/// position and takes the last value). Literal values expand `$(VAR)` against the
/// variables defined before them; `fieldRef` values are not expanded (kubelet:
/// `makeEnvironmentVariables`); then the Service variables of an API pod
/// (`config_data::services`) whose names the container does not set itself, which `$(VAR)`
/// can name too.
pub(crate) fn container_env(
    pod: &api::Pod,
    container: &api::Container,
    pod_ip: &str,
    node: NodeParams<'_>,
) -> Result<Vec<(String, String)>, ConfigError> {
    let services = match (node.objects, Scope::of(pod)) {
        (Some(o), Scope::Api) => {
            let links = pod.spec.enable_service_links.unwrap_or(true);
            (o.services().env_vars(&pod.metadata.namespace, links)).map_err(|()| {
                ConfigError::ConfigData(config_data::services::NOT_SYNCED.to_string())
            })?
        }
        _ => Vec::new(),
    };
    // kubelet: envFrom first (each source's keys; a later source wins), then env.
    let mut out: Vec<(String, String)> = env_from(pod, container, node)?.vars;
    for e in &container.env {
        let value = match &e.value_from {
            Some(_) if config_data::env_key_ref(e).is_some() => {
                match env_key_value(pod, e, node)? {
                    Some(v) => v,
                    None => continue, // optional and missing: no variable
                }
            }
            Some(from) => env_value_from(pod, container, &e.name, from, pod_ip, node)?,
            None => {
                let v = e.value.as_deref().unwrap_or("");
                expand(v, |name| {
                    (out.iter().chain(&services))
                        .find(|(k, _)| k == name)
                        .map(|(_, v)| v.clone())
                })
            }
        };
        match out.iter_mut().find(|(k, _)| *k == e.name) {
            Some(slot) => slot.1 = value,
            None => out.push((e.name.clone(), value)),
        }
    }
    for (k, v) in services {
        if !out.iter().any(|(n, _)| *n == k) {
            out.push((k, v));
        }
    }
    Ok(out)
}

/// The variables of `envFrom`, and per source the keys skipped as invalid names.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct EnvFrom {
    pub vars: Vec<(String, String)>,
    /// (kind, `namespace/name`, the skipped names sorted).
    pub skipped: Vec<(Kind, String, Vec<String>)>,
}

fn get_object(
    pod: &api::Pod,
    node: NodeParams<'_>,
    kind: Kind,
    name: &str,
) -> Option<std::sync::Arc<config_data::Object>> {
    node.objects?.get(&ObjectKey::new(
        Scope::of(pod),
        kind,
        &pod.metadata.namespace,
        name,
    ))
}

/// kubelet: `makeEnvironmentVariables`, its envFrom half.
pub(crate) fn env_from(
    pod: &api::Pod,
    container: &api::Container,
    node: NodeParams<'_>,
) -> Result<EnvFrom, ConfigError> {
    let mut out = EnvFrom::default();
    for src in &container.env_from {
        let (kind, r) = match (&src.config_map_ref, &src.secret_ref) {
            (Some(r), _) => (Kind::ConfigMap, r),
            (None, Some(r)) => (Kind::Secret, r),
            (None, None) => continue,
        };
        let Some(obj) = get_object(pod, node, kind, &r.name) else {
            if r.optional.unwrap_or(false) {
                continue;
            }
            return Err(ConfigError::ConfigData(format!(
                "{} {:?} not found",
                kind.resource(),
                r.name
            )));
        };
        let mut invalid = Vec::new();
        for (k, v) in &obj.data {
            let name = format!("{}{k}", src.prefix);
            // kubelet (1.37): every key, prefixed; only what an env entry cannot carry is
            // skipped (a static pod's local objects are not the apiserver's, validated).
            if !crate::api::is_env_var_name(&name) {
                invalid.push(name);
                continue;
            }
            let value = String::from_utf8_lossy(v).into_owned();
            match out.vars.iter_mut().find(|(n, _)| *n == name) {
                Some(slot) => slot.1 = value,
                None => out.vars.push((name, value)),
            }
        }
        if !invalid.is_empty() {
            out.skipped.push((
                kind,
                format!("{}/{}", pod.metadata.namespace, r.name),
                invalid,
            ));
        }
    }
    Ok(out)
}

/// `valueFrom.configMapKeyRef` / `secretKeyRef`; `None`: optional and missing.
fn env_key_value(
    pod: &api::Pod,
    e: &api::EnvVar,
    node: NodeParams<'_>,
) -> Result<Option<String>, ConfigError> {
    let Some((kind, sel)) = config_data::env_key_ref(e) else {
        return Err(ConfigError::EnvValueFromInvalid {
            env: e.name.clone(),
        });
    };
    let optional = sel.optional.unwrap_or(false);
    let Some(obj) = get_object(pod, node, kind, &sel.name) else {
        if optional {
            return Ok(None);
        }
        return Err(ConfigError::ConfigData(format!(
            "{} {:?} not found",
            kind.resource(),
            sel.name
        )));
    };
    match obj.data.get(&sel.key) {
        Some(v) => Ok(Some(String::from_utf8_lossy(v).into_owned())),
        None if optional => Ok(None),
        None => Err(ConfigError::ConfigData(format!(
            "couldn't find key {} in {} {}/{}",
            sel.key,
            kind.as_str(),
            pod.metadata.namespace,
            sel.name
        ))),
    }
}

/// `valueFrom.fieldRef` and `valueFrom.resourceFieldRef` (kubelet: `podFieldSelectorRuntimeValue`,
/// `containerResourceRuntimeValue`); anything else (configMap/secret refs) is an explicit
/// error.
fn env_value_from(
    pod: &api::Pod,
    container: &api::Container,
    env: &str,
    from: &serde_json::Value,
    pod_ip: &str,
    node: NodeParams<'_>,
) -> Result<String, ConfigError> {
    let Some(obj) = from.as_object() else {
        return Err(ConfigError::EnvValueFromInvalid { env: env.into() });
    };
    if let Some(rf) = obj.get("resourceFieldRef") {
        return crate::fieldpath::resource_field_value(pod, container, rf, node).map_err(
            |message| ConfigError::EnvResourceFieldRef {
                env: env.into(),
                message: message.to_string(),
            },
        );
    }
    let Some(field_ref) = obj.get("fieldRef") else {
        return Err(match obj.keys().next() {
            Some(kind) => ConfigError::EnvSourceUnsupported {
                env: env.into(),
                source_kind: kind.clone(),
            },
            None => ConfigError::EnvValueFromInvalid { env: env.into() },
        });
    };
    let Some(path) = field_ref.get("fieldPath").and_then(|p| p.as_str()) else {
        return Err(ConfigError::EnvValueFromInvalid { env: env.into() });
    };
    let m = &pod.metadata;
    let unsupported = || ConfigError::EnvFieldPathUnsupported {
        env: env.into(),
        path: path.into(),
    };
    Ok(match path {
        "metadata.name" => m.name.clone(),
        "metadata.namespace" => m.namespace.clone(),
        "metadata.uid" => m.uid.clone(),
        "spec.nodeName" => pod.spec.node_name.clone(),
        "spec.serviceAccountName" => pod.spec.service_account_name.clone().unwrap_or_default(),
        "status.podIP" => pod_ip.to_string(),
        "status.podIPs" => pod_ip.to_string(),
        "status.hostIP" | "status.hostIPs" => node.host_ip.to_string(),
        _ => metadata_subscript(pod, path).ok_or_else(unsupported)?,
    })
}

/// Expand `$(VAR)` in command and args with the container's environment (kubelet:
/// `ExpandContainerCommandAndArgs`).
pub(crate) fn expand_command_and_args(
    container: &api::Container,
    envs: &[(String, String)],
) -> (Vec<String>, Vec<String>) {
    let lookup = |name: &str| envs.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    (
        container
            .command
            .iter()
            .map(|s| expand(s, lookup))
            .collect(),
        container.args.iter().map(|s| expand(s, lookup)).collect(),
    )
}

// ---------------------------------------------------------------------------------------
// Resources

/// kubelet: `MinShares`, `MaxShares`, `QuotaPeriod`, `MinQuotaPeriod`.
const MIN_SHARES: i64 = 2;
const MAX_SHARES: i64 = 262_144;
const QUOTA_PERIOD: i64 = 100_000;
const MIN_QUOTA: i64 = 1_000;

/// CPU shares, CFS quota/period and the memory limit from requests/limits (kubelet:
/// `generateLinuxContainerResources`). A CPU limit without a request sets the shares
/// from the limit, as the apiserver would default the request.
pub(crate) fn resources(
    pod: &api::Pod,
    container: &api::Container,
    memory_capacity: u64,
    swap: &crate::qos::NodeSwap,
) -> Result<Resources, ConfigError> {
    let empty = api::ResourceRequirements::default();
    let r = container.resources.as_ref().unwrap_or(&empty);
    let get = |map: &BTreeMap<String, api::Quantity>, which: &str, name: &str, scale: i32| {
        map.get(name)
            .map(|q| {
                let s = q.as_string();
                parse_quantity(&s, scale).ok_or_else(|| ConfigError::InvalidQuantity {
                    field: format!("{which}.{name}"),
                    value: s,
                })
            })
            .transpose()
            .map(Option::unwrap_or_default)
    };
    let cpu_request = get(&r.requests, "requests", "cpu", 3)?;
    // kubelet: getCPULimit/getMemoryLimit — with pod-level resources, a container that sets
    // no limit gets the pod's.
    let cpu_limit = match get(&r.limits, "limits", "cpu", 3)? {
        0 => crate::qos::pod_level(pod, true, "cpu").unwrap_or(0),
        v => v,
    };
    let memory_limit = match get(&r.limits, "limits", "memory", 0)? {
        0 => crate::qos::pod_level(pod, true, "memory").unwrap_or(0),
        v => v,
    };
    // validate memory requests too, so a typo is reported rather than ignored
    get(&r.requests, "requests", "memory", 0)?;

    let shares_from = if cpu_request == 0 && cpu_limit != 0 {
        cpu_limit
    } else {
        cpu_request
    };
    let (cpu_quota, cpu_period) = if cpu_limit == 0 {
        (0, 0)
    } else {
        (
            (cpu_limit.saturating_mul(QUOTA_PERIOD) / 1000).max(MIN_QUOTA),
            QUOTA_PERIOD,
        )
    };
    let (memory_swap_limit_in_bytes, swap_max) =
        swap.container(pod, container, memory_limit, memory_capacity);
    Ok(Resources {
        cpu_period,
        cpu_quota,
        cpu_shares: milli_cpu_to_shares(shares_from),
        memory_limit_in_bytes: memory_limit,
        oom_score_adj: crate::qos::oom_score_adj(pod, container, memory_capacity),
        memory_swap_limit_in_bytes,
        swap_max,
    })
}

/// kubelet: `milliCPUToShares` — milliCPU × 1024 / 1000, at least 2.
pub(crate) fn milli_cpu_to_shares(milli_cpu: i64) -> i64 {
    if milli_cpu <= 0 {
        return MIN_SHARES;
    }
    (milli_cpu.saturating_mul(1024) / 1000).clamp(MIN_SHARES, MAX_SHARES)
}

pub(crate) use crate::api::parse_quantity;

// ---------------------------------------------------------------------------------------
// Security context

/// Whether the container asks to run as non-root (container over pod).
pub(crate) fn needs_non_root(pod: &api::Pod, container: &api::Container) -> bool {
    let pod_says = pod
        .spec
        .security_context
        .as_ref()
        .and_then(|s| s.run_as_non_root);
    let container_says = container
        .security_context
        .as_ref()
        .and_then(|s| s.run_as_non_root);
    container_says.or(pod_says) == Some(true)
}

/// Whether [`security`] needs the image's user: runAsNonRoot without a runAsUser.
pub(crate) fn needs_image_user(pod: &api::Pod, container: &api::Container) -> bool {
    let run_as_user = container
        .security_context
        .as_ref()
        .and_then(|s| s.run_as_user)
        .or(pod
            .spec
            .security_context
            .as_ref()
            .and_then(|s| s.run_as_user));
    needs_non_root(pod, container) && run_as_user.is_none()
}

/// kubelet: `verifyRunAsNonRoot` — an explicit runAsUser decides; without one, the image's
/// user: a numeric non-zero uid runs, root (or no USER) and a name that cannot be checked
/// are refused (CreateContainerConfigError, upstream's messages).
fn verify_run_as_non_root(
    pod: &api::Pod,
    container: &api::Container,
    run_as_user: Option<i64>,
    image_user: &ImageUser,
) -> Result<(), ConfigError> {
    let who = || {
        (
            format!(
                "{}_{}({})",
                pod.metadata.name, pod.metadata.namespace, pod.metadata.uid
            ),
            container.name.clone(),
        )
    };
    match (run_as_user, image_user) {
        (Some(0), _) => {
            let (pod, container) = who();
            Err(ConfigError::RunAsNonRootUid0 { pod, container })
        }
        (Some(_), _) => Ok(()),
        (None, ImageUser::Uid(uid)) if *uid != 0 => Ok(()),
        (None, ImageUser::Name(user)) => {
            let (pod, container) = who();
            Err(ConfigError::RunAsNonRootUnverifiable {
                pod,
                container,
                user: user.clone(),
            })
        }
        (None, ImageUser::Uid(_) | ImageUser::Unset) => {
            let (pod, container) = who();
            Err(ConfigError::RunAsNonRootImageRoot { pod, container })
        }
    }
}

/// The container's effective security settings (kubelet:
/// `determineEffectiveSecurityContext`): container fields override pod fields; the pod's
/// namespace options always apply.
pub(crate) fn security(
    pod: &api::Pod,
    container: &api::Container,
    node: NodeParams<'_>,
    image_user: &ImageUser,
) -> Result<ContainerSecurity, ConfigError> {
    let psc = pod.spec.security_context.clone().unwrap_or_default();
    let csc = container.security_context.clone().unwrap_or_default();
    let run_as_user = csc.run_as_user.or(psc.run_as_user);
    let run_as_group = csc.run_as_group.or(psc.run_as_group);
    if needs_non_root(pod, container) {
        verify_run_as_non_root(pod, container, run_as_user, image_user)?;
    }
    let mut supplemental_groups = psc.supplemental_groups.clone();
    if let Some(fs_group) = psc.fs_group {
        if !supplemental_groups.contains(&fs_group) {
            supplemental_groups.push(fs_group);
        }
    }
    let caps = csc.capabilities.clone().unwrap_or_default();
    Ok(ContainerSecurity {
        privileged: csc.privileged.unwrap_or(false),
        namespace_options: namespace_options(pod),
        pid_target: String::new(),
        run_as_user,
        run_as_group,
        supplemental_groups,
        readonly_rootfs: csc.read_only_root_filesystem.unwrap_or(false),
        no_new_privs: csc.allow_privilege_escalation == Some(false),
        add_capabilities: caps.add,
        drop_capabilities: caps.drop,
        seccomp: seccomp_profile(pod, Some(container), node)?,
        apparmor: apparmor_profile(pod, container)?,
    })
}

/// kubelet: `getSeccompProfile` — the container's field, else the pod's, else
/// `RuntimeDefault` with `--seccomp-default` and `Unconfined` without. `Localhost` profiles
/// are files below `<root-dir>/seccomp`.
pub(crate) fn seccomp_profile(
    pod: &api::Pod,
    container: Option<&api::Container>,
    p: NodeParams<'_>,
) -> Result<SecurityProfile, ConfigError> {
    let from_container = container.and_then(|c| {
        let sc = c.security_context.as_ref()?;
        let field = format!("container {:?}: securityContext.seccompProfile", c.name);
        sc.seccomp_profile.as_ref().map(|sp| (field, sp))
    });
    let from_pod = || {
        let sp = pod
            .spec
            .security_context
            .as_ref()?
            .seccomp_profile
            .as_ref()?;
        Some(("spec.securityContext.seccompProfile".to_string(), sp))
    };
    let Some((field, sp)) = from_container.or_else(from_pod) else {
        return Ok(SecurityProfile {
            kind: if p.seccomp_default {
                ProfileKind::RuntimeDefault
            } else {
                ProfileKind::Unconfined
            },
            localhost_ref: String::new(),
        });
    };
    let err = |message: String| ConfigError::SecurityProfile {
        field: field.clone(),
        message,
    };
    let kind = profile_kind(&sp.type_, &field)?;
    let localhost_ref = match (kind, &sp.localhost_profile) {
        (ProfileKind::Localhost, Some(rel)) => {
            if rel.is_empty() || rel.starts_with('/') || rel.split('/').any(|s| s == "..") {
                return Err(err(format!(
                    "localhostProfile {rel:?} must be a descending path below {}",
                    p.seccomp_root.display()
                )));
            }
            p.seccomp_root.join(rel).to_string_lossy().into_owned()
        }
        (ProfileKind::Localhost, None) => {
            return Err(err("type Localhost needs localhostProfile".to_string()));
        }
        (_, Some(_)) => {
            return Err(err(
                "localhostProfile is only valid with type Localhost".to_string()
            ));
        }
        (_, None) => String::new(),
    };
    Ok(SecurityProfile {
        kind,
        localhost_ref,
    })
}

/// The legacy per-container AppArmor annotation (kubelet still reads it).
pub(crate) const APPARMOR_ANNOTATION_PREFIX: &str =
    "container.apparmor.security.beta.kubernetes.io/";

/// kubelet: `apparmor.GetProfile` — the container's field, else the legacy annotation
/// (`runtime/default`, `unconfined`, `localhost/<name>`), else the pod's field, else `None`
/// (the runtime's default profile).
pub(crate) fn apparmor_profile(
    pod: &api::Pod,
    container: &api::Container,
) -> Result<Option<SecurityProfile>, ConfigError> {
    let field = |what: &str| format!("container {:?}: {what}", container.name);
    let from_field = |field: String, sp: &api::SecurityProfile| {
        let err = |message: String| ConfigError::SecurityProfile {
            field: field.clone(),
            message,
        };
        let kind = profile_kind(&sp.type_, &field)?;
        let localhost_ref = match (kind, &sp.localhost_profile) {
            (ProfileKind::Localhost, Some(name)) if !name.is_empty() => name.clone(),
            (ProfileKind::Localhost, _) => {
                return Err(err("type Localhost needs localhostProfile".to_string()));
            }
            (_, Some(_)) => {
                return Err(err(
                    "localhostProfile is only valid with type Localhost".to_string()
                ));
            }
            (_, None) => String::new(),
        };
        Ok(Some(SecurityProfile {
            kind,
            localhost_ref,
        }))
    };
    if let Some(sp) = container
        .security_context
        .as_ref()
        .and_then(|sc| sc.app_armor_profile.as_ref())
    {
        return from_field(field("securityContext.appArmorProfile"), sp);
    }
    let key = format!("{APPARMOR_ANNOTATION_PREFIX}{}", container.name);
    if let Some(value) = pod.metadata.annotations.get(&key) {
        let profile = |kind, localhost_ref: &str| {
            Ok(Some(SecurityProfile {
                kind,
                localhost_ref: localhost_ref.to_string(),
            }))
        };
        return match value.as_str() {
            "runtime/default" => profile(ProfileKind::RuntimeDefault, ""),
            "unconfined" => profile(ProfileKind::Unconfined, ""),
            v => match v.strip_prefix("localhost/") {
                Some(name) if !name.is_empty() => profile(ProfileKind::Localhost, name),
                _ => Err(ConfigError::SecurityProfile {
                    field: format!("metadata.annotations[{key:?}]"),
                    message: format!(
                        "{v:?} is not runtime/default, unconfined or localhost/<profile>"
                    ),
                }),
            },
        };
    }
    match pod
        .spec
        .security_context
        .as_ref()
        .and_then(|sc| sc.app_armor_profile.as_ref())
    {
        Some(sp) => from_field("spec.securityContext.appArmorProfile".to_string(), sp),
        None => Ok(None),
    }
}

/// The profile's `type`; an unknown one is refused naming the `field` it came from.
fn profile_kind(type_: &str, field: &str) -> Result<ProfileKind, ConfigError> {
    match type_ {
        "RuntimeDefault" => Ok(ProfileKind::RuntimeDefault),
        "Unconfined" => Ok(ProfileKind::Unconfined),
        "Localhost" => Ok(ProfileKind::Localhost),
        other => Err(ConfigError::SecurityProfile {
            field: field.to_string(),
            message: format!("type {other:?} is not RuntimeDefault, Unconfined or Localhost"),
        }),
    }
}

// ---------------------------------------------------------------------------------------
// Images

/// The image reference with `:latest` added when it has neither tag nor digest (kubelet:
/// `applyDefaultImageTag`), after a light syntax check (`InvalidImageName`).
pub(crate) fn image_with_default_tag(image: &str) -> Result<String, ConfigError> {
    let invalid = |reason| ConfigError::InvalidImageName {
        image: image.to_string(),
        reason,
    };
    if image.is_empty() {
        return Err(invalid("empty"));
    }
    if image.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(invalid("contains whitespace"));
    }
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    if let Some(d) = digest {
        let ok = d
            .split_once(':')
            .is_some_and(|(alg, hex)| !alg.is_empty() && !hex.is_empty());
        if !ok {
            return Err(invalid("malformed digest"));
        }
    }
    let (repo, tag) = split_tag(name);
    if repo.is_empty() || repo.starts_with('/') || repo.ends_with('/') || repo.contains("//") {
        return Err(invalid("malformed repository"));
    }
    if let Some(t) = tag {
        if t.is_empty()
            || t.len() > 128
            || !t
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        {
            return Err(invalid("malformed tag"));
        }
    }
    // The path after the registry host must be lowercase.
    let path = match repo.split_once('/') {
        Some((host, rest)) if host.contains(['.', ':']) || host == "localhost" => rest,
        _ => repo,
    };
    if !path
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-' | '/'))
    {
        return Err(invalid("repository name must be lowercase"));
    }
    if tag.is_none() && digest.is_none() {
        return Ok(format!("{image}:latest"));
    }
    Ok(image.to_string())
}

/// `(repository, tag)`: the tag is after the last `:` that follows the last `/`.
fn split_tag(name: &str) -> (&str, Option<&str>) {
    let last_slash = name.rfind('/').map_or(0, |i| i + 1);
    match name[last_slash..].rfind(':') {
        Some(i) => (&name[..last_slash + i], Some(&name[last_slash + i + 1..])),
        None => (name, None),
    }
}

/// The pull policy, API-defaulted (see [`api::default_pull_policy`]).
pub(crate) fn pull_policy(container: &api::Container) -> PullPolicy {
    container
        .image_pull_policy
        .unwrap_or_else(|| api::default_pull_policy(&container.image))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config_data::ConfigObjects;

    fn sc() -> NodeParams<'static> {
        NodeParams {
            seccomp_root: Path::new("/var/lib/picolet/seccomp"),
            seccomp_default: false,
            memory_capacity: 1 << 30,
            cpu_capacity_milli: 4000,
            swap: Default::default(),
            host_ip: "192.0.2.1",
            objects: None,
        }
    }

    fn pod() -> api::Pod {
        let mut p = api::Pod::default();
        p.metadata.name = "web-node1".into();
        p.metadata.namespace = "default".into();
        p.metadata.uid = "uid-1".into();
        p.metadata.labels.insert("app".into(), "web".into());
        p.spec.node_name = "node1".into();
        p.spec.containers = vec![api::Container {
            name: "nginx".into(),
            image: "nginx:1.25".into(),
            ports: vec![
                api::ContainerPort {
                    container_port: 80,
                    host_port: Some(8080),
                    ..Default::default()
                },
                api::ContainerPort {
                    container_port: 53,
                    host_port: Some(5353),
                    protocol: Some("UDP".into()),
                    host_ip: Some("127.0.0.1".into()),
                    ..Default::default()
                },
                api::ContainerPort {
                    container_port: 9000,
                    ..Default::default()
                },
            ],
            ..Default::default()
        }];
        p
    }

    fn host_dns() -> DnsConfig {
        parse_resolv_conf(
            "# comment\nnameserver 192.168.1.1\nnameserver 1.1.1.1 ; trailing\nsearch old.example\nsearch lan example.com\noptions ndots:2 edns0\noptions ndots:3\n",
        )
    }

    fn params<'a>(dns: &'a DnsConfig) -> SandboxParams<'a> {
        SandboxParams {
            pod_log_dir: Path::new("/var/log/pods"),
            cgroup_parent: "",
            host_dns: Some(dns),
            node: sc(),
        }
    }

    #[test]
    fn resolv_conf_parsing() {
        assert_eq!(
            host_dns(),
            DnsConfig {
                servers: vec!["192.168.1.1".into(), "1.1.1.1".into()],
                searches: vec!["lan".into(), "example.com".into()],
                options: vec!["ndots:3".into(), "edns0".into()],
            }
        );
        assert_eq!(parse_resolv_conf(""), DnsConfig::default());
    }

    #[test]
    fn sandbox_config_basics() {
        let dns = host_dns();
        let c = sandbox_config(&pod(), 2, params(&dns));
        assert_eq!(c.name, "web-node1");
        assert_eq!(c.namespace, "default");
        assert_eq!(c.uid, "uid-1");
        assert_eq!(c.attempt, 2);
        assert_eq!(c.hostname, "web-node1");
        assert_eq!(c.log_directory, "/var/log/pods/default_web-node1_uid-1");
        assert_eq!(c.dns, Some(dns.clone()));
        let no_host = sandbox_config(
            &pod(),
            0,
            SandboxParams {
                host_dns: None,
                ..params(&dns)
            },
        );
        assert_eq!(no_host.dns, None);
        assert_eq!(
            c.port_mappings,
            vec![
                PortMapping {
                    protocol: Protocol::Tcp,
                    container_port: 80,
                    host_port: 8080,
                    host_ip: String::new()
                },
                PortMapping {
                    protocol: Protocol::Udp,
                    container_port: 53,
                    host_port: 5353,
                    host_ip: "127.0.0.1".into()
                },
            ]
        );
        assert_eq!(c.labels, labels::sandbox_labels(&pod()));
        assert_eq!(
            c.namespace_options,
            NamespaceOptions {
                network: NamespaceMode::Pod,
                pid: NamespaceMode::Container,
                ipc: NamespaceMode::Pod,
                userns: None,
            }
        );
        assert!(!c.privileged);
        assert!(c.sysctls.is_empty());
    }

    #[test]
    fn host_network_sandbox() {
        let mut p = pod();
        p.spec.host_network = true;
        p.spec.host_pid = true;
        p.spec.host_ipc = true;
        let dns = host_dns();
        let c = sandbox_config(&p, 0, params(&dns));
        assert_eq!(c.hostname, "");
        assert_eq!(
            c.namespace_options,
            NamespaceOptions {
                network: NamespaceMode::Node,
                pid: NamespaceMode::Node,
                ipc: NamespaceMode::Node,
                userns: None,
            }
        );
    }

    #[test]
    fn privileged_sysctls_share_pid() {
        let mut p = pod();
        p.spec.share_process_namespace = Some(true);
        p.spec.init_containers = vec![api::Container {
            name: "init".into(),
            image: "busybox".into(),
            security_context: Some(Box::new(api::SecurityContext {
                privileged: Some(true),
                ..Default::default()
            })),
            ..Default::default()
        }];
        p.spec.security_context = Some(api::PodSecurityContext {
            sysctls: vec![
                api::Sysctl {
                    name: "net/ipv4/ip_forward".into(),
                    value: "1".into(),
                },
                api::Sysctl {
                    name: "net/ipv4/conf/eno2.100/rp_filter".into(),
                    value: "0".into(),
                },
                api::Sysctl {
                    name: "kernel.shm_rmid_forced".into(),
                    value: "1".into(),
                },
            ],
            ..Default::default()
        });
        let dns = DnsConfig::default();
        let c = sandbox_config(&p, 0, params(&dns));
        assert!(c.privileged);
        assert_eq!(c.namespace_options.pid, NamespaceMode::Pod);
        assert_eq!(
            c.sysctls,
            BTreeMap::from([
                ("net.ipv4.ip_forward".to_string(), "1".to_string()),
                (
                    "net.ipv4.conf.eno2/100.rp_filter".to_string(),
                    "0".to_string()
                ),
                ("kernel.shm_rmid_forced".to_string(), "1".to_string()),
            ])
        );
    }

    #[test]
    fn hostnames() {
        let mut p = pod();
        p.spec.hostname = Some("custom".into());
        assert_eq!(pod_hostname(&p), "custom");
        p.spec.hostname = None;
        p.metadata.name = format!("{}-{}", "a".repeat(62), "bcd");
        assert_eq!(pod_hostname(&p), "a".repeat(62)); // cut at 63 = trailing '-' dropped
        p.metadata.name = "x".repeat(70);
        assert_eq!(pod_hostname(&p).len(), 63);
        // Conformance: "Override hostname of Pod ... will have hostnameOverride as hostname".
        p.spec.hostname = Some("custom".into());
        p.spec.hostname_override = Some("override.example.host".into());
        assert_eq!(pod_hostname(&p), "override.example.host");
    }

    #[test]
    fn dns_policies() {
        let host = host_dns();
        let mut p = pod();
        let extra = api::PodDnsConfig {
            nameservers: vec!["10.0.0.10".into(), "1.1.1.1".into()],
            searches: vec!["svc.local".into()],
            options: vec![
                api::PodDnsConfigOption {
                    name: "ndots".into(),
                    value: Some("5".into()),
                },
                api::PodDnsConfigOption {
                    name: "rotate".into(),
                    value: None,
                },
            ],
        };
        // (policy, dnsConfig, want)
        let merged = DnsConfig {
            servers: vec!["192.168.1.1".into(), "1.1.1.1".into(), "10.0.0.10".into()],
            searches: vec!["lan".into(), "example.com".into(), "svc.local".into()],
            options: vec!["ndots:5".into(), "edns0".into(), "rotate".into()],
        };
        let only_pod = DnsConfig {
            servers: vec!["10.0.0.10".into(), "1.1.1.1".into()],
            searches: vec!["svc.local".into()],
            options: vec!["ndots:5".into(), "rotate".into()],
        };
        let cases = [
            (None, None, host.clone()),
            (Some("ClusterFirst"), None, host.clone()),
            (Some("ClusterFirstWithHostNet"), None, host.clone()),
            (Some("Default"), None, host.clone()),
            (Some("None"), None, DnsConfig::default()),
            (Some("Default"), Some(extra.clone()), merged),
            (Some("None"), Some(extra.clone()), only_pod),
        ];
        for (policy, cfg, want) in cases {
            p.spec.dns_policy = policy.map(str::to_string);
            p.spec.dns_config = cfg.clone();
            assert_eq!(
                pod_dns(&p, Some(&host)),
                Some(want),
                "{policy:?} {}",
                cfg.is_some()
            );
        }
        // at most 3 nameservers
        p.spec.dns_policy = Some("None".into());
        p.spec.dns_config = Some(api::PodDnsConfig {
            nameservers: vec!["1".into(), "2".into(), "3".into(), "4".into()],
            ..Default::default()
        });
        assert_eq!(pod_dns(&p, Some(&host)).unwrap().servers.len(), 3);
        // host DNS unknown: no config unless the pod brings one
        p.spec.dns_policy = None;
        assert_eq!(pod_dns(&p, None).unwrap().servers.len(), 3);
        p.spec.dns_config = None;
        assert_eq!(pod_dns(&p, None), None);
        p.spec.dns_policy = Some("None".into());
        assert_eq!(pod_dns(&p, None), Some(DnsConfig::default()));
    }

    #[test]
    fn expansion_table() {
        let lookup = |n: &str| match n {
            "A" => Some("alpha".to_string()),
            "EMPTY" => Some(String::new()),
            _ => None,
        };
        let cases = [
            ("plain", "plain"),
            ("$(A)", "alpha"),
            ("x-$(A)-y", "x-alpha-y"),
            ("$(A)$(A)", "alphaalpha"),
            ("$(UNDEFINED)", "$(UNDEFINED)"),
            ("$$(A)", "$(A)"),
            ("$$", "$"),
            ("$A", "$A"),
            ("$(A", "$(A"),
            ("$", "$"),
            ("a$", "a$"),
            ("$(EMPTY)x", "x"),
            ("$()", "$()"),
            ("ü$(A)ü", "üalphaü"),
        ];
        for (input, want) in cases {
            assert_eq!(expand(input, lookup), want, "{input}");
        }
    }

    fn env(name: &str, value: &str) -> api::EnvVar {
        api::EnvVar {
            name: name.into(),
            value: Some(value.into()),
            value_from: None,
        }
    }

    fn field_env(name: &str, path: &str) -> api::EnvVar {
        api::EnvVar {
            name: name.into(),
            value: None,
            value_from: Some(
                serde_json::json!({"fieldRef": {"apiVersion": "v1", "fieldPath": path}}),
            ),
        }
    }

    #[test]
    fn env_and_command_expansion() {
        let p = pod();
        let c = api::Container {
            name: "c".into(),
            image: "busybox".into(),
            command: vec!["sh".into(), "-c".into(), "echo $(GREETING) $(POD)".into()],
            args: vec!["$(LATER)".into(), "$$(GREETING)".into()],
            env: vec![
                env("NAME", "world"),
                env("GREETING", "hello $(NAME) $(LATER)"),
                field_env("POD", "metadata.name"),
                field_env("NS", "metadata.namespace"),
                field_env("UID", "metadata.uid"),
                field_env("NODE", "spec.nodeName"),
                field_env("IP", "status.podIP"),
                field_env("APP", "metadata.labels['app']"),
                env("LATER", "late"),
                env("NAME", "again"),
            ],
            ..Default::default()
        };
        let envs = container_env(&p, &c, "10.0.0.7", sc()).unwrap();
        let get = |k: &str| envs.iter().find(|(n, _)| n == k).unwrap().1.clone();
        assert_eq!(get("GREETING"), "hello world $(LATER)");
        assert_eq!(get("POD"), "web-node1");
        assert_eq!(get("NS"), "default");
        assert_eq!(get("UID"), "uid-1");
        assert_eq!(get("NODE"), "node1");
        assert_eq!(get("IP"), "10.0.0.7");
        assert_eq!(get("APP"), "web");
        assert_eq!(get("NAME"), "again");
        assert_eq!(envs[0].0, "NAME", "a redefinition keeps the first position");
        assert_eq!(envs.len(), 9);
        let (cmd, args) = expand_command_and_args(&c, &envs);
        assert_eq!(cmd, vec!["sh", "-c", "echo hello world $(LATER) web-node1"]);
        assert_eq!(args, vec!["late", "$(GREETING)"]);
    }

    #[test]
    fn host_ip_and_resource_field_refs() {
        let mut p = pod();
        p.spec.containers[0].resources = Some(api::ResourceRequirements {
            requests: [("cpu".into(), api::Quantity::Str("250m".into()))].into(),
            limits: [("memory".into(), api::Quantity::Str("64Mi".into()))].into(),
            claims: None,
        });
        let rf = |name: &str, v: serde_json::Value| api::EnvVar {
            name: name.into(),
            value: None,
            value_from: Some(serde_json::json!({ "resourceFieldRef": v })),
        };
        use serde_json::json;
        let mut c = p.spec.containers[0].clone();
        c.env = vec![
            field_env("HOST", "status.hostIP"),
            rf("CPU_REQ", json!({"resource": "requests.cpu"})),
            rf(
                "CPU_REQ_M",
                json!({"resource": "requests.cpu", "divisor": "1m"}),
            ),
            rf("CPU_LIM", json!({"resource": "limits.cpu"})),
            rf("MEM_LIM", json!({"resource": "limits.memory"})),
            rf(
                "MEM_LIM_MI",
                json!({"resource": "limits.memory", "divisor": "1Mi"}),
            ),
            rf(
                "MEM_REQ",
                json!({"resource": "requests.memory", "divisor": "1Mi"}),
            ),
            rf(
                "OTHER",
                json!({"resource": "limits.memory", "containerName": "nginx", "divisor": "1Ki"}),
            ),
            // A zero divisor is 1, as the kubelet takes it: clients that leave it unset send
            // "0" (conformance: "Downward API volume should set DefaultMode on files").
            rf(
                "CPU_LIM_0",
                json!({"resource": "limits.cpu", "divisor": "0"}),
            ),
            rf(
                "MEM_LIM_0",
                json!({"resource": "limits.memory", "divisor": 0}),
            ),
        ];
        let envs = container_env(&p, &c, "10.0.0.7", sc()).unwrap();
        let got: Vec<(&str, &str)> = envs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(
            got,
            vec![
                ("HOST", "192.0.2.1"),
                ("CPU_REQ", "1"), // 250m rounded up to a core
                ("CPU_REQ_M", "250"),
                ("CPU_LIM", "4"), // no limit: the node's 4 CPUs
                ("MEM_LIM", "67108864"),
                ("MEM_LIM_MI", "64"),
                ("MEM_REQ", "64"), // the request defaults to the limit
                ("OTHER", "65536"),
                ("CPU_LIM_0", "4"),
                ("MEM_LIM_0", "67108864"),
            ]
        );
        c.env = vec![rf("X", json!({"resource": "limits.gpu"}))];
        let e = container_env(&p, &c, "", sc()).unwrap_err().to_string();
        assert!(e.contains("unsupported resource"), "{e}");
        c.env = vec![rf(
            "X",
            json!({"resource": "limits.cpu", "containerName": "nope"}),
        )];
        let e = container_env(&p, &c, "", sc()).unwrap_err().to_string();
        assert!(e.contains("no container named"), "{e}");
    }

    #[test]
    fn env_value_from_errors() {
        let p = pod();
        let cases = [
            (
                field_env("H", "status.phase"),
                ConfigError::EnvFieldPathUnsupported {
                    env: "H".into(),
                    path: "status.phase".into(),
                },
            ),
            (
                api::EnvVar {
                    name: "S".into(),
                    value: None,
                    value_from: Some(
                        serde_json::json!({"secretKeyRef": {"name": "x", "key": "y"}}),
                    ),
                },
                ConfigError::ConfigData("secret \"x\" not found".into()),
            ),
            (
                api::EnvVar {
                    name: "E".into(),
                    value: None,
                    value_from: Some(serde_json::json!({})),
                },
                ConfigError::EnvValueFromInvalid { env: "E".into() },
            ),
        ];
        for (e, want) in cases {
            let c = api::Container {
                name: "c".into(),
                env: vec![e],
                ..Default::default()
            };
            assert_eq!(container_env(&p, &c, "", sc()), Err(want));
        }
    }

    /// kubelet: makeEnvironmentVariables' Service variables — after the container's own (a
    /// name it sets wins), usable in `$(VAR)`, none for a static pod, a wait until listed.
    #[test]
    fn service_variables_of_an_api_pod() {
        use crate::config_data::services::{Service, ServiceMap, ServicePort, Services};
        let services = Services::followed();
        let objects = ConfigObjects::default().with_services(services.clone());
        let node = NodeParams {
            objects: Some(&objects),
            ..sc()
        };
        let mut p = pod();
        p.metadata.namespace = "apps".into();
        let c: api::Container = serde_json::from_value(serde_json::json!({
            "name": "c", "image": "x",
            "env": [{"name": "URL", "value": "http://$(FOO_SERVICE_HOST):$(FOO_SERVICE_PORT)"},
                    {"name": "FOO_PORT", "value": "mine"}]
        }))
        .unwrap();
        assert_eq!(
            container_env(&p, &c, "", node).unwrap_err().to_string(),
            crate::config_data::services::NOT_SYNCED
        );
        let port = |port| ServicePort {
            port,
            ..Default::default()
        };
        let map: ServiceMap = vec![(
            "apps".into(),
            "foo".into(),
            Service {
                cluster_ip: "10.0.0.7".into(),
                ports: vec![port(8080)],
            },
        )];
        services.replace(map);
        let envs = container_env(&p, &c, "", node).unwrap();
        let get = |k: &str| envs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("URL"), Some("http://10.0.0.7:8080"));
        assert_eq!(get("FOO_PORT"), Some("mine"));
        assert_eq!(get("FOO_PORT_8080_TCP_ADDR"), Some("10.0.0.7"));
        assert_eq!(
            envs[..2]
                .iter()
                .map(|(k, _)| k.as_str())
                .collect::<Vec<_>>(),
            ["URL", "FOO_PORT"]
        );
        // Seven for the Service, FOO_PORT the container's own.
        assert_eq!(envs.len(), 2 + 6);
        p.spec.enable_service_links = Some(false);
        assert_eq!(container_env(&p, &c, "", node).unwrap().len(), 2);
        // A static pod: none, and nothing to wait for.
        p.spec.enable_service_links = None;
        p.metadata
            .annotations
            .insert(api::ANNOTATION_CONFIG_SOURCE.into(), "file".into());
        let objects = ConfigObjects::default().with_services(Services::followed());
        let node = NodeParams {
            objects: Some(&objects),
            ..sc()
        };
        assert_eq!(container_env(&p, &c, "", node).unwrap().len(), 2);
    }

    #[test]
    fn env_from_config_maps_and_secrets() {
        use crate::config_data::{from_config_map, from_secret};
        let objects = ConfigObjects::default();
        let cm: api::ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "cfg", "namespace": "apps"},
            "data": {"A": "1", "B": "2", "1x": "digit", "a.b": "dots"}
        }))
        .unwrap();
        let sec: api::Secret = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "db", "namespace": "apps"},
            "stringData": {"A": "from-secret", "password": "s3cret"}
        }))
        .unwrap();
        objects.replace_scope(
            Scope::Api,
            vec![
                from_config_map(&cm, Scope::Api, "t").unwrap(),
                from_secret(&sec, Scope::Api, "t").unwrap(),
            ],
        );
        let node = NodeParams {
            objects: Some(&objects),
            ..sc()
        };
        let mut p = pod();
        p.metadata.namespace = "apps".into();
        let c: api::Container = serde_json::from_value(serde_json::json!({
            "name": "c", "image": "x",
            "envFrom": [{"configMapRef": {"name": "cfg"}},
                        {"prefix": "S_", "secretRef": {"name": "db"}},
                        {"secretRef": {"name": "db"}},
                        {"configMapRef": {"name": "gone", "optional": true}},
                        {"prefix": "no=", "configMapRef": {"name": "cfg"}}],
            "env": [{"name": "B", "value": "literal $(A)"},
                    {"name": "P", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}},
                    {"name": "O", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "nope", "optional": true}}}]
        }))
        .unwrap();
        let envs = container_env(&p, &c, "", node).unwrap();
        let want: Vec<(String, String)> = [
            ("1x", "digit"),      // kubelet 1.37: any name an env entry can carry
            ("A", "from-secret"), // the later envFrom source wins
            ("B", "literal from-secret"),
            ("a.b", "dots"),
            ("S_A", "from-secret"),
            ("S_password", "s3cret"),
            ("password", "s3cret"),
            ("P", "s3cret"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(envs, want);
        let from = env_from(&p, &c, node).unwrap();
        assert_eq!(
            from.skipped,
            vec![(
                Kind::ConfigMap,
                "apps/cfg".to_string(),
                ["no=1x", "no=A", "no=B", "no=a.b"]
                    .map(String::from)
                    .to_vec()
            )]
        );

        // Missing objects and keys: upstream's messages.
        let cases = [
            (
                serde_json::json!({"name": "E", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "nope"}}}),
                "couldn't find key nope in ConfigMap apps/cfg",
            ),
            (
                serde_json::json!({"name": "E", "valueFrom": {"secretKeyRef": {"name": "none", "key": "k"}}}),
                "secret \"none\" not found",
            ),
        ];
        for (e, want) in cases {
            let c = api::Container {
                name: "c".into(),
                env: vec![serde_json::from_value(e).unwrap()],
                ..Default::default()
            };
            assert_eq!(
                container_env(&p, &c, "", node).unwrap_err().to_string(),
                want
            );
        }
        let c: api::Container = serde_json::from_value(serde_json::json!({
            "name": "c", "envFrom": [{"configMapRef": {"name": "none"}}]
        }))
        .unwrap();
        assert_eq!(
            container_env(&p, &c, "", node).unwrap_err().to_string(),
            "configmap \"none\" not found"
        );
        // A static pod does not see API objects.
        p.metadata
            .annotations
            .insert(api::ANNOTATION_CONFIG_SOURCE.into(), "file".into());
        let c: api::Container = serde_json::from_value(serde_json::json!({
            "name": "c", "envFrom": [{"configMapRef": {"name": "cfg"}}]
        }))
        .unwrap();
        assert!(container_env(&p, &c, "", node).is_err());
    }

    #[test]
    fn quantities() {
        let cases: &[(&str, i32, Option<i64>)] = &[
            ("1", 3, Some(1000)),
            ("500m", 3, Some(500)),
            ("0.5", 3, Some(500)),
            (".5", 3, Some(500)),
            ("1.0001", 3, Some(1001)), // rounds up
            ("2", 0, Some(2)),
            ("1k", 0, Some(1000)),
            ("1M", 0, Some(1_000_000)),
            ("1G", 0, Some(1_000_000_000)),
            ("1T", 0, Some(1_000_000_000_000)),
            ("64Mi", 0, Some(64 * 1024 * 1024)),
            ("1Ki", 0, Some(1024)),
            ("1.5Gi", 0, Some(1_610_612_736)),
            ("2Ti", 0, Some(2 << 40)),
            ("1e3", 0, Some(1000)),
            ("1E3", 0, Some(1000)),
            ("5e-1", 3, Some(500)),
            ("1E", 0, Some(1_000_000_000_000_000_000)),
            ("100m", 0, Some(1)), // 0.1 byte rounds up
            ("1m", 0, Some(1)),
            ("+1", 0, Some(1)),
            ("0", 3, Some(0)),
            ("", 0, None),
            ("-1", 0, None),
            ("1x", 0, None),
            ("abc", 0, None),
            ("1e", 0, None),
            ("1..2", 0, None),
            ("99E", 0, None), // overflows i64
        ];
        for (s, scale, want) in cases {
            assert_eq!(parse_quantity(s, *scale), *want, "{s} scale {scale}");
        }
    }

    fn with_resources(
        req: &[(&str, api::Quantity)],
        lim: &[(&str, api::Quantity)],
    ) -> api::Container {
        api::Container {
            name: "c".into(),
            resources: Some(api::ResourceRequirements {
                claims: None,
                requests: req
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.clone()))
                    .collect(),
                limits: lim
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.clone()))
                    .collect(),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn resources_table() {
        use api::Quantity::{Float, Int, Str};
        let cases = [
            (
                with_resources(&[], &[]),
                Resources {
                    cpu_shares: 2,
                    ..Default::default()
                },
            ),
            (
                with_resources(&[("cpu", Str("250m".into()))], &[]),
                Resources {
                    cpu_shares: 256,
                    ..Default::default()
                },
            ),
            (
                with_resources(&[("cpu", Str("1m".into()))], &[]),
                Resources {
                    cpu_shares: 2,
                    ..Default::default()
                },
            ),
            (
                with_resources(&[], &[("cpu", Int(2)), ("memory", Str("128Mi".into()))]),
                Resources {
                    cpu_shares: 2048,
                    cpu_quota: 200_000,
                    cpu_period: 100_000,
                    memory_limit_in_bytes: 128 * 1024 * 1024,
                    oom_score_adj: 0,
                    ..Default::default()
                },
            ),
            (
                with_resources(&[("cpu", Str("100m".into()))], &[("cpu", Float(0.5))]),
                Resources {
                    cpu_shares: 102,
                    cpu_quota: 50_000,
                    cpu_period: 100_000,
                    memory_limit_in_bytes: 0,
                    oom_score_adj: 0,
                    ..Default::default()
                },
            ),
            (
                with_resources(&[], &[("cpu", Str("5m".into()))]),
                Resources {
                    cpu_shares: 5,
                    cpu_quota: 1_000, // at least 1 ms
                    cpu_period: 100_000,
                    memory_limit_in_bytes: 0,
                    oom_score_adj: 0,
                    ..Default::default()
                },
            ),
        ];
        for (c, want) in cases {
            // (oom_score_adj has its own table in qos.rs)
            let got = resources(&pod(), &c, 1 << 30, &Default::default()).map(|r| Resources {
                oom_score_adj: 0,
                ..r
            });
            assert_eq!(got, Ok(want), "{:?}", c.resources);
        }
        // The node's swap goes into the same resources (kubelet:
        // configureContainerSwapResources; its table is in qos.rs).
        let limited = with_resources(&[], &[("memory", Str("128Mi".into()))]);
        let v1 = crate::qos::NodeSwap {
            controller: true,
            ..Default::default()
        };
        let got = resources(&pod(), &limited, 1 << 30, &v1).unwrap();
        assert_eq!(
            (got.memory_swap_limit_in_bytes, got.swap_max),
            (128 << 20, None)
        );
        let v2 = crate::qos::NodeSwap {
            unified: true,
            ..v1
        };
        let got = resources(&pod(), &limited, 1 << 30, &v2).unwrap();
        assert_eq!((got.memory_swap_limit_in_bytes, got.swap_max), (0, Some(0)));
        let bad = with_resources(&[("memory", Str("lots".into()))], &[]);
        assert_eq!(
            resources(&pod(), &bad, 1 << 30, &Default::default()),
            Err(ConfigError::InvalidQuantity {
                field: "requests.memory".into(),
                value: "lots".into()
            })
        );
    }

    /// kubelet: getCPULimit/getMemoryLimit — a container without a limit of its own gets the
    /// pod-level limit (shares from it too, as for a limit without a request); its own
    /// limit stays.
    #[test]
    fn pod_level_limits_for_containers_without_their_own() {
        use api::Quantity::Str;
        let mut p = pod();
        p.spec.resources = Some(api::ResourceRequirements {
            limits: [
                ("cpu".to_string(), Str("1".into())),
                ("memory".to_string(), Str("256Mi".into())),
            ]
            .into(),
            ..Default::default()
        });
        let none = with_resources(&[], &[]);
        let got = resources(&p, &none, 1 << 30, &Default::default()).unwrap();
        assert_eq!(
            (
                got.cpu_shares,
                got.cpu_quota,
                got.cpu_period,
                got.memory_limit_in_bytes
            ),
            (1024, 100_000, 100_000, 256 << 20)
        );
        let own = with_resources(
            &[("cpu", Str("100m".into()))],
            &[("memory", Str("64Mi".into()))],
        );
        let got = resources(&p, &own, 1 << 30, &Default::default()).unwrap();
        assert_eq!(
            (got.cpu_shares, got.cpu_quota, got.memory_limit_in_bytes),
            (102, 100_000, 64 << 20)
        );
    }

    #[test]
    fn security_context() {
        let mut p = pod();
        p.spec.security_context = Some(api::PodSecurityContext {
            run_as_user: Some(1000),
            run_as_group: Some(1000),
            supplemental_groups: vec![5],
            fs_group: Some(2000),
            ..Default::default()
        });
        let c = api::Container {
            name: "c".into(),
            security_context: Some(Box::new(api::SecurityContext {
                run_as_user: Some(1001),
                read_only_root_filesystem: Some(true),
                allow_privilege_escalation: Some(false),
                capabilities: Some(api::Capabilities {
                    add: vec!["NET_ADMIN".into()],
                    drop: vec!["ALL".into()],
                }),
                ..Default::default()
            })),
            ..Default::default()
        };
        let s = security(&p, &c, sc(), &ImageUser::Unset).unwrap();
        assert_eq!(
            s,
            ContainerSecurity {
                privileged: false,
                namespace_options: NamespaceOptions {
                    network: NamespaceMode::Pod,
                    pid: NamespaceMode::Container,
                    ipc: NamespaceMode::Pod,
                    userns: None,
                },
                pid_target: String::new(),
                run_as_user: Some(1001),
                run_as_group: Some(1000),
                supplemental_groups: vec![5, 2000],
                readonly_rootfs: true,
                no_new_privs: true,
                add_capabilities: vec!["NET_ADMIN".into()],
                drop_capabilities: vec!["ALL".into()],
                seccomp: SecurityProfile::default(),
                apparmor: None,
            }
        );
        // runAsNonRoot
        let non_root = |user: Option<i64>| api::Container {
            name: "c".into(),
            security_context: Some(Box::new(api::SecurityContext {
                run_as_non_root: Some(true),
                run_as_user: user,
                ..Default::default()
            })),
            ..Default::default()
        };
        let plain = pod();
        // kubelet: verifyRunAsNonRoot — an explicit runAsUser decides, else the image's user.
        let who = format!(
            "{}_{}({})",
            plain.metadata.name, plain.metadata.namespace, plain.metadata.uid
        );
        let cases: [(Option<i64>, ImageUser, Result<(), String>); 7] = [
            (Some(1), ImageUser::Unset, Ok(())),
            (Some(1), ImageUser::Uid(0), Ok(())),
            (
                Some(0),
                ImageUser::Uid(1000),
                Err(format!(
                    "container's runAsUser breaks non-root policy (pod: {who:?}, container: c)"
                )),
            ),
            (None, ImageUser::Uid(1000), Ok(())),
            (
                None,
                ImageUser::Uid(0),
                Err(format!(
                    "container has runAsNonRoot and image will run as root (pod: {who:?}, container: c)"
                )),
            ),
            (
                None,
                ImageUser::Unset,
                Err(format!(
                    "container has runAsNonRoot and image will run as root (pod: {who:?}, container: c)"
                )),
            ),
            (
                None,
                ImageUser::Name("app".into()),
                Err(format!(
                    "container has runAsNonRoot and image has non-numeric user (app), cannot verify user is non-root (pod: {who:?}, container: c)"
                )),
            ),
        ];
        for (user, image, want) in cases {
            let got = security(&plain, &non_root(user), sc(), &image)
                .map(|_| ())
                .map_err(|e| e.to_string());
            assert_eq!(got, want, "runAsUser {user:?}, image {image:?}");
            assert_eq!(needs_image_user(&plain, &non_root(user)), user.is_none());
        }
        // Without runAsNonRoot the image's user is not needed, whoever it is.
        assert!(!needs_image_user(&plain, &api::Container::default()));
        assert!(security(&plain, &api::Container::default(), sc(), &ImageUser::Uid(0)).is_ok());
    }

    #[test]
    fn container_config_basics() {
        let p = pod();
        let c = api::Container {
            name: "app".into(),
            image: "busybox:1.36".into(),
            working_dir: Some("/work".into()),
            tty: true,
            ..Default::default()
        };
        let mounts = vec![Mount {
            container_path: "/data".into(),
            host_path: "/srv".into(),
            readonly: true,
            ..Default::default()
        }];
        let cfg = container_config(
            &p,
            &c,
            4,
            "10.0.0.2",
            mounts.clone(),
            sc(),
            &ImageUser::Unset,
        )
        .unwrap();
        assert_eq!(cfg.name, "app");
        assert_eq!(cfg.attempt, 4);
        assert_eq!(cfg.image, "busybox:1.36");
        assert_eq!(cfg.working_dir, "/work");
        assert_eq!(cfg.log_path, "app/4.log");
        assert_eq!(cfg.mounts, mounts);
        assert!(cfg.tty);
        assert_eq!(cfg.labels, labels::container_labels(&p, &c));
        assert_eq!(cfg.annotations, labels::container_annotations(&p, &c, 4));
        assert_eq!(cfg.security.namespace_options.pid, NamespaceMode::Container);
        assert_eq!(cfg.resources.cpu_shares, 2);
    }

    #[test]
    fn image_names() {
        let ok = [
            ("busybox", "busybox:latest"),
            ("busybox:1.36", "busybox:1.36"),
            ("library/busybox", "library/busybox:latest"),
            ("localhost:5000/app", "localhost:5000/app:latest"),
            ("localhost:5000/app:v1", "localhost:5000/app:v1"),
            (
                "Registry.Example.com/app",
                "Registry.Example.com/app:latest",
            ),
            ("nginx@sha256:abc123", "nginx@sha256:abc123"),
            ("nginx:1.25@sha256:abc123", "nginx:1.25@sha256:abc123"),
        ];
        for (i, want) in ok {
            assert_eq!(image_with_default_tag(i).as_deref(), Ok(want), "{i}");
        }
        for bad in [
            "",
            "Busybox",
            "bad image",
            "nginx:",
            "nginx@sha256",
            "/abs",
            "a//b",
        ] {
            assert!(
                matches!(
                    image_with_default_tag(bad),
                    Err(ConfigError::InvalidImageName { .. })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn pull_policy_defaults() {
        let c = |image: &str, p: Option<PullPolicy>| api::Container {
            image: image.into(),
            image_pull_policy: p,
            ..Default::default()
        };
        let cases = [
            (c("busybox", None), PullPolicy::Always),
            (c("busybox:latest", None), PullPolicy::Always),
            (c("busybox:1.36", None), PullPolicy::IfNotPresent),
            (c("localhost:5000/app", None), PullPolicy::Always),
            (c("busybox@sha256:abc", None), PullPolicy::IfNotPresent),
            (c("busybox", Some(PullPolicy::Never)), PullPolicy::Never),
        ];
        for (cont, want) in cases {
            assert_eq!(pull_policy(&cont), want, "{}", cont.image);
        }
    }

    fn profile(type_: &str, localhost: Option<&str>) -> api::SecurityProfile {
        api::SecurityProfile {
            type_: type_.into(),
            localhost_profile: localhost.map(Into::into),
        }
    }

    #[test]
    fn seccomp_profiles_follow_the_kubelet() {
        use ProfileKind::*;
        let with = |pod_p: Option<api::SecurityProfile>, c_p: Option<api::SecurityProfile>| {
            let mut p = pod();
            p.spec.security_context = Some(api::PodSecurityContext {
                seccomp_profile: pod_p,
                ..Default::default()
            });
            let mut c = p.spec.containers[0].clone();
            c.security_context = Some(Box::new(api::SecurityContext {
                seccomp_profile: c_p,
                ..Default::default()
            }));
            (p, c)
        };
        let rd = |seccomp_default| NodeParams {
            seccomp_root: Path::new("/r/seccomp"),
            seccomp_default,
            memory_capacity: 1 << 30,
            cpu_capacity_milli: 4000,
            swap: Default::default(),
            host_ip: "",
            objects: None,
        };
        let kind = |r: Result<SecurityProfile, ConfigError>| r.map(|p| (p.kind, p.localhost_ref));
        // (pod, container, --seccomp-default) → profile
        type Row = (
            Option<api::SecurityProfile>,
            Option<api::SecurityProfile>,
            bool,
            Result<(ProfileKind, &'static str), &'static str>,
        );
        let rows: Vec<Row> = vec![
            (None, None, false, Ok((Unconfined, ""))),
            (None, None, true, Ok((RuntimeDefault, ""))),
            (
                Some(profile("RuntimeDefault", None)),
                None,
                false,
                Ok((RuntimeDefault, "")),
            ),
            (
                Some(profile("RuntimeDefault", None)),
                Some(profile("Unconfined", None)),
                true,
                Ok((Unconfined, "")),
            ),
            (
                None,
                Some(profile("Localhost", Some("prof/etcd.json"))),
                false,
                Ok((Localhost, "/r/seccomp/prof/etcd.json")),
            ),
            (
                None,
                Some(profile("Localhost", None)),
                false,
                Err("needs localhostProfile"),
            ),
            (
                None,
                Some(profile("Localhost", Some("../etc/x"))),
                false,
                Err("descending path"),
            ),
            (
                None,
                Some(profile("Localhost", Some("/abs"))),
                false,
                Err("descending path"),
            ),
            (
                None,
                Some(profile("RuntimeDefault", Some("x"))),
                false,
                Err("only valid with type Localhost"),
            ),
            (
                Some(profile("runtime/default", None)),
                None,
                false,
                Err("is not RuntimeDefault"),
            ),
        ];
        for (i, (pp, cp, default_runtime, want)) in rows.into_iter().enumerate() {
            let (p, c) = with(pp, cp);
            let got = kind(seccomp_profile(&p, Some(&c), rd(default_runtime)));
            match (got, want) {
                (Ok((k, r)), Ok((wk, wr))) => assert_eq!((k, r.as_str()), (wk, wr), "row {i}"),
                (Err(e), Err(msg)) => assert!(e.to_string().contains(msg), "row {i}: {e}"),
                (got, want) => panic!("row {i}: got {got:?}, want {want:?}"),
            }
        }
        // runtimeClassName is the CRI runtime handler.
        let mut rc = pod();
        rc.spec.runtime_class_name = Some("nvidia".into());
        assert_eq!(
            sandbox_config(&rc, 0, params(&host_dns())).runtime_handler,
            "nvidia"
        );
        assert_eq!(
            sandbox_config(&pod(), 0, params(&host_dns())).runtime_handler,
            ""
        );
        // The sandbox gets the pod-level profile.
        let (p, _) = with(Some(profile("RuntimeDefault", None)), None);
        let dns = host_dns();
        let sb = sandbox_config(&p, 0, params(&dns));
        assert_eq!(sb.seccomp.kind, RuntimeDefault);
    }

    #[test]
    fn apparmor_profiles_field_then_annotation_then_pod() {
        use ProfileKind::*;
        let mut p = pod();
        let mut c = p.spec.containers[0].clone();
        assert_eq!(
            apparmor_profile(&p, &c).unwrap(),
            None,
            "unset: the runtime default"
        );
        p.spec.security_context = Some(api::PodSecurityContext {
            app_armor_profile: Some(profile("Unconfined", None)),
            ..Default::default()
        });
        assert_eq!(apparmor_profile(&p, &c).unwrap().unwrap().kind, Unconfined);
        p.metadata.annotations.insert(
            format!("{APPARMOR_ANNOTATION_PREFIX}nginx"),
            "localhost/k8s-nginx".into(),
        );
        let got = apparmor_profile(&p, &c).unwrap().unwrap();
        assert_eq!(
            (got.kind, got.localhost_ref.as_str()),
            (Localhost, "k8s-nginx")
        );
        c.security_context = Some(Box::new(api::SecurityContext {
            app_armor_profile: Some(profile("RuntimeDefault", None)),
            ..Default::default()
        }));
        assert_eq!(
            apparmor_profile(&p, &c).unwrap().unwrap().kind,
            RuntimeDefault
        );
        c.security_context = None;
        p.metadata
            .annotations
            .insert(format!("{APPARMOR_ANNOTATION_PREFIX}nginx"), "bogus".into());
        let e = apparmor_profile(&p, &c).unwrap_err().to_string();
        assert!(
            e.contains("container.apparmor.security.beta.kubernetes.io/nginx"),
            "{e}"
        );
    }
}
