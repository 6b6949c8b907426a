//! Helpers the black-box tests share, in one place: each test file says `mod common;` and
//! uses its part of them (hence the `dead_code` allowance).
//!
//! - this file: the test image, a pod's phase in API JSON, waiting for a condition
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
