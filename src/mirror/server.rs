//! The mirror's HTTP server: the read side of the OCI distribution API, as a runtime pulling
//! through a mirror uses it.
//!
//! - `GET /v2/` — the handshake (`Docker-Distribution-API-Version: registry/2.0`);
//! - `GET|HEAD /v2/<name>/manifests/<tag|digest>` — with its own media type,
//!   `Docker-Content-Digest`;
//! - `GET|HEAD /v2/<name>/blobs/<digest>` — `Range: bytes=a-b` answered `206` (a resumed
//!   pull), `Accept-Ranges: bytes`;
//! - `GET /v2/<name>/tags/list`.
//!
//! `<name>` is the repository as the runtime asks its mirror for it: containerd sends the
//! upstream registry as `?ns=registry.k8s.io`; CRI-O's mirror location carries it as the
//! first path component (`127.0.0.1:10261/registry.k8s.io`, see the README); a name with
//! neither is Docker Hub's. Errors are the distribution API's (`{"errors":[{"code":
//! "MANIFEST_UNKNOWN",…}]}`); every other method is `405 UNSUPPORTED`: read-only.
//!
//! Cost: a connection is a local task; a blob is read by a blocking thread in 64 KiB chunks
//! into a channel of two (at most ~192 KiB per download in flight); at most
//! [`MAX_CONNECTIONS`] connections, the newest refused beyond.

use std::cell::{Cell, RefCell};
use std::io::{Read, Seek, SeekFrom};
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use hyper::body::Incoming;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{BlobAt, Index};
use crate::http1::{Out, response};

pub(crate) const MAX_CONNECTIONS: usize = 64;
const CHUNK: usize = 64 * 1024;
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Accepts connections until `shutdown`.
pub(crate) async fn serve(
    listener: TcpListener,
    index: Rc<RefCell<Index>>,
    shutdown: CancellationToken,
) {
    let open = Rc::new(Cell::new(0usize));
    loop {
        let Some((stream, peer)) = crate::http1::accept(&listener, &shutdown, "image mirror").await
        else {
            return;
        };
        if open.get() >= MAX_CONNECTIONS {
            log::debug!("image mirror: {peer}: refused, {MAX_CONNECTIONS} connections open");
            continue;
        }
        open.set(open.get() + 1);
        let index = Rc::clone(&index);
        let shutdown = shutdown.clone();
        let open = Rc::clone(&open);
        crate::local_tasks::spawn_local(async move {
            let handler: crate::http1::Handler = Rc::new(move |req: Request<Incoming>| {
                let r = handle(&index.borrow(), &req);
                Box::pin(async move { r })
            });
            let conn = crate::http1::serve(Box::new(stream), handler, HEADER_TIMEOUT, 64 * 1024);
            tokio::select! {
                res = conn => if let Err(e) = res {
                    log::debug!("image mirror: {peer}: {e}");
                },
                _ = shutdown.cancelled() => {}
            }
            open.set(open.get() - 1);
        });
    }
}

/// One request (no I/O but the blob's reader thread, started here).
pub(crate) fn handle<B>(index: &Index, req: &Request<B>) -> Response<Out> {
    let head = req.method() == Method::HEAD;
    if !head && req.method() != Method::GET {
        let mut r = error(
            StatusCode::METHOD_NOT_ALLOWED,
            "UNSUPPORTED",
            "the operation is unsupported: this mirror is read-only",
            "",
        );
        r.headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let path = req.uri().path();
    let Some(rest) = path.strip_prefix("/v2") else {
        return error(StatusCode::NOT_FOUND, "NOT_FOUND", "not a /v2/ path", path);
    };
    let rest = rest.trim_start_matches('/');
    if rest.is_empty() {
        return with_api_version(response(
            StatusCode::OK,
            "application/json",
            Bytes::from_static(b"{}"),
        ));
    }
    let ns = req.uri().query().and_then(|q| {
        q.split('&')
            .find_map(|kv| kv.strip_prefix("ns="))
            .map(str::to_string)
    });
    let r = if let Some(name) = rest.strip_suffix("/tags/list") {
        tags_list(index, &repository(index, name, ns.as_deref()))
    } else if let Some((name, reference)) = rest.rsplit_once("/manifests/") {
        manifest(
            index,
            &repository(index, name, ns.as_deref()),
            reference,
            head,
        )
    } else if let Some((_, digest)) = rest.rsplit_once("/blobs/") {
        let range = req
            .headers()
            .get(header::RANGE)
            .and_then(|v| v.to_str().ok());
        blob(index, digest, range, head)
    } else {
        error(StatusCode::NOT_FOUND, "NOT_FOUND", "unknown route", path)
    };
    with_api_version(r)
}

/// `registry/repository` the request means (see the module's docs).
fn repository(index: &Index, name: &str, ns: Option<&str>) -> String {
    let name = name.trim_matches('/');
    let (registry, repo) = match ns {
        Some(ns) => (super::registry_alias(ns).to_string(), name.to_string()),
        None => match name.split_once('/') {
            Some((host, rest))
                if (host.contains('.') || host.contains(':') || host == "localhost")
                    && (index.knows_registry(super::registry_alias(host))
                        || super::registry_alias(host) == "docker.io") =>
            {
                (super::registry_alias(host).to_string(), rest.to_string())
            }
            _ => ("docker.io".to_string(), name.to_string()),
        },
    };
    if registry == "docker.io" && !repo.contains('/') {
        format!("docker.io/library/{repo}")
    } else {
        format!("{registry}/{repo}")
    }
}

fn is_digest(s: &str) -> bool {
    s.split_once(':').is_some_and(|(alg, hex)| {
        !alg.is_empty() && hex.len() >= 32 && hex.bytes().all(|b| b.is_ascii_hexdigit())
    })
}

fn manifest(index: &Index, repo: &str, reference: &str, head: bool) -> Response<Out> {
    let found = if is_digest(reference) {
        index.manifest(reference)
    } else {
        index.tag(&format!("{repo}:{reference}"))
    };
    let Some(m) = found else {
        return if index.has_repository(repo) || is_digest(reference) {
            error(
                StatusCode::NOT_FOUND,
                "MANIFEST_UNKNOWN",
                "manifest unknown",
                &format!("{repo}:{reference}"),
            )
        } else {
            error(
                StatusCode::NOT_FOUND,
                "NAME_UNKNOWN",
                "repository name not known to registry",
                repo,
            )
        };
    };
    let len = m.bytes.len();
    let body = if head {
        Bytes::new()
    } else {
        Bytes::copy_from_slice(&m.bytes)
    };
    let mut r = response(StatusCode::OK, &m.media_type, body);
    set(&mut r, "docker-content-digest", &m.digest);
    set(&mut r, "content-length", &len.to_string());
    r
}

fn tags_list(index: &Index, repo: &str) -> Response<Out> {
    let prefix = format!("{repo}:");
    let mut tags: Vec<String> = index
        .tags()
        .into_iter()
        .filter_map(|(t, _)| t.strip_prefix(&prefix).map(str::to_string))
        .collect();
    if tags.is_empty() {
        return error(
            StatusCode::NOT_FOUND,
            "NAME_UNKNOWN",
            "repository name not known to registry",
            repo,
        );
    }
    tags.sort();
    let name = repo.split_once('/').map_or(repo, |(_, r)| r);
    let body = serde_json::json!({ "name": name, "tags": tags });
    response(
        StatusCode::OK,
        "application/json",
        Bytes::from(serde_json::to_vec(&body).unwrap_or_default()),
    )
}

/// `bytes=a-b`, `bytes=a-`, `bytes=-n` within `size` → (start, end exclusive). `None`: not
/// satisfiable. Several ranges are not served (`Ok(None)`: the whole blob, as allowed).
fn range(spec: &str, size: u64) -> Result<Option<(u64, u64)>, ()> {
    let Some(r) = spec.trim().strip_prefix("bytes=") else {
        return Ok(None);
    };
    if r.contains(',') {
        return Ok(None);
    }
    let (a, b) = r.split_once('-').ok_or(())?;
    let (a, b) = (a.trim(), b.trim());
    let (start, end) = match (a.is_empty(), b.is_empty()) {
        (true, false) => {
            let n: u64 = b.parse().map_err(|_| ())?;
            (size.saturating_sub(n), size)
        }
        (false, true) => (a.parse().map_err(|_| ())?, size),
        (false, false) => {
            let a: u64 = a.parse().map_err(|_| ())?;
            let b: u64 = b.parse().map_err(|_| ())?;
            if b < a {
                return Err(());
            }
            (a, (b + 1).min(size))
        }
        (true, true) => return Err(()),
    };
    if start >= size {
        return Err(());
    }
    Ok(Some((start, end)))
}

fn blob(index: &Index, digest: &str, range_header: Option<&str>, head: bool) -> Response<Out> {
    let Some(at) = index.blob(digest) else {
        // A manifest made for an older docker save archive is no blob in it.
        if let Some(m) = index.manifest(digest) {
            let mut r = response(
                StatusCode::OK,
                "application/octet-stream",
                if head {
                    Bytes::new()
                } else {
                    Bytes::copy_from_slice(&m.bytes)
                },
            );
            set(&mut r, "docker-content-digest", digest);
            set(&mut r, "content-length", &m.bytes.len().to_string());
            return r;
        }
        return error(
            StatusCode::NOT_FOUND,
            "BLOB_UNKNOWN",
            "blob unknown to registry",
            digest,
        );
    };
    let size = at.loc.size;
    let (code, start, end) = match range_header.map(|h| range(h, size)) {
        None | Some(Ok(None)) => (StatusCode::OK, 0, size),
        Some(Ok(Some((s, e)))) => (StatusCode::PARTIAL_CONTENT, s, e),
        Some(Err(())) => {
            let mut r = error(
                StatusCode::RANGE_NOT_SATISFIABLE,
                "RANGE_INVALID",
                "invalid content range",
                digest,
            );
            set(&mut r, "content-range", &format!("bytes */{size}"));
            return r;
        }
    };
    let mut r = if head {
        Response::new(Out::Full(Some(Bytes::new())))
    } else {
        Response::new(Out::Stream(read_blob(at, start, end - start)))
    };
    *r.status_mut() = code;
    set(&mut r, "content-type", "application/octet-stream");
    set(&mut r, "docker-content-digest", digest);
    set(&mut r, "accept-ranges", "bytes");
    set(&mut r, "content-length", &(end - start).to_string());
    if code == StatusCode::PARTIAL_CONTENT {
        set(
            &mut r,
            "content-range",
            &format!("bytes {start}-{}/{size}", end - 1),
        );
    }
    r
}

/// Reads `len` bytes of the blob from `skip` on, in a blocking thread, into a channel of
/// two chunks. A client gone (the channel closed) ends the thread; a read error ends the
/// body short, which the client sees as a short read (the runtime retries the pull).
fn read_blob(at: BlobAt, skip: u64, len: u64) -> mpsc::Receiver<Bytes> {
    let (tx, rx) = mpsc::channel(2);
    tokio::task::spawn_blocking(move || {
        let res = (|| -> std::io::Result<()> {
            let mut src: Box<dyn Read> = if at.gzip {
                let mut g = super::gzip::Reader::open(&at.path)?;
                super::tar::Skip::skip(&mut g, at.loc.offset + skip)?;
                Box::new(g)
            } else {
                let mut f = std::fs::File::open(&at.path)?;
                f.seek(SeekFrom::Start(at.loc.offset + skip))?;
                Box::new(f)
            };
            let mut left = len;
            while left > 0 {
                let n = usize::try_from(left.min(CHUNK as u64)).unwrap_or(CHUNK);
                let mut buf = vec![0u8; n];
                src.read_exact(&mut buf)?;
                left -= n as u64;
                if tx.blocking_send(Bytes::from(buf)).is_err() {
                    return Ok(()); // the client went away
                }
            }
            Ok(())
        })();
        if let Err(e) = res {
            log::warn!(
                "image mirror: {}: reading a blob failed: {e}",
                at.path.display()
            );
        }
    });
    rx
}

fn set(r: &mut Response<Out>, name: &'static str, value: &str) {
    if let Ok(v) = header::HeaderValue::from_str(value) {
        r.headers_mut()
            .insert(header::HeaderName::from_static(name), v);
    }
}

fn with_api_version(mut r: Response<Out>) -> Response<Out> {
    set(&mut r, "docker-distribution-api-version", "registry/2.0");
    r
}

/// The distribution API's error body.
fn error(code: StatusCode, what: &str, message: &str, detail: &str) -> Response<Out> {
    let body = serde_json::json!({
        "errors": [{ "code": what, "message": message, "detail": detail }]
    });
    response(
        code,
        "application/json",
        Bytes::from(serde_json::to_vec(&body).unwrap_or_default()),
    )
}
