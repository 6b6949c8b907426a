//! Builders for status tests: pods, sandboxes, runtime container instances.

use std::collections::BTreeMap;

use crate::api::{self, Pod, RestartPolicy};
use crate::clock::UnixNanos;
use crate::cri::{
    ContainerInfo, ContainerState, NamespaceMode, PodRuntimeStatus, Sandbox, SandboxState,
};

/// 2023-11-14T22:13:20Z
pub(crate) const T0: UnixNanos = 1_700_000_000 * 1_000_000_000;
pub(crate) const SEC: UnixNanos = 1_000_000_000;

pub(crate) fn container(name: &str) -> api::Container {
    api::Container {
        name: name.to_string(),
        image: format!("docker.io/library/{name}:1"),
        ..api::Container::default()
    }
}

pub(crate) fn sidecar(name: &str) -> api::Container {
    api::Container {
        restart_policy: Some(RestartPolicy::Always),
        ..container(name)
    }
}

/// `default/web-node1`, uid `uid-1`, a static pod, with these regular containers.
pub(crate) fn pod(regular: &[&str]) -> Pod {
    let mut pod = Pod::default();
    pod.metadata.name = "web-node1".to_string();
    pod.metadata.namespace = "default".to_string();
    pod.metadata.uid = "uid-1".to_string();
    pod.metadata.annotations.insert(
        api::ANNOTATION_CONFIG_SOURCE.to_string(),
        "file".to_string(),
    );
    pod.spec.containers = regular.iter().map(|n| container(n)).collect();
    pod
}

pub(crate) fn with_policy(mut pod: Pod, policy: RestartPolicy) -> Pod {
    pod.spec.restart_policy = Some(policy);
    pod
}

pub(crate) fn with_init(mut pod: Pod, init: Vec<api::Container>) -> Pod {
    pod.spec.init_containers = init;
    pod
}

pub(crate) fn sandbox(id: &str, created_at: UnixNanos, ready: bool, ip: Option<&str>) -> Sandbox {
    Sandbox {
        id: id.to_string(),
        name: "web-node1".to_string(),
        namespace: "default".to_string(),
        uid: "uid-1".to_string(),
        attempt: 0,
        state: if ready {
            SandboxState::Ready
        } else {
            SandboxState::NotReady
        },
        created_at,
        labels: BTreeMap::new(),
        annotations: BTreeMap::new(),
        ip: ip.map(str::to_string),
        network: Some(NamespaceMode::Pod),
    }
}

/// A container instance in sandbox `sb1`, created at `T0 + created` seconds.
pub(crate) fn instance(
    name: &str,
    attempt: u32,
    created: i64,
    state: ContainerState,
) -> ContainerInfo {
    ContainerInfo {
        id: format!("{name}-{attempt}"),
        sandbox_id: "sb1".to_string(),
        name: name.to_string(),
        attempt,
        image: format!("docker.io/library/{name}:1"),
        image_ref: format!("docker.io/library/{name}@sha256:abcd"),
        state,
        created_at: T0 + created * SEC,
        started_at: if state == ContainerState::Created {
            0
        } else {
            T0 + (created + 1) * SEC
        },
        finished_at: if state == ContainerState::Exited {
            T0 + (created + 5) * SEC
        } else {
            0
        },
        exit_code: 0,
        reason: String::new(),
        message: String::new(),
        labels: BTreeMap::new(),
        annotations: BTreeMap::new(),
        log_path: String::new(),
    }
}

pub(crate) fn running(name: &str, attempt: u32, created: i64) -> ContainerInfo {
    instance(name, attempt, created, ContainerState::Running)
}

/// Exited with `code`; `reason` as the runtime reports it ("" when it gives none).
pub(crate) fn exited(
    name: &str,
    attempt: u32,
    created: i64,
    code: i32,
    reason: &str,
) -> ContainerInfo {
    ContainerInfo {
        exit_code: code,
        reason: reason.to_string(),
        ..instance(name, attempt, created, ContainerState::Exited)
    }
}

/// A runtime view with one ready sandbox `sb1` (IP 10.88.0.5) and these instances.
pub(crate) fn observed(containers: Vec<ContainerInfo>) -> PodRuntimeStatus {
    PodRuntimeStatus {
        uid: "uid-1".to_string(),
        name: "web-node1".to_string(),
        namespace: "default".to_string(),
        sandboxes: vec![sandbox("sb1", T0, true, Some("10.88.0.5"))],
        containers,
    }
}

pub(crate) fn reasons(entries: &[(&str, &str, &str)]) -> BTreeMap<String, (String, String)> {
    entries
        .iter()
        .map(|(c, r, m)| (c.to_string(), (r.to_string(), m.to_string())))
        .collect()
}
