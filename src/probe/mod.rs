//! Probe and hook handlers that talk to the network (upstream `pkg/probe/{http,tcp,grpc}`):
//! a leaf module — it imports nothing of picolet but `api`, so both the prober (probes) and
//! the runtime sync (lifecycle hooks) use it.
//!
//! STUB: the interface only; the implementation lands with the probe-net work.

use std::time::Duration;

mod target;
pub use target::{headers, http_target, resolve_port};

/// How long the body of an HTTP answer (and the output of an exec probe) is read.
pub const MAX_OUTPUT: usize = 10 * 1024;

/// One probe run (upstream: `probe.Result` + output + error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Healthy; `Some(text)` is a warning to log (e.g. a redirect to another host not followed).
    Success(Option<String>),
    /// Unhealthy, with the reason (`HTTP probe failed with statuscode: 503`,
    /// `dial tcp 10.88.0.7:8080: connection refused`).
    Failure(String),
    /// The probe could not be made at all (bad request); upstream retries and then throws the
    /// result away.
    Error(String),
}

/// An HTTP GET target, already resolved (host defaulted to the pod IP, named port looked up).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpTarget<'a> {
    pub https: bool,
    /// An IP address or a name.
    pub host: &'a str,
    pub port: u16,
    /// As written in the spec (may lack the leading `/`, may carry a query).
    pub path: &'a str,
    /// `httpHeaders` (a `Host` header sets the request's host; `User-Agent`/`Accept` given
    /// here replace the defaults).
    pub headers: &'a [(String, String)],
}

/// An HTTP probe: success for 200 ≤ status < 400.
pub async fn http_probe(
    _target: &HttpTarget<'_>,
    _user_agent: &str,
    _timeout: Duration,
) -> Verdict {
    Verdict::Error("HTTP probes are not built yet".into())
}

/// An HTTP lifecycle hook: fails only when no answer arrives (upstream ignores the status).
pub async fn http_hook(
    _target: &HttpTarget<'_>,
    _user_agent: &str,
    _timeout: Duration,
) -> Result<(), String> {
    Err("HTTP hooks are not built yet".into())
}

/// A TCP probe: success when a connection opens within the timeout.
pub async fn tcp_probe(_host: &str, _port: u16, _timeout: Duration) -> Verdict {
    Verdict::Error("TCP probes are not built yet".into())
}

/// A gRPC probe: `grpc.health.v1.Health/Check`; only SERVING succeeds.
pub async fn grpc_probe(_host: &str, _port: u16, _service: &str, _timeout: Duration) -> Verdict {
    Verdict::Error("gRPC probes are not built yet".into())
}
