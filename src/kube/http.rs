//! HTTP/1.1 over TCP, optionally TLS: hyper 1 with hyper-util's pooled client-legacy (the
//! stack tonic already brings) and a small connector of our own (tokio TCP + tokio-rustls),
//! so there is one HTTP stack in the binary and no second TLS library.
//!
//! Owns: connecting (with a deadline), request deadlines, response size limits.
//! Must never: follow redirects or retry on its own (callers own their retry policy).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Uri};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client as LegacyClient;
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rustls_pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use super::ApiError;
use super::tls;

/// Deadline of the TCP connect plus the TLS handshake.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Idle pooled connections are closed after this.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// A finished response: status, headers and the whole body.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// A pooled HTTP/1.1 client. Cheap to clone.
#[derive(Clone)]
pub struct HttpClient {
    inner: LegacyClient<Connector, Full<Bytes>>,
}

impl HttpClient {
    /// `tls`: the rustls configuration for `https://` URLs (`None`: plain HTTP only);
    /// `server_name`: verify certificates against this name instead of the URL's host.
    pub fn new(
        tls: Option<Arc<rustls::ClientConfig>>,
        server_name: Option<&str>,
    ) -> Result<Self, ApiError> {
        let server_name = server_name.map(tls::server_name).transpose()?;
        let connector = Connector {
            tls: tls.map(TlsConnector::from),
            server_name,
        };
        let inner = LegacyClient::builder(TokioExecutor::new())
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .pool_timer(TokioTimer::new())
            .pool_max_idle_per_host(4)
            .build(connector);
        Ok(HttpClient { inner })
    }

    /// A client for a URL of the user's (`--manifest-url`): TLS with the system CAs for
    /// `https://`, plain HTTP otherwise.
    pub fn for_url(url: &str) -> Result<Self, ApiError> {
        let tls = if url.starts_with("https://") {
            Some(tls::client_config(&tls::TlsSettings::default())?)
        } else {
            None
        };
        HttpClient::new(tls, None)
    }

    /// Sends one request and reads the whole answer, within `timeout`; a body larger than
    /// `limit` bytes is an error.
    pub async fn request(
        &self,
        method: Method,
        url: &str,
        headers: &[(HeaderName, HeaderValue)],
        body: Option<Bytes>,
        timeout: Duration,
        limit: usize,
    ) -> Result<HttpResponse, ApiError> {
        let fut = async {
            let (status, headers, incoming) = self.send(&method, url, headers, body).await?;
            let collected = Limited::new(incoming, limit).collect().await.map_err(|e| {
                match e.downcast::<hyper::Error>() {
                    Ok(source) => ApiError::Body {
                        method: method.to_string(),
                        url: url.to_string(),
                        source: *source,
                    },
                    Err(_) => ApiError::TooLarge {
                        method: method.to_string(),
                        url: url.to_string(),
                        limit,
                    },
                }
            })?;
            Ok(HttpResponse {
                status,
                headers,
                body: collected.to_bytes(),
            })
        };
        tokio::time::timeout(timeout, fut)
            .await
            .map_err(|_| ApiError::Timeout {
                method: method.to_string(),
                url: url.to_string(),
                after: timeout,
            })?
    }

    /// Sends one request and returns as soon as the response head arrived (within
    /// `timeout`); the body streams (watches).
    pub async fn stream(
        &self,
        method: Method,
        url: &str,
        headers: &[(HeaderName, HeaderValue)],
        timeout: Duration,
    ) -> Result<(u16, HeaderMap, Incoming), ApiError> {
        tokio::time::timeout(timeout, self.send(&method, url, headers, None))
            .await
            .map_err(|_| ApiError::Timeout {
                method: method.to_string(),
                url: url.to_string(),
                after: timeout,
            })?
    }

    async fn send(
        &self,
        method: &Method,
        url: &str,
        headers: &[(HeaderName, HeaderValue)],
        body: Option<Bytes>,
    ) -> Result<(u16, HeaderMap, Incoming), ApiError> {
        let uri: Uri = url.parse().map_err(|_| ApiError::BadUrl {
            url: url.to_string(),
            reason: "not a valid URL",
        })?;
        match uri.scheme_str() {
            Some("http") | Some("https") => {}
            _ => {
                return Err(ApiError::BadUrl {
                    url: url.to_string(),
                    reason: "only http:// and https:// URLs are supported",
                });
            }
        }
        let mut req = Request::builder().method(method.clone()).uri(uri);
        for (name, value) in headers {
            req = req.header(name, value);
        }
        let req = req
            .body(Full::new(body.unwrap_or_default()))
            .map_err(ApiError::Request)?;
        let resp = self
            .inner
            .request(req)
            .await
            .map_err(|source| ApiError::Connect {
                method: method.to_string(),
                url: url.to_string(),
                source,
            })?;
        let (parts, body) = resp.into_parts();
        Ok((parts.status.as_u16(), parts.headers, body))
    }
}

// ---------------------------------------------------------------------------------------
// The connector

#[derive(Clone)]
struct Connector {
    tls: Option<TlsConnector>,
    server_name: Option<ServerName<'static>>,
}

type ConnectFuture = Pin<Box<dyn Future<Output = Result<Conn, io::Error>> + Send>>;

impl tower::Service<Uri> for Connector {
    type Response = Conn;
    type Error = io::Error;
    type Future = ConnectFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), io::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> ConnectFuture {
        let this = self.clone();
        Box::pin(async move {
            tokio::time::timeout(CONNECT_TIMEOUT, this.connect(uri))
                .await
                .map_err(|_| {
                    io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("no connection within {CONNECT_TIMEOUT:?}"),
                    )
                })?
        })
    }
}

impl Connector {
    async fn connect(self, uri: Uri) -> Result<Conn, io::Error> {
        let invalid = |m: &str| io::Error::new(io::ErrorKind::InvalidInput, m.to_string());
        let https = uri.scheme_str() == Some("https");
        let host = uri.host().ok_or_else(|| invalid("the URL has no host"))?;
        let bare_host = host.trim_start_matches('[').trim_end_matches(']');
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let tcp = TcpStream::connect((bare_host, port)).await?;
        tcp.set_nodelay(true)?;
        if !https {
            return Ok(Conn::Plain(TokioIo::new(tcp)));
        }
        let tls = self
            .tls
            .ok_or_else(|| invalid("https:// URL but no TLS configuration"))?;
        let name = match self.server_name {
            Some(n) => n,
            None => tls::server_name(bare_host).map_err(|e| invalid(&e.to_string()))?,
        };
        let stream = tls.connect(name, tcp).await.inspect_err(|e| {
            if let Some(problem) = clock_problem(e) {
                // One line per episode: every task retrying its calls meets the same wall.
                if !CLOCK_WARNED.swap(true, Ordering::Relaxed) {
                    log::warn!(
                        "{bare_host}:{port}: {problem}; is the clock set? (a board without a \
                         real-time clock waits for NTP: retrying meanwhile, static pods and \
                         the pods of the checkpoint run)"
                    );
                }
            }
        })?;
        if CLOCK_WARNED.swap(false, Ordering::Relaxed) {
            log::info!("{bare_host}:{port}: its certificate is valid at the clock now");
        }
        Ok(Conn::Tls(Box::new(TokioIo::new(stream))))
    }
}

/// Whether the "is the clock set?" line was written and no handshake succeeded since.
static CLOCK_WARNED: AtomicBool = AtomicBool::new(false);

/// A certificate refused for the time (the clock before its `notBefore` or after its
/// `notAfter`) anywhere in `err`'s chain: the sentence that says so, with both times.
pub fn clock_problem(err: &(dyn std::error::Error + 'static)) -> Option<String> {
    use rustls::CertificateError as C;
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cur {
        let rustls_err = e.downcast_ref::<rustls::Error>().or_else(|| {
            e.downcast_ref::<io::Error>()
                .and_then(|io| io.get_ref())
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        });
        if let Some(rustls::Error::InvalidCertificate(c)) = rustls_err {
            let at = |t: rustls_pki_types::UnixTime| {
                crate::clock::rfc3339(
                    i64::try_from(t.as_secs())
                        .unwrap_or(i64::MAX)
                        .saturating_mul(1_000_000_000),
                )
                .unwrap_or_else(|| "1970-01-01T00:00:00Z".into())
            };
            return match c {
                C::NotValidYetContext { time, not_before } => Some(format!(
                    "the clock reads {}, and the server's certificate is valid only from {}",
                    at(*time),
                    at(*not_before)
                )),
                C::ExpiredContext { time, not_after } => Some(format!(
                    "the clock reads {}, and the server's certificate expired at {}",
                    at(*time),
                    at(*not_after)
                )),
                C::NotValidYet => Some("the server's certificate is not valid yet".into()),
                C::Expired => Some("the server's certificate has expired".into()),
                _ => None,
            };
        }
        cur = e.source();
    }
    None
}

/// A connection: plain TCP or TLS over TCP.
enum Conn {
    Plain(TokioIo<TcpStream>),
    Tls(Box<TokioIo<TlsStream<TcpStream>>>),
}

impl Connection for Conn {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

impl hyper::rt::Read for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<Result<(), io::Error>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl hyper::rt::Write for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<Result<usize, io::Error>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), io::Error>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_flush(cx),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), io::Error>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
