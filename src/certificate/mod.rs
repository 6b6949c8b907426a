//! The node's certificates from the cluster (kubelet: pkg/kubelet/certificate and client-go
//! util/certificate): TLS bootstrapping with a bootstrap token (`--bootstrap-kubeconfig`),
//! client certificate rotation (`--rotate-certificates`) and the serving certificate by CSR
//! (`--rotate-server-certificates`, `serverTLSBootstrap`).
//!
//! Owns: when a certificate is due ([`manager`], pure), its files in `--cert-dir`
//! ([`store`]), the CertificateSigningRequest round trip ([`csr`]), the bootstrap before
//! anything else runs ([`bootstrap`]), and the rotation tasks ([`rotation`]) that put each
//! new certificate in a [`CertSlot`] that new TLS handshakes read.
//!
//! Must never: log or put in an error a key, a token or a certificate's bytes; write a key
//! other than 0600 or half a file; import what wires it (`daemon`) or the node manager.
//!
//! Deliberate differences from the kubelet (see also each function):
//! - the CSR is polled (GET by name every 2 s) instead of watched;
//! - keys are written PKCS#8 (`PRIVATE KEY`), the kubelet writes SEC1 (`EC PRIVATE KEY`);
//!   both are read;
//! - a rotation renews the client's connection pool instead of closing open connections:
//!   watches under way end on their own (they carry timeouts) and resume on the new cert.

pub(crate) mod bootstrap;
pub(crate) mod csr;
pub(crate) mod manager;
pub(crate) mod rotation;
pub(crate) mod store;

use std::path::PathBuf;

pub(crate) use crate::kube::CertSlot;

/// kubelet: the client certificate's signer and usages.
pub(crate) const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// ECDSA keys: no key encipherment (certificate_manager.go adds it for RSA only).
pub(crate) const CLIENT_USAGES: [&str; 2] = ["digital signature", "client auth"];
/// kubelet: the serving certificate's signer and usages.
pub(crate) const SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";
pub(crate) const SERVING_USAGES: [&str; 2] = ["digital signature", "server auth"];

#[derive(Debug, thiserror::Error)]
pub(crate) enum CertificateError {
    #[error(transparent)]
    Api(#[from] crate::kube::ApiError),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {what}", path.display())]
    BadFile { path: PathBuf, what: String },
    #[error(transparent)]
    X509(#[from] crate::x509::X509Error),
    #[error("certificate signing request {name} was denied ({reason}): {message}")]
    Denied {
        name: String,
        reason: String,
        message: String,
    },
    #[error("certificate signing request {name} failed ({reason}): {message}")]
    Failed {
        name: String,
        reason: String,
        message: String,
    },
    #[error("certificate signing request {name} was not issued within {after:?}")]
    Timeout {
        name: String,
        after: std::time::Duration,
    },
    #[error("certificate signing request {name}: {what}")]
    BadAnswer { name: String, what: String },
    #[error("shut down")]
    Shutdown,
}

fn io_err(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> CertificateError + '_ {
    |source| CertificateError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The node's identity in its certificates: `CN=system:node:<name>`, `O=system:nodes`.
pub(crate) fn node_subject(node_name: &str) -> crate::x509::RequestSubject {
    crate::x509::RequestSubject {
        common_name: format!("system:node:{node_name}"),
        organizations: vec!["system:nodes".into()],
        dns_names: vec![],
        ips: vec![],
    }
}

#[cfg(all(test, feature = "mock-apiserver"))]
mod tests;
