//! tcpSocket probes (upstream `pkg/probe/tcp`) and the dialer every network handler here
//! uses: resolve, connect within a deadline, and name failures as Go's `net.Dial` does
//! (`dial tcp 10.88.0.7:8080: connect: connection refused`), since events and logs show them.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::{Instant, timeout_at};

use super::{Verdict, join_host_port};

/// Why a dial failed; the texts are Go's `net.OpError` ones.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DialError {
    /// The name did not resolve.
    #[error("dial tcp: lookup {host}: {reason}")]
    Lookup { host: String, reason: String },
    /// The connect was answered with an error (refused, unreachable…).
    #[error("dial tcp {addr}: connect: {reason}")]
    Connect { addr: String, reason: String },
    /// The deadline passed first.
    #[error("dial tcp {addr}: i/o timeout")]
    Timeout { addr: String },
}

/// A TCP probe: success when a connection opens within the timeout; it is closed at once.
pub(crate) async fn tcp_probe(host: &str, port: u16, timeout: Duration) -> Verdict {
    // upstream: DoTCPProbe — a dial error is a Failure with the error's text.
    match dial(host, port, Instant::now() + timeout).await {
        Ok(stream) => {
            drop(stream);
            Verdict::Success(None)
        }
        Err(e) => Verdict::Failure(e.to_string()),
    }
}

/// Opens a TCP connection to `host` (an IPv4/IPv6 address, bracketed or not, or a name) by
/// `deadline`, trying each resolved address in turn.
pub(super) async fn dial(host: &str, port: u16, deadline: Instant) -> Result<TcpStream, DialError> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let addrs = resolve(bare, port, deadline).await?;
    let mut failure = DialError::Lookup {
        host: bare.to_string(),
        reason: "no such host".into(),
    };
    for addr in addrs {
        match timeout_at(deadline, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => return Ok(stream),
            Ok(Err(e)) => {
                failure = DialError::Connect {
                    addr: addr.to_string(),
                    reason: os_text(&e),
                }
            }
            Err(_) => {
                return Err(DialError::Timeout {
                    addr: addr.to_string(),
                });
            }
        }
    }
    Err(failure)
}

/// An IP address as is; a name through the system resolver (tokio's `lookup_host`).
async fn resolve(host: &str, port: u16, deadline: Instant) -> Result<Vec<SocketAddr>, DialError> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    match timeout_at(deadline, tokio::net::lookup_host((host, port))).await {
        Ok(Ok(addrs)) => Ok(addrs.collect()),
        Ok(Err(e)) => Err(DialError::Lookup {
            host: host.to_string(),
            reason: os_text(&e),
        }),
        Err(_) => Err(DialError::Timeout {
            addr: join_host_port(host, port),
        }),
    }
}

/// An OS error as Go prints it: `connection refused`, not `Connection refused (os error
/// 111)`; other errors as they are.
pub(super) fn os_text(e: &io::Error) -> String {
    let text = e.to_string();
    let Some(at) = text.find(" (os error") else {
        return text;
    };
    let mut chars = text[..at].chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    const OK: Duration = Duration::from_secs(5);

    /// A port nothing listens on (bound, then closed).
    async fn closed_port() -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        listener.local_addr().unwrap().port()
    }

    #[tokio::test]
    async fn open_port_succeeds() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        assert_eq!(
            tcp_probe("127.0.0.1", port, OK).await,
            Verdict::Success(None)
        );
        // A name resolves (localhost may give ::1 first: the next address is tried).
        assert_eq!(
            tcp_probe("localhost", port, OK).await,
            Verdict::Success(None)
        );
    }

    #[tokio::test]
    async fn refused_port_fails() {
        let port = closed_port().await;
        assert_eq!(
            tcp_probe("127.0.0.1", port, OK).await,
            Verdict::Failure(format!(
                "dial tcp 127.0.0.1:{port}: connect: connection refused"
            ))
        );
    }

    #[tokio::test]
    async fn ipv6_loopback() {
        // Skipped where the machine has no IPv6 loopback.
        let Ok(listener) = TcpListener::bind("[::1]:0").await else {
            return;
        };
        let port = listener.local_addr().unwrap().port();
        assert_eq!(tcp_probe("::1", port, OK).await, Verdict::Success(None));
        assert_eq!(tcp_probe("[::1]", port, OK).await, Verdict::Success(None));
        drop(listener);
        assert_eq!(
            tcp_probe("::1", port, OK).await,
            Verdict::Failure(format!(
                "dial tcp [::1]:{port}: connect: connection refused"
            ))
        );
    }

    #[tokio::test]
    async fn unroutable_fails_by_the_deadline() {
        // TEST-NET-1: either no route (an error at once) or silence (the deadline).
        let started = std::time::Instant::now();
        let verdict = tcp_probe("192.0.2.1", 80, Duration::from_millis(300)).await;
        let Verdict::Failure(text) = verdict else {
            panic!("{verdict:?}")
        };
        assert!(text.starts_with("dial tcp 192.0.2.1:80: "), "{text}");
        assert!(started.elapsed() < OK, "{:?}", started.elapsed());
    }

    #[test]
    fn os_texts_read_like_go() {
        let e = io::Error::from_raw_os_error(111);
        assert_eq!(os_text(&e), "connection refused");
        assert_eq!(os_text(&io::Error::other("EOF")), "EOF");
    }
}
