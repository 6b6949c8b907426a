//! grpc probes (upstream `pkg/probe/grpc`): one `grpc.health.v1.Health/Check` over plain
//! HTTP/2 (h2c, no TLS: upstream sends no credentials either), on a connection our own
//! dialer opens, all within the probe's timeout.
//!
//! Owns: the generated health-protocol messages and client (they never leave this file).
//! Must never: keep the channel after the verdict.

use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::time::{Instant, timeout_at};
use tonic::Code;
use tonic::transport::{Channel, Endpoint, Uri};

use super::tcp::dial;
use super::{Verdict, join_host_port};
use crate::clock::go_duration;

crate::grpc::generated_module! {
    /// The generated `grpc.health.v1` messages, client and (with feature `fake-cri`, for
    /// the tests) server.
    mod proto {
        include!(concat!(env!("OUT_DIR"), "/grpc.health.v1.rs"));
    }
}

use proto::health_check_response::ServingStatus;
use proto::health_client::HealthClient;
use proto::{HealthCheckRequest, HealthCheckResponse};

/// A gRPC probe: `grpc.health.v1.Health/Check`; only SERVING succeeds.
pub(crate) async fn grpc_probe(host: &str, port: u16, service: &str, timeout: Duration) -> Verdict {
    let addr = join_host_port(host, port);
    let deadline = Instant::now() + timeout;
    // upstream: grpcProber.Probe — every way of not getting SERVING is a Failure.
    let channel = match timeout_at(deadline, connect(host, port, &addr, deadline)).await {
        Err(_) => {
            return Verdict::Failure(format!(
                "timeout: failed to connect service {addr:?} within {}: context deadline exceeded",
                go_duration(timeout)
            ));
        }
        Ok(Err(reason)) => {
            return Verdict::Failure(format!(
                "error: failed to connect service at {addr:?}: {reason}"
            ));
        }
        Ok(Ok(channel)) => channel,
    };
    let mut request = tonic::Request::new(HealthCheckRequest {
        service: service.to_string(),
    });
    // The server learns the deadline too (the `grpc-timeout` header), as with grpc-go.
    request.set_timeout(deadline.saturating_duration_since(Instant::now()));
    let mut client = HealthClient::new(channel);
    match timeout_at(deadline, client.check(request)).await {
        Err(_) => Verdict::Failure(rpc_timeout(timeout)),
        Ok(Err(status)) => Verdict::Failure(rpc_failure(&status, timeout)),
        Ok(Ok(response)) => serving(&response.into_inner()),
    }
}

/// Opens the HTTP/2 connection (eagerly, so a refused port shows here) over [`dial`].
async fn connect(
    host: &str,
    port: u16,
    addr: &str,
    deadline: Instant,
) -> Result<Channel, ConnectError> {
    // The URI is the :authority (`host:port`, as grpc-go sends); the connector ignores it.
    let endpoint = Endpoint::from_shared(format!("http://{addr}"))
        .map_err(|e| ConnectError::Uri(e.to_string()))?;
    let host = host.to_string();
    let connector = tower::service_fn(move |_: Uri| {
        let host = host.clone();
        async move {
            let stream = dial(&host, port, deadline)
                .await
                .map_err(std::io::Error::other)?;
            Ok::<_, std::io::Error>(TokioIo::new(stream))
        }
    });
    endpoint
        .connect_with_connector(connector)
        .await
        .map_err(ConnectError::Transport)
}

/// Why the connection was not made (the probe's failure says it).
#[derive(Debug)]
enum ConnectError {
    /// `host:port` is not a URI authority.
    Uri(String),
    /// Dialing or the HTTP/2 handshake failed: said by the deepest cause.
    Transport(tonic::transport::Error),
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::Uri(e) => f.write_str(e),
            ConnectError::Transport(e) => f.write_str(&innermost(e)),
        }
    }
}

impl std::error::Error for ConnectError {}

/// The deepest cause of an error (tonic wraps the dial error in `transport error`).
fn innermost(e: &(dyn std::error::Error + 'static)) -> String {
    let mut e = e;
    while let Some(source) = e.source() {
        e = source;
    }
    e.to_string()
}

/// The verdict on an answer: SERVING or not.
fn serving(response: &HealthCheckResponse) -> Verdict {
    match ServingStatus::try_from(response.status) {
        Ok(ServingStatus::Serving) => Verdict::Success(None),
        // Go prints an unknown enum value as its number.
        status => Verdict::Failure(format!(
            "service unhealthy (responded with {:?})",
            status.map_or_else(|_| response.status.to_string(), |s| s.as_str_name().into())
        )),
    }
}

fn rpc_timeout(timeout: Duration) -> String {
    format!(
        "timeout: health rpc did not complete within {}",
        go_duration(timeout)
    )
}

/// An RPC that ended with a status, worded as upstream.
fn rpc_failure(status: &tonic::Status, timeout: Duration) -> String {
    match status.code() {
        Code::Unimplemented => format!(
            "error: this server does not implement the grpc health protocol \
             (grpc.health.v1.Health): {}",
            status.message()
        ),
        Code::DeadlineExceeded => rpc_timeout(timeout),
        // tonic's own `grpc-timeout` enforcement ends the call as CANCELLED.
        Code::Cancelled if expired(status) => rpc_timeout(timeout),
        code => format!(
            "error: health rpc probe failed: rpc error: code = {} desc = {}",
            code_name(code),
            status.message()
        ),
    }
}

/// The call ran out of time on the client side (tonic's `TimeoutExpired` among the causes).
fn expired(status: &tonic::Status) -> bool {
    let mut cause = std::error::Error::source(status);
    while let Some(e) = cause {
        if e.is::<tonic::TimeoutExpired>() {
            return true;
        }
        cause = e.source();
    }
    false
}

/// A status code as grpc-go names it (`Unavailable`, `NotFound`; `Canceled` with one l).
fn code_name(code: Code) -> String {
    match code {
        Code::Cancelled => "Canceled".into(),
        code => format!("{code:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses() {
        let answer = |status: ServingStatus| HealthCheckResponse {
            status: status as i32,
        };
        assert_eq!(
            serving(&answer(ServingStatus::Serving)),
            Verdict::Success(None)
        );
        assert_eq!(
            serving(&answer(ServingStatus::NotServing)),
            Verdict::Failure("service unhealthy (responded with \"NOT_SERVING\")".into())
        );
        assert_eq!(
            serving(&HealthCheckResponse { status: 9 }),
            Verdict::Failure("service unhealthy (responded with \"9\")".into())
        );
        let timeout = Duration::from_secs(1);
        assert_eq!(
            rpc_failure(&tonic::Status::not_found("unknown service db"), timeout),
            "error: health rpc probe failed: rpc error: code = NotFound desc = unknown service db"
        );
        assert_eq!(
            rpc_failure(&tonic::Status::deadline_exceeded("late"), timeout),
            "timeout: health rpc did not complete within 1s"
        );
    }

    #[tokio::test]
    async fn refused() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        assert_eq!(
            grpc_probe("127.0.0.1", port, "", Duration::from_secs(5)).await,
            Verdict::Failure(format!(
                "error: failed to connect service at \"127.0.0.1:{port}\": \
                 dial tcp 127.0.0.1:{port}: connect: connection refused"
            ))
        );
    }

    #[tokio::test]
    async fn silent_server_times_out() {
        // Accepts the TCP connection but never speaks HTTP/2.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let hold = tokio::spawn(async move {
            let conn = listener.accept().await;
            std::future::pending::<()>().await;
            drop(conn);
        });
        let started = std::time::Instant::now();
        let verdict = grpc_probe("127.0.0.1", port, "", Duration::from_millis(300)).await;
        hold.abort();
        let Verdict::Failure(text) = verdict else {
            panic!("{verdict:?}")
        };
        assert!(text.starts_with("timeout: "), "{text}");
        assert!(text.contains("300ms"), "{text}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn is_send() {
        fn send<T: Send>(_: T) {}
        send(grpc_probe("127.0.0.1", 1, "", Duration::from_secs(1)));
    }

    /// A real tonic server (the `fake-cri` feature brings tonic's server side).
    #[cfg(feature = "fake-cri")]
    mod server {
        use super::*;
        use proto::health_server::{Health, HealthServer};
        use tonic::{Request, Response, Status};

        /// Answers by service name: "" SERVING, "down" NOT_SERVING, "hang" never, any other
        /// NOT_FOUND; `unimplemented` answers everything with UNIMPLEMENTED.
        #[derive(Clone)]
        struct Fake {
            unimplemented: bool,
        }

        #[tonic::async_trait]
        impl Health for Fake {
            async fn check(
                &self,
                request: Request<HealthCheckRequest>,
            ) -> Result<Response<HealthCheckResponse>, Status> {
                if self.unimplemented {
                    return Err(Status::unimplemented(
                        "unknown service grpc.health.v1.Health",
                    ));
                }
                let status = match request.into_inner().service.as_str() {
                    "" => ServingStatus::Serving,
                    "down" => ServingStatus::NotServing,
                    "hang" => std::future::pending().await,
                    other => return Err(Status::not_found(format!("unknown service {other}"))),
                };
                Ok(Response::new(HealthCheckResponse {
                    status: status as i32,
                }))
            }
        }

        async fn serve(fake: Fake) -> u16 {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            let incoming = futures_util::stream::unfold(listener, |listener| async move {
                let conn = listener.accept().await.map(|(io, _)| io);
                Some((conn, listener))
            });
            tokio::spawn(
                tonic::transport::Server::builder()
                    .serve_with_incoming(HealthServer::new(fake), incoming),
            );
            port
        }

        const OK: Duration = Duration::from_secs(5);

        #[tokio::test]
        async fn answers() {
            let port = serve(Fake {
                unimplemented: false,
            })
            .await;
            assert_eq!(
                grpc_probe("127.0.0.1", port, "", OK).await,
                Verdict::Success(None)
            );
            assert_eq!(
                grpc_probe("localhost", port, "", OK).await,
                Verdict::Success(None)
            );
            assert_eq!(
                grpc_probe("127.0.0.1", port, "down", OK).await,
                Verdict::Failure("service unhealthy (responded with \"NOT_SERVING\")".into())
            );
            assert_eq!(
                grpc_probe("127.0.0.1", port, "db", OK).await,
                Verdict::Failure(
                    "error: health rpc probe failed: rpc error: code = NotFound \
                     desc = unknown service db"
                        .into()
                )
            );
            assert_eq!(
                grpc_probe("127.0.0.1", port, "hang", Duration::from_millis(300)).await,
                Verdict::Failure("timeout: health rpc did not complete within 300ms".into())
            );
        }

        #[tokio::test]
        async fn unimplemented() {
            let port = serve(Fake {
                unimplemented: true,
            })
            .await;
            assert_eq!(
                grpc_probe("127.0.0.1", port, "", OK).await,
                Verdict::Failure(
                    "error: this server does not implement the grpc health protocol \
                     (grpc.health.v1.Health): unknown service grpc.health.v1.Health"
                        .into()
                )
            );
        }
    }
}
