//! The node API's HTTPS server (kubelet: `server.ListenAndServeKubeletServer` on
//! `--address`/`--port`), and its Kubernetes API routes: discovery, pods (list, get, watch;
//! JSON and `Table`), nodes, events, pods' logs, `metrics.k8s.io/v1beta1` (`kubectl top`,
//! see [`super::stats`]), the kubelet's own `/healthz`, `/pods`, `/metrics`,
//! `/stats/summary` and `/metrics/resource`; `exec`, `attach` and `portforward`, proxied to
//! the runtime ([`super::stream`]).
//!
//! Runs on the agent's one thread: every connection is a local task. A slow or hostile
//! client never stalls the agent nor locks others out: connections without an
//! authenticated request yet are capped per address and in all, the oldest of them going
//! when a cap is full, and authenticated ones are capped apart ([`super::conns`]); the TLS
//! handshake has [`TLS_HANDSHAKE_TIMEOUT`] and each request's headers [`HANDSHAKE_TIMEOUT`];
//! bodies are not read (every route is a GET, the streams' POSTs carry none), a watch that
//! falls behind is cut off, and at most [`super::stream::MAX_STREAMS`] streams are proxied.
//!
//! Must never: serve a request [`super::auth`] did not allow (only `/healthz` is open), serve
//! a Secret, or
//! compute per request what the agent already holds (pods are rendered once per change).

use std::cell::RefCell;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use hyper::body::Incoming;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::printers::{self, Kind};
use super::response::{Out, json_response, not_found, response, status_error};
use super::select::{SelectError, Selector};
use super::stats::{self, Stats};
use super::stream;
use super::token::Token;
use super::view::{Change, ChangeKind, View};
use crate::clock::{self, Clock, UnixNanos};
use crate::cri::{Runtime, RuntimeHealth};
use crate::json::object;
use crate::node::status::{self as node_status, NodeFacts};

/// Each request's headers must arrive within this.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// The TLS handshake must end within this (a client on a slow LAN link needs two round
/// trips; anything longer is holding a place).
pub(crate) const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// A watch without `timeoutSeconds` ends after this (the apiserver's `min-request-timeout`).
const WATCH_TIMEOUT: Duration = Duration::from_secs(1800);
/// How long the runtime's health is trusted for the Node served.
const HEALTH_TTL: Duration = Duration::from_secs(10);

/// The Node object served: machine facts read once, the runtime's health at most every
/// [`HEALTH_TTL`].
struct NodeCache {
    facts: NodeFacts,
    labels: std::collections::BTreeMap<String, String>,
    created: UnixNanos,
    health: Option<RuntimeHealth>,
    checked: Option<tokio::time::Instant>,
}

/// Everything the routes read.
pub struct Api<R: Runtime, C: Clock> {
    pub token: Token,
    /// Who may call, and what (kubelet: `authentication`/`authorization`).
    pub auth: super::auth::Auth,
    pub node_name: String,
    pub view: View,
    pub runtime: R,
    pub clock: C,
    pub pod_log_dir: PathBuf,
    /// The CRI operations' counters (None: the runtime is not instrumented).
    pub runtime_metrics: Option<std::sync::Arc<crate::metrics::RuntimeMetrics>>,
    /// The node's events (kubelet: the event recorder's), served by `events` list/watch.
    pub recorder: Option<crate::recorder::Recorder>,
    /// `kubelet_pod_worker_duration_seconds` and `prober_probe_total` (None: tests).
    pub agent_metrics: Option<Rc<crate::metrics::AgentMetrics>>,
    /// The eviction manager's pressure conditions (None: tests).
    pub pressure: Option<tokio::sync::watch::Receiver<crate::eviction::Conditions>>,
    /// The device plugins' resources (None: none).
    pub devices: Option<tokio::sync::watch::Receiver<crate::cm::devicemanager::Resources>>,
    /// Graceful node shutdown's requests to the loop (None: tests, or no loop).
    pub node_shutdown: Option<tokio::sync::mpsc::Sender<crate::node::shutdown::Request>>,
    node: RefCell<NodeCache>,
    stats: Stats,
    conns: RefCell<super::conns::Conns>,
    streams: stream::Slots,
}

impl<R: Runtime, C: Clock> Api<R, C> {
    pub fn new(
        token: Token,
        view: View,
        runtime: R,
        clock: C,
        facts: NodeFacts,
        labels: std::collections::BTreeMap<String, String>,
        pod_log_dir: PathBuf,
    ) -> Rc<Self> {
        let created = clock.now();
        Rc::new(Api {
            token,
            auth: super::auth::Auth::new(Default::default(), facts.hostname.clone(), None),
            node_name: facts.hostname.clone(),
            view,
            runtime,
            clock,
            pod_log_dir,
            runtime_metrics: None,
            recorder: None,
            agent_metrics: None,
            pressure: None,
            devices: None,
            node_shutdown: None,
            node: RefCell::new(NodeCache {
                facts,
                labels,
                created,
                health: None,
                checked: None,
            }),
            // The machine's own /proc: the figures of the node the API runs on (the
            // collector's tests inject another root into `Stats`).
            stats: Stats::new(PathBuf::from("/proc")),
            conns: RefCell::default(),
            streams: stream::Slots::default(),
        })
    }

    /// Connections open now.
    pub fn connections(&self) -> usize {
        self.conns.borrow().len()
    }

    /// Connections that have not made an authenticated request yet.
    pub fn unauthenticated_connections(&self) -> usize {
        self.conns.borrow().unauthenticated()
    }

    /// Unauthenticated connections closed to make room so far.
    pub fn evicted_connections(&self) -> u64 {
        self.conns.borrow().evicted()
    }

    /// Streams (exec, attach, port-forward) proxied now.
    pub fn streams(&self) -> usize {
        self.streams.in_use()
    }
}

/// Accepts connections until `shutdown`.
pub(crate) async fn serve<R: Runtime, C: Clock>(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    api: Rc<Api<R, C>>,
    shutdown: CancellationToken,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    loop {
        let Some((stream, peer)) = crate::http1::accept(&listener, &shutdown, "node API").await
        else {
            return;
        };
        // Never the newcomer: the caps close older unauthenticated connections instead.
        let evicted = api.conns.borrow().evicted();
        let (id, close) = api.conns.borrow_mut().open(peer.ip(), super::conns::LIMITS);
        let evicting = api.conns.borrow().evicted() != evicted;
        let _ = stream.set_nodelay(true);
        let api = Rc::clone(&api);
        let acceptor = acceptor.clone();
        let shutdown = shutdown.clone();
        crate::local_tasks::spawn_local(async move {
            tokio::select! {
                () = connection(stream, peer, id, acceptor, Rc::clone(&api), shutdown) => {}
                () = close.cancelled() => {
                    log::debug!("node API: {peer}: closed to make room (no authenticated request)");
                }
            }
            api.conns.borrow_mut().close(id);
        });
        // Under a storm, let the closed connections' tasks end (and drop their sockets)
        // before the next accept: the open descriptors stay near the caps.
        if evicting {
            tokio::task::yield_now().await;
        }
    }
}

async fn connection<R: Runtime, C: Clock>(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    id: u64,
    acceptor: tokio_rustls::TlsAcceptor,
    api: Rc<Api<R, C>>,
    shutdown: CancellationToken,
) {
    let tls = match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            log::debug!("node API: {peer}: TLS handshake failed: {e}");
            return;
        }
        Err(_) => {
            log::debug!("node API: {peer}: TLS handshake timed out");
            return;
        }
    };
    // kubelet: `--client-ca-file` — a client certificate the CA signed authenticates the
    // connection (the apiserver's kubelet-client certificate); rustls has verified it.
    // The user is the leaf's CN, its groups the O's (kubelet: x509 authenticator).
    let client_cert = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|leaf| super::auth::cert_user(leaf.as_ref()));
    let client_cert = match client_cert {
        Some(None) => {
            log::debug!("node API: {peer}: client certificate without a common name");
            None
        }
        Some(Some(u)) => Some(u),
        None => None,
    };
    if let Err(e) = serve_http(tls, id, client_cert, api, shutdown).await {
        log::debug!("node API: {peer}: {e}");
    }
}

/// HTTP/1 on a connection whose TLS is done: hyper's request parser, then [`handle`].
async fn serve_http<R, C, IO>(
    io: IO,
    id: u64,
    client_cert: Option<super::auth::User>,
    api: Rc<Api<R, C>>,
    shutdown: CancellationToken,
) -> Result<(), hyper::Error>
where
    R: Runtime,
    C: Clock,
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let conn_shutdown = shutdown.clone();
    let handler: crate::http1::Handler = Rc::new(move |req: Request<Incoming>| {
        let api = Rc::clone(&api);
        let shutdown = shutdown.clone();
        let client_cert = client_cert.clone();
        Box::pin(async move { handle(&api, req, id, client_cert, &shutdown).await })
    });
    let conn = crate::http1::serve(Box::new(io), handler, HANDSHAKE_TIMEOUT, 64 * 1024);
    tokio::select! {
        res = conn => res,
        _ = conn_shutdown.cancelled() => Ok(()),
    }
}

/// One plain HTTP/1 connection (no TLS, no listener) through the request parser, the
/// authentication and the routes, registered as a connection from `peer` would be: for
/// the request fuzzer (`tests/fuzz`, target `node_api`) and tests. Nothing reaches it from
/// the network.
#[doc(hidden)]
pub async fn serve_plain<R, C, IO>(
    io: IO,
    peer: std::net::IpAddr,
    api: Rc<Api<R, C>>,
    shutdown: CancellationToken,
) -> Result<(), hyper::Error>
where
    R: Runtime,
    C: Clock,
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (id, _close) = api.conns.borrow_mut().open(peer, super::conns::LIMITS);
    let r = serve_http(io, id, None, Rc::clone(&api), shutdown).await;
    api.conns.borrow_mut().close(id);
    r
}

/// A write to the read-only node API. On a pod's path (`kubectl delete/edit/label pod`)
/// the answer says how that pod is changed: a static pod through its manifest file (or the
/// manifest URL), named; an apiserver's pod through the apiserver. A pod that is not there
/// answers as a GET would.
fn read_only<R: Runtime, C: Clock>(api: &Api<R, C>, segments: &[&str]) -> Response<Out> {
    let not_allowed =
        |message: &str| status_error(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed", message);
    let ["api", "v1", "namespaces", ns, "pods", name, ..] = segments else {
        return not_allowed(
            "the server does not allow this method on the requested resource \
             (picolet's node API is read-only)",
        );
    };
    let Some(entry) = api.view.get(ns, name) else {
        return not_found("pods", name);
    };
    let pod = &entry.pod;
    let message = match (
        pod.annotation(crate::api::ANNOTATION_CONFIG_SOURCE),
        &pod.origin,
    ) {
        (Some(crate::manifest::SOURCE_FILE), Some(file)) => format!(
            "pod \"{name}\" is a static pod, run from the manifest file {file}: remove that \
             file to delete the pod, or edit it to change the pod (picolet's node API is \
             read-only)"
        ),
        (Some(crate::manifest::SOURCE_HTTP), Some(url)) => format!(
            "pod \"{name}\" is a static pod, run from the manifest URL {url} (--manifest-url): \
             change what it serves to delete or change the pod (picolet's node API is \
             read-only)"
        ),
        (Some(source), _) if pod.is_static() => format!(
            "pod \"{name}\" is a static pod from the {source} source: change its manifest \
             to delete or change it (picolet's node API is read-only)"
        ),
        _ => format!(
            "pod \"{name}\" is bound to this node by the apiserver: delete or change it \
             through the apiserver (picolet's node API is read-only)"
        ),
    };
    not_allowed(&message)
}

/// `application/x-www-form-urlencoded` decoding of one query value.
pub(crate) fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if bytes.len() > i + 2
                && hex(bytes[i + 1]).is_some()
                && hex(bytes[i + 2]).is_some() =>
            {
                let (h, l) = (
                    hex(bytes[i + 1]).unwrap_or(0),
                    hex(bytes[i + 2]).unwrap_or(0),
                );
                out.push((h * 16 + l) as u8);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The query's `key=value` pairs, decoded.
pub(crate) fn query_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (percent_decode(k), percent_decode(v)),
            None => (percent_decode(p), String::new()),
        })
        .collect()
}

struct Query(Vec<(String, String)>);

impl Query {
    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The `labelSelector` and `fieldSelector` for `kind`.
    fn selector(&self, kind: Kind) -> Result<Selector, SelectError> {
        Selector::parse(kind, self.get("labelSelector"), self.get("fieldSelector"))
    }

    fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true" | "1" | ""))
    }
}

/// kubectl's `get` asks for `application/json;as=Table;v=v1;g=meta.k8s.io,…`.
fn wants_table(req: &Request<Incoming>) -> bool {
    req.headers()
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|media| {
            let params: Vec<&str> = media.split(';').map(str::trim).collect();
            params.contains(&"as=Table")
                && params
                    .iter()
                    .all(|p| *p != "g=" && !p.starts_with("v=v1beta1"))
        })
}

/// `POST /shutdown` (see `handle`): answers once the loop has stopped every pod.
async fn node_shutdown<R: Runtime, C: Clock>(
    api: &Rc<Api<R, C>>,
    method: &Method,
    local_admin: bool,
) -> Response<Out> {
    if !local_admin {
        return status_error(
            StatusCode::FORBIDDEN,
            "Forbidden",
            "only picolet's local admin (its own kubeconfig) may shut the node down",
        );
    }
    if method != Method::POST {
        return status_error(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        );
    }
    let Some(tx) = &api.node_shutdown else {
        return status_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            "graceful node shutdown is not wired to this node API",
        );
    };
    let (done, answer) = tokio::sync::oneshot::channel();
    if tx
        .send(crate::node::shutdown::Request { done })
        .await
        .is_err()
    {
        return status_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            "picolet is stopping",
        );
    }
    match answer.await {
        Ok(report) => response(
            StatusCode::OK,
            "text/plain",
            Bytes::from(format!("{report}\n")),
        ),
        Err(_) => status_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            "picolet stopped before the shutdown was done",
        ),
    }
}

/// One request, routed the kubelet's way: `server.go`'s `InstallDefaultHandlers` and
/// `InstallDebuggingHandlers` register one handler per path behind `InstallAuthFilter`;
/// here the order is the same, as steps:
/// 1. the health paths, open to anyone;
/// 2. authentication, then authorization of the request's path ([`authorize`]);
/// 3. the connection kept, within the authenticated connections' cap ([`keep_connection`]);
/// 4. the handler for the path: the streams ([`serve_stream`]), picolet's shutdown hook,
///    the read-only answer to a write ([`read_only`]), else a GET ([`route_get`]).
async fn handle<R: Runtime, C: Clock>(
    api: &Rc<Api<R, C>>,
    req: Request<Incoming>,
    conn: u64,
    client_cert: Option<super::auth::User>,
    shutdown: &CancellationToken,
) -> Response<Out> {
    let path = req.uri().path().to_string();
    // Step 1: the health paths.
    if path == "/healthz" || path == "/livez" || path == "/readyz" {
        return response(StatusCode::OK, "text/plain", Bytes::from_static(b"ok"));
    }
    let authorization = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    // Step 2: who calls, and may they.
    if let Some(denied) = authorize(api, &req, &path, client_cert, authorization).await {
        return denied;
    }
    // Step 3: the connection is kept.
    if let Some(full) = keep_connection(api, conn) {
        return full;
    }
    // Step 4: the handler.
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    if let Some(route) = stream::route(&segments) {
        return serve_stream(api, &route, req, shutdown).await;
    }
    // picolet's own (no kubelet path): the system's shutdown hook (`picolet node-shutdown`)
    // asks for a graceful node shutdown and waits for it. The local admin only: no cluster
    // identity may take a node down through its kubelet API.
    if segments[..] == ["shutdown"] {
        return node_shutdown(api, req.method(), api.token.accepts(authorization)).await;
    }
    if req.method() != Method::GET {
        return read_only(api, &segments);
    }
    let query = Query(query_pairs(req.uri().query().unwrap_or("")));
    let table = wants_table(&req);
    let now = api.clock.now();
    route_get(api, &segments, &query, table, now, shutdown).await
}

/// Authenticates the request and authorizes its attributes; `None` when it may go on, else
/// the answer (401, 403, or 500 when a webhook could not say).
async fn authorize<R: Runtime, C: Clock>(
    api: &Rc<Api<R, C>>,
    req: &Request<Incoming>,
    path: &str,
    client_cert: Option<super::auth::User>,
    authorization: Option<&str>,
) -> Option<Response<Out>> {
    // kubelet: `InstallAuthFilter` — authenticate (certificate, token, anonymous), then
    // authorize the request's attributes. picolet's own token is a local admin.
    let bearer = authorization.and_then(|h| {
        let (scheme, rest) = h.split_at_checked(7)?;
        scheme.eq_ignore_ascii_case("bearer ").then(|| rest.trim())
    });
    let verdict = api
        .auth
        .check(
            req.method().as_str(),
            path,
            client_cert,
            bearer,
            api.token.accepts(authorization),
        )
        .await;
    match verdict {
        super::auth::Verdict::Allowed => None,
        super::auth::Verdict::Unauthenticated => Some(status_error(
            StatusCode::UNAUTHORIZED,
            "Unauthorized",
            "Unauthorized",
        )),
        super::auth::Verdict::Forbidden(m) => {
            Some(status_error(StatusCode::FORBIDDEN, "Forbidden", &m))
        }
        super::auth::Verdict::Error(m) => Some(status_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalError",
            &m,
        )),
    }
}

/// Marks the connection authenticated: from now on it is kept (no unauthenticated one can
/// close it), within the authenticated connections' own cap. `Some` (503, closing) when
/// that cap is full.
fn keep_connection<R: Runtime, C: Clock>(api: &Api<R, C>, conn: u64) -> Option<Response<Out>> {
    if api
        .conns
        .borrow_mut()
        .authenticate(conn, super::conns::LIMITS)
    {
        return None;
    }
    let mut r = status_error(
        StatusCode::SERVICE_UNAVAILABLE,
        "ServiceUnavailable",
        "too many connections to the node API",
    );
    r.headers_mut().insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    Some(r)
}

/// `exec`, `attach` and `portforward` (kubelet: `InstallDebuggingHandlers`), proxied to the
/// runtime's streaming server by [`stream::serve`].
async fn serve_stream<R: Runtime, C: Clock>(
    api: &Rc<Api<R, C>>,
    route: &stream::Route<'_>,
    req: Request<Incoming>,
    shutdown: &CancellationToken,
) -> Response<Out> {
    // kubelet: exec, attach and portforward are served for GET and POST.
    if req.method() != Method::GET && req.method() != Method::POST {
        return status_error(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        );
    }
    let pairs = query_pairs(req.uri().query().unwrap_or(""));
    let entry = api.view.get(route.namespace, route.pod);
    stream::serve(
        &api.runtime,
        entry,
        route,
        &pairs,
        &api.streams,
        req,
        shutdown,
    )
    .await
}

/// The GET routes, one handler per path family (kubelet: `InstallDefaultHandlers`), in the
/// order they match: discovery, `metrics.k8s.io`, the kubelet's own paths, then the `v1`
/// resources (namespaces, pods and their logs, events, nodes; never Secrets).
async fn route_get<R: Runtime, C: Clock>(
    api: &Rc<Api<R, C>>,
    segments: &[&str],
    query: &Query,
    table: bool,
    now: UnixNanos,
    shutdown: &CancellationToken,
) -> Response<Out> {
    match *segments {
        ["api"] => api_versions(),
        // Plain (legacy) discovery: kubectl asks for the aggregated kind first and accepts
        // this. `metrics.k8s.io` is served here (metrics-server's API) for `kubectl top`.
        ["apis"] => api_groups(),
        ["apis", "metrics.k8s.io"] => metrics_group(),
        ["apis", "metrics.k8s.io", "v1beta1"] => {
            json_response(StatusCode::OK, &stats::metrics_resources())
        }
        ["apis", "metrics.k8s.io", "v1beta1", ref rest @ ..] => metrics_api(api, rest, query).await,
        // kubelet: `/stats/summary` (pkg/kubelet/server/stats).
        ["stats", "summary"] => stats_summary(api).await,
        // kubelet: `/metrics/resource` (pkg/kubelet/metrics/collectors/resource_metrics.go).
        ["metrics", "resource"] => resource_metrics(api).await,
        ["api", "v1"] => json_response(StatusCode::OK, &resources()),
        ["api", "v1", "namespaces"] => namespace_list(api),
        ["api", "v1", "namespaces", ns] => namespace_get(api, ns),
        ["version"] => json_response(StatusCode::OK, &version()),
        ["pods"] => kubelet_pods(api),
        ["metrics"] => metrics(api),
        ["api", "v1", "pods"] => pods(api, None, query, table, now, shutdown),
        ["api", "v1", "namespaces", ns, "pods"] => pods(api, Some(ns), query, table, now, shutdown),
        ["api", "v1", "namespaces", ns, "pods", name, "log"] => {
            pod_log(api, ns, name, None, query, now)
        }
        // kubelet: `/containerLogs/{namespace}/{pod}/{container}`.
        ["containerLogs", ns, name, container] => {
            pod_log(api, ns, name, Some(container), query, now)
        }
        ["api", "v1", "events"] => events(api, None, query, table, now, shutdown),
        ["api", "v1", "namespaces", ns, "events"] => {
            events(api, Some(ns), query, table, now, shutdown)
        }
        ["api", "v1", "namespaces", ns, "events", name] => event_get(api, ns, name, table, now),
        ["api", "v1", "namespaces", ns, "pods", name] => pod_get(api, ns, name, table, now),
        ["api", "v1", "nodes"] => node_list(api, query, table, now).await,
        ["api", "v1", "nodes", name] if name == api.node_name => node_get(api, table, now).await,
        ["api", "v1", "nodes", name] => not_found("nodes", name),
        ["api", "v1", "namespaces", _, "secrets", ..] | ["api", "v1", "secrets"] => status_error(
            StatusCode::FORBIDDEN,
            "Forbidden",
            "picolet's node API never serves Secrets",
        ),
        _ => not_found("", ""),
    }
}

/// `GET /api`: the core group's versions.
fn api_versions() -> Response<Out> {
    json_response(
        StatusCode::OK,
        &json!({"kind": "APIVersions", "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}]}),
    )
}

/// `GET /apis`: the groups served (only `metrics.k8s.io`).
fn api_groups() -> Response<Out> {
    json_response(
        StatusCode::OK,
        &json!({"kind": "APIGroupList", "apiVersion": "v1",
                "groups": [stats::metrics_group()]}),
    )
}

/// `GET /apis/metrics.k8s.io`: the group itself.
fn metrics_group() -> Response<Out> {
    let mut group = stats::metrics_group();
    group["kind"] = json!("APIGroup");
    group["apiVersion"] = json!("v1");
    json_response(StatusCode::OK, &group)
}

/// kubelet: `/stats/summary` — the node's, pods' and containers' usage.
async fn stats_summary<R: Runtime, C: Clock>(api: &Rc<Api<R, C>>) -> Response<Out> {
    let snap = api.stats.snapshot(&api.runtime, &api.clock).await;
    json_response(StatusCode::OK, &stats::summary(&snap, &api.node_name))
}

/// kubelet: `/metrics/resource` — the same usage, as Prometheus text.
async fn resource_metrics<R: Runtime, C: Clock>(api: &Rc<Api<R, C>>) -> Response<Out> {
    let snap = api.stats.snapshot(&api.runtime, &api.clock).await;
    response(
        StatusCode::OK,
        "text/plain; version=0.0.4; charset=utf-8",
        Bytes::from(stats::resource_metrics(&snap)),
    )
}

/// `GET /api/v1/namespaces`: the namespaces of the pods served, and `default`: kubectl asks
/// for one after a 404 to tell "no such pod" from "no such namespace" (as the apiserver
/// answers).
fn namespace_list<R: Runtime, C: Clock>(api: &Api<R, C>) -> Response<Out> {
    let created = api.node.borrow().created;
    let items: Vec<Value> = namespaces(api)
        .iter()
        .map(|n| namespace(n, created))
        .collect();
    json_response(
        StatusCode::OK,
        &list("NamespaceList", "v1", "1".into(), items),
    )
}

/// `GET /api/v1/namespaces/NS`: one of [`namespace_list`]'s, else 404.
fn namespace_get<R: Runtime, C: Clock>(api: &Api<R, C>, ns: &str) -> Response<Out> {
    if namespaces(api).iter().any(|n| n == ns) {
        json_response(StatusCode::OK, &namespace(ns, api.node.borrow().created))
    } else {
        not_found("namespaces", ns)
    }
}

/// kubelet: `/pods` — the pods this kubelet runs, as a PodList.
fn kubelet_pods<R: Runtime, C: Clock>(api: &Api<R, C>) -> Response<Out> {
    let (rv, pods) = api.view.pods();
    let items: Vec<Value> = pods.iter().map(|e| (*e.json()).clone()).collect();
    json_response(
        StatusCode::OK,
        &list("PodList", "v1", rv.to_string(), items),
    )
}

/// kubelet: `/metrics` — Prometheus text, the kubelet's names.
fn metrics<R: Runtime, C: Clock>(api: &Api<R, C>) -> Response<Out> {
    let mut out = String::with_capacity(8 * 1024);
    api.view.render_metrics(&mut out);
    if let Some(m) = &api.runtime_metrics {
        m.render(&mut out);
    }
    if let Some(m) = &api.agent_metrics {
        m.render(&mut out);
    }
    crate::metrics::render_single(
        &mut out,
        "picolet_node_api_connections",
        "gauge",
        "Connections open to the node API",
        api.connections(),
    );
    crate::metrics::render_single(
        &mut out,
        "picolet_node_api_connections_evicted_total",
        "counter",
        "Connections without an authenticated request closed to make room",
        api.evicted_connections(),
    );
    crate::metrics::render_process(&mut out, std::path::Path::new("/proc/self"));
    response(
        StatusCode::OK,
        "text/plain; version=0.0.4; charset=utf-8",
        Bytes::from(out),
    )
}

/// `GET /api/v1/namespaces/NS/events/NAME`: one event of the recorder's, else 404.
fn event_get<R: Runtime, C: Clock>(
    api: &Api<R, C>,
    ns: &str,
    name: &str,
    table: bool,
    now: UnixNanos,
) -> Response<Out> {
    let found = api.recorder.as_ref().and_then(|r| {
        r.list()
            .into_iter()
            .find(|e| e.namespace == ns && e.name == name)
    });
    match found {
        Some(e) if table => table_response(Kind::Event, &[&e.to_json()], e.resource_version, now),
        Some(e) => json_response(StatusCode::OK, &e.to_json()),
        None => not_found("events", name),
    }
}

/// `GET /api/v1/namespaces/NS/pods/NAME`: one pod served, else 404.
fn pod_get<R: Runtime, C: Clock>(
    api: &Api<R, C>,
    ns: &str,
    name: &str,
    table: bool,
    now: UnixNanos,
) -> Response<Out> {
    match api.view.get(ns, name) {
        Some(e) if table => table_response(Kind::Pod, &[&e.json()], e.resource_version, now),
        Some(e) => json_response(StatusCode::OK, &e.json()),
        None => not_found("pods", name),
    }
}

/// `GET /api/v1/nodes`: this node, when the selectors match it.
async fn node_list<R: Runtime, C: Clock>(
    api: &Rc<Api<R, C>>,
    query: &Query,
    table: bool,
    now: UnixNanos,
) -> Response<Out> {
    let node = node_object(api).await;
    let sel = match query.selector(Kind::Node) {
        Ok(s) => s,
        Err(e) => return bad_selector(&e),
    };
    let items: Vec<&Value> = [&node].into_iter().filter(|n| sel.matches(n)).collect();
    if table {
        table_response(Kind::Node, &items, 1, now)
    } else {
        json_response(
            StatusCode::OK,
            &list("NodeList", "v1", "1".into(), owned(&items)),
        )
    }
}

/// `GET /api/v1/nodes/NAME` for this node's name.
async fn node_get<R: Runtime, C: Clock>(
    api: &Rc<Api<R, C>>,
    table: bool,
    now: UnixNanos,
) -> Response<Out> {
    let node = node_object(api).await;
    if table {
        table_response(Kind::Node, &[&node], 1, now)
    } else {
        json_response(StatusCode::OK, &node)
    }
}

/// `pods/log` (kubelet: `getContainerLogs`): the container's log file with the options
/// kubectl sends, streamed; a follow ends when the container is no longer the one running.
fn pod_log<R: Runtime, C: Clock>(
    api: &Rc<Api<R, C>>,
    ns: &str,
    name: &str,
    container: Option<&str>,
    query: &Query,
    now: UnixNanos,
) -> Response<Out> {
    use super::logs::{self, LogOptions};
    let log_error = |e: logs::LogError| {
        let code = StatusCode::from_u16(e.status_code()).unwrap_or(StatusCode::BAD_REQUEST);
        status_error(code, e.reason(), &e.to_string())
    };
    // Step 1: the options.
    let mut opts = match LogOptions::from_pairs(&query.0, now) {
        Ok(o) => o,
        Err(e) => return log_error(e),
    };
    // Step 2: the pod and its container.
    let Some(entry) = api.view.get(ns, name) else {
        return not_found("pods", name);
    };
    let container = match log_container(&entry.pod.spec, name, container, &mut opts) {
        Ok(c) => c,
        Err(e) => return log_error(e),
    };
    // Step 3: the instance's log file.
    let dir = crate::kuberuntime::cri_config::pod_log_directory(&api.pod_log_dir, &entry.pod);
    let log = match logs::log_files(&dir, &container).and_then(|f| f.select(opts.previous).cloned())
    {
        Ok(l) => l,
        Err(e) => return log_error(e),
    };
    // Step 4: the instance followed is the one running now; once the pod's status shows
    // another (or none), the follow ends after the rest of the file.
    let (stopped_tx, stopped_rx) = tokio::sync::watch::channel(opts.previous);
    if opts.follow && !opts.previous {
        let uid = entry.pod.uid().to_string();
        crate::local_tasks::spawn_local(watch_instance(
            api.view.clone(),
            uid,
            container,
            log.restart_count,
            stopped_tx,
        ));
    }
    // Step 5: the file, streamed.
    let (tx, body) = mpsc::channel(16);
    crate::local_tasks::spawn_local(async move {
        if let Err(e) = logs::follow(log, opts, stopped_rx, tx).await {
            log::debug!("node API: logs: {e}");
        }
    });
    stream_response(body, "text/plain")
}

/// The container whose log is asked for: the path's, else the query's, checked against the
/// pod's containers; with neither, the apiserver's rule: the only container, else the
/// client must choose.
fn log_container(
    spec: &crate::api::PodSpec,
    name: &str,
    container: Option<&str>,
    opts: &mut super::logs::LogOptions,
) -> Result<String, super::logs::LogError> {
    use super::logs::LogError;
    let names: Vec<&str> = spec
        .init_containers
        .iter()
        .chain(&spec.containers)
        .chain(&spec.ephemeral_containers)
        .map(|c| c.name.as_str())
        .collect();
    match container.map(str::to_string).or(opts.container.take()) {
        Some(c) if names.contains(&c.as_str()) => Ok(c),
        Some(c) => Err(LogError::ContainerNotValid {
            pod: name.to_string(),
            container: c,
        }),
        None if spec.containers.len() == 1 => Ok(spec.containers[0].name.clone()),
        None => {
            let choices: Vec<&str> = spec.containers.iter().map(|c| c.name.as_str()).collect();
            Err(LogError::ContainerNotChosen {
                pod: name.to_string(),
                choices: choices.join(" "),
            })
        }
    }
}

/// Sends `true` on `stopped` once the pod `uid` no longer shows `container` running with
/// `restart_count` (the instance a follow reads), checked at every change of the view;
/// ends early when the follow is gone.
async fn watch_instance(
    view: View,
    uid: String,
    container: String,
    restart_count: u32,
    stopped: tokio::sync::watch::Sender<bool>,
) {
    let running = |view: &View| {
        view.get_uid(&uid).is_some_and(|e| {
            e.status.as_deref().is_some_and(|s| {
                s.container_statuses
                    .iter()
                    .chain(&s.init_container_statuses)
                    .any(|c| {
                        c.name == container
                            && c.state.running.is_some()
                            && u32::try_from(c.restart_count).ok() == Some(restart_count)
                    })
            })
        })
    };
    loop {
        let Ok(mut changes) = view.watch(None) else {
            return;
        };
        loop {
            if !running(&view) {
                let _ = stopped.send(true);
                return;
            }
            tokio::select! {
                c = changes.recv() => if c.is_none() { break },
                _ = stopped.closed() => return,
            }
        }
    }
}

/// A 200 whose body is what `body` receives, until its sender is dropped.
fn stream_response(body: mpsc::Receiver<Bytes>, content_type: &'static str) -> Response<Out> {
    let mut r = Response::new(Out::Stream(body));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    r
}

/// A watch's `timeoutSeconds`, else [`WATCH_TIMEOUT`].
fn watch_timeout(query: &Query) -> Duration {
    query
        .get("timeoutSeconds")
        .and_then(|v| v.parse().ok())
        .map(Duration::from_secs)
        .unwrap_or(WATCH_TIMEOUT)
}

/// A 400 for a selector the query's `labelSelector`/`fieldSelector` do not make.
fn bad_selector(e: &SelectError) -> Response<Out> {
    status_error(StatusCode::BAD_REQUEST, "BadRequest", &e.to_string())
}

/// `events` list and watch, from the node's event recorder (kubelet: the events it records
/// are the apiserver's; offline, the recorder's ring is all there is).
fn events<R: Runtime, C: Clock>(
    api: &Rc<Api<R, C>>,
    namespace: Option<&str>,
    query: &Query,
    table: bool,
    now: UnixNanos,
    shutdown: &CancellationToken,
) -> Response<Out> {
    let sel = match query.selector(Kind::Event) {
        Ok(s) => s,
        Err(e) => return bad_selector(&e),
    };
    let ns = namespace.map(str::to_string);
    let keep = move |v: &Value| {
        ns.as_deref()
            .is_none_or(|ns| v["metadata"]["namespace"] == ns)
            && sel.matches(v)
    };
    let Some(recorder) = api.recorder.clone() else {
        let empty: Vec<&Value> = Vec::new();
        return if table {
            table_response(Kind::Event, &empty, 0, now)
        } else {
            json_response(
                StatusCode::OK,
                &list("EventList", "v1", "0".into(), owned(&empty)),
            )
        };
    };
    if query.flag("watch") {
        let since = query
            .get("resourceVersion")
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| recorder.resource_version());
        let timeout = watch_timeout(query);
        let (tx, body) = mpsc::channel(16);
        crate::local_tasks::spawn_local(watch_events(
            recorder,
            since,
            keep,
            table,
            api.clock.clone(),
            timeout,
            shutdown.clone(),
            tx,
        ));
        return stream_response(body, "application/json");
    }
    let rv = recorder.resource_version();
    let objects: Vec<Value> = recorder.list().iter().map(|e| e.to_json()).collect();
    let items: Vec<&Value> = objects.iter().filter(|v| keep(v)).collect();
    if table {
        return table_response(Kind::Event, &items, rv, now);
    }
    json_response(
        StatusCode::OK,
        &list("EventList", "v1", rv.to_string(), owned(&items)),
    )
}

/// Streams an events watch: one JSON line per event recorded after `since` that `keep`s
/// (`ADDED`, or `MODIFIED` for a repeat), until the client goes, the timeout, or shutdown.
#[allow(clippy::too_many_arguments)] // a task's whole context, handed in once
async fn watch_events<C: Clock>(
    recorder: crate::recorder::Recorder,
    mut since: u64,
    keep: impl Fn(&Value) -> bool,
    table: bool,
    clock: C,
    timeout: Duration,
    shutdown: CancellationToken,
    tx: mpsc::Sender<Bytes>,
) {
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    loop {
        // The recorder wakes every waiter: read what is new and, only when there is
        // nothing, wait — with no other await in between (one thread: nothing can be
        // recorded meanwhile).
        let batch = recorder.since(since);
        if batch.is_empty() {
            tokio::select! {
                _ = recorder.changed() => {}
                _ = tx.closed() => return,
                _ = &mut deadline => return,
                _ = shutdown.cancelled() => return,
            }
            continue;
        }
        for e in batch {
            since = e.resource_version;
            let object = e.to_json();
            if !keep(&object) {
                continue;
            }
            let kind = if e.count > 1 {
                ChangeKind::Modified
            } else {
                ChangeKind::Added
            };
            let object = if table {
                printers::table(Kind::Event, &[&object], e.resource_version, clock.now())
            } else {
                object
            };
            if tx.send(watch_line(kind, &object)).await.is_err() {
                return;
            }
        }
    }
}

/// `metrics.k8s.io/v1beta1` below the group version: `nodes[/NAME]`,
/// `[namespaces/NS/]pods[/NAME]` (metrics-server's NodeMetrics and PodMetrics).
async fn metrics_api<R: Runtime, C: Clock>(
    api: &Rc<Api<R, C>>,
    rest: &[&str],
    query: &Query,
) -> Response<Out> {
    let list = |kind: &str, items: Vec<Value>| {
        json_response(
            StatusCode::OK,
            &json!({"kind": kind, "apiVersion": "metrics.k8s.io/v1beta1",
                    "metadata": {}, "items": items}),
        )
    };
    let (kind, namespace, name) = match *rest {
        ["nodes"] => (Kind::Node, None, None),
        ["nodes", name] => (Kind::Node, None, Some(name)),
        ["pods"] => (Kind::Pod, None, None),
        ["namespaces", ns, "pods"] => (Kind::Pod, Some(ns), None),
        ["namespaces", ns, "pods", name] => (Kind::Pod, Some(ns), Some(name)),
        _ => return not_found("", ""),
    };
    let sel = match query.selector(kind) {
        Ok(s) => s,
        Err(e) => return bad_selector(&e),
    };
    let now = api.clock.now();
    if kind == Kind::Node {
        if name.is_some_and(|n| n != api.node_name) {
            return not_found("nodemetrics.metrics.k8s.io", name.unwrap_or_default());
        }
        let node = node_object(api).await;
        let snap = api.stats.snapshot(&api.runtime, &api.clock).await;
        let labels = api.node.borrow().labels.clone();
        let metrics = stats::node_metrics(&snap, &api.node_name, &labels, now);
        return match name {
            Some(_) => json_response(StatusCode::OK, &metrics),
            None if sel.matches(&node) => list("NodeMetricsList", vec![metrics]),
            None => list("NodeMetricsList", vec![]),
        };
    }
    let snap = api.stats.snapshot(&api.runtime, &api.clock).await;
    let mut items = Vec::new();
    for pod in &snap.pods {
        if namespace.is_some_and(|ns| ns != pod.namespace) || name.is_some_and(|n| n != pod.name) {
            continue;
        }
        // Only the pods this API serves (`kubectl top pods` lists what `get pods` does, not
        // every pod in a shared runtime); their labels and the selectors come from it.
        let Some(entry) = api.view.get(&pod.namespace, &pod.name) else {
            continue;
        };
        let object = entry.json();
        if name.is_none() && !sel.matches(&object) {
            continue;
        }
        let labels = object["metadata"]["labels"].clone();
        let labels = if labels.is_null() { json!({}) } else { labels };
        items.push(stats::pod_metrics(&snap, pod, &labels, now));
    }
    match name {
        Some(n) => match items.pop() {
            Some(m) => json_response(StatusCode::OK, &m),
            None => not_found(
                "podmetrics.metrics.k8s.io",
                &format!("{}/{n}", namespace.unwrap_or_default()),
            ),
        },
        None => list("PodMetricsList", items),
    }
}

fn table_response(kind: Kind, objects: &[&Value], rv: u64, now: UnixNanos) -> Response<Out> {
    json_response(StatusCode::OK, &printers::table(kind, objects, rv, now))
}

fn pods<R: Runtime, C: Clock>(
    api: &Rc<Api<R, C>>,
    namespace: Option<&str>,
    query: &Query,
    table: bool,
    now: UnixNanos,
    shutdown: &CancellationToken,
) -> Response<Out> {
    let sel = match query.selector(Kind::Pod) {
        Ok(s) => s,
        Err(e) => return bad_selector(&e),
    };
    if query.flag("watch") {
        return pods_watch(api, namespace, sel, query, table, shutdown);
    }
    let in_ns = move |v: &Value| namespace.is_none_or(|ns| v["metadata"]["namespace"] == ns);
    let (rv, entries) = api.view.pods();
    let objects: Vec<Rc<Value>> = entries.iter().map(|e| e.json()).collect();
    let mut items: Vec<&Value> = objects
        .iter()
        .map(|v| &**v)
        .filter(|v| in_ns(v) && sel.matches(v))
        .collect();
    crate::sort::sort_by(&mut items, |a, b| {
        (
            a["metadata"]["namespace"].as_str(),
            a["metadata"]["name"].as_str(),
        )
            .cmp(&(
                b["metadata"]["namespace"].as_str(),
                b["metadata"]["name"].as_str(),
            ))
    });
    if table {
        return table_response(Kind::Pod, &items, rv, now);
    }
    json_response(
        StatusCode::OK,
        &list("PodList", "v1", rv.to_string(), owned(&items)),
    )
}

/// A pods watch from `resourceVersion` (410 when the view no longer holds it), streamed by
/// [`watch_pods`].
fn pods_watch<R: Runtime, C: Clock>(
    api: &Rc<Api<R, C>>,
    namespace: Option<&str>,
    sel: Selector,
    query: &Query,
    table: bool,
    shutdown: &CancellationToken,
) -> Response<Out> {
    let since = query.get("resourceVersion").and_then(|v| v.parse().ok());
    let rx = match api.view.watch(since) {
        Ok(rx) => rx,
        Err(_) => {
            return status_error(
                StatusCode::GONE,
                "Expired",
                &format!("too old resource version: {}", since.unwrap_or(0)),
            );
        }
    };
    let timeout = watch_timeout(query);
    let ns = namespace.map(str::to_string);
    let (tx, body) = mpsc::channel(16);
    let clock = api.clock.clone();
    crate::local_tasks::spawn_local(watch_pods(
        rx,
        tx,
        move |v: &Value| {
            ns.as_deref()
                .is_none_or(|ns| v["metadata"]["namespace"] == ns)
                && sel.matches(v)
        },
        table,
        clock,
        timeout,
        shutdown.clone(),
    ));
    stream_response(body, "application/json")
}

/// Streams a watch: one JSON line per change (`{"type":…,"object":…}`), the object a one-row
/// `Table` when the client asked for tables (kubectl `get -w`).
async fn watch_pods<C: Clock>(
    mut rx: mpsc::Receiver<Rc<Change>>,
    tx: mpsc::Sender<Bytes>,
    keep: impl Fn(&Value) -> bool,
    table: bool,
    clock: C,
    timeout: Duration,
    shutdown: CancellationToken,
) {
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    loop {
        let change = tokio::select! {
            c = rx.recv() => match c {
                Some(c) => c,
                None => return,
            },
            _ = tx.closed() => return,
            _ = &mut deadline => return,
            _ = shutdown.cancelled() => return,
        };
        let object = change.entry.json();
        if !keep(&object) {
            continue;
        }
        let object = if table {
            printers::table(
                Kind::Pod,
                &[&object],
                change.entry.resource_version,
                clock.now(),
            )
        } else {
            (*object).clone()
        };
        let kind = change.kind;
        let line = watch_line(kind, &object);
        if tx.send(line).await.is_err() {
            return;
        }
    }
}

fn watch_line(kind: ChangeKind, object: &Value) -> Bytes {
    let mut line =
        serde_json::to_vec(&json!({"type": kind.as_str(), "object": object})).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

/// The Node this picolet is, as the apiserver would serve it (also without a cluster).
async fn node_object<R: Runtime, C: Clock>(api: &Rc<Api<R, C>>) -> Value {
    let stale = api
        .node
        .borrow()
        .checked
        .is_none_or(|t| t.elapsed() >= HEALTH_TTL);
    if stale {
        let health = api.runtime.status().await.ok();
        let has_version = !api.node.borrow().facts.runtime_version.is_empty();
        let version = match has_version {
            false => api.runtime.version().await.ok(),
            true => None,
        };
        let mut cache = api.node.borrow_mut();
        cache.health = health;
        cache.checked = Some(tokio::time::Instant::now());
        if let Some(v) = version {
            cache.facts.runtime_version = format!("{}://{}", v.runtime_name, v.runtime_version);
        }
    }
    if let Some(rx) = &api.pressure {
        api.node.borrow_mut().facts.pressure = *rx.borrow();
    }
    if let Some(rx) = &api.devices {
        api.node.borrow_mut().facts.devices = rx.borrow().clone();
    }
    let cache = api.node.borrow();
    let now = api.clock.now();
    let status = node_status::node_status(&cache.facts, cache.health.as_ref(), None, now);
    json!({
        "kind": "Node", "apiVersion": "v1",
        "metadata": {
            "name": api.node_name,
            "labels": cache.labels,
            "creationTimestamp": clock::rfc3339(cache.created),
            "resourceVersion": "1",
        },
        "spec": {},
        "status": status,
    })
}

/// A `…List` object (`kind`, `apiVersion`, `metadata.resourceVersion`, `items`).
fn list(kind: &str, api_version: &str, resource_version: String, items: Vec<Value>) -> Value {
    object(&mut [
        ("kind", kind.into()),
        ("apiVersion", api_version.into()),
        (
            "metadata",
            object(&mut [("resourceVersion", resource_version.into())]),
        ),
        ("items", Value::Array(items)),
    ])
}

/// The items of a list, copied (what `json!` did with a `Vec<&Value>`).
fn owned(items: &[&Value]) -> Vec<Value> {
    items.iter().map(|v| (*v).clone()).collect()
}

/// `GET /api/v1`: what this server serves.
fn resources() -> Value {
    let r = |name: &str, namespaced: bool, kind: &str, verbs: &[&str], short: &[&str]| {
        json!({"name": name, "singularName": kind.to_lowercase(), "namespaced": namespaced,
               "kind": kind, "verbs": verbs, "shortNames": short})
    };
    let mut pods = r("pods", true, "Pod", &["get", "list", "watch"], &["po"]);
    // The apiserver's category: `kubectl get all` lists the pods.
    pods["categories"] = json!(["all"]);
    json!({
        "kind": "APIResourceList", "groupVersion": "v1",
        "resources": [
            pods,
            r("pods/log", true, "Pod", &["get"], &[]),
            r("nodes", false, "Node", &["get", "list"], &["no"]),
            r("events", true, "Event", &["get", "list", "watch"], &["ev"]),
            r("namespaces", false, "Namespace", &["get", "list"], &["ns"]),
        ],
    })
}

/// `default` and the namespace of every pod served, sorted.
fn namespaces<R: Runtime, C: Clock>(api: &Api<R, C>) -> Vec<String> {
    let (_, pods) = api.view.pods();
    let mut out: Vec<String> = pods.iter().map(|p| p.namespace().to_string()).collect();
    out.push("default".to_string());
    crate::sort::sort(&mut out);
    out.dedup();
    out
}

/// A Namespace, created when the node API started (picolet keeps no namespace objects).
fn namespace(name: &str, created: UnixNanos) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace",
           "metadata": {"name": name, "creationTimestamp": clock::rfc3339(created)},
           "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
}

/// `GET /version`: the API level picolet's node API follows, and picolet's own version.
fn version() -> Value {
    object(&mut [
        ("major", "1".into()),
        ("minor", "32".into()),
        ("gitVersion", node_status::KUBELET_VERSION.into()),
        ("gitCommit", "".into()),
        ("gitTreeState", "clean".into()),
        ("buildDate", "".into()),
        ("goVersion", "".into()),
        ("compiler", "rustc".into()),
        (
            "platform",
            format!("linux/{}", node_status::go_arch()).into(),
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_decoding() {
        assert_eq!(
            query_pairs("fieldSelector=involvedObject.name%3Dweb%2Cx%3Dy&limit=500&watch&a=b+c%2"),
            vec![
                (
                    "fieldSelector".to_string(),
                    "involvedObject.name=web,x=y".to_string()
                ),
                ("limit".into(), "500".into()),
                ("watch".into(), "".into()),
                ("a".into(), "b c%2".into()),
            ]
        );
        assert_eq!(percent_decode("%zz%"), "%zz%");
        assert_eq!(percent_decode("%e2%9c%93"), "✓");
    }
}
