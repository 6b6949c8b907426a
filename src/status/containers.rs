//! Container statuses from runtime instances (kubelet: `convertToAPIContainerStatuses`,
//! `convertContainerStatus`, and the probe manager's `UpdatePodStatus` for started/ready).

use std::collections::BTreeMap;

use crate::api::{
    self, ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, Pod,
};
use crate::clock;
use crate::cri::{ContainerInfo, ContainerState as CriState, PodRuntimeStatus};

use super::ProbeResults;

/// Default waiting reason of a container not seen yet (kubelet: `ContainerCreating`).
pub(super) const CONTAINER_CREATING: &str = "ContainerCreating";
/// Default waiting reason when the pod has init containers (kubelet: `PodInitializing`).
pub(super) const POD_INITIALIZING: &str = "PodInitializing";
/// kubelet: `kubecontainer.ContainerReasonStatusUnknown`.
pub(super) const STATUS_UNKNOWN: &str = "ContainerStatusUnknown";
/// Exit code reported for a container that vanished while running (SIGKILL-like).
const UNKNOWN_EXIT_CODE: i32 = 137;

pub(super) struct Inputs<'a> {
    pub pod: &'a Pod,
    pub observed: &'a PodRuntimeStatus,
    pub reasons: &'a BTreeMap<String, (String, String)>,
    pub runtime_name: &'a str,
    /// What running containers run with, by name (in-place resize).
    pub actual: Option<&'a crate::allocation::Named>,
}

/// Statuses for `specs` (init or regular), in spec order.
pub(super) fn convert(
    inp: &Inputs<'_>,
    specs: &[api::Container],
    previous: &[ContainerStatus],
    is_init: bool,
) -> Vec<ContainerStatus> {
    let has_init = !inp.pod.spec.init_containers.is_empty();
    let default_reason = if has_init {
        POD_INITIALIZING
    } else {
        CONTAINER_CREATING
    };
    specs
        .iter()
        .map(|spec| {
            let old = previous.iter().find(|s| s.name == spec.name);
            let instances = instances(inp.observed, &spec.name);
            let mut status = default_status(spec, old, default_reason);

            match instances.as_slice() {
                [] => vanished(inp.pod, old, &mut status, default_reason),
                [newest, rest @ ..] => {
                    status = convert_instance(newest, spec, old, inp.runtime_name);
                    // kubelet: the second newest instance is the last termination state.
                    if let Some(prev) = rest.first() {
                        status.last_state =
                            convert_instance(prev, spec, old, inp.runtime_name).state;
                    }
                }
            }

            // kubelet: containers that failed to start are Waiting with the cached reason.
            let newest = instances.first().copied();
            apply_waiting_reason(inp, spec, newest, is_init, default_reason, &mut status);
            if crate::allocation::ENABLED && !inp.pod.is_static() {
                set_resources(inp, spec, &mut status);
            }
            status
        })
        .collect()
}

/// kubelet: a container that failed to start is Waiting with the cached reason (the
/// `reasonCache`), unless it will not restart or is an init container that succeeded.
fn apply_waiting_reason(
    inp: &Inputs<'_>,
    spec: &api::Container,
    newest: Option<&ContainerInfo>,
    is_init: bool,
    default_reason: &str,
    status: &mut ContainerStatus,
) {
    let init_done =
        is_init && newest.is_some_and(|c| c.state == CriState::Exited && c.exit_code == 0);
    if !init_done && should_restart(spec, inp.pod, newest) {
        if let Some((reason, message)) = inp.reasons.get(&spec.name) {
            if status.state.terminated.is_some() {
                status.last_state = std::mem::take(&mut status.state);
            }
            // kubelet: a wait for the sandbox or a volume is no container's own
            // reason (its reasonCache holds failed starts only): the default reason
            // stands, PodInitializing in a pod with init containers. picolet keeps
            // the message (which volume, why).
            let reason = if reason == CONTAINER_CREATING {
                default_reason
            } else {
                reason
            };
            status.state = waiting(reason, message);
        }
    }
}

/// kubelet (InPlacePodVerticalScaling): the allocated requests, and the resources
/// it runs with — what was last applied while it runs, else the allocated ones —
/// for every container, `{}` when it has none: the apiserver takes a running
/// container without `resources` for a node that cannot resize and refuses every
/// resize of the pod (`isPodResizeRequestSupported`). Only for the apiserver's
/// pods (their quantities are its canonical spelling, as it would store ours); a
/// static pod's are its manifest's, which the mirror pod's status would rewrite at
/// every sync, and the apiserver refuses to resize a static pod anyway.
fn set_resources(inp: &Inputs<'_>, spec: &api::Container, status: &mut ContainerStatus) {
    let r = spec.resources.clone().unwrap_or_default();
    status.allocated_resources.clone_from(&r.requests);
    let mut shown = api::ResourceRequirements { claims: None, ..r };
    if let Some(a) = inp
        .actual
        .and_then(|m| crate::allocation::named(m, &spec.name))
        .filter(|_| status.state.running.is_some())
    {
        for (map, from) in [
            (&mut shown.limits, &a.limits),
            (&mut shown.requests, &a.requests),
        ] {
            map.retain(|k, _| k != "cpu" && k != "memory");
            map.extend(from.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    status.resources = Some(shown);
}

/// The instances of one container, newest first.
fn instances<'a>(observed: &'a PodRuntimeStatus, name: &str) -> Vec<&'a ContainerInfo> {
    let mut v: Vec<&ContainerInfo> = observed
        .containers
        .iter()
        .filter(|c| c.name == name)
        .collect();
    // Stable: equal creation stamps keep the runtime's (newest first) order.
    crate::sort::sort_by_key(&mut v, |c| std::cmp::Reverse(c.recency()));
    v
}

/// kubelet: every status starts Waiting with the default reason; an old terminated status
/// stands as is (so a garbage-collected container keeps showing how it ended), otherwise the
/// restart count and last state carry over.
fn default_status(
    spec: &api::Container,
    old: Option<&ContainerStatus>,
    default_reason: &str,
) -> ContainerStatus {
    if let Some(old) = old.filter(|o| o.state.terminated.is_some()) {
        return old.clone();
    }
    let mut s = ContainerStatus {
        name: spec.name.clone(),
        image: spec.image.clone(),
        state: waiting(default_reason, ""),
        ..ContainerStatus::default()
    };
    if let Some(old) = old {
        s.restart_count = old.restart_count;
        s.last_state = old.last_state.clone();
    }
    s
}

/// kubelet: a container that was Running and is no longer known to the runtime terminated
/// with an unknown result; without this the pod would flip back to Pending.
fn vanished(
    pod: &Pod,
    old: Option<&ContainerStatus>,
    status: &mut ContainerStatus,
    default_reason: &str,
) {
    let Some(old) = old else { return };
    if old.state.terminated.is_some() || old.state.running.is_none() {
        return;
    }
    let is_default_waiting = status
        .state
        .waiting
        .as_ref()
        .is_some_and(|w| w.reason.as_deref() == Some(default_reason));
    if !is_default_waiting || status.last_state.terminated.is_some() {
        return;
    }
    status.last_state.terminated = Some(ContainerStateTerminated {
        exit_code: UNKNOWN_EXIT_CODE,
        reason: Some(STATUS_UNKNOWN.to_string()),
        message: Some(
            "The container could not be located when the pod was deleted.  The container used to be Running"
                .to_string(),
        ),
        ..ContainerStateTerminated::default()
    });
    if pod.metadata.deletion_timestamp.is_none() {
        status.restart_count += 1;
    }
}

/// kubelet: `convertContainerStatus` — one runtime instance to an API status.
fn convert_instance(
    c: &ContainerInfo,
    spec: &api::Container,
    old: Option<&ContainerStatus>,
    runtime_name: &str,
) -> ContainerStatus {
    let cid = format!("{runtime_name}://{}", c.id);
    let mut s = ContainerStatus {
        name: spec.name.clone(),
        // CRI attempt == restart count (`io.kubernetes.container.restartCount`).
        restart_count: i32::try_from(c.attempt).unwrap_or(i32::MAX),
        image: display_image(c, spec),
        image_id: c.image_ref.clone(),
        container_id: Some(cid.clone()),
        ..ContainerStatus::default()
    };
    match c.state {
        CriState::Running => {
            s.state.running = Some(ContainerStateRunning {
                started_at: clock::rfc3339(c.started_at),
            });
        }
        // Created but not started: "waiting to be running", no reason.
        CriState::Created => s.state.waiting = Some(ContainerStateWaiting::default()),
        CriState::Exited => {
            s.state.terminated = Some(ContainerStateTerminated {
                exit_code: c.exit_code,
                signal: None,
                reason: Some(terminated_reason(c)),
                message: non_empty(&c.message),
                started_at: clock::rfc3339(c.started_at),
                finished_at: clock::rfc3339(c.finished_at),
                container_id: Some(cid),
            });
        }
        CriState::Unknown => match old {
            // It was running and the runtime lost track of it: it ran and ended, it did
            // not "never run" (matters for restartPolicy Never pods).
            Some(old) if old.state.running.is_some() => {
                s.state.terminated = Some(ContainerStateTerminated {
                    exit_code: UNKNOWN_EXIT_CODE,
                    reason: Some(STATUS_UNKNOWN.to_string()),
                    message: Some(
                        "The container could not be located when the pod was terminated"
                            .to_string(),
                    ),
                    ..ContainerStateTerminated::default()
                });
                s.restart_count = old.restart_count.saturating_add(1);
            }
            _ => s.state.waiting = Some(ContainerStateWaiting::default()),
        },
    }
    s
}

/// The runtime's reason when it gives one (containerd: `Completed`, `Error`, `OOMKilled`),
/// else the same rule from the exit code.
fn terminated_reason(c: &ContainerInfo) -> String {
    if !c.reason.is_empty() {
        c.reason.clone()
    } else if c.exit_code == 0 {
        "Completed".to_string()
    } else {
        "Error".to_string()
    }
}

/// The image as the user wrote it when the runtime only knows an image ID.
fn display_image(c: &ContainerInfo, spec: &api::Container) -> String {
    if c.image.is_empty() || c.image.starts_with("sha256:") {
        spec.image.clone()
    } else {
        c.image.clone()
    }
}

/// kubelet: `ShouldContainerBeRestarted` — will the next sync start this container again?
fn should_restart(spec: &api::Container, pod: &Pod, newest: Option<&ContainerInfo>) -> bool {
    if pod.metadata.deletion_timestamp.is_some() {
        return false;
    }
    let Some(c) = newest else { return true };
    match c.state {
        CriState::Running => false,
        CriState::Unknown | CriState::Created => true,
        CriState::Exited => api::container_should_restart(spec, &pod.spec, c.exit_code),
    }
}

/// kubelet: prober `UpdatePodStatus` — `started` once running and the startup probe (if
/// any) succeeded; `ready` once started and the readiness probe (if any) succeeded; a regular
/// init container is ready once it exited 0.
pub(super) fn apply_probes(
    specs: &[api::Container],
    statuses: &mut [ContainerStatus],
    is_init: bool,
    probes: &ProbeResults,
) {
    for status in statuses.iter_mut() {
        let Some(spec) = specs.iter().find(|s| s.name == status.name) else {
            continue;
        };
        let id = status
            .container_id
            .as_deref()
            .and_then(|c| c.split_once("://").map(|(_, id)| id))
            .unwrap_or_default();
        let running = status.state.running.is_some();
        let started = running
            && probes
                .startup
                .get(id)
                .copied()
                .unwrap_or(spec.startup_probe.is_none());
        status.started = Some(started);

        if is_init && !super::is_sidecar(spec) {
            status.ready = status
                .state
                .terminated
                .as_ref()
                .is_some_and(|t| t.exit_code == 0);
            continue;
        }
        status.ready = started
            && (probes.readiness.get(id).copied() == Some(true) || spec.readiness_probe.is_none());
    }
}

fn waiting(reason: &str, message: &str) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: non_empty(reason),
            message: non_empty(message),
        }),
        ..ContainerState::default()
    }
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}
