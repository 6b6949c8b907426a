//! [`Client`]: the typed Kubernetes API calls picolet makes, over [`HttpClient`].
//!
//! Paths are absolute API paths (`/api/v1/namespaces/default/pods/web`); [`query`] builds
//! a percent-encoded query string. Every call has a deadline (the config's `timeout`);
//! a watch has one for its response head and then streams until the server ends it.
//!
//! Must never: retry (callers do, with back-off), or log credentials.

use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use http::Method;
use http::header::{self, HeaderName, HeaderValue};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::time::Instant;

use super::ApiError;
use super::http::HttpClient;
use super::kubeconfig::{ClientConfig, Credentials};
use super::tls;
use crate::api::cluster::{DeleteOptionsBody, Preconditions, Status, WatchEvent};

/// Largest answer picolet reads (a list of every pod of a busy node is far smaller).
pub(crate) const MAX_RESPONSE_BYTES: usize = 32 * 1024 * 1024;
/// Largest single watch event.
pub(super) const MAX_WATCH_LINE_BYTES: usize = 8 * 1024 * 1024;
/// A token file is re-read after this long (projected tokens rotate hourly or so).
const TOKEN_FILE_REFRESH: Duration = Duration::from_secs(60);

/// How a PATCH body is to be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    /// RFC 7386 JSON merge patch.
    Merge,
    /// Kubernetes strategic merge patch (lists with a merge key — pod and node
    /// conditions by `type` — are merged, not replaced).
    StrategicMerge,
}

impl PatchKind {
    fn content_type(self) -> &'static str {
        match self {
            PatchKind::Merge => "application/merge-patch+json",
            PatchKind::StrategicMerge => "application/strategic-merge-patch+json",
        }
    }
}

/// A DELETE's options: grace period and UID precondition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    pub grace_period_seconds: Option<i64>,
    /// Delete only if the object still has this UID (never someone else's re-creation).
    pub uid: Option<String>,
}

/// A Kubernetes API client. Cheap to clone; not `Send` (picolet runs on one thread).
#[derive(Clone)]
pub struct Client {
    inner: Rc<Inner>,
}

struct Inner {
    /// Replaced by [`Client::renew_connections`] (a rotated client certificate).
    http: RefCell<HttpClient>,
    tls: Option<(Arc<rustls::ClientConfig>, Option<String>)>,
    server: String,
    credentials: Credentials,
    timeout: Duration,
    /// (read at, token) for `Credentials::TokenFile`.
    token_cache: RefCell<Option<(Instant, String)>>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("server", &self.server())
            .finish_non_exhaustive()
    }
}

impl Client {
    pub fn new(config: &ClientConfig) -> Result<Self, ApiError> {
        let tls_config = if config.server.starts_with("https://") {
            Some(tls::client_config(&config.tls)?)
        } else if config.server.starts_with("http://") {
            None
        } else {
            return Err(ApiError::BadUrl {
                url: config.server.clone(),
                reason: "the server must be an http:// or https:// URL",
            });
        };
        let http = HttpClient::new(tls_config.clone(), config.tls_server_name.as_deref())?;
        Ok(Client {
            inner: Rc::new(Inner {
                http: RefCell::new(http),
                tls: tls_config.map(|t| (t, config.tls_server_name.clone())),
                server: config.server.clone(),
                credentials: config.credentials.clone(),
                timeout: config.timeout,
                token_cache: RefCell::new(None),
            }),
        })
    }

    /// New requests open new connections (and so present the slot's current client
    /// certificate); requests and watches under way finish on theirs.
    /// kubelet: the transport closes every connection when the certificate rotates
    /// (certificate/transport.go); picolet lets open watches run to their own end.
    ///
    /// The new connections get a fresh TLS session cache as well: a resumed TLS session
    /// keeps the identity of the handshake it resumes, so the apiserver would still see the
    /// old certificate (and answer 401 once it has expired).
    pub fn renew_connections(&self) {
        if let Some((tls, name)) = &self.inner.tls {
            let mut fresh = rustls::ClientConfig::clone(tls);
            fresh.resumption = rustls::client::Resumption::default();
            if let Ok(http) = HttpClient::new(Some(Arc::new(fresh)), name.as_deref()) {
                *self.inner.http.borrow_mut() = http;
            }
        }
    }

    fn http(&self) -> HttpClient {
        self.inner.http.borrow().clone()
    }

    /// The server URL, for logs.
    pub fn server(&self) -> &str {
        &self.inner.server
    }

    /// GET `path` and decode the answer.
    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ApiError> {
        let body = self.call(Method::GET, path, None, None).await?;
        decode(path, &body)
    }

    /// GET `path`; `Ok(None)` on 404.
    pub async fn get_opt<T: DeserializeOwned>(&self, path: &str) -> Result<Option<T>, ApiError> {
        match self.get(path).await {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// GET `path` and return the raw body (lists are decoded item by item by the caller);
    /// an answer larger than `limit` bytes is [`ApiError::TooLarge`].
    pub async fn get_bytes(&self, path: &str, limit: usize) -> Result<Bytes, ApiError> {
        self.call_limited(Method::GET, path, None, None, limit)
            .await
    }

    /// POST `body` to the collection `path`.
    pub async fn create<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, ApiError> {
        let bytes = serde_json::to_vec(body).map_err(ApiError::Encode)?;
        let out = self
            .call(
                Method::POST,
                path,
                Some((Bytes::from(bytes), "application/json")),
                None,
            )
            .await?;
        decode(path, &out)
    }

    /// POST with no body to `path`, waiting up to `timeout`; the raw answer.
    pub async fn post_empty(&self, path: &str, timeout: Duration) -> Result<Bytes, ApiError> {
        self.call(Method::POST, path, None, Some(timeout)).await
    }

    /// PUT `body` (a whole object with its resourceVersion) to `path`.
    pub async fn replace<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, ApiError> {
        let bytes = serde_json::to_vec(body).map_err(ApiError::Encode)?;
        let out = self
            .call(
                Method::PUT,
                path,
                Some((Bytes::from(bytes), "application/json")),
                None,
            )
            .await?;
        decode(path, &out)
    }

    /// PATCH `path` with `patch` read as `kind`.
    pub async fn patch<T: DeserializeOwned>(
        &self,
        path: &str,
        kind: PatchKind,
        patch: &serde_json::Value,
    ) -> Result<T, ApiError> {
        let bytes = serde_json::to_vec(patch).map_err(ApiError::Encode)?;
        let out = self
            .call(
                Method::PATCH,
                path,
                Some((Bytes::from(bytes), kind.content_type())),
                None,
            )
            .await?;
        decode(path, &out)
    }

    /// DELETE `path` with a grace period and a UID precondition (a 409 means the object
    /// is another one now; a 404 that it is gone — both for the caller to judge).
    pub async fn delete(&self, path: &str, opts: &DeleteOptions) -> Result<(), ApiError> {
        let body = DeleteOptionsBody {
            api_version: "v1".into(),
            kind: "DeleteOptions".into(),
            grace_period_seconds: opts.grace_period_seconds,
            preconditions: opts.uid.as_ref().map(|uid| Preconditions {
                uid: Some(uid.clone()),
                resource_version: None,
            }),
        };
        let bytes = serde_json::to_vec(&body).map_err(ApiError::Encode)?;
        self.call(
            Method::DELETE,
            path,
            Some((Bytes::from(bytes), "application/json")),
            None,
        )
        .await?;
        Ok(())
    }

    /// Starts a watch: `path_and_query` must carry `watch=true` (see [`query`]). The
    /// response head must arrive within the request timeout; the stream then lasts until
    /// the server ends it (ask for that with `timeoutSeconds`).
    pub async fn watch(&self, path_and_query: &str) -> Result<WatchStream, ApiError> {
        let body = self.open(path_and_query).await?;
        Ok(WatchStream {
            body,
            buf: BytesMut::new(),
            url: format!("{}{path_and_query}", self.inner.server),
            done: false,
        })
    }

    /// GET `path_and_query` and return the body as it streams (the response head within
    /// the request timeout; the body as long as the server sends it).
    async fn open(&self, path_and_query: &str) -> Result<Incoming, ApiError> {
        let url = format!("{}{path_and_query}", self.inner.server);
        let headers = self.headers(None, "application/json")?;
        let (status, _, body) = self
            .http()
            .stream(Method::GET, &url, &headers, self.inner.timeout)
            .await?;
        if !(200..300).contains(&status) {
            let bytes = tokio::time::timeout(self.inner.timeout, read_some(body, 64 * 1024))
                .await
                .unwrap_or_default();
            return Err(status_error("GET", &url, status, &bytes));
        }
        Ok(body)
    }

    /// GET `path` and hand each piece of the body to `sink` as it arrives, until the
    /// server ends it or `sink` returns false (`picolet logs -f`).
    pub async fn stream(
        &self,
        path: &str,
        sink: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<(), ApiError> {
        let mut body = self.open(path).await?;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|source| ApiError::Body {
                method: "GET".into(),
                url: format!("{}{path}", self.inner.server),
                source,
            })?;
            if let Some(data) = frame.data_ref() {
                if !sink(data) {
                    break;
                }
            }
        }
        Ok(())
    }

    /// GET `path` with `accept` as the Accept header; the raw answer (the CLI asks for
    /// server-side `Table`s).
    pub async fn get_as(&self, path: &str, accept: &'static str) -> Result<Bytes, ApiError> {
        let url = format!("{}{path}", self.inner.server);
        let headers = self.headers(None, accept)?;
        let resp = self
            .http()
            .request(
                Method::GET,
                &url,
                &headers,
                None,
                self.inner.timeout,
                MAX_RESPONSE_BYTES,
            )
            .await?;
        if (200..300).contains(&resp.status) {
            Ok(resp.body)
        } else {
            Err(status_error("GET", &url, resp.status, &resp.body))
        }
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<(Bytes, &'static str)>,
        timeout: Option<Duration>,
    ) -> Result<Bytes, ApiError> {
        self.call_limited(method, path, body, timeout, MAX_RESPONSE_BYTES)
            .await
    }

    async fn call_limited(
        &self,
        method: Method,
        path: &str,
        body: Option<(Bytes, &'static str)>,
        timeout: Option<Duration>,
        limit: usize,
    ) -> Result<Bytes, ApiError> {
        let url = format!("{}{path}", self.inner.server);
        let content_type = body.as_ref().map(|(_, ct)| *ct);
        let headers = self.headers(content_type, "application/json")?;
        let resp = self
            .http()
            .request(
                method.clone(),
                &url,
                &headers,
                body.map(|(b, _)| b),
                timeout.unwrap_or(self.inner.timeout),
                limit,
            )
            .await?;
        if (200..300).contains(&resp.status) {
            Ok(resp.body)
        } else {
            Err(status_error(method.as_str(), &url, resp.status, &resp.body))
        }
    }

    fn headers(
        &self,
        content_type: Option<&'static str>,
        accept: &'static str,
    ) -> Result<Vec<(HeaderName, HeaderValue)>, ApiError> {
        let mut headers = vec![
            (header::ACCEPT, HeaderValue::from_static(accept)),
            (
                header::USER_AGENT,
                HeaderValue::from_static(concat!("picolet/", env!("CARGO_PKG_VERSION"))),
            ),
        ];
        if let Some(ct) = content_type {
            headers.push((header::CONTENT_TYPE, HeaderValue::from_static(ct)));
        }
        if let Some(token) = self.token()? {
            let mut value =
                HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| ApiError::Pem {
                    what: "bearer token".into(),
                    reason: "contains characters not allowed in an HTTP header".into(),
                })?;
            value.set_sensitive(true);
            headers.push((header::AUTHORIZATION, value));
        }
        Ok(headers)
    }

    fn token(&self) -> Result<Option<String>, ApiError> {
        match &self.inner.credentials {
            Credentials::None => Ok(None),
            Credentials::Token(t) => Ok(Some(t.clone())),
            Credentials::TokenFile(path) => {
                let mut cache = self.inner.token_cache.borrow_mut();
                if let Some((at, token)) = cache.as_ref() {
                    if at.elapsed() < TOKEN_FILE_REFRESH {
                        return Ok(Some(token.clone()));
                    }
                }
                match read_token(path) {
                    Ok(token) => {
                        *cache = Some((Instant::now(), token.clone()));
                        Ok(Some(token))
                    }
                    // Keep using the last good token if the file is briefly unreadable.
                    Err(e) => match cache.as_ref() {
                        Some((_, token)) => {
                            log::warn!("{e}; using the previous token");
                            Ok(Some(token.clone()))
                        }
                        None => Err(e),
                    },
                }
            }
        }
    }
}

fn read_token(path: &Path) -> Result<String, ApiError> {
    let bytes = tls::read_file(path)?;
    Ok(String::from_utf8_lossy(&bytes).trim().to_string())
}

fn decode<T: DeserializeOwned>(path: &str, body: &[u8]) -> Result<T, ApiError> {
    crate::api::from_json_slice(body).map_err(|source| ApiError::Decode {
        what: format!("the answer to {path}"),
        source,
    })
}

/// An error answer as an [`ApiError::Status`], from its `Status` body when there is one.
fn status_error(method: &str, url: &str, code: u16, body: &[u8]) -> ApiError {
    let parsed: Option<Status> = crate::api::from_json_slice(body).ok();
    let (reason, message) = match parsed {
        Some(s) if !s.reason.is_empty() || !s.message.is_empty() => (s.reason, s.message),
        _ => {
            let text = String::from_utf8_lossy(&body[..body.len().min(200)]);
            (String::new(), text.trim().to_string())
        }
    };
    ApiError::Status {
        method: method.to_string(),
        url: url.to_string(),
        code,
        reason,
        message,
    }
}

async fn read_some(mut body: Incoming, limit: usize) -> Vec<u8> {
    let mut out = Vec::new();
    while out.len() < limit {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    out.extend_from_slice(data);
                }
            }
            _ => break,
        }
    }
    out
}

/// The lines of a watch answer, one event each.
pub struct WatchStream {
    body: Incoming,
    buf: BytesMut,
    url: String,
    done: bool,
}

impl WatchStream {
    /// The next event. `None` when the server ended the stream (a normal end of a watch:
    /// resume from the last resourceVersion). `Some(Err(Decode))` for a line that is not a
    /// watch event: the stream goes on. Other errors end the stream.
    pub async fn next(&mut self) -> Option<Result<WatchEvent, ApiError>> {
        loop {
            if let Some(pos) = self.buf.iter().position(|b| *b == b'\n') {
                let line = self.buf.split_to(pos + 1).freeze();
                let line = trim_line(&line);
                if line.is_empty() {
                    continue;
                }
                return Some(crate::api::from_json_slice(line).map_err(|source| {
                    ApiError::Decode {
                        what: format!("a watch event from {}", self.url),
                        source,
                    }
                }));
            }
            if self.buf.len() > MAX_WATCH_LINE_BYTES {
                self.done = true;
                self.buf.clear();
                return Some(Err(ApiError::TooLarge {
                    method: "WATCH".into(),
                    url: self.url.clone(),
                    limit: MAX_WATCH_LINE_BYTES,
                }));
            }
            if self.done {
                // A last event without a newline.
                if self.buf.is_empty() {
                    return None;
                }
                let line = self.buf.split().freeze();
                let line = trim_line(&line);
                if line.is_empty() {
                    return None;
                }
                return Some(crate::api::from_json_slice(line).map_err(|source| {
                    ApiError::Decode {
                        what: format!("a watch event from {}", self.url),
                        source,
                    }
                }));
            }
            match self.body.frame().await {
                None => self.done = true,
                Some(Ok(frame)) => {
                    if let Ok(mut data) = frame.into_data() {
                        while data.has_remaining() {
                            let chunk = data.chunk();
                            self.buf.extend_from_slice(chunk);
                            let n = chunk.len();
                            data.advance(n);
                        }
                    }
                }
                Some(Err(source)) => {
                    self.done = true;
                    self.buf.clear();
                    return Some(Err(ApiError::Body {
                        method: "WATCH".into(),
                        url: self.url.clone(),
                        source,
                    }));
                }
            }
        }
    }
}

fn trim_line(line: &[u8]) -> &[u8] {
    let start = line
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(line.len());
    let end = line
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |p| p + 1);
    &line[start..end.max(start)]
}

/// `?k=v&k2=v2`, values percent-encoded (RFC 3986 unreserved characters kept).
pub fn query(pairs: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for (i, (k, v)) in pairs.iter().enumerate() {
        out.push(if i == 0 { '?' } else { '&' });
        out.push_str(&percent_encode(k));
        out.push('=');
        out.push_str(&percent_encode(v));
    }
    out
}

fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `/api/v1/namespaces/<ns>/pods/<name>` (and the collection without a name).
pub fn pod_path(namespace: &str, name: Option<&str>) -> String {
    match name {
        Some(n) => format!("/api/v1/namespaces/{namespace}/pods/{n}"),
        None => format!("/api/v1/namespaces/{namespace}/pods"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer that does not decode names the request and the field.
    #[test]
    fn answers_that_do_not_decode_name_the_field() {
        let err = decode::<crate::api::Pod>("/api/v1/pods/x", br#"{"metadata": {"name": 5}}"#)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "the answer to /api/v1/pods/x: cannot decode: metadata.name: invalid type: integer `5`, expected a string"
        );
        let err = decode::<crate::api::Pod>("/p", b"{")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("the answer to /p: cannot decode: EOF"),
            "{err}"
        );
    }

    #[test]
    fn queries() {
        assert_eq!(
            query(&[("fieldSelector", "spec.nodeName=pi-1"), ("watch", "true")]),
            "?fieldSelector=spec.nodeName%3Dpi-1&watch=true"
        );
        assert_eq!(query(&[]), "");
        assert_eq!(query(&[("a", "x y/z")]), "?a=x%20y%2Fz");
    }

    #[test]
    fn status_errors() {
        let e = status_error(
            "GET",
            "u",
            404,
            br#"{"kind":"Status","code":404,"reason":"NotFound","message":"pods \"x\" not found"}"#,
        );
        assert!(e.is_not_found() && !e.is_conflict());
        assert!(e.to_string().contains("pods \"x\" not found"), "{e}");
        let e = status_error("POST", "u", 409, br#"{"reason":"AlreadyExists"}"#);
        assert!(e.is_conflict() && e.is_already_exists());
        let e = status_error("GET", "u", 410, b"");
        assert!(e.is_gone());
        let e = status_error("GET", "u", 500, b"oops\n");
        assert!(e.to_string().contains("HTTP 500"), "{e}");
        assert!(e.to_string().contains("oops"), "{e}");
    }

    #[test]
    fn trims() {
        assert_eq!(trim_line(b"  {}\r\n"), b"{}");
        assert_eq!(trim_line(b"\n"), b"");
    }
}
