//! The subset of the Kubernetes API that picolet acts on: every Kubernetes type of picolet.
//!
//! Owns: the serde shapes of `Pod` (spec and status), ConfigMap and Secret as they appear in
//! manifests and on the wire; in [`cluster`] (feature `apiserver`) those of cluster mode
//! (Node, Lease, lists, watch events, `Status`). Field names are the upstream JSON names (camelCase). Unknown fields are tolerated by
//! serde (no `deny_unknown_fields`) so real manifests load; `manifest.rs` reports them at
//! debug level.
//!
//! Must never: do I/O, apply defaults or validate — that is `manifest.rs`'s job. Types are
//! plain data so every other module can clone and compare them.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[cfg(feature = "apiserver")]
pub mod cluster;
mod decode;
pub use decode::{
    DecodeError, JsonError, YamlError, from_json_slice, from_value, from_yaml, from_yaml_value,
    yaml_value,
};

/// Annotation keys picolet sets on static pods (kubelet: `pkg/kubelet/types/pod_update.go`).
pub const ANNOTATION_CONFIG_SOURCE: &str = "kubernetes.io/config.source";
pub const ANNOTATION_CONFIG_HASH: &str = "kubernetes.io/config.hash";
pub const ANNOTATION_CONFIG_SEEN: &str = "kubernetes.io/config.seen";
pub const ANNOTATION_CONFIG_MIRROR: &str = "kubernetes.io/config.mirror";

/// Kubernetes `v1/Pod`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pod {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: PodSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<PodStatus>,
    /// Where a static pod was read: its manifest file, or the manifest URL. Not part of the
    /// object (never serialized or decoded): the node API names it when asked to delete the
    /// pod, which only removing or editing that file can do.
    #[serde(skip)]
    pub origin: Option<String>,
}

/// The one way a `Pod` is decoded — manifests, the apiserver's lists and watch events, the
/// offline checkpoint — so its (large) `Deserialize` code exists once in the binary, and every
/// type error names its field path (`spec.containers[0].ports[0].containerPort: …`).
pub fn decode_pod(value: &serde_json::Value) -> Result<Pod, DecodeError> {
    decode::from_value(value)
}

impl Pod {
    pub fn uid(&self) -> &str {
        &self.metadata.uid
    }
    /// `<namespace>/<name>`: kubelet's "full name" used for static-pod exclusivity.
    pub fn full_name(&self) -> String {
        format!("{}/{}", self.metadata.namespace, self.metadata.name)
    }
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata.annotations.get(key).map(String::as_str)
    }
    /// A pod from the file or http source (kubelet: `kubetypes.IsStaticPod`).
    pub fn is_static(&self) -> bool {
        matches!(self.annotation(ANNOTATION_CONFIG_SOURCE), Some(s) if s != "api")
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub generate_name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_grace_period_seconds: Option<i64>,
    /// The apiserver's count of spec changes (a resize bumps it): the resize conditions'
    /// `observedGeneration`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub generation: i64,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owner_references: Vec<OwnerReference>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerReference {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub init_containers: Vec<Container>,
    #[serde(default)]
    pub containers: Vec<Container>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,
    /// `Always` | `OnFailure` | `Never`; defaulted to `Always`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<RestartPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period_seconds: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
    /// `ClusterFirst` | `ClusterFirstWithHostNet` | `Default` | `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_config: Option<PodDnsConfig>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub node_name: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub host_network: bool,
    // The API spells these `hostPID`/`hostIPC`, not camelCase's `hostPid`/`hostIpc`.
    #[serde(
        default,
        rename = "hostPID",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub host_pid: bool,
    #[serde(
        default,
        rename = "hostIPC",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub host_ipc: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_process_namespace: Option<bool>,
    /// kubelet: the Service variables of the pod's namespace (API pods; default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_service_links: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subdomain: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<PodSecurityContext>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub automount_service_account_token: Option<bool>,
    /// Only its required node affinity terms are read (admission, kubelet's NodeAffinity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<serde_json::Value>,
    /// Checked against the node's labels at admission (kubelet: the NodeAffinity predicate).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    // Carried so that the field policy (`manifest::fields`) sees them after any round trip
    // (checkpoint, mirror pod): picolet warns about or refuses these, see its table.
    /// Extra `/etc/hosts` lines (kubelet-managed hosts file).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_aliases: Vec<HostAlias>,
    #[serde(
        default,
        rename = "setHostnameAsFQDN",
        skip_serializing_if = "Option::is_none"
    )]
    pub set_hostname_as_fqdn: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname_override: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<LocalObjectReference>,
    /// kubelet: `GeneratePodReadyCondition` — Ready waits for each gate's condition.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub readiness_gates: Vec<PodReadinessGate>,
    /// Pod-level resources (KEP-2837, `PodLevelResources`): cpu and memory for the pod as a
    /// whole — its QoS class, its cgroup, admission, and the limits of containers that set
    /// none (`qos::pod_level`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Debug containers added through `pods/ephemeralcontainers`: the same model as a
    /// container (kubelet casts `EphemeralContainerCommon` to `v1.Container`), with
    /// [`Container::target_container_name`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ephemeral_containers: Vec<Container>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_users: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_claims: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_class_name: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RestartPolicy {
    Always,
    OnFailure,
    Never,
}

/// One of a container's `restartPolicyRules`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRestartRule {
    /// `Restart` (`RestartAllContainers` is refused by the field policy).
    #[serde(default)]
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_codes: Option<ContainerRestartRuleOnExitCodes>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRestartRuleOnExitCodes {
    /// `In` | `NotIn`.
    #[serde(default)]
    pub operator: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<i32>,
}

/// Will a container that exited with `exit_code` be started again? (kubelet:
/// `podutil.ContainerShouldRestart`, ContainerRestartRules on by default since 1.35.) On a
/// container with its own `restartPolicy`, the first of its `restartPolicyRules` that matches
/// the exit code decides when its action is `Restart`; else its own policy; without one, the
/// pod's (`Always` when unset).
pub fn container_should_restart(c: &Container, spec: &PodSpec, exit_code: i32) -> bool {
    if let Some(own) = c.restart_policy {
        if let Some(rule) = c.restart_policy_rules.iter().find(|r| r.matches(exit_code))
            && rule.action == "Restart"
        {
            return true;
        }
        return policy_restarts(own, exit_code);
    }
    policy_restarts(
        spec.restart_policy.unwrap_or(RestartPolicy::Always),
        exit_code,
    )
}

/// Can the container be started again at all? (kubelet: `podutil.IsContainerRestartable`.)
pub fn is_container_restartable(c: &Container, spec: &PodSpec) -> bool {
    match c.restart_policy {
        Some(own) => {
            own != RestartPolicy::Never
                || c.restart_policy_rules.iter().any(|r| r.action == "Restart")
        }
        None => spec.restart_policy != Some(RestartPolicy::Never),
    }
}

fn policy_restarts(policy: RestartPolicy, exit_code: i32) -> bool {
    match policy {
        RestartPolicy::Always => true,
        RestartPolicy::OnFailure => exit_code != 0,
        RestartPolicy::Never => false,
    }
}

impl ContainerRestartRule {
    /// kubelet: `findMatchingContainerRestartRule` — a rule without exit codes, or with an
    /// unknown operator, matches nothing.
    fn matches(&self, exit_code: i32) -> bool {
        let Some(codes) = &self.exit_codes else {
            return false;
        };
        let listed = codes.values.contains(&exit_code);
        match codes.operator.as_str() {
            "In" => listed,
            "NotIn" => !listed,
            _ => false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PullPolicy {
    Always,
    IfNotPresent,
    Never,
}

/// validation: an environment variable's name (`RelaxedEnvironmentVariableValidation`, GA
/// and locked on since Kubernetes 1.34): printable ASCII without '='. The kubelet (1.37)
/// takes envFrom keys as they come; this is what a CRI `KEY=value` can carry.
pub fn is_env_var_name(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|c| (0x20..=0x7e).contains(&c) && c != b'=')
}

/// `Always` when the tag is `latest`, or there is neither tag nor digest; else
/// `IfNotPresent` (defaults: SetDefaults_Container with `parsers.ParseImageName`).
pub fn default_pull_policy(image: &str) -> PullPolicy {
    let (tag, digest) = image_tag_and_digest(image);
    match tag {
        Some("latest") => PullPolicy::Always,
        None if !digest => PullPolicy::Always,
        _ => PullPolicy::IfNotPresent,
    }
}

/// The tag of an image reference (if any) and whether it has a digest. A `:` before the
/// last `/` is a registry port (`host:5000/repo`), not a tag.
pub fn image_tag_and_digest(image: &str) -> (Option<&str>, bool) {
    let (name, digest) = match image.split_once('@') {
        Some((name, _)) => (name, true),
        None => (image, false),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    (last.split_once(':').map(|(_, tag)| tag), digest)
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodDnsConfig {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nameservers: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub searches: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<PodDnsConfigOption>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodDnsConfigOption {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSecurityContext {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as_user: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as_group: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as_non_root: Option<bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub supplemental_groups: Vec<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs_group: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sysctls: Vec<Sysctl>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seccomp_profile: Option<SecurityProfile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_armor_profile: Option<SecurityProfile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub se_linux_options: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supplemental_groups_policy: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sysctl {
    pub name: String,
    pub value: String,
}

/// A sysctl name in the dotted spelling runc and the allowlist use: a name whose first
/// separator is `/` uses slashes for levels and dots inside names, so the two are swapped
/// (kubelet: `NormalizeName`, `ConvertSysctlVariableToDotsSeparator`).
pub fn sysctl_dots(name: &str) -> String {
    match name.find(['.', '/']) {
        Some(i) if name.as_bytes()[i] == b'/' => name
            .chars()
            .map(|c| match c {
                '/' => '.',
                '.' => '/',
                c => c,
            })
            .collect(),
        _ => name.to_string(),
    }
}

/// A port given by number or by the name of one of the container's ports
/// (`intstr.IntOrString`). `null` is its zero value, `Int(0)`, as upstream's decoder reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum IntOrString {
    Int(i64),
    String(String),
}

impl<'de> Deserialize<'de> for IntOrString {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = IntOrString;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an integer or a string")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<IntOrString, E> {
                Ok(IntOrString::Int(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<IntOrString, E> {
                i64::try_from(v)
                    .map(IntOrString::Int)
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Unsigned(v), &self))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<IntOrString, E> {
                Ok(IntOrString::String(v.to_string()))
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<IntOrString, E> {
                Ok(IntOrString::Int(0))
            }
        }
        d.deserialize_any(V)
    }
}

impl Default for IntOrString {
    fn default() -> Self {
        IntOrString::Int(0)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExecAction {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HttpHeader {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub value: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpGetAction {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default)]
    pub port: IntOrString,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// `HTTP` (default) or `HTTPS`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheme: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub http_headers: Vec<HttpHeader>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TcpSocketAction {
    #[serde(default)]
    pub port: IntOrString,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GrpcAction {
    #[serde(default)]
    pub port: i32,
    /// The service name of `grpc.health.v1.HealthCheckRequest` ("" = the server's health).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SleepAction {
    #[serde(default)]
    pub seconds: i64,
}

/// kubelet: `v1.Probe` (handler fields inlined, as in the API).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Probe {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<ExecAction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_get: Option<HttpGetAction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_socket: Option<TcpSocketAction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc: Option<GrpcAction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_delay_seconds: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_seconds: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_threshold: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_threshold: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period_seconds: Option<i64>,
}

/// kubelet: `v1.LifecycleHandler`. `tcpSocket` is accepted by the API for compatibility
/// and refused when run, as upstream ("invalid handler").
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LifecycleHandler {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<ExecAction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_get: Option<HttpGetAction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_socket: Option<TcpSocketAction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sleep: Option<SleepAction>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lifecycle {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_start: Option<LifecycleHandler>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_stop: Option<LifecycleHandler>,
    /// Carried for the field policy (warned: the runtime's stop signal is used).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_signal: Option<serde_json::Value>,
}

/// The rarely set parts (probes, lifecycle hooks, security context: 1,528 of its 1,944
/// bytes when inline) are boxed: a pod holds its containers for its whole life.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Container {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub image: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<ContainerPort>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_mounts: Vec<VolumeMount>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<PullPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<Box<SecurityContext>>,
    /// On an init container, `Always` makes it a sidecar (restartable init container).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<RestartPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_message_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_message_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<Box<Lifecycle>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub liveness_probe: Option<Box<Probe>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness_probe: Option<Box<Probe>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_probe: Option<Box<Probe>>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stdin: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stdin_once: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tty: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_from: Vec<EnvFromSource>,
    /// kubelet: ContainerRestartRules — on a container with its own `restartPolicy`, the
    /// first rule matching the exit code decides (see [`container_should_restart`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restart_policy_rules: Vec<ContainerRestartRule>,
    /// In-place resize: per resource (`[{resourceName, restartPolicy}]`), whether a change
    /// restarts the container (`RestartContainer`) or not (`NotRequired`, the default).
    /// Kept as JSON: read in one place (`plan::add_resize`), a typed list costs its decoder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resize_policy: Option<serde_json::Value>,
    // Carried for the field policy (`manifest::fields`): refused until implemented.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_devices: Option<serde_json::Value>,
    /// Ephemeral containers only (`spec.ephemeralContainers[].targetContainerName`): the
    /// container whose process namespace it joins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_container_name: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerPort {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub container_port: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_port: Option<i32>,
    /// The API spells it `hostIP`.
    #[serde(default, rename = "hostIP", skip_serializing_if = "Option::is_none")]
    pub host_ip: Option<String>,
    /// `TCP` (default) | `UDP` | `SCTP`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvVar {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Not resolved yet (configMap/secret/fieldRef); kept so manifests load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_from: Option<serde_json::Value>,
}

/// Quantities are kept as the strings the user wrote (`"100m"`, `"64Mi"`); `resources.rs`
/// style parsing lives with the code that needs numbers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRequirements {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: BTreeMap<String, Quantity>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: BTreeMap<String, Quantity>,
    /// Dynamic resource allocation claims: refused (`manifest::fields`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claims: Option<serde_json::Value>,
}

/// A resource quantity; YAML lets users write `cpu: 1` (a number) or `cpu: "500m"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Quantity {
    Int(i64),
    Float(f64),
    Str(String),
}

impl Quantity {
    pub fn as_string(&self) -> String {
        match self {
            Quantity::Int(i) => i.to_string(),
            Quantity::Float(f) => f.to_string(),
            Quantity::Str(s) => s.clone(),
        }
    }

    /// `ceil(value × 10^scale)`: scale 3 gives milli-units (CPU), 0 gives bytes (memory).
    pub fn scaled(&self, scale: i32) -> Option<i64> {
        match self {
            Quantity::Int(i) => i.checked_mul(10i64.checked_pow(u32::try_from(scale).ok()?)?),
            Quantity::Float(f) => parse_quantity(&f.to_string(), scale),
            Quantity::Str(s) => parse_quantity(s, scale),
        }
    }
}

/// Parse a Kubernetes quantity and return `ceil(value × 10^scale)` (scale 3 = milli-units
/// for CPU, 0 = bytes for memory). Accepts decimal (`m`, `k`, `M`, `G`, `T`, `P`, `E`),
/// binary (`Ki` … `Ei`) suffixes and e-notation (`1e3`, `5E-1`). Negative or overflowing
/// values are rejected (`None`).
pub fn parse_quantity(s: &str, scale: i32) -> Option<i64> {
    let s = s.trim();
    let s = s.strip_prefix('+').unwrap_or(s);
    let num_len = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(num_len);
    let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    let digits = format!("{int_part}{frac_part}");
    if digits.len() > 30 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mantissa: i128 = digits.parse().ok()?;
    let mut exp10: i32 = -i32::try_from(frac_part.len()).ok()?;
    let mut mult: i128 = 1;
    match suffix {
        "" => {}
        "m" => exp10 -= 3,
        "k" => exp10 += 3,
        "M" => exp10 += 6,
        "G" => exp10 += 9,
        "T" => exp10 += 12,
        "P" => exp10 += 15,
        "E" => exp10 += 18,
        "Ki" => mult = 1 << 10,
        "Mi" => mult = 1 << 20,
        "Gi" => mult = 1 << 30,
        "Ti" => mult = 1 << 40,
        "Pi" => mult = 1 << 50,
        "Ei" => mult = 1 << 60,
        _ => {
            let e = suffix.strip_prefix(['e', 'E'])?;
            let (sign, digits) = match e.strip_prefix('-') {
                Some(d) => (-1, d),
                None => (1, e.strip_prefix('+').unwrap_or(e)),
            };
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            exp10 += sign * digits.parse::<i32>().ok().filter(|n| *n <= 100)?;
        }
    }
    let value = mantissa.checked_mul(mult)?;
    let pow = exp10 + scale;
    let scaled = if pow >= 0 {
        value.checked_mul(10i128.checked_pow(u32::try_from(pow).ok()?)?)?
    } else {
        let div = match 10i128.checked_pow(pow.unsigned_abs()) {
            Some(d) => d,
            None => return Some(i64::from(value > 0)), // far below one unit: round up
        };
        (value + div - 1) / div
    };
    i64::try_from(scaled).ok()
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeMount {
    pub name: String,
    pub mount_path: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_path: Option<String>,
    /// `None` | `HostToContainer` | `Bidirectional`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount_propagation: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_path_expr: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recursive_read_only: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecurityContext {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub privileged: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as_user: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as_group: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as_non_root: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_root_filesystem: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_privilege_escalation: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Capabilities>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seccomp_profile: Option<SecurityProfile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_armor_profile: Option<SecurityProfile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proc_mount: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub se_linux_options: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostAlias {
    #[serde(default)]
    pub ip: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hostnames: Vec<String>,
}

/// `seccompProfile` and `appArmorProfile` (same shape upstream: `SeccompProfile`,
/// `AppArmorProfile`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecurityProfile {
    /// `RuntimeDefault` | `Unconfined` | `Localhost`.
    #[serde(default, rename = "type")]
    pub type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub localhost_profile: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Capabilities {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drop: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    /// Required (validation says so); defaulted here so a missing name is a validation error
    /// naming the volume's index, not a type error.
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_path: Option<HostPathVolumeSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub empty_dir: Option<EmptyDirVolumeSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapVolumeSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<SecretVolumeSource>,
    #[serde(
        default,
        rename = "downwardAPI",
        skip_serializing_if = "Option::is_none"
    )]
    pub downward_api: Option<DownwardApiVolumeSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub projected: Option<ProjectedVolumeSource>,
    /// An inline ephemeral CSI volume, published by a registered node plugin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub csi: Option<CsiVolumeSource>,
    /// An OCI image (or artifact) mounted read-only (KEP-4639): pulled by picolet, mounted
    /// by the runtime (CRI `Mount.image`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageVolumeSource>,
    /// Other volume kinds are kept verbatim so a manifest that uses them still parses;
    /// validation rejects the pod with a clear message naming the volume.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub other: BTreeMap<String, serde_json::Value>,
}

/// `image` of a volume (upstream `ImageVolumeSource`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageVolumeSource {
    /// Required for a pod: the image reference, as a container's `image`.
    #[serde(default)]
    pub reference: String,
    /// Defaulted as a container's `imagePullPolicy` (from the reference's tag).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_policy: Option<PullPolicy>,
}

/// `csi` of a volume: an inline ephemeral CSI volume.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CsiVolumeSource {
    /// Required: the registered driver's name.
    #[serde(default)]
    pub driver: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs_type: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub volume_attributes: BTreeMap<String, String>,
    /// A Secret of the pod's namespace, sent as the publish call's secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_publish_secret_ref: Option<LocalObjectReference>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostPathVolumeSource {
    pub path: String,
    /// `""` | `DirectoryOrCreate` | `Directory` | `FileOrCreate` | `File` | `Socket` | …
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EmptyDirVolumeSource {
    /// `""` (disk) | `Memory` (tmpfs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub medium: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_limit: Option<Quantity>,
}

/// A file mode (`mode`, `defaultMode`). YAML 1.1 — what upstream's parser reads — takes
/// `0400` as octal, and every Kubernetes example writes modes that way; picolet's YAML 1.2
/// parser hands it over as the string "0400", so strings of octal digits with a leading `0`
/// (or `0o`) are read as octal here. Integers are taken as they are (JSON has only decimal).
fn file_mode<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i32>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Mode {
        Int(i64),
        Str(String),
    }
    let invalid = |what: &str| {
        serde::de::Error::custom(format!(
            "invalid file mode {what}: expected an integer such as 0644 or 420"
        ))
    };
    match Option::<Mode>::deserialize(d)? {
        None => Ok(None),
        Some(Mode::Int(i)) => i32::try_from(i)
            .map(Some)
            .map_err(|_| invalid(&i.to_string())),
        Some(Mode::Str(s)) => {
            let t = s.trim();
            let parsed = if let Some(oct) = t.strip_prefix("0o") {
                i32::from_str_radix(oct, 8).ok()
            } else if t.len() > 1 && t.starts_with('0') {
                i32::from_str_radix(&t[1..], 8).ok()
            } else {
                t.parse::<i32>().ok()
            };
            parsed.map(Some).ok_or_else(|| invalid(&format!("{s:?}")))
        }
    }
}

/// `items[]` of configMap, secret and their projections.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyToPath {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub path: String,
    #[serde(
        default,
        deserialize_with = "file_mode",
        skip_serializing_if = "Option::is_none"
    )]
    pub mode: Option<i32>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapVolumeSource {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<KeyToPath>,
    #[serde(
        default,
        deserialize_with = "file_mode",
        skip_serializing_if = "Option::is_none"
    )]
    pub default_mode: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecretVolumeSource {
    #[serde(default)]
    pub secret_name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<KeyToPath>,
    #[serde(
        default,
        deserialize_with = "file_mode",
        skip_serializing_if = "Option::is_none"
    )]
    pub default_mode: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
}

/// `fieldRef` of env and downwardAPI items.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectFieldSelector {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default)]
    pub field_path: String,
}

/// `resourceFieldRef` of env and downwardAPI items.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceFieldSelector {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub container_name: String,
    #[serde(default)]
    pub resource: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub divisor: Option<Quantity>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DownwardApiVolumeFile {
    #[serde(default)]
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_ref: Option<ObjectFieldSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_field_ref: Option<ResourceFieldSelector>,
    #[serde(
        default,
        deserialize_with = "file_mode",
        skip_serializing_if = "Option::is_none"
    )]
    pub mode: Option<i32>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DownwardApiVolumeSource {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<DownwardApiVolumeFile>,
    #[serde(
        default,
        deserialize_with = "file_mode",
        skip_serializing_if = "Option::is_none"
    )]
    pub default_mode: Option<i32>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectedVolumeSource {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<VolumeProjection>,
    #[serde(
        default,
        deserialize_with = "file_mode",
        skip_serializing_if = "Option::is_none"
    )]
    pub default_mode: Option<i32>,
}

/// One source of a projected volume; exactly one field is set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeProjection {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapProjection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<SecretProjection>,
    #[serde(
        default,
        rename = "downwardAPI",
        skip_serializing_if = "Option::is_none"
    )]
    pub downward_api: Option<DownwardApiProjection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_token: Option<ServiceAccountTokenProjection>,
    /// Refused (`manifest::fields`): no trust bundles without the apiserver's beta API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_trust_bundle: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_certificate: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapProjection {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<KeyToPath>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecretProjection {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<KeyToPath>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DownwardApiProjection {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<DownwardApiVolumeFile>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceAccountTokenProjection {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub audience: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiration_seconds: Option<i64>,
    #[serde(default)]
    pub path: String,
}

/// `envFrom[]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvFromSource {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub prefix: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_ref: Option<LocalObjectRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalObjectRef>,
}

/// `imagePullSecrets[]`: a name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LocalObjectReference {
    #[serde(default)]
    pub name: String,
}

/// `configMapRef` / `secretRef` of envFrom.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalObjectRef {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
}

/// `configMapKeyRef` / `secretKeyRef` of env.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeySelector {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
}

/// Kubernetes `v1/ConfigMap`. `data` is text, `binaryData` base64 (as on the wire).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMap {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub data: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub binary_data: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub immutable: Option<bool>,
}

/// Kubernetes `v1/Secret`. `data` is base64 (as on the wire), `stringData` text that wins
/// over `data` for the same key (the apiserver merges it on write; local files get the
/// same treatment).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Secret {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub data: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub string_data: BTreeMap<String, String>,
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub immutable: Option<bool>,
}

// ---------------------------------------------------------------------------------------
// Status (computed by status.rs, served later by the local API and the apiserver client).

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<PodPhase>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<PodCondition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, rename = "hostIP", skip_serializing_if = "Option::is_none")]
    pub host_ip: Option<String>,
    /// kubelet: `hostIPs`, the node's addresses (same shape as `podIPs`).
    #[serde(default, rename = "hostIPs", skip_serializing_if = "Vec::is_empty")]
    pub host_ips: Vec<PodIp>,
    #[serde(default, rename = "podIP", skip_serializing_if = "Option::is_none")]
    pub pod_ip: Option<String>,
    #[serde(default, rename = "podIPs", skip_serializing_if = "Vec::is_empty")]
    pub pod_ips: Vec<PodIp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub init_container_statuses: Vec<ContainerStatus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub container_statuses: Vec<ContainerStatus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ephemeral_container_statuses: Vec<ContainerStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qos_class: Option<String>,
    /// The pod generation this status was made for (kubelet: PodObservedGenerationTracking).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub observed_generation: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PodPhase {
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

impl PodPhase {
    pub fn is_terminal(self) -> bool {
        matches!(self, PodPhase::Succeeded | PodPhase::Failed)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PodIp {
    pub ip: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodCondition {
    /// The kubelet's own types are static strings: every pod holds five conditions.
    #[serde(rename = "type")]
    pub type_: Cow<'static, str>,
    /// `"True"` | `"False"` | `"Unknown"`.
    pub status: Cow<'static, str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The pod generation the condition was set for (the resize conditions carry it).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub observed_generation: i64,
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

/// `spec.readinessGates[]`: a pod condition type that must be True for the pod to be Ready.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodReadinessGate {
    pub condition_type: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStatus {
    pub name: String,
    #[serde(default)]
    pub state: ContainerState,
    #[serde(default)]
    pub last_state: ContainerState,
    pub ready: bool,
    pub restart_count: i32,
    pub image: String,
    #[serde(default, rename = "imageID")]
    pub image_id: String,
    #[serde(
        default,
        rename = "containerID",
        skip_serializing_if = "Option::is_none"
    )]
    pub container_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<bool>,
    /// kubelet (InPlacePodVerticalScaling): the requests allocated to the container.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub allocated_resources: BTreeMap<String, Quantity>,
    /// kubelet: what the container runs with (the actuated values while it runs, else the
    /// allocated ones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContainerState {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<ContainerStateWaiting>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<ContainerStateRunning>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminated: Option<ContainerStateTerminated>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContainerStateWaiting {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStateRunning {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStateTerminated {
    pub exit_code: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    #[serde(
        default,
        rename = "containerID",
        skip_serializing_if = "Option::is_none"
    )]
    pub container_id: Option<String>,
}

/// Standard base64 (RFC 4648, `+/`, `=` padding optional, ASCII whitespace ignored), as in
/// kubeconfig `*-data` fields, Secret `data` and ConfigMap `binaryData`; `None` on anything else.
pub fn decode_base64(text: &str) -> Option<Vec<u8>> {
    fn value(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    }
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits, mut padding) = (0u32, 0u32, 0usize);
    for c in text.bytes().filter(|c| !c.is_ascii_whitespace()) {
        if c == b'=' {
            padding += 1;
            continue;
        }
        if padding > 0 {
            return None; // data after padding
        }
        acc = (acc << 6) | value(c)?;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    // 6 leftover bits cannot encode a byte; the leftover bits must be zero.
    if bits >= 6 || acc != 0 || padding > 2 {
        return None;
    }
    Some(out)
}

/// Standard base64 with padding (the inverse of [`decode_base64`]).
pub fn encode_base64(bytes: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    type RestartCase = (
        Option<RestartPolicy>,
        Vec<ContainerRestartRule>,
        Option<RestartPolicy>,
        i32,
        bool,
    );

    /// kubelet: `ContainerShouldRestart` — the rule first, then the container's policy, then
    /// the pod's (the cases of upstream's TestContainerShouldRestart and the e2e specs').
    #[test]
    fn container_should_restart_table() {
        use RestartPolicy::*;
        let rule = |action: &str, op: &str, values: &[i32]| ContainerRestartRule {
            action: action.into(),
            exit_codes: Some(ContainerRestartRuleOnExitCodes {
                operator: op.into(),
                values: values.to_vec(),
            }),
        };
        // (container policy, its rules, pod policy, exit code, restarts?)
        let cases: &[RestartCase] = &[
            // rule matches (In): restart whatever the policies say
            (
                Some(Never),
                vec![rule("Restart", "In", &[42])],
                Some(Never),
                42,
                true,
            ),
            // rule does not match: the container's Never
            (
                Some(Never),
                vec![rule("Restart", "In", &[42])],
                Some(Never),
                1,
                false,
            ),
            (
                Some(Never),
                vec![rule("Restart", "NotIn", &[0, 1])],
                Some(Always),
                1,
                false,
            ),
            (
                Some(Never),
                vec![rule("Restart", "NotIn", &[0, 1])],
                Some(Never),
                7,
                true,
            ),
            // the first matching rule decides; an unknown action falls back to the policy
            (
                Some(Never),
                vec![rule("Other", "In", &[3]), rule("Restart", "In", &[3])],
                Some(Never),
                3,
                false,
            ),
            // a rule without exit codes or with an unknown operator matches nothing
            (
                Some(Never),
                vec![ContainerRestartRule {
                    action: "Restart".into(),
                    exit_codes: None,
                }],
                Some(Never),
                0,
                false,
            ),
            (
                Some(Never),
                vec![rule("Restart", "Gt", &[0])],
                Some(Never),
                9,
                false,
            ),
            // the container's policy over the pod's
            (Some(Always), vec![], Some(Never), 1, true),
            (Some(Never), vec![], Some(Always), 1, false),
            (Some(OnFailure), vec![], Some(Always), 0, false),
            (Some(OnFailure), vec![], Some(Never), 2, true),
            // rules are only read with a container policy
            (
                None,
                vec![rule("Restart", "In", &[42])],
                Some(Never),
                42,
                false,
            ),
            // the pod's policy; unset is Always
            (None, vec![], Some(OnFailure), 0, false),
            (None, vec![], Some(OnFailure), 1, true),
            (None, vec![], Some(Never), 1, false),
            (None, vec![], None, 0, true),
        ];
        for (i, (own, rules, pod, code, want)) in cases.iter().enumerate() {
            let c = Container {
                restart_policy: *own,
                restart_policy_rules: rules.clone(),
                ..Container::default()
            };
            let spec = PodSpec {
                restart_policy: *pod,
                ..PodSpec::default()
            };
            assert_eq!(
                container_should_restart(&c, &spec, *code),
                *want,
                "case {i}"
            );
        }
    }

    /// kubelet: `IsContainerRestartable`.
    #[test]
    fn is_container_restartable_table() {
        use RestartPolicy::*;
        let restart_rule = ContainerRestartRule {
            action: "Restart".into(),
            exit_codes: None,
        };
        for (own, rules, pod, want) in [
            (None, vec![], Some(Never), false),
            (None, vec![], None, true),
            (None, vec![], Some(OnFailure), true),
            (Some(Never), vec![], Some(Always), false),
            (Some(Never), vec![restart_rule.clone()], Some(Never), true),
            (Some(OnFailure), vec![], Some(Never), true),
        ] {
            let c = Container {
                restart_policy: own,
                restart_policy_rules: rules,
                ..Container::default()
            };
            let spec = PodSpec {
                restart_policy: pod,
                ..PodSpec::default()
            };
            assert_eq!(is_container_restartable(&c, &spec), want, "{own:?} {pod:?}");
        }
    }

    #[test]
    fn status_field_names_are_the_apis() {
        let s = PodStatus {
            host_ip: Some("192.0.2.1".into()),
            pod_ip: Some("10.0.0.2".into()),
            pod_ips: vec![PodIp {
                ip: "10.0.0.2".into(),
            }],
            container_statuses: vec![ContainerStatus {
                image_id: "sha256:x".into(),
                container_id: Some("containerd://c".into()),
                ..ContainerStatus::default()
            }],
            ..PodStatus::default()
        };
        let v = serde_json::to_value(&s).unwrap();
        for key in ["hostIP", "podIP", "podIPs"] {
            assert!(v.get(key).is_some(), "{key} in {v}");
        }
        assert!(v["containerStatuses"][0].get("imageID").is_some(), "{v}");
        assert!(
            v["containerStatuses"][0].get("containerID").is_some(),
            "{v}"
        );
        let back: PodStatus = serde_json::from_value(v).unwrap();
        assert_eq!(back, s);
    }
}
