//! The node API's streaming routes: `kubectl exec`, `attach` and `port-forward` (kubelet:
//! `server.go` `getExec`, `getAttach`, `getPortForward` and `proxyStream`, which hands the
//! request to apimachinery's `UpgradeAwareHandler` with `upgradeRequired`).
//!
//! The runtime does the streaming: CRI `Exec`/`Attach`/`PortForward` answer a one-shot URL
//! on its streaming server (containerd 1.6: `http://127.0.0.1:<port>/exec/<token>`). This
//! module resolves the pod (and its container or sandbox), asks for the URL, and proxies the
//! client's upgrade request to it: the request goes out on a fresh TCP connection (method,
//! the URL's path with the client's query, the client's headers minus `Authorization` and
//! `Host`, the URL's `Host`); a `101` is answered to the client with the runtime's headers
//! (`Upgrade`, `Connection`, `Sec-WebSocket-Accept`/`-Protocol`,
//! `X-Stream-Protocol-Version`) and bytes are copied both ways until the streams end; any
//! other answer goes back with its status and (bounded) body. The protocol in between
//! (SPDY/3.1 or WebSocket channels) is the client's and the runtime's business.
//!
//! Bounded: at most [`MAX_STREAMS`] proxied streams at once (an upgraded connection no longer
//! counts against the server's connections), [`CONNECT_TIMEOUT`] to reach the runtime and
//! the same again for its answer, only `http://` URLs to an IP address or `localhost` exactly
//! as the runtime gave them (redirects are never followed). Every stream is a local task on
//! the agent's thread and ends at shutdown.
//!
//! Must never: forward the client's bearer token, dial anything but the URL the runtime
//! answered, or block the thread.

use std::cell::Cell;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt as _, Empty, Limited};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio_util::sync::CancellationToken;

use super::response::{Out, status_error};
use super::view::PodEntry;
use crate::api::{Pod, PodStatus};
use crate::cri::POD_UID_LABEL;
use crate::cri::{CriError, ListFilter, Runtime, SandboxState, StreamOptions};

/// Proxied streams at once; more are answered 429.
pub(crate) const MAX_STREAMS: usize = 8;
/// To connect to the runtime's streaming server, and again for its answer's head.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// A non-101 answer's body is passed back up to this size.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// The three streaming subresources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Exec,
    Attach,
    PortForward,
}

/// A streaming request's target, from its path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Route<'a> {
    pub kind: Kind,
    pub namespace: &'a str,
    pub pod: &'a str,
    /// The kubelet paths may name the pod's UID.
    pub uid: Option<&'a str>,
    /// The kubelet paths name the container; the API paths use `?container=`.
    pub container: Option<&'a str>,
}

/// The streaming paths: the API's `…/pods/{name}/exec|attach|portforward` and the kubelet's
/// own `/exec/{ns}/{pod}[/{uid}]/{container}`, `/attach/…`, `/portForward/{ns}/{pod}[/{uid}]`.
pub(crate) fn route<'a>(segments: &[&'a str]) -> Option<Route<'a>> {
    let kind = |s: &str| match s {
        "exec" => Some(Kind::Exec),
        "attach" => Some(Kind::Attach),
        "portforward" => Some(Kind::PortForward),
        _ => None,
    };
    let r = |kind, namespace, pod, uid, container| Route {
        kind,
        namespace,
        pod,
        uid,
        container,
    };
    match *segments {
        ["api", "v1", "namespaces", ns, "pods", pod, sub] => {
            Some(r(kind(sub)?, ns, pod, None, None))
        }
        // kubelet: `/exec/{podNamespace}/{podID}/{containerName}` and the `{uid}` variant.
        [sub @ ("exec" | "attach"), ns, pod, c] => Some(r(kind(sub)?, ns, pod, None, Some(c))),
        [sub @ ("exec" | "attach"), ns, pod, uid, c] => {
            Some(r(kind(sub)?, ns, pod, Some(uid), Some(c)))
        }
        // kubelet: `/portForward/{podNamespace}/{podID}[/{uid}]` (what the apiserver's
        // proxy asks for); the lower-case form too, as picolet has always served it.
        ["portForward" | "portforward", ns, pod] => Some(r(Kind::PortForward, ns, pod, None, None)),
        ["portForward" | "portforward", ns, pod, uid] => {
            Some(r(Kind::PortForward, ns, pod, Some(uid), None))
        }
        _ => None,
    }
}

/// The count of proxied streams (cheap to clone; one thread).
#[derive(Debug, Clone, Default)]
pub(crate) struct Slots(Rc<Cell<usize>>);

/// One stream's place; given back when dropped.
#[derive(Debug)]
pub(crate) struct Slot(Rc<Cell<usize>>);

impl Slots {
    pub(crate) fn in_use(&self) -> usize {
        self.0.get()
    }

    pub(crate) fn take(&self) -> Option<Slot> {
        if self.0.get() >= MAX_STREAMS {
            return None;
        }
        self.0.set(self.0.get() + 1);
        Some(Slot(Rc::clone(&self.0)))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.set(self.0.get().saturating_sub(1));
    }
}

/// Why a stream could not be set up or proxied; the text is what the client and the log
/// see.
#[derive(Debug)]
pub(crate) enum StreamError {
    /// The runtime's URL is not `http://` (the URL).
    UrlScheme(String),
    /// The runtime's URL has user info (the URL).
    UrlUserInfo(String),
    /// The runtime's URL has a port that does not parse (the URL).
    UrlPort(String),
    /// The runtime's URL's host is neither an IP address nor `localhost` (the URL).
    UrlHost(String),
    /// The runtime's URL's address cannot be dialed (the URL).
    UrlNotDialable(String),
    /// A `ports`/`port` value of the query that is not a port.
    InvalidPort(String),
    /// The URL's path with the client's query is not a URI.
    Path(http::uri::InvalidUri),
    /// The URL's authority is not a `Host` header.
    Host(http::header::InvalidHeaderValue),
    /// Connecting to the runtime's streaming server failed.
    Dial(std::io::Error),
    /// Connecting to the runtime's streaming server took over [`CONNECT_TIMEOUT`].
    DialTimeout,
    /// The HTTP handshake with the runtime's streaming server failed.
    Handshake(hyper::Error),
    /// Sending the request to the runtime's streaming server failed.
    Proxy(hyper::Error),
    /// The runtime's streaming server gave no answer within [`CONNECT_TIMEOUT`].
    NoAnswer,
}

impl std::fmt::Display for StreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamError::UrlScheme(url) => {
                write!(f, "streaming URL {url:?}: only http:// is supported")
            }
            StreamError::UrlUserInfo(url) => {
                write!(f, "streaming URL {url:?}: user info is not allowed")
            }
            StreamError::UrlPort(url) => write!(f, "streaming URL {url:?}: bad port"),
            StreamError::UrlHost(url) => write!(
                f,
                "streaming URL {url:?}: the host must be an IP address or localhost"
            ),
            StreamError::UrlNotDialable(url) => {
                write!(f, "streaming URL {url:?}: not a dialable address")
            }
            StreamError::InvalidPort(port) => write!(f, "invalid port {port:?}"),
            StreamError::Path(e) => write!(f, "streaming URL path: {e}"),
            StreamError::Host(e) => e.fmt(f),
            StreamError::Dial(e) => write!(f, "error dialing backend: {e}"),
            StreamError::DialTimeout => f.write_str("error dialing backend: timed out"),
            StreamError::Handshake(e) => write!(f, "error dialing backend: {e}"),
            StreamError::Proxy(e) => write!(f, "error proxying to the runtime: {e}"),
            StreamError::NoAnswer => f.write_str("the runtime's streaming server did not answer"),
        }
    }
}

impl std::error::Error for StreamError {}

/// Where a runtime's streaming URL points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    pub addr: SocketAddr,
    /// The `Host` header: the URL's authority.
    pub host: String,
    /// The URL's path (and query, if it has one).
    pub path: String,
}

/// Accepts `http://<ip or localhost>[:port]/path` only: the runtime's streaming server
/// (containerd and CRI-O serve plain HTTP on loopback unless told otherwise). No DNS, no
/// TLS to the runtime.
pub(crate) fn target(url: &str) -> Result<Target, StreamError> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| StreamError::UrlScheme(url.to_string()))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.contains('@') {
        return Err(StreamError::UrlUserInfo(url.to_string()));
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() && !p.contains(']') => (
            h,
            p.parse::<u16>()
                .map_err(|_| StreamError::UrlPort(url.to_string()))?,
        ),
        _ => (authority, 80),
    };
    let ip = match host.trim_start_matches('[').trim_end_matches(']') {
        "localhost" => IpAddr::V4(Ipv4Addr::LOCALHOST),
        h => h
            .parse::<IpAddr>()
            .map_err(|_| StreamError::UrlHost(url.to_string()))?,
    };
    if ip.is_unspecified() || ip.is_multicast() || port == 0 {
        return Err(StreamError::UrlNotDialable(url.to_string()));
    }
    Ok(Target {
        addr: SocketAddr::new(ip, port),
        host: authority.to_string(),
        path: path.to_string(),
    })
}

/// A `Connection: Upgrade` request with an `Upgrade` header (kubelet:
/// `httpstream.IsUpgradeRequest`).
pub(crate) fn is_upgrade(headers: &HeaderMap) -> bool {
    let connection_upgrade = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("upgrade"));
    connection_upgrade && headers.contains_key(header::UPGRADE)
}

/// What a stream's query asks for: the streams (`stdin`, `stdout`, `stderr`, `tty`; kubectl
/// sends `true`, the apiserver `1`), the command (`command`, repeated), the container and
/// the ports (`ports` from kubectl, `port` from the apiserver's WebSocket form).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Params {
    pub streams: StreamOptions,
    pub command: Vec<String>,
    pub container: Option<String>,
    pub ports: Vec<i32>,
}

impl Params {
    pub(crate) fn parse(pairs: &[(String, String)]) -> Result<Params, StreamError> {
        let flag = |key: &str| {
            pairs
                .iter()
                .any(|(k, v)| k == key && matches!(v.as_str(), "1" | "true" | "True" | ""))
        };
        let mut p = Params {
            // kubelet: `remotecommandserver.NewOptions` reads `input`, `output`, `error`
            // (what the apiserver's exec/attach proxy sends); kubectl talking to the node
            // directly, as to an apiserver, says `stdin`, `stdout`, `stderr`.
            streams: StreamOptions {
                stdin: flag("stdin") || flag("input"),
                stdout: flag("stdout") || flag("output"),
                stderr: flag("stderr") || flag("error"),
                tty: flag("tty"),
            },
            ..Params::default()
        };
        // kubelet: `remotecommandserver.NewOptions` — with a TTY, stderr goes with stdout.
        if p.streams.tty {
            p.streams.stderr = false;
        }
        for (k, v) in pairs {
            match k.as_str() {
                "command" => p.command.push(v.clone()),
                "container" if !v.is_empty() => p.container = Some(v.clone()),
                "ports" | "port" => {
                    for port in v.split(',').filter(|s| !s.is_empty()) {
                        match port.trim().parse::<u16>() {
                            Ok(n) if n > 0 => p.ports.push(i32::from(n)),
                            _ => return Err(StreamError::InvalidPort(port.to_string())),
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(p)
    }
}

/// Why a stream was refused before the runtime was asked: a `metav1.Status` to answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub code: StatusCode,
    pub reason: &'static str,
    pub message: String,
}

impl Refusal {
    fn new(code: StatusCode, reason: &'static str, message: String) -> Self {
        Refusal {
            code,
            reason,
            message,
        }
    }

    pub(crate) fn response(&self) -> Response<Out> {
        status_error(self.code, self.reason, &self.message)
    }
}

/// The running container of `pod` named `container` (or its only container), as the
/// runtime's ID (kubelet: `findContainer` among the running pods).
pub(crate) fn container_id(
    pod: &Pod,
    status: Option<&PodStatus>,
    container: Option<&str>,
) -> Result<String, Refusal> {
    let spec = &pod.spec;
    let name = match container {
        Some(c) => c.to_string(),
        None if spec.containers.len() == 1 => spec.containers[0].name.clone(),
        None => {
            let names: Vec<&str> = spec.containers.iter().map(|c| c.name.as_str()).collect();
            return Err(Refusal::new(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                format!(
                    "a container name must be specified for pod {}, choose one of: [{}]",
                    pod.metadata.name,
                    names.join(" ")
                ),
            ));
        }
    };
    let mut all = (spec.containers.iter())
        .chain(&spec.init_containers)
        .chain(&spec.ephemeral_containers);
    if !all.any(|c| c.name == name) {
        return Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            format!(
                "container {name} is not valid for pod {}",
                pod.metadata.name
            ),
        ));
    }
    let running = status.and_then(|s| {
        s.container_statuses
            .iter()
            .chain(&s.init_container_statuses)
            .chain(&s.ephemeral_container_statuses)
            .find(|c| c.name == name && c.state.running.is_some())
            .and_then(|c| c.container_id.as_deref())
    });
    match running {
        // `containerd://<id>`: the runtime's own ID follows the scheme.
        Some(id) => Ok(id.split_once("://").map_or(id, |(_, id)| id).to_string()),
        None => Err(Refusal::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("container not found ({name:?})"),
        )),
    }
}

/// A CRI failure as the client sees it (kubelet: `streaming.WriteError`).
fn cri_refusal(e: &CriError) -> Refusal {
    let (code, reason) = match e {
        CriError::NotFound { .. } => (StatusCode::NOT_FOUND, "NotFound"),
        CriError::Unimplemented { .. } => (StatusCode::NOT_IMPLEMENTED, "NotImplemented"),
        CriError::Unavailable { .. } | CriError::Timeout { .. } => {
            (StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable")
        }
        _ => (StatusCode::INTERNAL_SERVER_ERROR, "InternalError"),
    };
    Refusal::new(code, reason, e.to_string())
}

/// Serves one streaming request, in steps (kubelet: `getExec`/`getAttach`/`getPortForward`
/// then `proxyStream`):
/// 1. the request checked: an upgrade, its query, the pod ([`check_request`]);
/// 2. a stream slot taken (429 when all [`MAX_STREAMS`] are in use);
/// 3. the runtime asked for the streaming URL ([`stream_url`]);
/// 4. the URL checked ([`target`]) and the request proxied to it ([`proxy`]).
pub(crate) async fn serve<R: Runtime>(
    runtime: &R,
    entry: Option<Rc<PodEntry>>,
    route: &Route<'_>,
    pairs: &[(String, String)],
    slots: &Slots,
    req: Request<Incoming>,
    shutdown: &CancellationToken,
) -> Response<Out> {
    let (params, entry) = match check_request(req.headers(), pairs, entry, route) {
        Ok(checked) => checked,
        Err(r) => return r.response(),
    };
    let Some(slot) = slots.take() else {
        return status_error(
            StatusCode::TOO_MANY_REQUESTS,
            "TooManyRequests",
            &format!("too many streams open (at most {MAX_STREAMS})"),
        );
    };
    let url = match stream_url(runtime, route, &entry, &params).await {
        Ok(u) => u,
        Err(r) => return r.response(),
    };
    let target = match target(&url) {
        Ok(t) => t,
        Err(e) => {
            let m = e.to_string();
            log::warn!("node API: {m}");
            return status_error(StatusCode::BAD_GATEWAY, "InternalError", &m);
        }
    };
    proxy(req, &target, slot, shutdown).await
}

/// Step 1 of [`serve`]: an upgrade request (kubelet: `proxyStream` sets `upgradeRequired`),
/// a query that parses, and the pod of the route (of its UID, when the path names one).
fn check_request(
    headers: &HeaderMap,
    pairs: &[(String, String)],
    entry: Option<Rc<PodEntry>>,
    route: &Route<'_>,
) -> Result<(Params, Rc<PodEntry>), Refusal> {
    let bad = |message: String| Refusal::new(StatusCode::BAD_REQUEST, "BadRequest", message);
    if !is_upgrade(headers) {
        return Err(bad("Upgrade request required".to_string()));
    }
    let params = Params::parse(pairs).map_err(|e| bad(e.to_string()))?;
    match entry {
        Some(e) if route.uid.is_none_or(|u| u == e.pod.metadata.uid) => Ok((params, e)),
        _ => Err(Refusal::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("pods \"{}\" not found", route.pod),
        )),
    }
}

/// Step 3 of [`serve`]: the runtime's one-shot streaming URL for the route (kubelet:
/// `GetExec`, `GetAttach`, `GetPortForward`), after the checks the kubelet makes first.
async fn stream_url<R: Runtime>(
    runtime: &R,
    route: &Route<'_>,
    entry: &PodEntry,
    params: &Params,
) -> Result<String, Refusal> {
    let bad = |message: &str| Refusal::new(StatusCode::BAD_REQUEST, "BadRequest", message.into());
    let s = params.streams;
    let url = match route.kind {
        Kind::Exec | Kind::Attach if !(s.stdin || s.stdout || s.stderr) => {
            return Err(bad("you must specify at least 1 of stdin, stdout, stderr"));
        }
        Kind::Exec if params.command.is_empty() => {
            return Err(bad(
                "you must specify at least one command for the container",
            ));
        }
        Kind::Exec | Kind::Attach => {
            let container = route.container.or(params.container.as_deref());
            let id = container_id(&entry.pod, entry.status.as_deref(), container)?;
            // kubelet: `GetExec` / `GetAttach`.
            match route.kind {
                Kind::Exec => runtime.exec(&id, &params.command, s).await,
                _ => runtime.attach(&id, s).await,
            }
        }
        Kind::PortForward => {
            let sandbox = newest_sandbox(runtime, &entry.pod).await?;
            runtime.port_forward(&sandbox, &params.ports).await
        }
    };
    url.map_err(|e| {
        log::debug!(
            "node API: {:?} {}/{}: {e}",
            route.kind,
            route.namespace,
            route.pod
        );
        cri_refusal(&e)
    })
}

/// kubelet: `GetPortForward` — the pod's newest sandbox (a ready one first), by the pod UID
/// label; its ID.
async fn newest_sandbox<R: Runtime>(runtime: &R, pod: &Pod) -> Result<String, Refusal> {
    let filter = ListFilter {
        labels: [(POD_UID_LABEL.to_string(), pod.metadata.uid.clone())].into(),
        sandbox_id: None,
    };
    let mut sandboxes = runtime
        .list_pod_sandboxes(&filter)
        .await
        .map_err(|e| cri_refusal(&e))?;
    crate::sort::sort_by_key(&mut sandboxes, |s| {
        (s.state == SandboxState::Ready, s.recency())
    });
    match sandboxes.pop() {
        Some(sandbox) => Ok(sandbox.id),
        None => Err(Refusal::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("pod not found ({:?})", pod.metadata.uid),
        )),
    }
}

/// The request sent to the runtime: the client's, aimed at `target`.
fn outgoing(
    req: &Request<Incoming>,
    target: &Target,
) -> Result<Request<Empty<Bytes>>, StreamError> {
    let mut uri = target.path.clone();
    // kubelet (`UpgradeAwareHandler`): the location's query is the client's.
    if let Some(q) = req.uri().query().filter(|q| !q.is_empty()) {
        uri = match uri.split_once('?') {
            Some((p, _)) => format!("{p}?{q}"),
            None => format!("{uri}?{q}"),
        };
    }
    let mut out = Request::new(Empty::new());
    *out.method_mut() = req.method().clone();
    *out.uri_mut() = uri.parse().map_err(StreamError::Path)?;
    let headers = out.headers_mut();
    for (name, value) in req.headers() {
        if name == header::AUTHORIZATION
            || name == header::PROXY_AUTHORIZATION
            || name == header::HOST
            || name == header::CONTENT_LENGTH
            || name == header::TRANSFER_ENCODING
        {
            continue;
        }
        headers.append(name.clone(), value.clone());
    }
    let host = header::HeaderValue::from_str(&target.host).map_err(StreamError::Host)?;
    headers.insert(header::HOST, host);
    Ok(out)
}

/// Proxies the upgrade request `req` to `target` (kubelet: `UpgradeAwareHandler.tryUpgrade`),
/// in steps: the request rewritten for the runtime ([`outgoing`]), a connection to its
/// streaming server ([`dial`]), the request sent; a `101` is answered to the client and the
/// two upgraded connections spliced ([`switch_protocols`]), any other answer passed back
/// ([`pass_back`]). The `slot` is held until the stream ends.
pub(crate) async fn proxy(
    req: Request<Incoming>,
    target: &Target,
    slot: Slot,
    shutdown: &CancellationToken,
) -> Response<Out> {
    let fail = |e: StreamError| {
        let m = e.to_string();
        log::debug!("node API: stream to {}: {m}", target.addr);
        status_error(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", &m)
    };
    if *req.method() != Method::GET && *req.method() != Method::POST {
        return status_error(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            "streams are GET or POST",
        );
    }
    let out = match outgoing(&req, target) {
        Ok(o) => o,
        Err(e) => return fail(e),
    };
    let (mut sender, abort) = match dial(target).await {
        Ok(dialed) => dialed,
        Err(e) => return fail(e),
    };
    let resp = match tokio::time::timeout(CONNECT_TIMEOUT, sender.send_request(out)).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => {
            abort.abort();
            return fail(StreamError::Proxy(e));
        }
        Err(_) => {
            abort.abort();
            return fail(StreamError::NoAnswer);
        }
    };
    if resp.status() != StatusCode::SWITCHING_PROTOCOLS {
        return pass_back(resp, abort, target).await;
    }
    switch_protocols(req, resp, abort, target, slot, shutdown)
}

/// Connects to the runtime's streaming server (within [`CONNECT_TIMEOUT`]) and starts the
/// HTTP/1 client on it; the task that drives the runtime's side until it is handed over
/// (101) or closed is aborted with the returned handle.
async fn dial(
    target: &Target,
) -> Result<
    (
        hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
        tokio::task::AbortHandle,
    ),
    StreamError,
> {
    let tcp =
        match tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(target.addr))
            .await
        {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Err(StreamError::Dial(e)),
            Err(_) => return Err(StreamError::DialTimeout),
        };
    let _ = tcp.set_nodelay(true);
    let (sender, conn) = hyper::client::conn::http1::Builder::new()
        .title_case_headers(true)
        .max_buf_size(64 * 1024)
        .handshake::<_, Empty<Bytes>>(TokioIo::new(tcp))
        .await
        .map_err(StreamError::Handshake)?;
    let conn = crate::local_tasks::spawn_local(async move {
        let _ = conn.with_upgrades().await;
    });
    Ok((sender, conn.abort_handle()))
}

/// A runtime's answer other than `101`, passed back as it is (status, content type and a
/// bounded body), minus anything that would send the client elsewhere.
async fn pass_back(
    resp: Response<Incoming>,
    abort: tokio::task::AbortHandle,
    target: &Target,
) -> Response<Out> {
    let status = resp.status();
    let content_type = resp.headers().get(header::CONTENT_TYPE).cloned();
    let body = tokio::time::timeout(
        CONNECT_TIMEOUT,
        Limited::new(resp.into_body(), MAX_ERROR_BODY).collect(),
    )
    .await;
    abort.abort();
    let body = match body {
        Ok(Ok(b)) => b.to_bytes(),
        _ => Bytes::new(),
    };
    log::debug!(
        "node API: stream to {}: the runtime answered {status}",
        target.addr
    );
    let mut r = Response::new(Out::Full(Some(body)));
    *r.status_mut() = status;
    if let Some(ct) = content_type {
        r.headers_mut().insert(header::CONTENT_TYPE, ct);
    }
    r
}

/// The runtime's `101`: answered to the client with the runtime's headers, and a task that
/// waits for both sides' upgrades and copies bytes both ways until the streams end or
/// shutdown (holding the `slot`).
fn switch_protocols(
    mut req: Request<Incoming>,
    resp: Response<Incoming>,
    abort: tokio::task::AbortHandle,
    target: &Target,
    slot: Slot,
    shutdown: &CancellationToken,
) -> Response<Out> {
    let mut answer = Response::new(Out::Full(None));
    *answer.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    for (name, value) in resp.headers() {
        if name != header::CONTENT_LENGTH
            && name != header::TRANSFER_ENCODING
            && name != header::DATE
        {
            answer.headers_mut().append(name.clone(), value.clone());
        }
    }
    let client = hyper::upgrade::on(&mut req);
    let runtime = hyper::upgrade::on(resp);
    let shutdown = shutdown.clone();
    let addr = target.addr;
    crate::local_tasks::spawn_local(async move {
        let _slot = slot;
        let upgraded =
            tokio::time::timeout(CONNECT_TIMEOUT, async { tokio::try_join!(client, runtime) })
                .await;
        let (client, runtime) = match upgraded {
            Ok(Ok(pair)) => pair,
            Ok(Err(e)) => {
                log::debug!("node API: stream to {addr}: upgrade failed: {e}");
                abort.abort();
                return;
            }
            Err(_) => {
                log::debug!("node API: stream to {addr}: upgrade timed out");
                abort.abort();
                return;
            }
        };
        let (mut client, mut runtime) = (TokioIo::new(client), TokioIo::new(runtime));
        tokio::select! {
            res = tokio::io::copy_bidirectional(&mut client, &mut runtime) => match res {
                Ok((up, down)) => log::debug!(
                    "node API: stream to {addr} ended ({up} B to the runtime, {down} B back)"
                ),
                Err(e) => log::debug!("node API: stream to {addr}: {e}"),
            },
            _ = shutdown.cancelled() => {}
        }
    });
    answer
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
    use tokio::net::{TcpListener, TcpStream};
    use tokio::sync::mpsc;

    use crate::api::{Container, ContainerStateRunning, ContainerStatus};
    use crate::clock::SystemClock;
    use crate::cri::fake::FakeRuntime;
    use crate::cri::{ContainerConfig, SandboxConfig};
    use crate::local_api::server::{Api, serve as serve_api};
    use crate::local_api::token::Token;
    use crate::local_api::view::View;
    use crate::messages::PodEvent;

    const SPDY_101: &str = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n\
                            Upgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n";
    const TOKEN: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    /// A streaming server standing in for containerd's: every connection's request head goes
    /// to the receiver; `answer` is written back, and after a 101 the bytes `hello` (in the
    /// same write: the proxy must pass bytes that came with the head) and then an echo
    /// until the peer closes.
    async fn streaming_server(
        answer: &'static str,
    ) -> (SocketAddr, mpsc::UnboundedReceiver<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::task::spawn_local(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let tx = tx.clone();
                tokio::task::spawn_local(async move {
                    let head = read_head(&mut conn).await;
                    let _ = tx.send(head);
                    let upgrade = answer.starts_with("HTTP/1.1 101");
                    let mut out = answer.as_bytes().to_vec();
                    if upgrade {
                        out.extend_from_slice(b"hello");
                    }
                    conn.write_all(&out).await.unwrap();
                    if upgrade {
                        let (mut r, mut w) = conn.split();
                        let _ = tokio::io::copy(&mut r, &mut w).await;
                    }
                });
            }
        });
        (addr, rx)
    }

    async fn read_head(conn: &mut (impl AsyncRead + Unpin)) -> String {
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            match conn.read_u8().await {
                Ok(b) => head.push(b),
                Err(_) => break,
            }
        }
        String::from_utf8_lossy(&head).into_owned()
    }

    /// A plain-HTTP server whose every request is proxied to `target`.
    async fn proxy_server(target: Target, slots: Slots) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::task::spawn_local(async move {
            while let Ok((conn, _)) = listener.accept().await {
                let (target, slots) = (target.clone(), slots.clone());
                let svc = hyper::service::service_fn(move |req| {
                    let (target, slots) = (target.clone(), slots.clone());
                    async move {
                        let slot = slots.take().unwrap();
                        let r = proxy(req, &target, slot, &CancellationToken::new()).await;
                        Ok::<_, std::convert::Infallible>(r)
                    }
                });
                tokio::task::spawn_local(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(conn), svc)
                        .with_upgrades(),
                );
            }
        });
        addr
    }

    const UPGRADE: &str = "POST /exec/x?command=cat&stdin=true HTTP/1.1\r\nHost: picolet\r\n\
                           Authorization: Bearer secret\r\nConnection: Upgrade\r\n\
                           Upgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n\
                           Content-Length: 0\r\n\r\n";

    /// After the 101: `hello` from the runtime, then what is written comes back; the client
    /// closes and the stream ends on both sides.
    async fn echo_session(conn: &mut (impl AsyncRead + AsyncWrite + Unpin)) {
        let mut hello = [0u8; 5];
        conn.read_exact(&mut hello).await.unwrap();
        assert_eq!(&hello, b"hello");
        conn.write_all(b"ping").await.unwrap();
        let mut pong = [0u8; 4];
        conn.read_exact(&mut pong).await.unwrap();
        assert_eq!(&pong, b"ping");
        conn.shutdown().await.unwrap();
        let mut rest = Vec::new();
        let _ = conn.read_to_end(&mut rest).await;
        assert!(rest.is_empty(), "{rest:?}");
    }

    /// Until `done` holds (the proxy's tasks end right after both sides closed): real I/O,
    /// so no virtual time; the bound only turns a hang into a failure.
    async fn until(what: &str, done: impl Fn() -> bool) {
        tokio::time::timeout(Duration::from_secs(10), async {
            while !done() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{what}"));
    }

    async fn streams_end(slots: &Slots) {
        until("the stream's slot is given back", || slots.in_use() == 0).await;
    }

    async fn api_streams_end(api: &Api<FakeRuntime, SystemClock>) {
        until("the streams end", || api.streams() == 0).await;
    }

    #[tokio::test]
    async fn an_upgrade_is_proxied_and_bytes_flow_both_ways() {
        tokio::task::LocalSet::new()
            .run_until(async {
                let (runtime, mut heads) = streaming_server(SPDY_101).await;
                let slots = Slots::default();
                let url = format!("http://{runtime}/exec/tok3n");
                let proxy = proxy_server(target(&url).unwrap(), slots.clone()).await;
                let mut conn = TcpStream::connect(proxy).await.unwrap();
                conn.write_all(UPGRADE.as_bytes()).await.unwrap();
                let head = read_head(&mut conn).await;
                assert!(head.starts_with("HTTP/1.1 101"), "{head}");
                let lower = head.to_ascii_lowercase();
                assert!(
                    lower.contains("x-stream-protocol-version: v4.channel.k8s.io"),
                    "{head}"
                );
                assert!(lower.contains("upgrade: spdy/3.1"), "{head}");
                assert_eq!(slots.in_use(), 1);
                echo_session(&mut conn).await;
                streams_end(&slots).await;

                // What the runtime got: its own path with the client's query, its own Host,
                // the client's upgrade headers, never the client's token.
                let sent = heads.recv().await.unwrap();
                assert!(
                    sent.starts_with("POST /exec/tok3n?command=cat&stdin=true HTTP/1.1\r\n"),
                    "{sent}"
                );
                let lower = sent.to_ascii_lowercase();
                assert!(lower.contains(&format!("host: {runtime}\r\n")), "{sent}");
                assert!(lower.contains("upgrade: spdy/3.1\r\n"), "{sent}");
                assert!(
                    lower.contains("x-stream-protocol-version: v4.channel.k8s.io"),
                    "{sent}"
                );
                assert!(!lower.contains("authorization"), "{sent}");
                assert!(!lower.contains("picolet"), "{sent}");
            })
            .await;
    }

    #[tokio::test]
    async fn a_refusal_is_passed_back_with_its_status_and_body() {
        tokio::task::LocalSet::new()
            .run_until(async {
                let (runtime, _heads) = streaming_server(
                    "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\n\
                     Location: http://elsewhere/\r\nContent-Length: 4\r\n\r\nnope",
                )
                .await;
                let slots = Slots::default();
                let url = format!("http://{runtime}/exec/t");
                let proxy = proxy_server(target(&url).unwrap(), slots.clone()).await;
                let mut conn = TcpStream::connect(proxy).await.unwrap();
                conn.write_all(UPGRADE.as_bytes()).await.unwrap();
                let head = read_head(&mut conn).await;
                assert!(head.starts_with("HTTP/1.1 403"), "{head}");
                assert!(
                    head.to_ascii_lowercase()
                        .contains("content-type: text/plain"),
                    "{head}"
                );
                assert!(!head.to_ascii_lowercase().contains("location"), "{head}");
                let mut body = [0u8; 4];
                conn.read_exact(&mut body).await.unwrap();
                assert_eq!(&body, b"nope");
                streams_end(&slots).await;
            })
            .await;
    }

    #[tokio::test]
    async fn an_unreachable_runtime_is_an_error() {
        tokio::task::LocalSet::new()
            .run_until(async {
                // A port nothing listens on any more.
                let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
                let addr = closed.local_addr().unwrap();
                drop(closed);
                let slots = Slots::default();
                let proxy = proxy_server(
                    target(&format!("http://{addr}/exec/t")).unwrap(),
                    slots.clone(),
                )
                .await;
                let mut conn = TcpStream::connect(proxy).await.unwrap();
                conn.write_all(UPGRADE.as_bytes()).await.unwrap();
                let head = read_head(&mut conn).await;
                assert!(head.starts_with("HTTP/1.1 500"), "{head}");
                streams_end(&slots).await;
            })
            .await;
    }

    // ----- through the node API: TLS, token, pod and container lookup, the runtime ----------

    struct Node {
        addr: SocketAddr,
        tls: tokio_rustls::TlsConnector,
        runtime: FakeRuntime,
        api: Rc<Api<FakeRuntime, SystemClock>>,
        heads: mpsc::UnboundedReceiver<String>,
        container_id: String,
        sandbox_id: String,
        shutdown: CancellationToken,
    }

    /// The node API over a fake runtime holding pod default/web (UID u1) with container
    /// `app` running, and `idle` not; the runtime's streaming URL points at a
    /// [`streaming_server`].
    async fn node() -> Node {
        let runtime = FakeRuntime::new(SystemClock);
        runtime.add_image("img:1");
        let sandbox = SandboxConfig {
            name: "web".into(),
            namespace: "default".into(),
            uid: "u1".into(),
            labels: [(POD_UID_LABEL.to_string(), "u1".to_string())].into(),
            ..SandboxConfig::default()
        };
        let sandbox_id = runtime.run_pod_sandbox(&sandbox).await.unwrap();
        let config = ContainerConfig {
            name: "app".into(),
            image: "img:1".into(),
            ..ContainerConfig::default()
        };
        let container_id = runtime
            .create_container(&sandbox_id, &config, &sandbox)
            .await
            .unwrap();
        runtime.start_container(&container_id).await.unwrap();
        let (streaming, heads) = streaming_server(SPDY_101).await;
        runtime.set_stream_url(&format!("http://{streaming}/stream/t0ken"));

        let mut pod = crate::api::Pod::default();
        pod.metadata.name = "web".into();
        pod.metadata.namespace = "default".into();
        pod.metadata.uid = "u1".into();
        for name in ["app", "idle"] {
            pod.spec.containers.push(Container {
                name: name.into(),
                ..Container::default()
            });
        }
        let pod = Arc::new(pod);
        let mut status = PodStatus::default();
        status.container_statuses.push(ContainerStatus {
            name: "app".into(),
            container_id: Some(format!("containerd://{container_id}")),
            ..ContainerStatus::default()
        });
        status.container_statuses[0].state.running = Some(ContainerStateRunning::default());
        status.container_statuses.push(ContainerStatus {
            name: "idle".into(),
            container_id: Some("containerd://gone".into()),
            ..ContainerStatus::default()
        });
        let view = View::new();
        view.apply(
            vec![
                PodEvent::Pods {
                    pods: vec![Arc::clone(&pod)],
                    mirrors: vec![],
                    sources_ready: true,
                },
                PodEvent::Status {
                    pod,
                    status: Arc::new(status),
                },
            ],
            1,
        );

        let certs = crate::local_api::certs::generate(
            &crate::local_api::certs::Subject {
                node_name: "board".into(),
                dns_names: vec![],
                ips: vec![],
            },
            crate::clock::Clock::now(&SystemClock),
        )
        .unwrap();
        let server_tls = crate::local_api::server_tls(
            certs.chain_pem.as_bytes(),
            certs.key_pem.as_bytes(),
            None,
            None,
        )
        .unwrap();
        let client_tls = crate::kube::tls::client_config(&crate::kube::tls::TlsSettings {
            ca_pem: Some(certs.ca_pem.into_bytes()),
            ..Default::default()
        })
        .unwrap();
        let api = Api::new(
            Token::parse(TOKEN).unwrap(),
            view,
            runtime.clone(),
            SystemClock,
            crate::node::status::NodeFacts::default(),
            Default::default(),
            std::path::PathBuf::from("/nonexistent"),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        tokio::task::spawn_local(serve_api(
            listener,
            server_tls,
            Rc::clone(&api),
            shutdown.clone(),
        ));
        Node {
            addr,
            tls: tokio_rustls::TlsConnector::from(client_tls),
            runtime,
            api,
            heads,
            container_id,
            sandbox_id,
            shutdown,
        }
    }

    impl Node {
        /// Sends `method path` with the token (unless `token` is false) and, with
        /// `upgrade`, kubectl's SPDY upgrade headers; returns the response head and the
        /// connection.
        async fn send(
            &self,
            method: &str,
            path: &str,
            upgrade: bool,
            token: bool,
        ) -> (String, tokio_rustls::client::TlsStream<TcpStream>) {
            let tcp = TcpStream::connect(self.addr).await.unwrap();
            let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
            let mut conn = self.tls.connect(name, tcp).await.unwrap();
            let mut req = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\n");
            if token {
                req.push_str(&format!("Authorization: Bearer {TOKEN}\r\n"));
            }
            if upgrade {
                req.push_str(
                    "Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\
                     X-Stream-Protocol-Version: v4.channel.k8s.io\r\n",
                );
            }
            req.push_str("\r\n");
            conn.write_all(req.as_bytes()).await.unwrap();
            let head = read_head(&mut conn).await;
            (head, conn)
        }
    }

    #[tokio::test]
    async fn kubectl_exec_attach_and_port_forward_reach_the_runtime() {
        tokio::task::LocalSet::new()
            .run_until(async {
                let mut node = node().await;
                let exec = "/api/v1/namespaces/default/pods/web/exec?command=cat&container=app\
                            &stdin=true&stdout=true&stderr=true";
                let (head, mut conn) = node.send("POST", exec, true, true).await;
                assert!(head.starts_with("HTTP/1.1 101"), "{head}");
                assert_eq!(node.api.streams(), 1);
                echo_session(&mut conn).await;
                api_streams_end(&node.api).await;
                let sent = node.heads.recv().await.unwrap();
                assert!(
                    sent.starts_with("POST /stream/t0ken?command=cat&container=app"),
                    "{sent}"
                );
                assert!(
                    !sent.to_ascii_lowercase().contains("authorization"),
                    "{sent}"
                );

                // The kubelet's own paths, GET as well as POST; port-forward by the pod's
                // sandbox (found by its UID label).
                let (head, mut conn) = node
                    .send("GET", "/attach/default/web/app?stdout=1", true, true)
                    .await;
                assert!(head.starts_with("HTTP/1.1 101"), "{head}");
                echo_session(&mut conn).await;
                let (head, mut conn) = node
                    .send(
                        "POST",
                        "/api/v1/namespaces/default/pods/web/portforward",
                        true,
                        true,
                    )
                    .await;
                assert!(head.starts_with("HTTP/1.1 101"), "{head}");
                echo_session(&mut conn).await;
                api_streams_end(&node.api).await;
                assert_eq!(
                    node.runtime.stream_calls(),
                    [
                        ("Exec", node.container_id.clone()),
                        ("Attach", node.container_id.clone()),
                        ("PortForward", node.sandbox_id.clone()),
                    ]
                );
                node.shutdown.cancel();
            })
            .await;
    }

    #[tokio::test]
    async fn streams_that_cannot_be_served_are_refused_before_the_runtime_is_asked() {
        tokio::task::LocalSet::new()
            .run_until(async {
                let node = node().await;
                let exec = |q: &str| format!("/api/v1/namespaces/default/pods/{q}");
                for (method, path, upgrade, token, want) in [
                    (
                        "POST",
                        exec("web/exec?command=ls&stdout=true&container=app"),
                        true,
                        false,
                        "401",
                    ),
                    (
                        "POST",
                        exec("web/exec?command=ls&stdout=true&container=app"),
                        false,
                        true,
                        "400",
                    ),
                    (
                        "PUT",
                        exec("web/exec?command=ls&stdout=true&container=app"),
                        true,
                        true,
                        "405",
                    ),
                    (
                        "POST",
                        exec("nope/exec?command=ls&stdout=true"),
                        true,
                        true,
                        "404",
                    ),
                    (
                        "POST",
                        exec("web/exec?command=ls&container=app"),
                        true,
                        true,
                        "400",
                    ),
                    (
                        "POST",
                        exec("web/exec?stdout=true&container=app"),
                        true,
                        true,
                        "400",
                    ),
                    // Two containers and none named; a name the pod does not have.
                    (
                        "POST",
                        exec("web/exec?command=ls&stdout=true"),
                        true,
                        true,
                        "400",
                    ),
                    (
                        "POST",
                        exec("web/exec?command=ls&stdout=true&container=db"),
                        true,
                        true,
                        "400",
                    ),
                    // Not running.
                    (
                        "POST",
                        exec("web/exec?command=ls&stdout=true&container=idle"),
                        true,
                        true,
                        "404",
                    ),
                    (
                        "POST",
                        "/exec/default/web/u2/app?command=ls&stdout=1".to_string(),
                        true,
                        true,
                        "404",
                    ),
                    // Everything else stays read-only.
                    ("POST", exec("web"), false, true, "405"),
                ] {
                    let (head, _) = node.send(method, &path, upgrade, token).await;
                    assert!(
                        head.starts_with(&format!("HTTP/1.1 {want}")),
                        "{method} {path}: {head}"
                    );
                }
                assert!(node.runtime.stream_calls().is_empty());
                assert_eq!(node.api.streams(), 0);
                node.shutdown.cancel();
            })
            .await;
    }

    #[tokio::test]
    async fn at_most_max_streams_are_proxied() {
        tokio::task::LocalSet::new()
            .run_until(async {
                let node = node().await;
                let path = "/api/v1/namespaces/default/pods/web/exec?command=sh&stdin=true\
                            &container=app";
                let mut open = Vec::new();
                for _ in 0..MAX_STREAMS {
                    let (head, conn) = node.send("POST", path, true, true).await;
                    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
                    open.push(conn);
                }
                let (head, _) = node.send("POST", path, true, true).await;
                assert!(head.starts_with("HTTP/1.1 429"), "{head}");
                // Upgraded connections are the streams', not the server's.
                until("only streams are open", || node.api.connections() == 0).await;
                for mut conn in open.drain(..) {
                    echo_session(&mut conn).await;
                }
                api_streams_end(&node.api).await;
                let (head, mut conn) = node.send("POST", path, true, true).await;
                assert!(head.starts_with("HTTP/1.1 101"), "{head}");
                echo_session(&mut conn).await;
                node.shutdown.cancel();
            })
            .await;
    }

    #[test]
    fn routes() {
        let seg = |p: &'static str| p.trim_matches('/').split('/').collect::<Vec<_>>();
        let r = |p| route(&seg(p));
        assert_eq!(
            r("/api/v1/namespaces/default/pods/web/exec"),
            Some(Route {
                kind: Kind::Exec,
                namespace: "default",
                pod: "web",
                uid: None,
                container: None
            })
        );
        assert_eq!(
            r("/api/v1/namespaces/default/pods/web/portforward").map(|r| r.kind),
            Some(Kind::PortForward)
        );
        assert_eq!(r("/api/v1/namespaces/default/pods/web/log"), None);
        assert_eq!(
            r("/exec/ns/web/u1/app"),
            Some(Route {
                kind: Kind::Exec,
                namespace: "ns",
                pod: "web",
                uid: Some("u1"),
                container: Some("app")
            })
        );
        assert_eq!(r("/attach/ns/web/app").map(|r| r.kind), Some(Kind::Attach));
        // What the apiserver's port-forward proxy asks for (the kubelet's own spelling).
        assert_eq!(
            r("/portForward/ns/web").map(|r| (r.kind, r.pod)),
            Some((Kind::PortForward, "web"))
        );
        assert_eq!(
            r("/portforward/ns/web").map(|r| (r.kind, r.uid)),
            Some((Kind::PortForward, None))
        );
        assert_eq!(r("/exec/ns/web"), None);
    }

    #[test]
    fn targets() {
        let t = target("http://127.0.0.1:34567/exec/AbC").unwrap();
        assert_eq!(t.addr, "127.0.0.1:34567".parse().unwrap());
        assert_eq!(
            (t.host.as_str(), t.path.as_str()),
            ("127.0.0.1:34567", "/exec/AbC")
        );
        let t = target("http://[::1]:9/portforward/x").unwrap();
        assert_eq!(t.addr, "[::1]:9".parse().unwrap());
        assert_eq!(target("http://localhost/x").unwrap().addr.port(), 80);
        assert_eq!(target("http://10.0.0.7:1").unwrap().path, "/");
        for bad in [
            "https://127.0.0.1:1/exec/x",
            "http://example.com:1/exec/x",
            "http://user@127.0.0.1:1/x",
            "http://0.0.0.0:1/x",
            "http://127.0.0.1:0/x",
            "http://127.0.0.1:http/x",
            "/exec/x",
        ] {
            assert!(target(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn params() {
        let q = |s: &str| super::super::server::query_pairs(s);
        let p = Params::parse(&q(
            "command=sh&command=-c&command=echo+hi&container=app&stdin=true&stdout=true&stderr=true&tty=true",
        ))
        .unwrap();
        assert_eq!(p.command, ["sh", "-c", "echo hi"]);
        assert_eq!(p.container.as_deref(), Some("app"));
        // With a TTY stderr is merged into stdout.
        assert_eq!(
            p.streams,
            StreamOptions {
                stdin: true,
                stdout: true,
                stderr: false,
                tty: true
            }
        );
        let p = Params::parse(&q("stdout=1&ports=80,8080&port=9")).unwrap();
        assert!(p.streams.stdout && !p.streams.stdin && !p.streams.tty);
        assert_eq!(p.ports, [80, 8080, 9]);
        // The apiserver's exec proxy names the streams as the kubelet reads them.
        let p = Params::parse(&q("command=tr&input=1&output=1&error=1")).unwrap();
        assert!(p.streams.stdin && p.streams.stdout && p.streams.stderr && !p.streams.tty);
        assert!(Params::parse(&q("ports=0")).is_err());
        assert!(Params::parse(&q("ports=x")).is_err());
    }

    #[test]
    fn upgrade_requests() {
        let mut h = HeaderMap::new();
        assert!(!is_upgrade(&h));
        h.insert(header::CONNECTION, "keep-alive, Upgrade".parse().unwrap());
        assert!(!is_upgrade(&h));
        h.insert(header::UPGRADE, "SPDY/3.1".parse().unwrap());
        assert!(is_upgrade(&h));
    }

    #[test]
    fn slots_are_bounded_and_given_back() {
        let slots = Slots::default();
        let held: Vec<Slot> = (0..MAX_STREAMS).filter_map(|_| slots.take()).collect();
        assert_eq!(held.len(), MAX_STREAMS);
        assert!(slots.take().is_none());
        drop(held);
        assert_eq!(slots.in_use(), 0);
        assert!(slots.take().is_some());
    }
}
