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

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::future::join_all;

use crate::api::{self, PullPolicy};
use crate::clock::Clock;
use crate::config_data::ConfigObjects;
use crate::cri::credentials;
use crate::cri::{
    ContainerInfo, ContainerState, CriError, DnsConfig, ImageUser, ListFilter, PodRuntimeStatus,
    Runtime, Sandbox, SandboxConfig, SandboxState,
};
use crate::kuberuntime::backoff::{self, Backoff, PodBackoffs};
use crate::kuberuntime::container_mounts;
use crate::kuberuntime::cri_config::{self, SandboxParams};
use crate::kuberuntime::hooks;
use crate::kuberuntime::labels;
use crate::kuberuntime::plan::{self, ContainerToKill, KillReason, PodActions};
use crate::recorder::{self, Recorder};
use crate::volume::data_volumes;
use crate::volume::mounts;

pub const DEFAULT_ROOT_DIR: &str = "/var/lib/picolet";
pub const DEFAULT_POD_LOG_DIR: &str = "/var/log/pods";
pub const DEFAULT_RESOLV_CONF: &str = "/etc/resolv.conf";

/// kubelet: `minimumGracePeriodInSeconds` — never ask the runtime for less than 2 s.
pub const MIN_STOP_TIMEOUT_SECONDS: i64 = 2;
/// The API default of `terminationGracePeriodSeconds`.
pub const DEFAULT_GRACE_PERIOD_SECONDS: i64 = 30;

/// What a sync needs: the runtime, the wall clock and the filesystem roots (injected so
/// tests run in a tempdir).
#[derive(Clone)]
pub struct SyncEnv<R: Runtime, C: Clock> {
    pub runtime: R,
    pub clock: C,
    /// `--root-dir`: pod directories (`pods/<uid>/…`, emptyDirs) live here.
    pub root_dir: PathBuf,
    /// `--pod-log-dir` (kubelet: `podLogsDirectory`).
    pub pod_log_dir: PathBuf,
    /// The host resolv.conf for `Default`-like DNS policies (`--resolv-conf`).
    pub resolv_conf: PathBuf,
    /// Sandbox cgroup parent without pod cgroups; "" = the runtime's default.
    pub cgroup_parent: String,
    /// `--cgroups-per-qos`: the pod cgroups, made before the sandbox (`cm`).
    pub pod_cgroups: Option<crate::cm::manager::PodCgroups>,
    /// `--seccomp-default`: `RuntimeDefault` seccomp for pods that ask for nothing.
    pub seccomp_default: bool,
    /// The node's memory in bytes (`MemTotal`; 0: unknown): Burstable `oom_score_adj`.
    pub memory_capacity: u64,
    /// The node's CPUs in millicores (`resourceFieldRef` without a limit).
    pub cpu_capacity_milli: i64,
    /// The node's IP for `status.hostIP` in the downward API ("" if unknown).
    pub host_ip: String,
    /// Mounts the tmpfs of `Memory` emptyDirs.
    pub tmpfs: std::sync::Arc<dyn mounts::Tmpfs>,
    /// Docker config files with registry credentials, searched in order
    /// (`credentials::default_paths`).
    pub credential_paths: Vec<PathBuf>,
    /// The ConfigMaps and Secrets pods reference (the agent loop fills it).
    pub config: ConfigObjects,
    /// Where the sync records the kubelet's events (Pulling, Created, Killing, …).
    pub recorder: Recorder,
    /// The registered CSI drivers (the plugin watcher fills it).
    pub csi: crate::volume::csi::Registry,
}

impl<R: Runtime, C: Clock> SyncEnv<R, C> {
    fn node_params<'a>(&'a self, seccomp_root: &'a Path) -> cri_config::NodeParams<'a> {
        cri_config::NodeParams {
            seccomp_root,
            seccomp_default: self.seccomp_default,
            memory_capacity: self.memory_capacity,
            cpu_capacity_milli: self.cpu_capacity_milli,
            host_ip: &self.host_ip,
            objects: Some(&self.config),
        }
    }

    /// An environment with the default paths.
    pub fn new(runtime: R, clock: C) -> Self {
        SyncEnv {
            runtime,
            clock: clock.clone(),
            root_dir: PathBuf::from(DEFAULT_ROOT_DIR),
            pod_log_dir: PathBuf::from(DEFAULT_POD_LOG_DIR),
            resolv_conf: PathBuf::from(DEFAULT_RESOLV_CONF),
            cgroup_parent: String::new(),
            pod_cgroups: None,
            seccomp_default: false,
            memory_capacity: 0,
            cpu_capacity_milli: 1000,
            host_ip: String::new(),
            tmpfs: std::sync::Arc::new(mounts::SysTmpfs),
            credential_paths: credentials::default_paths(Path::new(DEFAULT_ROOT_DIR)),
            config: ConfigObjects::default(),
            recorder: Recorder::new("", recorder::DEFAULT_CAPACITY).with_clock(clock),
            csi: crate::volume::csi::Registry::default(),
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
}

impl PodSyncResult {
    /// A failure other than a back-off wait: the worker requeues with its error delay.
    pub fn is_error(&self) -> bool {
        self.kill_error.is_some()
            || self.sandbox_error.is_some()
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

fn uid_filter(uid: &str) -> ListFilter {
    ListFilter {
        labels: [(labels::POD_UID_LABEL.to_string(), uid.to_string())].into(),
        sandbox_id: None,
    }
}

/// Everything the runtime holds for one pod UID, newest first, with per-sandbox status
/// (IP, network mode) and per-container status (times, exit code) (kubelet:
/// `GetPodStatus`). Objects removed between the list and the status call are skipped.
pub async fn get_pod_status<R: Runtime>(rt: &R, uid: &str) -> Result<PodRuntimeStatus, CriError> {
    let filter = uid_filter(uid);
    let mut listed = rt.list_pod_sandboxes(&filter).await?;
    crate::sort::sort_by_key(&mut listed, |x| std::cmp::Reverse(x.created_at));
    let mut sandboxes = Vec::with_capacity(listed.len());
    for s in listed {
        match rt.pod_sandbox_status(&s.id).await {
            Ok(mut full) => {
                if full.labels.is_empty() {
                    full.labels = s.labels;
                }
                if full.annotations.is_empty() {
                    full.annotations = s.annotations;
                }
                sandboxes.push(full);
            }
            Err(e) if e.is_not_found() => continue,
            Err(e) => return Err(e),
        }
    }
    let listed = rt.list_containers(&filter).await?;
    let mut containers = Vec::with_capacity(listed.len());
    for c in listed {
        match rt.container_status(&c.id).await {
            Ok(mut full) => {
                // CRI ContainerStatus carries no sandbox ID; labels may be missing too.
                if full.sandbox_id.is_empty() {
                    full.sandbox_id = c.sandbox_id;
                }
                if full.labels.is_empty() {
                    full.labels = c.labels;
                }
                if full.annotations.is_empty() {
                    full.annotations = c.annotations;
                }
                containers.push(full);
            }
            Err(e) if e.is_not_found() => continue,
            Err(e) => return Err(e),
        }
    }
    crate::sort::sort_by_key(&mut containers, |x| std::cmp::Reverse(x.created_at));
    let mut status = PodRuntimeStatus {
        uid: uid.to_string(),
        sandboxes,
        containers,
        ..Default::default()
    };
    fill_identity(&mut status);
    Ok(status)
}

/// The pod's runtime view after a sync, from the view the sync planned on and what the sync
/// did, without reading the pod back whole: the new sandbox as its `PodSandboxStatus`
/// answered during the sync, one `ContainerStatus` per container started. `None` when the
/// sync did something this cannot model (a kill, a removal, a failed start that may have
/// left a container behind) or the runtime's answer does not fit: then read it whole.
///
/// kubelet: `SyncPod` reads nothing back; the PLEG's next relist reads the pod whole and
/// syncs it again. picolet records the status at once (a started pod reports Running
/// without waiting for the relist) but reads only the objects the sync created: in a burst
/// of starts, the lists per pod would compete with the other pods' starts in the runtime.
/// What else changed in the meantime the relist sees, as upstream's does.
pub async fn refresh_after_sync<R: Runtime>(
    rt: &R,
    observed: &PodRuntimeStatus,
    result: &PodSyncResult,
) -> Result<Option<PodRuntimeStatus>, CriError> {
    if !result.is_modelled(observed) {
        return Ok(None);
    }
    let mut after = observed.clone();
    if let Some(s) = &result.new_sandbox {
        if s.labels.is_empty() {
            return Ok(None);
        }
        after.sandboxes.retain(|x| x.id != s.id);
        after.sandboxes.push(s.clone());
    }
    for c in &result.containers {
        let StartOutcome::Started { id, .. } = &c.outcome else {
            continue;
        };
        let mut full = match rt.container_status(id).await {
            Ok(full) => full,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e),
        };
        if full.labels.is_empty() {
            return Ok(None);
        }
        // CRI ContainerStatus carries no sandbox ID.
        if full.sandbox_id.is_empty() {
            full.sandbox_id.clone_from(&result.sandbox_id);
        }
        after.containers.retain(|x| x.id != full.id);
        after.containers.push(full);
    }
    regroup(&mut after);
    Ok(Some(after))
}

/// Every pod the runtime holds that carries the kubelet's pod-UID label, grouped by UID,
/// from the two list calls only (no per-object status: cheap enough for the 1 s relist).
/// `ip`/`network` of sandboxes and exit details of containers are therefore unknown.
/// Pods are ordered newest first.
pub async fn list_runtime_pods<R: Runtime>(rt: &R) -> Result<Vec<PodRuntimeStatus>, CriError> {
    let all = ListFilter::default();
    let sandboxes = rt.list_pod_sandboxes(&all).await?;
    let containers = rt.list_containers(&all).await?;
    Ok(group_runtime_pods(sandboxes, containers))
}

/// [`list_runtime_pods`] for the relist: `None` when the runtime's lists are unchanged
/// since `digest` (nothing decoded, nothing grouped: the idle case).
pub async fn relist_runtime_pods<R: Runtime>(
    rt: &R,
    digest: &mut crate::cri::RelistDigest,
) -> Result<Option<Vec<PodRuntimeStatus>>, CriError> {
    Ok(rt
        .relist(digest)
        .await?
        .map(|(sandboxes, containers)| group_runtime_pods(sandboxes, containers)))
}

/// The two lists grouped by pod UID (see [`list_runtime_pods`]).
fn group_runtime_pods(
    sandboxes: Vec<crate::cri::Sandbox>,
    containers: Vec<ContainerInfo>,
) -> Vec<PodRuntimeStatus> {
    let mut pods: std::collections::BTreeMap<String, PodRuntimeStatus> = Default::default();
    for s in sandboxes {
        let Some(uid) = labels::pod_uid(&s.labels).map(str::to_string) else {
            continue;
        };
        let pod = pods.entry(uid.clone()).or_insert_with(|| PodRuntimeStatus {
            uid,
            ..Default::default()
        });
        pod.sandboxes.push(s);
    }
    for c in containers {
        let Some(uid) = labels::pod_uid(&c.labels).map(str::to_string) else {
            continue;
        };
        let pod = pods.entry(uid.clone()).or_insert_with(|| PodRuntimeStatus {
            uid,
            ..Default::default()
        });
        pod.containers.push(c);
    }
    let mut out: Vec<PodRuntimeStatus> = pods
        .into_values()
        .map(|mut p| {
            regroup(&mut p);
            p
        })
        .collect();
    let newest = |p: &PodRuntimeStatus| {
        let s = p.sandboxes.first().map_or(0, |s| s.created_at);
        let c = p.containers.first().map_or(0, |c| c.created_at);
        s.max(c)
    };
    crate::sort::sort_by_key(&mut out, |p| std::cmp::Reverse(newest(p)));
    out
}

/// Orders a pod's sandboxes and containers newest first and fills its name and namespace,
/// as the relist groups them (the evented PLEG's edits of one pod keep that form).
pub(crate) fn regroup(p: &mut PodRuntimeStatus) {
    crate::sort::sort_by_key(&mut p.sandboxes, |x| std::cmp::Reverse(x.created_at));
    crate::sort::sort_by_key(&mut p.containers, |x| std::cmp::Reverse(x.created_at));
    fill_identity(p);
}

/// Pod name and namespace from the newest sandbox's labels, else a container's.
fn fill_identity(p: &mut PodRuntimeStatus) {
    if let Some(s) = p.sandboxes.first() {
        let i = labels::sandbox_info(s);
        p.name = i.pod_name;
        p.namespace = i.pod_namespace;
    }
    if p.name.is_empty() {
        if let Some(c) = p.containers.first() {
            let i = labels::container_label_info(c);
            p.name = i.pod_name;
            p.namespace = i.pod_namespace;
        }
    }
}

// ---------------------------------------------------------------------------------------
// SyncPod

/// Bring the runtime in line with the pod (kubelet: `SyncPod`): compute actions → kill
/// what must go → create the sandbox and read its IP → start init containers (stop at the
/// first failure of a non-sidecar) → start regular containers, each independently.
pub async fn sync_pod<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    pod: &api::Pod,
    status: &PodRuntimeStatus,
    backoff: &mut PodBackoffs,
    probes: &plan::ProbeVerdicts,
) -> PodSyncResult {
    let actions = plan::compute_pod_actions_with_probes(pod, status, probes);
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
            env.recorder.normal(
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

    let nothing_to_start = !actions.create_sandbox
        && actions.init_containers_to_start.is_empty()
        && actions.containers_to_start.is_empty();

    // kubelet: the volume manager sets up (and at every sync re-sets up) the pod's
    // configMap, secret, downwardAPI and projected volumes before its containers start; one
    // that cannot be set up keeps them waiting (FailedMount, the pod stays ContainerCreating).
    let seccomp_root = env.root_dir.join("seccomp");
    let stamp = data_volumes::version_stamp(env.clock.now());
    let mut volumes = data_volumes::setup(
        &env.root_dir,
        pod,
        &env.config,
        env.tmpfs.as_ref(),
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
        volumes =
            crate::volume::csi::publish_pod_volumes(&env.root_dir, pod, &env.csi, &env.config)
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
        env.recorder
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
    let host_dns = read_host_dns(&env.resolv_conf, &pod_name);
    let cgroup_parent = match &env.pod_cgroups {
        Some(cg) => {
            cg.track(pod);
            cg.sandbox_parent(pod)
        }
        None => env.cgroup_parent.clone(),
    };
    let sandbox_config = cri_config::sandbox_config(
        pod,
        actions.attempt,
        SandboxParams {
            pod_log_dir: &env.pod_log_dir,
            cgroup_parent: &cgroup_parent,
            host_dns: host_dns.as_ref(),
            node: env.node_params(&seccomp_root),
        },
    );

    if actions.create_sandbox {
        log::info!(
            "pod {pod_name}: creating sandbox (attempt {})",
            actions.attempt
        );
        warn_loopback_dns(pod, &sandbox_config, &env.resolv_conf);
        // kubelet: SyncPod — UpdateQOSCgroups and podContainerManager.EnsureExists before
        // the sandbox; a failure fails the sync (retried with back-off).
        if let Some(cg) = &env.pod_cgroups
            && let Err(e) = cg.ensure(pod).await
        {
            let message = format!("unable to ensure pod container exists: {e}");
            log::warn!("pod {pod_name}: {message}");
            env.recorder.warning(
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
                env.recorder
                    .warning(pod, None, recorder::FAILED_CREATE_POD_SANDBOX, message);
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
        pod_ip: pod_ip.unwrap_or_default(),
    };

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
        .map(|c| creating(false, c));
    init.chain(regular).collect()
}

/// Read and parse the host resolv.conf. An unreadable file is logged, not a failed pod:
/// the sandbox request then carries no DNS config and the runtime uses the host's.
fn read_host_dns(path: &Path, pod_name: &str) -> Option<DnsConfig> {
    match std::fs::read_to_string(path) {
        Ok(text) => Some(cri_config::parse_resolv_conf(&text)),
        Err(e) => {
            log::warn!(
                "pod {pod_name}: cannot read {}: {e}; leaving DNS to the runtime",
                path.display()
            );
            None
        }
    }
}

/// A loopback resolver (systemd-resolved's 127.0.0.53, a local dnsmasq) is unreachable
/// from a pod network namespace; say so once per sandbox.
fn warn_loopback_dns(pod: &api::Pod, sandbox: &SandboxConfig, resolv_conf: &Path) {
    if pod.spec.host_network {
        return;
    }
    let loopback = sandbox
        .dns
        .iter()
        .flat_map(|d| &d.servers)
        .find(|s| s.starts_with("127.") || *s == "::1");
    if let Some(server) = loopback {
        log::warn!(
            "pod {}: nameserver {server} from {} is a loopback address, unreachable from the pod \
             network; point --resolv-conf at the upstream resolvers (e.g. \
             /run/systemd/resolve/resolv.conf)",
            pod.full_name(),
            resolv_conf.display()
        );
    }
}

/// Create the log directory and the sandbox, then read its status, IP included (kubelet:
/// `createPodSandbox` + the `PodSandboxStatus` that follows).
async fn create_sandbox<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    pod: &api::Pod,
    sandbox_config: &SandboxConfig,
) -> Result<Sandbox, SandboxFailure> {
    let log_dir = Path::new(&sandbox_config.log_directory);
    if let Err(e) = mounts::ensure_dir(log_dir, 0o755) {
        return Err(SandboxFailure {
            message: format!("create pod log directory: {e}"),
            network_not_ready: false,
        });
    }
    let id = env
        .runtime
        .run_pod_sandbox(sandbox_config)
        .await
        .map_err(|e| SandboxFailure {
            network_not_ready: is_network_not_ready(&e),
            message: format!("Failed to create pod sandbox: {e}"),
        })?;
    log::info!("pod {}: sandbox {id} created", pod.full_name());
    let mut status = env
        .runtime
        .pod_sandbox_status(&id)
        .await
        .map_err(|e| SandboxFailure {
            network_not_ready: false,
            message: format!("Unable to get pod sandbox status: {e}"),
        })?;
    // As `get_pod_status` does with the list's: a status without labels gets the config's.
    if status.labels.is_empty() {
        status.labels.clone_from(&sandbox_config.labels);
    }
    if status.annotations.is_empty() {
        status.annotations.clone_from(&sandbox_config.annotations);
    }
    status.id = id;
    Ok(status)
}

/// containerd/CRI-O report an uninitialised CNI with these phrases; the kubelet retries
/// such pods quickly once the network comes up.
pub fn is_network_not_ready(err: &CriError) -> bool {
    let msg = err.to_string().to_ascii_lowercase();
    [
        "network not ready",
        "networkready=false",
        "network plugin is not ready",
        "cni plugin not initialized",
        "cni config uninitialized",
        "no network config found",
    ]
    .iter()
    .any(|p| msg.contains(p))
}

struct StartContext<'a> {
    pod: &'a api::Pod,
    status: &'a PodRuntimeStatus,
    sandbox_id: String,
    sandbox_config: &'a SandboxConfig,
    pod_ip: String,
}

fn waiting(reason: WaitingReason, message: impl Into<String>) -> StartOutcome {
    StartOutcome::Waiting {
        reason,
        message: message.into(),
    }
}

/// kubelet: `SyncPod`'s `start` closure + `startContainer`: back-off check → image →
/// config → CreateContainer → StartContainer; a start that failed is recorded as the
/// container's `Failed` event (`Error: …`), as upstream's `startContainer` does.
async fn start_container<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    cx: &StartContext<'_>,
    c: &api::Container,
    backoff: &mut PodBackoffs,
    result: &mut PodSyncResult,
) -> StartOutcome {
    let field_path = recorder::container_field_path(cx.pod, &c.name);
    let outcome = try_start_container(env, cx, c, &field_path, backoff, result).await;
    if let StartOutcome::Waiting { reason, message } = &outcome {
        // kubelet: startContainer — events.FailedToCreateContainer / FailedToStartContainer
        // with "Error: <err>"; the image errors are the reasons themselves (ErrImagePull).
        let message = match reason {
            WaitingReason::ErrImagePull
            | WaitingReason::ImagePullBackOff
            | WaitingReason::ErrImageNeverPull
            | WaitingReason::InvalidImageName
            | WaitingReason::ImageInspectError => Some(format!("Error: {reason}")),
            WaitingReason::CreateContainerConfigError
            | WaitingReason::CreateContainerError
            | WaitingReason::RunContainerError => Some(format!("Error: {message}")),
            WaitingReason::ContainerCreating
            | WaitingReason::CrashLoopBackOff
            | WaitingReason::PostStartHookError => None,
        };
        if let Some(m) = message {
            env.recorder
                .warning(cx.pod, Some(&field_path), recorder::FAILED, m);
        }
    }
    outcome
}

async fn try_start_container<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    cx: &StartContext<'_>,
    c: &api::Container,
    field_path: &str,
    backoff: &mut PodBackoffs,
    result: &mut PodSyncResult,
) -> StartOutcome {
    let pod = cx.pod;
    let pod_name = pod.full_name();
    if let Some(w) =
        plan::should_back_off(&mut backoff.crash_loop, pod, c, cx.status, env.clock.now())
    {
        log::debug!("pod {pod_name}: {}", w.message);
        // kubelet: doBackOff — events.BackOffStartContainer, once per sync attempt.
        env.recorder.warning(
            pod,
            Some(field_path),
            recorder::BACK_OFF,
            format!(
                "Back-off restarting failed container {} in pod {}_{}({})",
                c.name, pod.metadata.name, pod.metadata.namespace, pod.metadata.uid
            ),
        );
        result.note_requeue(w.remaining);
        return waiting(WaitingReason::CrashLoopBackOff, w.message);
    }

    let (image_ref, image_user) =
        match ensure_image(env, cx, c, field_path, &mut backoff.image_pull, result).await {
            Ok(found) => found,
            Err(outcome) => return outcome,
        };
    // kubelet: getImageUser, for verifyRunAsNonRoot — read only when it decides (runAsNonRoot
    // without a runAsUser), and again only after a pull.
    let image_user = match image_user {
        Some(user) => user,
        None if cri_config::needs_image_user(pod, c) => {
            match env.runtime.image_status(&image_ref).await {
                Ok(Some(img)) => img.user,
                Ok(None) => ImageUser::Unset,
                Err(e) => {
                    return waiting(
                        WaitingReason::CreateContainerConfigError,
                        format!("failed to get image user of {:?}: {e}", c.image),
                    );
                }
            }
        }
        None => ImageUser::Unset,
    };

    // Restart count: the newest instance's + 1; with no instance left (removed, or the
    // runtime lost its state in a reboot) continue after the newest log file.
    let log_dir = cri_config::pod_log_directory(&env.pod_log_dir, pod).join(&c.name);
    let restart_count = match plan::newest_container(cx.status, &c.name) {
        Some(s) => labels::restart_count(s).saturating_add(1),
        None => restart_count_from_log_dir(&log_dir),
    };

    // The environment first: subPathExpr expands against it (kubelet: makeMounts gets the
    // container's env).
    let seccomp_root = env.root_dir.join("seccomp");
    let node = env.node_params(&seccomp_root);
    // kubelet: envFrom keys that are not valid names are skipped, with an event
    // (InvalidEnvironmentVariableNames); here a WARN.
    if let Ok(from) = cri_config::env_from(pod, c, node) {
        for (kind, object, keys) in from.skipped {
            log::warn!(
                "pod {pod_name}: container {:?}: keys [{}] from the EnvFrom {} {object} were skipped since they are considered invalid environment variable names",
                c.name,
                keys.join(", "),
                kind.resource()
            );
        }
    }
    let envs = match cri_config::container_env(pod, c, &cx.pod_ip, node) {
        Ok(envs) => envs,
        Err(e) => {
            // Often a ConfigMap or Secret not there yet: the pod worker's WARN says it once.
            log::debug!("pod {pod_name}: container {:?}: {e}", c.name);
            return waiting(WaitingReason::CreateContainerConfigError, e.to_string());
        }
    };
    let mut mount_list = match mounts::prepare_mounts(
        &env.root_dir,
        pod,
        c,
        &envs,
        env.tmpfs.as_ref(),
        env.memory_capacity,
    ) {
        Ok(m) => m,
        Err(e) => {
            log::warn!("pod {pod_name}: container {:?}: {e}", c.name);
            return waiting(WaitingReason::CreateContainerConfigError, e.to_string());
        }
    };
    // kubelet: makeMounts adds the managed /etc/hosts.
    match container_mounts::etc_hosts_mount(
        &env.root_dir,
        pod,
        c,
        &cx.pod_ip,
        Path::new(container_mounts::NODE_HOSTS_FILE),
    ) {
        Ok(Some(m)) => mount_list.push(m),
        Ok(None) => {}
        Err(e) => {
            log::warn!("pod {pod_name}: container {:?}: /etc/hosts: {e}", c.name);
            return waiting(WaitingReason::CreateContainerConfigError, e.to_string());
        }
    }
    // One file per container instance, named after its restart count, so that the
    // message can be found again from the runtime's view alone (after a picolet restart too).
    let file_id = container_mounts::termination_log_file_id(restart_count);
    match container_mounts::termination_log_mount(&env.root_dir, pod, c, &file_id) {
        Ok(m) => mount_list.push(m),
        Err(e) => log::warn!(
            "pod {pod_name}: container {:?}: termination log: {e}",
            c.name
        ),
    }
    if let Err(e) = mounts::ensure_dir(&log_dir, 0o755) {
        return waiting(
            WaitingReason::CreateContainerConfigError,
            format!(
                "create container log directory for container {} failed: {e}",
                c.name
            ),
        );
    }
    let cfg = match cri_config::container_config(
        pod,
        c,
        restart_count,
        &cx.pod_ip,
        mount_list,
        node,
        &image_user,
    ) {
        Ok(cfg) => cfg,
        Err(e) => {
            log::warn!("pod {pod_name}: container {:?}: {e}", c.name);
            return waiting(WaitingReason::CreateContainerConfigError, e.to_string());
        }
    };

    let id = match env
        .runtime
        .create_container(&cx.sandbox_id, &cfg, cx.sandbox_config)
        .await
    {
        Ok(id) => id,
        Err(e) => {
            log::warn!("pod {pod_name}: create container {:?}: {e}", c.name);
            return waiting(WaitingReason::CreateContainerError, e.to_string());
        }
    };
    // kubelet: startContainer — events.CreatedContainer ("Created container: web" since v1.32).
    env.recorder.normal(
        pod,
        Some(field_path),
        recorder::CREATED_CONTAINER,
        format!("Created container: {}", c.name),
    );
    if let Err(e) = env.runtime.start_container(&id).await {
        log::warn!("pod {pod_name}: start container {:?} ({id}): {e}", c.name);
        return waiting(WaitingReason::RunContainerError, e.to_string());
    }
    log::info!(
        "pod {pod_name}: started container {:?} ({id}, restart {restart_count})",
        c.name
    );
    // kubelet: startContainer — events.StartedContainer.
    env.recorder.normal(
        pod,
        Some(field_path),
        recorder::STARTED_CONTAINER,
        format!("Started container {}", c.name),
    );
    // kubelet: startContainer runs the postStart hook right after the start; a failure
    // kills the container (FailedPostStartHook) and the start counts as failed.
    if let Some(h) = c.lifecycle.as_ref().and_then(|l| l.post_start.as_ref()) {
        if let Err(e) = hooks::run(&env.runtime, c, &id, h, &cx.pod_ip, None).await {
            let message = format!("PostStartHook failed: {e}");
            log::warn!(
                "pod {pod_name}: container {:?}: postStart hook failed: {e}; killing the container (FailedPostStartHook)",
                c.name
            );
            // kubelet: the hook's output stays out of the event (it may hold secrets).
            env.recorder.warning(
                pod,
                Some(field_path),
                recorder::FAILED_POST_START_HOOK,
                "PostStartHook failed",
            );
            let kill = ContainerToKill {
                name: c.name.clone(),
                message: "FailedPostStartHook".into(),
                reason: KillReason::Unknown,
            };
            if let Err(e) = kill_container(env, pod, cx.status, &id, &kill).await {
                log::warn!("pod {pod_name}: {e}");
            }
            return waiting(WaitingReason::PostStartHookError, message);
        }
        log::info!(
            "pod {pod_name}: container {:?}: postStart hook done",
            c.name
        );
    }
    StartOutcome::Started { id, restart_count }
}

/// kubelet: `EnsureImageExists` — pull policy, `Never` without the image, pull back-off
/// per pod + image. Returns the image reference, and its user when it was already present
/// (the status read says; after a pull it is not known).
async fn ensure_image<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    cx: &StartContext<'_>,
    c: &api::Container,
    field_path: &str,
    pull_backoff: &mut Backoff,
    result: &mut PodSyncResult,
) -> Result<(String, Option<ImageUser>), StartOutcome> {
    let pod = cx.pod;
    let fp = Some(field_path);
    let image = cri_config::image_with_default_tag(&c.image).map_err(|e| {
        // kubelet: EnsureImageExists — events.FailedToInspectImage.
        env.recorder.warning(
            pod,
            fp,
            recorder::INSPECT_FAILED,
            format!("Failed to apply default image tag {:?}: {e}", c.image),
        );
        waiting(WaitingReason::InvalidImageName, e.to_string())
    })?;
    let present = env.runtime.image_status(&image).await.map_err(|e| {
        let message = format!("Failed to inspect image {:?}: {e}", c.image);
        env.recorder
            .warning(pod, fp, recorder::INSPECT_FAILED, message.clone());
        waiting(WaitingReason::ImageInspectError, message)
    })?;
    let pull = match cri_config::pull_policy(c) {
        PullPolicy::Never => false,
        PullPolicy::Always => true,
        PullPolicy::IfNotPresent => present.is_none(),
    };
    if !pull {
        return match present {
            Some(img) => {
                // kubelet: EnsureImageExists — events.PulledImage for a present image.
                env.recorder.normal(
                    pod,
                    fp,
                    recorder::PULLED_IMAGE,
                    format!("Container image {:?} already present on machine", c.image),
                );
                Ok((img.id, Some(img.user)))
            }
            None => {
                let message = format!(
                    "Container image {:?} is not present with pull policy of Never",
                    c.image
                );
                // kubelet: events.ErrImageNeverPullPolicy.
                env.recorder
                    .warning(pod, fp, recorder::ERR_IMAGE_NEVER_PULL, message.clone());
                Err(waiting(WaitingReason::ErrImageNeverPull, message))
            }
        };
    }
    let key = backoff::image_pull_key(&cx.pod.metadata.uid, &c.image);
    if let Some(remaining) = pull_backoff.remaining_since_update(&key, env.clock.now()) {
        result.note_requeue(remaining);
        let message = format!("Back-off pulling image {:?}", c.image);
        // kubelet: EnsureImageExists — events.BackOffPullImage (type Normal upstream).
        env.recorder
            .normal(pod, fp, recorder::BACK_OFF, message.clone());
        return Err(waiting(WaitingReason::ImagePullBackOff, message));
    }
    // kubelet: the docker config keyring, read at each pull (a pull is rare, and an edit of
    // the file applies without a restart). Never logged: only whether credentials went along.
    // kubelet: the pod's imagePullSecrets come first, then the node's keyring.
    let pod_ring = pull_secrets_keyring(env, cx.pod);
    let (keyring, problems) = credentials::Keyring::load(&env.credential_paths);
    for p in problems {
        log::warn!("registry credentials: {p}");
    }
    let (auth, whose) = match pod_ring.lookup(&image) {
        Some(a) => (Some(a), " with the pod's imagePullSecrets"),
        None => (
            keyring.lookup(&image),
            " with the node's credentials for its registry",
        ),
    };
    log::info!(
        "pod {}: pulling image {:?}{}",
        cx.pod.full_name(),
        c.image,
        if auth.is_some() { whose } else { "" }
    );
    // kubelet: EnsureImageExists — events.PullingImage.
    env.recorder.normal(
        pod,
        fp,
        recorder::PULLING_IMAGE,
        format!("Pulling image {:?}", c.image),
    );
    let pull_started = tokio::time::Instant::now();
    match env
        .runtime
        .pull_image(&image, auth, cx.sandbox_config)
        .await
    {
        Ok(image_ref) => {
            pull_backoff.gc(env.clock.now());
            // kubelet: events.PulledImage — "in <pull> (<total> including waiting)"; picolet
            // pulls one image at a time per pod and does not queue: both are the pull. The
            // image size upstream appends is not known here.
            let took = go_duration(pull_started.elapsed());
            env.recorder.normal(
                pod,
                fp,
                recorder::PULLED_IMAGE,
                format!(
                    "Successfully pulled image {:?} in {took} ({took} including waiting)",
                    c.image
                ),
            );
            Ok((image_ref, None))
        }
        Err(e) => {
            let now = env.clock.now();
            pull_backoff.next(&key, now, now);
            result.note_requeue(pull_backoff.get(&key));
            // A registry that wants credentials: say where picolet looks for them.
            let msg = e.to_string();
            let lower = msg.to_ascii_lowercase();
            let hint = if ["401", "unauthorized", "authorization failed", "denied"]
                .iter()
                .any(|w| lower.contains(w))
            {
                let files: Vec<String> = env
                    .credential_paths
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect();
                format!(
                    " ({} credentials for {}; picolet reads registry credentials from {} and the pod's imagePullSecrets)",
                    if auth.is_some() {
                        "the registry refused the"
                    } else {
                        "no"
                    },
                    credentials::image_location(&image),
                    files.join(", ")
                )
            } else {
                String::new()
            };
            log::warn!(
                "pod {}: failed to pull image {:?}: {msg}{hint}",
                cx.pod.full_name(),
                c.image
            );
            // kubelet: events.FailedToPullImage.
            env.recorder.warning(
                pod,
                fp,
                recorder::FAILED,
                format!("Failed to pull image {:?}: {msg}", c.image),
            );
            Err(waiting(WaitingReason::ErrImagePull, format!("{msg}{hint}")))
        }
    }
}

/// A duration as Go's `time.Duration.String` prints it after `Truncate(time.Millisecond)`
/// (`523ms`, `1.2s`, `2m3.456s`, `0s`): the kubelet's Pulled message uses it.
pub fn go_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return "0s".into();
    }
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let (h, rem) = (ms / 3_600_000, ms % 3_600_000);
    let (m, rem) = (rem / 60_000, rem % 60_000);
    let (s, frac) = (rem / 1000, rem % 1000);
    let secs = if frac == 0 {
        format!("{s}s")
    } else {
        let f = format!("{frac:03}");
        format!("{s}.{}s", f.trim_end_matches('0'))
    };
    match (h, m) {
        (0, 0) => secs,
        (0, m) => format!("{m}m{secs}"),
        (h, m) => format!("{h}h{m}m{secs}"),
    }
}

/// The registry credentials of the pod's `imagePullSecrets` (kubelet: `getPullSecretsForPod`):
/// the `.dockerconfigjson` or `.dockercfg` key of each Secret; a missing one is a WARN and the
/// pull goes on without it, as upstream.
fn pull_secrets_keyring<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    pod: &api::Pod,
) -> credentials::Keyring {
    let mut ring = credentials::Keyring::default();
    for s in &pod.spec.image_pull_secrets {
        let key = crate::config_data::ObjectKey::new(
            crate::config_data::Scope::of(pod),
            crate::config_data::Kind::Secret,
            &pod.metadata.namespace,
            &s.name,
        );
        let Some(secret) = env.config.get(&key) else {
            log::warn!(
                "pod {}: unable to retrieve pull secret {}/{}; the image pull may not succeed",
                pod.full_name(),
                pod.metadata.namespace,
                s.name
            );
            continue;
        };
        let data = secret
            .data
            .get(".dockerconfigjson")
            .or_else(|| secret.data.get(".dockercfg"));
        match data.map(|d| credentials::Keyring::parse(d)) {
            Some(Ok(r)) => ring.extend(r),
            Some(Err(e)) => log::warn!(
                "pod {}: pull secret {}/{}: {e}",
                pod.full_name(),
                pod.metadata.namespace,
                s.name
            ),
            None => log::warn!(
                "pod {}: pull secret {}/{} has neither .dockerconfigjson nor .dockercfg",
                pod.full_name(),
                pod.metadata.namespace,
                s.name
            ),
        }
    }
    ring
}

/// kubelet: `getTerminationMessage` / `readLastStringFromContainerLogs` — an exited
/// container without a runtime message gets the content of its termination-message file
/// (at most 4 KiB), or, with `terminationMessagePolicy: FallbackToLogsOnError` and a
/// failure, the tail of its log (80 lines, at most 2 KiB). Small local reads; nothing is
/// read for running containers.
pub fn fill_termination_messages(root_dir: &Path, pod: &api::Pod, status: &mut PodRuntimeStatus) {
    const MAX_MESSAGE: u64 = 4 * 1024;
    const MAX_LOG_TAIL: usize = 2 * 1024;
    const LOG_LINES: usize = 80;
    for c in status
        .containers
        .iter_mut()
        .filter(|c| c.state == ContainerState::Exited && c.message.is_empty())
    {
        let Some(spec) = pod
            .spec
            .containers
            .iter()
            .chain(&pod.spec.init_containers)
            .find(|s| s.name == c.name)
        else {
            continue;
        };
        let file = mounts::pod_dir(root_dir, &pod.metadata.uid)
            .join("containers")
            .join(&c.name)
            .join(container_mounts::termination_log_file_id(
                labels::restart_count(c),
            ));
        let mut text = String::new();
        if let Ok(f) = std::fs::File::open(&file) {
            use std::io::Read as _;
            let mut buf = Vec::new();
            let _ = f.take(MAX_MESSAGE).read_to_end(&mut buf);
            text = String::from_utf8_lossy(&buf).into_owned();
        }
        let fallback = spec.termination_message_policy.as_deref() == Some("FallbackToLogsOnError");
        if text.is_empty() && fallback && c.exit_code != 0 && !c.log_path.is_empty() {
            text = log_tail(Path::new(&c.log_path), LOG_LINES, MAX_LOG_TAIL);
        }
        c.message = text;
    }
}

/// The message part of the last `lines` CRI log lines (`<time> <stream> <tag> <text>`),
/// at most `max` bytes from the end.
fn log_tail(path: &Path, lines: usize, max: usize) -> String {
    let Ok(content) = std::fs::read_to_string(path) else {
        return String::new();
    };
    let all: Vec<&str> = content.lines().collect();
    let start = all.len().saturating_sub(lines);
    let mut out = String::new();
    for line in &all[start..] {
        let msg = line.splitn(4, ' ').nth(3).unwrap_or("");
        out.push_str(msg);
        out.push('\n');
    }
    if out.len() > max {
        let mut cut = out.len() - max;
        while !out.is_char_boundary(cut) {
            cut += 1;
        }
        out = out[cut..].to_string();
    }
    out
}

/// The next restart count after the newest `<n>.log` (rotated `<n>.log.*` included) in a
/// container's log directory; 0 when there is none (kubelet: `calcRestartCountByLogDir`).
pub fn restart_count_from_log_dir(dir: &Path) -> u32 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let (n, rest) = name.split_once('.')?;
            if !rest.starts_with("log") || (rest.len() > 3 && !rest[3..].starts_with('.')) {
                return None;
            }
            n.parse::<u32>().ok()?.checked_add(1)
        })
        .max()
        .unwrap_or(0)
}

/// Remove every instance of the pod's init containers (after the sandbox was killed for
/// re-creation: initialisation starts over) (kubelet: `purgeInitContainers`).
async fn purge_init_containers<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    pod: &api::Pod,
    status: &PodRuntimeStatus,
) {
    for c in &status.containers {
        let name = labels::container_name(c);
        if pod.spec.init_containers.iter().any(|i| i.name == name) {
            remove_container_logged(env, pod, c).await;
        }
    }
}

/// Keep only the newest exited instance of each init container (kubelet:
/// `pruneInitContainersBeforeStart`).
/// Returns whether it removed any.
async fn prune_init_containers<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    pod: &api::Pod,
    status: &PodRuntimeStatus,
) -> bool {
    let mut removed = false;
    for init in &pod.spec.init_containers {
        let dead = status.containers.iter().filter(|c| {
            labels::container_name(c) == init.name
                && matches!(c.state, ContainerState::Exited | ContainerState::Unknown)
        });
        for c in dead.skip(1) {
            remove_container_logged(env, pod, c).await;
            removed = true;
        }
    }
    removed
}

async fn remove_container_logged<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    pod: &api::Pod,
    c: &ContainerInfo,
) {
    match env.runtime.remove_container(&c.id).await {
        Ok(()) => {}
        Err(e) if e.is_not_found() => {}
        Err(e) => log::warn!(
            "pod {}: remove container {:?} ({}): {e}",
            pod.full_name(),
            labels::container_name(c),
            c.id
        ),
    }
}

// ---------------------------------------------------------------------------------------
// Kill

/// The grace period for stopping one container (kubelet: `setTerminationGracePeriod`):
/// the override, else the pod's deletion grace period, else a failed probe's own
/// `terminationGracePeriodSeconds`, else `spec.terminationGracePeriodSeconds` (default
/// 30). Without a pod spec (after an agent restart) the container's annotations say it.
fn grace_period(
    pod: Option<&api::Pod>,
    spec: Option<&api::Container>,
    running: Option<&ContainerInfo>,
    reason: KillReason,
    grace_override: Option<i64>,
) -> i64 {
    if let Some(g) = grace_override {
        return g;
    }
    if let (Some(pod), Some(spec)) = (pod, spec) {
        if let Some(g) = pod.metadata.deletion_grace_period_seconds {
            return g;
        }
        let probe = match reason {
            KillReason::LivenessProbe => spec.liveness_probe.as_ref(),
            KillReason::StartupProbe => spec.startup_probe.as_ref(),
            KillReason::Unknown | KillReason::UnknownState => None,
        };
        if let Some(g) = probe.and_then(|p| p.termination_grace_period_seconds) {
            return g;
        }
        return pod
            .spec
            .termination_grace_period_seconds
            .unwrap_or(DEFAULT_GRACE_PERIOD_SECONDS);
    }
    if let Some(c) = running {
        let a = labels::container_annotation_info(c);
        if let Some(g) = a
            .pod_deletion_grace_period
            .or(a.pod_termination_grace_period)
        {
            return g;
        }
    }
    DEFAULT_GRACE_PERIOD_SECONDS
}

fn container_spec<'a>(pod: &'a api::Pod, name: &str) -> Option<&'a api::Container> {
    pod.spec
        .containers
        .iter()
        .chain(&pod.spec.init_containers)
        .find(|c| c.name == name)
}

/// A container's preStop hook and what running it needs.
struct PreStop<'a> {
    handler: &'a api::LifecycleHandler,
    /// The spec (or, after a picolet restart, its name and ports from the annotations).
    container: std::borrow::Cow<'a, api::Container>,
    pod_ip: &'a str,
}

/// The container's preStop hook, from the spec or else from the container's annotations
/// (kubelet: `restoreSpecsFromContainerLabels`).
fn pre_stop_of<'a>(
    spec: Option<&'a api::Container>,
    annotations: Option<&'a labels::ContainerAnnotationInfo>,
    name: &str,
    pod_ip: &'a str,
) -> Option<PreStop<'a>> {
    if let Some(s) = spec {
        let handler = s.lifecycle.as_ref()?.pre_stop.as_ref()?;
        return Some(PreStop {
            handler,
            container: std::borrow::Cow::Borrowed(s),
            pod_ip,
        });
    }
    let a = annotations?;
    Some(PreStop {
        handler: a.pre_stop.as_ref()?,
        container: std::borrow::Cow::Owned(api::Container {
            name: name.to_string(),
            ports: a.ports.clone(),
            ..Default::default()
        }),
        pod_ip,
    })
}

/// The pod IP hooks are sent to: the newest ready sandbox's, else the node's (host network).
fn hook_ip<'a>(status: &'a PodRuntimeStatus, host_ip: &'a str) -> &'a str {
    status
        .sandboxes
        .first()
        .filter(|s| s.state == SandboxState::Ready)
        .and_then(|s| s.ip.as_deref())
        .filter(|ip| !ip.is_empty())
        .unwrap_or(host_ip)
}

/// Where a kill records its events: the recorder and the pod (none after a picolet
/// restart, when only the runtime's view is left).
#[derive(Clone, Copy)]
struct KillEvents<'a> {
    recorder: &'a Recorder,
    pod: &'a api::Pod,
}

/// kubelet: `executePreStopHook` — run the hook, bounded by the grace period; returns the
/// whole seconds it took. A failure is logged and recorded (FailedPreStopHook) and the stop
/// goes on.
async fn run_pre_stop<R: Runtime>(
    rt: &R,
    pod_name: &str,
    id: &str,
    name: &str,
    grace: i64,
    hook: &PreStop<'_>,
    events: Option<KillEvents<'_>>,
) -> i64 {
    let bound = Duration::from_secs(u64::try_from(grace).unwrap_or(0));
    let started = tokio::time::Instant::now();
    log::info!("pod {pod_name}: container {name:?}: running the preStop hook (grace {grace}s)");
    let run = hooks::run(
        rt,
        &hook.container,
        id,
        hook.handler,
        hook.pod_ip,
        Some(bound),
    );
    match tokio::time::timeout(bound, run).await {
        Ok(Ok(())) => log::info!(
            "pod {pod_name}: container {name:?}: preStop hook done after {:?}",
            started.elapsed()
        ),
        Ok(Err(e)) => {
            log::warn!(
                "pod {pod_name}: container {name:?}: preStop hook failed (FailedPreStopHook): {e}"
            );
            // kubelet: the hook's output stays out of the event (it may hold secrets).
            if let Some(ev) = events {
                ev.recorder.warning(
                    ev.pod,
                    Some(&recorder::container_field_path(ev.pod, name)),
                    recorder::FAILED_PRE_STOP_HOOK,
                    "PreStopHook failed",
                );
            }
        }
        Err(_) => log::warn!(
            "pod {pod_name}: container {name:?}: preStop hook did not finish within the grace period of {grace}s"
        ),
    }
    i64::try_from(started.elapsed().as_secs()).unwrap_or(i64::MAX)
}

/// Stop one container: the preStop hook if any and the grace period is > 0, then
/// `StopContainer(id, max(grace - hook time, 2))`; NotFound is fine (kubelet:
/// `killContainer`).
#[allow(clippy::too_many_arguments)]
async fn stop_one<R: Runtime>(
    rt: &R,
    pod_name: &str,
    id: &str,
    name: &str,
    grace: i64,
    pre_stop: Option<PreStop<'_>>,
    events: Option<KillEvents<'_>>,
    message: &str,
) -> Result<(), SyncError> {
    // kubelet: killContainer — events.KillingContainer before the preStop hook; the
    // message is the kill's reason, else "Stopping container <name>".
    if let Some(ev) = events {
        let message = if message.is_empty() {
            format!("Stopping container {name}")
        } else {
            message.to_string()
        };
        ev.recorder.normal(
            ev.pod,
            Some(&recorder::container_field_path(ev.pod, name)),
            recorder::KILLING_CONTAINER,
            message,
        );
    }
    let mut grace = grace;
    if let Some(hook) = pre_stop.as_ref().filter(|_| grace > 0) {
        // Boxed: only a container with a hook pays for the hook's future (an exec or an
        // HTTP GET), not every stop of a mass delete.
        grace -= Box::pin(run_pre_stop(rt, pod_name, id, name, grace, hook, events)).await;
    }
    let timeout = grace.max(MIN_STOP_TIMEOUT_SECONDS);
    log::info!("pod {pod_name}: stopping container {name:?} ({id}) with grace period {timeout}s");
    match rt.stop_container(id, timeout).await {
        Ok(()) => Ok(()),
        Err(e) if e.is_not_found() => Ok(()),
        Err(source) => Err(SyncError::StopContainer {
            id: id.to_string(),
            name: name.to_string(),
            source,
        }),
    }
}

async fn kill_container<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    pod: &api::Pod,
    status: &PodRuntimeStatus,
    id: &str,
    k: &ContainerToKill,
) -> Result<(), SyncError> {
    let spec = container_spec(pod, &k.name);
    let grace = grace_period(Some(pod), spec, None, k.reason, None);
    let pre_stop = pre_stop_of(spec, None, &k.name, hook_ip(status, &env.host_ip));
    let events = KillEvents {
        recorder: &env.recorder,
        pod,
    };
    stop_one(
        &env.runtime,
        &pod.full_name(),
        id,
        &k.name,
        grace,
        pre_stop,
        Some(events),
        &k.message,
    )
    .await
}

/// Stop every running container of the pod concurrently, then every sandbox (kubelet:
/// `killPodWithSyncResult`). `pod` is `None` after an agent restart: grace periods then
/// come from the containers' annotations. Sandboxes are stopped even when a container
/// stop failed, and all of them (not only ready ones): stopping an already not-ready
/// sandbox releases network resources the runtime may still hold (as upstream does).
/// Removal is left to cleanup / GC.
pub async fn kill_pod<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    pod: Option<&api::Pod>,
    status: &PodRuntimeStatus,
    grace_override: Option<i64>,
) -> Result<(), SyncError> {
    let pod_name = match pod {
        Some(p) => p.full_name(),
        None => format!("{}/{} ({})", status.namespace, status.name, status.uid),
    };
    let pod_ip = hook_ip(status, &env.host_ip);
    // Without the pod (after a picolet restart) the annotations have the hook; with it they
    // are not parsed (a mass delete kills hundreds of containers at once).
    let running: Vec<(&ContainerInfo, Option<labels::ContainerAnnotationInfo>)> = status
        .containers
        .iter()
        .filter(|c| c.state == ContainerState::Running)
        .map(|c| {
            (
                c,
                pod.is_none().then(|| labels::container_annotation_info(c)),
            )
        })
        .collect();
    let stops = running.iter().map(|(c, annotations)| {
        let name = labels::container_name(c);
        let spec = pod.and_then(|p| container_spec(p, name));
        let grace = grace_period(pod, spec, Some(c), KillReason::Unknown, grace_override);
        let pre_stop = pre_stop_of(spec, annotations.as_ref(), name, pod_ip);
        let pod_name = &pod_name;
        let events = pod.map(|pod| KillEvents {
            recorder: &env.recorder,
            pod,
        });
        async move {
            stop_one(
                &env.runtime,
                pod_name,
                &c.id,
                name,
                grace,
                pre_stop,
                events,
                "",
            )
            .await
        }
    });
    let mut errors: Vec<SyncError> = join_all(stops)
        .await
        .into_iter()
        .filter_map(Result::err)
        .collect();
    for s in &status.sandboxes {
        match env.runtime.stop_pod_sandbox(&s.id).await {
            Ok(()) => {}
            Err(e) if e.is_not_found() => {}
            Err(source) => errors.push(SyncError::StopSandbox {
                id: s.id.clone(),
                source,
            }),
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(SyncError::Steps {
            step: "kill",
            pod: pod_name,
            errors,
        })
    }
}

// ---------------------------------------------------------------------------------------
// Cleanup

/// After a pod finished (kubelet: `SyncTerminatedPod`): remove `<root_dir>/pods/<uid>`
/// (emptyDirs, termination logs) on the blocking pool. Dead containers, sandboxes and logs
/// are left to container GC (`gc.rs`), as upstream: the status of a finished pod that is
/// still wanted survives a picolet restart. Refuses, changing nothing, while a container
/// runs or a sandbox is ready — kill first.
pub async fn cleanup_pod<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    status: &PodRuntimeStatus,
    uid: &str,
) -> Result<(), SyncError> {
    let alive: Vec<String> = status
        .containers
        .iter()
        .filter(|c| c.state == ContainerState::Running)
        .map(|c| c.id.clone())
        .chain(
            status
                .sandboxes
                .iter()
                .filter(|s| s.state == SandboxState::Ready)
                .map(|s| s.id.clone()),
        )
        .collect();
    if !alive.is_empty() {
        return Err(SyncError::StillRunning {
            uid: uid.to_string(),
            ids: alive,
        });
    }
    // kubelet: the volume manager unmounts (NodeUnpublishVolume) the csi volumes once the
    // containers stopped; the pod is not cleaned up, and stays not finished, until every one
    // is unpublished and nothing is mounted on its target any more (retried by the worker).
    crate::volume::csi::unpublish_pod_volumes(&env.root_dir, uid, &env.csi)
        .await
        .map_err(|source| SyncError::Unpublish {
            uid: uid.to_string(),
            source,
        })?;
    // The tmpfs of Memory emptyDirs are unmounted first; nothing else is left mounted
    // inside the pod directory by picolet (the csi volumes are gone: see above), so a
    // recursive removal only deletes picolet's own files (remove_dir_all does not follow
    // symlinks). On an SD card this takes a while: off
    // the event loop's thread.
    let dir = mounts::pod_dir(&env.root_dir, uid);
    let removal = {
        let dir = dir.clone();
        let root = env.root_dir.clone();
        let uid = uid.to_string();
        let tmpfs = std::sync::Arc::clone(&env.tmpfs);
        tokio::task::spawn_blocking(move || {
            mounts::unmount_pod_volumes(&root, &uid, tmpfs.as_ref())
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            std::fs::remove_dir_all(&dir)
        })
        .await
    };
    match removal {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Ok(Err(source)) => Err(SyncError::RemoveDir { path: dir, source }),
        Err(join) => Err(SyncError::RemoveDir {
            path: dir,
            source: std::io::Error::other(join.to_string()),
        }),
    }
}

#[cfg(test)]
#[path = "sync_tests.rs"]
mod tests;
