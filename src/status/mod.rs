//! Pod status: what the API shows about a pod (kubelet: `generateAPIPodStatus`, `getPhase`,
//! `convertToAPIContainerStatuses`, `status/generate.go`, the status manager).
//!
//! Owns: the pure function from *(desired pod, what the runtime holds, why containers could
//! not start, the previous status, now)* to a `v1.PodStatus`; the pod's QoS class; a one-line
//! summary for the log; and the in-memory [`StatusManager`] that keeps the latest status per
//! pod UID so a local read-only API (and later the apiserver client) can serve it.
//!
//! Must never: do I/O, read the clock (wall time comes in as `now`), talk to the runtime, or
//! write anything to disk — an SD card must not wear out, statuses live in memory only. It
//! does not decide what the runtime must do (that is `runtime::plan`); it only describes.
//!
//! How a status is built (the order matters, as upstream):
//! 1. container statuses from the runtime's instances, newest first (`containers.rs`), with
//!    the waiting reasons of containers that could not start (kubelet's `reasonCache`);
//! 2. `started`/`ready` from probe results (`containers::apply_probes`);
//! 3. the phase (`phase.rs`), then the three-way terminal merge: a terminal phase in the
//!    previous status (or in the pod's own status) is never left;
//! 4. the kubelet-owned conditions, each `lastTransitionTime` kept unless its status value
//!    changed (`conditions.rs`);
//! 5. pod IPs, host IP, start time (kept once set) and QoS class (`qos.rs`).
//!
//! Where picolet differs from upstream, on purpose:
//! - restartable init containers (sidecars) use their own `restartPolicy: Always` when
//!   deciding whether a waiting reason applies (upstream consults the pod's policy);
//! - `started` is computed before the phase (upstream reads whatever `started` the status
//!   already carries); it only matters for sidecars;
//! - the illegal "terminated → running" container transition check of the status manager
//!   (`checkContainerStateTransition`) is not done: the phase rule already keeps terminal
//!   pods terminal, and picolet has no concurrent writers that could race.
//!
//! Layout:
//! - `containers.rs`  container statuses (kubelet: `convertToAPIContainerStatuses`, the
//!   probe manager's `UpdatePodStatus`)
//! - `phase.rs`       `getPhase`
//! - `conditions.rs`  PodReadyToStartContainers, Initialized, Ready, ContainersReady,
//!   PodScheduled and their `lastTransitionTime`
//! - `qos.rs`         QoS class (kubelet: `qos.GetPodQOS`)
//! - `manager.rs`     [`StatusManager`], [`summary`] and [`equal_apart_from_timestamps`], the
//!   one definition of "pod status changed"

use std::collections::BTreeMap;

use crate::api::{self, Pod, PodIp, PodStatus};
use crate::clock::{self, UnixNanos};
use crate::cri::{NamespaceMode, PodRuntimeStatus, Sandbox, SandboxState};

mod conditions;
mod containers;
mod manager;
mod phase;
#[cfg(feature = "apiserver")]
pub(crate) mod status_sync;

pub(crate) use crate::qos::pod_qos;
pub(crate) use conditions::{
    DISRUPTION_TARGET, need_to_reconcile_readiness, owned_by_kubelet, set_disruption_target,
};
#[cfg(test)]
pub(crate) use manager::summary;
pub(crate) use manager::{StatusManager, equal_apart_from_timestamps};

/// kubelet: `activeDeadlineHandler` — where the pod stands against
/// `spec.activeDeadlineSeconds`, counted from `status.startTime`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ActiveDeadline {
    /// No deadline, or no start time yet.
    None,
    /// Sync again at the latest after this long.
    Remaining(std::time::Duration),
    /// Past it: the pod fails with reason `DeadlineExceeded`.
    Exceeded,
}

/// kubelet: `pastActiveDeadline`.
pub(crate) fn active_deadline(
    pod: &Pod,
    status: Option<&PodStatus>,
    now: UnixNanos,
) -> ActiveDeadline {
    let Some(secs) = pod.spec.active_deadline_seconds.filter(|s| *s >= 0) else {
        return ActiveDeadline::None;
    };
    let Some(start) = status
        .and_then(|s| s.start_time.as_deref())
        .and_then(crate::clock::parse_rfc3339)
    else {
        return ActiveDeadline::None;
    };
    let end = start.saturating_add(secs.saturating_mul(1_000_000_000));
    if now >= end {
        ActiveDeadline::Exceeded
    } else {
        ActiveDeadline::Remaining(std::time::Duration::from_nanos((end - now) as u64))
    }
}

/// kubelet: the reason and message of a pod failed by its active deadline.
pub(crate) const REASON_DEADLINE_EXCEEDED: &str = "DeadlineExceeded";
pub(crate) const MESSAGE_DEADLINE_EXCEEDED: &str =
    "Pod was active on the node longer than the specified deadline";

/// Container IDs in the status read `<runtime>://<id>`; picolet targets containerd.
pub(crate) const DEFAULT_RUNTIME_NAME: &str = "containerd";

/// Why containers could not start, by container name: `(reason, message)` such as
/// `("CrashLoopBackOff", "back-off 20s restarting failed container=…")` (kubelet: `reasonCache`).
pub(crate) type WaitingReasons = BTreeMap<String, (String, String)>;

/// Probe results, keyed by the bare CRI container ID (no `containerd://`): a new container
/// instance starts without a result (kubelet: the prober's results managers).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ProbeResults {
    /// Startup probe: `true` once it succeeded.
    pub startup: BTreeMap<String, bool>,
    /// Readiness probe: `true` while it succeeds.
    pub readiness: BTreeMap<String, bool>,
}

/// The less common inputs of [`compute_pod_status_with`]; `Default` is what
/// [`compute_pod_status`] uses.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StatusOptions<'a> {
    /// Runtime name for container IDs (`<name>://<id>`); empty means [`DEFAULT_RUNTIME_NAME`].
    pub runtime_name: &'a str,
    /// The pod worker has finished terminating this pod: its containers will not be
    /// restarted whatever the restart policy (kubelet: `podIsTerminal`). Static pods ignore it,
    /// as upstream does (k8s#116484).
    pub pod_is_terminal: bool,
    /// Probe results; `None` means no probe has reported yet.
    pub probes: Option<&'a ProbeResults>,
    /// In-place resize: the pod's resize conditions, and what its running containers run
    /// with.
    pub resize: Option<&'a crate::allocation::ResizeState>,
}

/// The pod's status from what the runtime holds (kubelet: `generateAPIPodStatus` plus the
/// status manager's timestamp rules). Pure: same inputs, same output.
///
/// `previous` is the last status computed for this UID (from [`StatusManager::get`]); when
/// `None`, the pod's own `status` (from its manifest or the apiserver) stands in for it.
#[cfg(test)]
pub(crate) fn compute_pod_status(
    pod: &Pod,
    observed: &PodRuntimeStatus,
    reasons: &BTreeMap<String, (String, String)>,
    previous: Option<&PodStatus>,
    now: UnixNanos,
    host_ip: Option<&str>,
) -> PodStatus {
    compute_pod_status_with(
        pod,
        observed,
        reasons,
        previous,
        now,
        host_ip,
        &StatusOptions::default(),
    )
}

/// [`compute_pod_status`] with probe results, a runtime name and the terminal flag; the
/// steps of the module header in turn.
pub(crate) fn compute_pod_status_with(
    pod: &Pod,
    observed: &PodRuntimeStatus,
    reasons: &BTreeMap<String, (String, String)>,
    previous: Option<&PodStatus>,
    now: UnixNanos,
    host_ip: Option<&str>,
    opts: &StatusOptions<'_>,
) -> PodStatus {
    // kubelet: oldPodStatus = the status manager's copy, else the pod's API status.
    let empty = PodStatus::default();
    let api_status = pod.status.as_ref().unwrap_or(&empty);
    let old = previous.unwrap_or(api_status);

    // Steps 1 and 2: container statuses, with the probe results.
    let (init_statuses, statuses, ephemeral) =
        container_statuses(pod, observed, reasons, old, opts);
    // Step 3: the phase, never leaving a terminal one.
    let phase = pod_phase(
        pod,
        observed,
        api_status,
        old,
        &init_statuses,
        &statuses,
        opts,
    );
    let mut status = PodStatus {
        phase: Some(phase),
        ..PodStatus::default()
    };
    // kubelet: the reason and message belong to the phase; keep them while it holds.
    if old.phase == Some(phase) {
        status.reason = old.reason.clone().or_else(|| api_status.reason.clone());
        status.message = old.message.clone().or_else(|| api_status.message.clone());
    }
    // Step 4: the conditions.
    status.conditions = conditions::generate(
        pod,
        api_status,
        old,
        !sandbox_changed(pod, observed),
        &init_statuses,
        &statuses,
        phase,
        now,
    );
    // kubelet: determinePodResizeStatus — the resize conditions, cleared once terminal.
    if let Some(r) = opts.resize.filter(|_| !phase.is_terminal()) {
        status.conditions.extend(r.conditions().cloned());
    }
    // Step 5: addresses, start time, the statuses, QoS class and observed generation.
    set_ips(&mut status, pod, observed, old, host_ip);
    // kubelet status manager: the start time never changes once set.
    status.start_time = old
        .start_time
        .clone()
        .or_else(|| api_status.start_time.clone())
        .or_else(|| clock::rfc3339(now));
    status.init_container_statuses = init_statuses;
    status.container_statuses = statuses;
    status.ephemeral_container_statuses = ephemeral;
    status.qos_class = Some(pod_qos(pod).as_str().to_string());
    // kubelet status manager (PodObservedGenerationTracking, GA in 1.35): the pod's
    // generation, never below the one already reported (no needless patch).
    status.observed_generation = pod.metadata.generation.max(old.observed_generation).max(0);
    status
}

/// kubelet: `convertToAPIContainerStatuses` for the init, regular and ephemeral
/// containers, `started`/`ready` from the probe results (the prober's
/// `UpdatePodStatus`); regular containers sorted by name.
fn container_statuses(
    pod: &Pod,
    observed: &PodRuntimeStatus,
    reasons: &BTreeMap<String, (String, String)>,
    old: &PodStatus,
    opts: &StatusOptions<'_>,
) -> (
    Vec<api::ContainerStatus>,
    Vec<api::ContainerStatus>,
    Vec<api::ContainerStatus>,
) {
    let runtime_name = if opts.runtime_name.is_empty() {
        DEFAULT_RUNTIME_NAME
    } else {
        opts.runtime_name
    };
    let no_probes = ProbeResults::default();
    let probes = opts.probes.unwrap_or(&no_probes);

    let inputs = containers::Inputs {
        pod,
        observed,
        reasons,
        runtime_name,
        actual: opts.resize.map(|r| &r.actual),
    };
    let spec = &pod.spec;
    let mut init_statuses = containers::convert(
        &inputs,
        &spec.init_containers,
        &old.init_container_statuses,
        true,
    );
    let mut statuses =
        containers::convert(&inputs, &spec.containers, &old.container_statuses, false);
    // kubelet: ephemeral containers' statuses the same way; no probes, no phase, no
    // condition reads them.
    let ephemeral = containers::convert(
        &inputs,
        &spec.ephemeral_containers,
        &old.ephemeral_container_statuses,
        false,
    );
    containers::apply_probes(&spec.init_containers, &mut init_statuses, true, probes);
    containers::apply_probes(&spec.containers, &mut statuses, false, probes);
    // kubelet: SortedContainerStatuses — regular containers by name, init in spec order.
    crate::sort::sort_by(&mut statuses, |a, b| a.name.cmp(&b.name));
    (init_statuses, statuses, ephemeral)
}

/// kubelet: `getPhase`, then the status manager's three-way merge — a terminal phase
/// already reported (previously, or in the pod's own status) is never left.
fn pod_phase(
    pod: &Pod,
    observed: &PodRuntimeStatus,
    api_status: &PodStatus,
    old: &PodStatus,
    init_statuses: &[api::ContainerStatus],
    statuses: &[api::ContainerStatus],
    opts: &StatusOptions<'_>,
) -> api::PodPhase {
    // kubelet: getPhase(..., HasAnyActiveRegularContainerStarted(spec, podStatus))
    let has_initialized = any_active_regular_container(pod, observed);
    let mut phase = phase::get_phase(
        pod,
        init_statuses,
        statuses,
        opts.pod_is_terminal,
        has_initialized,
    );
    // kubelet: three-way merge — a terminal phase already reported is never left (upstream
    // only guards against leaving to a non-terminal phase; Succeeded <-> Failed is refused too).
    if let Some(p) = old.phase.filter(|p| p.is_terminal()) {
        phase = p;
    } else if !phase.is_terminal() {
        if let Some(p) = api_status.phase.filter(|p| p.is_terminal()) {
            phase = p;
        }
    }
    if let Some(p) = api_status.phase.filter(|p| p.is_terminal()) {
        if phase != p {
            // debug, not warn: this repeats every sync and idle must stay quiet.
            log::debug!(
                "pod {}: illegal phase transition {p:?} -> {phase:?}, keeping {p:?}",
                pod.full_name()
            );
            phase = p;
        }
    }
    phase
}

/// The pod's and host's IPs: the pod IPs from the newest sandbox while it is ready,
/// the host IP given (else the previous one), and host-network pods inherit the host IP.
fn set_ips(
    status: &mut PodStatus,
    pod: &Pod,
    observed: &PodRuntimeStatus,
    old: &PodStatus,
    host_ip: Option<&str>,
) {
    // Pod IPs: from the newest sandbox while it is ready; once every sandbox is gone or
    // stopped, keep the last known ones (kubelet: PLEG getPodIPs, k8s#47806, k8s#125404).
    match newest_sandbox(observed) {
        Some(sb) if sb.state == SandboxState::Ready => {
            if let Some(ip) = sb.ip.as_deref().filter(|ip| !ip.is_empty()) {
                status.pod_ip = Some(ip.to_string());
                status.pod_ips = vec![PodIp { ip: ip.to_string() }];
            }
        }
        _ if !observed
            .sandboxes
            .iter()
            .any(|s| s.state == SandboxState::Ready) =>
        {
            status.pod_ip = old.pod_ip.clone();
            status.pod_ips = old.pod_ips.clone();
        }
        _ => {}
    }
    status.host_ip = host_ip.map(str::to_string).or_else(|| old.host_ip.clone());
    status.host_ips = match &status.host_ip {
        Some(ip) if host_ip.is_some() => vec![PodIp { ip: ip.clone() }],
        _ => old.host_ips.clone(),
    };
    // kubelet: host-network pods inherit the node IP.
    if pod.spec.host_network && status.pod_ip.is_none() {
        if let Some(ip) = &status.host_ip {
            status.pod_ip = Some(ip.clone());
            status.pod_ips = vec![PodIp { ip: ip.clone() }];
        }
    }
}

/// The newest sandbox (they come newest first; be robust anyway).
fn newest_sandbox(observed: &PodRuntimeStatus) -> Option<&Sandbox> {
    observed
        .sandboxes
        .iter()
        .enumerate()
        .max_by(|(ia, a), (ib, b)| a.recency().cmp(&b.recency()).then(ib.cmp(ia)))
        .map(|(_, s)| s)
}

/// The sandbox containers run in now: the newest one, if ready (kubelet: the active sandbox
/// of `GetPodStatus`).
fn active_sandbox(observed: &PodRuntimeStatus) -> Option<&Sandbox> {
    newest_sandbox(observed).filter(|s| s.state == SandboxState::Ready)
}

/// kubelet: `HasAnyActiveRegularContainerStarted` — a regular container exists in the
/// active sandbox, so init containers completed for it.
fn any_active_regular_container(pod: &Pod, observed: &PodRuntimeStatus) -> bool {
    let Some(active) = active_sandbox(observed) else {
        return false;
    };
    observed
        .containers
        .iter()
        .any(|c| c.sandbox_id == active.id && pod.spec.containers.iter().any(|s| s.name == c.name))
}

/// kubelet: `PodSandboxChanged` — a new sandbox is needed (so the pod is not ready to start
/// containers) when none exists, more than one is ready, the newest is not ready, its
/// network namespace mode is wrong, or a pod-network sandbox has no IP.
fn sandbox_changed(pod: &Pod, observed: &PodRuntimeStatus) -> bool {
    let Some(newest) = newest_sandbox(observed) else {
        return true;
    };
    let ready = observed
        .sandboxes
        .iter()
        .filter(|s| s.state == SandboxState::Ready)
        .count();
    if ready > 1 || newest.state != SandboxState::Ready {
        return true;
    }
    let want = if pod.spec.host_network {
        NamespaceMode::Node
    } else {
        NamespaceMode::Pod
    };
    if newest.network.is_some_and(|m| m != want) {
        return true;
    }
    !pod.spec.host_network && newest.ip.as_deref().is_none_or(str::is_empty)
}

/// kubelet: `IsRestartableInitContainer` — an init container with `restartPolicy: Always`.
fn is_sidecar(c: &api::Container) -> bool {
    c.restart_policy == Some(api::RestartPolicy::Always)
}

#[cfg(test)]
pub(crate) mod testutil;

#[cfg(test)]
mod tests;
