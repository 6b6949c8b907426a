//! The agent over a temporary directory, and what the fake runtime runs.

use std::path::Path;
use std::time::Duration;

use picolet::{AgentConfig, ContainerState, DaemonConfig, fakes::FakeRuntime};

/// The agent's configuration for node `node`, everything under `dir`: `manifests/`,
/// `root/`, `logs/`, `resolv.conf`; a 20 s file re-list, a 60 s resync.
pub fn agent_config(dir: &Path, node: &str) -> DaemonConfig {
    let agent = AgentConfig {
        node_name: node.into(),
        sync_frequency: Duration::from_secs(60),
        root_dir: dir.join("root"),
        pod_log_dir: dir.join("logs"),
        resolv_conf: dir.join("resolv.conf"),
        cgroup_parent: String::new(),
        allocatable: Default::default(),
        seccomp_default: false,
        max_pods: 110,
        sysctls: Default::default(),
        watchdog_device: None,
        node_labels: picolet::node_labels(node, &Default::default()),
        gc_policy: Default::default(),
        node_ip: None,
        eviction: None,
        shutdown_groups: Vec::new(),
        swap: Default::default(),
        tmpfs_noswap: false,
    };
    DaemonConfig {
        agent,
        pod_manifest_path: dir.join("manifests"),
        file_check_frequency: Duration::from_secs(20),
        pod_cgroups: None,
        log_rotation: None,
        image_gc: None,
    }
}

/// A temporary directory with `manifests/` in it, and the agent's configuration for node
/// `node` over it (see [`agent_config`]).
pub fn agent_dir(node: &str) -> (tempfile::TempDir, DaemonConfig) {
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

/// The agent over the fake runtime with a pod-event receiver (the statuses it reports, as
/// the apiserver's status syncer would get them). Must run inside a `LocalSet`.
pub struct EventedAgent {
    pub shutdown: tokio_util::sync::CancellationToken,
    pub handle: tokio::task::JoinHandle<()>,
    pub events: picolet::PodEventReceiver,
    /// The events the agent recorded.
    pub recorder: picolet::Recorder,
}

pub fn start_with_events(
    rt: &FakeRuntime,
    clock: picolet::TokioClock,
    cfg: &DaemonConfig,
) -> EventedAgent {
    let (tx, events) = picolet::pod_events();
    let recorder = picolet::new_recorder(&cfg.agent.node_name, clock);
    let ext = picolet::Extensions {
        events: Some(tx),
        recorder: Some(recorder.clone()),
        ..Default::default()
    };
    let shutdown = tokio_util::sync::CancellationToken::new();
    let handle = tokio::task::spawn_local(picolet::run_daemon_with_extensions(
        rt.clone(),
        clock,
        cfg.clone(),
        ext,
        shutdown.clone(),
        std::rc::Rc::new(tokio::sync::Notify::new()),
    ));
    EventedAgent {
        shutdown,
        handle,
        events,
        recorder,
    }
}

impl EventedAgent {
    /// (type, reason, message) of the recorded events of pod `pod`, oldest first.
    pub fn pod_events(&self, pod: &str) -> Vec<(String, String, String, u32)> {
        self.recorder
            .list()
            .iter()
            .filter(|e| e.involved.name == pod)
            .map(|e| {
                (
                    e.type_.as_str().to_string(),
                    e.reason.clone(),
                    e.message.clone(),
                    e.count,
                )
            })
            .collect()
    }

    /// The newest status reported per pod name since the last call.
    pub fn statuses(
        &mut self,
    ) -> std::collections::HashMap<String, std::sync::Arc<picolet::api::PodStatus>> {
        let mut last = std::collections::HashMap::new();
        for ev in self.events.try_recv() {
            if let picolet::PodEvent::Status { pod, status } = ev {
                last.insert(pod.metadata.name.clone(), status);
            }
        }
        last
    }

    pub async fn stop(self) {
        self.shutdown.cancel();
        self.handle.await.expect("agent task");
    }
}

/// The in-memory runtime with the test image, on a paused clock.
pub fn fake_runtime() -> (picolet::TokioClock, FakeRuntime) {
    let clock = picolet::TokioClock::new(1_800_000_000_000_000_000);
    let rt = FakeRuntime::new(clock);
    rt.add_image(super::IMAGE);
    (clock, rt)
}

/// The whole agent (`daemon::run_with`) on the current `LocalSet`.
pub struct Agent {
    pub shutdown: tokio_util::sync::CancellationToken,
    pub handle: tokio::task::JoinHandle<()>,
}

pub fn start(rt: &FakeRuntime, clock: picolet::TokioClock, cfg: &DaemonConfig) -> Agent {
    start_with_clock(rt, clock, cfg)
}

/// [`start`] with any clock (e.g. `JumpClock`).
pub fn start_with_clock<C: picolet::Clock>(
    rt: &FakeRuntime,
    clock: C,
    cfg: &DaemonConfig,
) -> Agent {
    let shutdown = tokio_util::sync::CancellationToken::new();
    let handle = tokio::task::spawn_local(picolet::run_daemon_with(
        rt.clone(),
        clock,
        cfg.clone(),
        shutdown.clone(),
        std::rc::Rc::new(tokio::sync::Notify::new()),
    ));
    Agent { shutdown, handle }
}

impl Agent {
    pub async fn stop(self) {
        self.shutdown.cancel();
        self.handle.await.expect("agent task");
    }
}

/// Virtual seconds go by in 100 ms steps (paused time: every timer due in between fires).
pub async fn settle(secs: u64) {
    for _ in 0..secs * 10 {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
