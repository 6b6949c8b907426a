//! The CRI labels/annotations contract (kubelet: `kuberuntime/labels.go`).
//!
//! Owns: the keys picolet writes on every sandbox and container it creates, the values it
//! writes there, and the reverse — reading a `Sandbox` / `ContainerInfo` back into pod UID,
//! name, namespace, container name, hash, restart count and grace period. After an agent
//! restart (even `kill -9`) a pod is adopted, and killed if nobody wants it, from these
//! alone: picolet keeps no private database.
//!
//! Must never: do I/O, or write anything a real kubelet would not (the keys are upstream's,
//! so `crictl` and tooling that know the kubelet's layout understand picolet's containers).

use std::collections::BTreeMap;

use crate::api;
use crate::cri::{ContainerInfo, Sandbox};

/// Labels on sandboxes and containers: the keys live with the CRI types, where every
/// reader of the runtime (PLEG, eviction, the node API's stats) finds them.
pub(crate) use crate::cri::{CONTAINER_NAME_LABEL, POD_NAME_LABEL};
pub use crate::cri::{POD_NAMESPACE_LABEL, POD_UID_LABEL};

/// Annotations on containers (kubelet: `kuberuntime/labels.go`).
pub(crate) const POD_DELETION_GRACE_PERIOD_ANNOTATION: &str =
    "io.kubernetes.pod.deletionGracePeriod";
pub(crate) const POD_TERMINATION_GRACE_PERIOD_ANNOTATION: &str =
    "io.kubernetes.pod.terminationGracePeriod";
pub(crate) const CONTAINER_HASH_ANNOTATION: &str = "io.kubernetes.container.hash";
pub(crate) const CONTAINER_RESTART_COUNT_ANNOTATION: &str = "io.kubernetes.container.restartCount";
pub(crate) const CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION: &str =
    "io.kubernetes.container.terminationMessagePath";
pub(crate) const CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION: &str =
    "io.kubernetes.container.terminationMessagePolicy";
pub(crate) const CONTAINER_PRE_STOP_HANDLER_ANNOTATION: &str =
    "io.kubernetes.container.preStopHandler";
pub(crate) const CONTAINER_PORTS_ANNOTATION: &str = "io.kubernetes.container.ports";

/// API defaults for fields a manifest may leave out (kubelet sees them defaulted by the
/// apiserver; static pods only get what `manifest.rs` fills, so we default here too).
pub(crate) const DEFAULT_TERMINATION_MESSAGE_PATH: &str = "/dev/termination-log";
pub(crate) const DEFAULT_TERMINATION_MESSAGE_POLICY: &str = "File";

/// Sandbox labels: the pod's labels plus name, namespace and UID (kubelet: `newPodLabels`).
pub(crate) fn sandbox_labels(pod: &api::Pod) -> BTreeMap<String, String> {
    let mut labels = pod.metadata.labels.clone();
    labels.insert(POD_NAME_LABEL.into(), pod.metadata.name.clone());
    labels.insert(POD_NAMESPACE_LABEL.into(), pod.metadata.namespace.clone());
    labels.insert(POD_UID_LABEL.into(), pod.metadata.uid.clone());
    labels
}

/// Sandbox annotations: the pod's annotations (kubelet: `newPodAnnotations`).
pub(crate) fn sandbox_annotations(pod: &api::Pod) -> BTreeMap<String, String> {
    pod.metadata.annotations.clone()
}

/// Container labels: exactly pod name, namespace, UID and container name
/// (kubelet: `newContainerLabels`).
pub(crate) fn container_labels(
    pod: &api::Pod,
    container: &api::Container,
) -> BTreeMap<String, String> {
    BTreeMap::from([
        (POD_NAME_LABEL.to_string(), pod.metadata.name.clone()),
        (
            POD_NAMESPACE_LABEL.to_string(),
            pod.metadata.namespace.clone(),
        ),
        (POD_UID_LABEL.to_string(), pod.metadata.uid.clone()),
        (CONTAINER_NAME_LABEL.to_string(), container.name.clone()),
    ])
}

/// Container annotations (kubelet: `newContainerAnnotations`): everything the kill path
/// needs when the pod spec is gone.
pub(crate) fn container_annotations(
    pod: &api::Pod,
    container: &api::Container,
    restart_count: u32,
) -> BTreeMap<String, String> {
    let mut a = BTreeMap::new();
    a.insert(CONTAINER_HASH_ANNOTATION.into(), container_hash(container));
    a.insert(
        CONTAINER_RESTART_COUNT_ANNOTATION.into(),
        restart_count.to_string(),
    );
    a.insert(
        CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION.into(),
        termination_message_path(container).to_string(),
    );
    a.insert(
        CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION.into(),
        container
            .termination_message_policy
            .clone()
            .unwrap_or_else(|| DEFAULT_TERMINATION_MESSAGE_POLICY.to_string()),
    );
    // In-place resize: what the container is created with (the actuated values).
    if crate::allocation::ENABLED && crate::allocation::resizable(pod) {
        a.insert(
            crate::allocation::RESOURCES_ANNOTATION.into(),
            crate::allocation::annotation(container),
        );
    }
    if let Some(g) = pod.metadata.deletion_grace_period_seconds {
        a.insert(POD_DELETION_GRACE_PERIOD_ANNOTATION.into(), g.to_string());
    }
    if let Some(g) = pod.spec.termination_grace_period_seconds {
        a.insert(
            POD_TERMINATION_GRACE_PERIOD_ANNOTATION.into(),
            g.to_string(),
        );
    }
    if let Some(pre_stop) = container
        .lifecycle
        .as_ref()
        .and_then(|l| l.pre_stop.as_ref())
    {
        // Serialising plain data cannot fail; an empty string would only lose the hook.
        if let Ok(json) = serde_json::to_string(pre_stop) {
            a.insert(CONTAINER_PRE_STOP_HANDLER_ANNOTATION.into(), json);
        }
    }
    if !container.ports.is_empty() {
        // Serialising plain data cannot fail; an empty string would only lose the ports.
        if let Ok(json) = serde_json::to_string(&container.ports) {
            a.insert(CONTAINER_PORTS_ANNOTATION.into(), json);
        }
    }
    a
}

/// The container's termination message path, API-defaulted.
pub(crate) fn termination_message_path(container: &api::Container) -> &str {
    match container.termination_message_path.as_deref() {
        Some(p) if !p.is_empty() => p,
        _ => DEFAULT_TERMINATION_MESSAGE_PATH,
    }
}

/// A stable hash of the parts of a container whose change means "restart it"
/// (kubelet: `HashContainer`, which hashes only name and image since v1.31).
///
/// Our own fixed function (64-bit FNV-1a over `name NUL image`), lowercase hex: it must
/// be identical across picolet builds and restarts, so it cannot be std's `DefaultHasher`
/// (randomly keyed / unspecified). It is not byte-compatible with the upstream kubelet's
/// hash; a container created by a real kubelet looks "changed" to picolet.
pub(crate) fn container_hash(container: &api::Container) -> String {
    let mut h = Fnv1a::new();
    h.write(container.name.as_bytes());
    h.write(&[0]);
    h.write(container.image.as_bytes());
    format!("{:x}", h.finish())
}

/// 64-bit FNV-1a: tiny, fixed and good enough for change detection.
pub(crate) struct Fnv1a(u64);

impl Fnv1a {
    pub(crate) fn new() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
    pub(crate) fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    pub(crate) fn finish(&self) -> u64 {
        self.0
    }
}

// ---------------------------------------------------------------------------------------
// The reverse: what a sandbox or container found in the runtime says about itself.

/// The pod UID label, if the object was created by picolet (or a kubelet).
pub(crate) fn pod_uid(labels: &BTreeMap<String, String>) -> Option<&str> {
    labels
        .get(POD_UID_LABEL)
        .map(String::as_str)
        .filter(|s| !s.is_empty())
}

/// What a sandbox's labels say (kubelet: `getPodSandboxInfoFromLabels`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct SandboxLabelInfo {
    pub pod_uid: String,
    pub pod_name: String,
    pub pod_namespace: String,
    /// The pod's own labels (the three identity labels removed).
    pub pod_labels: BTreeMap<String, String>,
}

pub(crate) fn sandbox_info(sandbox: &Sandbox) -> SandboxLabelInfo {
    let l = &sandbox.labels;
    let get = |k: &str, fallback: &str| {
        l.get(k)
            .cloned()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| fallback.to_string())
    };
    SandboxLabelInfo {
        pod_uid: get(POD_UID_LABEL, &sandbox.uid),
        pod_name: get(POD_NAME_LABEL, &sandbox.name),
        pod_namespace: get(POD_NAMESPACE_LABEL, &sandbox.namespace),
        pod_labels: crate::sort::collect_map(
            l.iter()
                .filter(|(k, _)| {
                    !matches!(
                        k.as_str(),
                        POD_NAME_LABEL | POD_NAMESPACE_LABEL | POD_UID_LABEL
                    )
                })
                .map(|(k, v)| (k.clone(), v.clone())),
        ),
    }
}

/// What a container's labels say (kubelet: `getContainerInfoFromLabels`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ContainerLabelInfo {
    pub pod_uid: String,
    pub pod_name: String,
    pub pod_namespace: String,
    pub container_name: String,
}

pub(crate) fn container_label_info(c: &ContainerInfo) -> ContainerLabelInfo {
    let get = |k: &str| c.labels.get(k).cloned().unwrap_or_default();
    let mut container_name = get(CONTAINER_NAME_LABEL);
    if container_name.is_empty() {
        container_name = c.name.clone();
    }
    ContainerLabelInfo {
        pod_uid: get(POD_UID_LABEL),
        pod_name: get(POD_NAME_LABEL),
        pod_namespace: get(POD_NAMESPACE_LABEL),
        container_name,
    }
}

/// The container name of a runtime container: its label, else the CRI metadata name.
pub(crate) fn container_name(c: &ContainerInfo) -> &str {
    match c.labels.get(CONTAINER_NAME_LABEL) {
        Some(n) if !n.is_empty() => n,
        _ => &c.name,
    }
}

/// What a container's annotations say (kubelet: `getContainerInfoFromAnnotations`).
/// Malformed values read as absent / zero, as upstream does (with a debug log).
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct ContainerAnnotationInfo {
    /// `None` when the annotation is missing (not created by picolet / a kubelet).
    pub hash: Option<String>,
    pub restart_count: u32,
    pub pod_deletion_grace_period: Option<i64>,
    pub pod_termination_grace_period: Option<i64>,
    pub termination_message_path: String,
    pub termination_message_policy: String,
    /// The `lifecycle.preStop` handler, for the kill path after a picolet restart.
    pub pre_stop: Option<api::LifecycleHandler>,
    pub ports: Vec<api::ContainerPort>,
}

pub(crate) fn container_annotation_info(c: &ContainerInfo) -> ContainerAnnotationInfo {
    let a = &c.annotations;
    let int = |k: &str| -> Option<i64> {
        let v = a.get(k)?;
        match v.trim().parse::<i64>() {
            Ok(n) => Some(n),
            Err(_) => {
                log::debug!(
                    "container {}: ignoring malformed annotation {k}={v:?}",
                    c.id
                );
                None
            }
        }
    };
    ContainerAnnotationInfo {
        hash: a
            .get(CONTAINER_HASH_ANNOTATION)
            .map(|h| h.trim().to_ascii_lowercase())
            .filter(|h| !h.is_empty()),
        restart_count: int(CONTAINER_RESTART_COUNT_ANNOTATION)
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(0),
        pod_deletion_grace_period: int(POD_DELETION_GRACE_PERIOD_ANNOTATION),
        pod_termination_grace_period: int(POD_TERMINATION_GRACE_PERIOD_ANNOTATION),
        termination_message_path: a
            .get(CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION)
            .cloned()
            .unwrap_or_default(),
        termination_message_policy: a
            .get(CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION)
            .cloned()
            .unwrap_or_default(),
        pre_stop: a
            .get(CONTAINER_PRE_STOP_HANDLER_ANNOTATION)
            .and_then(|s| crate::api::from_json_slice(s.as_bytes()).ok()),
        ports: a
            .get(CONTAINER_PORTS_ANNOTATION)
            .and_then(|s| crate::api::from_json_slice(s.as_bytes()).ok())
            .unwrap_or_default(),
    }
}

/// The restart count a runtime container was created with (0 if not annotated).
pub(crate) fn restart_count(c: &ContainerInfo) -> u32 {
    container_annotation_info(c).restart_count
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cri::{ContainerState, SandboxState};

    fn pod() -> api::Pod {
        let mut p = api::Pod::default();
        p.metadata.name = "web-node1".into();
        p.metadata.namespace = "default".into();
        p.metadata.uid = "uid-1".into();
        p.metadata.labels.insert("app".into(), "web".into());
        p.metadata
            .annotations
            .insert("kubernetes.io/config.source".into(), "file".into());
        p.spec.termination_grace_period_seconds = Some(45);
        p
    }

    fn container() -> api::Container {
        api::Container {
            name: "nginx".into(),
            image: "nginx:1.25".into(),
            ports: vec![api::ContainerPort {
                name: Some("http".into()),
                container_port: 80,
                host_port: Some(8080),
                ..Default::default()
            }],
            lifecycle: Some(
                serde_json::from_value(
                    serde_json::json!({"preStop": {"exec": {"command": ["sleep", "5"]}}}),
                )
                .unwrap(),
            ),
            ..Default::default()
        }
    }

    fn runtime_container(pod: &api::Pod, c: &api::Container, restart: u32) -> ContainerInfo {
        ContainerInfo {
            id: "c1".into(),
            sandbox_id: "s1".into(),
            name: c.name.clone(),
            attempt: restart,
            image: c.image.clone(),
            image_ref: String::new(),
            state: ContainerState::Running,
            created_at: 1,
            started_at: 0,
            finished_at: 0,
            exit_code: 0,
            reason: String::new(),
            message: String::new(),
            labels: container_labels(pod, c),
            annotations: container_annotations(pod, c, restart),
            log_path: String::new(),
        }
    }

    #[test]
    fn sandbox_labels_carry_pod_labels_and_identity() {
        let l = sandbox_labels(&pod());
        assert_eq!(l.get("app").map(String::as_str), Some("web"));
        assert_eq!(l.get(POD_NAME_LABEL).map(String::as_str), Some("web-node1"));
        assert_eq!(
            l.get(POD_NAMESPACE_LABEL).map(String::as_str),
            Some("default")
        );
        assert_eq!(l.get(POD_UID_LABEL).map(String::as_str), Some("uid-1"));
        assert_eq!(sandbox_annotations(&pod()), pod().metadata.annotations);
    }

    #[test]
    fn container_labels_are_exactly_four() {
        let l = container_labels(&pod(), &container());
        assert_eq!(l.len(), 4);
        assert_eq!(
            l.get(CONTAINER_NAME_LABEL).map(String::as_str),
            Some("nginx")
        );
        assert!(!l.contains_key("app"));
    }

    #[test]
    fn container_annotations_content() {
        let a = container_annotations(&pod(), &container(), 3);
        assert_eq!(a[CONTAINER_RESTART_COUNT_ANNOTATION], "3");
        assert_eq!(a[POD_TERMINATION_GRACE_PERIOD_ANNOTATION], "45");
        assert_eq!(
            a[CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION],
            "/dev/termination-log"
        );
        assert_eq!(a[CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION], "File");
        assert_eq!(a[CONTAINER_HASH_ANNOTATION], container_hash(&container()));
        assert_eq!(
            a[CONTAINER_PRE_STOP_HANDLER_ANNOTATION],
            r#"{"exec":{"command":["sleep","5"]}}"#
        );
        assert_eq!(
            a[CONTAINER_PORTS_ANNOTATION],
            r#"[{"name":"http","containerPort":80,"hostPort":8080}]"#
        );
        assert!(!a.contains_key(POD_DELETION_GRACE_PERIOD_ANNOTATION));
        // no ports, no lifecycle → no such annotations
        let plain = api::Container {
            name: "x".into(),
            image: "busybox".into(),
            ..Default::default()
        };
        let a = container_annotations(&pod(), &plain, 0);
        assert!(!a.contains_key(CONTAINER_PORTS_ANNOTATION));
        assert!(!a.contains_key(CONTAINER_PRE_STOP_HANDLER_ANNOTATION));
    }

    #[test]
    fn hash_is_stable_and_depends_on_name_and_image_only() {
        let c = container();
        // A fixed value: changing it breaks adoption of running containers across
        // picolet upgrades (every container would restart).
        assert_eq!(container_hash(&c), "acc35871927bcce5");
        let mut other = c.clone();
        other.command = vec!["sh".into()];
        other.ports.clear();
        assert_eq!(container_hash(&other), container_hash(&c));
        other.image = "nginx:1.26".into();
        assert_ne!(container_hash(&other), container_hash(&c));
        let mut renamed = c.clone();
        renamed.name = "nginx2".into();
        assert_ne!(container_hash(&renamed), container_hash(&c));
        // name/image boundary is unambiguous
        let a = api::Container {
            name: "ab".into(),
            image: "c".into(),
            ..Default::default()
        };
        let b = api::Container {
            name: "a".into(),
            image: "bc".into(),
            ..Default::default()
        };
        assert_ne!(container_hash(&a), container_hash(&b));
    }

    #[test]
    fn reverse_container_round_trip() {
        let p = pod();
        let c = container();
        let rc = runtime_container(&p, &c, 7);
        let l = container_label_info(&rc);
        assert_eq!(
            l,
            ContainerLabelInfo {
                pod_uid: "uid-1".into(),
                pod_name: "web-node1".into(),
                pod_namespace: "default".into(),
                container_name: "nginx".into(),
            }
        );
        let a = container_annotation_info(&rc);
        assert_eq!(a.hash, Some(container_hash(&c)));
        assert_eq!(a.restart_count, 7);
        assert_eq!(a.pod_termination_grace_period, Some(45));
        assert_eq!(a.pod_deletion_grace_period, None);
        assert_eq!(a.termination_message_path, "/dev/termination-log");
        assert_eq!(a.ports, c.ports);
        assert_eq!(
            a.pre_stop,
            Some(
                serde_json::from_value(serde_json::json!({"exec": {"command": ["sleep", "5"]}}))
                    .unwrap()
            )
        );
        assert_eq!(restart_count(&rc), 7);
        assert_eq!(container_name(&rc), "nginx");
        assert_eq!(pod_uid(&rc.labels), Some("uid-1"));
    }

    #[test]
    fn reverse_tolerates_garbage() {
        let mut rc = runtime_container(&pod(), &container(), 1);
        rc.annotations
            .insert(CONTAINER_RESTART_COUNT_ANNOTATION.into(), "x".into());
        rc.annotations
            .insert(POD_TERMINATION_GRACE_PERIOD_ANNOTATION.into(), "".into());
        rc.annotations
            .insert(CONTAINER_PORTS_ANNOTATION.into(), "{".into());
        rc.labels.remove(CONTAINER_NAME_LABEL);
        let a = container_annotation_info(&rc);
        assert_eq!(a.restart_count, 0);
        assert_eq!(a.pod_termination_grace_period, None);
        assert!(a.ports.is_empty());
        assert_eq!(container_name(&rc), "nginx"); // falls back to CRI metadata name
        rc.labels.clear();
        assert_eq!(pod_uid(&rc.labels), None);
    }

    #[test]
    fn reverse_sandbox() {
        let p = pod();
        let s = Sandbox {
            id: "s1".into(),
            name: String::new(),
            namespace: String::new(),
            uid: String::new(),
            attempt: 0,
            state: SandboxState::Ready,
            created_at: 1,
            labels: sandbox_labels(&p),
            annotations: sandbox_annotations(&p),
            ip: None,
            network: None,
        };
        let i = sandbox_info(&s);
        assert_eq!(i.pod_uid, "uid-1");
        assert_eq!(i.pod_name, "web-node1");
        assert_eq!(i.pod_namespace, "default");
        assert_eq!(i.pod_labels, p.metadata.labels);
    }
}
