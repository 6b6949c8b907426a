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
mod kill;
pub mod resize;
mod sandbox;
mod status;

use container::*;
pub use container::{fill_termination_messages, restart_count_from_log_dir};
pub use image::go_duration;
use image::*;
use kill::*;
pub use kill::{cleanup_pod, kill_pod};
pub use sandbox::is_network_not_ready;
use sandbox::*;
pub(crate) use status::regroup;
pub use status::{get_pod_status, list_runtime_pods, refresh_after_sync, relist_runtime_pods};

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::api;
use crate::clock::Clock;
use crate::config_data::ConfigObjects;
use crate::cri::{CriError, PodRuntimeStatus, Runtime, Sandbox, SandboxState};
use crate::kuberuntime::backoff::PodBackoffs;
use crate::kuberuntime::cri_config::{self, SandboxParams};
use crate::kuberuntime::plan::{self, PodActions};
use crate::kuberuntime::userns;
use crate::recorder::{self, Recorder};
use crate::volume::data_volumes;
use crate::volume::mounts;

/// kubelet: `minimumGracePeriodInSeconds` — never ask the runtime for less than 2 s.
pub const MIN_STOP_TIMEOUT_SECONDS: i64 = 2;
/// The API default of `terminationGracePeriodSeconds`.
pub const DEFAULT_GRACE_PERIOD_SECONDS: i64 = 30;

/// What a sync needs: the runtime, the wall clock, the filesystem roots (injected so tests
/// run in a tempdir), the node's facts and the managers it reports to. Built once by
/// [`SyncEnv::new`], by the agent and the tests alike.
#[derive(Clone)]
pub struct SyncEnv<R: Runtime, C: Clock> {
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
pub struct SyncPaths {
    /// `--root-dir`: pod directories (`pods/<uid>/…`, emptyDirs) live here.
    pub root_dir: PathBuf,
    /// `--pod-log-dir` (kubelet: `podLogsDirectory`).
    pub pod_log_dir: PathBuf,
    /// The host resolv.conf for `Default`-like DNS policies (`--resolv-conf`).
    pub resolv_conf: PathBuf,
}

/// What the node is and how it runs pods: what the CRI configs are computed from.
#[derive(Clone)]
pub struct NodeFacts {
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
pub struct Managers {
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
    pub fn new(
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
pub enum SyncError {
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
    pub fn runtime_down(&self) -> bool {
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
pub enum WaitingReason {
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
    pub fn as_str(self) -> &'static str {
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
    pub fn is_back_off(self) -> bool {
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
pub enum StartOutcome {
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
pub struct ContainerSyncResult {
    pub name: String,
    /// An init container (sidecars included).
    pub init: bool,
    pub outcome: StartOutcome,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxFailure {
    pub message: String,
    /// The runtime's network (CNI) is not ready yet: requeue in 1 s.
    pub network_not_ready: bool,
}

/// What one `sync_pod` did (kubelet: `PodSyncResult`).
#[derive(Debug, Default)]
pub struct PodSyncResult {
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
    pub fn is_error(&self) -> bool {
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
    pub fn is_modelled(&self, observed: &PodRuntimeStatus) -> bool {
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
    pub fn runtime_down(&self) -> bool {
        self.kill_error
            .as_ref()
            .is_some_and(SyncError::runtime_down)
    }

    /// The sandbox failed because the pod network is not ready (requeue in 1 s).
    pub fn network_not_ready(&self) -> bool {
        self.sandbox_error
            .as_ref()
            .is_some_and(|f| f.network_not_ready)
    }

    /// The result for a container name, if the plan tried to start it.
    pub fn container(&self, name: &str) -> Option<&ContainerSyncResult> {
        self.containers.iter().find(|c| c.name == name)
    }

    /// The waiting reason and message for a container name, if it is waiting.
    pub fn waiting(&self, name: &str) -> Option<(WaitingReason, &str)> {
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
// Reading the runtime

/// Bring the runtime in line with the pod (kubelet: `SyncPod`): compute actions → kill
/// what must go → create the sandbox and read its IP → start ephemeral containers → start
/// init containers (stop at the first failure of a non-sidecar) → start regular
/// containers, each independently.
pub async fn sync_pod<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    pod: &api::Pod,
    status: &PodRuntimeStatus,
    backoff: &mut PodBackoffs,
    probes: &plan::ProbeVerdicts,
) -> PodSyncResult {
    let mut actions = plan::compute_pod_actions_with_probes(pod, status, probes);
    // kubelet: computePodResizeAction — running containers whose allocated cpu or memory
    // differs from what they run with.
    let kills = actions.containers_to_kill.len();
    let updates = if crate::allocation::ENABLED && crate::allocation::resizable(pod) {
        let records = env.resized.of(&env.paths.root_dir, pod.uid());
        plan::add_resize(pod, status, &records, &mut actions)
    } else {
        Vec::new()
    };
    let restarted = actions.containers_to_kill.len() > kills;
    let pod_name = pod.full_name();
    if !actions.is_noop() {
        log::debug!("pod {pod_name}: actions {actions:?}");
    }
    let mut result = PodSyncResult {
        actions: actions.clone(),
        sandbox_id: actions.sandbox_id.clone(),
        ..Default::default()
    };

    // Kill what must go.
    if actions.kill_pod {
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
        if let Err(e) = kill_pod(env, Some(pod), status, None).await {
            log::warn!("pod {pod_name}: {e}");
            result.kill_error = Some(e);
            return result;
        }
        if actions.create_sandbox {
            purge_init_containers(env, pod, status).await;
        }
    } else {
        for (id, k) in &actions.containers_to_kill {
            log::info!(
                "pod {pod_name}: killing container {:?}: {}",
                k.name,
                k.message
            );
            if let Err(e) = kill_container(env, pod, status, id, k).await {
                log::warn!("pod {pod_name}: {e}");
                result.kill_error = Some(e);
                return result;
            }
        }
        result.pruned = prune_init_containers(env, pod, status).await;
    }

    // kubelet: doPodResizeAction — after the kills, before anything starts.
    if crate::allocation::ENABLED && (!updates.is_empty() || restarted) {
        // Boxed and dynamic: its state and code stay out of sync_pod's (binary size).
        let apply: std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<(), resize::ResizeError>> + '_>,
        > = Box::pin(resize::apply(env, pod, status, &updates, restarted));
        if let Err(e) = apply.await {
            log::warn!("pod {pod_name}: resize: {e}");
            result.resize_error = Some(e.to_string());
        }
    }

    let nothing_to_start = !actions.create_sandbox
        && actions.init_containers_to_start.is_empty()
        && actions.containers_to_start.is_empty()
        && actions.ephemeral_containers_to_start.is_empty();

    // kubelet: the volume manager sets up (and at every sync re-sets up) the pod's
    // configMap, secret, downwardAPI and projected volumes before its containers start; one
    // that cannot be set up keeps them waiting (FailedMount, the pod stays ContainerCreating).
    let seccomp_root = env.paths.root_dir.join("seccomp");
    let stamp = data_volumes::version_stamp(env.clock.now());
    let mut volumes = data_volumes::setup(
        &env.paths.root_dir,
        pod,
        &env.managers.config,
        env.managers.tmpfs.as_ref(),
        env.node_params(&seccomp_root),
        &stamp,
    )
    .map(|updated| {
        for v in updated {
            log::info!("pod {pod_name}: volume {v:?} updated");
        }
    });
    if volumes.is_ok() {
        // kubelet: inline csi volumes are mounted by the volume manager like the others:
        // NodePublishVolume before the containers start (once per picolet run).
        volumes = crate::volume::csi::publish_pod_volumes(
            &env.paths.root_dir,
            pod,
            &env.managers.csi,
            &env.managers.config,
        )
        .await
        .map_err(|e| data_volumes::VolumeError {
            volume: e.volume,
            message: e.message,
        });
    }
    if let Err(e) = volumes {
        // The pod worker's WARN carries it (once, not at every retry).
        log::debug!("pod {pod_name}: {e}");
        // kubelet: the volume manager's events.FailedMount, at every attempt (aggregated).
        env.managers
            .recorder
            .warning(pod, None, recorder::FAILED_MOUNT, e.to_string());
        if nothing_to_start {
            return result;
        }
        result.containers = all_creating(pod, &actions, &e.to_string());
        return result;
    }

    if nothing_to_start {
        return result;
    }

    // The pod IP: the newest sandbox's if it is ready, or the new sandbox's.
    let mut pod_ip = status
        .sandboxes
        .first()
        .filter(|s| s.state == SandboxState::Ready)
        .and_then(|s| s.ip.clone())
        .filter(|ip| !ip.is_empty());
    let host_dns = read_host_dns(&env.paths.resolv_conf, &pod_name);
    let cgroup_parent = match &env.node.pod_cgroups {
        Some(cg) => {
            cg.track(pod);
            cg.sandbox_parent(pod)
        }
        None => env.node.cgroup_parent.clone(),
    };
    let mut sandbox_config = cri_config::sandbox_config(
        pod,
        actions.attempt,
        SandboxParams {
            pod_log_dir: &env.paths.pod_log_dir,
            cgroup_parent: &cgroup_parent,
            host_dns: host_dns.as_ref(),
            node: env.node_params(&seccomp_root),
        },
    );
    // kubelet: usernsForPod — a pod with hostUsers: false gets its range (kept on disk) in
    // the sandbox's and every container's namespace options; a new sandbox only on a
    // handler that reports user-namespace support, never a silent run in the host's.
    if userns::wanted(pod) {
        // Boxed: its Status call stays out of sync_pod's state machine (binary size).
        let setup = Box::pin(async {
            if actions.create_sandbox {
                let health = env
                    .runtime
                    .status()
                    .await
                    .map_err(userns::UsernsError::RuntimeStatus)?;
                userns::runtime_supports(
                    health.userns_handlers.as_deref(),
                    &sandbox_config.runtime_handler,
                )?;
            }
            userns::allocate(&env.paths.root_dir, &pod.metadata.uid)
        });
        match setup.await {
            Ok(m) => sandbox_config.namespace_options.userns = Some(m),
            Err(e) => {
                let message = e.to_string();
                log::warn!("pod {pod_name}: {message}");
                env.managers.recorder.warning(
                    pod,
                    None,
                    recorder::FAILED_CREATE_POD_SANDBOX,
                    format!("Failed to create pod sandbox: {message}"),
                );
                result.sandbox_error = Some(SandboxFailure {
                    message,
                    network_not_ready: false,
                });
                result.containers = all_creating(pod, &actions, "");
                return result;
            }
        }
    }

    if actions.create_sandbox {
        log::info!(
            "pod {pod_name}: creating sandbox (attempt {})",
            actions.attempt
        );
        warn_loopback_dns(pod, &sandbox_config, &env.paths.resolv_conf);
        // kubelet: SyncPod — UpdateQOSCgroups and podContainerManager.EnsureExists before
        // the sandbox; a failure fails the sync (retried with back-off).
        if let Some(cg) = &env.node.pod_cgroups
            && let Err(e) = cg.ensure(pod).await
        {
            let message = format!("unable to ensure pod container exists: {e}");
            log::warn!("pod {pod_name}: {message}");
            env.managers.recorder.warning(
                pod,
                None,
                crate::cm::FAILED_CREATE_POD_CONTAINER,
                message.clone(),
            );
            result.sandbox_error = Some(SandboxFailure {
                message,
                network_not_ready: false,
            });
            result.containers = all_creating(pod, &actions, "");
            return result;
        }
        match create_sandbox(env, pod, &sandbox_config).await {
            Ok(sandbox) => {
                result.sandbox_created = true;
                result.sandbox_id.clone_from(&sandbox.id);
                if !pod.spec.host_network {
                    pod_ip = sandbox.ip.clone().filter(|ip| !ip.is_empty());
                }
                result.new_sandbox = Some(sandbox);
            }
            Err(failure) => {
                log::warn!("pod {pod_name}: {}", failure.message);
                // kubelet: SyncPod — events.FailedCreatePodSandBox.
                let message = if failure.message.starts_with("Failed to create pod sandbox") {
                    failure.message.clone()
                } else {
                    format!("Failed to create pod sandbox: {}", failure.message)
                };
                env.managers.recorder.warning(
                    pod,
                    None,
                    recorder::FAILED_CREATE_POD_SANDBOX,
                    message,
                );
                result.sandbox_error = Some(failure);
                result.containers = all_creating(pod, &actions, "");
                return result;
            }
        }
    }
    result.sandbox_ip = pod_ip.clone();
    let start = StartContext {
        pod,
        status,
        sandbox_id: result.sandbox_id.clone(),
        sandbox_config: &sandbox_config,
        // kubelet: syncPod takes the pod's IPs from its API status, which for a host-network
        // pod are the node's (#24576): status.podIP in the downward API is the node IP.
        pod_ip: match pod_ip {
            Some(ip) => ip,
            None if pod.spec.host_network => env.node.host_ip.clone(),
            None => String::new(),
        },
    };

    // kubelet: ephemeral containers first, so that they run even when an init container
    // cannot start.
    for &idx in &actions.ephemeral_containers_to_start {
        let Some(c) = pod.spec.ephemeral_containers.get(idx) else {
            continue;
        };
        let outcome = start_container(env, &start, c, backoff, &mut result).await;
        result.containers.push(ContainerSyncResult {
            name: c.name.clone(),
            init: false,
            outcome,
        });
    }

    // Init containers, in order; a failed plain init container stops the sync.
    for &idx in &actions.init_containers_to_start {
        let Some(c) = pod.spec.init_containers.get(idx) else {
            continue;
        };
        let outcome = start_container(env, &start, c, backoff, &mut result).await;
        let started = matches!(outcome, StartOutcome::Started { .. });
        result.containers.push(ContainerSyncResult {
            name: c.name.clone(),
            init: true,
            outcome,
        });
        if !started && !plan::is_restartable_init_container(c) {
            return result;
        }
    }

    // Regular containers, each on its own.
    for &idx in &actions.containers_to_start {
        let Some(c) = pod.spec.containers.get(idx) else {
            continue;
        };
        let outcome = start_container(env, &start, c, backoff, &mut result).await;
        result.containers.push(ContainerSyncResult {
            name: c.name.clone(),
            init: false,
            outcome,
        });
    }
    result
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
