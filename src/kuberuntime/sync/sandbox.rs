//! The pod sandbox (kubelet: `createPodSandbox`): its DNS from the host's resolv.conf,
//! the loopback-DNS warning, a network that is not ready yet.

use std::path::Path;

use crate::api;
use crate::clock::Clock;
use crate::cri::{CriError, DnsConfig, Runtime, Sandbox, SandboxConfig};
use crate::kuberuntime::cri_config;
use crate::volume::mounts;

use super::*;

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
