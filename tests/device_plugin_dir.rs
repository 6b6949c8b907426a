//! The device plugin directory as `picolet run` takes it, with the real binary and
//! the fake CRI server in this process: a directory whose `kubelet.sock` already answers
//! (another kubelet or picolet serves it) is never taken — picolet says so and runs without
//! device plugins, leaving the other's socket alone; a directory that cannot be made, when
//! named, stops picolet at start with the directory in the error.
#![cfg(all(feature = "fake-cri", feature = "device-plugins"))]

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::{IMAGE, Killed, wait_until};
use picolet::fakes::FakeCri;

fn picolet(tmp: &Path, socket: &Path, plugin_dir: &Path, log: &Path) -> Command {
    let manifests = tmp.join("manifests");
    std::fs::create_dir_all(&manifests).expect("mkdir");
    let log = std::fs::File::create(log).expect("log file");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_picolet"));
    cmd.arg("run")
        .arg("--device-plugin-dir")
        .arg(plugin_dir)
        .arg("--pod-manifest-path")
        .arg(&manifests)
        .arg("--container-runtime-endpoint")
        .arg(format!("unix://{}", socket.display()))
        .arg("--root-dir")
        .arg(tmp.join("root"))
        .arg("--pod-log-dir")
        .arg(tmp.join("logs"))
        .args([
            "--hostname-override",
            "node1",
            "--cgroups-per-qos=false",
            "--port",
            "0",
        ])
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("dup"))
        .stderr(log);
    cmd
}

#[tokio::test(flavor = "current_thread")]
async fn a_directory_served_by_another_is_left_alone() {
    let tmp = tempfile::tempdir().expect("tmp");
    let socket = tmp.path().join("cri.sock");
    let fake = FakeCri::start(&socket).await.expect("fake CRI");
    fake.preload_image(IMAGE);
    // The other kubelet: a listener on the directory's kubelet.sock.
    let plugin_dir = tmp.path().join("device-plugins");
    std::fs::create_dir_all(&plugin_dir).expect("mkdir");
    let other = std::os::unix::net::UnixListener::bind(plugin_dir.join("kubelet.sock"))
        .expect("the other kubelet's socket");
    other.set_nonblocking(true).expect("nonblocking");
    let log_path = tmp.path().join("picolet.log");
    let child = picolet(tmp.path(), &socket, &plugin_dir, &log_path)
        .spawn()
        .expect("picolet run");
    let mut picolet = Killed(child);
    let log_text = || std::fs::read_to_string(&log_path).unwrap_or_default();

    wait_until("the warning", 60, || {
        log_text()
            .contains(
                "another kubelet or picolet serves this directory; running without device plugins",
            )
            .then_some(())
    })
    .await;
    // It runs on (the agent started: it asked the runtime's version), without a
    // registration server.
    wait_until("the agent's start", 60, || {
        log_text().contains("container runtime ").then_some(())
    })
    .await;
    assert!(
        picolet.0.try_wait().expect("try_wait").is_none(),
        "{}",
        log_text()
    );
    assert!(
        !log_text().contains("device manager: registration server"),
        "{}",
        log_text()
    );
    // The other's socket is still the other's: a connection reaches its listener.
    let _c = std::os::unix::net::UnixStream::connect(plugin_dir.join("kubelet.sock"))
        .expect("the other's socket still answers");
    wait_until("the other's listener gets the connection", 10, || {
        other.accept().ok().map(|_| ())
    })
    .await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_named_directory_that_cannot_be_made_stops_the_start() {
    let tmp = tempfile::tempdir().expect("tmp");
    let socket = tmp.path().join("cri.sock");
    let fake = FakeCri::start(&socket).await.expect("fake CRI");
    fake.preload_image(IMAGE);
    // A regular file where the directory's parent should be.
    std::fs::write(tmp.path().join("file"), "").expect("file");
    let plugin_dir = tmp.path().join("file").join("device-plugins");
    let log_path = tmp.path().join("picolet.log");
    let mut child = picolet(tmp.path(), &socket, &plugin_dir, &log_path)
        .spawn()
        .expect("picolet run");
    // The wait is off the runtime, which serves the fake CRI.
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .expect("join")
        .expect("wait");
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    assert!(!status.success(), "{log}");
    assert!(
        log.contains(&format!("device plugin directory {}", plugin_dir.display())),
        "{log}"
    );
}
