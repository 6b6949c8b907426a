//! A mock Kubernetes API server for tests (feature `mock-apiserver`): HTTP/1.1 (hyper
//! server) on a loopback port, optionally HTTPS, with the API semantics picolet relies on
//! and switches for the faults an edge link produces.
//!
//! Semantics (as the real apiserver; objects are kept as raw JSON so nothing is lost):
//! - pods: create (409 `AlreadyExists`; `generateName`), get, list and watch in all
//!   namespaces or one, `fieldSelector=spec.nodeName=<node>`, `resourceVersion`: a watch
//!   resumes after it from the event history and answers a too-old one (compacted) with an
//!   `ERROR` event carrying a 410 `Expired` Status; `allowWatchBookmarks` + [`MockApiServer::bookmark`];
//!   `timeoutSeconds` ends the watch; a watch without resourceVersion (or "0") starts with
//!   synthetic `ADDED` events;
//! - `pods/<name>/status`: strategic merge patch or merge patch of the status only;
//!   `metadata.uid` in the patch is a precondition (409 on mismatch);
//! - PATCH of a pod (merge / strategic merge);
//! - DELETE with `DeleteOptions`: `preconditions.uid` (409 on mismatch), graceful deletion
//!   of a pod bound to a node (sets `deletionTimestamp` and `deletionGracePeriodSeconds`,
//!   event MODIFIED), immediate removal with grace 0 or for an unbound pod (event DELETED);
//! - mirror pods (annotation `kubernetes.io/config.mirror`) are admitted only with exactly
//!   one ownerReference `{v1, Node, <spec.nodeName>, <the Node's uid>, controller: true}`,
//!   as the NodeRestriction admission plugin does (403 otherwise);
//! - nodes: create, get, patch, patch `status` (strategic merge: conditions and addresses
//!   merged by `type`);
//! - leases (`coordination.k8s.io/v1`): create, get, update (PUT, resourceVersion checked);
//! - services: list in all namespaces (those [`MockApiServer::put_object`] set), a watch that
//!   only ends at its `timeoutSeconds`;
//! - configmaps and secrets: get, list and watch one object (`fieldSelector=metadata.name=`,
//!   resumed from `resourceVersion`), set by [`MockApiServer::put_object`] /
//!   [`MockApiServer::delete_object`]; `serviceaccounts/<sa>/token` (TokenRequest) answers
//!   `mock-token.<ns>.<sa>.<pod>.<uid>.<n>`;
//! - TokenReview and SubjectAccessReview of `nodes` subresources, answered from
//!   [`MockApiServer::accept_token`] and [`MockApiServer::allow`];
//! - certificatesigningrequests (`certificates.k8s.io/v1`): create (409 `AlreadyExists`;
//!   `generateName`), get, list; what happens to a new one is the test's
//!   [`MockApiServer::on_csr`] hook (approve with a certificate, deny, or leave it pending),
//!   as a signer and an approver would;
//! - a bearer token, if set, is required (401 otherwise).
//!
//! Faults: [`MockApiServer::fail_next`] (answer N requests with an error code),
//! [`MockApiServer::set_delay`] (slow answers), [`MockApiServer::drop_watches`] (cut every
//! watch connection mid-stream), [`MockApiServer::inject_watch_line`] (send raw bytes on every
//! watch), [`MockApiServer::compact`] (history gone: resuming watches get 410),
//! [`MockApiServer::stop`] / [`MockApiServer::start`] (the server goes away and comes back
//! on the same address with the same objects).
//!
//! Must never: be part of a release build. Locks are std mutexes held only between awaits.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::api::ANNOTATION_CONFIG_MIRROR;

/// One request as the mock saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestRecord {
    pub method: String,
    pub path: String,
    pub query: String,
    pub content_type: String,
    pub body: Value,
    /// Request headers (lower-case names), the token redacted.
    pub headers: Vec<(String, String)>,
}

/// A fault: answer the next `remaining` matching requests with `code`.
#[derive(Debug, Clone)]
struct Fault {
    method: Option<Method>,
    path_contains: Option<String>,
    remaining: usize,
    code: u16,
}

enum WatchMsg {
    Line(Bytes),
    /// Cut the connection mid-stream (no terminating chunk).
    Abort,
    /// End the stream normally (`timeoutSeconds`).
    End,
}

struct Watcher {
    namespace: Option<String>,
    node: Option<String>,
    bookmarks: bool,
    tx: mpsc::UnboundedSender<WatchMsg>,
}

#[derive(Default)]
struct State {
    rv: u64,
    uid_counter: u64,
    pods: BTreeMap<(String, String), Value>,
    nodes: BTreeMap<String, Value>,
    leases: BTreeMap<(String, String), Value>,
    /// (resourceVersion, event type, pod) of every pod change.
    history: Vec<(u64, &'static str, Value)>,
    /// Watches from a resourceVersion below this get 410.
    compacted_below: u64,
    watchers: Vec<Watcher>,
    faults: VecDeque<Fault>,
    delay: Duration,
    token: Option<String>,
    requests: Vec<RequestRecord>,
    /// Plain documents served at a path (for `--manifest-url`): (status, body).
    documents: BTreeMap<String, (u16, Bytes)>,
    /// ConfigMaps and Secrets by (plural, namespace, name).
    objects: BTreeMap<(String, String, String), Value>,
    /// (resourceVersion, event type, plural, object) of every ConfigMap/Secret change.
    object_history: Vec<(u64, &'static str, String, Value)>,
    /// Single-object watches: (plural, namespace, name, sender).
    object_watchers: Vec<(String, String, String, mpsc::UnboundedSender<WatchMsg>)>,
    /// TokenRequests answered so far.
    tokens_issued: u64,
    /// Events by (namespace, name).
    events: BTreeMap<(String, String), Value>,
    /// TokenReview: token → (user, groups).
    reviewed_tokens: BTreeMap<String, (String, Vec<String>)>,
    /// SubjectAccessReview: the (user, verb, subresource) allowed on nodes.
    access: Vec<(String, String, String)>,
    /// CertificateSigningRequests by name.
    csrs: BTreeMap<String, Value>,
    csr_hook: Option<Arc<CsrHook>>,
}

/// What the approver and signer do with a new CSR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CsrAnswer {
    Pending,
    /// Approved, and this certificate chain (PEM) issued.
    Issue(String),
    Denied(String),
}

type CsrHook = dyn Fn(&Value) -> CsrAnswer + Send + Sync;

/// TLS for the mock: PEM certificate chain and key.
#[derive(Clone)]
pub struct MockTls {
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
    /// Require a client certificate signed by this CA.
    pub client_ca_pem: Option<Vec<u8>>,
}

/// The mock server. Cheap to clone (all clones share the objects).
#[derive(Clone)]
pub struct MockApiServer {
    state: Arc<Mutex<State>>,
    addr: SocketAddr,
    tls: Option<Arc<rustls::ServerConfig>>,
    running: Arc<Mutex<Option<CancellationToken>>>,
}

type RespBody = BoxBody<Bytes, std::io::Error>;

impl MockApiServer {
    /// Starts a plain-HTTP mock on 127.0.0.1 (a free port).
    pub async fn start_new() -> std::io::Result<Self> {
        Self::start_with(None).await
    }

    /// Starts an HTTPS mock with this certificate and key.
    pub async fn start_tls(tls: MockTls) -> std::io::Result<Self> {
        Self::start_with(Some(tls)).await
    }

    async fn start_with(tls: Option<MockTls>) -> std::io::Result<Self> {
        let tls = match tls {
            None => None,
            Some(t) => Some(server_tls(&t)?),
        };
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let server = MockApiServer {
            state: Arc::new(Mutex::new(State {
                rv: 1,
                ..State::default()
            })),
            addr,
            tls,
            running: Arc::new(Mutex::new(None)),
        };
        server.serve(listener);
        Ok(server)
    }

    /// `http://127.0.0.1:<port>` (or `https://`).
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Writes a kubeconfig for this server (token, and a CA file path for HTTPS).
    pub fn write_kubeconfig(
        &self,
        path: &Path,
        token: Option<&str>,
        ca_file: Option<&Path>,
    ) -> std::io::Result<()> {
        let mut cluster = format!("    server: {}\n", self.url());
        if let Some(ca) = ca_file {
            cluster.push_str(&format!("    certificate-authority: {}\n", ca.display()));
        }
        let user = match token {
            Some(t) => format!("    token: {t}\n"),
            None => "    {}\n".to_string(),
        };
        let text = format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: mock\nclusters:\n- name: mock\n  cluster:\n{cluster}contexts:\n- name: mock\n  context:\n    cluster: mock\n    user: picolet\nusers:\n- name: picolet\n  user:\n{user}"
        );
        std::fs::write(path, text)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A test that panicked while holding the lock poisons it; the data is still fine.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    // -----------------------------------------------------------------------------------
    // Lifecycle and faults

    /// The server goes away: the listener closes and every connection is cut.
    pub fn stop(&self) {
        if let Some(token) = self
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            token.cancel();
        }
        let mut st = self.lock();
        for w in st.watchers.drain(..) {
            let _ = w.tx.send(WatchMsg::Abort);
        }
        for (_, _, _, tx) in st.object_watchers.drain(..) {
            let _ = tx.send(WatchMsg::Abort);
        }
    }

    /// Serves again on the same address, with the same objects.
    pub async fn start(&self) -> std::io::Result<()> {
        let mut last = None;
        for _ in 0..50 {
            match TcpListener::bind(self.addr).await {
                Ok(listener) => {
                    self.serve(listener);
                    return Ok(());
                }
                Err(e) => last = Some(e),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(last.unwrap_or_else(|| std::io::Error::other("cannot bind")))
    }

    /// Answer the next `n` requests (watches included) with HTTP `code`.
    pub fn fail_next(&self, n: usize, code: u16) {
        self.lock().faults.push_back(Fault {
            method: None,
            path_contains: None,
            remaining: n,
            code,
        });
    }

    /// Answer the next `n` requests with `method` whose path contains `path_contains`.
    pub fn fail_matching(&self, method: Method, path_contains: &str, n: usize, code: u16) {
        self.lock().faults.push_back(Fault {
            method: Some(method),
            path_contains: Some(path_contains.to_string()),
            remaining: n,
            code,
        });
    }

    /// Delay every answer by `delay` (zero: no delay).
    pub fn set_delay(&self, delay: Duration) {
        self.lock().delay = delay;
    }

    /// Require `Authorization: Bearer <token>`.
    pub fn require_token(&self, token: &str) {
        self.lock().token = Some(token.to_string());
    }

    /// Cut every open watch connection mid-stream.
    pub fn drop_watches(&self) {
        let mut st = self.lock();
        for w in st.watchers.drain(..) {
            let _ = w.tx.send(WatchMsg::Abort);
        }
        for (_, _, _, tx) in st.object_watchers.drain(..) {
            let _ = tx.send(WatchMsg::Abort);
        }
    }

    /// Send `line` (a newline is added) on every open watch.
    pub fn inject_watch_line(&self, line: &str) {
        let st = self.lock();
        for w in &st.watchers {
            let _ = w.tx.send(WatchMsg::Line(Bytes::from(format!("{line}\n"))));
        }
    }

    /// Forget the event history: a watch resuming from an older resourceVersion gets 410.
    /// Open watches are cut.
    pub fn compact(&self) {
        let mut st = self.lock();
        st.compacted_below = st.rv + 1;
        st.history.clear();
        for w in st.watchers.drain(..) {
            let _ = w.tx.send(WatchMsg::Abort);
        }
    }

    /// Send a BOOKMARK with the current resourceVersion on every watch that asked for them.
    pub fn bookmark(&self) {
        let st = self.lock();
        let line = json!({
            "type": "BOOKMARK",
            "object": {"kind": "Pod", "apiVersion": "v1",
                       "metadata": {"resourceVersion": st.rv.to_string()}}
        });
        for w in st.watchers.iter().filter(|w| w.bookmarks) {
            let _ = w.tx.send(WatchMsg::Line(json_line(&line)));
        }
    }

    /// Serve `body` with `code` at `GET path` (a manifest URL).
    pub fn set_document(&self, path: &str, code: u16, body: &str) {
        self.lock()
            .documents
            .insert(path.to_string(), (code, Bytes::from(body.to_string())));
    }

    /// Number of open watches.
    pub fn watch_count(&self) -> usize {
        let mut st = self.lock();
        st.watchers.retain(|w| !w.tx.is_closed());
        st.watchers.len()
    }

    // -----------------------------------------------------------------------------------
    // What tests read and do (as a user with kubectl would)

    pub fn requests(&self) -> Vec<RequestRecord> {
        self.lock().requests.clone()
    }

    pub fn clear_requests(&self) {
        self.lock().requests.clear();
    }

    pub fn pod(&self, namespace: &str, name: &str) -> Option<Value> {
        self.lock()
            .pods
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    pub fn pods(&self) -> Vec<Value> {
        self.lock().pods.values().cloned().collect()
    }

    pub fn node(&self, name: &str) -> Option<Value> {
        self.lock().nodes.get(name).cloned()
    }

    /// Deletes a Node object (as an admin would).
    pub fn delete_node(&self, name: &str) -> Option<Value> {
        self.lock().nodes.remove(name)
    }

    pub fn lease(&self, namespace: &str, name: &str) -> Option<Value> {
        self.lock()
            .leases
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    pub fn resource_version(&self) -> u64 {
        self.lock().rv
    }

    /// Every Event, by namespace and name.
    pub fn events(&self) -> Vec<Value> {
        self.lock().events.values().cloned().collect()
    }

    pub fn event(&self, namespace: &str, name: &str) -> Option<Value> {
        self.lock()
            .events
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    /// Deletes an Event (as the apiserver's one-hour TTL would).
    pub fn delete_event(&self, namespace: &str, name: &str) -> Option<Value> {
        self.lock()
            .events
            .remove(&(namespace.to_string(), name.to_string()))
    }

    /// Creates a pod as a user would (namespace from the object, default `default`).
    pub fn create_pod(&self, pod: Value) -> Result<Value, (u16, String)> {
        let ns = pod
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("default")
            .to_string();
        let mut st = self.lock();
        create_pod(&mut st, &ns, pod)
    }

    /// Creates or replaces a ConfigMap (`plural` "configmaps") or Secret ("secrets"), as
    /// `kubectl apply` would; watches of it get ADDED or MODIFIED.
    pub fn put_object(&self, plural: &str, object: Value) {
        let mut st = self.lock();
        put_object(&mut st, plural, object);
    }

    /// Deletes a ConfigMap or Secret; watches of it get DELETED.
    pub fn delete_object(&self, plural: &str, namespace: &str, name: &str) {
        let mut st = self.lock();
        let key = (plural.to_string(), namespace.to_string(), name.to_string());
        if let Some(mut obj) = st.objects.remove(&key) {
            st.rv += 1;
            obj["metadata"]["resourceVersion"] = json!(st.rv.to_string());
            record_object(&mut st, "DELETED", plural, &obj);
        }
    }

    /// How many TokenRequests the mock answered.
    /// TokenReview (authentication.k8s.io/v1) answers `token` as `user` in `groups`;
    /// other tokens are not authenticated.
    pub fn accept_token(&self, token: &str, user: &str, groups: &[&str]) {
        let groups = groups.iter().map(|g| g.to_string()).collect();
        self.lock()
            .reviewed_tokens
            .insert(token.to_string(), (user.to_string(), groups));
    }

    /// SubjectAccessReview (authorization.k8s.io/v1) allows `user` to `verb` the nodes'
    /// `subresource`; everything else is not allowed.
    pub fn allow(&self, user: &str, verb: &str, subresource: &str) {
        self.lock()
            .access
            .push((user.into(), verb.into(), subresource.into()));
    }

    /// Decides each new CSR (none: they stay pending).
    pub fn on_csr(&self, hook: impl Fn(&Value) -> CsrAnswer + Send + Sync + 'static) {
        self.lock().csr_hook = Some(Arc::new(hook));
    }

    /// The CSRs, by name.
    pub fn csrs(&self) -> BTreeMap<String, Value> {
        self.lock().csrs.clone()
    }

    /// Answers a CSR later (an operator's `kubectl certificate approve`, then the signer).
    pub fn answer_csr(&self, name: &str, answer: CsrAnswer) {
        if let Some(csr) = self.lock().csrs.get_mut(name) {
            apply_csr_answer(csr, answer);
        }
    }

    pub fn tokens_issued(&self) -> u64 {
        self.lock().tokens_issued
    }

    /// Deletes a pod as `kubectl delete` would (graceful unless `grace` is 0).
    pub fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        grace: Option<i64>,
    ) -> Result<Value, (u16, String)> {
        let mut st = self.lock();
        let opts = json!({"gracePeriodSeconds": grace});
        delete_pod(&mut st, namespace, name, &opts)
    }

    /// Replaces a pod's fields by a merge patch, as a controller would.
    pub fn patch_pod(
        &self,
        namespace: &str,
        name: &str,
        patch: Value,
    ) -> Result<Value, (u16, String)> {
        let mut st = self.lock();
        patch_pod(&mut st, namespace, name, &patch, false, false)
    }

    // -----------------------------------------------------------------------------------
    // Serving

    fn serve(&self, listener: TcpListener) {
        let token = CancellationToken::new();
        *self.running.lock().unwrap_or_else(|p| p.into_inner()) = Some(token.clone());
        let server = self.clone();
        tokio::spawn(async move {
            loop {
                let (stream, _) = tokio::select! {
                    _ = token.cancelled() => return,
                    accepted = listener.accept() => match accepted {
                        Ok(a) => a,
                        Err(_) => continue,
                    },
                };
                let server = server.clone();
                let token = token.clone();
                let tls = server.tls.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req| {
                        let server = server.clone();
                        async move { Ok::<_, Infallible>(server.handle(req).await) }
                    });
                    match tls {
                        None => {
                            let conn =
                                http1::Builder::new().serve_connection(TokioIo::new(stream), svc);
                            tokio::select! {
                                _ = conn => {}
                                _ = token.cancelled() => {}
                            }
                        }
                        Some(cfg) => {
                            let acceptor = tokio_rustls::TlsAcceptor::from(cfg);
                            let Ok(tls) = acceptor.accept(stream).await else {
                                return;
                            };
                            let conn =
                                http1::Builder::new().serve_connection(TokioIo::new(tls), svc);
                            tokio::select! {
                                _ = conn => {}
                                _ = token.cancelled() => {}
                            }
                        }
                    }
                });
            }
        });
    }

    async fn handle(&self, req: Request<Incoming>) -> Response<RespBody> {
        let (parts, body) = req.into_parts();
        let body = match body.collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => Bytes::new(),
        };
        let method = parts.method.clone();
        let path = parts.uri.path().to_string();
        let query = parse_query(parts.uri.query().unwrap_or(""));
        let content_type = parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let auth = parts
            .headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body_json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let headers: Vec<(String, String)> = parts
            .headers
            .iter()
            .map(|(k, v)| {
                let v = if k == http::header::AUTHORIZATION {
                    "<redacted>".to_string()
                } else {
                    v.to_str().unwrap_or("").to_string()
                };
                (k.as_str().to_string(), v)
            })
            .collect();

        let delay = {
            let mut st = self.lock();
            st.requests.push(RequestRecord {
                method: method.to_string(),
                path: path.clone(),
                query: parts.uri.query().unwrap_or("").to_string(),
                content_type: content_type.clone(),
                body: body_json.clone(),
                headers,
            });
            st.delay
        };
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let mut st = self.lock();
        if let Some(token) = &st.token {
            if auth.as_deref() != Some(&format!("Bearer {token}")) {
                return status_response(401, "Unauthorized", "bad or missing bearer token");
            }
        }
        if let Some(code) = take_fault(&mut st, &method, &path) {
            return status_response(code, "InternalError", "injected fault");
        }
        if method == Method::GET {
            if let Some((code, body)) = st.documents.get(&path) {
                let mut resp = Response::new(
                    Full::new(body.clone())
                        .map_err(|never: Infallible| match never {})
                        .boxed(),
                );
                *resp.status_mut() = StatusCode::from_u16(*code).unwrap_or(StatusCode::OK);
                return resp;
            }
        }
        let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
        let strategic = content_type.contains("strategic-merge-patch");
        let watch = query.get("watch").is_some_and(|v| v == "true" || v == "1");
        let result: Result<Value, (u16, String)> = match (&method, segs.as_slice()) {
            // ---- pods
            (&Method::GET, ["api", "v1", "pods"]) if watch => {
                return start_watch(&mut st, None, &query);
            }
            (&Method::GET, ["api", "v1", "namespaces", ns, "pods"]) if watch => {
                return start_watch(&mut st, Some(ns), &query);
            }
            (&Method::GET, ["api", "v1", "pods"]) => Ok(list_pods(&st, None, &query)),
            (&Method::GET, ["api", "v1", "namespaces", ns, "pods"]) => {
                Ok(list_pods(&st, Some(ns), &query))
            }
            (&Method::POST, ["api", "v1", "namespaces", ns, "pods"]) => {
                create_pod(&mut st, ns, body_json)
            }
            (&Method::GET, ["api", "v1", "namespaces", ns, "pods", name]) => st
                .pods
                .get(&(ns.to_string(), name.to_string()))
                .cloned()
                .ok_or_else(|| not_found("pods", name)),
            (&Method::PATCH, ["api", "v1", "namespaces", ns, "pods", name]) => {
                patch_pod(&mut st, ns, name, &body_json, strategic, false)
            }
            (&Method::PATCH, ["api", "v1", "namespaces", ns, "pods", name, "status"]) => {
                patch_pod(&mut st, ns, name, &body_json, strategic, true)
            }
            (&Method::DELETE, ["api", "v1", "namespaces", ns, "pods", name]) => {
                delete_pod(&mut st, ns, name, &body_json)
            }
            // ---- services (all namespaces): a list of those put with plural "services";
            // the watch sends nothing and ends at its timeout.
            (&Method::GET, ["api", "v1", "services"]) if watch => {
                return watch_object(&mut st, "services", "", &query);
            }
            (&Method::GET, ["api", "v1", "services"]) => {
                let items: Vec<Value> = (st.objects.iter())
                    .filter(|((p, _, _), _)| p == "services")
                    .map(|(_, o)| o.clone())
                    .collect();
                Ok(json!({
                    "kind": "ServiceList",
                    "apiVersion": "v1",
                    "metadata": {"resourceVersion": st.rv.to_string()},
                    "items": items,
                }))
            }
            // ---- configmaps and secrets (single-object list and watch), tokens
            (
                &Method::GET,
                [
                    "api",
                    "v1",
                    "namespaces",
                    ns,
                    plural @ ("configmaps" | "secrets"),
                ],
            ) if watch => {
                return watch_object(&mut st, plural, ns, &query);
            }
            (
                &Method::GET,
                [
                    "api",
                    "v1",
                    "namespaces",
                    ns,
                    plural @ ("configmaps" | "secrets"),
                ],
            ) => Ok(list_objects(&st, plural, ns, &query)),
            (
                &Method::GET,
                [
                    "api",
                    "v1",
                    "namespaces",
                    ns,
                    plural @ ("configmaps" | "secrets"),
                    name,
                ],
            ) => st
                .objects
                .get(&(plural.to_string(), ns.to_string(), name.to_string()))
                .cloned()
                .ok_or_else(|| not_found(plural, name)),
            (
                &Method::POST,
                [
                    "api",
                    "v1",
                    "namespaces",
                    ns,
                    "serviceaccounts",
                    sa,
                    "token",
                ],
            ) => Ok(issue_token(&mut st, ns, sa, &body_json)),
            // ---- events
            (&Method::GET, ["api", "v1", "events"]) => Ok(list_events(&st, None)),
            (&Method::GET, ["api", "v1", "namespaces", ns, "events"]) => {
                Ok(list_events(&st, Some(ns)))
            }
            (&Method::POST, ["api", "v1", "namespaces", ns, "events"]) => {
                create_event(&mut st, ns, body_json)
            }
            (&Method::GET, ["api", "v1", "namespaces", ns, "events", name]) => st
                .events
                .get(&(ns.to_string(), name.to_string()))
                .cloned()
                .ok_or_else(|| not_found("events", name)),
            (&Method::PATCH, ["api", "v1", "namespaces", ns, "events", name]) => {
                patch_event(&mut st, ns, name, &body_json, strategic)
            }
            // ---- nodes
            (&Method::POST, ["api", "v1", "nodes"]) => create_node(&mut st, body_json),
            (&Method::GET, ["api", "v1", "nodes", name]) => st
                .nodes
                .get(*name)
                .cloned()
                .ok_or_else(|| not_found("nodes", name)),
            (&Method::PATCH, ["api", "v1", "nodes", name]) => {
                patch_node(&mut st, name, &body_json, strategic, false)
            }
            (&Method::PATCH, ["api", "v1", "nodes", name, "status"]) => {
                patch_node(&mut st, name, &body_json, strategic, true)
            }
            // ---- certificatesigningrequests
            (
                &Method::POST,
                [
                    "apis",
                    "certificates.k8s.io",
                    "v1",
                    "certificatesigningrequests",
                ],
            ) => create_csr(&mut st, body_json),
            (
                &Method::GET,
                [
                    "apis",
                    "certificates.k8s.io",
                    "v1",
                    "certificatesigningrequests",
                    name,
                ],
            ) => {
                st.csrs.get(*name).cloned().ok_or_else(|| {
                    not_found("certificatesigningrequests.certificates.k8s.io", name)
                })
            }
            (
                &Method::GET,
                [
                    "apis",
                    "certificates.k8s.io",
                    "v1",
                    "certificatesigningrequests",
                ],
            ) => Ok(json!({
                "kind": "CertificateSigningRequestList",
                "apiVersion": "certificates.k8s.io/v1",
                "items": st.csrs.values().cloned().collect::<Vec<_>>(),
            })),
            // ---- reviews
            (&Method::POST, ["apis", "authentication.k8s.io", "v1", "tokenreviews"]) => {
                let token = body_json["spec"]["token"].as_str().unwrap_or("");
                let status = match st.reviewed_tokens.get(token) {
                    Some((user, groups)) => json!({"authenticated": true,
                            "user": {"username": user, "uid": format!("uid-{user}"), "groups": groups}}),
                    None => json!({"authenticated": false, "error": "token not found"}),
                };
                Ok(
                    json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                              "status": status}),
                )
            }
            (&Method::POST, ["apis", "authorization.k8s.io", "v1", "subjectaccessreviews"]) => {
                let spec = &body_json["spec"];
                let ra = &spec["resourceAttributes"];
                let allowed = ra["resource"] == "nodes"
                    && st.access.iter().any(|(u, v, s)| {
                        spec["user"] == u.as_str()
                            && ra["verb"] == v.as_str()
                            && ra["subresource"] == s.as_str()
                    });
                Ok(
                    json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                              "status": {"allowed": allowed}}),
                )
            }
            // ---- leases
            (
                &Method::POST,
                [
                    "apis",
                    "coordination.k8s.io",
                    "v1",
                    "namespaces",
                    ns,
                    "leases",
                ],
            ) => create_lease(&mut st, ns, body_json),
            (
                &Method::GET,
                [
                    "apis",
                    "coordination.k8s.io",
                    "v1",
                    "namespaces",
                    ns,
                    "leases",
                    name,
                ],
            ) => st
                .leases
                .get(&(ns.to_string(), name.to_string()))
                .cloned()
                .ok_or_else(|| not_found("leases.coordination.k8s.io", name)),
            (
                &Method::PUT,
                [
                    "apis",
                    "coordination.k8s.io",
                    "v1",
                    "namespaces",
                    ns,
                    "leases",
                    name,
                ],
            ) => update_lease(&mut st, ns, name, body_json),
            _ => Err((404, format!("the server could not find {method} {path}"))),
        };
        match result {
            Ok(v) => json_response(200, &v),
            Err((code, message)) => status_response(code, reason_of(code, &message), &message),
        }
    }
}

fn create_csr(st: &mut State, mut csr: Value) -> Result<Value, (u16, String)> {
    let mut name = str_at(&csr, "/metadata/name").to_string();
    if name.is_empty() {
        let prefix = str_at(&csr, "/metadata/generateName").to_string();
        if prefix.is_empty() {
            return Err((422, "metadata.name or generateName is required".into()));
        }
        name = format!("{prefix}{}", st.csrs.len() + st.rv as usize + 1);
        set_meta(&mut csr, "name", json!(name));
    }
    if st.csrs.contains_key(&name) {
        return Err((
            409,
            format!("certificatesigningrequests.certificates.k8s.io \"{name}\" already exists"),
        ));
    }
    let rv = next_rv(st);
    set_meta(&mut csr, "resourceVersion", json!(rv));
    let uid = next_uid(st);
    set_meta(&mut csr, "uid", json!(uid));
    set_meta(&mut csr, "creationTimestamp", json!(now_rfc3339()));
    if let Some(hook) = st.csr_hook.clone() {
        let answer = hook(&csr);
        apply_csr_answer(&mut csr, answer);
    }
    st.csrs.insert(name, csr.clone());
    Ok(csr)
}

fn apply_csr_answer(csr: &mut Value, answer: CsrAnswer) {
    let status = match answer {
        CsrAnswer::Pending => return,
        CsrAnswer::Issue(pem) => json!({
            "conditions": [{"type": "Approved", "status": "True", "reason": "AutoApproved"}],
            "certificate": crate::api::encode_base64(pem.as_bytes()),
        }),
        CsrAnswer::Denied(message) => json!({
            "conditions": [{"type": "Denied", "status": "True", "reason": "MockDenied", "message": message}],
        }),
    };
    csr["status"] = status;
}

fn take_fault(st: &mut State, method: &Method, path: &str) -> Option<u16> {
    let idx = st.faults.iter().position(|f| {
        f.remaining > 0
            && f.method.as_ref().is_none_or(|m| m == method)
            && f.path_contains.as_deref().is_none_or(|p| path.contains(p))
    })?;
    let fault = &mut st.faults[idx];
    fault.remaining -= 1;
    let code = fault.code;
    if fault.remaining == 0 {
        st.faults.remove(idx);
    }
    Some(code)
}

fn reason_of(code: u16, message: &str) -> &'static str {
    match code {
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        409 if message.contains("already exists") => "AlreadyExists",
        409 => "Conflict",
        410 => "Expired",
        422 => "Invalid",
        _ => "InternalError",
    }
}

fn not_found(resource: &str, name: &str) -> (u16, String) {
    (404, format!("{resource} \"{name}\" not found"))
}

fn now_rfc3339() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    crate::clock::rfc3339(secs * 1_000_000_000).unwrap_or_default()
}

fn rfc3339_in(secs_from_now: i64) -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    crate::clock::rfc3339((secs + secs_from_now) * 1_000_000_000).unwrap_or_default()
}

fn next_rv(st: &mut State) -> String {
    st.rv += 1;
    st.rv.to_string()
}

fn next_uid(st: &mut State) -> String {
    st.uid_counter += 1;
    format!("00000000-0000-4000-8000-{:012x}", st.uid_counter)
}

fn set_meta(obj: &mut Value, key: &str, value: Value) {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    obj["metadata"][key] = value;
}

fn str_at<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

// ---------------------------------------------------------------------------------------
// Pods

fn pod_node(pod: &Value) -> &str {
    str_at(pod, "/spec/nodeName")
}

fn field_selector_node(query: &BTreeMap<String, String>) -> Option<String> {
    let fs = query.get("fieldSelector")?;
    fs.split(',')
        .find_map(|term| term.strip_prefix("spec.nodeName="))
        .map(str::to_string)
}

fn list_pods(st: &State, ns: Option<&str>, query: &BTreeMap<String, String>) -> Value {
    let node = field_selector_node(query);
    let items: Vec<Value> = st
        .pods
        .iter()
        .filter(|((pns, _), p)| {
            ns.is_none_or(|n| n == pns) && node.as_deref().is_none_or(|n| n == pod_node(p))
        })
        .map(|(_, p)| p.clone())
        .collect();
    json!({
        "kind": "PodList", "apiVersion": "v1",
        "metadata": {"resourceVersion": st.rv.to_string()},
        "items": items,
    })
}

fn record(st: &mut State, type_: &'static str, pod: &Value) {
    let rv: u64 = str_at(pod, "/metadata/resourceVersion")
        .parse()
        .unwrap_or(st.rv);
    st.history.push((rv, type_, pod.clone()));
    let ns = str_at(pod, "/metadata/namespace").to_string();
    let node = pod_node(pod).to_string();
    let line = json_line(&json!({"type": type_, "object": pod}));
    st.watchers.retain(|w| {
        let matches = w.namespace.as_deref().is_none_or(|n| n == ns)
            && w.node.as_deref().is_none_or(|n| n == node);
        !matches || w.tx.send(WatchMsg::Line(line.clone())).is_ok()
    });
}

fn create_pod(st: &mut State, ns: &str, mut pod: Value) -> Result<Value, (u16, String)> {
    if !pod.is_object() {
        return Err((400, "the body is not a Pod object".into()));
    }
    let mut name = str_at(&pod, "/metadata/name").to_string();
    if name.is_empty() {
        let prefix = str_at(&pod, "/metadata/generateName").to_string();
        if prefix.is_empty() {
            return Err((422, "metadata.name: Required value".into()));
        }
        st.uid_counter += 1;
        name = format!("{prefix}{:05x}", st.uid_counter);
    }
    let key = (ns.to_string(), name.clone());
    if st.pods.contains_key(&key) {
        return Err((409, format!("pods \"{name}\" already exists")));
    }
    if pod
        .pointer(&format!(
            "/metadata/annotations/{}",
            ANNOTATION_CONFIG_MIRROR.replace('/', "~1")
        ))
        .is_some()
    {
        check_mirror_owner(st, &pod)?;
    }
    pod["kind"] = json!("Pod");
    pod["apiVersion"] = json!("v1");
    set_meta(&mut pod, "name", json!(name));
    set_meta(&mut pod, "namespace", json!(ns));
    let uid = next_uid(st);
    set_meta(&mut pod, "uid", json!(uid));
    set_meta(&mut pod, "creationTimestamp", json!(now_rfc3339()));
    let rv = next_rv(st);
    set_meta(&mut pod, "resourceVersion", json!(rv));
    if pod.get("status").is_none_or(|s| !s.is_object()) {
        pod["status"] = json!({"phase": "Pending"});
    }
    st.pods.insert(key, pod.clone());
    record(st, "ADDED", &pod);
    Ok(pod)
}

/// NodeRestriction: a node may create a mirror pod only of itself, owned by its Node.
fn check_mirror_owner(st: &State, pod: &Value) -> Result<(), (u16, String)> {
    let node = pod_node(pod);
    let node_uid = st
        .nodes
        .get(node)
        .map(|n| str_at(n, "/metadata/uid").to_string())
        .unwrap_or_default();
    let refs = pod
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let ok = refs.len() == 1 && {
        let r = &refs[0];
        str_at(r, "/apiVersion") == "v1"
            && str_at(r, "/kind") == "Node"
            && str_at(r, "/name") == node
            && !node_uid.is_empty()
            && str_at(r, "/uid") == node_uid
            && r.get("controller") == Some(&json!(true))
            && r.get("blockOwnerDeletion")
                .is_none_or(|b| b == &json!(false))
    };
    if ok {
        Ok(())
    } else {
        Err((
            403,
            format!(
                "pod does not have a single owner reference to node {node:?} (uid {node_uid:?}) \
                 with controller=true: {refs:?}"
            ),
        ))
    }
}

fn patch_pod(
    st: &mut State,
    ns: &str,
    name: &str,
    patch: &Value,
    strategic: bool,
    status_only: bool,
) -> Result<Value, (u16, String)> {
    let key = (ns.to_string(), name.to_string());
    let Some(current) = st.pods.get(&key).cloned() else {
        return Err(not_found("pods", name));
    };
    let want_uid = str_at(patch, "/metadata/uid");
    let have_uid = str_at(&current, "/metadata/uid");
    if !want_uid.is_empty() && want_uid != have_uid {
        return Err((
            409,
            format!(
                "Precondition failed: UID in precondition: {want_uid}, UID in object meta: {have_uid}"
            ),
        ));
    }
    let mut updated = current.clone();
    if status_only {
        if let Some(status) = patch.get("status") {
            let mut s = updated.get("status").cloned().unwrap_or(json!({}));
            merge(&mut s, status, strategic);
            updated["status"] = s;
        }
    } else {
        let mut p = patch.clone();
        if let Some(obj) = p.as_object_mut() {
            obj.remove("status");
        }
        merge(&mut updated, &p, strategic);
    }
    if updated == current {
        return Ok(current);
    }
    let rv = next_rv(st);
    set_meta(&mut updated, "resourceVersion", json!(rv));
    st.pods.insert(key, updated.clone());
    record(st, "MODIFIED", &updated);
    Ok(updated)
}

fn delete_pod(st: &mut State, ns: &str, name: &str, opts: &Value) -> Result<Value, (u16, String)> {
    let key = (ns.to_string(), name.to_string());
    let Some(current) = st.pods.get(&key).cloned() else {
        return Err(not_found("pods", name));
    };
    let want_uid = str_at(opts, "/preconditions/uid");
    let have_uid = str_at(&current, "/metadata/uid");
    if !want_uid.is_empty() && want_uid != have_uid {
        return Err((
            409,
            format!(
                "Precondition failed: UID in precondition: {want_uid}, UID in object meta: {have_uid}"
            ),
        ));
    }
    let spec_grace = current
        .pointer("/spec/terminationGracePeriodSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(30);
    let existing = current
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64);
    let grace = opts
        .get("gracePeriodSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(existing.unwrap_or(spec_grace))
        .max(0);
    // kubelet-facing rule: an unbound pod, or grace 0, goes at once.
    if grace == 0 || pod_node(&current).is_empty() {
        st.pods.remove(&key);
        let mut gone = current;
        let rv = next_rv(st);
        set_meta(&mut gone, "resourceVersion", json!(rv));
        record(st, "DELETED", &gone);
        return Ok(gone);
    }
    if existing.is_some_and(|e| e <= grace) {
        return Ok(current); // already terminating with a shorter grace
    }
    let mut updated = current;
    set_meta(&mut updated, "deletionGracePeriodSeconds", json!(grace));
    set_meta(&mut updated, "deletionTimestamp", json!(rfc3339_in(grace)));
    let rv = next_rv(st);
    set_meta(&mut updated, "resourceVersion", json!(rv));
    st.pods.insert(key, updated.clone());
    record(st, "MODIFIED", &updated);
    Ok(updated)
}

fn start_watch(
    st: &mut State,
    ns: Option<&str>,
    query: &BTreeMap<String, String>,
) -> Response<RespBody> {
    let (tx, rx) = mpsc::unbounded_channel();
    let node = field_selector_node(query);
    let rv: Option<u64> = query
        .get("resourceVersion")
        .filter(|v| !v.is_empty() && v.as_str() != "0")
        .and_then(|v| v.parse().ok());
    let matches = |p: &Value| {
        ns.is_none_or(|n| n == str_at(p, "/metadata/namespace"))
            && node.as_deref().is_none_or(|n| n == pod_node(p))
    };
    match rv {
        Some(rv) if rv < st.compacted_below => {
            let err = json!({"type": "ERROR", "object": {
                "kind": "Status", "apiVersion": "v1", "status": "Failure",
                "reason": "Expired", "code": 410,
                "message": format!("too old resource version: {rv} ({})", st.compacted_below),
            }});
            let _ = tx.send(WatchMsg::Line(json_line(&err)));
            drop(tx);
            return stream_response(rx);
        }
        Some(rv) => {
            for (erv, type_, pod) in &st.history {
                if *erv > rv && matches(pod) {
                    let _ = tx.send(WatchMsg::Line(json_line(
                        &json!({"type": type_, "object": pod}),
                    )));
                }
            }
        }
        None => {
            for pod in st.pods.values().filter(|p| matches(p)) {
                let _ = tx.send(WatchMsg::Line(json_line(
                    &json!({"type": "ADDED", "object": pod}),
                )));
            }
        }
    }
    let timeout = query
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(Duration::from_secs);
    if let Some(timeout) = timeout {
        let end = tx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(timeout).await;
            let _ = end.send(WatchMsg::End);
        });
    }
    st.watchers.push(Watcher {
        namespace: ns.map(str::to_string),
        node,
        bookmarks: query
            .get("allowWatchBookmarks")
            .is_some_and(|v| v == "true"),
        tx,
    });
    stream_response(rx)
}

// ---------------------------------------------------------------------------------------
// ConfigMaps, Secrets, tokens

fn put_object(st: &mut State, plural: &str, mut obj: Value) {
    let ns = obj
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default")
        .to_string();
    let name = str_at(&obj, "/metadata/name").to_string();
    st.rv += 1;
    obj["metadata"]["namespace"] = json!(ns);
    obj["metadata"]["resourceVersion"] = json!(st.rv.to_string());
    let key = (plural.to_string(), ns, name);
    let type_ = if st.objects.contains_key(&key) {
        "MODIFIED"
    } else {
        "ADDED"
    };
    st.objects.insert(key, obj.clone());
    record_object(st, type_, plural, &obj);
}

fn record_object(st: &mut State, type_: &'static str, plural: &str, obj: &Value) {
    let rv: u64 = str_at(obj, "/metadata/resourceVersion")
        .parse()
        .unwrap_or(st.rv);
    st.object_history
        .push((rv, type_, plural.to_string(), obj.clone()));
    let ns = str_at(obj, "/metadata/namespace").to_string();
    let name = str_at(obj, "/metadata/name").to_string();
    let line = json_line(&json!({"type": type_, "object": obj}));
    st.object_watchers.retain(|(p, wns, wname, tx)| {
        if *p != plural || *wns != ns || *wname != name {
            return !tx.is_closed();
        }
        tx.send(WatchMsg::Line(line.clone())).is_ok()
    });
}

/// `fieldSelector=metadata.name=<name>` (the only selector the object managers send).
fn selected_name(query: &BTreeMap<String, String>) -> Option<String> {
    query
        .get("fieldSelector")
        .and_then(|f| f.strip_prefix("metadata.name="))
        .map(str::to_string)
}

fn list_objects(st: &State, plural: &str, ns: &str, query: &BTreeMap<String, String>) -> Value {
    let name = selected_name(query);
    let items: Vec<Value> = st
        .objects
        .iter()
        .filter(|((p, ons, oname), _)| {
            p == plural && ons == ns && name.as_deref().is_none_or(|n| n == oname)
        })
        .map(|(_, o)| o.clone())
        .collect();
    json!({
        "kind": if plural == "secrets" { "SecretList" } else { "ConfigMapList" },
        "apiVersion": "v1",
        "metadata": {"resourceVersion": st.rv.to_string()},
        "items": items,
    })
}

fn watch_object(
    st: &mut State,
    plural: &str,
    ns: &str,
    query: &BTreeMap<String, String>,
) -> Response<RespBody> {
    let (tx, rx) = mpsc::unbounded_channel();
    let name = selected_name(query).unwrap_or_default();
    let rv: u64 = query
        .get("resourceVersion")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    for (erv, type_, p, obj) in &st.object_history {
        if *erv > rv
            && p == plural
            && str_at(obj, "/metadata/namespace") == ns
            && str_at(obj, "/metadata/name") == name
        {
            let _ = tx.send(WatchMsg::Line(json_line(
                &json!({"type": type_, "object": obj}),
            )));
        }
    }
    if let Some(timeout) = query
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(Duration::from_secs)
    {
        let end = tx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(timeout).await;
            let _ = end.send(WatchMsg::End);
        });
    }
    st.object_watchers
        .push((plural.to_string(), ns.to_string(), name, tx));
    stream_response(rx)
}

/// TokenRequest: a token naming what it is bound to, valid for `expirationSeconds`.
fn issue_token(st: &mut State, ns: &str, sa: &str, req: &Value) -> Value {
    st.tokens_issued += 1;
    let exp = req
        .pointer("/spec/expirationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(3600);
    let pod = str_at(req, "/spec/boundObjectRef/name");
    let uid = str_at(req, "/spec/boundObjectRef/uid");
    let token = format!("mock-token.{ns}.{sa}.{pod}.{uid}.{}", st.tokens_issued);
    let mut answer = req.clone();
    answer["status"] = json!({"token": token, "expirationTimestamp": rfc3339_in(exp)});
    answer
}

// ---------------------------------------------------------------------------------------
// Nodes and leases

fn list_events(st: &State, ns: Option<&str>) -> Value {
    let items: Vec<Value> = st
        .events
        .iter()
        .filter(|((ens, _), _)| ns.is_none_or(|n| n == ens))
        .map(|(_, e)| e.clone())
        .collect();
    json!({
        "kind": "EventList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": st.rv.to_string()},
        "items": items,
    })
}

fn create_event(st: &mut State, ns: &str, mut event: Value) -> Result<Value, (u16, String)> {
    let name = str_at(&event, "/metadata/name").to_string();
    if name.is_empty() {
        return Err((422, "metadata.name: Required value".into()));
    }
    let body_ns = str_at(&event, "/metadata/namespace");
    if !body_ns.is_empty() && body_ns != ns {
        return Err((
            400,
            "the namespace of the provided object does not match the namespace sent on the request"
                .into(),
        ));
    }
    let key = (ns.to_string(), name.clone());
    if st.events.contains_key(&key) {
        return Err((409, format!("events \"{name}\" already exists")));
    }
    set_meta(&mut event, "namespace", json!(ns));
    let uid = next_uid(st);
    set_meta(&mut event, "uid", json!(uid));
    set_meta(&mut event, "creationTimestamp", json!(now_rfc3339()));
    let rv = next_rv(st);
    set_meta(&mut event, "resourceVersion", json!(rv));
    st.events.insert(key, event.clone());
    Ok(event)
}

fn patch_event(
    st: &mut State,
    ns: &str,
    name: &str,
    patch: &Value,
    strategic: bool,
) -> Result<Value, (u16, String)> {
    let rv = next_rv(st);
    let event = st
        .events
        .get_mut(&(ns.to_string(), name.to_string()))
        .ok_or_else(|| not_found("events", name))?;
    merge(event, patch, strategic);
    set_meta(event, "resourceVersion", json!(rv));
    Ok(event.clone())
}

fn create_node(st: &mut State, mut node: Value) -> Result<Value, (u16, String)> {
    let name = str_at(&node, "/metadata/name").to_string();
    if name.is_empty() {
        return Err((422, "metadata.name: Required value".into()));
    }
    if st.nodes.contains_key(&name) {
        return Err((409, format!("nodes \"{name}\" already exists")));
    }
    node["kind"] = json!("Node");
    node["apiVersion"] = json!("v1");
    let uid = next_uid(st);
    set_meta(&mut node, "uid", json!(uid));
    set_meta(&mut node, "creationTimestamp", json!(now_rfc3339()));
    let rv = next_rv(st);
    set_meta(&mut node, "resourceVersion", json!(rv));
    st.nodes.insert(name, node.clone());
    Ok(node)
}

fn patch_node(
    st: &mut State,
    name: &str,
    patch: &Value,
    strategic: bool,
    status_only: bool,
) -> Result<Value, (u16, String)> {
    let Some(current) = st.nodes.get(name).cloned() else {
        return Err(not_found("nodes", name));
    };
    let mut updated = current.clone();
    if status_only {
        if let Some(status) = patch.get("status") {
            let mut s = updated.get("status").cloned().unwrap_or(json!({}));
            merge(&mut s, status, strategic);
            updated["status"] = s;
        }
    } else {
        let mut p = patch.clone();
        if let Some(obj) = p.as_object_mut() {
            obj.remove("status");
        }
        merge(&mut updated, &p, strategic);
    }
    if updated != current {
        let rv = next_rv(st);
        set_meta(&mut updated, "resourceVersion", json!(rv));
        st.nodes.insert(name.to_string(), updated.clone());
    }
    Ok(updated)
}

fn create_lease(st: &mut State, ns: &str, mut lease: Value) -> Result<Value, (u16, String)> {
    let name = str_at(&lease, "/metadata/name").to_string();
    let key = (ns.to_string(), name.clone());
    if st.leases.contains_key(&key) {
        return Err((
            409,
            format!("leases.coordination.k8s.io \"{name}\" already exists"),
        ));
    }
    lease["kind"] = json!("Lease");
    lease["apiVersion"] = json!("coordination.k8s.io/v1");
    set_meta(&mut lease, "namespace", json!(ns));
    let uid = next_uid(st);
    set_meta(&mut lease, "uid", json!(uid));
    let rv = next_rv(st);
    set_meta(&mut lease, "resourceVersion", json!(rv));
    st.leases.insert(key, lease.clone());
    Ok(lease)
}

fn update_lease(
    st: &mut State,
    ns: &str,
    name: &str,
    mut lease: Value,
) -> Result<Value, (u16, String)> {
    let key = (ns.to_string(), name.to_string());
    let Some(current) = st.leases.get(&key) else {
        return Err(not_found("leases.coordination.k8s.io", name));
    };
    let have = str_at(current, "/metadata/resourceVersion").to_string();
    let want = str_at(&lease, "/metadata/resourceVersion").to_string();
    if !want.is_empty() && want != have {
        return Err((
            409,
            format!(
                "Operation cannot be fulfilled on leases.coordination.k8s.io \"{name}\": the \
                 object has been modified"
            ),
        ));
    }
    let uid = str_at(current, "/metadata/uid").to_string();
    set_meta(&mut lease, "uid", json!(uid));
    set_meta(&mut lease, "namespace", json!(ns));
    let rv = next_rv(st);
    set_meta(&mut lease, "resourceVersion", json!(rv));
    st.leases.insert(key, lease.clone());
    Ok(lease)
}

// ---------------------------------------------------------------------------------------
// Patches

/// JSON merge patch (RFC 7386), or — `strategic` — the strategic merge patch subset that
/// pod and node status use: lists named `conditions` or `addresses` merge by `type`,
/// `$`-directives are ignored.
pub(crate) fn merge(target: &mut Value, patch: &Value, strategic: bool) {
    let Some(patch_obj) = patch.as_object() else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let Some(target_obj) = target.as_object_mut() else {
        return;
    };
    for (k, v) in patch_obj {
        if strategic && k.starts_with('$') {
            continue;
        }
        if v.is_null() {
            target_obj.remove(k);
            continue;
        }
        let keyed = strategic && (k == "conditions" || k == "addresses");
        match (target_obj.get_mut(k), v) {
            (Some(Value::Array(existing)), Value::Array(items)) if keyed => {
                for item in items {
                    let t = item.get("type").cloned();
                    // The `$patch: delete` directive removes the element of its key.
                    if item.get("$patch").and_then(Value::as_str) == Some("delete") {
                        existing.retain(|e| t.is_none() || e.get("type") != t.as_ref());
                        continue;
                    }
                    match existing
                        .iter_mut()
                        .find(|e| t.is_some() && e.get("type") == t.as_ref())
                    {
                        Some(e) => merge(e, item, strategic),
                        None => existing.push(item.clone()),
                    }
                }
            }
            (Some(existing), Value::Object(_)) if existing.is_object() => {
                merge(existing, v, strategic)
            }
            _ => {
                target_obj.insert(k.clone(), v.clone());
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Responses

fn json_line(v: &Value) -> Bytes {
    let mut bytes = serde_json::to_vec(v).unwrap_or_default();
    bytes.push(b'\n');
    Bytes::from(bytes)
}

fn json_response(code: u16, v: &Value) -> Response<RespBody> {
    let body = serde_json::to_vec(v).unwrap_or_default();
    let mut resp = Response::new(
        Full::new(Bytes::from(body))
            .map_err(|never: Infallible| match never {})
            .boxed(),
    );
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    resp
}

fn status_response(code: u16, reason: &str, message: &str) -> Response<RespBody> {
    json_response(
        code,
        &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                "code": code, "reason": reason, "message": message}),
    )
}

fn stream_response(rx: mpsc::UnboundedReceiver<WatchMsg>) -> Response<RespBody> {
    let mut resp = Response::new(ChannelBody { rx }.boxed());
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    resp
}

struct ChannelBody {
    rx: mpsc::UnboundedReceiver<WatchMsg>,
}

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(WatchMsg::Line(b))) => Poll::Ready(Some(Ok(Frame::data(b)))),
            Poll::Ready(Some(WatchMsg::Abort)) => Poll::Ready(Some(Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionAborted,
                "watch dropped",
            )))),
            Poll::Ready(Some(WatchMsg::End)) | Poll::Ready(None) => {
                self.rx.close();
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

fn parse_query(q: &str) -> BTreeMap<String, String> {
    q.split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(if bytes[i] == b'+' { b' ' } else { bytes[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn server_tls(t: &MockTls) -> std::io::Result<Arc<rustls::ServerConfig>> {
    let certs = super::tls::certificates(&t.cert_pem, "mock certificate")
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let key = super::tls::private_key(&t.key_pem, "mock key")
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let builder = match &t.client_ca_pem {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in super::tls::certificates(ca, "mock client CA")
                .map_err(|e| std::io::Error::other(e.to_string()))?
            {
                roots
                    .add(c)
                    .map_err(|e| std::io::Error::other(e.to_string()))?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .map_err(|e| std::io::Error::other(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut cfg = builder
        .with_single_cert(certs, key)
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategic_merge_of_conditions() {
        let mut s = json!({"phase": "Pending", "conditions": [
            {"type": "Ready", "status": "False"},
            {"type": "DisruptionTarget", "status": "True"}]});
        merge(
            &mut s,
            &json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"},
                    {"type": "Initialized", "status": "True"}],
                    "$setElementOrder/conditions": []}),
            true,
        );
        assert_eq!(s["phase"], "Running");
        let conds = s["conditions"].as_array().unwrap();
        assert_eq!(conds.len(), 3);
        assert_eq!(conds[0]["status"], "True");
        assert_eq!(conds[1]["type"], "DisruptionTarget");
        // A JSON merge patch replaces the list.
        merge(&mut s, &json!({"conditions": [], "podIP": null}), false);
        assert_eq!(s["conditions"], json!([]));
    }

    #[test]
    fn queries() {
        let q = parse_query("fieldSelector=spec.nodeName%3Dpi-1&watch=true&x");
        assert_eq!(q["fieldSelector"], "spec.nodeName=pi-1");
        assert_eq!(q["watch"], "true");
        assert_eq!(q["x"], "");
        assert_eq!(field_selector_node(&q).as_deref(), Some("pi-1"));
        assert_eq!(percent_decode("a%2"), "a%2");
    }
}
