//! picolet under systemd's eyes, with the real `picolet run` binary and a
//! datagram socket standing in for systemd's `$NOTIFY_SOCKET`: `READY=1` once the static pods
//! are read, then `WATCHDOG=1` from the event loop while it runs — and none while the process
//! is stopped (SIGSTOP: the loop cannot run, so nothing can ping), again after SIGCONT. The
//! runtime is the fake CRI server in this process (feature `fake-cri`).
#![cfg(feature = "fake-cri")]

mod common;

use std::os::unix::net::UnixDatagram;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{IMAGE, Killed};
use picolet::fakes::FakeCri;

/// The next datagram, or `None` after `secs` seconds.
fn next_message(sock: &UnixDatagram, secs: u64) -> Option<String> {
    sock.set_read_timeout(Some(Duration::from_secs(secs)))
        .expect("timeout");
    let mut buf = [0u8; 256];
    match sock.recv(&mut buf) {
        Ok(n) => Some(String::from_utf8_lossy(&buf[..n]).into_owned()),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            None
        }
        Err(e) => panic!("recv: {e}"),
    }
}

fn signal(child: &Child, sig: nix::sys::signal::Signal) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    nix::sys::signal::kill(pid, sig).expect("kill");
}

#[tokio::test(flavor = "current_thread")]
async fn ready_then_watchdog_pings_from_the_loop_and_none_while_it_is_stopped() {
    let tmp = tempfile::tempdir().expect("tmp");
    let manifests = tmp.path().join("manifests");
    std::fs::create_dir_all(&manifests).expect("mkdir");
    std::fs::write(
        manifests.join("app.yaml"),
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: app, namespace: default}}\nspec:\n  containers:\n  - {{name: c, image: {IMAGE}}}\n"
        ),
    )
    .expect("write pod");
    let socket = tmp.path().join("cri.sock");
    let fake = FakeCri::start(&socket).await.expect("fake CRI");
    fake.preload_image(IMAGE);
    let notify = tmp.path().join("notify");
    let sock = UnixDatagram::bind(&notify).expect("bind notify socket");
    let log_path = tmp.path().join("picolet.log");
    let log = std::fs::File::create(&log_path).expect("log file");
    let child = Command::new(env!("CARGO_BIN_EXE_picolet"))
        .arg("run")
        // Not the kubelet's device plugin directory of the machine (a scenario gives its own).
        .args(["--device-plugin-dir", ""])
        .arg("--pod-manifest-path")
        .arg(&manifests)
        .arg("--container-runtime-endpoint")
        .arg(format!("unix://{}", socket.display()))
        .arg("--root-dir")
        .arg(tmp.path().join("root"))
        .arg("--pod-log-dir")
        .arg(tmp.path().join("logs"))
        .args([
            "--hostname-override",
            "node1",
            "--cgroups-per-qos=false",
            "--port",
            "0",
        ])
        // A hardware watchdog stand-in: a plain file collects the pets and the magic close.
        .arg("--watchdog-device")
        .arg(tmp.path().join("watchdog"))
        .env("RUST_LOG", "info")
        .env("NOTIFY_SOCKET", &notify)
        // 6 s: a ping every 3 s at the latest, from the 2 s tick.
        .env("WATCHDOG_USEC", "6000000")
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("dup"))
        .stderr(log)
        .spawn()
        .expect("picolet run");
    std::fs::write(tmp.path().join("watchdog"), "").expect("watchdog stand-in");
    let mut picolet = Killed(child);
    let log_text = || std::fs::read_to_string(&log_path).unwrap_or_default();

    // The blocking reads run off the test's runtime, which serves the fake CRI.
    let sock = std::sync::Arc::new(sock);
    let recv = |secs: u64| {
        let sock = sock.clone();
        tokio::task::spawn_blocking(move || next_message(&sock, secs))
    };
    // READY=1 first (a ping may come before it: both are fine to systemd), then pings.
    let mut seen = Vec::new();
    while !seen.iter().any(|m| m == "READY=1") {
        let m = recv(60).await.expect("join");
        seen.push(m.unwrap_or_else(|| panic!("no READY=1 within 60 s: {seen:?}\n{}", log_text())));
    }
    for _ in 0..2 {
        let m = recv(60).await.expect("join");
        assert_eq!(m.as_deref(), Some("WATCHDOG=1"), "{seen:?}\n{}", log_text());
    }
    assert!(
        log_text().contains("systemd watchdog: WATCHDOG=1 from the event loop, timeout 6 s"),
        "{}",
        log_text()
    );

    // Stopped, the process sends nothing: what is queued from before the stop is drained,
    // then the socket stays silent for longer than the timeout.
    signal(&picolet.0, nix::sys::signal::Signal::SIGSTOP);
    // (a ping sent just before the stop took effect may still be in the socket)
    while recv(1).await.expect("join").is_some() {}
    assert_eq!(recv(8).await.expect("join"), None, "a ping while stopped");
    signal(&picolet.0, nix::sys::signal::Signal::SIGCONT);
    let m = recv(60).await.expect("join");
    assert_eq!(m.as_deref(), Some("WATCHDOG=1"), "{}", log_text());

    // The hardware watchdog was petted from the same tick, and a clean stop disarms it.
    let pets = std::fs::read(tmp.path().join("watchdog")).expect("watchdog file");
    assert!(
        pets.len() >= 2 && pets.iter().all(|b| *b == 0),
        "{pets:?}\n{}",
        log_text()
    );
    signal(&picolet.0, nix::sys::signal::Signal::SIGTERM);
    let mut exited = None;
    for _ in 0..300 {
        exited = picolet.0.try_wait().expect("try_wait");
        if exited.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        exited.is_some_and(|s| s.success()),
        "{exited:?}\n{}",
        log_text()
    );
    let pets = std::fs::read(tmp.path().join("watchdog")).expect("watchdog file");
    assert_eq!(pets.last(), Some(&b'V'), "no magic close\n{}", log_text());
    drop(fake);
}
