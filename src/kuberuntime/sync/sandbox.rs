//! The pod sandbox (kubelet: `SyncPod` Step 4, `createPodSandbox`): its config (DNS from
//! the host's resolv.conf, the pod cgroup, the user namespace), the loopback-DNS warning,
//! the pod cgroup made before it, a network that is not ready yet.

use std::path::Path;

use crate::api;
use crate::clock::Clock;
use crate::cri::{CriError, DnsConfig, IdMapping, Runtime, Sandbox, SandboxConfig, SandboxState};
use crate::kuberuntime::cri_config::{self, SandboxParams};
use crate::kuberuntime::plan::PodActions;
use crate::kuberuntime::userns::{self, UsernsError};
use crate::recorder::{self, Recorder};
use crate::volume::mounts;

use super::*;

/// Step 4 (kubelet: `SyncPod` — createPodSandbox): the sandbox config with the pod's user
/// namespace, then, when the plan wants a new sandbox, the pod cgroup and the sandbox
/// itself. Returns the config the containers are created against and the pod IP (the
/// newest sandbox's if it is ready, or the new sandbox's); `None` when a step failed
/// (recorded in `result`, every container waiting as ContainerCreating).
pub(super) async fn ensure_sandbox<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    pod: &api::Pod,
    status: &PodRuntimeStatus,
    actions: &PodActions,
    pod_name: &str,
    result: &mut PodSyncResult,
) -> Option<(SandboxConfig, Option<String>)> {
    let mut pod_ip = status
        .sandboxes
        .first()
        .filter(|s| s.state == SandboxState::Ready)
        .and_then(|s| s.ip.clone())
        .filter(|ip| !ip.is_empty());
    let mut sandbox_config = sandbox_config_for(env, pod, actions.attempt, pod_name);
    // kubelet: usernsForPod — a pod with hostUsers: false gets its range (kept on disk) in
    // the sandbox's and every container's namespace options; a new sandbox only on a
    // handler that reports user-namespace support, never a silent run in the host's.
    if userns::wanted(pod) {
        // Boxed: its Status call stays out of sync_pod's state machine (binary size).
        let handler = &sandbox_config.runtime_handler;
        match Box::pin(pod_userns(env, pod, actions.create_sandbox, handler)).await {
            Ok(m) => sandbox_config.namespace_options.userns = Some(m),
            Err(e) => {
                let message = e.to_string();
                let event = format!("Failed to create pod sandbox: {message}");
                let failure = SandboxFailure {
                    message,
                    network_not_ready: false,
                };
                let reason = recorder::FAILED_CREATE_POD_SANDBOX;
                sandbox_failed(
                    &env.managers.recorder,
                    pod,
                    actions,
                    pod_name,
                    result,
                    reason,
                    event,
                    failure,
                );
                return None;
            }
        }
    }
    if actions.create_sandbox {
        let sandbox =
            create_new_sandbox(env, pod, actions, &sandbox_config, pod_name, result).await?;
        result.sandbox_created = true;
        result.sandbox_id.clone_from(&sandbox.id);
        if !pod.spec.host_network {
            pod_ip = sandbox.ip.clone().filter(|ip| !ip.is_empty());
        }
        result.new_sandbox = Some(sandbox);
    }
    Some((sandbox_config, pod_ip))
}

/// The sandbox's CRI config: the host's DNS, the pod's cgroup parent (its pod cgroup
/// tracked from here on when there are pod cgroups), the node's facts.
fn sandbox_config_for<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    pod: &api::Pod,
    attempt: u32,
    pod_name: &str,
) -> SandboxConfig {
    let seccomp_root = env.paths.root_dir.join("seccomp");
    let host_dns = read_host_dns(&env.paths.resolv_conf, pod_name);
    let cgroup_parent = match &env.node.pod_cgroups {
        Some(cg) => {
            cg.track(pod);
            cg.sandbox_parent(pod)
        }
        None => env.node.cgroup_parent.clone(),
    };
    cri_config::sandbox_config(
        pod,
        attempt,
        SandboxParams {
            pod_log_dir: &env.paths.pod_log_dir,
            cgroup_parent: &cgroup_parent,
            host_dns: host_dns.as_ref(),
            node: env.node_params(&seccomp_root),
        },
    )
}

/// The pod's user-namespace range (kubelet: `usernsForPod`); for a new sandbox only when
/// the runtime's `handler` reports user-namespace support.
async fn pod_userns<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    pod: &api::Pod,
    new_sandbox: bool,
    handler: &str,
) -> Result<IdMapping, UsernsError> {
    if new_sandbox {
        let health = env
            .runtime
            .status()
            .await
            .map_err(UsernsError::RuntimeStatus)?;
        userns::runtime_supports(health.userns_handlers.as_deref(), handler)?;
    }
    userns::allocate(&env.paths.root_dir, &pod.metadata.uid)
}

/// A new sandbox: the pod cgroup first (kubelet: `SyncPod` — UpdateQOSCgroups and
/// podContainerManager.EnsureExists; a failure fails the sync, retried with back-off),
/// then `RunPodSandbox` and its status. `None` when either failed (recorded in `result`).
async fn create_new_sandbox<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    pod: &api::Pod,
    actions: &PodActions,
    sandbox_config: &SandboxConfig,
    pod_name: &str,
    result: &mut PodSyncResult,
) -> Option<Sandbox> {
    log::info!(
        "pod {pod_name}: creating sandbox (attempt {})",
        actions.attempt
    );
    warn_loopback_dns(pod, sandbox_config, &env.paths.resolv_conf);
    if let Some(cg) = &env.node.pod_cgroups
        && let Err(e) = cg.ensure(pod).await
    {
        let message = format!("unable to ensure pod container exists: {e}");
        let event = message.clone();
        let failure = SandboxFailure {
            message,
            network_not_ready: false,
        };
        let reason = crate::cm::FAILED_CREATE_POD_CONTAINER;
        sandbox_failed(
            &env.managers.recorder,
            pod,
            actions,
            pod_name,
            result,
            reason,
            event,
            failure,
        );
        return None;
    }
    match create_sandbox(env, pod, sandbox_config).await {
        Ok(sandbox) => Some(sandbox),
        Err(failure) => {
            // kubelet: SyncPod — events.FailedCreatePodSandBox.
            let event = if failure.message.starts_with("Failed to create pod sandbox") {
                failure.message.clone()
            } else {
                format!("Failed to create pod sandbox: {}", failure.message)
            };
            let reason = recorder::FAILED_CREATE_POD_SANDBOX;
            sandbox_failed(
                &env.managers.recorder,
                pod,
                actions,
                pod_name,
                result,
                reason,
                event,
                failure,
            );
            None
        }
    }
}

/// The sandbox step failed: log it, record the `reason` event, keep the failure, and every
/// container the plan wanted started waits as ContainerCreating.
#[allow(clippy::too_many_arguments)]
fn sandbox_failed(
    recorder: &Recorder,
    pod: &api::Pod,
    actions: &PodActions,
    pod_name: &str,
    result: &mut PodSyncResult,
    reason: &str,
    event: String,
    failure: SandboxFailure,
) {
    log::warn!("pod {pod_name}: {}", failure.message);
    recorder.warning(pod, None, reason, event);
    result.sandbox_error = Some(failure);
    result.containers = all_creating(pod, actions, "");
}

/// Read and parse the host resolv.conf. An unreadable file is logged, not a failed pod:
/// the sandbox request then carries no DNS config and the runtime uses the host's.
pub(super) fn read_host_dns(path: &Path, pod_name: &str) -> Option<DnsConfig> {
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
pub(super) fn warn_loopback_dns(pod: &api::Pod, sandbox: &SandboxConfig, resolv_conf: &Path) {
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
pub(super) async fn create_sandbox<R: Runtime, C: Clock>(
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
pub(super) fn is_network_not_ready(err: &CriError) -> bool {
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
