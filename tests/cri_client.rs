//! The CRI client (`runtime::cri::CriRuntime`) against the fake CRI gRPC server
//! (`runtime::fake_cri`) over a real unix socket: every `Runtime` method round-trips, gRPC
//! failures map to the right `CriError`, deadlines hold, and the lazy channel survives a
//! runtime that starts late or restarts.
//!
//! Real time, not paused: with real socket I/O a paused clock would auto-advance past the
//! deadlines while a reply is in flight.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use picolet::{
    ContainerConfig, ContainerSecurity, ContainerState, CriError, CriRuntime, CriTimeouts,
    DnsConfig, ExecResult, ListFilter, Mount, MountPropagation, NamespaceMode, NamespaceOptions,
    PortMapping, ProfileKind, Protocol, Resources, Runtime, SandboxConfig, SandboxState,
    SecurityProfile, StreamOptions,
    fakes::{Code, CriMethod as Method, FakeCri, FakeCriHandle, Fault},
};
use tempfile::TempDir;

mod common;

use common::IMAGE;

struct Env {
    _dir: TempDir,
    fake: FakeCriHandle,
    rt: CriRuntime,
}

async fn env_with(timeouts: CriTimeouts) -> Env {
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = FakeCri::start(dir.path().join("cri.sock"))
        .await
        .expect("fake CRI starts");
    fake.preload_image(IMAGE);
    // The configs below name log paths under /var/log/pods: not to be written here.
    fake.set_write_logs(false);
    let rt = fake.runtime().expect("endpoint").with_timeouts(timeouts);
    Env {
        _dir: dir,
        fake,
        rt,
    }
}

async fn env() -> Env {
    env_with(CriTimeouts::uniform(Duration::from_secs(5))).await
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn sandbox_config(name: &str) -> SandboxConfig {
    SandboxConfig {
        name: name.to_string(),
        namespace: "default".to_string(),
        uid: format!("uid-{name}"),
        attempt: 1,
        hostname: name.to_string(),
        log_directory: format!("/var/log/pods/default_{name}_uid-{name}"),
        dns: Some(DnsConfig {
            servers: vec!["10.0.0.10".into()],
            searches: vec!["svc.cluster.local".into()],
            options: vec!["ndots:5".into()],
        }),
        port_mappings: vec![
            PortMapping {
                protocol: Protocol::Tcp,
                container_port: 80,
                host_port: 8080,
                host_ip: "0.0.0.0".into(),
            },
            PortMapping {
                protocol: Protocol::Udp,
                container_port: 53,
                host_port: 0,
                host_ip: String::new(),
            },
            PortMapping {
                protocol: Protocol::Sctp,
                container_port: 9,
                host_port: 9,
                host_ip: String::new(),
            },
        ],
        labels: map(&[
            ("io.kubernetes.pod.name", name),
            ("io.kubernetes.pod.uid", &format!("uid-{name}")),
        ]),
        annotations: map(&[("kubernetes.io/config.source", "file")]),
        cgroup_parent: "/kubepods/besteffort/poduid".to_string(),
        namespace_options: NamespaceOptions {
            network: NamespaceMode::Pod,
            pid: NamespaceMode::Container,
            ipc: NamespaceMode::Pod,
            // A pod user namespace (hostUsers: false) crosses the wire and back.
            userns: Some(picolet::IdMapping {
                host_id: 131_072,
                length: 65_536,
            }),
        },
        privileged: true,
        sysctls: map(&[("net.ipv4.ip_unprivileged_port_start", "0")]),
        seccomp: SecurityProfile {
            kind: ProfileKind::RuntimeDefault,
            localhost_ref: String::new(),
        },
        runtime_handler: "crun".into(),
    }
}

fn container_config(name: &str) -> ContainerConfig {
    ContainerConfig {
        name: name.to_string(),
        attempt: 3,
        image: IMAGE.to_string(),
        command: vec!["/bin/sh".into(), "-c".into()],
        args: vec!["sleep 1000".into()],
        working_dir: "/work".into(),
        envs: vec![("A".into(), "1".into()), ("B".into(), "two words".into())],
        mounts: vec![
            Mount {
                container_path: "/data".into(),
                host_path: "/srv/data".into(),
                readonly: true,
                propagation: MountPropagation::HostToContainer,
                ..Default::default()
            },
            Mount {
                container_path: "/shared".into(),
                host_path: "/srv/shared".into(),
                readonly: false,
                propagation: MountPropagation::Bidirectional,
                ..Default::default()
            },
            Mount {
                container_path: "/etc/hosts".into(),
                host_path: "/var/lib/picolet/hosts".into(),
                readonly: false,
                propagation: MountPropagation::Private,
                ..Default::default()
            },
            // An image volume: the runtime mounts the image (CRI Mount.image).
            Mount {
                container_path: "/models".into(),
                readonly: true,
                image: "sha256:0123abcd".into(),
                image_reference: "registry.local/models:v2".into(),
                image_sub_path: "v2/weights".into(),
                ..Default::default()
            },
        ],
        labels: map(&[
            ("io.kubernetes.container.name", name),
            ("io.kubernetes.pod.uid", "uid-web"),
        ]),
        annotations: map(&[("io.kubernetes.container.restartCount", "3")]),
        // A device plugin's: a device node and a CDI name.
        devices: vec![picolet::Device {
            container_path: "/dev/ttyUSB0".into(),
            host_path: "/dev/ttyUSB3".into(),
            permissions: "rw".into(),
        }],
        cdi_devices: vec!["vendor.com/gpu=gpu0".into()],
        log_path: format!("{name}/3.log"),
        stdin: true,
        stdin_once: true,
        tty: true,
        resources: Resources {
            cpu_period: 100_000,
            cpu_quota: 50_000,
            cpu_shares: 512,
            memory_limit_in_bytes: 64 << 20,
            oom_score_adj: 903,
            memory_swap_limit_in_bytes: 64 << 20,
            swap_max: None,
        },
        security: ContainerSecurity {
            privileged: false,
            namespace_options: NamespaceOptions {
                network: NamespaceMode::Pod,
                pid: NamespaceMode::Container,
                ipc: NamespaceMode::Pod,
                userns: None,
            },
            // An ephemeral container's target: CRI TARGET with its ID, and back.
            pid_target: "c0ffee".into(),
            run_as_user: Some(1000),
            run_as_group: Some(0),
            supplemental_groups: vec![10, 20],
            readonly_rootfs: true,
            no_new_privs: true,
            add_capabilities: vec!["NET_ADMIN".into()],
            drop_capabilities: vec!["ALL".into()],
            seccomp: SecurityProfile {
                kind: ProfileKind::Localhost,
                localhost_ref: "/var/lib/picolet/seccomp/etcd.json".into(),
            },
            apparmor: Some(SecurityProfile {
                kind: ProfileKind::RuntimeDefault,
                localhost_ref: String::new(),
            }),
        },
    }
}

/// A ready sandbox with one started container named `name`.
async fn running_container(e: &Env, pod: &str, name: &str) -> (String, String) {
    let sandbox = sandbox_config(pod);
    let sb = e.rt.run_pod_sandbox(&sandbox).await.expect("sandbox");
    let id =
        e.rt.create_container(&sb, &container_config(name), &sandbox)
            .await
            .expect("create");
    e.rt.start_container(&id).await.expect("start");
    (sb, id)
}

#[tokio::test]
async fn version_and_status() {
    let e = env().await;
    let v = e.rt.version().await.expect("version");
    assert_eq!(v.runtime_name, "fake-cri");
    assert_eq!(v.runtime_api_version, "v1");

    let h = e.rt.status().await.expect("status");
    assert!(h.runtime_ready && h.network_ready);
    assert_eq!(h.message, "");

    e.fake.set_network_ready(false);
    let h = e.rt.status().await.expect("status");
    assert!(h.runtime_ready && !h.network_ready);
    assert!(h.message.contains("NetworkReady"), "{}", h.message);
    assert!(h.message.contains("NetworkPluginNotReady"), "{}", h.message);
}

/// kubelet: the instrumented runtime service — every call counted by operation type, a
/// failed one also as an error, the relist once for the PLEG.
#[tokio::test]
async fn calls_are_counted_for_metrics() {
    let e = env().await;
    let metrics = std::sync::Arc::new(picolet::RuntimeMetrics::default());
    let rt = e.rt.clone().with_metrics(std::sync::Arc::clone(&metrics));
    rt.version().await.expect("version");
    rt.version().await.expect("version");
    let _ = rt.container_status("no-such-container").await;
    let mut digest = picolet::RelistDigest::default();
    rt.relist(&mut digest).await.expect("relist");
    assert_eq!(metrics.total("Version"), 2);
    assert_eq!(metrics.total("ContainerStatus"), 1);
    assert_eq!(metrics.total("ListPodSandbox"), 1);
    assert_eq!(metrics.total(picolet::RELIST_OPERATION), 1);
    let mut out = String::new();
    metrics.render(&mut out);
    assert!(
        out.contains("kubelet_runtime_operations_total{operation_type=\"version\"} 2\n"),
        "{out}"
    );
    assert!(
        out.contains(
            "kubelet_runtime_operations_errors_total{operation_type=\"container_status\"} 1\n"
        ),
        "{out}"
    );
    assert!(
        out.contains("kubelet_pleg_relist_duration_seconds_count 1\n"),
        "{out}"
    );
}

#[tokio::test]
async fn sandbox_lifecycle_round_trips() {
    let e = env().await;
    let config = sandbox_config("web");
    let id = e.rt.run_pod_sandbox(&config).await.expect("run");
    // Every field crossed the wire intact.
    assert_eq!(e.fake.sandbox_config(&id), Some(config.clone()));

    let s = e.rt.pod_sandbox_status(&id).await.expect("status");
    assert_eq!(s.id, id);
    assert_eq!(
        (
            s.name.as_str(),
            s.namespace.as_str(),
            s.uid.as_str(),
            s.attempt
        ),
        ("web", "default", "uid-web", 1)
    );
    assert_eq!(s.state, SandboxState::Ready);
    assert!(s.created_at > 1_600_000_000_000_000_000, "ns since epoch");
    assert_eq!(s.labels, config.labels);
    assert_eq!(s.annotations, config.annotations);
    assert!(s.ip.as_deref().is_some_and(|ip| ip.starts_with("10.88.")));
    assert_eq!(s.network, Some(NamespaceMode::Pod));

    // The list carries no network facts.
    let listed =
        e.rt.list_pod_sandboxes(&ListFilter::default())
            .await
            .expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].ip.clone(), listed[0].network), (None, None));
    assert_eq!(
        (listed[0].id.as_str(), listed[0].created_at),
        (id.as_str(), s.created_at)
    );

    e.rt.stop_pod_sandbox(&id).await.expect("stop");
    e.rt.stop_pod_sandbox(&id)
        .await
        .expect("stop is idempotent");
    let s = e.rt.pod_sandbox_status(&id).await.expect("status");
    assert_eq!(s.state, SandboxState::NotReady);

    e.rt.remove_pod_sandbox(&id).await.expect("remove");
    e.rt.remove_pod_sandbox(&id)
        .await
        .expect("remove is idempotent");
    let err = e.rt.pod_sandbox_status(&id).await.expect_err("gone");
    assert!(err.is_not_found(), "{err:?}");
    let err = e.rt.stop_pod_sandbox(&id).await.expect_err("gone");
    assert!(err.is_not_found(), "{err:?}");
}

#[tokio::test]
async fn host_network_sandbox_has_no_ip() {
    let e = env().await;
    let mut config = sandbox_config("host");
    config.hostname.clear();
    config.namespace_options.network = NamespaceMode::Node;
    let id = e.rt.run_pod_sandbox(&config).await.expect("run");
    let s = e.rt.pod_sandbox_status(&id).await.expect("status");
    assert_eq!(s.ip, None);
    assert_eq!(s.network, Some(NamespaceMode::Node));
}

#[tokio::test]
async fn list_filters_by_labels_and_id() {
    let e = env().await;
    let a = e.rt.run_pod_sandbox(&sandbox_config("a")).await.expect("a");
    let b = e.rt.run_pod_sandbox(&sandbox_config("b")).await.expect("b");
    let by_label = |name: &str| ListFilter {
        labels: map(&[("io.kubernetes.pod.name", name)]),
        sandbox_id: None,
    };
    let ids = |v: Vec<picolet::Sandbox>| v.into_iter().map(|s| s.id).collect::<Vec<_>>();
    assert_eq!(
        ids(e.rt.list_pod_sandboxes(&by_label("b")).await.expect("list")),
        vec![b.clone()]
    );
    assert!(
        e.rt.list_pod_sandboxes(&by_label("zzz"))
            .await
            .expect("list")
            .is_empty()
    );
    let by_id = ListFilter {
        labels: BTreeMap::new(),
        sandbox_id: Some(a.clone()),
    };
    assert_eq!(
        ids(e.rt.list_pod_sandboxes(&by_id).await.expect("list")),
        vec![a.clone()]
    );

    let sa = sandbox_config("a");
    let sb = sandbox_config("b");
    let ca =
        e.rt.create_container(&a, &container_config("app"), &sa)
            .await
            .expect("ca");
    let mut other = container_config("side");
    other.labels = map(&[("role", "side")]);
    let cb = e.rt.create_container(&b, &other, &sb).await.expect("cb");
    let cids = |v: Vec<picolet::ContainerInfo>| v.into_iter().map(|c| c.id).collect::<Vec<_>>();
    let in_b = ListFilter {
        labels: BTreeMap::new(),
        sandbox_id: Some(b.clone()),
    };
    assert_eq!(
        cids(e.rt.list_containers(&in_b).await.expect("list")),
        vec![cb.clone()]
    );
    let app = ListFilter {
        labels: map(&[("io.kubernetes.container.name", "app")]),
        sandbox_id: None,
    };
    assert_eq!(
        cids(e.rt.list_containers(&app).await.expect("list")),
        vec![ca]
    );
    assert_eq!(
        e.rt.list_containers(&ListFilter::default())
            .await
            .expect("list")
            .len(),
        2
    );
}

#[tokio::test]
async fn container_lifecycle_round_trips() {
    let e = env().await;
    let sandbox = sandbox_config("web");
    let sb = e.rt.run_pod_sandbox(&sandbox).await.expect("sandbox");
    let config = container_config("app");
    let id =
        e.rt.create_container(&sb, &config, &sandbox)
            .await
            .expect("create");
    // Every field (security context, resources, mounts with propagation, envs, ...) crossed
    // the wire intact.
    assert_eq!(e.fake.container_config(&id), Some(config.clone()));

    let c = e.rt.container_status(&id).await.expect("status");
    assert_eq!(c.state, ContainerState::Created);
    assert_eq!((c.name.as_str(), c.attempt), ("app", 3));
    assert_eq!(c.image, IMAGE);
    assert!(c.image_ref.starts_with("sha256:"), "{}", c.image_ref);
    assert!(c.created_at > 0);
    assert_eq!((c.started_at, c.finished_at), (0, 0));
    assert_eq!(c.labels, config.labels);
    assert_eq!(c.annotations, config.annotations);
    assert_eq!(
        c.log_path, "/var/log/pods/default_web_uid-web/app/3.log",
        "containerd reports the full log path"
    );
    assert_eq!(
        c.sandbox_id, "",
        "ContainerStatus does not carry the sandbox"
    );

    let listed =
        e.rt.list_containers(&ListFilter::default())
            .await
            .expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].sandbox_id, sb);
    assert_eq!(listed[0].image_ref, c.image_ref);
    assert_eq!(listed[0].created_at, c.created_at);

    e.rt.start_container(&id).await.expect("start");
    let c = e.rt.container_status(&id).await.expect("status");
    assert_eq!(c.state, ContainerState::Running);
    assert!(c.started_at >= c.created_at);

    let err =
        e.rt.start_container(&id)
            .await
            .expect_err("already running");
    assert!(
        matches!(&err, CriError::Rpc { code, .. } if code == "Unknown"),
        "{err:?}"
    );

    let out =
        e.rt.exec_sync(&id, &["true".to_string()], Duration::from_secs(1))
            .await
            .expect("exec");
    assert_eq!(out.exit_code, 0);
    e.fake.set_exec_result(
        "app",
        ExecResult {
            exit_code: 1,
            stdout: b"out".to_vec(),
            stderr: b"err".to_vec(),
        },
    );
    let out =
        e.rt.exec_sync(&id, &["false".to_string()], Duration::from_millis(500))
            .await
            .expect("exec");
    assert_eq!(
        (out.exit_code, out.stdout.as_slice(), out.stderr.as_slice()),
        (1, &b"out"[..], &b"err"[..])
    );

    e.rt.stop_container(&id, 10).await.expect("stop");
    let c = e.rt.container_status(&id).await.expect("status");
    assert_eq!(c.state, ContainerState::Exited);
    assert_eq!((c.exit_code, c.reason.as_str()), (0, "Completed"));
    assert!(c.finished_at >= c.started_at);
    e.rt.stop_container(&id, 10)
        .await
        .expect("stop is idempotent");

    e.rt.remove_container(&id).await.expect("remove");
    e.rt.remove_container(&id)
        .await
        .expect("remove is idempotent");
    let err = e.rt.container_status(&id).await.expect_err("gone");
    assert!(err.is_not_found(), "{err:?}");
    let err = e.rt.stop_container(&id, 1).await.expect_err("gone");
    assert!(err.is_not_found(), "{err:?}");
}

/// Exec, Attach and PortForward answer the runtime's streaming URL (for a running container,
/// a ready sandbox); the node API proxies kubectl to it.
#[tokio::test]
async fn streaming_calls_answer_a_url() {
    let e = env().await;
    let (sb, id) = running_container(&e, "web", "app").await;
    let out = StreamOptions {
        stdout: true,
        ..StreamOptions::default()
    };
    let url =
        e.rt.exec(&id, &["ls".to_string()], out)
            .await
            .expect("exec");
    assert_eq!(url, format!("{}/exec/{id}", picolet::fakes::STREAM_BASE));
    let url = e.rt.attach(&id, out).await.expect("attach");
    assert!(url.ends_with(&format!("/attach/{id}")), "{url}");
    let url = e.rt.port_forward(&sb, &[80]).await.expect("port-forward");
    assert!(url.ends_with(&format!("/portforward/{sb}")), "{url}");

    let err = e.rt.exec(&id, &[], out).await.expect_err("no command");
    assert!(
        matches!(&err, CriError::Rpc { code, .. } if code == "InvalidArgument"),
        "{err:?}"
    );
    let err = e.rt.attach("nope", out).await.expect_err("no container");
    assert!(err.is_not_found(), "{err:?}");
    e.rt.stop_container(&id, 1).await.expect("stop");
    let err =
        e.rt.exec(&id, &["ls".to_string()], out)
            .await
            .expect_err("stopped");
    assert!(matches!(err, CriError::Rpc { .. }), "{err:?}");
    e.rt.stop_pod_sandbox(&sb).await.expect("stop sandbox");
    let err = e.rt.port_forward(&sb, &[80]).await.expect_err("not ready");
    assert!(matches!(err, CriError::Rpc { .. }), "{err:?}");
}

#[tokio::test]
async fn create_refusals() {
    let e = env().await;
    let sandbox = sandbox_config("web");
    let err =
        e.rt.create_container("no-such-sandbox", &container_config("app"), &sandbox)
            .await
            .expect_err("no sandbox");
    assert!(err.is_not_found(), "{err:?}");

    let sb = e.rt.run_pod_sandbox(&sandbox).await.expect("sandbox");
    let mut missing_image = container_config("app");
    missing_image.image = "localhost/nope:1".into();
    let err =
        e.rt.create_container(&sb, &missing_image, &sandbox)
            .await
            .expect_err("no image");
    assert!(err.is_not_found(), "{err:?}");

    e.rt.create_container(&sb, &container_config("app"), &sandbox)
        .await
        .expect("first");
    let err =
        e.rt.create_container(&sb, &container_config("app"), &sandbox)
            .await
            .expect_err("same name and attempt");
    assert!(matches!(err, CriError::Rpc { .. }), "{err:?}");

    let err =
        e.rt.run_pod_sandbox(&sandbox)
            .await
            .expect_err("sandbox name reserved");
    assert!(matches!(err, CriError::Rpc { .. }), "{err:?}");

    e.rt.stop_pod_sandbox(&sb).await.expect("stop");
    let mut next = container_config("app");
    next.attempt = 4;
    let err =
        e.rt.create_container(&sb, &next, &sandbox)
            .await
            .expect_err("sandbox not ready");
    // containerd 1.6: "failed to get sandbox container task: no running task found"
    assert!(err.is_not_found(), "{err:?}");
}

#[tokio::test]
async fn stop_waits_the_grace_period_when_sigterm_is_ignored() {
    let e = env().await;
    e.fake.set_ignore_sigterm("stubborn", true);
    let (_, id) = running_container(&e, "web", "stubborn").await;
    let started = Instant::now();
    e.rt.stop_container(&id, 1).await.expect("stop");
    assert!(started.elapsed() >= Duration::from_secs(1));
    let c = e.rt.container_status(&id).await.expect("status");
    assert_eq!((c.state, c.exit_code), (ContainerState::Exited, 137));
}

#[tokio::test]
async fn container_exit_hooks() {
    let e = env().await;
    let (sb, id) = running_container(&e, "web", "app").await;
    assert!(e.fake.exit_container(&id, 3));
    assert!(
        !e.fake.exit_container(&id, 4),
        "only a running container exits"
    );
    let c = e.rt.container_status(&id).await.expect("status");
    assert_eq!(
        (c.state, c.exit_code, c.reason.as_str()),
        (ContainerState::Exited, 3, "Error")
    );

    // A container that crashes right after start.
    e.fake.set_exit_on_start("crashy", Some(2));
    let sandbox = sandbox_config("web");
    let crashy =
        e.rt.create_container(&sb, &container_config("crashy"), &sandbox)
            .await
            .expect("create");
    e.rt.start_container(&crashy).await.expect("start");
    let c = e.rt.container_status(&crashy).await.expect("status");
    assert_eq!((c.state, c.exit_code), (ContainerState::Exited, 2));
    assert!(c.started_at > 0 && c.finished_at >= c.started_at);

    let mut again = container_config("app");
    again.attempt = 4;
    let id2 =
        e.rt.create_container(&sb, &again, &sandbox)
            .await
            .expect("create");
    e.rt.start_container(&id2).await.expect("start");
    assert!(e.fake.oom_kill_container(&id2));
    let c = e.rt.container_status(&id2).await.expect("status");
    assert_eq!((c.exit_code, c.reason.as_str()), (137, "OOMKilled"));
    assert_eq!(
        e.fake.find_container("app").map(|c| c.id),
        Some(id2),
        "newest of that name"
    );
}

#[tokio::test]
async fn stopping_a_sandbox_kills_its_containers() {
    let e = env().await;
    let (sb, id) = running_container(&e, "web", "app").await;
    e.rt.stop_pod_sandbox(&sb).await.expect("stop");
    let c = e.rt.container_status(&id).await.expect("status");
    assert_eq!((c.state, c.exit_code), (ContainerState::Exited, 137));
    e.rt.remove_pod_sandbox(&sb).await.expect("remove");
    assert!(e.fake.containers().is_empty(), "removed with the sandbox");
}

#[tokio::test]
async fn images() {
    let e = env().await;
    let sandbox = sandbox_config("web");
    assert_eq!(
        e.rt.image_status("localhost/other:1")
            .await
            .expect("status"),
        None
    );
    let img =
        e.rt.image_status(IMAGE)
            .await
            .expect("status")
            .expect("present");
    assert!(img.id.starts_with("sha256:"));
    assert_eq!(img.repo_tags, vec![IMAGE.to_string()]);
    assert!(img.size > 0);

    let image_ref =
        e.rt.pull_image("busybox", None, &sandbox)
            .await
            .expect("pull");
    // Credentials travel in PullImageRequest.auth.
    let auth = picolet::RegistryAuth {
        username: "pi".into(),
        password: "s3cret".into(),
        server_address: "registry.local:5000".into(),
        ..Default::default()
    };
    e.rt.pull_image("registry.local:5000/app:1", Some(&auth), &sandbox)
        .await
        .expect("pull with credentials");
    assert_eq!(
        e.fake.pull_auths(),
        vec![
            ("busybox".to_string(), None),
            (
                "registry.local:5000/app:1".to_string(),
                Some("pi".to_string())
            ),
        ]
    );
    let pulled =
        e.rt.image_status("docker.io/library/busybox:latest")
            .await
            .expect("status")
            .expect("pulled");
    assert_eq!(pulled.id, image_ref);

    e.fake
        .fail_pulls("quay.io/x/y:1", Code::Unknown, "pull access denied");
    let err =
        e.rt.pull_image("quay.io/x/y:1", None, &sandbox)
            .await
            .expect_err("fails");
    assert_eq!(
        err,
        CriError::Rpc {
            method: "PullImage",
            code: "Unknown".into(),
            message: "pull access denied".into()
        }
    );

    assert_eq!(e.rt.list_images().await.expect("list").len(), 3);
    let fs = e.rt.image_fs_info().await.expect("fs");
    assert_eq!(fs.len(), 1);
    assert!(fs[0].used_bytes > 0 && !fs[0].mountpoint.is_empty());
    e.rt.remove_image("busybox").await.expect("remove");
    e.rt.remove_image("busybox")
        .await
        .expect("remove is idempotent");
    assert_eq!(e.rt.list_images().await.expect("list").len(), 2);
}

#[tokio::test]
async fn reopen_container_log() {
    let e = env().await;
    let (_, id) = running_container(&e, "p", "app").await;
    e.rt.reopen_container_log(&id).await.expect("reopen");
    assert_eq!(e.fake.log_reopens(), vec![id.clone()]);
    e.rt.stop_container(&id, 0).await.expect("stop");
    let err =
        e.rt.reopen_container_log(&id)
            .await
            .expect_err("not running");
    assert_eq!(
        err,
        CriError::Rpc {
            method: "ReopenContainerLog",
            code: "Unknown".into(),
            message: "container is not running".into()
        }
    );
    let err =
        e.rt.reopen_container_log("nope")
            .await
            .expect_err("unknown");
    assert!(err.is_not_found(), "{err}");
}

/// As containerd, the fake opens a container's log file at start and at a reopen, so a log
/// manager that finds the live file missing asks once, not at every pass.
#[tokio::test]
async fn start_and_reopen_open_the_log_file() {
    let e = env().await;
    e.fake.set_write_logs(true);
    let logs = tempfile::tempdir().expect("log dir");
    let mut sandbox = sandbox_config("logs");
    sandbox.log_directory = logs.path().join("default_logs_uid").display().to_string();
    let sb = e.rt.run_pod_sandbox(&sandbox).await.expect("sandbox");
    let id =
        e.rt.create_container(&sb, &container_config("app"), &sandbox)
            .await
            .expect("create");
    let log = logs.path().join("default_logs_uid/app/3.log");
    assert!(!log.exists(), "no file before the start");
    e.rt.start_container(&id).await.expect("start");
    assert!(log.is_file(), "StartContainer opened {}", log.display());
    std::fs::write(&log, "kept\n").expect("write");
    std::fs::rename(&log, log.with_extension("log.rotated")).expect("rotate");
    e.rt.reopen_container_log(&id).await.expect("reopen");
    assert_eq!(std::fs::read_to_string(&log).expect("reopened"), "");
    // A reopen of an existing file appends: nothing is truncated.
    std::fs::write(&log, "more\n").expect("write");
    e.rt.reopen_container_log(&id).await.expect("reopen");
    assert_eq!(std::fs::read_to_string(&log).expect("read"), "more\n");
}

#[tokio::test]
async fn grpc_errors_map_to_cri_errors() {
    let e = env().await;
    let cases = [
        (Code::NotFound, "NotFound"),
        (Code::Unavailable, "Unavailable"),
        (Code::DeadlineExceeded, "Timeout"),
        (Code::PermissionDenied, "Rpc"),
        (Code::Unknown, "Rpc"),
    ];
    for (code, want) in cases {
        e.fake
            .inject_times(Method::Version, Fault::fail(code, "injected"), 1);
        let err = e.rt.version().await.expect_err("injected");
        let got = match &err {
            CriError::NotFound { method, message } => {
                assert_eq!((*method, message.as_str()), ("Version", "injected"));
                "NotFound"
            }
            CriError::Unavailable { .. } => "Unavailable",
            CriError::Timeout { .. } => "Timeout",
            CriError::Rpc { code: c, .. } => {
                assert_eq!(c, &format!("{code:?}"));
                "Rpc"
            }
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(got, want, "{code:?}");
    }
    // The counted faults are used up.
    e.rt.version().await.expect("healthy again");

    e.fake
        .inject(Method::ImageStatus, Fault::fail(Code::NotFound, "no image"));
    assert_eq!(
        e.rt.image_status(IMAGE).await.expect("NotFound is absent"),
        None
    );
    e.fake.clear_faults();
    assert!(e.rt.image_status(IMAGE).await.expect("status").is_some());
}

#[tokio::test]
async fn a_call_that_never_answers_times_out() {
    let deadline = Duration::from_millis(300);
    let e = env_with(CriTimeouts::uniform(deadline)).await;
    e.fake.inject(Method::Status, Fault::Hang);
    let started = Instant::now();
    let err = e.rt.status().await.expect_err("hangs");
    let took = started.elapsed();
    assert_eq!(
        err,
        CriError::Timeout {
            method: "Status",
            timeout: deadline
        }
    );
    // (the upper bound only catches "never timed out": a loaded machine is slow)
    assert!(
        took >= deadline && took < deadline + Duration::from_secs(10),
        "{took:?}"
    );
    // Other calls on the same channel are unaffected.
    e.rt.version().await.expect("version");

    // StopContainer's deadline is the request timeout plus the grace period.
    let (_, id) = running_container(&e, "web", "app").await;
    e.fake.inject(Method::StopContainer, Fault::Hang);
    let started = Instant::now();
    let err = e.rt.stop_container(&id, 1).await.expect_err("hangs");
    let took = started.elapsed();
    let want = deadline + Duration::from_secs(1);
    assert_eq!(
        err,
        CriError::Timeout {
            method: "StopContainer",
            timeout: want
        }
    );
    assert!(
        took >= want && took < want + Duration::from_secs(10),
        "{took:?}"
    );

    // The runtime timing out the exec'd command (containerd: DeadlineExceeded) is a
    // timeout of the command, not of the call.
    e.fake.inject_times(
        Method::ExecSync,
        Fault::fail(Code::DeadlineExceeded, "timeout 1s exceeded"),
        1,
    );
    let err =
        e.rt.exec_sync(&id, &["sleep".into(), "5".into()], Duration::from_secs(1))
            .await
            .expect_err("command timed out");
    assert_eq!(
        err,
        CriError::Timeout {
            method: "ExecSync",
            timeout: Duration::from_secs(1)
        }
    );

    // A delay shorter than the deadline is just slow.
    e.fake.clear_faults();
    e.fake
        .inject(Method::Version, Fault::Delay(Duration::from_millis(100)));
    e.rt.version().await.expect("slow but in time");
}

/// `--runtime-request-timeout` (kubelet: `runtimeRequestTimeout`) reaches the client the
/// agent builds: it is the deadline of mutating calls; queries keep their 10 s.
#[tokio::test]
async fn runtime_request_timeout_flag_is_the_deadline_of_mutating_calls() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = FakeCri::start(dir.path().join("cri.sock"))
        .await
        .expect("fake CRI starts");
    let opts = picolet::Options {
        container_runtime_endpoint: fake.endpoint(),
        runtime_request_timeout: Duration::from_millis(400),
        ..Default::default()
    };
    let rt = picolet::cri_runtime(&opts).expect("client");
    assert_eq!(rt.timeouts().request, Duration::from_millis(400));
    assert_eq!(rt.timeouts().query, CriTimeouts::default().query);
    fake.inject(Method::RunPodSandbox, Fault::Hang);
    let err = rt
        .run_pod_sandbox(&sandbox_config("hung"))
        .await
        .expect_err("hangs");
    assert_eq!(
        err,
        CriError::Timeout {
            method: "RunPodSandbox",
            timeout: Duration::from_millis(400)
        }
    );
    // A query slower than the request timeout but within its own deadline answers.
    fake.inject(Method::Status, Fault::Delay(Duration::from_millis(800)));
    rt.status().await.expect("status within its own 10 s");
}

#[tokio::test]
async fn latency_applies_to_every_call() {
    let e = env().await;
    e.fake.set_latency(Duration::from_millis(50));
    let started = Instant::now();
    e.rt.version().await.expect("version");
    e.rt.status().await.expect("status");
    assert!(started.elapsed() >= Duration::from_millis(100));
}

#[tokio::test]
async fn messages_up_to_16_mib_pass() {
    let e = env().await;
    let (_, id) = running_container(&e, "web", "app").await;
    // Beyond tonic's 4 MiB default, within the kubelet's 16 MiB.
    let big = vec![b'x'; 8 << 20];
    e.fake.set_exec_result(
        &id,
        ExecResult {
            exit_code: 0,
            stdout: big.clone(),
            stderr: Vec::new(),
        },
    );
    let out =
        e.rt.exec_sync(&id, &["cat".to_string()], Duration::from_secs(1))
            .await
            .expect("exec");
    assert_eq!(out.stdout.len(), big.len());
}

#[tokio::test]
async fn call_log_records_method_and_key() {
    let e = env().await;
    let (sb, id) = running_container(&e, "web", "app").await;
    e.rt.image_status(IMAGE).await.expect("status");
    assert_eq!(
        e.fake.calls_to(Method::RunPodSandbox),
        vec!["web".to_string()]
    );
    assert_eq!(
        e.fake.calls_to(Method::CreateContainer),
        vec!["app".to_string()]
    );
    assert_eq!(e.fake.calls_to(Method::StartContainer), vec![id]);
    assert_eq!(
        e.fake.calls_to(Method::ImageStatus),
        vec![IMAGE.to_string()]
    );
    let methods: Vec<Method> = e.fake.calls().into_iter().map(|c| c.method).collect();
    assert_eq!(
        methods,
        vec![
            Method::RunPodSandbox,
            Method::CreateContainer,
            Method::StartContainer,
            Method::ImageStatus
        ]
    );
    e.fake.clear_calls();
    e.rt.stop_pod_sandbox(&sb).await.expect("stop");
    assert_eq!(e.fake.call_count(Method::StopPodSandbox), 1);
    assert_eq!(e.fake.calls().len(), 1);
}

#[tokio::test]
async fn runtime_not_running_then_started_later() {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("late.sock");
    let endpoint = format!("unix://{}", socket.display());
    let rt = CriRuntime::connect(&endpoint)
        .expect("endpoint")
        .with_timeouts(CriTimeouts::uniform(Duration::from_secs(5)));

    let started = Instant::now();
    let err = rt.version().await.expect_err("nothing listens");
    assert!(
        matches!(
            err,
            CriError::Unavailable {
                method: "Version",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(2), "fails fast");
    let err = rt.status().await.expect_err("still nothing");
    assert!(matches!(err, CriError::Unavailable { .. }), "{err:?}");

    let _fake = FakeCri::start(&socket).await.expect("start");
    let clone = rt.clone();
    rt.version().await.expect("the same client connects now");
    clone.status().await.expect("and its clones");
}

/// Retries a call a few times: right after a restart the channel may report the broken
/// connection once before it re-dials.
async fn eventually<T, F, Fut>(mut call: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, CriError>>,
{
    for _ in 0..3 {
        match call().await {
            Ok(v) => return v,
            Err(CriError::Unavailable { .. }) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
    panic!("the client did not reconnect");
}

#[tokio::test]
async fn runtime_restart_in_the_middle() {
    let mut e = env().await;
    let (sb, id) = running_container(&e, "web", "app").await;

    // containerd restarts: connections die, pods survive.
    e.fake.restart().await.expect("restart");
    let all = ListFilter::default();
    let sandboxes = eventually(|| e.rt.list_pod_sandboxes(&all)).await;
    assert_eq!(sandboxes.len(), 1);
    assert_eq!(sandboxes[0].id, sb);
    let c =
        e.rt.container_status(&id)
            .await
            .expect("status after restart");
    assert_eq!(c.state, ContainerState::Running);

    // Down for a while: calls fail as Unavailable, then work again.
    e.fake.shutdown().await;
    assert!(!e.fake.is_serving());
    let err = e.rt.version().await.expect_err("down");
    assert!(matches!(err, CriError::Unavailable { .. }), "{err:?}");
    e.fake.restart().await.expect("back");
    eventually(|| e.rt.version()).await;
}

#[tokio::test]
async fn a_call_in_flight_when_the_runtime_dies_is_unavailable() {
    let mut e = env().await;
    e.fake.inject(Method::Status, Fault::Hang);
    let rt = e.rt.clone();
    let call = tokio::spawn(async move { rt.status().await });
    // Let the call reach the server.
    for _ in 0..100 {
        if e.fake.call_count(Method::Status) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(e.fake.call_count(Method::Status), 1);
    let started = Instant::now();
    e.fake.shutdown().await;
    let err = call.await.expect("join").expect_err("connection dropped");
    assert!(matches!(err, CriError::Unavailable { .. }), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(2));
}

/// Against a real containerd (the e2e lab, `tests/e2e/lab.sh up`): skipped (and passing)
/// unless `PICOLET_E2E_ENDPOINT` names its CRI socket. Checks the facts the client relies on
/// that the fake can only imitate: field encoding, NotFound codes, ExecSync, Stop timings.
#[tokio::test]
async fn lab_smoke_against_real_containerd() {
    let Ok(endpoint) = std::env::var("PICOLET_E2E_ENDPOINT") else {
        eprintln!("skipped: PICOLET_E2E_ENDPOINT is not set");
        return;
    };
    let rt = CriRuntime::connect(&endpoint)
        .expect("endpoint")
        .with_timeouts(CriTimeouts::uniform(Duration::from_secs(30)));
    let v = rt.version().await.expect("version");
    assert_eq!(v.runtime_api_version, "v1");
    let h = rt.status().await.expect("status");
    assert!(h.runtime_ready && h.network_ready, "{h:?}");
    let img = rt.image_status(IMAGE).await.expect("image status");
    assert!(img.is_some(), "{IMAGE} must be imported in the lab");
    assert_eq!(
        rt.image_status("localhost/no-such-image:1")
            .await
            .expect("image status"),
        None
    );

    let logs = tempfile::tempdir().expect("log dir");
    let uid = format!("cri-client-{}", std::process::id());
    let mut sandbox = sandbox_config("cri-client");
    sandbox.uid = uid.clone();
    sandbox.labels = map(&[("io.kubernetes.pod.uid", &uid)]);
    sandbox.log_directory = logs.path().display().to_string();
    sandbox.cgroup_parent = String::new();
    sandbox.port_mappings.clear();
    sandbox.sysctls.clear();
    sandbox.privileged = false;
    sandbox.dns = None;
    let sb = rt.run_pod_sandbox(&sandbox).await.expect("run sandbox");
    let result = async {
        let s = rt.pod_sandbox_status(&sb).await?;
        assert_eq!(s.state, SandboxState::Ready);
        assert!(s.ip.is_some(), "a pod-network sandbox has an IP: {s:?}");
        assert_eq!(s.network, Some(NamespaceMode::Pod));
        let listed = rt
            .list_pod_sandboxes(&ListFilter {
                labels: map(&[("io.kubernetes.pod.uid", &uid)]),
                sandbox_id: None,
            })
            .await?;
        assert_eq!(listed.iter().map(|s| &s.id).collect::<Vec<_>>(), vec![&sb]);

        let mut config = container_config("app");
        config.command = vec!["/bin/sh".into(), "-c".into()];
        config.args = vec!["trap 'exit 0' TERM; echo started; sleep 3600 & wait".into()];
        config.working_dir = "/".into();
        config.mounts.clear();
        config.security = ContainerSecurity {
            namespace_options: sandbox.namespace_options,
            ..ContainerSecurity::default()
        };
        config.resources = Resources::default();
        config.stdin = false;
        config.stdin_once = false;
        config.tty = false;
        let id = rt.create_container(&sb, &config, &sandbox).await?;
        rt.start_container(&id).await?;
        let c = rt.container_status(&id).await?;
        assert_eq!(c.state, ContainerState::Running, "{c:?}");
        assert_eq!(c.log_path, format!("{}/app/3.log", sandbox.log_directory));
        let out = rt
            .exec_sync(
                &id,
                &[
                    "sh".into(),
                    "-c".into(),
                    "echo hi; echo err >&2; exit 3".into(),
                ],
                Duration::from_secs(5),
            )
            .await?;
        assert_eq!(
            (out.exit_code, out.stdout.as_slice(), out.stderr.as_slice()),
            (3, &b"hi\n"[..], &b"err\n"[..])
        );
        // containerd kills a command past its timeout and answers DeadlineExceeded.
        let err = rt
            .exec_sync(&id, &["sleep".into(), "5".into()], Duration::from_secs(1))
            .await
            .expect_err("exec timeout");
        assert_eq!(
            err,
            CriError::Timeout {
                method: "ExecSync",
                timeout: Duration::from_secs(1)
            }
        );
        rt.stop_container(&id, 2).await?;
        let c = rt.container_status(&id).await?;
        assert_eq!(
            (c.state, c.exit_code, c.reason.as_str()),
            (ContainerState::Exited, 0, "Completed")
        );
        rt.remove_container(&id).await?;
        rt.remove_container(&id).await?; // idempotent
        let err = rt.container_status(&id).await.expect_err("removed");
        assert!(err.is_not_found(), "containerd: {err:?}");
        let err = rt.stop_container(&id, 1).await.expect_err("removed");
        eprintln!("StopContainer of a removed container: {err:?}");
        Ok::<(), CriError>(())
    }
    .await;
    rt.stop_pod_sandbox(&sb).await.expect("stop sandbox");
    if result.is_ok() {
        let mut late = container_config("late");
        late.mounts.clear();
        let err = rt
            .create_container(&sb, &late, &sandbox)
            .await
            .expect_err("sandbox stopped");
        assert!(err.is_not_found(), "containerd: {err:?}");
    }
    rt.remove_pod_sandbox(&sb).await.expect("remove sandbox");
    result.expect("lifecycle");
    rt.remove_pod_sandbox(&sb)
        .await
        .expect("remove is idempotent");
    let err = rt.pod_sandbox_status(&sb).await.expect_err("removed");
    assert!(err.is_not_found(), "containerd: {err:?}");
    match rt.stop_pod_sandbox(&sb).await {
        Ok(()) => eprintln!("StopPodSandbox of a removed sandbox: Ok"),
        Err(e) => eprintln!("StopPodSandbox of a removed sandbox: {e:?}"),
    }
}

/// The relist's calls: a second relist with nothing changed decodes nothing (`None`); a
/// new container, a stop, and a restart each show again.
#[tokio::test]
async fn relist_is_none_while_nothing_changes() {
    let e = env().await;
    let mut digest = picolet::RelistDigest::default();
    let first = e.rt.relist(&mut digest).await.expect("relist");
    assert_eq!(first.map(|(s, c)| (s.len(), c.len())), Some((0, 0)));
    assert!(e.rt.relist(&mut digest).await.expect("relist").is_none());
    let (_sb, id) = running_container(&e, "web", "app").await;
    let (sandboxes, containers) =
        e.rt.relist(&mut digest)
            .await
            .expect("relist")
            .expect("changed");
    assert_eq!((sandboxes.len(), containers.len()), (1, 1));
    assert!(e.rt.relist(&mut digest).await.expect("relist").is_none());
    assert!(e.rt.relist(&mut digest).await.expect("relist").is_none());
    e.rt.stop_container(&id, 2).await.expect("stop");
    let (_, containers) =
        e.rt.relist(&mut digest)
            .await
            .expect("relist")
            .expect("changed");
    assert_eq!(containers[0].state, ContainerState::Exited);
    assert!(e.rt.relist(&mut digest).await.expect("relist").is_none());
    // A fresh digest lists again.
    let mut fresh = picolet::RelistDigest::default();
    assert!(e.rt.relist(&mut fresh).await.expect("relist").is_some());
}

// ---------------------------------------------------------------------------------------
// Container events (evented PLEG)
// ---------------------------------------------------------------------------------------

/// The next event of the stream, within 5 s.
async fn next_event(events: &mut picolet::ContainerEvents) -> picolet::ContainerEvent {
    use futures_util::StreamExt as _;
    tokio::time::timeout(Duration::from_secs(5), events.next())
        .await
        .expect("an event within 5 s")
        .expect("the stream is open")
        .expect("an event, not an error")
}

#[tokio::test]
async fn container_events_stream_each_change_with_the_sandbox_after_it() {
    use picolet::ContainerEventKind as Kind;
    let e = env().await;
    let mut events = e.rt.container_events().await.expect("stream opens");
    let sb = sandbox_config("web");
    let sandbox_id = e.rt.run_pod_sandbox(&sb).await.unwrap();
    for kind in [Kind::Created, Kind::Started] {
        let ev = next_event(&mut events).await;
        assert_eq!(
            (ev.kind, ev.container_id.as_str()),
            (kind, sandbox_id.as_str())
        );
        let s = ev.sandbox.expect("sandbox status");
        assert_eq!((s.uid.as_str(), s.state), ("uid-web", SandboxState::Ready));
        assert!(s.ip.is_some());
    }
    let id =
        e.rt.create_container(&sandbox_id, &container_config("app"), &sb)
            .await
            .unwrap();
    e.rt.start_container(&id).await.unwrap();
    assert_eq!(next_event(&mut events).await.kind, Kind::Created);
    let started = next_event(&mut events).await;
    assert_eq!(
        (started.kind, started.container_id.as_str()),
        (Kind::Started, id.as_str())
    );
    assert_eq!(started.containers.len(), 1);
    assert_eq!(started.containers[0].state, ContainerState::Running);
    assert_eq!(started.containers[0].sandbox_id, sandbox_id);

    // An exit nobody asked for is an event too, with the exit code.
    assert!(e.fake.exit_container(&id, 3));
    let stopped = next_event(&mut events).await;
    assert_eq!(stopped.kind, Kind::Stopped);
    assert_eq!(stopped.containers[0].state, ContainerState::Exited);
    assert_eq!(stopped.containers[0].exit_code, 3);

    // A removed sandbox: its containers' DELETED, then its own without a sandbox status.
    e.rt.remove_pod_sandbox(&sandbox_id).await.unwrap();
    let mut last = next_event(&mut events).await;
    while last.container_id != sandbox_id || last.kind != Kind::Deleted {
        last = next_event(&mut events).await;
    }
    assert_eq!(last.sandbox, None);
}

/// containerd 2.x and CRI-O answer the stream's opening with their first event, not before: an opening
/// left unanswered past the query deadline is a stream, not a timeout, and its events
/// arrive once the runtime answers.
#[tokio::test]
async fn container_events_opening_unanswered_is_a_stream() {
    use picolet::ContainerEventKind as Kind;
    let e = env_with(CriTimeouts::uniform(Duration::from_millis(100))).await;
    // The fake answers (sends its headers) only after 1 s, ten times the deadline.
    e.fake.inject(
        Method::GetContainerEvents,
        Fault::Delay(Duration::from_secs(1)),
    );
    let mut events = match e.rt.container_events().await {
        Ok(events) => events,
        Err(err) => panic!("an unanswered opening is not an error: {err}"),
    };
    wait_until_streams(&e.fake, 1).await;
    let sandbox_id = e.rt.run_pod_sandbox(&sandbox_config("late")).await.unwrap();
    let ev = next_event(&mut events).await;
    assert_eq!(
        (ev.kind, ev.container_id.as_str()),
        (Kind::Created, sandbox_id.as_str())
    );
}

/// containerd 1.6 answers `GetContainerEvents` with Unimplemented.
#[tokio::test]
async fn container_events_unimplemented_is_its_own_error() {
    let e = env().await;
    e.fake.inject(
        Method::GetContainerEvents,
        Fault::fail(Code::Unimplemented, "unknown method GetContainerEvents"),
    );
    match e.rt.container_events().await {
        Err(CriError::Unimplemented { method, .. }) => assert_eq!(method, "GetContainerEvents"),
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("a stream opened"),
    }
}

/// A broken stream ends with an error item; a new one can be opened; a runtime that goes
/// away ends it as Unavailable.
#[tokio::test]
async fn container_events_break_and_reopen() {
    use futures_util::StreamExt as _;
    let mut e = env().await;
    let mut events = e.rt.container_events().await.expect("stream opens");
    wait_until_streams(&e.fake, 1).await;
    e.fake.break_event_streams();
    let end = tokio::time::timeout(Duration::from_secs(5), events.next())
        .await
        .expect("the break arrives");
    assert!(matches!(end, Some(Err(CriError::Rpc { .. }))), "{end:?}");
    let mut events = e.rt.container_events().await.expect("opens again");
    wait_until_streams(&e.fake, 1).await;
    e.fake.shutdown().await;
    let end = tokio::time::timeout(Duration::from_secs(5), events.next())
        .await
        .expect("the end arrives");
    assert!(
        matches!(end, None | Some(Err(CriError::Unavailable { .. }))),
        "{end:?}"
    );
}

async fn wait_until_streams(fake: &FakeCriHandle, n: usize) {
    common::wait_until("the fake's event streams", 5, || {
        (fake.event_streams() == n).then_some(())
    })
    .await;
}

/// `ListContainerStats` and `ListPodSandboxStats` round-trip: every container with its
/// attributes, usage for running ones only (as containerd 1.6 answers); the sandbox's usage
/// is its running containers'; filters apply; a runtime
/// without `ListPodSandboxStats` (gRPC Unimplemented) maps to `CriError::Unimplemented`.
#[tokio::test]
async fn stats_round_trip() {
    let e = env().await;
    let (sb, id) = running_container(&e, "web", "app").await;
    let (_, other) = running_container(&e, "db", "pg").await;
    e.rt.stop_container(&other, 2).await.expect("stop");
    e.fake.set_usage("app", 1_500_000_000, 3 << 20);

    let all = ListFilter::default();
    let stats = e.rt.list_container_stats(&all).await.expect("stats");
    assert_eq!(stats.len(), 2, "{stats:?}");
    let exited = stats
        .iter()
        .find(|s| s.id == other)
        .expect("the exited one");
    assert_eq!((exited.cpu, exited.memory), (None, None));
    let s = stats.iter().find(|s| s.id == id).expect("the running one");
    assert_eq!((s.id.as_str(), s.name.as_str()), (id.as_str(), "app"));
    assert_eq!(s.attempt, 3);
    assert_eq!(s.labels, container_config("app").labels);
    let cpu = s.cpu.expect("cpu");
    assert!(cpu.timestamp > 0);
    assert_eq!(cpu.usage_core_nano_seconds, Some(1_500_000_000));
    assert_eq!(s.memory.expect("memory").working_set_bytes, Some(3 << 20));
    let none = ListFilter {
        sandbox_id: Some("nope".into()),
        ..Default::default()
    };
    assert!(
        e.rt.list_container_stats(&none)
            .await
            .expect("stats")
            .is_empty()
    );

    let pods = e.rt.list_pod_sandbox_stats(&all).await.expect("pod stats");
    let web = pods.iter().find(|p| p.id == sb).expect("web's sandbox");
    assert_eq!((web.name.as_str(), web.uid.as_str()), ("web", "uid-web"));
    assert_eq!(
        web.cpu.and_then(|c| c.usage_core_nano_seconds),
        Some(1_500_000_000)
    );
    assert_eq!(web.containers.len(), 1);

    e.fake.inject(
        Method::ListPodSandboxStats,
        Fault::fail(Code::Unimplemented, "unknown method ListPodSandboxStats"),
    );
    let err =
        e.rt.list_pod_sandbox_stats(&all)
            .await
            .expect_err("unimplemented");
    assert!(matches!(err, CriError::Unimplemented { .. }), "{err:?}");
}
