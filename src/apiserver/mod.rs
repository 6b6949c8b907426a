//! The Kubernetes API server boundary (feature `apiserver`): picolet as a node of a cluster.
//!
//! Owns: the HTTP(S) client (hyper 1 client-legacy over tokio, rustls with the `ring`
//! provider), kubeconfig and in-cluster credentials, the typed API calls picolet makes
//! (get / list / watch / create / patch / delete with preconditions), and the tasks that
//! talk to the apiserver on the agent's behalf (the daemon starts them):
//!
//! - [`node`]: registers the Node, reports its status (every 10 s, PATCH only on change or
//!   every 5 min) and renews its Lease in `kube-node-lease` (kubelet:
//!   `kubelet_node_status.go`, `nodelease`);
//! - [`status_sync`]: pushes pod statuses to `pods/<name>/status`, keeps mirror pods of
//!   static pods, and deletes pods whose deletion picolet has finished (kubelet: the status
//!   manager, `mirror_client.go`);
//! - [`event_sink`]: sends the events of the node's recorder (POST new, PATCH aggregated),
//!   rate-limited as the kubelet's `eventRecordQPS`/`eventBurst`, dropping them while the
//!   apiserver is away;
//! - [`checkpoint`]: the last-seen set of API pods on disk, so a node that restarts while
//!   the apiserver is unreachable keeps its pods (offline autonomy; the kubelet has none).
//!
//! The pod sources that use this client live with the other sources:
//! `source::apiserver` (list + watch) and `source::http` (`--manifest-url`). They import
//! this module; it never imports them, nor the agent: the tasks get pod events from the
//! leaf `events`, and `daemon` wires everything.
//!
//! Must never: panic or give up on a network failure (every loop retries with back-off),
//! hold pod state that the event loop owns (tasks get messages in, send snapshots out), or
//! block the event loop on the network.
//!
//! Layout:
//! - `error.rs`      [`ApiError`]
//! - `kubeconfig.rs` `--kubeconfig` and in-cluster credentials → [`ClientConfig`]
//! - `tls.rs`        rustls client configuration, PEM, base64
//! - `http.rs`       the connector (TCP, optional TLS) and [`HttpClient`] (bytes in, bytes out)
//! - `client.rs`     [`Client`]: typed API calls and the watch stream
//! - `types.rs`      Node, Lease, watch events, lists, `Status`
//! - `backoff.rs`    reconnect back-off with deterministic jitter
//! - `mock.rs`       (feature `mock-apiserver`) an in-process API server for tests

mod backoff;
pub mod checkpoint;
mod client;
mod error;
pub mod event_sink;
mod http;
pub mod kubeconfig;
#[cfg(feature = "mock-apiserver")]
pub mod mock;
pub mod node;
pub mod objects;
pub mod status_sync;
// The probes reuse its client configuration (https probes skip verification, as upstream).
pub(crate) mod tls;
pub mod types;

pub use backoff::Backoff;
pub use client::{
    Client, DeleteOptions, MAX_RESPONSE_BYTES, PatchKind, WatchStream, pod_path, query,
};
pub use error::ApiError;
pub use http::{HttpClient, HttpResponse};
pub use kubeconfig::{ClientConfig, Credentials};
pub use tls::decode_base64;
