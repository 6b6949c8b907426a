//! [`ApiError`]: everything that can go wrong between picolet and an API server (or a
//! manifest URL). Callers branch on [`ApiError::is_not_found`], [`ApiError::is_conflict`],
//! [`ApiError::is_gone`] and [`ApiError::is_already_exists`]; everything else is "retry
//! later".

use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("kubeconfig {}: cannot read: {source}", path.display())]
    KubeconfigRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("kubeconfig {}: {source}", path.display())]
    KubeconfigParse {
        path: PathBuf,
        #[source]
        source: crate::api::YamlError,
    },
    /// A required entry is missing or names something that does not exist.
    #[error("kubeconfig {}: {what}", path.display())]
    KubeconfigInvalid { path: PathBuf, what: String },
    #[error("{}: cannot read: {source}", path.display())]
    ReadFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Bad PEM or base64 in a certificate, key or CA (`what` names it).
    #[error("{what}: {reason}")]
    Pem { what: String, reason: String },
    #[error("TLS configuration: {0}")]
    Tls(#[source] rustls::Error),
    #[error("header {name:?}: not a valid HTTP header name and value")]
    BadHeader { name: String },
    #[error("invalid URL {url:?}: {reason}")]
    BadUrl { url: String, reason: &'static str },
    #[error("{method} {url}: cannot connect: {}", chain(source))]
    Connect {
        method: String,
        url: String,
        #[source]
        source: hyper_util::client::legacy::Error,
    },
    #[error("{method} {url}: {}", chain(source))]
    Body {
        method: String,
        url: String,
        #[source]
        source: hyper::Error,
    },
    #[error("{method} {url}: no answer within {after:?}")]
    Timeout {
        method: String,
        url: String,
        after: Duration,
    },
    #[error("{method} {url}: the answer is larger than {limit} bytes")]
    TooLarge {
        method: String,
        url: String,
        limit: usize,
    },
    /// The server answered with an error status (a Kubernetes `Status` object when it sent
    /// one: `reason` like `NotFound`, `Conflict`, `Expired`, `Gone`).
    #[error("{method} {url}: HTTP {code} {reason}: {message}")]
    Status {
        method: String,
        url: String,
        code: u16,
        reason: String,
        message: String,
    },
    #[error("{what}: cannot decode: {source}")]
    Decode {
        what: String,
        #[source]
        source: crate::api::JsonError,
    },
    #[error("cannot encode the request body: {0}")]
    Encode(#[source] serde_json::Error),
    #[error("cannot build the request: {0}")]
    Request(#[source] ::http::Error),
}

/// An error and its causes, `outer: inner: innermost` (hyper's own messages are terse:
/// "client error (Connect)" says nothing about the refused connection underneath).
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(inner) = cur {
        let text = inner.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cur = inner.source();
    }
    out
}

impl ApiError {
    pub fn code(&self) -> Option<u16> {
        match self {
            ApiError::Status { code, .. } => Some(*code),
            _ => None,
        }
    }

    pub fn is_not_found(&self) -> bool {
        self.code() == Some(404)
    }

    /// 409: a precondition (UID, resourceVersion) failed or the object exists.
    pub fn is_conflict(&self) -> bool {
        self.code() == Some(409)
    }

    pub fn is_already_exists(&self) -> bool {
        matches!(self, ApiError::Status { code: 409, reason, .. } if reason == "AlreadyExists")
    }

    /// 410 Gone: the resourceVersion is too old (compacted); relist.
    pub fn is_gone(&self) -> bool {
        matches!(self, ApiError::Status { code: 410, .. })
            || matches!(self, ApiError::Status { reason, .. } if reason == "Expired" || reason == "Gone")
    }

    /// A failure of configuration, not of the network: retrying will not help.
    pub fn is_config(&self) -> bool {
        matches!(
            self,
            ApiError::KubeconfigRead { .. }
                | ApiError::KubeconfigParse { .. }
                | ApiError::KubeconfigInvalid { .. }
                | ApiError::ReadFile { .. }
                | ApiError::Pem { .. }
                | ApiError::Tls(_)
                | ApiError::BadUrl { .. }
                | ApiError::BadHeader { .. }
        )
    }
}
