//! The eviction manager in the whole agent, over the fake runtime and paused time: the
//! node's memory is measured from files under a temporary root (cgroup v2 layout) and the
//! file systems through a fake `statfs`, so the node is "low on memory" on demand.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

mod common;

use common::agent::settle;

use common::IMAGE;
use common::agent::agent_dir;
use picolet::{
    ContainerState, EvictionConfig, EvictionSources as Sources, FsStats,
    PressureConditions as Conditions, TokioClock,
    api::{Pod, PodPhase},
    fakes::FakeRuntime,
    parse_thresholds,
};
use tokio::task::LocalSet;
use tokio_util::sync::CancellationToken;

fn roomy_statfs(_: &Path) -> std::io::Result<FsStats> {
    Ok(FsStats {
        bytes_total: 16 << 30,
        bytes_available: 8 << 30,
        inodes_total: 1_000_000,
        inodes_free: 900_000,
    })
}

/// `/proc/meminfo` of a 1 GiB node with `free_kib` free (cgroup v2: the root's working set
/// is MemTotal − MemFree − Inactive(file)).
fn write_meminfo(proc_root: &Path, free_kib: u64) {
    std::fs::create_dir_all(proc_root).unwrap();
    std::fs::write(
        proc_root.join("meminfo"),
        format!("MemTotal: 1048576 kB\nMemFree: {free_kib} kB\nInactive(file): 0 kB\n"),
    )
    .unwrap();
}

fn api_pod(name: &str, memory_request: Option<&str>, priority: Option<i32>) -> Pod {
    let resources = memory_request
        .map(|m| format!("\n    resources: {{requests: {{memory: {m}}}}}"))
        .unwrap_or_default();
    let priority = priority
        .map(|p| format!("\n  priority: {p}"))
        .unwrap_or_default();
    let yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n  uid: uid-{name}\n  \
         annotations: {{kubernetes.io/config.source: api}}\nspec:\n  nodeName: node1{priority}\n  \
         terminationGracePeriodSeconds: 30\n  containers:\n  - name: app\n    image: {IMAGE}{resources}\n"
    );
    let mut pod = picolet::parse_manifest(yaml.as_bytes()).expect("pod");
    picolet::apply_defaults(&mut pod);
    pod
}

const STATIC_POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: keeper\nspec:\n  containers:\n  - name: app\n    image: localhost/busybox:edge\n";

/// Under memory pressure the BestEffort pod using the most memory is evicted (Failed,
/// Evicted, a message naming the signal), then the next; the static pod and the critical
/// pod never are; MemoryPressure is published and a new BestEffort pod is refused.
#[tokio::test(start_paused = true)]
async fn memory_pressure_evicts_ranked_pods_and_spares_critical_ones() {
    LocalSet::new()
        .run_until(async {
            let (tmp, mut cfg) = agent_dir("node1");
            std::fs::write(cfg.pod_manifest_path.join("keeper.yaml"), STATIC_POD).unwrap();
            let proc_root = tmp.path().join("proc");
            let cgroup_root = tmp.path().join("cgroup");
            std::fs::create_dir_all(&cgroup_root).unwrap();
            std::fs::write(cgroup_root.join("cgroup.controllers"), "memory\n").unwrap();
            write_meminfo(&proc_root, 900 * 1024); // plenty
            cfg.agent.eviction = Some(EvictionConfig {
                thresholds: parse_thresholds("memory.available<100Mi").unwrap(),
                transition_period: Duration::from_secs(300),
                sources: Sources {
                    proc_root: proc_root.clone(),
                    cgroup_root,
                    ..Sources::host(&cfg.agent.root_dir, &cfg.agent.pod_log_dir)
                },
                statfs: roomy_statfs,
            });

            let clock = TokioClock::new(1_800_000_000_000_000_000);
            let rt = FakeRuntime::new(clock);
            rt.add_image(IMAGE);
            let (src_tx, src_rx) = tokio::sync::mpsc::channel(16);
            let (ev_tx, mut events) = picolet::pod_events();
            let recorder = picolet::new_recorder("node1", clock);
            let (pressure_tx, pressure_rx) = tokio::sync::watch::channel(Conditions::default());
            let ext = picolet::Extensions {
                sources: vec!["api"],
                source_channel: Some((src_tx.clone(), src_rx)),
                events: Some(ev_tx),
                recorder: Some(recorder.clone()),
                pressure: Some(pressure_tx),
                ..Default::default()
            };
            let shutdown = CancellationToken::new();
            let handle = tokio::task::spawn_local(picolet::run_daemon_with_extensions(
                rt.clone(),
                clock,
                cfg.clone(),
                ext,
                shutdown.clone(),
                std::rc::Rc::new(tokio::sync::Notify::new()),
            ));
            let pods = vec![
                Arc::new(api_pod("hog", None, None)),
                Arc::new(api_pod("small", None, None)),
                Arc::new(api_pod("requested", Some("64Mi"), None)),
                Arc::new(api_pod("critical", None, Some(2_000_000_000))),
            ];
            src_tx
                .send(picolet::SourceUpdate {
                    source: "api",
                    pods: pods.clone(),
                    objects: None,
                })
                .await
                .unwrap();
            settle(25).await;
            let running = |rt: &FakeRuntime| {
                let mut names: Vec<String> = rt
                    .containers()
                    .into_iter()
                    .filter(|c| c.state == ContainerState::Running)
                    .map(|c| c.labels["io.kubernetes.pod.name"].clone())
                    .collect();
                names.sort();
                names
            };
            assert_eq!(
                running(&rt),
                ["critical", "hog", "keeper-node1", "requested", "small"],
                "no pressure, nothing evicted"
            );
            assert_eq!(*pressure_rx.borrow(), Conditions::default());
            for (pod, mib) in [("hog", 500u64), ("small", 5), ("requested", 32), ("critical", 900), ("keeper-node1", 900)] {
                let id = rt
                    .containers()
                    .into_iter()
                    .find(|c| c.labels["io.kubernetes.pod.name"] == pod)
                    .unwrap()
                    .id;
                rt.set_usage(&id, 0, mib << 20);
            }

            // 50 MiB available: below 100Mi.
            write_meminfo(&proc_root, 50 * 1024);
            settle(15).await;
            assert!(pressure_rx.borrow().memory_pressure, "MemoryPressure published");
            let mut statuses = std::collections::HashMap::new();
            for ev in events.try_recv() {
                if let picolet::PodEvent::Status { pod, status } = ev {
                    statuses.insert(pod.metadata.name.clone(), status);
                }
            }
            let hog = &statuses["hog"];
            assert_eq!(hog.phase, Some(PodPhase::Failed));
            assert_eq!(hog.reason.as_deref(), Some("Evicted"));
            let message = hog.message.as_deref().unwrap();
            assert!(
                message.starts_with("The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi."),
                "{message}"
            );
            assert!(!running(&rt).contains(&"hog".to_string()));
            assert!(
                recorder
                    .list()
                    .iter()
                    .any(|e| e.involved.name == "hog" && e.reason == "Evicted"),
                "an Evicted event"
            );

            // Still low: one pod per cycle, "small" (BestEffort) before "requested" (under
            // its request), and never the static or the critical pod.
            settle(60).await;
            assert_eq!(running(&rt), ["critical", "keeper-node1"]);

            // A BestEffort pod arriving under memory pressure is refused.
            let mut all = pods.clone();
            all.push(Arc::new(api_pod("late", None, None)));
            src_tx
                .send(picolet::SourceUpdate {
                    source: "api",
                    pods: all,
                    objects: None,
                })
                .await
                .unwrap();
            settle(5).await;
            let mut late = None;
            for ev in events.try_recv() {
                if let picolet::PodEvent::Status { pod, status } = ev
                    && pod.metadata.name == "late"
                {
                    late = Some(status);
                }
            }
            let late = late.expect("a status for the refused pod");
            assert_eq!(late.phase, Some(PodPhase::Failed));
            assert_eq!(late.reason.as_deref(), Some("Evicted"));
            assert_eq!(
                late.message.as_deref(),
                Some("Pod was rejected: The node had condition: [MemoryPressure]. ")
            );
            assert!(!running(&rt).contains(&"late".to_string()));

            // Memory back: the condition goes after the transition period; evicted pods
            // stay Failed (their controller replaces them).
            write_meminfo(&proc_root, 900 * 1024);
            settle(320).await;
            assert!(!pressure_rx.borrow().memory_pressure);
            assert_eq!(running(&rt), ["critical", "keeper-node1"]);

            shutdown.cancel();
            handle.await.unwrap();
        })
        .await;
}

/// The fake file system's available bytes (of 1000), for [`shrinking_statfs`].
static DISK_AVAILABLE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(900);

fn shrinking_statfs(_: &Path) -> std::io::Result<FsStats> {
    Ok(FsStats {
        bytes_total: 1000,
        bytes_available: DISK_AVAILABLE.load(std::sync::atomic::Ordering::SeqCst),
        inodes_total: 1000,
        inodes_free: 900,
    })
}

/// Under disk pressure the dead containers of a finished pod go first (the reclaim: a
/// container GC pass that also empties pods that no longer run), then — still under
/// pressure at the next measurement — one pod is evicted; DiskPressure is published.
#[tokio::test(start_paused = true)]
async fn disk_pressure_reclaims_dead_containers_then_evicts() {
    LocalSet::new()
        .run_until(async {
            let (tmp, mut cfg) = agent_dir("node1");
            std::fs::write(cfg.pod_manifest_path.join("keeper.yaml"), STATIC_POD).unwrap();
            let proc_root = tmp.path().join("proc");
            write_meminfo(&proc_root, 900 * 1024);
            cfg.agent.eviction = Some(EvictionConfig {
                thresholds: parse_thresholds("nodefs.available<10%").unwrap(),
                transition_period: Duration::from_secs(300),
                sources: Sources {
                    proc_root,
                    cgroup_root: tmp.path().join("cgroup"),
                    ..Sources::host(&cfg.agent.root_dir, &cfg.agent.pod_log_dir)
                },
                statfs: shrinking_statfs,
            });
            let clock = TokioClock::new(1_800_000_000_000_000_000);
            let rt = FakeRuntime::new(clock);
            rt.add_image(IMAGE);
            let (src_tx, src_rx) = tokio::sync::mpsc::channel(16);
            let (ev_tx, mut events) = picolet::pod_events();
            let (pressure_tx, pressure_rx) = tokio::sync::watch::channel(Conditions::default());
            let ext = picolet::Extensions {
                sources: vec!["api"],
                source_channel: Some((src_tx.clone(), src_rx)),
                events: Some(ev_tx),
                pressure: Some(pressure_tx),
                ..Default::default()
            };
            let shutdown = CancellationToken::new();
            let handle = tokio::task::spawn_local(picolet::run_daemon_with_extensions(
                rt.clone(),
                clock,
                cfg.clone(),
                ext,
                shutdown.clone(),
                std::rc::Rc::new(tokio::sync::Notify::new()),
            ));
            let mut done = api_pod("done", None, None);
            done.spec.restart_policy = Some(picolet::api::RestartPolicy::Never);
            let pods = vec![Arc::new(done), Arc::new(api_pod("spender", None, None))];
            src_tx
                .send(picolet::SourceUpdate {
                    source: "api",
                    pods,
                    objects: None,
                })
                .await
                .unwrap();
            settle(5).await;
            let of = |rt: &FakeRuntime, pod: &str| {
                rt.containers()
                    .into_iter()
                    .filter(|c| c.labels["io.kubernetes.pod.name"] == pod)
                    .collect::<Vec<_>>()
            };
            let id = of(&rt, "done")[0].id.clone();
            assert!(rt.exit_container(&id, 0));
            settle(70).await; // past a regular GC pass: it keeps the finished pod's container
            assert_eq!(of(&rt, "done").len(), 1, "kept by the regular container GC");
            assert!(!pressure_rx.borrow().disk_pressure);

            DISK_AVAILABLE.store(50, std::sync::atomic::Ordering::SeqCst);
            settle(10).await;
            assert!(pressure_rx.borrow().disk_pressure, "DiskPressure published");
            assert!(of(&rt, "done").is_empty(), "reclaimed: {:?}", of(&rt, "done"));
            settle(15).await;
            let mut spender = None;
            for ev in events.try_recv() {
                if let picolet::PodEvent::Status { pod, status } = ev
                    && pod.metadata.name == "spender"
                {
                    spender = Some(status);
                }
            }
            let spender = spender.expect("a status for spender");
            assert_eq!(spender.reason.as_deref(), Some("Evicted"));
            assert_eq!(
                spender.message.as_deref(),
                Some(
                    "The node was low on resource: ephemeral-storage. Threshold quantity: 100, available: 50. "
                )
            );
            let running: Vec<String> = rt
                .containers()
                .into_iter()
                .filter(|c| c.state == ContainerState::Running)
                .map(|c| c.labels["io.kubernetes.pod.name"].clone())
                .collect();
            assert_eq!(running, ["keeper-node1"]);
            shutdown.cancel();
            handle.await.unwrap();
        })
        .await;
}
