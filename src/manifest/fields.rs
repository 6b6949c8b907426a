//! The field policy: what picolet does with every upstream `v1.Pod` field it does not fully
//! implement, in one table.
//!
//! Owns: [`RULES`] and the two checks that apply it:
//! - at decode, in every source ([`classify_unknown`]): a field the model does not read is
//!   either *ignored on purpose* (a rule says so; logged at debug) or not a field of
//!   `v1.Pod` at all (a typo: one WARN naming it);
//! - at admission, for every pod from every source ([`findings`]): a field the model carries
//!   (typed, or verbatim as JSON) that picolet does not act on is *warned* (one WARN per pod)
//!   or *refused* (the pod is not started; its status says why).
//!
//! Every field that must be warned about or refused is carried by the model, so the check
//! sees it whatever the pod went through (a checkpoint, a mirror pod, a restart). The test
//! `tests/field_fidelity.rs` holds the table to the upstream schema: every upstream path the
//! model does not read is covered by a rule, every rule names an upstream path, and every
//! warned or refused path is carried by the model. The README's policy section is generated
//! from this table by the same test.
//!
//! Paths are spelled `spec.containers[].securityContext.procMount`; a rule under
//! `spec.containers[]` applies to `spec.initContainers[]` as well. A rule covers everything
//! below its path.

use serde_json::Value;

/// What picolet does with a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Policy {
    /// Meaningless on one node, or bookkeeping of the control plane: read, never acted on.
    Ignored,
    /// Not implemented: the pod runs without it, and one WARN per pod says so.
    Warned,
    /// Running without it would be unsafe or wrong: the pod is not started.
    Refused,
    /// Carried verbatim by the model and acted on by code (listed so the table is complete).
    Implemented,
}

impl Policy {
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Ignored => "ignored",
            Policy::Warned => "warned",
            Policy::Refused => "refused",
            Policy::Implemented => "implemented",
        }
    }
}

/// One row of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    pub path: &'static str,
    pub policy: Policy,
    /// Values (as JSON text) that need no warning or refusal, e.g. the apiserver's defaults.
    pub allowed: &'static [&'static str],
    pub why: &'static str,
}

const fn rule(path: &'static str, policy: Policy, why: &'static str) -> Rule {
    Rule {
        path,
        policy,
        allowed: &[],
        why,
    }
}

const fn unless(
    path: &'static str,
    policy: Policy,
    allowed: &'static [&'static str],
    why: &'static str,
) -> Rule {
    Rule {
        path,
        policy,
        allowed,
        why,
    }
}

use Policy::{Ignored, Implemented, Refused, Warned};

const C: &str = "spec.containers[]";

/// The table. Order: metadata, pod spec, containers, volumes, status.
pub static RULES: &[Rule] = &[
    // metadata: the control plane's bookkeeping
    rule("metadata.finalizers", Ignored, "apiserver bookkeeping"),
    rule("metadata.generation", Ignored, "apiserver bookkeeping"),
    rule(
        "metadata.managedFields",
        Ignored,
        "server-side apply bookkeeping",
    ),
    rule("metadata.selfLink", Ignored, "deprecated, never set"),
    rule(
        "metadata.ownerReferences[].blockOwnerDeletion",
        Ignored,
        "garbage collector's business",
    ),
    // pod spec: scheduling — the pod is already on this node
    rule(
        "spec.affinity",
        Ignored,
        "scheduling: the scheduler placed the pod (pod affinity, preferred terms)",
    ),
    rule(
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
        Implemented,
        "checked at admission against the node's labels and name (NodeAffinity)",
    ),
    rule("spec.tolerations", Ignored, "scheduling"),
    rule("spec.topologySpreadConstraints", Ignored, "scheduling"),
    rule("spec.schedulerName", Ignored, "scheduling"),
    rule("spec.schedulingGates", Ignored, "scheduling"),
    rule("spec.preemptionPolicy", Ignored, "scheduling"),
    rule(
        "spec.overhead",
        Ignored,
        "scheduling (RuntimeClass overhead)",
    ),
    rule(
        "spec.serviceAccount",
        Ignored,
        "deprecated alias of serviceAccountName",
    ),
    rule(
        "spec.enableServiceLinks",
        Implemented,
        "API pods get the Service variables of their namespace, and default/kubernetes's always (kubelet: envvars.FromServices); static pods none",
    ),
    // pod spec: not implemented yet
    unless(
        "spec.setHostnameAsFQDN",
        Warned,
        &["false"],
        "the hostname stays the short name",
    ),
    rule(
        "spec.hostnameOverride",
        Implemented,
        "the pod's hostname, without a domain (kubelet: GeneratePodHostNameAndDomain)",
    ),
    rule(
        "spec.imagePullSecrets",
        Implemented,
        "`.dockerconfigjson` / `.dockercfg` Secrets (local files for static pods), tried before the node's credentials",
    ),
    rule(
        "spec.readinessGates",
        Implemented,
        "Ready waits for each gate's condition, set by others through the API (kubelet: GeneratePodReadyCondition)",
    ),
    rule(
        "spec.resources",
        Implemented,
        "cpu and memory (KEP-2837): the QoS class, the pod cgroup's shares, quota and memory limit, admission, and the limits of containers that set none; hugepages are not managed",
    ),
    rule(
        "spec.ephemeralContainers",
        Implemented,
        "started once each in the pod's sandbox, never restarted, in targetContainerName's process namespace (kubelet: EphemeralContainersToStart); the field policy of containers is not applied to them",
    ),
    rule(
        "spec.securityContext.seLinuxOptions",
        Warned,
        "no SELinux labels are passed to the runtime",
    ),
    unless(
        "spec.securityContext.supplementalGroupsPolicy",
        Warned,
        &["\"Merge\""],
        "Strict is not enforced: the image's groups are merged",
    ),
    rule(
        "spec.securityContext.fsGroupChangePolicy",
        Ignored,
        "volume ownership is not changed by picolet",
    ),
    rule(
        "spec.securityContext.seLinuxChangePolicy",
        Ignored,
        "no SELinux relabelling",
    ),
    rule("spec.securityContext.windowsOptions", Ignored, "Linux only"),
    // pod spec: refused
    rule(
        "spec.hostUsers",
        Implemented,
        "false: a user namespace of the pod's own, 65536 IDs from 65536 up (the kubelet's defaults), on runtime handlers that report the feature (containerd >= 2.0 with runc >= 1.2, CRI-O); elsewhere the sandbox is refused, never run in the host's",
    ),
    unless(
        "spec.os.name",
        Refused,
        &["\"linux\""],
        "picolet runs Linux pods only",
    ),
    rule(
        "spec.resourceClaims",
        Refused,
        "dynamic resource allocation is not supported",
    ),
    rule(
        "spec.runtimeClassName",
        Implemented,
        "the CRI runtime handler of the same name (no RuntimeClass objects: the name is the handler); a handler the runtime does not know fails the sandbox with the runtime's message",
    ),
    // containers (also init containers)
    rule(
        "spec.containers[].resizePolicy",
        Implemented,
        "in-place resize (the pod's resize subresource, cluster mode): NotRequired updates the running container's cpu and memory (CRI UpdateContainerResources), RestartContainer restarts it; static pods never resize (upstream's rule)",
    ),
    rule(
        "spec.containers[].securityContext.windowsOptions",
        Ignored,
        "Linux only",
    ),
    rule(
        "spec.containers[].livenessProbe",
        Implemented,
        "exec, httpGet, tcpSocket and grpc, with the kubelet's thresholds; a failure restarts the container per restartPolicy",
    ),
    rule(
        "spec.containers[].readinessProbe",
        Implemented,
        "the container's ready flag and the pod's ContainersReady and Ready conditions",
    ),
    rule(
        "spec.containers[].startupProbe",
        Implemented,
        "holds liveness and readiness probes until it succeeds; a failure restarts the container",
    ),
    rule(
        "spec.containers[].lifecycle",
        Implemented,
        "postStart and preStop with exec, httpGet and sleep (tcpSocket fails as upstream: invalid handler)",
    ),
    rule(
        "spec.containers[].lifecycle.stopSignal",
        Warned,
        "the runtime stops the container with the image's STOPSIGNAL (or SIGTERM), not this one",
    ),
    unless(
        "spec.containers[].securityContext.procMount",
        Warned,
        &["\"Default\""],
        "only the default /proc mount is used",
    ),
    rule(
        "spec.containers[].securityContext.seLinuxOptions",
        Warned,
        "no SELinux labels are passed to the runtime",
    ),
    rule(
        "spec.containers[].envFrom",
        Implemented,
        "configMapRef and secretRef with prefix and optional; every key, as the kubelet",
    ),
    rule(
        "spec.containers[].env[].valueFrom.fieldRef",
        Implemented,
        "metadata.name/namespace/uid/labels/annotations, spec.nodeName, spec.serviceAccountName, status.podIP(s), status.hostIP(s)",
    ),
    rule(
        "spec.containers[].env[].valueFrom.resourceFieldRef",
        Implemented,
        "limits/requests of cpu, memory, ephemeral-storage with divisor; a missing limit is the node's",
    ),
    rule(
        "spec.containers[].env[].valueFrom.configMapKeyRef",
        Implemented,
        "a ConfigMap key, optional honoured; a missing one is CreateContainerConfigError",
    ),
    rule(
        "spec.containers[].env[].valueFrom.secretKeyRef",
        Implemented,
        "a Secret key, optional honoured; a missing one is CreateContainerConfigError",
    ),
    rule(
        "spec.containers[].env[].valueFrom.fileKeyRef",
        Refused,
        "not supported: the container would miss its environment",
    ),
    rule(
        "spec.containers[].resources.claims",
        Refused,
        "dynamic resource allocation is not supported",
    ),
    rule(
        "spec.containers[].restartPolicyRules",
        Implemented,
        "the first rule matching the exit code restarts the container, else its restartPolicy, else the pod's (kubelet: ContainerRestartRules)",
    ),
    unless(
        "spec.containers[].restartPolicyRules[].action",
        Refused,
        &["\"Restart\""],
        "RestartAllContainers is not supported: the pod's other containers would not be restarted",
    ),
    rule(
        "spec.containers[].volumeDevices",
        Refused,
        "raw block devices from claims are not supported",
    ),
    unless(
        "spec.containers[].volumeMounts[].recursiveReadOnly",
        Refused,
        &["\"Disabled\""],
        "recursive read-only mounts are not supported: submounts would stay writable",
    ),
    // volumes: kinds other than these are refused by validation, naming the volume and its
    // kind (kept verbatim in `Volume::other`).
    rule(
        "spec.volumes[].configMap",
        Implemented,
        "written by an atomic writer; static pods read local ConfigMap files, API pods the apiserver's",
    ),
    rule(
        "spec.volumes[].secret",
        Implemented,
        "on a tmpfs, written by an atomic writer; static pods read local Secret files, API pods the apiserver's",
    ),
    rule(
        "spec.volumes[].downwardAPI",
        Implemented,
        "fieldRef (metadata.name/namespace/uid/labels/annotations) and resourceFieldRef items",
    ),
    rule(
        "spec.volumes[].projected",
        Implemented,
        "configMap, secret and downwardAPI sources, on a tmpfs",
    ),
    rule(
        "spec.volumes[].projected.sources[].serviceAccountToken",
        Implemented,
        "API pods: a TokenRequest bound to the pod, refreshed at 80 % of its lifetime; a static pod cannot have one (FailedMount)",
    ),
    rule(
        "spec.volumes[].projected.sources[].clusterTrustBundle",
        Refused,
        "ClusterTrustBundles are not supported: the container would miss its trust anchors",
    ),
    rule(
        "spec.volumes[].projected.sources[].podCertificate",
        Refused,
        "pod certificates are not supported: the container would miss its certificate",
    ),
    rule(
        "spec.volumes[].csi",
        Implemented,
        "inline ephemeral volumes, published by a node plugin registered in plugins_registry under --root-dir; pod info always sent; no fsGroup",
    ),
    rule(
        "spec.volumes[].persistentVolumeClaim",
        Refused,
        "no volume attachment on a picolet node: claims need an attach/detach controller and NodeStageVolume (use an inline csi volume)",
    ),
    rule(
        "spec.volumes[].ephemeral",
        Refused,
        "no volume attachment on a picolet node",
    ),
    rule(
        "spec.volumes[].image",
        Implemented,
        "pulled as a container's image, mounted read-only by the runtime (CRI Mount.image): containerd >= 2.1, CRI-O >= 1.31; on an older runtime the container waits with CreateContainerConfigError saying so",
    ),
    rule(
        "spec.volumes[].nfs",
        Refused,
        "network volumes are not supported (mount it on the host and use hostPath)",
    ),
    rule(
        "spec.volumes[].iscsi",
        Refused,
        "network volumes are not supported (mount it on the host and use hostPath)",
    ),
    rule(
        "spec.volumes[].cephfs",
        Refused,
        "network volumes are not supported (mount it on the host and use hostPath)",
    ),
    rule(
        "spec.volumes[].rbd",
        Refused,
        "network volumes are not supported (mount it on the host and use hostPath)",
    ),
    rule(
        "spec.volumes[].glusterfs",
        Refused,
        "network volumes are not supported (mount it on the host and use hostPath)",
    ),
    rule(
        "spec.volumes[].fc",
        Refused,
        "network volumes are not supported (mount it on the host and use hostPath)",
    ),
    rule(
        "spec.volumes[].flexVolume",
        Refused,
        "flex volumes are not supported",
    ),
    rule(
        "spec.volumes[].gitRepo",
        Refused,
        "deprecated upstream; clone in an init container instead",
    ),
    rule(
        "spec.volumes[].awsElasticBlockStore",
        Refused,
        "cloud volumes are not supported",
    ),
    rule(
        "spec.volumes[].azureDisk",
        Refused,
        "cloud volumes are not supported",
    ),
    rule(
        "spec.volumes[].azureFile",
        Refused,
        "cloud volumes are not supported",
    ),
    rule(
        "spec.volumes[].cinder",
        Refused,
        "cloud volumes are not supported",
    ),
    rule(
        "spec.volumes[].gcePersistentDisk",
        Refused,
        "cloud volumes are not supported",
    ),
    rule(
        "spec.volumes[].vsphereVolume",
        Refused,
        "cloud volumes are not supported",
    ),
    rule(
        "spec.volumes[].photonPersistentDisk",
        Refused,
        "cloud volumes are not supported",
    ),
    rule(
        "spec.volumes[].portworxVolume",
        Refused,
        "cloud volumes are not supported",
    ),
    rule(
        "spec.volumes[].quobyte",
        Refused,
        "cloud volumes are not supported",
    ),
    rule(
        "spec.volumes[].scaleIO",
        Refused,
        "cloud volumes are not supported",
    ),
    rule(
        "spec.volumes[].storageos",
        Refused,
        "cloud volumes are not supported",
    ),
    rule(
        "spec.volumes[].flocker",
        Refused,
        "cloud volumes are not supported",
    ),
    // status: written by picolet
    rule(
        "status",
        Ignored,
        "a manifest's status is never read; picolet writes it",
    ),
];

/// A field of one pod that a rule applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// With indices: `spec.containers[1].livenessProbe`.
    pub path: String,
    pub policy: Policy,
    pub why: &'static str,
    /// The volume's name, for a field of `spec.volumes[i]`: what a user looks for.
    pub volume: Option<String>,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.volume {
            Some(name) => write!(f, "{} of volume {name:?} ({})", self.path, self.why),
            None => write!(f, "{} ({})", self.path, self.why),
        }
    }
}

/// `spec.initContainers[3].lifecycle` → `spec.containers[].lifecycle`.
pub fn normalize(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut chars = path.chars();
    while let Some(c) = chars.next() {
        out.push(c);
        if c == '[' {
            for d in chars.by_ref() {
                if d == ']' {
                    out.push(']');
                    break;
                }
            }
        }
    }
    match out.strip_prefix("spec.initContainers[]") {
        Some(rest) => format!("{C}{rest}"),
        None => out,
    }
}

/// The rule for a normalized path: its own, or its nearest ancestor's.
pub fn rule_for(normalized: &str) -> Option<&'static Rule> {
    let mut path = normalized;
    loop {
        if let Some(r) = RULES.iter().find(|r| r.path == path) {
            return Some(r);
        }
        let cut = path.rfind('.')?;
        path = path[..cut].strip_suffix("[]").unwrap_or(&path[..cut]);
    }
}

/// What a source does with a field the model did not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unknown {
    /// A rule ignores it on purpose (logged at debug).
    Ignored(String),
    /// Not a field of `v1.Pod` (a typo, or a newer API than picolet knows): one WARN.
    NotUpstream(String),
}

/// Sorts the unknown field paths of one manifest (from `manifest::parse_document`).
pub fn classify_unknown(unknown: &[String]) -> Vec<Unknown> {
    unknown
        .iter()
        .map(|path| match rule_for(&normalize(path)) {
            Some(_) => Unknown::Ignored(path.clone()),
            None => Unknown::NotUpstream(path.clone()),
        })
        .collect()
}

/// The one line a source logs about a manifest's unknown fields, if any is not upstream's
/// (`what` names the file or URL and the pod); the ignored ones are logged at debug.
pub(crate) fn unknown_fields_warning(what: &str, unknown: &[String]) -> Option<String> {
    let mut not_upstream = Vec::new();
    for u in classify_unknown(unknown) {
        match u {
            Unknown::Ignored(path) => log::debug!("{what}: {path}: ignored on purpose"),
            Unknown::NotUpstream(path) => not_upstream.push(path),
        }
    }
    (!not_upstream.is_empty()).then(|| {
        format!(
            "{what}: not fields of v1.Pod, ignored (a typo?): {}",
            not_upstream.join(", ")
        )
    })
}

/// The warned and refused fields of a pod, given as its JSON (`serde_json::to_value(pod)`):
/// every rule whose path is set to a value it does not allow.
pub fn findings(pod: &Value) -> Vec<Finding> {
    let mut out = Vec::new();
    for rule in RULES {
        if !matches!(rule.policy, Policy::Warned | Policy::Refused) {
            continue;
        }
        let mut roots: Vec<(&str, String)> = vec![(rule.path, String::new())];
        if let Some(rest) = rule.path.strip_prefix(C) {
            roots = vec![
                (rest, "spec.containers".to_string()),
                (rest, "spec.initContainers".to_string()),
            ];
            for (rest, prefix) in roots {
                if let Some(Value::Array(items)) = lookup(pod, &prefix) {
                    for (i, item) in items.iter().enumerate() {
                        let rest = rest.strip_prefix('.').unwrap_or(rest);
                        collect(item, rest, format!("{prefix}[{i}]"), rule, None, &mut out);
                    }
                }
            }
            continue;
        }
        let (path, prefix) = roots.remove(0);
        collect(pod, path, prefix, rule, None, &mut out);
    }
    // With the device manager, extended resources are its business (devices given, or the
    // admission's Warning that no plugin registered the resource).
    #[cfg(not(feature = "device-plugins"))]
    extended_resources(pod, &mut out);
    out
}

/// Why an extended resource is warned about (a build without the `device-plugins` feature).
#[cfg(not(feature = "device-plugins"))]
pub(crate) const EXTENDED_RESOURCE: &str = "an extended resource: admitted as the kubelet admits a static pod's, but no device plugin serves it on picolet, so the container runs without the device";

/// kubelet: `IsExtendedResourceName` — a qualified name outside `kubernetes.io/`
/// (`nvidia.com/gpu`, `smarter-devices/ttyUSB0`), not a `requests.` quota name.
#[cfg(not(feature = "device-plugins"))]
pub(crate) fn is_extended_resource(name: &str) -> bool {
    name.contains('/') && !name.contains("kubernetes.io/") && !name.starts_with("requests.")
}

/// A Warned finding per extended resource a container asks for (its limit, else its
/// request): nothing would tell the user that no device is given (a build without the
/// `device-plugins` feature).
#[cfg(not(feature = "device-plugins"))]
fn extended_resources(pod: &Value, out: &mut Vec<Finding>) {
    for list in ["spec.containers", "spec.initContainers"] {
        let Some(Value::Array(items)) = lookup(pod, list) else {
            continue;
        };
        for (i, c) in items.iter().enumerate() {
            let mut seen = std::collections::BTreeSet::new();
            for kind in ["limits", "requests"] {
                let Some(Value::Object(map)) = c.get("resources").and_then(|r| r.get(kind)) else {
                    continue;
                };
                for name in map.keys().filter(|n| is_extended_resource(n)) {
                    if seen.insert(name.as_str()) {
                        out.push(Finding {
                            path: format!("{list}[{i}].resources.{kind}[{name}]"),
                            policy: Policy::Warned,
                            why: EXTENDED_RESOURCE,
                            volume: None,
                        });
                    }
                }
            }
        }
    }
}

fn lookup<'a>(v: &'a Value, dotted: &str) -> Option<&'a Value> {
    dotted.split('.').try_fold(v, |v, key| v.get(key))
}

/// Walks `path` (segments, `[]` over lists) below `v`, recording set values; below
/// `spec.volumes[i]`, `volume` is that volume's name.
fn collect(
    v: &Value,
    path: &str,
    at: String,
    rule: &'static Rule,
    volume: Option<&str>,
    out: &mut Vec<Finding>,
) {
    let (head, rest) = match path.split_once('.') {
        Some((h, r)) => (h, Some(r)),
        None => (path, None),
    };
    let (key, list) = match head.strip_suffix("[]") {
        Some(k) => (k, true),
        None => (head, false),
    };
    let Some(child) = v.get(key) else {
        return;
    };
    let here = if at.is_empty() {
        key.to_string()
    } else {
        format!("{at}.{key}")
    };
    if list {
        if let (Value::Array(items), Some(rest)) = (child, rest) {
            for (i, item) in items.iter().enumerate() {
                let volume = match here.as_str() {
                    "spec.volumes" => item.get("name").and_then(Value::as_str),
                    _ => volume,
                };
                collect(item, rest, format!("{here}[{i}]"), rule, volume, out);
            }
        }
        return;
    }
    match rest {
        Some(rest) => collect(child, rest, here, rule, volume, out),
        None if is_unset(child) => {}
        None if rule.allowed.contains(&child.to_string().as_str()) => {}
        None => out.push(Finding {
            path: here,
            policy: rule.policy,
            why: rule.why,
            volume: volume.map(str::to_string),
        }),
    }
}

fn is_unset(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// The README section generated from the table (between its markers).
pub fn markdown_table() -> String {
    let mut out = String::from("| field | picolet | why |\n|---|---|---|\n");
    for r in RULES {
        let allowed = if r.allowed.is_empty() {
            String::new()
        } else {
            format!(" (unless {})", r.allowed.join(", ").replace('"', "`"))
        };
        out.push_str(&format!(
            "| `{}` | {}{allowed} | {} |\n",
            r.path,
            r.policy.as_str(),
            r.why
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn normalize_drops_indices_and_folds_init_containers() {
        for (input, want) in [
            ("spec.tolerations", "spec.tolerations"),
            (
                "spec.initContainers[3].lifecycle.preStop",
                "spec.containers[].lifecycle.preStop",
            ),
            (
                "spec.containers[0].volumeMounts[12].subPathExpr",
                "spec.containers[].volumeMounts[].subPathExpr",
            ),
        ] {
            assert_eq!(normalize(input), want, "{input}");
        }
    }

    #[test]
    fn rules_cover_their_subtree() {
        let r = rule_for(
            "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution",
        )
        .unwrap();
        assert_eq!(r.path, "spec.affinity");
        let r = rule_for(
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
        )
        .unwrap();
        assert_eq!(r.policy, Implemented, "the deeper rule wins");
        let r = rule_for("spec.containers[].livenessProbe.httpGet.port").unwrap();
        assert_eq!(r.path, "spec.containers[].livenessProbe");
        assert!(rule_for("spec.containers[].imagePullPolicyy").is_none());
        assert!(rule_for("spce").is_none());
    }

    #[test]
    fn unknown_fields_are_ignored_or_named_as_not_upstream() {
        let got = classify_unknown(&[
            "spec.tolerations".into(),
            "spec.containers[0].imagePulPolicy".into(),
        ]);
        assert_eq!(
            got,
            vec![
                Unknown::Ignored("spec.tolerations".into()),
                Unknown::NotUpstream("spec.containers[0].imagePulPolicy".into()),
            ]
        );
    }

    #[test]
    fn findings_name_the_field_with_its_index_and_skip_allowed_values() {
        let pod = json!({
            "spec": {
                "hostUsers": true,
                "os": {"name": "linux"},
                "runtimeClassName": "nvidia",
                "containers": [
                    {"name": "a", "terminationMessagePath": "/dev/termination-log"},
                    {"name": "b", "lifecycle": {"stopSignal": "SIGUSR1"},
                     "env": [{"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                             {"name": "Y", "valueFrom": {"fileKeyRef": {"path": "p", "key": "k"}}}]}
                ],
                "initContainers": [{"name": "i", "volumeDevices": [{"name": "v", "devicePath": "/dev/x"}]}]
            }
        });
        let got: Vec<(String, Policy)> = findings(&pod)
            .into_iter()
            .map(|f| (f.path, f.policy))
            .collect();
        assert_eq!(
            got,
            vec![
                ("spec.containers[1].lifecycle.stopSignal".into(), Warned),
                (
                    "spec.containers[1].env[1].valueFrom.fileKeyRef".into(),
                    Refused
                ),
                ("spec.initContainers[0].volumeDevices".into(), Refused),
            ]
        );
        let refused = json!({"spec": {"hostUsers": false, "os": {"name": "windows"}}});
        let got: Vec<String> = findings(&refused).into_iter().map(|f| f.path).collect();
        assert_eq!(got, vec!["spec.os.name"]);
    }
}
