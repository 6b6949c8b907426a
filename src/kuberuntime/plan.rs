//! What the runtime must do for one pod (kubelet: `computePodActions`).
//!
//! Owns: the pure decision "given the desired pod and what the runtime holds for its UID,
//! which sandbox to (re)create, which containers to kill, which to start". Also the
//! crash-loop back-off decision (`should_back_off`, kubelet: `doBackOff`).
//!
//! Must never: do I/O, read a clock, or look at anything but its arguments. `sync.rs`
//! executes the plan; every rule here has a table test.
//!
//! The rules (docs/kubelet-behaviour.md §3):
//! - Sandbox (re)created when: none exists; more than one is ready; the newest is not
//!   ready; its network-namespace mode differs from the pod's; a pod-network sandbox has
//!   no IP. `attempt` = highest attempt seen + 1. Recreating means killing everything.
//! - RestartPolicy Never, attempt > 0 and container statuses present: kill only, no new
//!   sandbox. Nothing left to start and already initialised: kill only too.
//! - Ephemeral containers (kubelet: `EphemeralContainersToStart`) start once each in the
//!   existing sandbox, before init containers finish if need be, and are never restarted;
//!   they do not keep a pod running. A new sandbox starts none.
//! - Init containers run one at a time in order; restartable ones (sidecars,
//!   `restartPolicy: Always` on an init container) keep running and are restarted when
//!   they exit. A failed init container is restarted, except under Never: the pod is
//!   killed.
//! - Regular containers: started when never run; restarted when exited per policy
//!   (Always; OnFailure and exit ≠ 0; Never: no) — the container's `restartPolicyRules`
//!   first, then its own `restartPolicy`, then the pod's (kubelet: ContainerRestartRules);
//!   a running container whose hash changed is killed and restarted; a failed
//!   liveness/startup probe kills it and restarts per its own policy, else the pod's. When nothing runs and nothing is to start, the pod is killed (sandbox
//!   stopped).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::allocation::Amounts;
use crate::api::{self, RestartPolicy};
use crate::clock::UnixNanos;
use crate::cri::{
    ContainerInfo, ContainerState, NamespaceMode, PodRuntimeStatus, Sandbox, SandboxState,
};
use crate::kuberuntime::backoff::{self, Backoff};
use crate::kuberuntime::labels;

/// Why a container is killed (kubelet: `containerKillReason`); probe kills use the
/// probe's grace period once probes exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KillReason {
    /// Spec changed, or any other planned kill.
    Unknown,
    /// The runtime reports an unknown state: kill before restarting, so two instances
    /// never run at once.
    UnknownState,
    LivenessProbe,
    StartupProbe,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ContainerToKill {
    pub name: String,
    pub message: String,
    pub reason: KillReason,
}

/// The plan for one pod (kubelet: `podActions`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct PodActions {
    /// Stop every running container and every sandbox of the pod first.
    pub kill_pod: bool,
    /// Create a new sandbox (after the kill); init containers are then purged.
    pub create_sandbox: bool,
    /// The existing sandbox to start containers in ("" when none / being replaced by
    /// a network-mode change).
    pub sandbox_id: String,
    /// The sandbox attempt number: used for a new sandbox and in its config.
    pub attempt: u32,
    /// Indices into `spec.initContainers`, in order. Sync stops at the first failure of
    /// a non-restartable one.
    pub init_containers_to_start: Vec<usize>,
    /// Indices into `spec.containers`, in order; each started independently.
    pub containers_to_start: Vec<usize>,
    /// Indices into `spec.ephemeralContainers`: never run yet, started once, never again.
    pub ephemeral_containers_to_start: Vec<usize>,
    /// Runtime container ID → what to kill (only when not `kill_pod`).
    pub containers_to_kill: BTreeMap<String, ContainerToKill>,
}

impl PodActions {
    /// The first init container to start, if any (kubelet: `NextInitContainerToStart`).
    #[cfg(test)]
    pub(crate) fn next_init_container_to_start(&self) -> Option<usize> {
        self.init_containers_to_start.first().copied()
    }

    /// Nothing to do: the pod is as desired.
    pub(crate) fn is_noop(&self) -> bool {
        !self.kill_pod
            && !self.create_sandbox
            && self.init_containers_to_start.is_empty()
            && self.containers_to_start.is_empty()
            && self.ephemeral_containers_to_start.is_empty()
            && self.containers_to_kill.is_empty()
    }
}

/// Probe verdicts by runtime container ID, from the prober (kubelet: `livenessManager`,
/// `startupManager`): liveness/startup failures kill containers; a sidecar with a startup
/// probe counts as started only once it is in `started`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ProbeVerdicts {
    /// Liveness probe failed.
    pub liveness: BTreeSet<String>,
    /// Startup probe failed.
    pub startup: BTreeSet<String>,
    /// Startup probe succeeded.
    pub started: BTreeSet<String>,
}

/// kubelet: `computePodActions`, with no probe result yet.
#[cfg(test)]
pub(crate) fn compute_pod_actions(pod: &api::Pod, status: &PodRuntimeStatus) -> PodActions {
    compute_pod_actions_with_probes(pod, status, &ProbeVerdicts::default())
}

/// kubelet: `computePodActions`: a new sandbox starts over; else ephemeral containers,
/// then init containers, then (once initialised) the regular containers.
pub(crate) fn compute_pod_actions_with_probes(
    pod: &api::Pod,
    status: &PodRuntimeStatus,
    probes: &ProbeVerdicts,
) -> PodActions {
    let (create_sandbox, attempt, sandbox_id) = sandbox_changed(pod, status);
    let mut a = PodActions {
        kill_pod: create_sandbox,
        create_sandbox,
        sandbox_id,
        attempt,
        ..PodActions::default()
    };
    if create_sandbox {
        new_sandbox_actions(pod, status, &mut a);
        return a;
    }

    // kubelet: ephemeral containers may start before initialisation is complete, and are
    // never restarted: one with any instance (running or not) is left alone.
    a.ephemeral_containers_to_start = pod
        .spec
        .ephemeral_containers
        .iter()
        .enumerate()
        .filter(|(_, c)| newest_container(status, &c.name).is_none())
        .map(|(i, _)| i)
        .collect();

    let initialized = compute_init_container_actions(pod, status, probes, &mut a);
    if a.kill_pod {
        a.ephemeral_containers_to_start.clear();
    }
    if a.kill_pod || !initialized {
        return a;
    }
    let keep = regular_container_actions(pod, status, probes, &mut a);
    if keep == 0 && a.containers_to_start.is_empty() {
        // Nothing runs and nothing will: stop the sandbox. Sidecars (and ephemeral
        // containers) must not keep the pod alive.
        a.kill_pod = true;
        a.init_containers_to_start.clear();
        a.ephemeral_containers_to_start.clear();
    }
    a
}

/// (Re)creating the sandbox: everything is killed and started from the beginning — the
/// first init container, else the regular containers still to run; no new sandbox for a
/// pod that ran and must not restart, or that has nothing left to run.
fn new_sandbox_actions(pod: &api::Pod, status: &PodRuntimeStatus, a: &mut PodActions) {
    if !restart_on_failure(pod) && a.attempt != 0 && !status.containers.is_empty() {
        // Never restart: the pod already ran; only make sure it is down.
        a.create_sandbox = false;
        return;
    }
    // kubelet: run-once containers (OnFailure, the container's own policy first) that
    // succeeded are not started again.
    let to_start: Vec<usize> = pod
        .spec
        .containers
        .iter()
        .enumerate()
        .filter(|(_, c)| {
            let run_once =
                c.restart_policy.unwrap_or(restart_policy(pod)) == RestartPolicy::OnFailure;
            !(run_once && container_succeeded(c, status))
        })
        .map(|(i, _)| i)
        .collect();
    if to_start.is_empty() && has_any_regular_container_created(pod, status) {
        // Initialised and nothing left to run: no new sandbox.
        a.create_sandbox = false;
        return;
    }
    if !pod.spec.init_containers.is_empty() {
        a.init_containers_to_start = vec![0];
        return;
    }
    a.containers_to_start = to_start;
}

/// The regular containers of an initialised pod: start those that should (re)start, kill
/// those whose spec changed or whose liveness or startup probe failed (restarting them per
/// their policy). Returns how many running ones are kept as they are.
fn regular_container_actions(
    pod: &api::Pod,
    status: &PodRuntimeStatus,
    probes: &ProbeVerdicts,
    a: &mut PodActions,
) -> usize {
    let mut keep = 0;
    for (idx, container) in pod.spec.containers.iter().enumerate() {
        let cstatus = newest_container(status, &container.name);
        let running = matches!(cstatus, Some(s) if s.state == ContainerState::Running);
        if !running {
            if should_container_be_restarted(container, pod, status) {
                a.containers_to_start.push(idx);
                if let Some(s) = cstatus.filter(|s| s.state == ContainerState::Unknown) {
                    a.containers_to_kill.insert(
                        s.id.clone(),
                        ContainerToKill {
                            name: container.name.clone(),
                            message:
                                "Container is in \"Unknown\" state, try killing it before restart"
                                    .into(),
                            reason: KillReason::UnknownState,
                        },
                    );
                }
            }
            continue;
        }
        let Some(s) = cstatus else { continue };
        // kubelet (ContainerRestartRules): a running container is restarted per its own
        // policy when it has one; its rules need an exit code, so they are not read here.
        let mut restart = match container.restart_policy {
            Some(own) => own != RestartPolicy::Never,
            None => restart_on_failure(pod),
        };
        let (message, reason) = if container_changed(container, s) {
            // Restart regardless of the policy: the spec changed.
            restart = true;
            (
                format!("Container {} definition changed", container.name),
                KillReason::Unknown,
            )
        } else if probes.liveness.contains(&s.id) {
            (
                format!("Container {} failed liveness probe", container.name),
                KillReason::LivenessProbe,
            )
        } else if probes.startup.contains(&s.id) {
            (
                format!("Container {} failed startup probe", container.name),
                KillReason::StartupProbe,
            )
        } else {
            keep += 1;
            continue;
        };
        let message = if restart {
            a.containers_to_start.push(idx);
            format!("{message}, will be restarted")
        } else {
            message
        };
        a.containers_to_kill.insert(
            s.id.clone(),
            ContainerToKill {
                name: container.name.clone(),
                message,
                reason,
            },
        );
    }
    keep
}

/// One running container's new cpu and memory (kubelet: `containerToUpdateInfo`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ContainerUpdate {
    pub id: String,
    pub name: String,
    /// The allocated values (its cpu and memory requirements).
    pub desired: api::ResourceRequirements,
    pub desired_amounts: Amounts,
    /// What it runs with now.
    pub current: Amounts,
}

/// kubelet: `computePodResizeAction` over the running containers and sidecars — each
/// whose allocated cpu or memory differs from what it runs with (`actual`, by container
/// ID; its creation annotation otherwise) is updated in place, or, when the
/// `resizePolicy` of a changed resource says `RestartContainer`, killed and started again
/// (added to `a`). Nothing when the pod is being killed or cannot resize.
#[inline(never)]
pub(crate) fn add_resize(
    pod: &api::Pod,
    status: &PodRuntimeStatus,
    actual: &crate::allocation::Named,
    a: &mut PodActions,
) -> Vec<ContainerUpdate> {
    let mut updates = Vec::new();
    if !crate::allocation::ENABLED || a.kill_pod || !crate::allocation::resizable(pod) {
        return updates;
    }
    let sidecars = pod
        .spec
        .init_containers
        .iter()
        .enumerate()
        .filter(|(_, c)| is_restartable_init_container(c));
    let all = pod
        .spec
        .containers
        .iter()
        .enumerate()
        .map(|(i, c)| (i, c, false))
        .chain(sidecars.map(|(i, c)| (i, c, true)));
    for (idx, c, init) in all {
        let Some(s) = newest_container(status, &c.name).filter(|s| {
            s.state == ContainerState::Running && !a.containers_to_kill.contains_key(&s.id)
        }) else {
            continue;
        };
        let desired = crate::allocation::cpu_memory(c.resources.as_ref());
        let cur = crate::allocation::named(actual, &s.id)
            .cloned()
            .or_else(|| crate::allocation::from_annotation(&s.annotations))
            .unwrap_or_default();
        let (want, have) = (Amounts::of(Some(&desired)), Amounts::of(Some(&cur)));
        if want == have {
            continue;
        }
        let restart =
            |name: &str, changed: bool| changed && crate::allocation::restarts_on(c, name);
        let cpu = (want.cpu_request, want.cpu_limit) != (have.cpu_request, have.cpu_limit);
        let memory =
            (want.memory_request, want.memory_limit) != (have.memory_request, have.memory_limit);
        if restart("cpu", cpu) || restart("memory", memory) {
            a.containers_to_kill.insert(
                s.id.clone(),
                ContainerToKill {
                    name: c.name.clone(),
                    message: format!("Container {} resize requires restart", c.name),
                    reason: KillReason::Unknown,
                },
            );
            if init {
                a.init_containers_to_start.push(idx);
            } else {
                a.containers_to_start.push(idx);
            }
            continue;
        }
        updates.push(ContainerUpdate {
            id: s.id.clone(),
            name: c.name.clone(),
            desired,
            desired_amounts: want,
            current: have,
        });
    }
    updates
}

/// kubelet: `computeInitContainerActions` (the SidecarContainers version, which covers
/// plain init containers too). Returns whether the pod is initialised.
fn compute_init_container_actions(
    pod: &api::Pod,
    status: &PodRuntimeStatus,
    probes: &ProbeVerdicts,
    a: &mut PodActions,
) -> bool {
    let inits = &pod.spec.init_containers;
    if inits.is_empty() {
        return true;
    }

    // A regular container created or running means initialisation finished at some point,
    // even if the init containers were removed since. (Exited ones do not count: after a
    // reboot everything has exited and the new sandbox must initialise again.)
    let mut pod_has_initialized = pod.spec.containers.iter().any(|c| {
        matches!(
            newest_container(status, &c.name).map(|s| s.state),
            Some(ContainerState::Created | ContainerState::Running)
        )
    });
    let mut previously_initialized = pod_has_initialized;
    let restart_on_failure = restart_on_failure(pod);

    // Walk backwards: the last init container with a status says how far we got (earlier
    // ones may have been removed). Indices are collected in reverse and flipped at the
    // end.
    let mut to_start = Vec::new();
    for i in (0..inits.len()).rev() {
        let c = &inits[i];
        let sidecar = is_restartable_init_container(c);
        let Some(s) = newest_container(status, &c.name) else {
            if previously_initialized && sidecar {
                to_start.push(i);
            }
            continue;
        };
        if previously_initialized && !sidecar {
            // After initialisation only sidecars are kept running.
            continue;
        }
        match s.state {
            ContainerState::Created => {
                // Create and start are one step: stuck in Created means the start failed.
                to_start.push(i);
            }
            ContainerState::Running => {
                if sidecar {
                    let last = i == inits.len() - 1;
                    let walked = (previously_initialized, &mut to_start);
                    if running_sidecar_actions(c, s, i, last, walked, probes, a) {
                        pod_has_initialized = true;
                    }
                }
                // A plain init container that runs: wait for it.
            }
            ContainerState::Exited => {
                if sidecar {
                    to_start.push(i);
                } else if is_init_container_failed(s) {
                    // kubelet (ContainerRestartRules): its rules and own policy first.
                    if !should_container_be_restarted(c, pod, status) {
                        a.kill_pod = true;
                        a.init_containers_to_start.clear();
                        return false;
                    }
                    to_start.push(i);
                } else if i == inits.len() - 1 {
                    pod_has_initialized = true;
                } else {
                    to_start.push(i + 1);
                }
            }
            ContainerState::Unknown => {
                // kubelet: no exit code, so its own policy only (not its rules).
                let restart = match c.restart_policy {
                    Some(own) => own != RestartPolicy::Never,
                    None => restart_on_failure,
                };
                if !sidecar && !restart {
                    a.kill_pod = true;
                    a.init_containers_to_start.clear();
                    return false;
                }
                a.containers_to_kill.insert(
                    s.id.clone(),
                    ContainerToKill {
                        name: c.name.clone(),
                        message:
                            "Init container is in \"Unknown\" state, try killing it before restart"
                                .into(),
                        reason: KillReason::UnknownState,
                    },
                );
                to_start.push(i);
            }
        }
        previously_initialized = true;
    }
    if !previously_initialized {
        // No init container has run yet: start the first.
        to_start.push(0);
    }
    to_start.reverse();
    a.init_containers_to_start = to_start;
    pod_has_initialized
}

/// A running sidecar (init container `i`, `last` of them): failed its startup probe →
/// restart it; startup probe not yet succeeded → wait; else started — the next init
/// container may start (before initialisation, `walked.0` false), and a changed spec or a
/// failed liveness probe restarts it. `walked.1` collects the init containers to start.
/// Returns whether the pod is initialised (the last one started).
fn running_sidecar_actions(
    c: &api::Container,
    s: &ContainerInfo,
    i: usize,
    last: bool,
    walked: (bool, &mut Vec<usize>),
    probes: &ProbeVerdicts,
    a: &mut PodActions,
) -> bool {
    let (previously_initialized, to_start) = walked;
    let kill = |message: String, reason| ContainerToKill {
        name: c.name.clone(),
        message,
        reason,
    };
    if c.startup_probe.is_some() && probes.startup.contains(&s.id) {
        let message = format!("Init container {} failed startup probe", c.name);
        a.containers_to_kill
            .insert(s.id.clone(), kill(message, KillReason::StartupProbe));
        to_start.push(i);
        return false;
    }
    if c.startup_probe.is_some() && !probes.started.contains(&s.id) {
        // kubelet: its startup probe has not succeeded yet: wait for it before the next
        // init container.
        return false;
    }
    // Started.
    if !last && !previously_initialized {
        to_start.push(i + 1);
    }
    if container_changed(c, s) {
        let message = format!("Init container {} definition changed", c.name);
        a.containers_to_kill
            .insert(s.id.clone(), kill(message, KillReason::Unknown));
        to_start.push(i);
    } else if c.liveness_probe.is_some() && probes.liveness.contains(&s.id) {
        let message = format!("Init container {} failed liveness probe", c.name);
        a.containers_to_kill
            .insert(s.id.clone(), kill(message, KillReason::LivenessProbe));
        to_start.push(i);
    }
    last
}

/// kubelet: `PodSandboxChanged` → (create, attempt, existing sandbox ID).
fn sandbox_changed(pod: &api::Pod, status: &PodRuntimeStatus) -> (bool, u32, String) {
    let Some(newest) = status.sandboxes.first() else {
        return (true, 0, String::new());
    };
    let ready = status
        .sandboxes
        .iter()
        .filter(|s| s.state == SandboxState::Ready)
        .count();
    let max_attempt = status
        .sandboxes
        .iter()
        .map(|s| s.attempt)
        .max()
        .unwrap_or(0);
    let next = max_attempt.saturating_add(1);
    if ready > 1 {
        return (true, next, newest.id.clone());
    }
    if newest.state != SandboxState::Ready {
        return (true, next, newest.id.clone());
    }
    // `network` is only known from a PodSandboxStatus call; unknown never triggers.
    if newest.network.is_some_and(|n| n != network_mode(pod)) {
        return (true, next, String::new());
    }
    if !pod.spec.host_network && sandbox_status_known(newest) && !has_ip(newest) {
        return (true, next, newest.id.clone());
    }
    (false, max_attempt, newest.id.clone())
}

fn sandbox_status_known(s: &Sandbox) -> bool {
    s.network.is_some()
}

fn has_ip(s: &Sandbox) -> bool {
    s.ip.as_deref().is_some_and(|ip| !ip.is_empty())
}

/// The pod's network namespace mode (kubelet: `NetworkNamespaceForPod`).
pub(crate) fn network_mode(pod: &api::Pod) -> NamespaceMode {
    if pod.spec.host_network {
        NamespaceMode::Node
    } else {
        NamespaceMode::Pod
    }
}

/// kubelet: `ShouldContainerBeRestarted`.
pub(crate) fn should_container_be_restarted(
    container: &api::Container,
    pod: &api::Pod,
    status: &PodRuntimeStatus,
) -> bool {
    if pod.metadata.deletion_timestamp.is_some() {
        return false;
    }
    let Some(s) = newest_container(status, &container.name) else {
        return true; // never ran (or all instances were removed)
    };
    match s.state {
        ContainerState::Running => false,
        ContainerState::Unknown | ContainerState::Created => true,
        ContainerState::Exited => api::container_should_restart(container, &pod.spec, s.exit_code),
    }
}

/// `spec.restartPolicy`, API default `Always`.
pub(crate) fn restart_policy(pod: &api::Pod) -> RestartPolicy {
    pod.spec.restart_policy.unwrap_or(RestartPolicy::Always)
}

fn restart_on_failure(pod: &api::Pod) -> bool {
    restart_policy(pod) != RestartPolicy::Never
}

/// A sidecar: an init container with `restartPolicy: Always`.
pub(crate) fn is_restartable_init_container(c: &api::Container) -> bool {
    c.restart_policy == Some(RestartPolicy::Always)
}

fn container_succeeded(c: &api::Container, status: &PodRuntimeStatus) -> bool {
    newest_container(status, &c.name)
        .is_some_and(|s| s.state == ContainerState::Exited && s.exit_code == 0)
}

fn has_any_regular_container_created(pod: &api::Pod, status: &PodRuntimeStatus) -> bool {
    pod.spec.containers.iter().any(|c| {
        matches!(
            newest_container(status, &c.name).map(|s| s.state),
            Some(ContainerState::Created | ContainerState::Running | ContainerState::Exited)
        )
    })
}

/// kubelet: `isInitContainerFailed` — non-zero exit, OOM-killed, or unknown state.
pub(crate) fn is_init_container_failed(s: &ContainerInfo) -> bool {
    s.reason == "OOMKilled"
        || (s.state == ContainerState::Exited && s.exit_code != 0)
        || s.state == ContainerState::Unknown
}

/// The running container's hash differs from the spec's (kubelet: `containerChanged`).
/// A container without a hash annotation was not made by picolet: treated as changed.
pub(crate) fn container_changed(c: &api::Container, s: &ContainerInfo) -> bool {
    labels::container_annotation_info(s).hash.as_deref() != Some(&labels::container_hash(c))
}

/// The newest runtime instance of a container name (kubelet:
/// `FindContainerStatusByName`; `status.containers` is newest first).
pub(crate) fn newest_container<'a>(
    status: &'a PodRuntimeStatus,
    name: &str,
) -> Option<&'a ContainerInfo> {
    status
        .containers
        .iter()
        .find(|c| labels::container_name(c) == name)
}

/// A crash-loop wait: the container must not be started yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BackOffWait {
    /// The current delay (`back-off 20s restarting …`).
    pub delay: Duration,
    /// What is left of it.
    pub remaining: Duration,
    /// kubelet's message: `back-off 20s restarting failed container=<c> pod=<name>_<ns>(<uid>)`.
    pub message: String,
}

/// Should this container wait before being started again? (kubelet: `doBackOff`.)
///
/// Measured from the `finishedAt` of its newest exited instance. When not in back-off the
/// failure is recorded (`next`), so the following crash waits twice as long; a container
/// that never exited is never in back-off.
pub(crate) fn should_back_off(
    backoff: &mut Backoff,
    pod: &api::Pod,
    container: &api::Container,
    status: &PodRuntimeStatus,
    now: UnixNanos,
) -> Option<BackOffWait> {
    let exited = status.containers.iter().find(|c| {
        labels::container_name(c) == container.name && c.state == ContainerState::Exited
    })?;
    let key = backoff::crash_loop_key(pod, container);
    let ts = exited.finished_at;
    if let Some(remaining) = backoff.remaining_since(&key, ts, now) {
        let delay = backoff.get(&key);
        return Some(BackOffWait {
            delay,
            remaining,
            message: format!(
                "back-off {} restarting failed container={} pod={}",
                crate::clock::go_duration(delay),
                container.name,
                format_pod(pod)
            ),
        });
    }
    backoff.next(&key, ts, now);
    None
}

/// kubelet: `format.Pod` → `name_namespace(uid)`.
pub(crate) fn format_pod(pod: &api::Pod) -> String {
    format!(
        "{}_{}({})",
        pod.metadata.name, pod.metadata.namespace, pod.metadata.uid
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const S: i64 = 1_000_000_000;

    // ----- builders ---------------------------------------------------------------------

    fn container(name: &str) -> api::Container {
        api::Container {
            name: name.into(),
            image: format!("img/{name}:1"),
            ..Default::default()
        }
    }

    fn sidecar(name: &str) -> api::Container {
        api::Container {
            restart_policy: Some(RestartPolicy::Always),
            ..container(name)
        }
    }

    fn pod(policy: RestartPolicy, inits: &[api::Container], cs: &[&str]) -> api::Pod {
        let mut p = api::Pod::default();
        p.metadata.name = "p".into();
        p.metadata.namespace = "default".into();
        p.metadata.uid = "uid".into();
        p.spec.restart_policy = Some(policy);
        p.spec.init_containers = inits.to_vec();
        p.spec.containers = cs.iter().map(|n| container(n)).collect();
        p
    }

    fn sandbox(id: &str, attempt: u32, state: SandboxState, created: i64) -> Sandbox {
        Sandbox {
            id: id.into(),
            name: "p".into(),
            namespace: "default".into(),
            uid: "uid".into(),
            attempt,
            state,
            created_at: created,
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            ip: Some("10.0.0.2".into()),
            network: Some(NamespaceMode::Pod),
        }
    }

    fn ready() -> Sandbox {
        sandbox("s1", 0, SandboxState::Ready, 100)
    }

    /// A runtime container for `spec` as picolet would have created it.
    fn rc(
        pod: &api::Pod,
        spec: &api::Container,
        id: &str,
        state: ContainerState,
        exit: i32,
    ) -> ContainerInfo {
        ContainerInfo {
            id: id.into(),
            sandbox_id: "s1".into(),
            name: spec.name.clone(),
            attempt: 0,
            image: spec.image.clone(),
            image_ref: String::new(),
            state,
            created_at: 0,
            started_at: 0,
            finished_at: 0,
            exit_code: exit,
            reason: String::new(),
            message: String::new(),
            labels: labels::container_labels(pod, spec),
            annotations: labels::container_annotations(pod, spec, 0),
            log_path: String::new(),
        }
    }

    fn status(sandboxes: Vec<Sandbox>, containers: Vec<ContainerInfo>) -> PodRuntimeStatus {
        PodRuntimeStatus {
            uid: "uid".into(),
            name: "p".into(),
            namespace: "default".into(),
            sandboxes,
            containers,
        }
    }

    fn c_of(p: &api::Pod, name: &str) -> api::Container {
        p.spec
            .init_containers
            .iter()
            .chain(&p.spec.containers)
            .find(|c| c.name == name)
            .cloned()
            .unwrap()
    }

    use ContainerState::{Created, Exited, Running, Unknown};

    /// (name, pod, sandboxes newest first, want (create, attempt, sandbox id))
    type SandboxCase<'a> = (&'a str, &'a api::Pod, Vec<Sandbox>, (bool, u32, &'a str));
    /// (name, containers newest first, want init to start, want containers to start, kill pod)
    type InitCase = (
        &'static str,
        Vec<ContainerInfo>,
        Vec<usize>,
        Vec<usize>,
        bool,
    );
    /// (name, containers newest first, want inits, want containers, kill ids)
    type SidecarCase = (
        &'static str,
        Vec<ContainerInfo>,
        Vec<usize>,
        Vec<usize>,
        Vec<&'static str>,
    );

    // ----- sandbox rules ----------------------------------------------------------------

    #[test]
    fn sandbox_rules() {
        let p = pod(RestartPolicy::Always, &[], &["a"]);
        let mut host = p.clone();
        host.spec.host_network = true;
        let not_ready = |id, attempt, t| sandbox(id, attempt, SandboxState::NotReady, t);
        let no_ip = Sandbox {
            ip: None,
            ..ready()
        };
        let empty_ip = Sandbox {
            ip: Some(String::new()),
            ..ready()
        };
        let unknown_net = Sandbox {
            ip: None,
            network: None,
            ..ready()
        };
        let node_net = Sandbox {
            network: Some(NamespaceMode::Node),
            ip: None,
            ..ready()
        };

        // (name, pod, sandboxes newest first, want (create, attempt, sandbox id))
        let cases: Vec<SandboxCase> = vec![
            ("no sandbox", &p, vec![], (true, 0, "")),
            ("one ready", &p, vec![ready()], (false, 0, "s1")),
            (
                "two ready",
                &p,
                vec![sandbox("s2", 1, SandboxState::Ready, 200), ready()],
                (true, 2, "s2"),
            ),
            (
                "newest not ready",
                &p,
                vec![not_ready("s2", 1, 200), ready()],
                (true, 2, "s2"),
            ),
            (
                "old not ready, newest ready",
                &p,
                vec![
                    sandbox("s2", 3, SandboxState::Ready, 200),
                    not_ready("s1", 2, 100),
                ],
                (false, 3, "s2"),
            ),
            ("pod network without IP", &p, vec![no_ip], (true, 1, "s1")),
            ("pod network, empty IP", &p, vec![empty_ip], (true, 1, "s1")),
            (
                "status not read: IP unknown",
                &p,
                vec![unknown_net.clone()],
                (false, 0, "s1"),
            ),
            (
                "network mode changed to host",
                &host,
                vec![ready()],
                (true, 1, ""),
            ),
            (
                "network mode changed to pod",
                &p,
                vec![node_net.clone()],
                (true, 1, ""),
            ),
            (
                "host network needs no IP",
                &host,
                vec![node_net],
                (false, 0, "s1"),
            ),
            (
                "host network, mode unknown",
                &host,
                vec![unknown_net],
                (false, 0, "s1"),
            ),
        ];
        for (name, pod, sbs, (create, attempt, id)) in cases {
            let got = sandbox_changed(pod, &status(sbs, vec![]));
            assert_eq!(got, (create, attempt, id.to_string()), "{name}");
        }
    }

    #[test]
    fn new_pod_creates_sandbox_and_starts_all() {
        let p = pod(RestartPolicy::Always, &[], &["a", "b"]);
        let a = compute_pod_actions(&p, &status(vec![], vec![]));
        assert_eq!(
            a,
            PodActions {
                kill_pod: true,
                create_sandbox: true,
                sandbox_id: String::new(),
                attempt: 0,
                containers_to_start: vec![0, 1],
                ..Default::default()
            }
        );
    }

    #[test]
    fn new_pod_with_init_starts_first_init_only() {
        let p = pod(
            RestartPolicy::Always,
            &[container("i0"), container("i1")],
            &["a"],
        );
        let a = compute_pod_actions(&p, &status(vec![], vec![]));
        assert!(a.create_sandbox);
        assert_eq!(a.init_containers_to_start, vec![0]);
        assert_eq!(a.next_init_container_to_start(), Some(0));
        assert!(a.containers_to_start.is_empty());
    }

    #[test]
    fn sandbox_died_recreate_with_next_attempt() {
        let p = pod(RestartPolicy::Always, &[], &["a"]);
        let dead = sandbox("s1", 0, SandboxState::NotReady, 100);
        let st = status(vec![dead], vec![rc(&p, &c_of(&p, "a"), "c1", Exited, 137)]);
        let a = compute_pod_actions(&p, &st);
        assert!(a.kill_pod && a.create_sandbox);
        assert_eq!((a.attempt, a.sandbox_id.as_str()), (1, "s1"));
        assert_eq!(a.containers_to_start, vec![0]);
    }

    #[test]
    fn never_policy_sandbox_gone_kill_only() {
        let p = pod(RestartPolicy::Never, &[], &["a"]);
        let dead = sandbox("s1", 0, SandboxState::NotReady, 100);
        let st = status(
            vec![dead.clone()],
            vec![rc(&p, &c_of(&p, "a"), "c1", Exited, 0)],
        );
        let a = compute_pod_actions(&p, &st);
        assert!(a.kill_pod);
        assert!(!a.create_sandbox);
        assert!(a.containers_to_start.is_empty());
        // no container statuses yet: never successfully created anything → retry sandbox
        let a = compute_pod_actions(&p, &status(vec![dead], vec![]));
        assert!(a.create_sandbox);
        assert_eq!(a.containers_to_start, vec![0]);
    }

    #[test]
    fn on_failure_sandbox_gone_skips_succeeded_containers() {
        let p = pod(RestartPolicy::OnFailure, &[], &["ok", "bad"]);
        let dead = sandbox("s1", 0, SandboxState::NotReady, 100);
        let st = status(
            vec![dead.clone()],
            vec![
                rc(&p, &c_of(&p, "ok"), "c1", Exited, 0),
                rc(&p, &c_of(&p, "bad"), "c2", Exited, 1),
            ],
        );
        let a = compute_pod_actions(&p, &st);
        assert!(a.create_sandbox);
        assert_eq!(a.containers_to_start, vec![1]);
        // all succeeded → nothing to start, initialised → kill only
        let st = status(
            vec![dead],
            vec![
                rc(&p, &c_of(&p, "ok"), "c1", Exited, 0),
                rc(&p, &c_of(&p, "bad"), "c2", Exited, 0),
            ],
        );
        let a = compute_pod_actions(&p, &st);
        assert!(a.kill_pod && !a.create_sandbox);
    }

    // ----- regular containers ------------------------------------------------------------

    #[test]
    fn regular_container_restart_table() {
        // (policy, state, exit code, restarted?)
        let cases = [
            (RestartPolicy::Always, Exited, 0, true),
            (RestartPolicy::Always, Exited, 1, true),
            (RestartPolicy::OnFailure, Exited, 0, false),
            (RestartPolicy::OnFailure, Exited, 2, true),
            (RestartPolicy::Never, Exited, 0, false),
            (RestartPolicy::Never, Exited, 1, false),
            (RestartPolicy::Never, Created, 0, true),
            (RestartPolicy::Never, Unknown, 0, true),
            (RestartPolicy::Always, Running, 0, false),
        ];
        for (policy, state, exit, want) in cases {
            // "b" keeps running so the pod is not killed as a whole
            let p = pod(policy, &[], &["a", "b"]);
            let st = status(
                vec![ready()],
                vec![
                    rc(&p, &c_of(&p, "a"), "c1", state, exit),
                    rc(&p, &c_of(&p, "b"), "c2", Running, 0),
                ],
            );
            let a = compute_pod_actions(&p, &st);
            assert!(
                !a.create_sandbox && !a.kill_pod,
                "{policy:?} {state:?} {exit}"
            );
            assert_eq!(
                a.containers_to_start == vec![0],
                want,
                "{policy:?} {state:?} {exit}"
            );
            assert_eq!(a.sandbox_id, "s1");
        }
    }

    #[test]
    fn missing_container_is_started() {
        let p = pod(RestartPolicy::Never, &[], &["a", "b"]);
        let st = status(
            vec![ready()],
            vec![rc(&p, &c_of(&p, "a"), "c1", Running, 0)],
        );
        let a = compute_pod_actions(&p, &st);
        assert_eq!(a.containers_to_start, vec![1]);
        assert!(a.containers_to_kill.is_empty());
    }

    #[test]
    fn newest_instance_decides() {
        // an old exited instance and a newer running one: nothing to do
        let p = pod(RestartPolicy::Always, &[], &["a"]);
        let spec = c_of(&p, "a");
        let st = status(
            vec![ready()],
            vec![
                rc(&p, &spec, "new", Running, 0),
                rc(&p, &spec, "old", Exited, 1),
            ],
        );
        assert!(compute_pod_actions(&p, &st).is_noop());
    }

    #[test]
    fn unknown_state_is_killed_before_restart() {
        let p = pod(RestartPolicy::Always, &[], &["a"]);
        let st = status(
            vec![ready()],
            vec![rc(&p, &c_of(&p, "a"), "c1", Unknown, 0)],
        );
        let a = compute_pod_actions(&p, &st);
        assert_eq!(a.containers_to_start, vec![0]);
        assert_eq!(a.containers_to_kill["c1"].reason, KillReason::UnknownState);
    }

    #[test]
    fn hash_change_kills_and_restarts_even_under_never() {
        for policy in [RestartPolicy::Always, RestartPolicy::Never] {
            let p = pod(policy, &[], &["a"]);
            let old_spec = api::Container {
                image: "img/a:0".into(),
                ..c_of(&p, "a")
            };
            let st = status(vec![ready()], vec![rc(&p, &old_spec, "c1", Running, 0)]);
            let a = compute_pod_actions(&p, &st);
            assert!(!a.kill_pod);
            assert_eq!(a.containers_to_start, vec![0]);
            assert_eq!(
                a.containers_to_kill["c1"],
                ContainerToKill {
                    name: "a".into(),
                    message: "Container a definition changed, will be restarted".into(),
                    reason: KillReason::Unknown,
                }
            );
        }
    }

    #[test]
    fn container_without_hash_counts_as_changed() {
        let p = pod(RestartPolicy::Always, &[], &["a"]);
        let mut c = rc(&p, &c_of(&p, "a"), "c1", Running, 0);
        c.annotations.clear();
        let a = compute_pod_actions(&p, &status(vec![ready()], vec![c]));
        assert!(a.containers_to_kill.contains_key("c1"));
    }

    /// kubelet (ContainerRestartRules): the container's rules, then its own policy, then the
    /// pod's decide whether an exited container starts again; a probe kill uses its own
    /// policy (no exit code yet); a run-once container that succeeded is not started in a
    /// new sandbox.
    #[test]
    fn container_restart_policy_and_rules() {
        let rule = |codes: &[i32]| api::ContainerRestartRule {
            action: "Restart".into(),
            exit_codes: Some(api::ContainerRestartRuleOnExitCodes {
                operator: "In".into(),
                values: codes.to_vec(),
            }),
        };
        use RestartPolicy::{Always, Never, OnFailure};
        // (pod policy, container policy, rules, exit code, restarted?)
        let cases = [
            (Never, Some(Never), vec![rule(&[42])], 42, true),
            (Never, Some(Never), vec![rule(&[42])], 1, false),
            (Always, Some(Never), vec![], 1, false),
            (Never, Some(Always), vec![], 1, true),
            (Never, Some(OnFailure), vec![], 1, true),
            (Always, Some(OnFailure), vec![], 0, false),
            (Always, None, vec![], 1, true),
        ];
        for (i, (pod_policy, own, rules, exit, want)) in cases.into_iter().enumerate() {
            let mut p = pod(pod_policy, &[], &["a", "b"]);
            p.spec.containers[0].restart_policy = own;
            p.spec.containers[0].restart_policy_rules = rules;
            let st = status(
                vec![ready()],
                vec![
                    rc(&p, &c_of(&p, "a"), "c1", Exited, exit),
                    rc(&p, &c_of(&p, "b"), "c2", Running, 0),
                ],
            );
            let a = compute_pod_actions(&p, &st);
            assert_eq!(a.containers_to_start == vec![0], want, "case {i}");
            assert!(!a.kill_pod, "case {i}");
        }

        // A liveness failure under a pod's Never: the container's Always restarts it; under
        // Always, its Never does not.
        for (pod_policy, own, restart) in [(Never, Always, true), (Always, Never, false)] {
            let mut p = pod(pod_policy, &[], &["a", "b"]);
            p.spec.containers[0].restart_policy = Some(own);
            let st = status(
                vec![ready()],
                vec![
                    rc(&p, &c_of(&p, "a"), "c1", Running, 0),
                    rc(&p, &c_of(&p, "b"), "c2", Running, 0),
                ],
            );
            let mut probes = ProbeVerdicts::default();
            probes.liveness.insert("c1".into());
            let a = compute_pod_actions_with_probes(&p, &st, &probes);
            assert!(a.containers_to_kill.contains_key("c1"));
            assert_eq!(
                a.containers_to_start == vec![0],
                restart,
                "{pod_policy:?} {own:?}"
            );
        }

        // A failed init container under a pod's Never: its rule restarts it, else the pod is
        // killed.
        for (exit, restart) in [(42, true), (1, false)] {
            let mut init = container("i0");
            init.restart_policy = Some(Never);
            init.restart_policy_rules = vec![rule(&[42])];
            let p = pod(Never, &[init], &["a"]);
            let st = status(
                vec![ready()],
                vec![rc(&p, &c_of(&p, "i0"), "c1", Exited, exit)],
            );
            let a = compute_pod_actions(&p, &st);
            assert_eq!(
                a.init_containers_to_start == vec![0],
                restart,
                "exit {exit}"
            );
            assert_eq!(a.kill_pod, !restart, "exit {exit}");
        }

        // A new sandbox: a container whose own OnFailure succeeded is not started again.
        let mut p = pod(Always, &[], &["a", "b"]);
        p.spec.containers[0].restart_policy = Some(OnFailure);
        let st = status(
            vec![sandbox("s1", 0, SandboxState::NotReady, 100)],
            vec![
                rc(&p, &c_of(&p, "a"), "c1", Exited, 0),
                rc(&p, &c_of(&p, "b"), "c2", Exited, 1),
            ],
        );
        let a = compute_pod_actions(&p, &st);
        assert!(a.create_sandbox);
        assert_eq!(a.containers_to_start, vec![1]);
    }

    #[test]
    fn probe_failures_kill_and_restart_per_policy() {
        for (policy, probe, restart) in [
            (RestartPolicy::Always, "liveness", true),
            (RestartPolicy::Never, "liveness", false),
            (RestartPolicy::OnFailure, "startup", true),
        ] {
            let p = pod(policy, &[], &["a", "b"]);
            let st = status(
                vec![ready()],
                vec![
                    rc(&p, &c_of(&p, "a"), "c1", Running, 0),
                    rc(&p, &c_of(&p, "b"), "c2", Running, 0),
                ],
            );
            let mut probes = ProbeVerdicts::default();
            let reason = if probe == "liveness" {
                probes.liveness.insert("c1".into());
                KillReason::LivenessProbe
            } else {
                probes.startup.insert("c1".into());
                KillReason::StartupProbe
            };
            let a = compute_pod_actions_with_probes(&p, &st, &probes);
            assert_eq!(a.containers_to_kill["c1"].reason, reason);
            assert_eq!(a.containers_to_start == vec![0], restart, "{policy:?}");
            assert_eq!(
                a.containers_to_kill["c1"]
                    .message
                    .ends_with(", will be restarted"),
                restart
            );
            assert!(!a.kill_pod);
        }
    }

    #[test]
    fn all_done_kills_pod() {
        for policy in [RestartPolicy::Never, RestartPolicy::OnFailure] {
            let p = pod(policy, &[], &["a"]);
            let st = status(vec![ready()], vec![rc(&p, &c_of(&p, "a"), "c1", Exited, 0)]);
            let a = compute_pod_actions(&p, &st);
            assert!(a.kill_pod, "{policy:?}");
            assert!(!a.create_sandbox);
            assert!(a.containers_to_start.is_empty());
        }
    }

    /// kubelet: `EphemeralContainersToStart` — each once, in the existing sandbox, even
    /// before initialisation; never restarted; none in a new sandbox or a pod being stopped.
    #[test]
    fn ephemeral_containers_start_once() {
        let mut p = pod(RestartPolicy::Always, &[container("i0")], &["a"]);
        p.spec.ephemeral_containers = vec![container("dbg"), container("dbg2")];
        let (i0, a, dbg) = (c_of(&p, "i0"), c_of(&p, "a"), container("dbg"));
        let running_a = || rc(&p, &a, "ca", Running, 0);
        /// (name, sandboxes, containers, want ephemeral to start, want kill pod)
        type Case<'a> = (&'a str, Vec<Sandbox>, Vec<ContainerInfo>, Vec<usize>, bool);
        let cases: Vec<Case> = vec![
            (
                "both new",
                vec![ready()],
                vec![running_a()],
                vec![0, 1],
                false,
            ),
            (
                "dbg running",
                vec![ready()],
                vec![rc(&p, &dbg, "cd", Running, 0), running_a()],
                vec![1],
                false,
            ),
            (
                "dbg exited: never again",
                vec![ready()],
                vec![rc(&p, &dbg, "cd", Exited, 1), running_a()],
                vec![1],
                false,
            ),
            (
                "during initialisation",
                vec![ready()],
                vec![rc(&p, &i0, "ci", Running, 0)],
                vec![0, 1],
                false,
            ),
            ("new sandbox: none", vec![], vec![], vec![], true),
        ];
        for (name, sandboxes, containers, want, kill) in cases {
            let got = compute_pod_actions(&p, &status(sandboxes, containers));
            assert_eq!(got.ephemeral_containers_to_start, want, "{name}");
            assert_eq!(got.kill_pod, kill, "{name}");
            assert!(got.containers_to_kill.is_empty(), "{name}");
        }
        // A running ephemeral container keeps no finished pod alive.
        let mut done = pod(RestartPolicy::Never, &[], &["a"]);
        done.spec.ephemeral_containers = vec![container("dbg")];
        let st = status(
            vec![ready()],
            vec![
                rc(&done, &dbg, "cd", Running, 0),
                rc(&done, &c_of(&done, "a"), "ca", Exited, 0),
            ],
        );
        let got = compute_pod_actions(&done, &st);
        assert!(got.kill_pod);
        assert!(got.ephemeral_containers_to_start.is_empty());
        // Not started yet when the pod stops: not started then either.
        let st = status(
            vec![ready()],
            vec![rc(&done, &c_of(&done, "a"), "ca", Exited, 0)],
        );
        let got = compute_pod_actions(&done, &st);
        assert!(got.kill_pod && got.ephemeral_containers_to_start.is_empty());
    }

    #[test]
    fn deleted_pod_does_not_restart() {
        let mut p = pod(RestartPolicy::Always, &[], &["a"]);
        p.metadata.deletion_timestamp = Some("2026-01-01T00:00:00Z".into());
        let st = status(vec![ready()], vec![rc(&p, &c_of(&p, "a"), "c1", Exited, 1)]);
        let a = compute_pod_actions(&p, &st);
        assert!(a.containers_to_start.is_empty());
        assert!(a.kill_pod);
    }

    // ----- init containers --------------------------------------------------------------

    #[test]
    fn init_container_progression() {
        let inits = [container("i0"), container("i1")];
        let p = pod(RestartPolicy::Always, &inits, &["a"]);
        let i0 = c_of(&p, "i0");
        let i1 = c_of(&p, "i1");
        let a = c_of(&p, "a");
        // (name, containers newest first, want init to start, want containers to start, kill pod)
        let cases: Vec<InitCase> = vec![
            ("none ran yet", vec![], vec![0], vec![], false),
            (
                "i0 running: wait",
                vec![rc(&p, &i0, "x0", Running, 0)],
                vec![],
                vec![],
                false,
            ),
            (
                "i0 done → i1",
                vec![rc(&p, &i0, "x0", Exited, 0)],
                vec![1],
                vec![],
                false,
            ),
            (
                "i0 failed → restart i0",
                vec![rc(&p, &i0, "x0", Exited, 1)],
                vec![0],
                vec![],
                false,
            ),
            (
                "i0 OOM-killed counts as failed",
                vec![ContainerInfo {
                    reason: "OOMKilled".into(),
                    ..rc(&p, &i0, "x0", Exited, 0)
                }],
                vec![0],
                vec![],
                false,
            ),
            (
                "i0 stuck created → start again",
                vec![rc(&p, &i0, "x0", Created, 0)],
                vec![0],
                vec![],
                false,
            ),
            (
                "i1 done → regular containers",
                vec![rc(&p, &i1, "x1", Exited, 0), rc(&p, &i0, "x0", Exited, 0)],
                vec![],
                vec![0],
                false,
            ),
            (
                "i0 removed but i1 done → initialised",
                vec![rc(&p, &i1, "x1", Exited, 0)],
                vec![],
                vec![0],
                false,
            ),
            (
                "regular running → inits not rerun",
                vec![rc(&p, &a, "y", Running, 0)],
                vec![],
                vec![],
                false,
            ),
        ];
        for (name, cs, inits_want, cs_want, kill) in cases {
            let act = compute_pod_actions(&p, &status(vec![ready()], cs));
            assert_eq!(act.init_containers_to_start, inits_want, "{name}");
            assert_eq!(act.containers_to_start, cs_want, "{name}");
            assert_eq!(act.kill_pod, kill, "{name}");
        }
    }

    #[test]
    fn init_failure_under_never_kills_pod() {
        let p = pod(RestartPolicy::Never, &[container("i0")], &["a"]);
        let i0 = c_of(&p, "i0");
        for st in [Exited, Unknown] {
            let act =
                compute_pod_actions(&p, &status(vec![ready()], vec![rc(&p, &i0, "x0", st, 1)]));
            assert!(act.kill_pod, "{st:?}");
            assert!(act.init_containers_to_start.is_empty());
            assert!(act.containers_to_start.is_empty());
        }
        // OnFailure restarts it; unknown state is killed first
        let p = pod(RestartPolicy::OnFailure, &[container("i0")], &["a"]);
        let act = compute_pod_actions(
            &p,
            &status(vec![ready()], vec![rc(&p, &i0, "x0", Unknown, 0)]),
        );
        assert!(!act.kill_pod);
        assert_eq!(act.init_containers_to_start, vec![0]);
        assert_eq!(
            act.containers_to_kill["x0"].reason,
            KillReason::UnknownState
        );
    }

    #[test]
    fn sidecars() {
        let inits = [sidecar("side"), container("i1")];
        let p = pod(RestartPolicy::Always, &inits, &["a"]);
        let side = c_of(&p, "side");
        let i1 = c_of(&p, "i1");
        let a = c_of(&p, "a");
        // (name, containers, want inits, want containers, kill ids)
        let cases: Vec<SidecarCase> = vec![
            (
                "sidecar running → next init",
                vec![rc(&p, &side, "s", Running, 0)],
                vec![1],
                vec![],
                vec![],
            ),
            (
                "sidecar exited during init → restart it",
                vec![rc(&p, &side, "s", Exited, 0)],
                vec![0],
                vec![],
                vec![],
            ),
            (
                "initialised, sidecar running → regular containers",
                vec![rc(&p, &i1, "x1", Exited, 0), rc(&p, &side, "s", Running, 0)],
                vec![],
                vec![0],
                vec![],
            ),
            (
                "initialised, sidecar crashed → restart sidecar",
                vec![
                    rc(&p, &a, "y", Running, 0),
                    rc(&p, &i1, "x1", Exited, 0),
                    rc(&p, &side, "s", Exited, 1),
                ],
                vec![0],
                vec![],
                vec![],
            ),
            (
                "initialised, sidecar removed → start it again",
                vec![rc(&p, &a, "y", Running, 0)],
                vec![0],
                vec![],
                vec![],
            ),
            (
                "sidecar image changed → kill and restart",
                vec![
                    rc(&p, &a, "y", Running, 0),
                    rc(
                        &p,
                        &api::Container {
                            image: "old".into(),
                            ..side.clone()
                        },
                        "s",
                        Running,
                        0,
                    ),
                ],
                vec![0],
                vec![],
                vec!["s"],
            ),
        ];
        for (name, cs, inits_want, cs_want, kills) in cases {
            let act = compute_pod_actions(&p, &status(vec![ready()], cs));
            assert_eq!(act.init_containers_to_start, inits_want, "{name}");
            assert_eq!(act.containers_to_start, cs_want, "{name}");
            assert_eq!(
                act.containers_to_kill
                    .keys()
                    .map(String::as_str)
                    .collect::<Vec<_>>(),
                kills,
                "{name}"
            );
            assert!(!act.kill_pod, "{name}");
        }
    }

    #[test]
    fn sidecar_probes() {
        let mut side = sidecar("side");
        side.startup_probe = Some(Box::default());
        side.liveness_probe = Some(Box::default());
        let inits = [side, container("i1")];
        let p = pod(RestartPolicy::Always, &inits, &["a"]);
        let side = c_of(&p, "side");
        let running = status(vec![ready()], vec![rc(&p, &side, "s", Running, 0)]);
        let set = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        // (name, verdicts, want inits, kill ids)
        let rows: Vec<(&str, ProbeVerdicts, Vec<usize>, Vec<&str>)> = vec![
            (
                "startup not yet succeeded → wait",
                ProbeVerdicts::default(),
                vec![],
                vec![],
            ),
            (
                "startup succeeded → next init",
                ProbeVerdicts {
                    started: set(&["s"]),
                    ..Default::default()
                },
                vec![1],
                vec![],
            ),
            (
                "startup failed → kill and restart the sidecar",
                ProbeVerdicts {
                    startup: set(&["s"]),
                    ..Default::default()
                },
                vec![0],
                vec!["s"],
            ),
            (
                "liveness failed → restart it, the next init goes on",
                ProbeVerdicts {
                    started: set(&["s"]),
                    liveness: set(&["s"]),
                    ..Default::default()
                },
                vec![0, 1],
                vec!["s"],
            ),
        ];
        for (name, verdicts, inits_want, kills) in rows {
            let act = compute_pod_actions_with_probes(&p, &running, &verdicts);
            let mut got = act.init_containers_to_start.clone();
            got.sort_unstable();
            assert_eq!(got, inits_want, "{name}");
            assert_eq!(
                act.containers_to_kill
                    .keys()
                    .map(String::as_str)
                    .collect::<Vec<_>>(),
                kills,
                "{name}"
            );
        }
    }

    #[test]
    fn sidecar_does_not_keep_finished_pod_alive() {
        let p = pod(RestartPolicy::Never, &[sidecar("side")], &["a"]);
        let st = status(
            vec![ready()],
            vec![
                rc(&p, &c_of(&p, "a"), "y", Exited, 0),
                rc(&p, &c_of(&p, "side"), "s", Running, 0),
            ],
        );
        let act = compute_pod_actions(&p, &st);
        assert!(act.kill_pod);
        assert!(act.init_containers_to_start.is_empty());
    }

    // ----- back-off ---------------------------------------------------------------------

    #[test]
    fn crash_loop_back_off() {
        let p = pod(RestartPolicy::Always, &[], &["a"]);
        let spec = c_of(&p, "a");
        let mut b = Backoff::default();
        let t0 = 1_000 * S;
        let exited_at = |t| {
            status(
                vec![ready()],
                vec![ContainerInfo {
                    finished_at: t,
                    ..rc(&p, &spec, "c", Exited, 1)
                }],
            )
        };
        // never exited → no back-off, nothing recorded
        assert_eq!(
            should_back_off(&mut b, &p, &spec, &status(vec![ready()], vec![]), t0),
            None
        );
        assert!(b.is_empty());
        // first crash: restart at once, record 10 s
        assert_eq!(should_back_off(&mut b, &p, &spec, &exited_at(t0), t0), None);
        // second crash 1 s after the restart: wait 10 s
        let w = should_back_off(&mut b, &p, &spec, &exited_at(t0 + S), t0 + 2 * S).unwrap();
        assert_eq!(w.delay, Duration::from_secs(10));
        assert_eq!(w.remaining, Duration::from_secs(9));
        assert_eq!(
            w.message,
            "back-off 10s restarting failed container=a pod=p_default(uid)"
        );
        // after the delay: restart, next delay 20 s
        assert_eq!(
            should_back_off(&mut b, &p, &spec, &exited_at(t0 + S), t0 + 11 * S),
            None
        );
        let w = should_back_off(&mut b, &p, &spec, &exited_at(t0 + 12 * S), t0 + 12 * S).unwrap();
        assert_eq!(
            w.message,
            "back-off 20s restarting failed container=a pod=p_default(uid)"
        );
        // a changed container (new hash) has its own key
        let changed = api::Container {
            image: "img/a:2".into(),
            ..spec.clone()
        };
        assert_eq!(
            should_back_off(&mut b, &p, &changed, &exited_at(t0 + 12 * S), t0 + 12 * S),
            None
        );
    }
    // ----- in-place resize --------------------------------------------------------------

    #[cfg(feature = "in-place-resize")]
    fn with_resources(mut p: api::Pod, name: &str, cpu: &str, memory: &str) -> api::Pod {
        let q = |v: &str| api::Quantity::Str(v.into());
        let r = api::ResourceRequirements {
            requests: [
                ("cpu".to_string(), q(cpu)),
                ("memory".to_string(), q(memory)),
            ]
            .into(),
            limits: [("memory".to_string(), q(memory))].into(),
            claims: None,
        };
        for c in p
            .spec
            .containers
            .iter_mut()
            .chain(p.spec.init_containers.iter_mut())
        {
            if c.name == name {
                c.resources = Some(r.clone());
            }
        }
        p
    }

    #[cfg(feature = "in-place-resize")]
    #[test]
    fn resize_updates_in_place_or_restarts_per_policy() {
        let old = with_resources(
            pod(RestartPolicy::Always, &[sidecar("side")], &["a", "b"]),
            "a",
            "100m",
            "64Mi",
        );
        let old = with_resources(
            with_resources(old, "b", "100m", "64Mi"),
            "side",
            "100m",
            "64Mi",
        );
        let running = |p: &api::Pod| {
            status(
                vec![ready()],
                vec![
                    rc(p, &c_of(p, "a"), "ca", Running, 0),
                    rc(p, &c_of(p, "b"), "cb", Running, 0),
                    rc(p, &c_of(p, "side"), "cs", Running, 0),
                ],
            )
        };
        let st = running(&old);
        // Nothing changed: nothing to do.
        let mut a = compute_pod_actions(&old, &st);
        assert!(add_resize(&old, &st, &Vec::new(), &mut a).is_empty());
        assert!(a.is_noop());

        // a: cpu up (in place); b: memory down with RestartContainer; side: cpu down.
        let mut new = with_resources(old.clone(), "a", "200m", "64Mi");
        new = with_resources(new, "b", "100m", "32Mi");
        new = with_resources(new, "side", "50m", "64Mi");
        new.spec.containers[1].resize_policy = Some(serde_json::json!([
            {"resourceName": "memory", "restartPolicy": "RestartContainer"}
        ]));
        let mut a = compute_pod_actions(&new, &st);
        let updates = add_resize(&new, &st, &Vec::new(), &mut a);
        let got: Vec<(&str, i64, i64)> = updates
            .iter()
            .map(|u| {
                (
                    u.name.as_str(),
                    u.current.cpu_request,
                    u.desired_amounts.cpu_request,
                )
            })
            .collect();
        assert_eq!(got, vec![("a", 100, 200), ("side", 100, 50)]);
        assert_eq!(a.containers_to_start, vec![1]);
        assert_eq!(
            a.containers_to_kill["cb"].message,
            "Container b resize requires restart"
        );

        // What an update recorded counts over the creation annotation: a is done.
        let done = vec![("ca".to_string(), c_of(&new, "a").resources.unwrap())];
        let mut a = compute_pod_actions(&new, &st);
        let updates = add_resize(&new, &st, &done, &mut a);
        assert!(updates.iter().all(|u| u.name != "a"));

        // A static pod never resizes; a pod being killed neither.
        let mut fixed = new.clone();
        fixed
            .metadata
            .annotations
            .insert(api::ANNOTATION_CONFIG_SOURCE.into(), "file".into());
        let mut a = compute_pod_actions(&fixed, &st);
        assert!(add_resize(&fixed, &st, &Vec::new(), &mut a).is_empty());
        let mut a = PodActions {
            kill_pod: true,
            ..PodActions::default()
        };
        assert!(add_resize(&new, &st, &Vec::new(), &mut a).is_empty());
    }
}
