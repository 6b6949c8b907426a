//! The kubelet-owned pod conditions (kubelet: `status/generate.go`) and their
//! `lastTransitionTime` (kubelet status manager: `updateLastTransitionTime`).

use std::borrow::Cow;

use crate::api::{ContainerStatus, Pod, PodCondition, PodPhase, PodStatus};
use crate::clock::{self, UnixNanos};

pub(super) const POD_READY_TO_START_CONTAINERS: &str = "PodReadyToStartContainers";
pub(super) const INITIALIZED: &str = "Initialized";
pub(super) const READY: &str = "Ready";
pub(super) const CONTAINERS_READY: &str = "ContainersReady";
pub(super) const POD_SCHEDULED: &str = "PodScheduled";
/// kubelet: `v1.DisruptionTarget`, shared with the control plane (`PodConditionSharedByKubelet`).
pub(crate) const DISRUPTION_TARGET: &str = "DisruptionTarget";
/// kubelet: `v1.PodReasonTerminationByKubelet`.
pub(super) const TERMINATION_BY_KUBELET: &str = "TerminationByKubelet";

const UNKNOWN_CONTAINER_STATUSES: &str = "UnknownContainerStatuses";
const POD_COMPLETED: &str = "PodCompleted";
const POD_FAILED: &str = "PodFailed";
const CONTAINERS_NOT_READY: &str = "ContainersNotReady";
const CONTAINERS_NOT_INITIALIZED: &str = "ContainersNotInitialized";
const READINESS_GATES_NOT_READY: &str = "ReadinessGatesNotReady";

/// kubelet: `PodConditionByKubelet` — the condition types the kubelet owns and rewrites.
pub(crate) fn owned_by_kubelet(type_: &str) -> bool {
    matches!(
        type_,
        POD_SCHEDULED
            | READY
            | INITIALIZED
            | CONTAINERS_READY
            | POD_READY_TO_START_CONTAINERS
            | crate::allocation::POD_RESIZE_PENDING
            | crate::allocation::POD_RESIZE_IN_PROGRESS
    )
}

/// All conditions of the new status: the pod's own non-kubelet conditions, then the five
/// kubelet-owned ones in upstream order, each `lastTransitionTime` kept from `old` unless its
/// status value changed.
#[allow(clippy::too_many_arguments)]
pub(super) fn generate(
    pod: &Pod,
    api_status: &PodStatus,
    old: &PodStatus,
    sandbox_ready: bool,
    init: &[ContainerStatus],
    regular: &[ContainerStatus],
    phase: PodPhase,
    now: UnixNanos,
) -> Vec<PodCondition> {
    let mut out: Vec<PodCondition> = api_status
        .conditions
        .iter()
        .filter(|c| !owned_by_kubelet(&c.type_))
        .cloned()
        .collect();
    // kubelet: the DisruptionTarget condition it set when it killed the pod (node shutdown,
    // eviction) is carried over from the last status (generateAPIPodStatus).
    if let Some(d) = old.conditions.iter().find(|c| c.type_ == DISRUPTION_TARGET) {
        match out.iter_mut().find(|c| c.type_ == DISRUPTION_TARGET) {
            Some(c) => *c = d.clone(),
            None => out.push(d.clone()),
        }
    }
    let all: Vec<&ContainerStatus> = init.iter().chain(regular).collect();
    let containers_ready = containers_ready(pod, &all, phase);
    let mut owned = vec![
        condition(POD_READY_TO_START_CONTAINERS, sandbox_ready, None, None),
        initialized(pod, &all, phase),
        ready(pod, &out, &containers_ready),
        containers_ready,
        condition(POD_SCHEDULED, true, None, None),
    ];
    for c in &mut owned {
        // kubelet (PodObservedGenerationTracking, GA in 1.35): the generation it was made
        // for (`CalculatePodConditionObservedGeneration`).
        c.observed_generation = pod.metadata.generation;
        c.last_transition_time = old
            .conditions
            .iter()
            .find(|o| o.type_ == c.type_ && o.status == c.status)
            .and_then(|o| o.last_transition_time.clone())
            .or_else(|| clock::rfc3339(now));
    }
    out.extend(owned);
    out
}

/// Sets (or replaces) `DisruptionTarget: True`, `TerminationByKubelet`, with `message`.
pub(crate) fn set_disruption_target(status: &mut PodStatus, message: &str, now: UnixNanos) {
    let c = PodCondition {
        type_: Cow::Borrowed(DISRUPTION_TARGET),
        status: Cow::Borrowed("True"),
        last_transition_time: clock::rfc3339(now),
        reason: Some(TERMINATION_BY_KUBELET.to_string()),
        message: Some(message.to_string()),
        observed_generation: 0,
    };
    match status
        .conditions
        .iter_mut()
        .find(|o| o.type_ == DISRUPTION_TARGET)
    {
        Some(o) => *o = c,
        None => status.conditions.push(c),
    }
}

/// kubelet: `GeneratePodReadyCondition` — ContainersReady's verdict unless it is True, then
/// every readiness gate's condition (set by others through the API) must be True.
fn ready(pod: &Pod, foreign: &[PodCondition], containers_ready: &PodCondition) -> PodCondition {
    if containers_ready.status != "True" {
        return PodCondition {
            type_: Cow::Borrowed(READY),
            ..containers_ready.clone()
        };
    }
    let unready: Vec<String> = pod
        .spec
        .readiness_gates
        .iter()
        .filter_map(|g| {
            let t = &g.condition_type;
            match foreign.iter().find(|c| c.type_ == t.as_str()) {
                None => Some(format!(
                    "corresponding condition of pod readiness gate {t:?} does not exist."
                )),
                Some(c) if c.status != "True" => Some(format!(
                    "the status of pod readiness gate {t:?} is not \"True\", but {}",
                    c.status
                )),
                Some(_) => None,
            }
        })
        .collect();
    if unready.is_empty() {
        condition(READY, true, None, None)
    } else {
        let message = unready.join(", ");
        condition(READY, false, Some(READINESS_GATES_NOT_READY), Some(message))
    }
}

/// kubelet: `NeedToReconcilePodReadiness` — the apiserver's copy of a pod with readiness
/// gates (its conditions changed by others) shows a Ready other than the one it implies: the
/// pod is synced again so its status says so.
pub(crate) fn need_to_reconcile_readiness(pod: &Pod) -> bool {
    let Some(status) = pod.status.as_ref() else {
        return false;
    };
    if pod.spec.readiness_gates.is_empty() {
        return false;
    }
    let Some(current) = status.conditions.iter().find(|c| c.type_ == READY) else {
        return false;
    };
    let containers = status
        .init_container_statuses
        .iter()
        .chain(&status.container_statuses);
    let all: Vec<&ContainerStatus> = containers.collect();
    let phase = status.phase.unwrap_or(PodPhase::Pending);
    let want = ready(pod, &status.conditions, &containers_ready(pod, &all, phase));
    current.status != want.status || current.message != want.message
}

/// kubelet: `GenerateContainersReadyCondition`.
fn containers_ready(pod: &Pod, all: &[&ContainerStatus], phase: PodPhase) -> PodCondition {
    if all.is_empty() {
        return condition(
            CONTAINERS_READY,
            false,
            Some(UNKNOWN_CONTAINER_STATUSES),
            None,
        );
    }
    let mut unknown = Vec::new();
    let mut unready = Vec::new();
    let sidecars = pod
        .spec
        .init_containers
        .iter()
        .filter(|c| super::is_sidecar(c));
    for c in sidecars.chain(&pod.spec.containers) {
        match find(all, &c.name) {
            Some(s) if !s.ready => unready.push(c.name.as_str()),
            Some(_) => {}
            None => unknown.push(c.name.as_str()),
        }
    }
    match phase {
        PodPhase::Succeeded if unknown.is_empty() => {
            return condition(CONTAINERS_READY, false, Some(POD_COMPLETED), None);
        }
        PodPhase::Failed => return condition(CONTAINERS_READY, false, Some(POD_FAILED), None),
        _ => {}
    }
    let mut messages = Vec::new();
    if !unknown.is_empty() {
        messages.push(format!(
            "containers with unknown status: {}",
            go_list(&unknown)
        ));
    }
    if !unready.is_empty() {
        messages.push(format!(
            "containers with unready status: {}",
            go_list(&unready)
        ));
    }
    if messages.is_empty() {
        condition(CONTAINERS_READY, true, None, None)
    } else {
        condition(
            CONTAINERS_READY,
            false,
            Some(CONTAINERS_NOT_READY),
            Some(messages.join(", ")),
        )
    }
}

/// kubelet: `GeneratePodInitializedCondition`.
fn initialized(pod: &Pod, all: &[&ContainerStatus], phase: PodPhase) -> PodCondition {
    if all.is_empty() && !pod.spec.init_containers.is_empty() {
        return condition(INITIALIZED, false, Some(UNKNOWN_CONTAINER_STATUSES), None);
    }
    let mut unknown = Vec::new();
    let mut incomplete = Vec::new();
    for c in &pod.spec.init_containers {
        let Some(s) = find(all, &c.name) else {
            unknown.push(c.name.as_str());
            continue;
        };
        // A sidecar counts once started; a regular init container once it exited 0.
        let done = if super::is_sidecar(c) {
            s.started == Some(true)
        } else {
            s.ready
        };
        if !done {
            incomplete.push(c.name.as_str());
        }
    }
    if phase == PodPhase::Succeeded && unknown.is_empty() {
        return condition(INITIALIZED, true, Some(POD_COMPLETED), None);
    }
    // A regular container that ran means initialisation happened (sidecars may restart).
    let regular_started = pod.spec.containers.iter().any(|c| {
        find(all, &c.name)
            .is_some_and(|s| s.state.running.is_some() || s.state.terminated.is_some())
    });
    if regular_started {
        return condition(INITIALIZED, true, None, None);
    }
    let mut messages = Vec::new();
    if !unknown.is_empty() {
        messages.push(format!(
            "containers with unknown status: {}",
            go_list(&unknown)
        ));
    }
    if !incomplete.is_empty() {
        messages.push(format!(
            "containers with incomplete status: {}",
            go_list(&incomplete)
        ));
    }
    if messages.is_empty() {
        condition(INITIALIZED, true, None, None)
    } else {
        condition(
            INITIALIZED,
            false,
            Some(CONTAINERS_NOT_INITIALIZED),
            Some(messages.join(", ")),
        )
    }
}

fn find<'a>(all: &[&'a ContainerStatus], name: &str) -> Option<&'a ContainerStatus> {
    all.iter().find(|s| s.name == name).copied()
}

fn condition(
    type_: &'static str,
    status: bool,
    reason: Option<&str>,
    message: Option<String>,
) -> PodCondition {
    PodCondition {
        type_: Cow::Borrowed(type_),
        status: Cow::Borrowed(if status { "True" } else { "False" }),
        last_transition_time: None,
        reason: reason.map(str::to_string),
        message,
        observed_generation: 0,
    }
}

/// A list as Go's `%s` prints a `[]string`: `[a b]` — upstream messages read this way.
fn go_list(names: &[&str]) -> String {
    format!("[{}]", names.join(" "))
}
