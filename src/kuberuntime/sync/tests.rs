//! `sync.rs` against the in-memory `FakeRuntime`, with paused tokio time driving both the
//! fake's timestamps and the back-off clock.

use std::path::PathBuf;
use std::time::Duration;

use super::*;
use crate::api::{self, RestartPolicy};
use crate::clock::TokioClock;
use crate::cri::NamespaceMode;
use crate::cri::fake::{Call, FakeRuntime, Method};
use crate::cri::{ContainerInfo, ContainerState, ImageUser, SandboxConfig, SandboxState};
use crate::kuberuntime::gc;
use crate::kuberuntime::{container_mounts, labels};

const T0: i64 = 1_700_000_000 * 1_000_000_000;

struct Harness {
    env: SyncEnv<FakeRuntime, TokioClock>,
    rt: FakeRuntime,
    backoffs: PodBackoffs,
    _tmp: tempfile::TempDir,
}

fn harness() -> Harness {
    let tmp = tempfile::tempdir().unwrap();
    let resolv = tmp.path().join("resolv.conf");
    std::fs::write(
        &resolv,
        "nameserver 192.168.1.1\nsearch lan\noptions ndots:2\n",
    )
    .unwrap();
    let clock = TokioClock::new(T0);
    let rt = FakeRuntime::new(clock);
    let env = SyncEnv::new(
        rt.clone(),
        clock,
        SyncPaths {
            root_dir: tmp.path().join("root"),
            pod_log_dir: tmp.path().join("logs"),
            resolv_conf: resolv,
        },
        node_facts(),
        Managers {
            recorder: crate::recorder::Recorder::new("node1", 100).with_clock(clock),
            config: Default::default(),
            credential_paths: vec![tmp.path().join("config.json")],
            tmpfs: std::sync::Arc::new(crate::volume::mounts::FakeTmpfs::default()),
            csi: Default::default(),
            #[cfg(feature = "device-plugins")]
            devices: None,
        },
    );
    Harness {
        env,
        rt,
        backoffs: PodBackoffs::default(),
        _tmp: tmp,
    }
}

/// The test node: 1 GiB, 4 CPUs, no swap, no IP, no pod cgroups.
fn node_facts() -> NodeFacts {
    NodeFacts {
        memory_capacity: 1 << 30,
        cpu_capacity_milli: 4000,
        swap: Default::default(),
        host_ip: String::new(),
        seccomp_default: false,
        cgroup_parent: String::new(),
        pod_cgroups: None,
    }
}

impl Harness {
    async fn status(&self, uid: &str) -> PodRuntimeStatus {
        get_pod_status(&self.rt, uid).await.unwrap()
    }

    /// Read the runtime, sync, and return the result with the state-changing calls the
    /// sync made.
    async fn sync(&mut self, pod: &api::Pod) -> (PodSyncResult, Vec<Call>) {
        let st = self.status(pod.uid()).await;
        self.rt.take_calls();
        let r = sync_pod(&self.env, pod, &st, &mut self.backoffs, &Default::default()).await;
        (r, self.rt.take_mutations())
    }

    fn log_dir(&self, pod: &api::Pod) -> PathBuf {
        self.env.paths.pod_log_dir.join(format!(
            "{}_{}_{}",
            pod.metadata.namespace, pod.metadata.name, pod.metadata.uid
        ))
    }
}

fn container(name: &str, image: &str) -> api::Container {
    api::Container {
        name: name.into(),
        image: image.into(),
        ..Default::default()
    }
}

fn pod(policy: RestartPolicy) -> api::Pod {
    let mut p = api::Pod::default();
    p.metadata.name = "web-node1".into();
    p.metadata.namespace = "default".into();
    p.metadata.uid = "uid-1".into();
    p.metadata.labels.insert("app".into(), "web".into());
    p.spec.node_name = "node1".into();
    p.spec.restart_policy = Some(policy);
    p.spec.termination_grace_period_seconds = Some(30);
    p.spec.containers = vec![
        container("web", "nginx:1.25"),
        container("helper", "busybox:1.36"),
    ];
    p
}

fn one_container_pod(image: &str) -> api::Pod {
    let mut p = pod(RestartPolicy::Always);
    p.spec.containers = vec![container("web", image)];
    p
}

fn started(r: &PodSyncResult, name: &str) -> (String, u32) {
    match &r.container(name).unwrap().outcome {
        StartOutcome::Started { id, restart_count } => (id.clone(), *restart_count),
        other => panic!("{name} not started: {other:?}"),
    }
}

fn create(sandbox_id: &str, name: &str, attempt: u32) -> Call {
    Call::CreateContainer {
        sandbox_id: sandbox_id.into(),
        name: name.into(),
        attempt,
    }
}

async fn advance(secs: u64) {
    tokio::time::advance(Duration::from_secs(secs)).await;
}

#[tokio::test(start_paused = true)]
async fn two_container_pod_starts_in_order_with_labels() {
    let mut h = harness();
    h.rt.add_image("nginx:1.25");
    h.rt.add_image("busybox:1.36");
    let p = pod(RestartPolicy::Always);
    let st = h.status("uid-1").await;
    h.rt.take_calls();
    let r = sync_pod(&h.env, &p, &st, &mut h.backoffs, &Default::default()).await;
    assert_eq!(
        h.rt.take_calls(),
        vec![
            Call::RunPodSandbox {
                name: "web-node1".into(),
                attempt: 0
            },
            Call::PodSandboxStatus("s1".into()),
            Call::ImageStatus("nginx:1.25".into()),
            create("s1", "web", 0),
            Call::StartContainer("c2".into()),
            Call::ImageStatus("busybox:1.36".into()),
            create("s1", "helper", 0),
            Call::StartContainer("c3".into()),
        ]
    );
    assert!(!r.is_error());
    assert!(r.sandbox_created);
    assert_eq!(r.sandbox_id, "s1");
    assert_eq!(r.sandbox_ip.as_deref(), Some("10.88.0.2"));
    assert_eq!(started(&r, "web"), ("c2".into(), 0));
    assert_eq!(started(&r, "helper"), ("c3".into(), 0));

    let sb = h.rt.sandbox_config("s1").unwrap();
    assert_eq!(sb.hostname, "web-node1");
    assert_eq!(sb.labels, labels::sandbox_labels(&p));
    assert_eq!(sb.log_directory, h.log_dir(&p).to_string_lossy());
    assert!(h.log_dir(&p).is_dir());
    assert_eq!(
        sb.dns.as_ref().map(|d| d.servers.clone()),
        Some(vec!["192.168.1.1".to_string()])
    );
    assert_eq!(sb.namespace_options.network, NamespaceMode::Pod);

    let web = h.rt.container_config("c2").unwrap();
    assert_eq!(
        web.labels,
        labels::container_labels(&p, &p.spec.containers[0])
    );
    assert_eq!(
        web.annotations,
        labels::container_annotations(&p, &p.spec.containers[0], 0)
    );
    assert_eq!(web.log_path, "web/0.log");
    assert!(h.log_dir(&p).join("web").is_dir());
    // containers carry the pod's namespace options: PID private to the container
    assert_eq!(web.security.namespace_options.pid, NamespaceMode::Container);
    assert_eq!(web.security.namespace_options.network, NamespaceMode::Pod);
    // the termination log is mounted
    assert!(
        web.mounts
            .iter()
            .any(|m| m.container_path == "/dev/termination-log")
    );

    // in sync: nothing to do
    let (r, calls) = h.sync(&p).await;
    assert_eq!(calls, vec![]);
    assert!(r.actions.is_noop());
    assert!(r.containers.is_empty());
}

#[tokio::test(start_paused = true)]
async fn exited_container_restarts_with_next_attempt_under_always() {
    let mut h = harness();
    h.rt.add_image("nginx:1.25");
    h.rt.add_image("busybox:1.36");
    let p = pod(RestartPolicy::Always);
    h.sync(&p).await;
    advance(5).await;
    h.rt.exit_container("c2", 0);
    let (r, calls) = h.sync(&p).await;
    assert_eq!(
        calls,
        vec![create("s1", "web", 1), Call::StartContainer("c4".into())]
    );
    assert_eq!(started(&r, "web"), ("c4".into(), 1));
    let cfg = h.rt.container_config("c4").unwrap();
    assert_eq!(cfg.log_path, "web/1.log");
    assert_eq!(
        cfg.annotations[labels::CONTAINER_RESTART_COUNT_ANNOTATION],
        "1"
    );
}

#[tokio::test(start_paused = true)]
async fn crash_loop_back_off_waits_then_doubles() {
    let mut h = harness();
    h.rt.add_image("nginx:1.25");
    let p = one_container_pod("nginx:1.25");
    h.sync(&p).await; // c2
    advance(1).await;
    h.rt.exit_container("c2", 1);
    let (r, _) = h.sync(&p).await; // first crash: restart at once
    let (id, n) = started(&r, "web");
    assert_eq!(n, 1);

    // crashes again 2 s later: back-off 10 s
    advance(2).await;
    h.rt.exit_container(&id, 1);
    advance(1).await;
    let (r, calls) = h.sync(&p).await;
    assert_eq!(calls, vec![], "no start while backing off");
    assert_eq!(
        r.waiting("web"),
        Some((
            WaitingReason::CrashLoopBackOff,
            "back-off 10s restarting failed container=web pod=web-node1_default(uid-1)"
        ))
    );
    assert!(!r.is_error(), "a back-off is not a sync error");
    assert_eq!(r.requeue_after, Some(Duration::from_secs(9)));

    // still inside the window
    advance(8).await;
    let (r, _) = h.sync(&p).await;
    assert_eq!(
        r.waiting("web").map(|w| w.0),
        Some(WaitingReason::CrashLoopBackOff)
    );

    // window over: restart
    advance(1).await;
    let (r, calls) = h.sync(&p).await;
    assert_eq!(calls.len(), 2, "{calls:?}");
    let (id, n) = started(&r, "web");
    assert_eq!(n, 2);

    // next crash: 20 s
    h.rt.exit_container(&id, 2);
    let (r, _) = h.sync(&p).await;
    let (_, msg) = r.waiting("web").unwrap();
    assert!(
        msg.starts_with("back-off 20s restarting failed container=web"),
        "{msg}"
    );
}

#[tokio::test(start_paused = true)]
async fn on_failure_and_never_policies() {
    // OnFailure: exit 0 stays down, exit 1 restarts
    let mut h = harness();
    h.rt.add_image("nginx:1.25");
    h.rt.add_image("busybox:1.36");
    let p = pod(RestartPolicy::OnFailure);
    h.sync(&p).await; // web c2, helper c3
    h.rt.exit_container("c2", 0);
    let (r, calls) = h.sync(&p).await;
    assert_eq!(calls, vec![]);
    assert!(r.containers.is_empty());
    h.rt.exit_container("c3", 1);
    let (_, calls) = h.sync(&p).await;
    assert_eq!(
        calls,
        vec![create("s1", "helper", 1), Call::StartContainer("c4".into())]
    );

    // Never: no restart; when all are down the sandbox is stopped
    let mut h = harness();
    h.rt.add_image("nginx:1.25");
    h.rt.add_image("busybox:1.36");
    let p = pod(RestartPolicy::Never);
    h.sync(&p).await;
    h.rt.exit_container("c2", 1);
    let (_, calls) = h.sync(&p).await;
    assert_eq!(calls, vec![]);
    h.rt.exit_container("c3", 0);
    let (r, calls) = h.sync(&p).await;
    assert!(r.actions.kill_pod && !r.actions.create_sandbox);
    assert_eq!(calls, vec![Call::StopPodSandbox("s1".into())]);
    // and it is not recreated afterwards
    let (_, calls) = h.sync(&p).await;
    assert_eq!(calls, vec![Call::StopPodSandbox("s1".into())]);
}

#[tokio::test(start_paused = true)]
async fn image_pull_policies() {
    // IfNotPresent with the image present: no pull
    let mut h = harness();
    h.rt.add_image("nginx:1.25");
    let p = one_container_pod("nginx:1.25");
    let (r, calls) = h.sync(&p).await;
    assert!(!calls.iter().any(|c| matches!(c, Call::PullImage(_))));
    started(&r, "web");

    // IfNotPresent, absent: pulled once, then created
    let mut h = harness();
    let (r, calls) = h.sync(&p).await;
    assert_eq!(
        calls[1..],
        [
            Call::PullImage("nginx:1.25".into()),
            create("s1", "web", 0),
            Call::StartContainer("c2".into())
        ]
    );
    started(&r, "web");

    // no tag → Always → pulled even though present, with the default tag
    let mut h = harness();
    h.rt.add_image("busybox:latest");
    let p = one_container_pod("busybox");
    let (r, calls) = h.sync(&p).await;
    assert!(calls.contains(&Call::PullImage("busybox:latest".into())));
    started(&r, "web");

    // Never, absent
    let mut h = harness();
    let mut p = one_container_pod("nginx:1.25");
    p.spec.containers[0].image_pull_policy = Some(api::PullPolicy::Never);
    let (r, _) = h.sync(&p).await;
    assert_eq!(
        r.waiting("web"),
        Some((
            WaitingReason::ErrImageNeverPull,
            "Container image \"nginx:1.25\" is not present with pull policy of Never"
        ))
    );
    assert!(r.is_error());

    // invalid name
    let mut h = harness();
    let p = one_container_pod("Not A/valid image");
    let (r, calls) = h.sync(&p).await;
    assert_eq!(
        r.waiting("web").map(|w| w.0),
        Some(WaitingReason::InvalidImageName)
    );
    assert!(
        !calls
            .iter()
            .any(|c| matches!(c, Call::CreateContainer { .. }))
    );
}

#[tokio::test(start_paused = true)]
async fn pull_failure_then_back_off_then_retry() {
    let mut h = harness();
    let p = one_container_pod("nginx:1.25");
    h.rt.fail_once(
        Method::PullImage,
        FakeRuntime::rpc_error(Method::PullImage, "registry unreachable"),
    );
    let (r, _) = h.sync(&p).await;
    let (reason, msg) = r.waiting("web").unwrap();
    assert_eq!(reason, WaitingReason::ErrImagePull);
    assert!(msg.contains("registry unreachable"), "{msg}");
    assert!(r.is_error());
    assert_eq!(r.requeue_after, Some(Duration::from_secs(10)));

    advance(3).await;
    let (r, calls) = h.sync(&p).await;
    assert_eq!(
        r.waiting("web"),
        Some((
            WaitingReason::ImagePullBackOff,
            "Back-off pulling image \"nginx:1.25\""
        ))
    );
    assert!(!calls.iter().any(|c| matches!(c, Call::PullImage(_))));
    assert_eq!(r.requeue_after, Some(Duration::from_secs(7)));
    assert!(!r.is_error());

    advance(7).await;
    let (r, calls) = h.sync(&p).await;
    assert!(calls.contains(&Call::PullImage("nginx:1.25".into())));
    started(&r, "web");
}

#[tokio::test(start_paused = true)]
async fn kill_pod_stops_containers_concurrently_then_sandbox() {
    for (grace, timeout) in [(Some(30), 30), (Some(0), 2), (Some(1), 2), (None, 30)] {
        let mut h = harness();
        h.rt.add_image("nginx:1.25");
        h.rt.add_image("busybox:1.36");
        let mut p = pod(RestartPolicy::Always);
        p.spec.termination_grace_period_seconds = grace;
        h.sync(&p).await;
        let st = h.status("uid-1").await;
        h.rt.take_calls();
        h.rt.set_stop_delay(Duration::from_secs(20));
        let start = tokio::time::Instant::now();
        kill_pod(&h.env, Some(&p), &st, None).await.unwrap();
        // Both stops run at once; each ends at the stop timeout if the container is slower.
        assert_eq!(
            start.elapsed(),
            Duration::from_secs(20.min(timeout as u64)),
            "both stops ran at once"
        );
        assert_eq!(
            h.rt.take_mutations(),
            vec![
                Call::StopContainer {
                    id: "c3".into(),
                    timeout
                },
                Call::StopContainer {
                    id: "c2".into(),
                    timeout
                },
                Call::StopPodSandbox("s1".into()),
            ],
            "grace {grace:?}"
        );
        assert!(h.rt.running("web").is_empty());
    }
}

/// kubelet: `terminationOrdering` — the regular containers first (their preStop hooks can
/// still reach the sidecars), then the sidecars, the last-declared first, each with what is
/// left of its grace period. Conformance: "Container Lifecycle Hook ... should execute
/// prestop http hook properly" (the hook goes through a sidecar of the same pod).
#[tokio::test(start_paused = true)]
async fn kill_pod_stops_sidecars_after_the_regular_containers() {
    let mut h = harness();
    h.rt.add_image("nginx:1.25");
    h.rt.add_image("busybox:1.36");
    let mut p = one_container_pod("nginx:1.25");
    let sidecar = |name: &str| api::Container {
        restart_policy: Some(RestartPolicy::Always),
        ..container(name, "busybox:1.36")
    };
    p.spec.init_containers = vec![sidecar("proxy"), sidecar("log")];
    for _ in 0..4 {
        h.sync(&p).await;
    }
    for name in ["proxy", "log", "web"] {
        assert_eq!(h.rt.running(name).len(), 1, "{name} runs");
    }
    let st = h.status("uid-1").await;
    let name_of = |id: &str| {
        st.containers
            .iter()
            .find(|c| c.id == id)
            .map(|c| c.name.clone())
            .unwrap()
    };
    h.rt.take_calls();
    h.rt.set_stop_delay(Duration::from_secs(5));
    let start = tokio::time::Instant::now();
    kill_pod(&h.env, Some(&p), &st, None).await.unwrap();
    assert_eq!(
        start.elapsed(),
        Duration::from_secs(15),
        "one after the other"
    );
    let stops: Vec<(String, i64)> =
        h.rt.take_mutations()
            .into_iter()
            .filter_map(|c| match c {
                Call::StopContainer { id, timeout } => Some((name_of(&id), timeout)),
                _ => None,
            })
            .collect();
    assert_eq!(
        stops,
        vec![
            ("web".to_string(), 30),
            ("log".to_string(), 25),
            ("proxy".to_string(), 20),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn kill_pod_override_and_not_found() {
    let mut h = harness();
    h.rt.add_image("nginx:1.25");
    let p = one_container_pod("nginx:1.25");
    h.sync(&p).await;
    let st = h.status("uid-1").await;
    h.rt.take_calls();
    // the container vanished in the meantime: NotFound is fine
    h.rt.fail_once(
        Method::StopContainer,
        crate::cri::CriError::NotFound {
            method: "StopContainer",
            message: "gone".into(),
        },
    );
    kill_pod(&h.env, Some(&p), &st, Some(5)).await.unwrap();
    assert_eq!(
        h.rt.take_mutations(),
        vec![
            Call::StopContainer {
                id: "c2".into(),
                timeout: 5
            },
            Call::StopPodSandbox("s1".into())
        ]
    );
    // other errors are reported, and the sandbox is still stopped
    h.rt.fail_once(
        Method::StopContainer,
        FakeRuntime::rpc_error(Method::StopContainer, "stuck"),
    );
    let err = kill_pod(&h.env, Some(&p), &st, None).await.unwrap_err();
    assert!(err.to_string().contains("stuck"), "{err}");
    assert!(
        h.rt.take_mutations()
            .contains(&Call::StopPodSandbox("s1".into()))
    );
}

#[tokio::test(start_paused = true)]
async fn adoption_after_restart_kills_from_labels_alone() {
    let mut h = harness();
    h.rt.add_image("nginx:1.25");
    h.rt.add_image("busybox:1.36");
    let mut p = pod(RestartPolicy::Always);
    p.spec.termination_grace_period_seconds = Some(45);
    h.sync(&p).await;

    // "picolet restarted": a new environment over the same runtime, no pod spec
    let env = SyncEnv::new(
        h.rt.clone(),
        h.env.clock,
        h.env.paths.clone(),
        node_facts(),
        Managers {
            tmpfs: std::sync::Arc::new(crate::volume::mounts::FakeTmpfs::default()),
            csi: Default::default(),
            ..h.env.managers.clone()
        },
    );
    h.rt.take_calls();
    let pods = list_runtime_pods(&h.rt).await.unwrap();
    assert_eq!(
        h.rt.take_calls(),
        vec![Call::ListPodSandboxes, Call::ListContainers],
        "the relist is two calls"
    );
    assert_eq!(pods.len(), 1);
    let st = &pods[0];
    assert_eq!(
        (st.uid.as_str(), st.name.as_str(), st.namespace.as_str()),
        ("uid-1", "web-node1", "default")
    );
    kill_pod(&env, None, st, None).await.unwrap();
    assert_eq!(
        h.rt.take_mutations(),
        vec![
            Call::StopContainer {
                id: "c3".into(),
                timeout: 45
            },
            Call::StopContainer {
                id: "c2".into(),
                timeout: 45
            },
            Call::StopPodSandbox("s1".into()),
        ]
    );
    // housekeeping's kill with grace 1 → 2 at the CRI
    let mut h = harness();
    h.rt.add_image("nginx:1.25");
    h.sync(&one_container_pod("nginx:1.25")).await;
    let pods = list_runtime_pods(&h.rt).await.unwrap();
    h.rt.take_calls();
    kill_pod(&h.env, None, &pods[0], Some(1)).await.unwrap();
    assert_eq!(
        h.rt.take_mutations()[0],
        Call::StopContainer {
            id: "c2".into(),
            timeout: 2
        }
    );
}

#[tokio::test(start_paused = true)]
async fn host_network_pod() {
    let mut h = harness();
    h.env.node.host_ip = "192.0.2.9".into();
    h.rt.add_image("nginx:1.25");
    let mut p = one_container_pod("nginx:1.25");
    p.spec.host_network = true;
    p.spec.containers[0].env = vec![api::EnvVar {
        name: "POD_IP".into(),
        value: None,
        value_from: Some(serde_json::json!({"fieldRef": {"fieldPath": "status.podIP"}})),
    }];
    let (r, _) = h.sync(&p).await;
    let sb = h.rt.sandbox_config("s1").unwrap();
    assert_eq!(sb.hostname, "");
    assert_eq!(sb.namespace_options.network, NamespaceMode::Node);
    assert_eq!(sb.dns.unwrap().searches, vec!["lan".to_string()]);
    assert_eq!(r.sandbox_ip, None);
    let c = h.rt.container_config("c2").unwrap();
    assert_eq!(c.security.namespace_options.network, NamespaceMode::Node);
    // status.podIP of a host-network pod is the node's IP (as the kubelet reports it). Conformance:
    // "Downward API should provide host IP and pod IP as an env var if pod uses host network".
    assert!(
        c.envs
            .contains(&("POD_IP".to_string(), "192.0.2.9".to_string())),
        "{:?}",
        c.envs
    );
    assert_eq!(c.security.namespace_options.pid, NamespaceMode::Container);
    // a host-network sandbox without an IP is fine: nothing to do next time
    let (r, calls) = h.sync(&p).await;
    assert_eq!(calls, vec![]);
    assert!(r.actions.is_noop());
}

#[tokio::test(start_paused = true)]
async fn shared_pid_namespace() {
    let mut h = harness();
    h.rt.add_image("nginx:1.25");
    let mut p = one_container_pod("nginx:1.25");
    p.spec.share_process_namespace = Some(true);
    h.sync(&p).await;
    let c = h.rt.container_config("c2").unwrap();
    assert_eq!(c.security.namespace_options.pid, NamespaceMode::Pod);
    assert_eq!(
        h.rt.sandbox_config("s1").unwrap().namespace_options.pid,
        NamespaceMode::Pod
    );
}

/// kubelet: SyncPod's ephemeral containers — started in the running pod's sandbox once,
/// the target's PID namespace (CRI TARGET) when named, never again after they exit; an
/// unknown target waits as CreateContainerConfigError.
#[tokio::test(start_paused = true)]
async fn ephemeral_containers_start_once_in_the_targets_pid_namespace() {
    let mut h = harness();
    h.rt.add_image("nginx:1.25");
    h.rt.add_image("busybox:1.36");
    let mut p = one_container_pod("nginx:1.25");
    h.sync(&p).await;
    let web = h.status(p.uid()).await.containers[0].id.clone();
    p.spec.ephemeral_containers = vec![
        api::Container {
            target_container_name: Some("web".into()),
            ..container("dbg", "busybox:1.36")
        },
        api::Container {
            target_container_name: Some("nope".into()),
            ..container("lost", "busybox:1.36")
        },
        container("plain", "busybox:1.36"),
    ];
    let (r, calls) = h.sync(&p).await;
    let (dbg, _) = started(&r, "dbg");
    assert_eq!(calls[0], create("s1", "dbg", 0), "{calls:?}");
    let cfg = h.rt.container_config(&dbg).unwrap();
    assert_eq!(cfg.security.pid_target, web);
    let (plain, _) = started(&r, "plain");
    let cfg = h.rt.container_config(&plain).unwrap();
    assert_eq!(cfg.security.pid_target, "");
    assert_eq!(cfg.security.namespace_options.pid, NamespaceMode::Container);
    assert_eq!(
        r.waiting("lost"),
        Some((
            WaitingReason::CreateContainerConfigError,
            "unable to find target container nope"
        ))
    );
    // Exited: not started again; "lost" is tried again (no instance of it yet).
    h.rt.exit_container(&dbg, 0);
    let (r, _) = h.sync(&p).await;
    assert!(r.container("dbg").is_none() && r.container("plain").is_none());
    assert!(r.waiting("lost").is_some());
}

#[tokio::test(start_paused = true)]
async fn hash_change_kills_and_restarts() {
    let mut h = harness();
    h.rt.add_image("nginx:1.25");
    h.rt.add_image("nginx:1.26");
    h.rt.add_image("busybox:1.36");
    let mut p = pod(RestartPolicy::Always);
    h.sync(&p).await;
    p.spec.containers[0].image = "nginx:1.26".into();
    let (r, calls) = h.sync(&p).await;
    assert_eq!(
        calls,
        vec![
            Call::StopContainer {
                id: "c2".into(),
                timeout: 30
            },
            create("s1", "web", 1),
            Call::StartContainer("c4".into()),
        ]
    );
    assert_eq!(started(&r, "web"), ("c4".into(), 1));
    assert_eq!(
        r.actions.containers_to_kill["c2"].message,
        "Container web definition changed, will be restarted"
    );
    assert_eq!(h.rt.running("helper"), vec!["c3".to_string()]);
}

#[tokio::test(start_paused = true)]
async fn sandbox_death_recreates_with_next_attempt() {
    let mut h = harness();
    h.rt.add_image("nginx:1.25");
    let p = one_container_pod("nginx:1.25");
    h.sync(&p).await;
    h.rt.set_sandbox_state("s1", SandboxState::NotReady);
    let (r, calls) = h.sync(&p).await;
    assert_eq!(
        calls,
        vec![
            Call::StopContainer {
                id: "c2".into(),
                timeout: 30
            },
            Call::StopPodSandbox("s1".into()),
            Call::RunPodSandbox {
                name: "web-node1".into(),
                attempt: 1
            },
            create("s3", "web", 1),
            Call::StartContainer("c4".into()),
        ]
    );
    assert_eq!(r.sandbox_id, "s3");
    assert_eq!(r.sandbox_ip.as_deref(), Some("10.88.0.3"));
    assert_eq!(h.rt.sandbox_config("s3").unwrap().attempt, 1);
}

#[tokio::test(start_paused = true)]
async fn sandbox_failure_network_not_ready() {
    let mut h = harness();
    h.rt.add_image("nginx:1.25");
    let p = one_container_pod("nginx:1.25");
    h.rt.fail_once(
        Method::RunPodSandbox,
        FakeRuntime::rpc_error(
            Method::RunPodSandbox,
            "failed to setup network for sandbox \"x\": cni plugin not initialized",
        ),
    );
    let (r, calls) = h.sync(&p).await;
    assert_eq!(
        calls,
        vec![Call::RunPodSandbox {
            name: "web-node1".into(),
            attempt: 0
        }]
    );
    assert!(r.network_not_ready());
    assert!(r.is_error());
    assert_eq!(
        r.waiting("web").map(|w| w.0),
        Some(WaitingReason::ContainerCreating)
    );
    // another failure is not "network not ready"
    h.rt.fail_once(
        Method::RunPodSandbox,
        FakeRuntime::rpc_error(Method::RunPodSandbox, "disk full"),
    );
    let (r, _) = h.sync(&p).await;
    assert!(r.sandbox_error.is_some() && !r.network_not_ready());
    // then it works
    let (r, _) = h.sync(&p).await;
    started(&r, "web");
}

#[tokio::test(start_paused = true)]
async fn init_containers_run_in_order() {
    let mut h = harness();
    h.rt.add_image("busybox:1.36");
    h.rt.add_image("nginx:1.25");
    let mut p = one_container_pod("nginx:1.25");
    p.spec.init_containers = vec![
        container("init0", "busybox:1.36"),
        container("init1", "busybox:1.36"),
    ];
    let (r, calls) = h.sync(&p).await;
    assert_eq!(
        calls[1..],
        [create("s1", "init0", 0), Call::StartContainer("c2".into())]
    );
    assert!(r.container("web").is_none());
    // still running: wait
    let (_, calls) = h.sync(&p).await;
    assert_eq!(calls, vec![]);
    // fails: restarted (Always)
    h.rt.exit_container("c2", 1);
    let (_, calls) = h.sync(&p).await;
    assert_eq!(
        calls,
        vec![create("s1", "init0", 1), Call::StartContainer("c3".into())]
    );
    // succeeds: the older failed instance is pruned, the next init container starts
    h.rt.exit_container("c3", 0);
    let (_, calls) = h.sync(&p).await;
    assert_eq!(
        calls,
        vec![
            Call::RemoveContainer("c2".into()),
            create("s1", "init1", 0),
            Call::StartContainer("c4".into())
        ]
    );
    h.rt.exit_container("c4", 0);
    let (r, calls) = h.sync(&p).await;
    assert_eq!(
        calls,
        vec![create("s1", "web", 0), Call::StartContainer("c5".into())]
    );
    started(&r, "web");
}

#[tokio::test(start_paused = true)]
async fn init_failure_under_never_stops_the_pod() {
    let mut h = harness();
    h.rt.add_image("busybox:1.36");
    let mut p = one_container_pod("busybox:1.36");
    p.spec.restart_policy = Some(RestartPolicy::Never);
    p.spec.init_containers = vec![container("init0", "busybox:1.36")];
    h.sync(&p).await;
    h.rt.exit_container("c2", 3);
    let (r, calls) = h.sync(&p).await;
    assert!(r.actions.kill_pod);
    assert_eq!(calls, vec![Call::StopPodSandbox("s1".into())]);
}

#[tokio::test(start_paused = true)]
async fn container_errors_are_per_container() {
    let mut h = harness();
    h.rt.add_image("nginx:1.25");
    h.rt.add_image("busybox:1.36");
    let mut p = pod(RestartPolicy::Always);
    p.spec.containers[0].env = vec![api::EnvVar {
        name: "PASSWORD".into(),
        value: None,
        value_from: Some(serde_json::json!({"secretKeyRef": {"name": "s", "key": "k"}})),
    }];
    let (r, _) = h.sync(&p).await;
    assert_eq!(
        r.waiting("web"),
        Some((
            WaitingReason::CreateContainerConfigError,
            "secret \"s\" not found"
        ))
    );
    started(&r, "helper");
    assert!(r.is_error());

    // CreateContainer and StartContainer failures
    let mut h = harness();
    h.rt.add_image("nginx:1.25");
    h.rt.add_image("busybox:1.36");
    let p = pod(RestartPolicy::Always);
    h.rt.fail_once(
        Method::CreateContainer,
        FakeRuntime::rpc_error(Method::CreateContainer, "no space"),
    );
    h.rt.fail_once(
        Method::StartContainer,
        FakeRuntime::rpc_error(Method::StartContainer, "exec format error"),
    );
    let (r, _) = h.sync(&p).await;
    assert_eq!(
        r.waiting("web").map(|w| w.0),
        Some(WaitingReason::CreateContainerError)
    );
    let (reason, msg) = r.waiting("helper").unwrap();
    assert_eq!(reason, WaitingReason::RunContainerError);
    assert!(msg.contains("exec format error"));
    // the helper was created but not started: next sync starts a fresh instance
    let (r, _) = h.sync(&p).await;
    started(&r, "web");
    assert_eq!(started(&r, "helper").1, 1);
}

#[tokio::test(start_paused = true)]
async fn volumes_and_downward_env() {
    let mut h = harness();
    h.rt.add_image("nginx:1.25");
    let mut p = one_container_pod("nginx:1.25");
    p.spec.volumes = vec![api::Volume {
        name: "cache".into(),
        empty_dir: Some(api::EmptyDirVolumeSource::default()),
        ..Default::default()
    }];
    p.spec.containers[0].volume_mounts = vec![api::VolumeMount {
        name: "cache".into(),
        mount_path: "/cache".into(),
        ..Default::default()
    }];
    p.spec.containers[0].env = vec![api::EnvVar {
        name: "POD_IP".into(),
        value: None,
        value_from: Some(serde_json::json!({"fieldRef": {"fieldPath": "status.podIP"}})),
    }];
    h.sync(&p).await;
    let c = h.rt.container_config("c2").unwrap();
    let dir = mounts::empty_dir_path(&h.env.paths.root_dir, "uid-1", "cache");
    assert!(dir.is_dir());
    assert_eq!(c.mounts[0].host_path, dir.to_string_lossy());
    assert_eq!(c.mounts[0].container_path, "/cache");
    assert_eq!(
        c.envs,
        vec![("POD_IP".to_string(), "10.88.0.2".to_string())]
    );
}

#[tokio::test(start_paused = true)]
async fn restart_count_continues_after_lost_runtime_state() {
    let mut h = harness();
    h.rt.add_image("nginx:1.25");
    let p = one_container_pod("nginx:1.25");
    let dir = h.log_dir(&p).join("web");
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["0.log", "3.log.20260101-000000", "notes.txt", "x.log"] {
        std::fs::write(dir.join(f), b"").unwrap();
    }
    let (r, _) = h.sync(&p).await;
    assert_eq!(started(&r, "web").1, 4);
    assert_eq!(restart_count_from_log_dir(&h.log_dir(&p).join("none")), 0);
}

#[tokio::test(start_paused = true)]
async fn cleanup_after_termination() {
    let mut h = harness();
    h.rt.add_image("nginx:1.25");
    let mut p = one_container_pod("nginx:1.25");
    p.spec.volumes = vec![api::Volume {
        name: "cache".into(),
        empty_dir: Some(api::EmptyDirVolumeSource::default()),
        ..Default::default()
    }];
    h.sync(&p).await;
    let st = h.status("uid-1").await;
    // refuses while running
    let err = cleanup_pod(&h.env, &st, "uid-1").await.unwrap_err();
    assert!(matches!(err, SyncError::StillRunning { .. }), "{err}");
    kill_pod(&h.env, Some(&p), &st, None).await.unwrap();
    let st = h.status("uid-1").await;
    h.rt.take_calls();
    cleanup_pod(&h.env, &st, "uid-1").await.unwrap();
    // Dead containers and sandboxes are container GC's (the status of a finished pod must
    // survive a picolet restart): cleanup removes only the pod directory.
    assert_eq!(h.rt.take_mutations(), vec![]);
    assert!(!mounts::pod_dir(&h.env.paths.root_dir, "uid-1").exists());
    assert!(h.log_dir(&p).is_dir(), "logs are kept");
    assert_eq!(h.rt.containers().len(), 1);
    // idempotent
    cleanup_pod(&h.env, &h.status("uid-1").await, "uid-1")
        .await
        .unwrap();

    // Once no source wants the pod, a GC pass removes it all: container, its log file,
    // sandbox, and the pod log directory (once it has been idle a GC period).
    let log_file = h.log_dir(&p).join("web/0.log");
    std::fs::create_dir_all(log_file.parent().unwrap()).unwrap();
    std::fs::write(&log_file, b"x\n").unwrap();
    let listed = list_runtime_pods(&h.rt).await.unwrap();
    // (the fake stamps each new object a nanosecond later than the last)
    let now = h.env.clock.now() + 1_000_000_000;
    let plan = gc::plan(&listed, |_| true, now, &gc::GcPolicy::default());
    assert_eq!(plan.emptied, vec!["uid-1".to_string()], "{plan:?}");
    // (directory times are real, the test clock is not: any time after them will do)
    let far_future = i64::MAX;
    let report = gc::execute(
        &h.rt,
        &plan,
        &h.env.paths.pod_log_dir,
        Default::default(),
        far_future,
        true,
    )
    .await;
    assert_eq!(
        (report.containers, report.sandboxes, report.log_dirs),
        (1, 1, 1),
        "{report:?}"
    );
    assert!(report.errors.is_empty(), "{report:?}");
    assert!(h.rt.sandboxes().is_empty() && h.rt.containers().is_empty());
    assert!(!h.log_dir(&p).exists());
}

#[tokio::test(start_paused = true)]
async fn gc_keeps_newest_dead_instance_per_name() {
    let mut h = harness();
    h.rt.add_image("nginx:1.25");
    let p = one_container_pod("nginx:1.25");
    h.sync(&p).await; // c2
    h.rt.exit_container("c2", 1);
    h.sync(&p).await; // c3
    h.rt.exit_container("c3", 1);
    advance(60).await; // past the crash-loop back-off
    h.sync(&p).await; // c4
    h.rt.take_calls();
    let listed = list_runtime_pods(&h.rt).await.unwrap();
    let plan = gc::plan(
        &listed,
        |_| false,
        h.env.clock.now(),
        &gc::GcPolicy::default(),
    );
    let report = gc::execute(
        &h.rt,
        &plan,
        &h.env.paths.pod_log_dir,
        Default::default(),
        0,
        false,
    )
    .await;
    assert_eq!(report.containers, 1, "{report:?}");
    assert_eq!(
        h.rt.take_mutations(),
        vec![Call::RemoveContainer("c2".into())]
    );
    let ids: Vec<String> = h.rt.containers().into_iter().map(|c| c.id).collect();
    assert_eq!(ids, vec!["c3", "c4"]);
}

#[tokio::test(start_paused = true)]
async fn pod_status_and_relist() {
    let mut h = harness();
    h.rt.add_image("nginx:1.25");
    let p = one_container_pod("nginx:1.25");
    h.sync(&p).await;
    advance(2).await;
    h.rt.exit_container("c2", 7);
    let mut other = one_container_pod("nginx:1.25");
    other.metadata.uid = "uid-2".into();
    other.metadata.name = "other".into();
    h.sync(&other).await;
    // something not made by picolet
    h.rt.run_pod_sandbox(&SandboxConfig {
        name: "foreign".into(),
        ..Default::default()
    })
    .await
    .unwrap();

    let st = h.status("uid-1").await;
    assert_eq!(st.name, "web-node1");
    assert_eq!(st.sandboxes.len(), 1);
    assert_eq!(st.sandboxes[0].ip.as_deref(), Some("10.88.0.2"));
    assert_eq!(st.sandboxes[0].network, Some(NamespaceMode::Pod));
    assert_eq!(st.containers.len(), 1);
    let c = &st.containers[0];
    assert_eq!((c.state, c.exit_code), (ContainerState::Exited, 7));
    assert_eq!(c.finished_at, T0 + 2_000_000_000);
    assert_eq!(c.sandbox_id, "s1");

    let pods = list_runtime_pods(&h.rt).await.unwrap();
    let uids: Vec<&str> = pods.iter().map(|p| p.uid.as_str()).collect();
    assert_eq!(
        uids,
        vec!["uid-2", "uid-1"],
        "newest first, foreign skipped"
    );
    assert_eq!(pods[1].containers[0].id, "c2");
    assert_eq!(pods[0].name, "other");

    // a runtime error is returned as is
    h.rt.fail_once(
        Method::ListPodSandbox,
        FakeRuntime::rpc_error(Method::ListPodSandbox, "down"),
    );
    assert!(get_pod_status(&h.rt, "uid-1").await.is_err());
}

#[tokio::test(start_paused = true)]
async fn unreadable_resolv_conf_leaves_dns_to_the_runtime() {
    let mut h = harness();
    h.env.paths.resolv_conf = h.env.paths.root_dir.join("missing-resolv.conf");
    h.rt.add_image("nginx:1.25");
    let p = one_container_pod("nginx:1.25");
    let (r, _) = h.sync(&p).await;
    started(&r, "web");
    assert_eq!(h.rt.sandbox_config("s1").unwrap().dns, None);
}

#[tokio::test(start_paused = true)]
async fn pulls_carry_the_nodes_registry_credentials() {
    let mut h = harness();
    let cfg = &h.env.managers.credential_paths[0];
    std::fs::write(
        cfg,
        r#"{"auths": {"registry.local:5000": {"auth": "cGk6czNjcmV0"}}}"#,
    )
    .unwrap();
    let p = one_container_pod("registry.local:5000/app:1");
    h.sync(&p).await;
    assert_eq!(
        h.rt.pull_auths(),
        vec![(
            "registry.local:5000/app:1".to_string(),
            Some("pi".to_string())
        )]
    );

    // A registry that answers 401 without credentials: the message says where they go.
    let q = one_container_pod("quay.io/acme/x:1");
    h.rt.fail_once(
        Method::PullImage,
        FakeRuntime::rpc_error(Method::PullImage, "failed to authorize: 401 Unauthorized"),
    );
    let (r, _) = h.sync(&q).await;
    let (reason, msg) = r.waiting("web").unwrap();
    assert_eq!(reason, WaitingReason::ErrImagePull);
    assert!(msg.contains("no credentials for quay.io/acme/x"), "{msg}");
    assert!(msg.contains("config.json"), "{msg}");
    assert!(!msg.contains("s3cret") && !msg.contains("cGk6"), "{msg}");
}

#[tokio::test(start_paused = true)]
async fn pulls_use_the_pods_image_pull_secrets_first() {
    let h = harness();
    std::fs::write(
        &h.env.managers.credential_paths[0],
        r#"{"auths": {"registry.local:5000": {"auth": "bm9kZTpub2Rl"}}}"#,
    )
    .unwrap();
    let secret: api::Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "regcred", "namespace": "default"},
        "type": "kubernetes.io/dockerconfigjson",
        "stringData": {".dockerconfigjson": r#"{"auths": {"registry.local:5000": {"username": "pod", "password": "p"}}}"#}
    }))
    .unwrap();
    let scope = crate::config_data::Scope::Local;
    h.env.managers.config.replace_scope(
        scope,
        vec![crate::config_data::from_secret(&secret, scope, "f").unwrap()],
    );
    let mut p = one_container_pod("registry.local:5000/app:1");
    p.metadata
        .annotations
        .insert(api::ANNOTATION_CONFIG_SOURCE.into(), "file".into());
    p.spec.image_pull_secrets = vec![
        api::LocalObjectReference {
            name: "missing".into(),
        },
        api::LocalObjectReference {
            name: "regcred".into(),
        },
    ];
    let mut h = h;
    h.sync(&p).await;
    assert_eq!(
        h.rt.pull_auths(),
        vec![(
            "registry.local:5000/app:1".to_string(),
            Some("pod".to_string())
        )]
    );
}

#[test]
fn termination_messages_come_from_the_file_or_the_log_tail() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let mut p = one_container_pod("nginx:1.25");
    p.metadata.uid = "uid-t".into();
    p.spec.containers[0].termination_message_policy = Some("FallbackToLogsOnError".into());
    let dir = mounts::pod_dir(root, "uid-t")
        .join("containers")
        .join("web");
    std::fs::create_dir_all(&dir).unwrap();
    let log = root.join("0.log");
    std::fs::write(
        &log,
        "2026-12-01T10:00:00.000000000Z stdout F starting\n\
         2026-12-01T10:00:01.000000000Z stderr F panic: no config\n",
    )
    .unwrap();
    let exited = |restart: u32, code: i32| ContainerInfo {
        id: format!("c{restart}"),
        name: "web".into(),
        state: ContainerState::Exited,
        exit_code: code,
        annotations: [(
            "io.kubernetes.container.restartCount".to_string(),
            restart.to_string(),
        )]
        .into(),
        log_path: log.to_string_lossy().into_owned(),
        ..Default::default()
    };
    // instance 0 wrote its message file; instance 1 failed without one: the log tail.
    std::fs::write(
        dir.join(container_mounts::termination_log_file_id(0)),
        "bye: done",
    )
    .unwrap();
    std::fs::write(dir.join(container_mounts::termination_log_file_id(1)), "").unwrap();
    let mut st = PodRuntimeStatus {
        uid: "uid-t".into(),
        containers: vec![exited(0, 0), exited(1, 2), exited(2, 0)],
        ..Default::default()
    };
    fill_termination_messages(root, &p, &mut st);
    assert_eq!(st.containers[0].message, "bye: done");
    assert_eq!(st.containers[1].message, "starting\npanic: no config\n");
    assert_eq!(
        st.containers[2].message, "",
        "exit 0 without a file: no fallback"
    );
    // Output without a final newline is a partial line (P): no newline is added.
    // Conformance: "should report termination message from log output if
    // TerminationMessagePolicy FallbackToLogsOnError is set" (`echo -n DONE; false`).
    std::fs::write(&log, "2026-12-01T10:00:02.000000000Z stdout P DONE\n").unwrap();
    let mut st = PodRuntimeStatus {
        uid: "uid-t".into(),
        containers: vec![exited(1, 1)],
        ..Default::default()
    };
    fill_termination_messages(root, &p, &mut st);
    assert_eq!(st.containers[0].message, "DONE");
    // a big file is capped at 4 KiB
    std::fs::write(
        dir.join(container_mounts::termination_log_file_id(3)),
        "x".repeat(10_000),
    )
    .unwrap();
    let mut st = PodRuntimeStatus {
        uid: "uid-t".into(),
        containers: vec![exited(3, 1)],
        ..Default::default()
    };
    fill_termination_messages(root, &p, &mut st);
    assert_eq!(st.containers[0].message.len(), 4096);
}

// ---------------------------------------------------------------------------------------
// Events

/// (type, reason, message, fieldPath, count) of every event recorded after `since`.
fn events_since(h: &Harness, since: u64) -> Vec<(&'static str, String, String, String, u32)> {
    h.env
        .managers
        .recorder
        .since(since)
        .iter()
        .map(|e| {
            (
                e.type_.as_str(),
                e.reason.clone(),
                e.message.clone(),
                e.involved.field_path.clone().unwrap_or_default(),
                e.count,
            )
        })
        .collect()
}

fn ev(
    type_: &'static str,
    reason: &str,
    message: &str,
    field_path: &str,
    count: u32,
) -> (&'static str, String, String, String, u32) {
    (
        type_,
        reason.into(),
        message.into(),
        field_path.into(),
        count,
    )
}

#[tokio::test(start_paused = true)]
async fn a_start_records_pull_create_start_and_an_idle_resync_nothing() {
    let mut h = harness();
    let p = one_container_pod("nginx:1.25");
    h.sync(&p).await;
    let web = "spec.containers{web}";
    let got = events_since(&h, 0);
    assert_eq!(got.len(), 4, "{got:?}");
    assert_eq!(
        got[0],
        ev("Normal", "Pulling", "Pulling image \"nginx:1.25\"", web, 1)
    );
    let (ty, reason, msg, fp, _) = &got[1];
    assert_eq!(
        (*ty, reason.as_str(), fp.as_str()),
        ("Normal", "Pulled", web)
    );
    assert!(
        msg.starts_with("Successfully pulled image \"nginx:1.25\" in ")
            && msg.ends_with(" including waiting)"),
        "{msg}"
    );
    assert_eq!(
        got[2..],
        [
            ev("Normal", "Created", "Created container: web", web, 1),
            ev("Normal", "Started", "Started container web", web, 1),
        ]
    );
    let e = &h.env.managers.recorder.list()[0];
    assert_eq!(
        (
            e.involved.name.as_str(),
            e.involved.uid.as_str(),
            e.source_host.as_str()
        ),
        ("web-node1", "uid-1", "node1")
    );

    // Idle: nothing to do, nothing recorded.
    let rv = h.env.managers.recorder.resource_version();
    advance(60).await;
    h.sync(&p).await;
    assert_eq!(
        h.env.managers.recorder.resource_version(),
        rv,
        "an idle resync records nothing"
    );
}

#[tokio::test(start_paused = true)]
async fn crash_loop_back_off_is_recorded_once_per_attempt_and_aggregated() {
    let mut h = harness();
    h.rt.add_image("nginx:1.25");
    let p = one_container_pod("nginx:1.25");
    h.sync(&p).await;
    let web = "spec.containers{web}";
    assert_eq!(
        events_since(&h, 0)[0],
        ev(
            "Normal",
            "Pulled",
            "Container image \"nginx:1.25\" already present on machine",
            web,
            1
        )
    );
    advance(1).await;
    h.rt.exit_container("c2", 1);
    let (r, _) = h.sync(&p).await; // restarts at once
    let (id, _) = started(&r, "web");
    advance(2).await;
    h.rt.exit_container(&id, 1);
    let rv = h.env.managers.recorder.resource_version();
    h.sync(&p).await; // back-off
    let back_off = "Back-off restarting failed container web in pod web-node1_default(uid-1)";
    assert_eq!(
        events_since(&h, rv),
        [ev("Warning", "BackOff", back_off, web, 1)]
    );
    advance(3).await;
    h.sync(&p).await; // still backing off: the same event, count 2
    assert_eq!(
        events_since(&h, rv),
        [ev("Warning", "BackOff", back_off, web, 2)]
    );
    assert_eq!(
        h.env
            .managers
            .recorder
            .list()
            .iter()
            .filter(|e| e.reason == "BackOff")
            .count(),
        1
    );
}

#[tokio::test(start_paused = true)]
async fn pull_failures_record_failed_and_back_off() {
    let mut h = harness();
    let p = one_container_pod("nginx:1.25");
    h.rt.fail_once(
        Method::PullImage,
        FakeRuntime::rpc_error(Method::PullImage, "registry unreachable"),
    );
    h.sync(&p).await;
    let web = "spec.containers{web}";
    let got = events_since(&h, 0);
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!(got[0].1, "Pulling");
    let (ty, reason, msg, _, _) = &got[1];
    assert_eq!((*ty, reason.as_str()), ("Warning", "Failed"));
    assert!(
        msg.starts_with("Failed to pull image \"nginx:1.25\": ")
            && msg.contains("registry unreachable"),
        "{msg}"
    );
    assert_eq!(
        got[2],
        ev("Warning", "Failed", "Error: ErrImagePull", web, 1)
    );

    let rv = h.env.managers.recorder.resource_version();
    advance(3).await;
    h.sync(&p).await;
    assert_eq!(
        events_since(&h, rv),
        [
            ev(
                "Normal",
                "BackOff",
                "Back-off pulling image \"nginx:1.25\"",
                web,
                1
            ),
            ev("Warning", "Failed", "Error: ImagePullBackOff", web, 1),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn kills_and_a_changed_sandbox_are_recorded() {
    let mut h = harness();
    h.rt.add_image("nginx:1.25");
    let p = one_container_pod("nginx:1.25");
    h.sync(&p).await;
    let web = "spec.containers{web}";
    h.rt.set_sandbox_state("s1", SandboxState::NotReady);
    let rv = h.env.managers.recorder.resource_version();
    h.sync(&p).await;
    let got = events_since(&h, rv);
    assert_eq!(
        got[..2],
        [
            ev(
                "Normal",
                "SandboxChanged",
                "Pod sandbox changed, it will be killed and re-created.",
                "",
                1
            ),
            ev("Normal", "Killing", "Stopping container web", web, 1),
        ],
        "{got:?}"
    );
    assert_eq!(got.last().map(|e| e.1.as_str()), Some("Started"));

    // Pod termination: one Killing per running container.
    let st = h.status("uid-1").await;
    let rv = h.env.managers.recorder.resource_version();
    kill_pod(&h.env, Some(&p), &st, None).await.unwrap();
    // The same event as before: aggregated (count 2), moved to the newest end.
    assert_eq!(
        events_since(&h, rv),
        [ev("Normal", "Killing", "Stopping container web", web, 2)]
    );
    // Without the pod (after a restart) nothing is recorded: there is no object to name.
    let rv = h.env.managers.recorder.resource_version();
    kill_pod(&h.env, None, &st, None).await.unwrap();
    assert_eq!(h.env.managers.recorder.resource_version(), rv);
}

#[tokio::test(start_paused = true)]
async fn a_failed_pre_stop_hook_is_recorded_without_its_output() {
    let mut h = harness();
    h.rt.add_image("nginx:1.25");
    let mut p = one_container_pod("nginx:1.25");
    p.spec.containers[0].lifecycle = Some(Box::new(api::Lifecycle {
        pre_stop: Some(api::LifecycleHandler {
            exec: Some(api::ExecAction {
                command: vec!["drain".into()],
            }),
            ..Default::default()
        }),
        ..Default::default()
    }));
    h.sync(&p).await;
    h.rt.set_exec_result("web", 1, "secret token abc");
    let st = h.status("uid-1").await;
    let rv = h.env.managers.recorder.resource_version();
    kill_pod(&h.env, Some(&p), &st, None).await.unwrap();
    let web = "spec.containers{web}";
    assert_eq!(
        events_since(&h, rv),
        [
            ev("Normal", "Killing", "Stopping container web", web, 1),
            ev("Warning", "FailedPreStopHook", "PreStopHook failed", web, 1),
        ]
    );
}

/// Sync, then `refresh_after_sync`; returns the result, the refreshed view and the calls the
/// refresh made.
async fn sync_and_refresh(
    h: &mut Harness,
    pod: &api::Pod,
) -> (PodSyncResult, Option<PodRuntimeStatus>, Vec<Call>) {
    let st = h.status(pod.uid()).await;
    let r = sync_pod(&h.env, pod, &st, &mut h.backoffs, &Default::default()).await;
    h.rt.take_calls();
    let after = refresh_after_sync(&h.rt, &st, &r).await.unwrap();
    (r, after, h.rt.take_calls())
}

#[tokio::test(start_paused = true)]
async fn refresh_after_a_start_reads_only_the_started_containers() {
    let mut h = harness();
    h.rt.add_image("nginx:1.25");
    h.rt.add_image("busybox:1.36");
    let p = pod(RestartPolicy::Always);
    // A fresh pod: the new sandbox comes from the sync's own PodSandboxStatus.
    let (r, after, calls) = sync_and_refresh(&mut h, &p).await;
    assert!(
        r.containers
            .iter()
            .all(|c| matches!(c.outcome, StartOutcome::Started { .. }))
    );
    assert_eq!(
        calls,
        vec![
            Call::ContainerStatus("c2".into()),
            Call::ContainerStatus("c3".into())
        ]
    );
    assert_eq!(after, Some(h.status("uid-1").await));

    // A restart after an exit: the old instance stays as it was read, the new one is added.
    advance(5).await;
    h.rt.exit_container("c2", 0);
    let (r, after, calls) = sync_and_refresh(&mut h, &p).await;
    assert!(
        r.containers
            .iter()
            .all(|c| matches!(c.outcome, StartOutcome::Started { .. }))
    );
    assert_eq!(calls, vec![Call::ContainerStatus("c4".into())]);
    assert_eq!(after, Some(h.status("uid-1").await));
}

#[tokio::test(start_paused = true)]
async fn refresh_after_a_kill_or_a_failed_start_reads_the_pod_whole() {
    let mut h = harness();
    h.rt.add_image("nginx:1.25");
    h.rt.add_image("nginx:1.26");
    let mut p = one_container_pod("nginx:1.25");
    sync_and_refresh(&mut h, &p).await;

    // A kill: the stopped container's exit details are only in the runtime.
    p.spec.containers[0].image = "nginx:1.26".into();
    let (r, after, calls) = sync_and_refresh(&mut h, &p).await;
    assert!(!r.actions.containers_to_kill.is_empty());
    assert_eq!((after, calls), (None, vec![]));

    // A sandbox that died: the old one is stopped, a new one made.
    h.rt.set_sandbox_state("s1", SandboxState::NotReady);
    let (r, after, calls) = sync_and_refresh(&mut h, &p).await;
    assert!(r.actions.kill_pod && r.sandbox_created);
    assert_eq!((after, calls), (None, vec![]));

    // A container created but not started is left behind (after the crash-loop back-off).
    let (id, _) = started(&r, "web");
    h.rt.exit_container(&id, 1);
    advance(300).await;
    h.rt.fail_once(
        Method::StartContainer,
        FakeRuntime::rpc_error(Method::StartContainer, "exec format error"),
    );
    let (r, after, _) = sync_and_refresh(&mut h, &p).await;
    assert_eq!(
        r.waiting("web").map(|w| w.0),
        Some(WaitingReason::RunContainerError)
    );
    assert_eq!(after, None);
}

#[tokio::test(start_paused = true)]
async fn refresh_of_a_container_gone_already_reads_the_pod_whole() {
    let mut h = harness();
    h.rt.add_image("nginx:1.25");
    let p = one_container_pod("nginx:1.25");
    let st = h.status("uid-1").await;
    let r = sync_pod(&h.env, &p, &st, &mut h.backoffs, &Default::default()).await;
    // Removed by someone else (crictl rm -f) before the read.
    h.rt.remove_container("c2").await.unwrap();
    assert!(r.is_modelled(&st));
    assert_eq!(refresh_after_sync(&h.rt, &st, &r).await.unwrap(), None);
}

/// kubelet: verifyRunAsNonRoot against the image's user — a numeric non-root USER runs, an
/// image without USER (root) or with a name waits as CreateContainerConfigError with
/// upstream's message; the user is read from the present image's status, or once more
/// after a pull.
#[tokio::test(start_paused = true)]
async fn run_as_non_root_checks_the_image_user() {
    let non_root = |image: &str| {
        let mut p = one_container_pod(image);
        p.spec.security_context = Some(api::PodSecurityContext {
            run_as_non_root: Some(true),
            ..Default::default()
        });
        p
    };
    let who = "web-node1_default(uid-1)";
    for (user, want) in [
        (ImageUser::Uid(1000), None),
        (
            ImageUser::Unset,
            Some(format!(
                "container has runAsNonRoot and image will run as root (pod: {who:?}, container: web)"
            )),
        ),
        (
            ImageUser::Name("app".into()),
            Some(format!(
                "container has runAsNonRoot and image has non-numeric user (app), cannot verify user is non-root (pod: {who:?}, container: web)"
            )),
        ),
    ] {
        let mut h = harness();
        h.rt.add_image("app:1");
        h.rt.set_image_user("app:1", user.clone());
        let (r, _) = h.sync(&non_root("app:1")).await;
        match want {
            None => {
                started(&r, "web");
            }
            Some(message) => assert_eq!(
                r.waiting("web"),
                Some((WaitingReason::CreateContainerConfigError, message.as_str())),
                "{user:?}"
            ),
        }
    }
    // Pulled (absent before): the user is read after the pull, and decides.
    let mut h = harness();
    let (r, _) = h.sync(&non_root("app:1")).await;
    assert_eq!(
        r.waiting("web").map(|w| w.0),
        Some(WaitingReason::CreateContainerConfigError),
        "the pulled image has no USER: root"
    );
}

// ----- image volumes (KEP-4639) --------------------------------------------------------

fn image_volume_pod() -> api::Pod {
    let mut p = one_container_pod("busybox:1.36");
    p.spec.volumes = vec![api::Volume {
        name: "models".into(),
        image: Some(api::ImageVolumeSource {
            reference: "example.com/models:v2".into(),
            pull_policy: Some(api::PullPolicy::IfNotPresent),
        }),
        ..Default::default()
    }];
    p.spec.containers[0].volume_mounts = vec![api::VolumeMount {
        name: "models".into(),
        mount_path: "/models".into(),
        sub_path: Some("weights".into()),
        ..Default::default()
    }];
    p
}

#[tokio::test(start_paused = true)]
async fn an_image_volume_is_pulled_and_mounted_by_the_runtime() {
    let mut h = harness();
    h.rt.set_version("containerd", "v2.4.2");
    h.rt.add_image("busybox:1.36");
    let p = image_volume_pod();
    let (r, calls) = h.sync(&p).await;
    let (id, _) = started(&r, "web");
    assert!(
        calls
            .iter()
            .any(|c| matches!(c, Call::PullImage(i) if i == "example.com/models:v2")),
        "{calls:?}"
    );
    let cfg = h.rt.container_config(&id).unwrap();
    let m = cfg
        .mounts
        .iter()
        .find(|m| m.container_path == "/models")
        .expect("the image volume's mount");
    assert!(m.host_path.is_empty(), "{m:?}");
    assert!(m.readonly);
    assert_eq!(m.image_sub_path, "weights");
    let pulled =
        h.rt.images()
            .into_iter()
            .find(|i| i.repo_tags.iter().any(|t| t == "example.com/models:v2"))
            .expect("pulled");
    assert_eq!(m.image, pulled.id);
    assert_eq!(m.image_reference, "example.com/models:v2");

    // The next start (a restart) finds it present: no pull (IfNotPresent).
    h.rt.exit_container(&id, 1);
    advance(11).await;
    let (r, calls) = h.sync(&p).await;
    started(&r, "web");
    assert!(
        !calls.iter().any(|c| matches!(c, Call::PullImage(_))),
        "{calls:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn an_image_volume_that_cannot_be_pulled_holds_its_container_with_back_off() {
    let mut h = harness();
    h.rt.set_version("cri-o", "1.36.3");
    h.rt.add_image("busybox:1.36");
    h.rt.fail_once(
        Method::PullImage,
        FakeRuntime::rpc_error(Method::PullImage, "registry unreachable"),
    );
    let p = image_volume_pod();
    let (r, calls) = h.sync(&p).await;
    let (reason, msg) = r.waiting("web").unwrap();
    assert_eq!(reason, WaitingReason::ErrImagePull);
    assert!(
        msg.starts_with("image volume \"models\": ") && msg.contains("registry unreachable"),
        "{msg}"
    );
    assert!(
        !calls
            .iter()
            .any(|c| matches!(c, Call::CreateContainer { .. }))
    );
    advance(3).await;
    let (r, _) = h.sync(&p).await;
    assert_eq!(
        r.waiting("web"),
        Some((
            WaitingReason::ImagePullBackOff,
            "image volume \"models\": Back-off pulling image \"example.com/models:v2\""
        ))
    );
    advance(10).await;
    let (r, _) = h.sync(&p).await;
    started(&r, "web");
}

#[tokio::test(start_paused = true)]
async fn an_image_volume_on_a_runtime_without_them_is_refused_clearly() {
    let mut h = harness();
    h.rt.set_version("containerd", "1.6.20~ds1");
    h.rt.add_image("busybox:1.36");
    let p = image_volume_pod();
    let (r, calls) = h.sync(&p).await;
    assert_eq!(
        r.waiting("web"),
        Some((
            WaitingReason::CreateContainerConfigError,
            "image volumes need containerd >= 2.1 or CRI-O >= 1.31; the runtime is containerd 1.6.20~ds1"
        ))
    );
    assert!(
        !calls
            .iter()
            .any(|c| matches!(c, Call::PullImage(_) | Call::CreateContainer { .. })),
        "{calls:?}"
    );
}

#[test]
fn image_volume_support_by_runtime_version() {
    use super::container::image_volumes_supported as ok;
    for (name, version, want) in [
        ("containerd", "1.6.20~ds1", false),
        ("containerd", "v1.7.27", false),
        ("containerd", "v2.0.5", false),
        ("containerd", "v2.1.0", true),
        ("containerd", "2.1.0-rc.1", true),
        ("containerd", "v2.4.2", true),
        ("containerd", "v3.0.0", true),
        ("cri-o", "1.30.4", false),
        ("cri-o", "1.31.0", true),
        ("cri-o", "1.36.3", true),
        // Unknown runtimes and unreadable versions: the runtime decides.
        ("fake", "0.0.0", true),
        ("containerd", "devel", true),
    ] {
        assert_eq!(ok(name, version).is_ok(), want, "{name} {version}");
    }
}

// ----- user namespaces (hostUsers: false) -----------------------------------------------

fn health_with_userns(handlers: Option<Vec<String>>) -> crate::cri::RuntimeHealth {
    crate::cri::RuntimeHealth {
        runtime_ready: true,
        network_ready: true,
        message: String::new(),
        userns_handlers: handlers,
    }
}

#[tokio::test(start_paused = true)]
async fn a_pod_without_host_users_gets_its_range_in_sandbox_and_containers() {
    let mut h = harness();
    h.rt.set_health(health_with_userns(Some(vec![String::new()])));
    let mut p = one_container_pod("busybox:1.36");
    p.spec.host_users = Some(false);
    let (r, _) = h.sync(&p).await;
    let (id, _) = started(&r, "web");
    let want = Some(crate::cri::IdMapping {
        host_id: 65_536,
        length: 65_536,
    });
    let sandbox = h.rt.sandbox_config(&r.sandbox_id).unwrap();
    assert_eq!(sandbox.namespace_options.userns, want);
    let c = h.rt.container_config(&id).unwrap();
    assert_eq!(c.security.namespace_options.userns, want);
    assert!(h.env.paths.root_dir.join("pods/uid-1/userns").is_file());

    // A second pod gets the next range; a pod with host users gets none.
    let mut q = one_container_pod("busybox:1.36");
    q.metadata.uid = "uid-2".into();
    q.metadata.name = "other".into();
    q.spec.host_users = Some(false);
    let (r, _) = h.sync(&q).await;
    started(&r, "web");
    assert_eq!(
        h.rt.sandbox_config(&r.sandbox_id)
            .unwrap()
            .namespace_options
            .userns
            .map(|m| m.host_id),
        Some(131_072)
    );
    let mut plain = one_container_pod("busybox:1.36");
    plain.metadata.uid = "uid-3".into();
    plain.metadata.name = "plain".into();
    let (r, _) = h.sync(&plain).await;
    started(&r, "web");
    assert_eq!(
        h.rt.sandbox_config(&r.sandbox_id)
            .unwrap()
            .namespace_options
            .userns,
        None
    );
}

#[tokio::test(start_paused = true)]
async fn a_runtime_without_user_namespaces_gets_no_sandbox_for_such_a_pod() {
    let mut h = harness();
    // containerd 1.x: no runtime handlers reported at all.
    let mut p = one_container_pod("busybox:1.36");
    p.spec.host_users = Some(false);
    let (r, calls) = h.sync(&p).await;
    let e = r.sandbox_error.as_ref().expect("refused");
    assert!(
        e.message
            .starts_with("RuntimeClass handler \"\" does not support user namespaces"),
        "{}",
        e.message
    );
    assert!(
        !calls
            .iter()
            .any(|c| matches!(c, Call::RunPodSandbox { .. })),
        "{calls:?}"
    );
    // A runtime that reports handlers, but not this one's support.
    h.rt.set_health(health_with_userns(Some(vec!["edge".into()])));
    let (r, _) = h.sync(&p).await;
    assert!(r.sandbox_error.is_some());
    assert!(!h.env.paths.root_dir.join("pods/uid-1/userns").exists());
}

#[cfg(feature = "in-place-resize")]
fn sized(mut p: api::Pod, name: &str, cpu: &str, memory: &str) -> api::Pod {
    let q = |v: &str| api::Quantity::Str(v.into());
    for c in p.spec.containers.iter_mut().filter(|c| c.name == name) {
        c.resources = Some(api::ResourceRequirements {
            requests: [
                ("cpu".to_string(), q(cpu)),
                ("memory".to_string(), q(memory)),
            ]
            .into(),
            limits: [
                ("cpu".to_string(), q(cpu)),
                ("memory".to_string(), q(memory)),
            ]
            .into(),
            claims: None,
        });
    }
    p
}

#[cfg(feature = "in-place-resize")]
#[tokio::test(start_paused = true)]
async fn resize_updates_running_containers_decreases_first_and_remembers() {
    let mut h = harness();
    h.rt.add_image("nginx:1.25");
    h.rt.add_image("busybox:1.36");
    let p = sized(
        sized(pod(RestartPolicy::Always), "web", "500m", "128Mi"),
        "helper",
        "200m",
        "64Mi",
    );
    let (r, _) = h.sync(&p).await;
    let (web, _) = started(&r, "web");
    let (helper, _) = started(&r, "helper");
    std::fs::create_dir_all(h.env.paths.root_dir.join("pods/uid-1")).unwrap();

    // web shrinks, helper grows: the decrease goes first, memory before cpu.
    let new = sized(
        sized(p.clone(), "web", "250m", "96Mi"),
        "helper",
        "400m",
        "96Mi",
    );
    let (r, calls) = h.sync(&new).await;
    assert_eq!(r.resize_error, None);
    assert!(r.actions.is_noop(), "{:?}", r.actions);
    let upd = |id: &str| Call::UpdateContainerResources(id.to_string());
    assert_eq!(
        calls,
        vec![upd(&web), upd(&helper), upd(&web), upd(&helper)]
    );
    let cfg = h.rt.container_config(&web).unwrap().resources;
    assert_eq!(
        (cfg.cpu_quota, cfg.memory_limit_in_bytes),
        (25_000, 96 << 20)
    );
    let cfg = h.rt.container_config(&helper).unwrap().resources;
    assert_eq!((cfg.cpu_shares, cfg.memory_limit_in_bytes), (409, 96 << 20));

    // Done: the next sync does nothing, and says nothing is left.
    let (_, calls) = h.sync(&new).await;
    assert!(calls.is_empty(), "{calls:?}");
    let records = h.env.resized.of(&h.env.paths.root_dir, "uid-1");
    let st = h.status("uid-1").await;
    let (in_progress, actual) = crate::kuberuntime::sync::resize::report(&new, &st, &records);
    assert!(!in_progress);
    assert_eq!(
        crate::allocation::named(&actual, "web").unwrap().limits["memory"],
        api::Quantity::Str("96Mi".into())
    );
    // A new picolet reads what was applied from the pod's file.
    assert_eq!(
        crate::kuberuntime::sync::resize::Records::default().of(&h.env.paths.root_dir, "uid-1"),
        records
    );

    // A refused update stops the resize and says why; the next sync tries again.
    let newer = sized(new.clone(), "web", "300m", "96Mi");
    h.rt.fail_once(
        crate::cri::fake_containerd::Method::UpdateContainerResources,
        crate::cri::CriError::Rpc {
            method: "UpdateContainerResources",
            code: "Unknown".into(),
            message: "no".into(),
        },
    );
    let (r, _) = h.sync(&newer).await;
    assert!(
        r.resize_error
            .as_deref()
            .unwrap()
            .starts_with("container \"web\": "),
        "{r:?}"
    );
    assert!(r.is_error());
    let (r, calls) = h.sync(&newer).await;
    assert_eq!(r.resize_error, None);
    assert_eq!(calls, vec![upd(&web)]);
}
