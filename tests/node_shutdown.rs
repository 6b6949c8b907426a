//! Graceful node shutdown with the real binaries: `picolet run` over the
//! fake CRI with `shutdownGracePeriod` in its config file, then `picolet node-shutdown` as the
//! system's shutdown hook runs it: the regular pod is stopped before the critical one, both
//! with their grace, the hook returns once both are down, a pod added afterwards is refused
//! with the kubelet's reason, and picolet itself keeps running. The node API and the CLI need
//! feature `apiserver` (`cargo test --all-features`).
#![cfg(all(feature = "fake-cri", feature = "apiserver"))]

mod common;

use std::process::{Command, Stdio};

use common::{IMAGE, Killed, free_port, wait_until};
use picolet::{
    ContainerState, SandboxState,
    fakes::{CriMethod as Method, FakeCri},
};

fn pod(name: &str, priority: Option<i64>) -> String {
    let priority = priority
        .map(|p| format!("  priority: {p}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\nspec:\n{priority}  terminationGracePeriodSeconds: 3\n  containers:\n  - {{name: c, image: {IMAGE}}}\n"
    )
}

#[tokio::test(flavor = "current_thread")]
async fn node_shutdown_stops_regular_pods_then_critical_ones_and_refuses_new_pods() {
    let tmp = tempfile::tempdir().expect("tmp");
    let manifests = tmp.path().join("manifests");
    std::fs::create_dir_all(&manifests).expect("mkdir");
    std::fs::write(manifests.join("app.yaml"), pod("app", None)).expect("write");
    std::fs::write(
        manifests.join("crit.yaml"),
        pod("crit", Some(2_000_000_000)),
    )
    .expect("write");
    let config = tmp.path().join("config.yaml");
    std::fs::write(
        &config,
        "shutdownGracePeriod: 20s\nshutdownGracePeriodCriticalPods: 10s\n",
    )
    .expect("config");
    let socket = tmp.path().join("cri.sock");
    let fake = FakeCri::start(&socket).await.expect("fake CRI");
    fake.preload_image(IMAGE);
    let root = tmp.path().join("root");
    let log_path = tmp.path().join("picolet.log");
    let log = std::fs::File::create(&log_path).expect("log file");
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_picolet"))
        .arg("run")
        // Not the kubelet's device plugin directory of the machine (a scenario gives its own).
        .args(["--device-plugin-dir", ""])
        .arg("--config")
        .arg(&config)
        .arg("--pod-manifest-path")
        .arg(&manifests)
        .arg("--container-runtime-endpoint")
        .arg(format!("unix://{}", socket.display()))
        .arg("--root-dir")
        .arg(&root)
        .arg("--pod-log-dir")
        .arg(tmp.path().join("logs"))
        .args(["--hostname-override", "node1", "--cgroups-per-qos=false"])
        .args(["--address", "127.0.0.1", "--port", &port.to_string()])
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("dup"))
        .stderr(log)
        .spawn()
        .expect("picolet run");
    let mut picolet = Killed(child);
    let log_text = || std::fs::read_to_string(&log_path).unwrap_or_default();
    let running = |name: &str| {
        fake.containers().iter().any(|c| {
            c.state == ContainerState::Running
                && c.labels.get("io.kubernetes.pod.name").map(String::as_str) == Some(name)
        })
    };
    wait_until("both pods running", 60, || {
        (running("app-node1") && running("crit-node1")).then_some(())
    })
    .await;
    wait_until("the local kubeconfig", 60, || {
        root.join("kubeconfig").exists().then_some(())
    })
    .await;

    let names: std::collections::HashMap<String, String> = fake
        .sandboxes()
        .into_iter()
        .map(|s| (s.id, s.name))
        .collect();
    // The hook, as the packages run it.
    let hook = tokio::task::spawn_blocking({
        let root = root.clone();
        move || {
            Command::new(env!("CARGO_BIN_EXE_picolet"))
                .args(["node-shutdown", "--root-dir"])
                .arg(&root)
                .output()
                .expect("picolet node-shutdown")
        }
    });
    wait_until("picolet node-shutdown to return", 120, || {
        hook.is_finished().then_some(())
    })
    .await;
    let out = hook.await.expect("join");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        log_text()
    );
    assert!(
        stdout.contains("node shutdown: done: 2 pod(s) stopped"),
        "{stdout}\n{}",
        log_text()
    );
    // Both down when the hook returned, the regular pod's sandbox stopped first.
    let sandbox_name = |id: &str| names.get(id).cloned().unwrap_or_else(|| id.to_string());
    let stops: Vec<String> = fake
        .calls_to(Method::StopPodSandbox)
        .iter()
        .map(|id| sandbox_name(id))
        .collect();
    let first = |name: &str| stops.iter().position(|s| s == name);
    assert!(
        matches!((first("app-node1"), first("crit-node1")), (Some(a), Some(c)) if a < c),
        "stop order {stops:?}\n{}",
        log_text()
    );
    assert!(
        fake.sandboxes()
            .iter()
            .all(|s| s.state == SandboxState::NotReady),
        "{:?}",
        fake.sandboxes()
    );
    let text = log_text();
    assert!(
        text.contains("node shutdown: stopping pod default/app-node1")
            && text.contains("grace 3 s"),
        "{text}"
    );

    // A pod added now is refused with the kubelet's reason, and nothing restarts.
    std::fs::write(manifests.join("late.yaml"), pod("late", None)).expect("write");
    wait_until("the late pod refused", 60, || {
        let text = log_text();
        (text.contains("pod default/late-node1 (uid")
            && text
                .contains("rejected: NodeShutdown: Pod was rejected as the node is shutting down."))
        .then_some(())
    })
    .await;
    assert!(!running("app-node1") && !running("crit-node1") && !running("late-node1"));
    // picolet itself is still there (the init stops it after the hook).
    assert!(
        picolet.0.try_wait().expect("wait").is_none(),
        "{}",
        log_text()
    );
    // The pods as the kubelet marks them: Failed, Terminated, DisruptionTarget
    // (TerminationByKubelet), read through the node API.
    let out = Command::new(env!("CARGO_BIN_EXE_picolet"))
        .args([
            "get",
            "pods",
            "app-node1",
            "-n",
            "default",
            "-o",
            "json",
            "--kubeconfig",
        ])
        .arg(root.join("kubeconfig"))
        .output()
        .expect("picolet get pods");
    let pod: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let status = &pod["status"];
    assert_eq!(
        (status["phase"].as_str(), status["reason"].as_str()),
        (Some("Failed"), Some("Terminated")),
        "{status}"
    );
    let disruption = status["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "DisruptionTarget"))
        .unwrap_or_else(|| panic!("no DisruptionTarget: {status}"));
    assert_eq!(
        (disruption["status"].as_str(), disruption["reason"].as_str()),
        (Some("True"), Some("TerminationByKubelet")),
        "{disruption}"
    );
    // A second hook call answers at once with the same report.
    let out = Command::new(env!("CARGO_BIN_EXE_picolet"))
        .args(["node-shutdown", "--root-dir"])
        .arg(&root)
        .output()
        .expect("picolet node-shutdown");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("node shutdown: done: 2 pod(s) stopped"),
        "{out:?}"
    );
    drop(fake);
}
