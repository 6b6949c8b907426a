//! The Kubernetes API server client (feature `apiserver`): a leaf that every part of
//! picolet talking to a cluster uses, and that imports nothing of them (only `api` and
//! `clock`).
//!
//! Owns: the HTTP(S) client (hyper 1 client-legacy over tokio, rustls with the `ring`
//! provider), kubeconfig and in-cluster credentials, the typed API calls picolet makes
//! (get / list / watch / create / patch / delete with preconditions), the watch stream and
//! the reconnect back-off. It runs no task.
//!
//! Its users live beside what they manage (kubelet: each manager holds its client), and the
//! daemon starts them: `node::status` (the Node, its status and its Lease),
//! `status::status_sync` (pod statuses, mirror pods, finished deletions),
//! `recorder::event_sink` (the recorder's events), `config_data::objects` (the
//! ConfigMap/Secret/token watches), `source::apiserver` and `source::http` (the pod
//! sources), and the offline `checkpoint`.
//!
//! Must never: import any other module of picolet but `api` and `clock`, panic on a
//! network failure, or block the event loop on the network.
//!
//! Layout:
//! - `error.rs`      [`ApiError`]
//! - `kubeconfig.rs` `--kubeconfig` and in-cluster credentials → [`ClientConfig`]
//! - `tls.rs`        rustls client configuration, PEM, base64
//! - `http.rs`       the connector (TCP, optional TLS) and [`HttpClient`] (bytes in, bytes out)
//! - `client.rs`     [`Client`]: typed API calls and the watch stream
//! - `backoff.rs`    reconnect back-off with deterministic jitter
//! - `mock.rs`       (feature `mock-apiserver`) an in-process API server for tests

mod backoff;
mod client;
mod error;
mod http;
pub(crate) mod kubeconfig;
#[cfg(feature = "mock-apiserver")]
#[allow(clippy::too_many_lines)] // a test double, not production code
pub(crate) mod mock;
// The probes reuse its client configuration (https probes skip verification, as upstream).
pub(crate) mod tls;

pub(crate) use backoff::Backoff;
pub(crate) use client::MAX_RESPONSE_BYTES;
pub use client::{Client, DeleteOptions, PatchKind, WatchStream, pod_path, query};
pub use error::ApiError;
pub use http::{HttpClient, clock_problem};
pub use kubeconfig::ClientConfig;
#[cfg(test)]
pub(crate) use kubeconfig::Credentials;
pub(crate) use tls::CertSlot;
