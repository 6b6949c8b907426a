//! Probe and hook handlers that talk to the network (upstream `pkg/probe/{http,tcp,grpc}`):
//! a leaf module — it imports nothing of picolet but `api` (and, for https, the rustls
//! configuration of `kube::tls` when that feature is built), so both the prober
//! (probes) and the runtime sync (lifecycle hooks) use it.
//!
//! Owns: dialing the pod (IP or name), one HTTP/1.1 GET with its redirects, the TLS
//! handshake without verification, one `grpc.health.v1.Health/Check`, and the texts of the
//! verdicts (worded like upstream's, so events and logs read the same).
//! Must never: outlive the caller's timeout, keep a connection open after the verdict, go
//! through a proxy, or read more than [`MAX_OUTPUT`] bytes of a body.
//!
//! Layout:
//! - `tcp.rs`  [`tcp_probe`] and the dialer every handler uses (`dial tcp …` messages)
//! - `http.rs` [`http_probe`], [`http_hook`]: a hand-written HTTP/1.1 client (no hyper, so
//!   it is in the static-pods-only build too; https only with feature `apiserver`)
//! - `grpc.rs` [`grpc_probe`]: tonic over our TCP dialer, plain h2c

mod grpc;
mod http;
mod tcp;

pub(crate) use grpc::grpc_probe;
pub(crate) use http::{http_hook, http_probe};
pub(crate) use tcp::tcp_probe;

mod target;
pub(crate) use target::{headers, http_target, resolve_port};

/// How long the body of an HTTP answer (and the output of an exec probe) is read.
pub(crate) const MAX_OUTPUT: usize = 10 * 1024;

/// The first line of a command's output (stdout, else stderr), read up to [`MAX_OUTPUT`]:
/// what exec probes and exec hooks say about a failed command.
pub(crate) fn first_output_line(stdout: &[u8], stderr: &[u8]) -> String {
    let out = if stdout.is_empty() { stderr } else { stdout };
    let out = &out[..out.len().min(MAX_OUTPUT)];
    let text = String::from_utf8_lossy(out);
    text.lines().next().unwrap_or_default().trim().to_string()
}

/// One probe run (upstream: `probe.Result` + output + error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Healthy; `Some(text)` is a warning to log (e.g. a redirect to another host not followed).
    Success(Option<String>),
    /// Unhealthy, with the reason (`HTTP probe failed with statuscode: 503`,
    /// `dial tcp 10.88.0.7:8080: connect: connection refused`).
    Failure(String),
    /// The probe could not be made at all (bad request); upstream retries and then throws the
    /// result away.
    Error(String),
}

/// An HTTP GET target, already resolved (host defaulted to the pod IP, named port looked up).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HttpTarget<'a> {
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

/// `host:port`, with an IPv6 address in brackets (Go's `net.JoinHostPort`); a host already
/// in brackets is not bracketed twice.
fn join_host_port(host: &str, port: u16) -> String {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_port() {
        assert_eq!(join_host_port("10.0.0.1", 80), "10.0.0.1:80");
        assert_eq!(join_host_port("::1", 80), "[::1]:80");
        assert_eq!(join_host_port("[fd00::1]", 8080), "[fd00::1]:8080");
        assert_eq!(join_host_port("web.local", 443), "web.local:443");
    }
}
