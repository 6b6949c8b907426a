//! httpGet probes and hooks (upstream `pkg/probe/http`, `NewRequestForHTTPGetAction`, the
//! lifecycle `runHTTPHandler`): one HTTP/1.1 GET written by hand over a tokio `TcpStream`
//! (TLS by rustls, not verified, with feature `apiserver`), its same-host redirects, and the
//! first [`MAX_OUTPUT`] bytes of the answer's body.
//!
//! Owns: the request (target, headers), the response head and body framing (length,
//! chunked, until EOF), the redirect policy, and the deadline over all of it.
//! Must never: keep a connection alive, ask for compression, use a proxy, follow a redirect
//! to another host, or read past [`MAX_OUTPUT`] body bytes.

use std::time::Duration;

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::time::{Instant, timeout_at};

use super::tcp::{DialError, dial, os_text};
use super::{HttpTarget, MAX_OUTPUT, Verdict, join_host_port};

/// upstream: Go's redirect policy, which the probe's checker keeps — ten requests at most,
/// so the tenth redirect fails.
const MAX_REQUESTS: usize = 10;
/// A response head (status line and headers) larger than this is refused.
const MAX_HEAD: u64 = 64 * 1024;

/// An HTTP probe: success for 200 ≤ status < 400.
pub(crate) async fn http_probe(
    target: &HttpTarget<'_>,
    user_agent: &str,
    timeout: Duration,
) -> Verdict {
    let request = match Request::new(target, user_agent) {
        Ok(request) => request,
        Err(reason) => return Verdict::Error(reason.to_string()),
    };
    // upstream: DoHTTPProbe — a failed request is a Failure with the error's text.
    match request.fetch(Instant::now() + timeout, true).await {
        Ok(answer) => verdict(answer.status, &answer.body),
        Err(failed) => Verdict::Failure(failed.to_string()),
    }
}

/// An HTTP lifecycle hook: fails only when no answer arrives (upstream ignores the status).
pub(crate) async fn http_hook(
    target: &HttpTarget<'_>,
    user_agent: &str,
    timeout: Duration,
) -> Result<(), HookError> {
    let request = Request::new(target, user_agent).map_err(HookError::Request)?;
    // kubelet: runHTTPHandler — any response will do; the body is not waited for.
    match request.fetch(Instant::now() + timeout, false).await {
        Ok(_) => Ok(()),
        Err(failed) => Err(HookError::Failed(failed)),
    }
}

/// The probe's verdict on the last response.
fn verdict(status: u16, body: &[u8]) -> Verdict {
    match status {
        200..=299 => Verdict::Success(None),
        // upstream: a 3xx that was not followed (another host, no Location) is a success
        // with a warning.
        300..=399 => Verdict::Success(Some(format!(
            "Probe terminated redirects, Response body: {}",
            String::from_utf8_lossy(body)
        ))),
        _ => Verdict::Failure(format!("HTTP probe failed with statuscode: {status}")),
    }
}

// ---------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------

/// Why an HTTP hook failed: its request could not be made, or got no answer.
#[derive(Debug)]
pub(crate) enum HookError {
    Request(FetchError),
    Failed(Failed),
}

impl std::fmt::Display for HookError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HookError::Request(e) => write!(f, "{e}"),
            HookError::Failed(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for HookError {}

/// Why a request got no usable answer (or could not be made); the texts follow Go's
/// `net/http` client.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FetchError {
    #[error(transparent)]
    Dial(#[from] DialError),
    #[cfg(feature = "apiserver")]
    #[error("tls: {0}")]
    Tls(String),
    #[error("https probes need picolet built with the apiserver feature (TLS)")]
    NoTls,
    #[error("invalid HTTP header name {0:?}")]
    HeaderName(String),
    #[error("invalid HTTP header value for {0:?}")]
    HeaderValue(String),
    #[error("{op}: {reason}")]
    Io { op: &'static str, reason: String },
    /// The server closed the connection before answering.
    #[error("EOF")]
    Eof,
    #[error("unexpected EOF")]
    UnexpectedEof,
    #[error("malformed HTTP response {0:?}")]
    Malformed(String),
    #[error("context deadline exceeded (Client.Timeout exceeded while awaiting headers)")]
    HeadTimeout,
    #[error(
        "context deadline exceeded (Client.Timeout or context cancellation while reading body)"
    )]
    BodyTimeout,
    #[error("stopped after {MAX_REQUESTS} redirects")]
    TooManyRedirects,
    #[error("failed to parse Location header {location:?}: {reason}")]
    BadLocation {
        location: String,
        reason: &'static str,
    },
}

impl FetchError {
    fn read(e: &std::io::Error) -> Self {
        FetchError::Io {
            op: "read",
            reason: os_text(e),
        }
    }
}

/// A failed GET, printed as Go's `url.Error`: `Get "http://10.0.0.1:80/x": <reason>`.
#[derive(Debug, thiserror::Error)]
#[error("Get \"{url}\": {error}")]
pub(crate) struct Failed {
    url: String,
    error: FetchError,
}

// ---------------------------------------------------------------------------------------
// URLs
// ---------------------------------------------------------------------------------------

/// Where a request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Url {
    https: bool,
    /// Without brackets.
    host: String,
    port: u16,
    /// The request target: `/path?query`, escaped.
    target: String,
}

impl std::fmt::Display for Url {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.https { "https" } else { "http" };
        write!(f, "{scheme}://{}{}", self.authority(), self.target)
    }
}

impl Url {
    fn authority(&self) -> String {
        join_host_port(&self.host, self.port)
    }

    /// The next URL after a redirect to `location` (absolute, scheme-relative, absolute
    /// path, query only, or relative to the current path).
    fn join(&self, location: &str) -> Result<Url, FetchError> {
        let bad = |reason| FetchError::BadLocation {
            location: location.to_string(),
            reason,
        };
        let lower = location.to_ascii_lowercase();
        if lower.starts_with("http://") || lower.starts_with("https://") {
            let https = lower.starts_with("https://");
            let rest = &location[if https { 8 } else { 7 }..];
            return Url::absolute(https, rest).ok_or_else(|| bad("invalid host or port"));
        }
        if let Some(rest) = location.strip_prefix("//") {
            return Url::absolute(self.https, rest).ok_or_else(|| bad("invalid host or port"));
        }
        if location.contains("://") {
            return Err(bad("unsupported protocol scheme"));
        }
        let path = self.target.split('?').next().unwrap_or("/");
        let target = if location.starts_with('/') {
            location.to_string()
        } else if location.starts_with('?') {
            format!("{path}{location}")
        } else {
            // Relative: replaces the last segment (dot segments are not resolved).
            let dir = &path[..path.rfind('/').map_or(0, |at| at + 1)];
            format!("{dir}{location}")
        };
        Ok(Url {
            target: request_target(&target),
            ..self.clone()
        })
    }

    /// `host[:port][/path]` of an absolute URL (userinfo dropped).
    fn absolute(https: bool, rest: &str) -> Option<Url> {
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(end);
        let authority = authority.rsplit('@').next().unwrap_or(authority);
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (host, after) = v6.split_once(']')?;
            (host, after.strip_prefix(':'))
        } else {
            match authority.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (authority, None),
            }
        };
        let port = match port {
            Some(port) => port.parse().ok()?,
            None if https => 443,
            None => 80,
        };
        if host.is_empty() {
            return None;
        }
        Some(Url {
            https,
            host: host.to_string(),
            port,
            target: request_target(path),
        })
    }
}

/// A Location naming its host (`http://…`, `https://…`, `//…`).
fn is_absolute(location: &str) -> bool {
    location.starts_with("//") || location.contains("://")
}

/// kubelet: `formatURL` — the path as given, with `/` added in front when missing; bytes
/// that may not appear in a request target are %-escaped; a `#fragment` is not sent.
fn request_target(path: &str) -> String {
    let path = path.split('#').next().unwrap_or("");
    let mut out = String::with_capacity(path.len() + 1);
    if !path.starts_with('/') {
        out.push('/');
    }
    for &b in path.as_bytes() {
        if b <= b' ' || b >= 0x7f || b"\"<>\\^`{|}".contains(&b) {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push(char::from(b));
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// The request
// ---------------------------------------------------------------------------------------

/// A GET ready to send: where, the user's `Host`, and the other header lines.
#[derive(Debug)]
struct Request {
    url: Url,
    /// The user's `Host` header (else `host:port` of the URL).
    host: Option<String>,
    /// `Name: value\r\n` lines, `Host` excluded.
    lines: String,
}

/// The answer a fetch ends with.
#[derive(Debug)]
struct Answer {
    status: u16,
    body: Vec<u8>,
}

impl Request {
    /// kubelet: `NewRequestForHTTPGetAction` + `newProbeRequest`. Fails (the probe errors)
    /// on a header that cannot be sent, or an https target in a build without TLS.
    fn new(target: &HttpTarget<'_>, user_agent: &str) -> Result<Request, FetchError> {
        if target.https && !cfg!(feature = "apiserver") {
            return Err(FetchError::NoTls);
        }
        for (name, value) in target.headers {
            check_header(name, value)?;
        }
        Ok(Request {
            url: Url {
                https: target.https,
                host: target
                    .host
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_string(),
                port: target.port,
                target: request_target(target.path),
            },
            host: first(target.headers, "host")
                .filter(|host| !host.is_empty())
                .map(str::to_string),
            lines: header_lines(target.headers, user_agent),
        })
    }

    /// Sends the request, follows same-host redirects, and reads the last answer (its body
    /// only when `want_body`), all by `deadline`.
    async fn fetch(&self, deadline: Instant, want_body: bool) -> Result<Answer, Failed> {
        let mut url = self.url.clone();
        let mut host = self.host.clone();
        let mut sent = 0;
        loop {
            sent += 1;
            let failed = |url: &Url| {
                let url = url.to_string();
                move |error| Failed { url, error }
            };
            let host_header = host.clone().unwrap_or_else(|| url.authority());
            let (head, mut reader) = self
                .exchange(&url, &host_header, deadline)
                .await
                .map_err(failed(&url))?;
            let next = match head.location.as_deref().filter(|_| head.redirects()) {
                Some(location) => Some((url.join(location).map_err(failed(&url))?, location)),
                None => None,
            };
            match next {
                // upstream: RedirectChecker(followNonLocalRedirects=false) — a redirect to
                // another host ends the chain with this answer.
                Some((next, location)) if next.host == self.url.host => {
                    if sent >= MAX_REQUESTS {
                        return Err(failed(&next)(FetchError::TooManyRedirects));
                    }
                    // Go: a custom Host survives only a relative Location.
                    if is_absolute(location) {
                        host = None;
                    }
                    url = next;
                }
                _ => {
                    let body = if want_body {
                        read_body(&mut reader, &head, deadline)
                            .await
                            .map_err(failed(&url))?
                    } else {
                        Vec::new()
                    };
                    return Ok(Answer {
                        status: head.status,
                        body,
                    });
                }
            }
        }
    }

    /// One request on a new connection: connect, write, read the response head.
    async fn exchange(
        &self,
        url: &Url,
        host: &str,
        deadline: Instant,
    ) -> Result<(Head, BufReader<Conn>), FetchError> {
        let mut conn = connect(url, deadline).await?;
        let text = format!(
            "GET {} HTTP/1.1\r\nHost: {host}\r\n{}\r\n",
            url.target, self.lines
        );
        let write = async {
            conn.write_all(text.as_bytes()).await?;
            conn.flush().await
        };
        match timeout_at(deadline, write).await {
            Err(_) => return Err(FetchError::HeadTimeout),
            Ok(Err(e)) => {
                return Err(FetchError::Io {
                    op: "write",
                    reason: os_text(&e),
                });
            }
            Ok(Ok(())) => {}
        }
        let mut reader = BufReader::new(conn);
        let head = timeout_at(deadline, read_head(&mut reader))
            .await
            .map_err(|_| FetchError::HeadTimeout)??;
        Ok((head, reader))
    }
}

/// A header the request line format can carry: a token name, a value without CR, LF, NUL.
fn check_header(name: &str, value: &str) -> Result<(), FetchError> {
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if name.is_empty() || !name.bytes().all(token) {
        return Err(FetchError::HeaderName(name.to_string()));
    }
    if value.bytes().any(|b| matches!(b, b'\r' | b'\n' | 0)) {
        return Err(FetchError::HeaderValue(name.to_string()));
    }
    Ok(())
}

/// The first value of a header, by case-insensitive name.
fn first<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// Header lines after `Host`: the user's, then the defaults they did not give.
fn header_lines(headers: &[(String, String)], user_agent: &str) -> String {
    let mut lines = String::new();
    let mut add = |name: &str, value: &str| {
        lines.push_str(name);
        lines.push_str(": ");
        lines.push_str(value);
        lines.push_str("\r\n");
    };
    // kubelet: newProbeRequest — a User-Agent given wins (Go sends only its first value,
    // none when empty); an Accept given wins, and an empty one removes Accept.
    let agent = first(headers, "user-agent").unwrap_or(user_agent);
    if !agent.is_empty() {
        add("User-Agent", agent);
    }
    let accept = first(headers, "accept");
    if accept.is_none() {
        add("Accept", "*/*");
    }
    for (name, value) in headers {
        let skip = name.eq_ignore_ascii_case("host")
            || name.eq_ignore_ascii_case("user-agent")
            || (name.eq_ignore_ascii_case("accept") && accept == Some(""));
        if !skip {
            add(name, value);
        }
    }
    // upstream: the probe transport disables keep-alives (and compression: no
    // Accept-Encoding).
    add("Connection", "close");
    lines
}

// ---------------------------------------------------------------------------------------
// Connections
// ---------------------------------------------------------------------------------------

/// A connection, plain or TLS.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}
type Conn = Box<dyn Io>;

/// Dials `url` and, for https, shakes hands.
async fn connect(url: &Url, deadline: Instant) -> Result<Conn, FetchError> {
    let tcp = dial(&url.host, url.port, deadline).await?;
    if url.https {
        tls::handshake(tcp, &url.host, deadline).await
    } else {
        Ok(Box::new(tcp))
    }
}

#[cfg(feature = "apiserver")]
mod tls {
    //! TLS without certificate verification (upstream: `InsecureSkipVerify: true`), from the
    //! apiserver's rustls configuration with `insecure-skip-tls-verify`.

    use std::sync::{Arc, OnceLock};

    use rustls_pki_types::ServerName;
    use tokio::net::TcpStream;
    use tokio::time::{Instant, timeout_at};
    use tokio_rustls::TlsConnector;

    use super::{Conn, FetchError};
    use crate::kube::tls::{TlsSettings, client_config};

    /// Built once: the same for every probe.
    fn config() -> Result<Arc<rustls::ClientConfig>, FetchError> {
        static CONFIG: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
        if let Some(config) = CONFIG.get() {
            return Ok(Arc::clone(config));
        }
        let settings = TlsSettings {
            insecure_skip_verify: true,
            ..TlsSettings::default()
        };
        let config = client_config(&settings).map_err(|e| FetchError::Tls(e.to_string()))?;
        Ok(Arc::clone(CONFIG.get_or_init(|| config)))
    }

    /// The handshake; SNI is the host when it is a name, none for an IP (rustls sends no SNI
    /// for an IP address).
    pub(super) async fn handshake(
        tcp: TcpStream,
        host: &str,
        deadline: Instant,
    ) -> Result<Conn, FetchError> {
        let name = ServerName::try_from(host.to_string())
            .map_err(|_| FetchError::Tls(format!("invalid server name {host:?}")))?;
        let connector = TlsConnector::from(config()?);
        match timeout_at(deadline, connector.connect(name, tcp)).await {
            Err(_) => Err(FetchError::HeadTimeout),
            Ok(Err(e)) => Err(FetchError::Tls(e.to_string())),
            Ok(Ok(stream)) => Ok(Box::new(stream)),
        }
    }
}

#[cfg(not(feature = "apiserver"))]
mod tls {
    //! No TLS in this build: an https URL (a redirect to one) cannot be fetched.

    use tokio::net::TcpStream;
    use tokio::time::Instant;

    use super::{Conn, FetchError};

    pub(super) async fn handshake(
        _tcp: TcpStream,
        _host: &str,
        _deadline: Instant,
    ) -> Result<Conn, FetchError> {
        Err(FetchError::NoTls)
    }
}

// ---------------------------------------------------------------------------------------
// The response
// ---------------------------------------------------------------------------------------

/// What picolet needs of a response head.
#[derive(Debug, Default)]
struct Head {
    status: u16,
    location: Option<String>,
    length: Option<u64>,
    chunked: bool,
}

impl Head {
    /// upstream (Go's client): these statuses redirect when they carry a Location.
    fn redirects(&self) -> bool {
        matches!(self.status, 301 | 302 | 303 | 307 | 308)
    }

    /// No body may follow.
    fn bodiless(&self) -> bool {
        (100..200).contains(&self.status) || self.status == 204 || self.status == 304
    }
}

/// Reads the status line and the headers; interim 1xx answers (but 101) are skipped, as
/// Go's transport does.
async fn read_head<R: AsyncBufRead + Unpin>(reader: &mut R) -> Result<Head, FetchError> {
    let mut budget = MAX_HEAD;
    loop {
        let status_line = match read_line(reader, &mut budget).await? {
            Some(line) => line,
            None => return Err(FetchError::Eof),
        };
        let mut head = Head {
            status: parse_status(&status_line)?,
            ..Head::default()
        };
        loop {
            let line = read_line(reader, &mut budget)
                .await?
                .ok_or(FetchError::UnexpectedEof)?;
            if line.is_empty() {
                break;
            }
            add_header(&mut head, &line)?;
        }
        if !(100..200).contains(&head.status) || head.status == 101 {
            return Ok(head);
        }
    }
}

/// `HTTP/1.x NNN reason` → NNN.
fn parse_status(line: &str) -> Result<u16, FetchError> {
    let malformed = || FetchError::Malformed(line.chars().take(64).collect());
    let rest = line.strip_prefix("HTTP/").ok_or_else(malformed)?;
    let code = rest.split(' ').nth(1).ok_or_else(malformed)?;
    match code.parse::<u16>() {
        Ok(code) if code.to_string().len() == 3 => Ok(code),
        _ => Err(malformed()),
    }
}

/// Notes the headers that matter: Location, Content-Length, Transfer-Encoding.
fn add_header(head: &mut Head, line: &str) -> Result<(), FetchError> {
    let Some((name, value)) = line.split_once(':') else {
        return Err(FetchError::Malformed(line.chars().take(64).collect()));
    };
    let value = value.trim();
    if name.eq_ignore_ascii_case("location") && head.location.is_none() {
        head.location = Some(value.to_string());
    } else if name.eq_ignore_ascii_case("content-length") {
        head.length = value.parse().ok();
    } else if name.eq_ignore_ascii_case("transfer-encoding") {
        head.chunked = value.to_ascii_lowercase().contains("chunked");
    }
    Ok(())
}

/// One line without its CR LF; `None` at EOF before any byte. Counts against `budget`.
async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    budget: &mut u64,
) -> Result<Option<String>, FetchError> {
    let mut line = Vec::new();
    let n = (&mut *reader)
        .take(*budget)
        .read_until(b'\n', &mut line)
        .await
        .map_err(|e| FetchError::read(&e))?;
    *budget -= n as u64;
    if n == 0 {
        return if *budget == 0 {
            Err(FetchError::Malformed("response head too large".into()))
        } else {
            Ok(None)
        };
    }
    if line.last() != Some(&b'\n') {
        return Err(if *budget == 0 {
            FetchError::Malformed("response head too large".into())
        } else {
            FetchError::UnexpectedEof
        });
    }
    while matches!(line.last(), Some(b'\n' | b'\r')) {
        line.pop();
    }
    Ok(Some(String::from_utf8_lossy(&line).into_owned()))
}

/// The first [`MAX_OUTPUT`] bytes of the body, by `deadline`. A body cut short by the
/// server is kept as it came.
async fn read_body<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    head: &Head,
    deadline: Instant,
) -> Result<Vec<u8>, FetchError> {
    if head.bodiless() {
        return Ok(Vec::new());
    }
    let read = async {
        let mut body = Vec::new();
        if head.chunked {
            read_chunked(reader, &mut body).await?;
        } else {
            let limit = head
                .length
                .map_or(MAX_OUTPUT as u64, |n| n.min(MAX_OUTPUT as u64));
            (&mut *reader)
                .take(limit)
                .read_to_end(&mut body)
                .await
                .map_err(|e| FetchError::read(&e))?;
        }
        Ok(body)
    };
    timeout_at(deadline, read)
        .await
        .map_err(|_| FetchError::BodyTimeout)?
}

/// A chunked body, up to [`MAX_OUTPUT`] bytes (trailers are not read).
async fn read_chunked<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    body: &mut Vec<u8>,
) -> Result<(), FetchError> {
    let mut budget = MAX_HEAD;
    while body.len() < MAX_OUTPUT {
        let Some(line) = read_line(reader, &mut budget).await? else {
            return Ok(());
        };
        let size = line.split(';').next().unwrap_or("").trim();
        let size = u64::from_str_radix(size, 16)
            .map_err(|_| FetchError::Malformed(format!("bad chunk size {size:?}")))?;
        if size == 0 {
            return Ok(());
        }
        let want = size.min((MAX_OUTPUT - body.len()) as u64);
        let got = (&mut *reader)
            .take(want)
            .read_to_end(body)
            .await
            .map_err(|e| FetchError::read(&e))?;
        if (got as u64) < size {
            return Ok(()); // the limit, or the server stopped short
        }
        read_line(reader, &mut budget).await?; // the CR LF after the chunk
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tokio::io::AsyncWriteExt;
    use tokio::net::{TcpListener, TcpStream};
    use tokio::sync::mpsc;

    /// For what must succeed: generous, the machine may be loaded.
    const OK: Duration = Duration::from_secs(5);
    /// For what must fail by the deadline.
    const SHORT: Duration = Duration::from_millis(300);
    const UA: &str = "kube-probe/1.34";

    type Answer = Arc<dyn Fn(&str) -> Option<Vec<u8>> + Send + Sync>;

    /// A server on 127.0.0.1: every request head goes to the channel; `answer` gives the
    /// bytes to send back, then the connection closes (`None`: never answer).
    async fn serve(
        answer: impl Fn(&str) -> Option<Vec<u8>> + Send + Sync + 'static,
    ) -> (u16, mpsc::UnboundedReceiver<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (tx, rx) = mpsc::unbounded_channel();
        let answer: Answer = Arc::new(answer);
        tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                tokio::spawn(handle(conn, tx.clone(), Arc::clone(&answer)));
            }
        });
        (port, rx)
    }

    async fn handle(mut conn: TcpStream, tx: mpsc::UnboundedSender<String>, answer: Answer) {
        let head = read_request(&mut conn).await;
        let reply = answer(&head);
        let _ = tx.send(head);
        match reply {
            Some(bytes) => {
                let _ = conn.write_all(&bytes).await;
                let _ = conn.shutdown().await;
            }
            None => std::future::pending::<()>().await,
        }
    }

    /// The request head, up to the empty line.
    async fn read_request<S: AsyncRead + Unpin>(conn: &mut S) -> String {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            match conn.read(&mut byte).await {
                Ok(1) => head.push(byte[0]),
                _ => break,
            }
        }
        String::from_utf8_lossy(&head).into_owned()
    }

    /// The request target of a request head.
    fn path(head: &str) -> &str {
        head.split(' ').nth(1).unwrap_or("")
    }

    fn response(status: u16, headers: &str, body: &str) -> Vec<u8> {
        format!(
            "HTTP/1.1 {status} Whatever\r\nContent-Length: {}\r\n{headers}\r\n{body}",
            body.len()
        )
        .into_bytes()
    }

    fn target<'a>(port: u16, path: &'a str, headers: &'a [(String, String)]) -> HttpTarget<'a> {
        HttpTarget {
            https: false,
            host: "127.0.0.1",
            port,
            path,
            headers,
        }
    }

    fn headers(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    async fn closed_port() -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        listener.local_addr().unwrap().port()
    }

    #[tokio::test]
    async fn ok_and_the_default_headers() {
        let (port, mut seen) = serve(|_| Some(response(200, "", "ok"))).await;
        let verdict = http_probe(&target(port, "/healthz", &[]), UA, OK).await;
        assert_eq!(verdict, Verdict::Success(None));
        let head = seen.recv().await.unwrap();
        assert!(head.starts_with("GET /healthz HTTP/1.1\r\n"), "{head}");
        for line in [
            format!("Host: 127.0.0.1:{port}\r\n"),
            "User-Agent: kube-probe/1.34\r\n".into(),
            "Accept: */*\r\n".into(),
            "Connection: close\r\n".into(),
        ] {
            assert!(head.contains(&line), "{line:?} not in {head}");
        }
        assert!(
            !head.to_ascii_lowercase().contains("accept-encoding"),
            "{head}"
        );
    }

    #[tokio::test]
    async fn error_status_fails() {
        let (port, _seen) = serve(|_| Some(response(503, "", "busy"))).await;
        assert_eq!(
            http_probe(&target(port, "/", &[]), UA, OK).await,
            Verdict::Failure("HTTP probe failed with statuscode: 503".into())
        );
        let (port, _seen) = serve(|_| Some(response(404, "", ""))).await;
        assert_eq!(
            http_probe(&target(port, "/", &[]), UA, OK).await,
            Verdict::Failure("HTTP probe failed with statuscode: 404".into())
        );
    }

    #[tokio::test]
    async fn path_without_slash_with_query() {
        let (port, mut seen) = serve(|_| Some(response(200, "", ""))).await;
        for (given, sent) in [
            ("healthz?verbose=1&x=y", "/healthz?verbose=1&x=y"),
            ("", "/"),
            ("/a b", "/a%20b"),
            ("/x#frag", "/x"),
        ] {
            let verdict = http_probe(&target(port, given, &[]), UA, OK).await;
            assert_eq!(verdict, Verdict::Success(None), "{given}");
            assert_eq!(path(&seen.recv().await.unwrap()), sent, "{given}");
        }
    }

    #[tokio::test]
    async fn custom_headers_replace_the_defaults() {
        let (port, mut seen) = serve(|_| Some(response(200, "", ""))).await;
        let given = headers(&[
            ("X-Token", "abc"),
            ("accept", "application/json"),
            ("user-agent", "mine/2"),
        ]);
        let verdict = http_probe(&target(port, "/", &given), UA, OK).await;
        assert_eq!(verdict, Verdict::Success(None));
        let head = seen.recv().await.unwrap();
        assert!(head.contains("X-Token: abc\r\n"), "{head}");
        assert!(head.contains("accept: application/json\r\n"), "{head}");
        assert!(head.contains("User-Agent: mine/2\r\n"), "{head}");
        assert!(!head.contains("kube-probe"), "{head}");
        assert!(!head.contains("*/*"), "{head}");

        // An empty Accept removes it; an empty User-Agent sends none.
        let given = headers(&[("Accept", ""), ("User-Agent", ""), ("X-User-Agent", "")]);
        http_probe(&target(port, "/", &given), UA, OK).await;
        let head = seen.recv().await.unwrap();
        assert!(!head.to_ascii_lowercase().contains("accept"), "{head}");
        assert!(!head.contains("\r\nUser-Agent"), "{head}");
        assert!(head.contains("\r\nX-User-Agent: \r\n"), "{head}");
    }

    #[tokio::test]
    async fn host_header_override() {
        let (port, mut seen) = serve(|_| Some(response(200, "", ""))).await;
        let given = headers(&[("host", "web.example:8080")]);
        let verdict = http_probe(&target(port, "/", &given), UA, OK).await;
        assert_eq!(verdict, Verdict::Success(None));
        let head = seen.recv().await.unwrap();
        assert!(head.contains("Host: web.example:8080\r\n"), "{head}");
        assert_eq!(
            head.to_ascii_lowercase().matches("host:").count(),
            1,
            "{head}"
        );
    }

    #[tokio::test]
    async fn bad_header_is_an_error() {
        let given = headers(&[("bad name", "x")]);
        assert_eq!(
            http_probe(&target(1, "/", &given), UA, OK).await,
            Verdict::Error("invalid HTTP header name \"bad name\"".into())
        );
        let given = headers(&[("X-A", "a\r\nX-B: b")]);
        assert!(matches!(
            http_probe(&target(1, "/", &given), UA, OK).await,
            Verdict::Error(_)
        ));
    }

    #[tokio::test]
    async fn same_host_redirects_are_followed() {
        let (port, mut seen) = serve(|head| {
            Some(match path(head) {
                "/old" => response(301, "Location: /new\r\n", ""),
                "/new" => response(302, "Location: deeper/x?q=1\r\n", ""),
                "/deeper/x?q=1" => {
                    let host = head.split("Host: ").nth(1)?.split("\r\n").next()?;
                    response(307, &format!("Location: http://{host}/abs\r\n"), "")
                }
                "/abs" => response(200, "", "done"),
                _ => response(404, "", ""),
            })
        })
        .await;
        let verdict = http_probe(&target(port, "/old", &[]), UA, OK).await;
        assert_eq!(verdict, Verdict::Success(None));
        let mut paths = Vec::new();
        while let Ok(head) = seen.try_recv() {
            paths.push(path(&head).to_string());
        }
        assert_eq!(paths, ["/old", "/new", "/deeper/x?q=1", "/abs"]);
    }

    #[tokio::test]
    async fn redirect_to_another_host_is_a_warning() {
        let (port, mut seen) = serve(|head| {
            let port = head
                .split("Host: 127.0.0.1:")
                .nth(1)?
                .split("\r\n")
                .next()?;
            let location = format!("Location: http://localhost:{port}/elsewhere\r\n");
            Some(response(302, &location, "moved"))
        })
        .await;
        assert_eq!(
            http_probe(&target(port, "/", &[]), UA, OK).await,
            Verdict::Success(Some(
                "Probe terminated redirects, Response body: moved".into()
            ))
        );
        seen.recv().await.unwrap();
        assert!(seen.try_recv().is_err(), "the redirect was followed");
    }

    /// `/r0` → `/r1` → … → `/r{redirects}` answers 200.
    async fn chain(redirects: usize) -> (u16, Verdict) {
        let (port, _seen) = serve(move |head| {
            let n: usize = path(head).strip_prefix("/r")?.parse().ok()?;
            Some(if n < redirects {
                response(302, &format!("Location: /r{}\r\n", n + 1), "")
            } else {
                response(200, "", "")
            })
        })
        .await;
        (port, http_probe(&target(port, "/r0", &[]), UA, OK).await)
    }

    #[tokio::test]
    async fn redirects_stop_at_ten_requests() {
        // upstream (Go): ten requests at most — nine redirects are followed, the tenth fails.
        assert_eq!(chain(9).await.1, Verdict::Success(None));
        for redirects in [10, 11] {
            let (port, verdict) = chain(redirects).await;
            assert_eq!(
                verdict,
                Verdict::Failure(format!(
                    "Get \"http://127.0.0.1:{port}/r10\": stopped after 10 redirects"
                ))
            );
        }
    }

    #[tokio::test]
    async fn large_bodies_are_cut_not_failed() {
        let big = "x".repeat(100 * 1024);
        let length = response(200, "", &big);
        let mut chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        for _ in 0..20 {
            chunked.extend_from_slice(format!("1f40\r\n{}\r\n", "y".repeat(8000)).as_bytes());
        }
        chunked.extend_from_slice(b"0\r\n\r\n");
        let until_eof = format!("HTTP/1.1 200 OK\r\n\r\n{big}").into_bytes();
        for body in [length, chunked, until_eof] {
            let (port, _seen) = serve(move |_| Some(body.clone())).await;
            assert_eq!(
                http_probe(&target(port, "/", &[]), UA, OK).await,
                Verdict::Success(None)
            );
        }
        // The body read is capped at MAX_OUTPUT (the 3xx warning shows it).
        let (port, _seen) = serve(move |_| Some(response(300, "", &big))).await;
        let Verdict::Success(Some(warning)) = http_probe(&target(port, "/", &[]), UA, OK).await
        else {
            panic!("not a warning")
        };
        let prefix = "Probe terminated redirects, Response body: ".len();
        assert_eq!(warning.len() - prefix, MAX_OUTPUT);
    }

    #[tokio::test]
    async fn small_chunked_body() {
        let body = b"HTTP/1.1 302 Found\r\nTransfer-Encoding: chunked\r\n\r\n\
                     3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nTrailer: x\r\n\r\n"
            .to_vec();
        let (port, _seen) = serve(move |_| Some(body.clone())).await;
        assert_eq!(
            http_probe(&target(port, "/", &[]), UA, OK).await,
            Verdict::Success(Some(
                "Probe terminated redirects, Response body: abcde".into()
            ))
        );
    }

    #[tokio::test]
    async fn interim_answers_are_skipped() {
        let body = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n".to_vec();
        let (port, _seen) = serve(move |_| Some(body.clone())).await;
        assert_eq!(
            http_probe(&target(port, "/", &[]), UA, OK).await,
            Verdict::Success(None)
        );
    }

    #[tokio::test]
    async fn silent_server_fails_by_the_deadline() {
        let (port, _seen) = serve(|_| None).await;
        let started = std::time::Instant::now();
        assert_eq!(
            http_probe(&target(port, "/", &[]), UA, SHORT).await,
            Verdict::Failure(format!(
                "Get \"http://127.0.0.1:{port}/\": context deadline exceeded \
                 (Client.Timeout exceeded while awaiting headers)"
            ))
        );
        assert!(started.elapsed() < OK, "{:?}", started.elapsed());
    }

    #[tokio::test]
    async fn stalled_body_fails_by_the_deadline() {
        // Head sent, then the body never comes.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            read_request(&mut conn).await;
            let _ = conn
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nab")
                .await;
            std::future::pending::<()>().await;
        });
        let verdict = http_probe(&target(port, "/", &[]), UA, SHORT).await;
        assert_eq!(
            verdict,
            Verdict::Failure(format!(
                "Get \"http://127.0.0.1:{port}/\": context deadline exceeded \
                 (Client.Timeout or context cancellation while reading body)"
            ))
        );
    }

    #[tokio::test]
    async fn transport_failures() {
        let port = closed_port().await;
        assert_eq!(
            http_probe(&target(port, "/x", &[]), UA, OK).await,
            Verdict::Failure(format!(
                "Get \"http://127.0.0.1:{port}/x\": dial tcp 127.0.0.1:{port}: connect: \
                 connection refused"
            ))
        );
        let (port, _seen) = serve(|_| Some(Vec::new())).await;
        assert_eq!(
            http_probe(&target(port, "/", &[]), UA, OK).await,
            Verdict::Failure(format!("Get \"http://127.0.0.1:{port}/\": EOF"))
        );
        let (port, _seen) = serve(|_| Some(b"SSH-2.0-OpenSSH\r\n".to_vec())).await;
        assert_eq!(
            http_probe(&target(port, "/", &[]), UA, OK).await,
            Verdict::Failure(format!(
                "Get \"http://127.0.0.1:{port}/\": malformed HTTP response \"SSH-2.0-OpenSSH\""
            ))
        );
    }

    #[tokio::test]
    async fn ipv6_host() {
        let Ok(listener) = TcpListener::bind("[::1]:0").await else {
            return; // no IPv6 loopback here
        };
        let port = listener.local_addr().unwrap().port();
        let (tx, mut seen) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let (conn, _) = listener.accept().await.unwrap();
            handle(conn, tx, Arc::new(|_: &str| Some(response(200, "", "")))).await;
        });
        let target = HttpTarget {
            host: "::1",
            ..target(port, "/", &[])
        };
        assert_eq!(http_probe(&target, UA, OK).await, Verdict::Success(None));
        let head = seen.recv().await.unwrap();
        assert!(head.contains(&format!("Host: [::1]:{port}\r\n")), "{head}");
    }

    #[tokio::test]
    async fn hooks_take_any_answer() {
        let (port, mut seen) = serve(|_| Some(response(500, "", "oops"))).await;
        let hook_ua = "kube-lifecycle/1.34";
        assert_eq!(
            http_hook(&target(port, "/stop", &[]), hook_ua, OK)
                .await
                .map_err(|e| e.to_string()),
            Ok(())
        );
        assert!(
            seen.recv()
                .await
                .unwrap()
                .contains("User-Agent: kube-lifecycle/1.34\r\n")
        );

        // The body is not waited for.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let stalled = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            read_request(&mut conn).await;
            let _ = conn
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n")
                .await;
            std::future::pending::<()>().await;
        });
        assert_eq!(
            http_hook(&target(stalled, "/", &[]), hook_ua, OK)
                .await
                .map_err(|e| e.to_string()),
            Ok(())
        );

        let closed = closed_port().await;
        assert_eq!(
            http_hook(&target(closed, "/", &[]), hook_ua, OK)
                .await
                .map_err(|e| e.to_string()),
            Err(format!(
                "Get \"http://127.0.0.1:{closed}/\": dial tcp 127.0.0.1:{closed}: connect: \
                 connection refused"
            ))
        );
        let (silent, _seen) = serve(|_| None).await;
        assert!(
            http_hook(&target(silent, "/", &[]), hook_ua, SHORT)
                .await
                .is_err()
        );
    }

    #[test]
    fn futures_are_send() {
        fn send<T: Send>(_: T) {}
        let target = target(1, "/", &[]);
        send(http_probe(&target, UA, OK));
        send(http_hook(&target, UA, OK));
    }

    #[test]
    fn locations_join() {
        let base = Url {
            https: false,
            host: "10.0.0.1".into(),
            port: 8080,
            target: "/a/b?x=1".into(),
        };
        for (location, want) in [
            ("/c", "http://10.0.0.1:8080/c"),
            ("c d", "http://10.0.0.1:8080/a/c%20d"),
            ("?y=2", "http://10.0.0.1:8080/a/b?y=2"),
            ("//other/z", "http://other:80/z"),
            ("https://10.0.0.1/s", "https://10.0.0.1:443/s"),
            ("HTTP://u:p@[fd00::1]:81", "http://[fd00::1]:81/"),
        ] {
            assert_eq!(base.join(location).unwrap().to_string(), want, "{location}");
        }
        assert!(base.join("ftp://x/").is_err());
        assert!(base.join("http://h:port/").is_err());
        assert!(is_absolute("//x") && is_absolute("http://x") && !is_absolute("/x"));
    }

    #[test]
    fn status_lines() {
        assert_eq!(parse_status("HTTP/1.1 200 OK").unwrap(), 200);
        assert_eq!(parse_status("HTTP/1.0 404").unwrap(), 404);
        assert!(parse_status("HTTP/1.1 20 OK").is_err());
        assert!(parse_status("ICY 200 OK").is_err());
    }

    #[cfg(not(feature = "apiserver"))]
    #[tokio::test]
    async fn https_needs_the_apiserver_feature() {
        let target = HttpTarget {
            https: true,
            ..target(443, "/", &[])
        };
        assert_eq!(
            http_probe(&target, UA, OK).await,
            Verdict::Error(
                "https probes need picolet built with the apiserver feature (TLS)".into()
            )
        );
    }

    /// https against a rustls server with the test certificate (not trusted: the probe does
    /// not verify); records the SNI each handshake carried.
    #[cfg(feature = "apiserver")]
    mod https {
        use super::*;
        use crate::kube::tls::{certificates, private_key};

        async fn serve_tls() -> (u16, mpsc::UnboundedReceiver<Option<String>>) {
            let certs = certificates(include_bytes!("../../tests/data/tls/server.crt"), "cert");
            let key = private_key(include_bytes!("../../tests/data/tls/server.key"), "key");
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let config = rustls::ServerConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(certs.unwrap(), key.unwrap())
                .unwrap();
            let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(async move {
                while let Ok((conn, _)) = listener.accept().await {
                    let Ok(mut tls) = acceptor.accept(conn).await else {
                        continue;
                    };
                    let _ = tx.send(tls.get_ref().1.server_name().map(str::to_string));
                    read_request(&mut tls).await;
                    let _ = tls.write_all(&response(200, "", "secure")).await;
                    let _ = tls.shutdown().await;
                }
            });
            (port, rx)
        }

        #[tokio::test]
        async fn unverified_tls_with_sni_for_names_only() {
            let (port, mut sni) = serve_tls().await;
            for (host, want) in [("127.0.0.1", None), ("localhost", Some("localhost"))] {
                let target = HttpTarget {
                    https: true,
                    host,
                    ..target(port, "/", &[])
                };
                assert_eq!(http_probe(&target, UA, OK).await, Verdict::Success(None));
                assert_eq!(sni.recv().await.unwrap().as_deref(), want, "{host}");
            }
        }

        #[tokio::test]
        async fn tls_against_plain_http_fails() {
            // Answers plain HTTP at once, without reading (the ClientHello has no CR LF CR LF).
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            tokio::spawn(async move {
                let (mut conn, _) = listener.accept().await.unwrap();
                let _ = conn.write_all(&response(400, "", "plain")).await;
                let _ = conn.shutdown().await;
            });
            let target = HttpTarget {
                https: true,
                ..target(port, "/", &[])
            };
            let verdict = http_probe(&target, UA, OK).await;
            let Verdict::Failure(text) = verdict else {
                panic!("{verdict:?}")
            };
            assert!(
                text.starts_with(&format!("Get \"https://127.0.0.1:{port}/\": tls: ")),
                "{text}"
            );
        }
    }
}
