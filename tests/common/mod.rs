//! Helpers the black-box tests share, in one place: each test file says `mod common;` and
//! uses its part of them (hence the `dead_code` allowance).
//!
//! - this file: the test image, a pod's phase in API JSON, waiting for a condition, a free
//!   port, a child process killed when dropped
//! - `agent.rs`: the agent's configuration over a temporary directory, what the fake
//!   runtime runs
//! - `lab.rs`: what the tests against a real containerd share: the CRI labels contract
//!   and a service-like container script
//! - `hostile.rs`: the hostile manifest corpus (the bench includes it too, by path)

#![allow(dead_code)]

#[cfg(feature = "fakes")]
pub mod agent;
pub mod hostile;
pub mod lab;

use std::time::Duration;

use serde_json::Value;

/// The image test pods run: the lab's busybox (`tests/e2e/lab.sh` imports it), and what
/// the fakes are preloaded with.
pub const IMAGE: &str = "localhost/busybox:edge";

/// `status.phase` of a pod as JSON, `""` when it has none.
pub fn phase(pod: &Value) -> &str {
    pod["status"]["phase"].as_str().unwrap_or("")
}

/// Polls `f` every 20 ms until it gives a value; fails naming `what` after `secs` seconds
/// (tokio time: real, or paused and auto-advancing).
pub async fn wait_until<T>(what: &str, secs: u64, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A port free on 127.0.0.1 right now (the listener is closed again).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// A child process (a `picolet run`) killed and reaped when the test ends, passed or not.
pub struct Killed(pub std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
