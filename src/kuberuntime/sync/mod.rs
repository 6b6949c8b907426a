//! Executing the plan against a `Runtime` (kubelet: `kuberuntime_manager.go` `SyncPod`,
//! `killPodWithSyncResult`, `GetPodStatus`, `GetPods`; `kuberuntime_container.go`
//! `startContainer`, `killContainer`; `images/image_manager.go` `EnsureImageExists`).
//!
//! Owns: the effects of one pod sync — reading what the runtime holds for a UID, killing
//! what must go, creating the sandbox, pulling images, creating and starting containers —
//! and the pod-level cleanup after termination. Decisions come from `plan.rs`, CRI configs
//! from `cri_config.rs`, host paths from `mounts.rs`, back-off state from the caller.
//!
//! Must never: keep state between calls (the pod worker owns `PodBackoffs` and passes it
//! in), retry on its own (failures are reported in `PodSyncResult` / `SyncError` and the
//! worker requeues), or decide what to run (that is `plan::compute_pod_actions`).
//!
//! Lifecycle hooks (`hooks.rs`): postStart right after `StartContainer` — the sync does not
//! return, so the container is not reported Running, until it did; a failure kills the
//! container (`FailedPostStartHook`) and it waits as `PostStartHookError`. preStop before
//! `StopContainer` when the grace period is > 0, bounded by it, its time taken off the
//! grace given to the runtime (never below 2 s); after a picolet restart the handler comes
//! from the container's annotation. Probe-driven kills are planned by `plan.rs` from the
//! prober's `ProbeVerdicts`.

mod container;
mod image;
mod inspect;
mod kill;
pub(crate) mod resize;
mod sandbox;

pub(crate) use container::fill_termination_messages;
#[cfg(test)]
use container::restart_count_from_log_dir;
use container::*;
use image::*;
#[cfg(test)]
pub(crate) use inspect::list_runtime_pods;
pub(crate) use inspect::regroup;
pub(crate) use inspect::{get_pod_status, refresh_after_sync, relist_runtime_pods};
use kill::*;
pub(crate) use kill::{cleanup_pod, kill_pod};
use sandbox::*;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::api;
use crate::clock::Clock;
use crate::config_data::ConfigObjects;
use crate::cri::{CriError, PodRuntimeStatus, Runtime, Sandbox, SandboxConfig};
use crate::kuberuntime::backoff::PodBackoffs;
use crate::kuberuntime::cri_config;
use crate::kuberuntime::plan::{self, PodActions};
use crate::recorder::{self, Recorder};
use crate::volume::data_volumes;
use crate::volume::mounts;

/// kubelet: `minimumGracePeriodInSeconds` — never ask the runtime for less than 2 s.
pub(crate) const MIN_STOP_TIMEOUT_SECONDS: i64 = 2;
/// The API default of `terminationGracePeriodSeconds`.
pub(crate) const DEFAULT_GRACE_PERIOD_SECONDS: i64 = 30;

/// What a sync needs: the runtime, the wall clock, the filesystem roots (injected so tests
/// run in a tempdir), the node's facts and the managers it reports to. Built once by
/// [`SyncEnv::new`], by the agent and the tests alike.
#[derive(Clone)]
pub(crate) struct SyncEnv<R: Runtime, C: Clock> {
    pub runtime: R,
    pub clock: C,
    pub paths: SyncPaths,
    pub node: NodeFacts,
    pub managers: Managers,
    /// In-place resize: what the updated containers run with (starts empty, read from the
    /// pods' files on demand).
    pub resized: resize::Records,
}

/// Where a sync reads and writes on the host.
#[derive(Clone)]
pub(crate) struct SyncPaths {
    /// `--root-dir`: pod directories (`pods/<uid>/…`, emptyDirs) live here.
    pub root_dir: PathBuf,
    /// `--pod-log-dir` (kubelet: `podLogsDirectory`).
    pub pod_log_dir: PathBuf,
    /// The host resolv.conf for `Default`-like DNS policies (`--resolv-conf`).
    pub resolv_conf: PathBuf,
}

/// What the node is and how it runs pods: what the CRI configs are computed from.
#[derive(Clone)]
pub(crate) struct NodeFacts {
    /// The node's memory in bytes (`MemTotal`; 0: unknown): Burstable `oom_score_adj`.
    pub memory_capacity: u64,
    /// The node's CPUs in millicores (`resourceFieldRef` without a limit).
    pub cpu_capacity_milli: i64,
    /// The node's swap: containers' `memory.swap.max` / memory+swap limit.
    pub swap: crate::qos::NodeSwap,
    /// The node's IP for `status.hostIP` in the downward API ("" if unknown).
    pub host_ip: String,
    /// `--seccomp-default`: `RuntimeDefault` seccomp for pods that ask for nothing.
    pub seccomp_default: bool,
    /// Sandbox cgroup parent without pod cgroups; "" = the runtime's default.
    pub cgroup_parent: String,
    /// `--cgroups-per-qos`: the pod cgroups, made before the sandbox (`cm`).
    pub pod_cgroups: Option<crate::cm::manager::PodCgroups>,
}

/// The managers and shared objects a sync reads from and reports to.
#[derive(Clone)]
pub(crate) struct Managers {
    /// Where the sync records the kubelet's events (Pulling, Created, Killing, …).
    pub recorder: Recorder,
    /// The ConfigMaps and Secrets pods reference (the agent loop fills it).
    pub config: ConfigObjects,
    /// Docker config files with registry credentials, searched in order
    /// (`credentials::default_paths`).
    pub credential_paths: Vec<PathBuf>,
    /// Mounts the tmpfs of `Memory` emptyDirs.
    pub tmpfs: std::sync::Arc<dyn mounts::Tmpfs>,
    /// The registered CSI drivers (the plugin watcher fills it).
    pub csi: crate::volume::csi::Registry,
    /// The device manager (`None`: no device plugins).
    #[cfg(feature = "device-plugins")]
    pub devices: Option<crate::cm::devicemanager::manager::Handle>,
}

impl<R: Runtime, C: Clock> SyncEnv<R, C> {
    /// The one way to build an environment (the agent's wiring and the tests).
    pub(crate) fn new(
        runtime: R,
        clock: C,
        paths: SyncPaths,
        node: NodeFacts,
        managers: Managers,
    ) -> Self {
        SyncEnv {
            runtime,
            clock,
            paths,
            node,
            managers,
            resized: resize::Records::default(),
        }
    }

    fn node_params<'a>(&'a self, seccomp_root: &'a Path) -> cri_config::NodeParams<'a> {
        cri_config::NodeParams {
            seccomp_root,
            seccomp_default: self.node.seccomp_default,
            memory_capacity: self.node.memory_capacity,
            cpu_capacity_milli: self.node.cpu_capacity_milli,
            swap: self.node.swap,
            host_ip: &self.node.host_ip,
            objects: Some(&self.managers.config),
        }
    }
}

/// Failures of the kill and cleanup paths.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SyncError {
    #[error("stop container {name:?} ({id}): {source}")]
    StopContainer {
        id: String,
        name: String,
        #[source]
        source: CriError,
    },
    #[error("stop sandbox {id}: {source}")]
    StopSandbox {
        id: String,
        #[source]
        source: CriError,
    },
    #[error("{step} pod {pod}: {}", join_errors(.errors))]
    Steps {
        step: &'static str,
        pod: String,
        errors: Vec<SyncError>,
    },
    #[error("pod {uid} is still running: {ids:?}")]
    StillRunning { uid: String, ids: Vec<String> },
    #[error("remove {path}: {source}")]
    RemoveDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("UnmountVolume.TearDown failed for pod {uid}: {source}")]
    Unpublish {
        uid: String,
        #[source]
        source: crate::volume::csi::CsiError,
    },
}

impl SyncError {
    /// Every failed step failed because the runtime did not answer at all.
    pub(crate) fn runtime_down(&self) -> bool {
        match self {
            SyncError::StopContainer { source, .. } | SyncError::StopSandbox { source, .. } => {
                matches!(source, CriError::Unavailable { .. })
            }
            SyncError::Steps { errors, .. } => {
                !errors.is_empty() && errors.iter().all(SyncError::runtime_down)
            }
            SyncError::StillRunning { .. }
            | SyncError::RemoveDir { .. }
            | SyncError::Unpublish { .. } => false,
        }
    }
}

fn join_errors(errors: &[SyncError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The kubelet's container waiting reasons a sync can produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum WaitingReason {
    ContainerCreating,
    CrashLoopBackOff,
    ErrImagePull,
    ImagePullBackOff,
    ErrImageNeverPull,
    InvalidImageName,
    ImageInspectError,
    CreateContainerConfigError,
    CreateContainerError,
    RunContainerError,
    PostStartHookError,
}

impl WaitingReason {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            WaitingReason::ContainerCreating => "ContainerCreating",
            WaitingReason::CrashLoopBackOff => "CrashLoopBackOff",
            WaitingReason::ErrImagePull => "ErrImagePull",
            WaitingReason::ImagePullBackOff => "ImagePullBackOff",
            WaitingReason::ErrImageNeverPull => "ErrImageNeverPull",
            WaitingReason::InvalidImageName => "InvalidImageName",
            WaitingReason::ImageInspectError => "ImageInspectError",
            WaitingReason::CreateContainerConfigError => "CreateContainerConfigError",
            WaitingReason::CreateContainerError => "CreateContainerError",
            WaitingReason::RunContainerError => "RunContainerError",
            WaitingReason::PostStartHookError => "PostStartHookError",
        }
    }

    /// Back-off waits are expected states, not sync errors (kubelet: `SyncPod` ignores
    /// `ErrCrashLoopBackOff` and `ErrImagePullBackOff`).
    pub(crate) fn is_back_off(self) -> bool {
        matches!(
            self,
            WaitingReason::CrashLoopBackOff | WaitingReason::ImagePullBackOff
        )
    }
}

impl std::fmt::Display for WaitingReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What happened to one container the plan wanted started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StartOutcome {
    Started {
        id: String,
        restart_count: u32,
    },
    Waiting {
        reason: WaitingReason,
        message: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ContainerSyncResult {
    pub name: String,
    /// An init container (sidecars included).
    pub init: bool,
    pub outcome: StartOutcome,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SandboxFailure {
    pub message: String,
    /// The runtime's network (CNI) is not ready yet: requeue in 1 s.
    pub network_not_ready: bool,
}

/// What one `sync_pod` did (kubelet: `PodSyncResult`).
#[derive(Debug, Default)]
pub(crate) struct PodSyncResult {
    /// The plan that was executed.
    pub actions: PodActions,
    /// Killing failed; nothing was started.
    pub kill_error: Option<SyncError>,
    /// A new sandbox was created.
    pub sandbox_created: bool,
    /// The sandbox containers run in ("" when none).
    pub sandbox_id: String,
    pub sandbox_error: Option<SandboxFailure>,
    /// The pod IP (from the newest ready sandbox; `None` for host network or unknown).
    pub sandbox_ip: Option<String>,
    /// The new sandbox as its `PodSandboxStatus` answered (when `sandbox_created`).
    pub new_sandbox: Option<Sandbox>,
    /// Old init container instances were removed (`pruneInitContainersBeforeStart`).
    pub pruned: bool,
    /// Every container the plan wanted started, in the order tried.
    pub containers: Vec<ContainerSyncResult>,
    /// The earliest moment a back-off ends: sync again then.
    pub requeue_after: Option<Duration>,
    /// An in-place resize step failed (the PodResizeInProgress condition's message).
    pub resize_error: Option<String>,
}

impl PodSyncResult {
    /// A failure other than a back-off wait: the worker requeues with its error delay.
    pub(crate) fn is_error(&self) -> bool {
        self.kill_error.is_some()
            || self.sandbox_error.is_some()
            || self.resize_error.is_some()
            || self.containers.iter().any(|c| {
                matches!(&c.outcome, StartOutcome::Waiting { reason, .. } if !reason.is_back_off())
            })
    }

    /// Everything the sync changed in the runtime is known from its own calls: nothing was
    /// killed or removed, and each container either started or failed before
    /// `CreateContainer` (see [`refresh_after_sync`]). `observed` is the view it planned on.
    pub(crate) fn is_modelled(&self, observed: &PodRuntimeStatus) -> bool {
        let a = &self.actions;
        // A new pod's plan is "kill the pod, create a sandbox" too, with nothing to kill.
        let killed =
            a.kill_pod && !(observed.sandboxes.is_empty() && observed.containers.is_empty());
        !killed
            && a.containers_to_kill.is_empty()
            && !self.pruned
            && self.kill_error.is_none()
            && self.sandbox_error.is_none()
            && (self.sandbox_created == self.new_sandbox.is_some())
            && self.containers.iter().all(|c| match &c.outcome {
                StartOutcome::Started { .. } => true,
                StartOutcome::Waiting { reason, .. } => !matches!(
                    reason,
                    WaitingReason::CreateContainerError
                        | WaitingReason::RunContainerError
                        | WaitingReason::PostStartHookError
                ),
            })
    }

    /// The kill failed because the runtime does not answer at all.
    pub(crate) fn runtime_down(&self) -> bool {
        self.kill_error
            .as_ref()
            .is_some_and(SyncError::runtime_down)
    }

    /// The sandbox failed because the pod network is not ready (requeue in 1 s).
    pub(crate) fn network_not_ready(&self) -> bool {
        self.sandbox_error
            .as_ref()
            .is_some_and(|f| f.network_not_ready)
    }

    /// The result for a container name, if the plan tried to start it.
    #[cfg(test)]
    pub(crate) fn container(&self, name: &str) -> Option<&ContainerSyncResult> {
        self.containers.iter().find(|c| c.name == name)
    }

    /// The waiting reason and message for a container name, if it is waiting.
    #[cfg(test)]
    pub(crate) fn waiting(&self, name: &str) -> Option<(WaitingReason, &str)> {
        match &self.container(name)?.outcome {
            StartOutcome::Waiting { reason, message } => Some((*reason, message.as_str())),
            StartOutcome::Started { .. } => None,
        }
    }

    fn note_requeue(&mut self, after: Duration) {
        self.requeue_after = Some(self.requeue_after.map_or(after, |d| d.min(after)));
    }
}

// ---------------------------------------------------------------------------------------
// SyncPod

/// Bring the runtime in line with the pod (kubelet: `SyncPod`), step by step as upstream
/// numbers them. picolet's order differs in two places: the in-place resize (upstream's
/// Step 7) runs right after the kills, before anything starts; and the pod's volumes are
/// set up (the volume manager's work upstream) before the sandbox.
pub(crate) async fn sync_pod<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    pod: &api::Pod,
    status: &PodRuntimeStatus,
    backoff: &mut PodBackoffs,
    probes: &plan::ProbeVerdicts,
) -> PodSyncResult {
    // Step 1: compute sandbox and container changes (and the containers to resize).
    let (actions, resize) = compute_actions(pod, status, probes, &env.resized, &env.paths);
    let pod_name = pod.full_name();
    if !actions.is_noop() {
        log::debug!("pod {pod_name}: actions {actions:?}");
    }
    let mut result = PodSyncResult {
        actions: actions.clone(),
        sandbox_id: actions.sandbox_id.clone(),
        ..Default::default()
    };

    // Step 2: kill the pod if the sandbox has changed (or nothing is left to run).
    // Step 3: else kill the running containers which are not to keep.
    let killed = if actions.kill_pod {
        kill_pod_for_sync(env, pod, status, &actions, &pod_name).await
    } else {
        kill_containers_not_to_keep(env, pod, status, &actions, &pod_name).await
    };
    if let Err(e) = killed {
        log::warn!("pod {pod_name}: {e}");
        result.kill_error = Some(e);
        return result;
    }
    if !actions.kill_pod {
        result.pruned = prune_init_containers(env, pod, status).await;
    }

    // Upstream's Step 7, here: resize running containers, after the kills, before anything
    // starts.
    if crate::allocation::ENABLED && (!resize.updates.is_empty() || resize.restarted) {
        apply_resize(env, pod, status, &resize, &pod_name, &mut result).await;
    }

    // The pod's volumes, before any of its containers starts.
    if let Err(e) = set_up_volumes(env, pod, &pod_name).await {
        volumes_failed(env, pod, &actions, &e, &pod_name, &mut result);
        return result;
    }
    if nothing_to_start(&actions) {
        return result;
    }

    // Step 4: create a sandbox for the pod if necessary.
    let Some((sandbox_config, pod_ip)) =
        ensure_sandbox(env, pod, status, &actions, &pod_name, &mut result).await
    else {
        return result;
    };
    let start = start_context(env, pod, status, &sandbox_config, pod_ip, &mut result);

    // Step 5: start ephemeral containers first, so that they run even when an init
    // container cannot start.
    start_each(env, &start, backoff, &mut result, &actions, Kind::Ephemeral).await;
    // Step 6: start the init containers, in order; a failed plain one stops the sync.
    if !start_each(env, &start, backoff, &mut result, &actions, Kind::Init).await {
        return result;
    }
    // Step 8 (upstream's numbering): start the regular containers, each on its own.
    start_each(env, &start, backoff, &mut result, &actions, Kind::Regular).await;
    result
}

/// What an in-place resize changes: the containers to update, and whether the plan
/// restarts some for their resize policy (their pod cgroup changes too).
struct ResizePlan {
    updates: Vec<plan::ContainerUpdate>,
    restarted: bool,
}

/// Step 1 (kubelet: `computePodActions`, `computePodResizeAction`): what to kill, create
/// and start, and the running containers whose allocated cpu or memory differs from what
/// they run with (`resized` and `paths.root_dir` say what they run with).
fn compute_actions(
    pod: &api::Pod,
    status: &PodRuntimeStatus,
    probes: &plan::ProbeVerdicts,
    resized: &resize::Records,
    paths: &SyncPaths,
) -> (PodActions, ResizePlan) {
    let mut actions = plan::compute_pod_actions_with_probes(pod, status, probes);
    // kubelet: computePodResizeAction — running containers whose allocated cpu or memory
    // differs from what they run with.
    let kills = actions.containers_to_kill.len();
    let updates = if crate::allocation::ENABLED && crate::allocation::resizable(pod) {
        let records = resized.of(&paths.root_dir, pod.uid());
        plan::add_resize(pod, status, &records, &mut actions)
    } else {
        Vec::new()
    };
    let restarted = actions.containers_to_kill.len() > kills;
    (actions, ResizePlan { updates, restarted })
}

/// Step 2 (kubelet: `SyncPod` — `killPodWithSyncResult`): stop the whole pod, its
/// containers and sandboxes; for a sandbox that is re-created, the old init containers are
/// removed too (initialisation starts over).
async fn kill_pod_for_sync<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    pod: &api::Pod,
    status: &PodRuntimeStatus,
    actions: &PodActions,
    pod_name: &str,
) -> Result<(), SyncError> {
    if actions.create_sandbox && !actions.sandbox_id.is_empty() {
        log::info!("pod {pod_name}: sandbox changed, it will be killed and re-created");
        // kubelet: SyncPod — events.SandboxChanged.
        env.managers.recorder.normal(
            pod,
            None,
            recorder::SANDBOX_CHANGED,
            "Pod sandbox changed, it will be killed and re-created.",
        );
    } else if !actions.create_sandbox {
        log::info!("pod {pod_name}: nothing left to run, stopping the pod");
    }
    kill_pod(env, Some(pod), status, None).await?;
    if actions.create_sandbox {
        purge_init_containers(env, pod, status).await;
    }
    Ok(())
}

/// Step 3 (kubelet: `SyncPod` — `killContainer` for each of `containersToKill`): stop
/// the running containers the plan does not keep, one after the other; the first failure
/// stops the sync.
async fn kill_containers_not_to_keep<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    pod: &api::Pod,
    status: &PodRuntimeStatus,
    actions: &PodActions,
    pod_name: &str,
) -> Result<(), SyncError> {
    for (id, k) in &actions.containers_to_kill {
        log::info!(
            "pod {pod_name}: killing container {:?}: {}",
            k.name,
            k.message
        );
        kill_container(env, pod, status, id, k).await?;
    }
    Ok(())
}

/// kubelet: `doPodResizeAction` — apply the resize; a failure is logged and kept as the
/// PodResizeInProgress condition's message, and the sync goes on.
async fn apply_resize<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    pod: &api::Pod,
    status: &PodRuntimeStatus,
    resize: &ResizePlan,
    pod_name: &str,
    result: &mut PodSyncResult,
) {
    // Boxed and dynamic: its state and code stay out of sync_pod's (binary size).
    let apply: std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<(), resize::ResizeError>> + '_>,
    > = Box::pin(resize::apply(
        env,
        pod,
        status,
        &resize.updates,
        resize.restarted,
    ));
    if let Err(e) = apply.await {
        log::warn!("pod {pod_name}: resize: {e}");
        result.resize_error = Some(e.to_string());
    }
}

/// kubelet: the volume manager sets up (and at every sync re-sets up) the pod's
/// configMap, secret, downwardAPI and projected volumes before its containers start, then
/// mounts its inline CSI volumes (`NodePublishVolume`, once per picolet run).
async fn set_up_volumes<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    pod: &api::Pod,
    pod_name: &str,
) -> Result<(), data_volumes::VolumeError> {
    let seccomp_root = env.paths.root_dir.join("seccomp");
    let stamp = data_volumes::version_stamp(env.clock.now());
    let updated = data_volumes::setup(
        &env.paths.root_dir,
        pod,
        &env.managers.config,
        env.managers.tmpfs.as_ref(),
        env.node_params(&seccomp_root),
        &stamp,
    )?;
    for v in updated {
        log::info!("pod {pod_name}: volume {v:?} updated");
    }
    // kubelet: inline csi volumes are mounted by the volume manager like the others:
    // NodePublishVolume before the containers start (once per picolet run).
    crate::volume::csi::publish_pod_volumes(
        &env.paths.root_dir,
        pod,
        &env.managers.csi,
        &env.managers.config,
    )
    .await
    .map_err(|e| data_volumes::VolumeError {
        volume: e.volume,
        message: e.message,
    })
}

/// A volume that cannot be set up keeps the containers waiting (kubelet: FailedMount, the
/// pod stays ContainerCreating).
fn volumes_failed<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    pod: &api::Pod,
    actions: &PodActions,
    e: &data_volumes::VolumeError,
    pod_name: &str,
    result: &mut PodSyncResult,
) {
    // The pod worker's WARN carries it (once, not at every retry).
    log::debug!("pod {pod_name}: {e}");
    // kubelet: the volume manager's events.FailedMount, at every attempt (aggregated).
    env.managers
        .recorder
        .warning(pod, None, recorder::FAILED_MOUNT, e.to_string());
    if !nothing_to_start(actions) {
        result.containers = all_creating(pod, actions, &e.to_string());
    }
}

/// No sandbox to create and no container to start: the sync is done after the kills.
fn nothing_to_start(actions: &PodActions) -> bool {
    !actions.create_sandbox
        && actions.init_containers_to_start.is_empty()
        && actions.containers_to_start.is_empty()
        && actions.ephemeral_containers_to_start.is_empty()
}

/// What every container start of this sync shares: the sandbox, its config and the pod IP.
fn start_context<'a, R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    pod: &'a api::Pod,
    status: &'a PodRuntimeStatus,
    sandbox_config: &'a SandboxConfig,
    pod_ip: Option<String>,
    result: &mut PodSyncResult,
) -> StartContext<'a> {
    result.sandbox_ip = pod_ip.clone();
    StartContext {
        pod,
        status,
        sandbox_id: result.sandbox_id.clone(),
        sandbox_config,
        // kubelet: syncPod takes the pod's IPs from its API status, which for a host-network
        // pod are the node's: status.podIP in the downward API is the node IP.
        pod_ip: match pod_ip {
            Some(ip) => ip,
            None if pod.spec.host_network => env.node.host_ip.clone(),
            None => String::new(),
        },
    }
}

/// Which of the pod's containers a start step starts.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Ephemeral,
    Init,
    Regular,
}

/// Steps 5, 6 and 8: start the plan's containers of one `kind`, in order, each outcome
/// recorded in `result`. For init containers a failed plain one (not a sidecar) stops the
/// loop and returns false: the next one must wait for it.
async fn start_each<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    start: &StartContext<'_>,
    backoff: &mut PodBackoffs,
    result: &mut PodSyncResult,
    actions: &PodActions,
    kind: Kind,
) -> bool {
    let spec = &start.pod.spec;
    let (specs, indexes) = match kind {
        Kind::Ephemeral => (
            &spec.ephemeral_containers,
            &actions.ephemeral_containers_to_start,
        ),
        Kind::Init => (&spec.init_containers, &actions.init_containers_to_start),
        Kind::Regular => (&spec.containers, &actions.containers_to_start),
    };
    let init = kind == Kind::Init;
    for &idx in indexes {
        let Some(c) = specs.get(idx) else {
            continue;
        };
        let outcome = start_container(env, start, c, backoff, result).await;
        let started = matches!(outcome, StartOutcome::Started { .. });
        result.containers.push(ContainerSyncResult {
            name: c.name.clone(),
            init,
            outcome,
        });
        if init && !started && !plan::is_restartable_init_container(c) {
            return false;
        }
    }
    true
}

/// Every container the plan wanted started, waiting as `ContainerCreating` (the sandbox or a
/// volume is not there yet).
fn all_creating(pod: &api::Pod, actions: &PodActions, message: &str) -> Vec<ContainerSyncResult> {
    let creating = |init: bool, c: &api::Container| ContainerSyncResult {
        name: c.name.clone(),
        init,
        outcome: waiting(WaitingReason::ContainerCreating, message),
    };
    let init = actions
        .init_containers_to_start
        .iter()
        .filter_map(|&i| pod.spec.init_containers.get(i))
        .map(|c| creating(true, c));
    let regular = actions
        .containers_to_start
        .iter()
        .filter_map(|&i| pod.spec.containers.get(i))
        .chain(
            actions
                .ephemeral_containers_to_start
                .iter()
                .filter_map(|&i| pod.spec.ephemeral_containers.get(i)),
        )
        .map(|c| creating(false, c));
    init.chain(regular).collect()
}

#[cfg(test)]
mod tests;
