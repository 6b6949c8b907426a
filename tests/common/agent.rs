//! The agent over a temporary directory, and what the fake runtime runs.

use std::path::Path;
use std::time::Duration;

use picolet::agent::AgentConfig;
use picolet::runtime::ContainerState;
use picolet::runtime::fake::FakeRuntime;

/// The agent's configuration for node `node`, everything under `dir`: `manifests/`,
/// `root/`, `logs/`, `resolv.conf`; a 20 s file re-list, a 60 s resync.
pub fn agent_config(dir: &Path, node: &str) -> AgentConfig {
    AgentConfig {
        node_name: node.into(),
        pod_manifest_path: dir.join("manifests"),
        file_check_frequency: Duration::from_secs(20),
        sync_frequency: Duration::from_secs(60),
        root_dir: dir.join("root"),
        pod_log_dir: dir.join("logs"),
        resolv_conf: dir.join("resolv.conf"),
        cgroup_parent: String::new(),
        seccomp_default: false,
        max_pods: 110,
        node_labels: picolet::node::node_labels(node, &Default::default()),
        gc_policy: Default::default(),
        node_ip: None,
    }
}

/// A temporary directory with `manifests/` in it, and the agent's configuration for node
/// `node` over it (see [`agent_config`]).
pub fn agent_dir(node: &str) -> (tempfile::TempDir, AgentConfig) {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = agent_config(dir.path(), node);
    std::fs::create_dir_all(&cfg.pod_manifest_path).expect("mkdir manifests");
    (dir, cfg)
}

/// The IDs of the fake runtime's running containers, sorted.
pub fn running_ids(rt: &FakeRuntime) -> Vec<String> {
    let mut ids: Vec<String> = rt
        .containers()
        .into_iter()
        .filter(|c| c.state == ContainerState::Running)
        .map(|c| c.id)
        .collect();
    ids.sort();
    ids
}
