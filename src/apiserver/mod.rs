//! The Kubernetes API server boundary (feature `apiserver`): picolet as a node of a cluster.
//!
//! Owns: the HTTP(S) client (hyper 1 client-legacy over tokio, rustls with the `ring`
//! provider), kubeconfig and in-cluster credentials, the typed API calls picolet makes
//! (get / list / watch / create / patch / delete with preconditions), and the tasks that
//! talk to the apiserver on the agent's behalf:
//!
//! - [`node`]: registers the Node, reports its status (every 10 s, PATCH only on change or
//!   every 5 min) and renews its Lease in `kube-node-lease` (kubelet:
//!   `kubelet_node_status.go`, `nodelease`);
//! - [`status_sync`]: pushes pod statuses to `pods/<name>/status`, keeps mirror pods of
//!   static pods, and deletes pods whose deletion picolet has finished (kubelet: the status
//!   manager, `mirror_client.go`);
//! - [`checkpoint`]: the last-seen set of API pods on disk, so a node that restarts while
//!   the apiserver is unreachable keeps its pods (offline autonomy; the kubelet has none).
//!
//! The pod sources that use this client live with the other sources:
//! `source::apiserver` (list + watch) and `source::http` (`--manifest-url`).
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
mod http;
pub mod kubeconfig;
#[cfg(feature = "mock-apiserver")]
pub mod mock;
pub mod node;
pub mod status_sync;
mod tls;
pub mod types;

pub use backoff::Backoff;
pub use client::{
    Client, DeleteOptions, MAX_RESPONSE_BYTES, PatchKind, WatchStream, pod_path, query,
};
pub use error::ApiError;
pub use http::{HttpClient, HttpResponse};
pub use kubeconfig::{ClientConfig, Credentials};
pub use tls::decode_base64;

use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::agent::{AgentConfig, Extensions};
use crate::clock::Clock;
use crate::options::Options;
use crate::runtime::Runtime;
use crate::source::apiserver::ApiSource;
use crate::source::http::HttpSource;

/// Starts the apiserver-mode tasks `opts` asks for (`--kubeconfig`: node, API source,
/// status syncer; `--manifest-url`: the HTTP source) on the current `LocalSet`, and returns
/// what the agent must add: the source names, their channel, the pod-event sender.
/// Configuration errors (an unreadable kubeconfig, a bad CA) fail here, before anything
/// runs; network errors never do — the tasks retry.
pub fn start<R: Runtime, C: Clock>(
    opts: &Options,
    cfg: &AgentConfig,
    runtime: R,
    clock: C,
    shutdown: &CancellationToken,
) -> Result<Extensions, ApiError> {
    if opts.kubeconfig.is_none() && opts.manifest_url.is_none() {
        return Ok(Extensions::default());
    }
    let (src_tx, src_rx) = mpsc::channel(16);
    let mut ext = Extensions::default();

    if let Some(url) = &opts.manifest_url {
        let tls = if url.starts_with("https://") {
            Some(tls::client_config(&tls::TlsSettings::default())?)
        } else {
            None
        };
        let source = HttpSource::new(
            HttpClient::new(tls, None)?,
            url.clone(),
            &opts.manifest_url_headers,
            cfg.node_name.clone(),
            clock.clone(),
        )?;
        log::info!("http source: {url} every 20s");
        tokio::task::spawn_local(source.run(src_tx.clone(), shutdown.child_token()));
        ext.sources.push(crate::source::http::SOURCE);
    }

    if let Some(path) = &opts.kubeconfig {
        let config = ClientConfig::from_kubeconfig(path)?;
        let client = Client::new(&config)?;
        log::info!(
            "apiserver mode: node {} joins {} (kubeconfig {})",
            cfg.node_name,
            client.server(),
            path.display()
        );
        let (uid_tx, uid_rx) = watch::channel(None);
        let mut node_opts = node::NodeOptions::new(cfg.node_name.clone());
        node_opts.labels = opts.node_labels.clone();
        node_opts.max_pods = opts.max_pods;
        node_opts.node_ip = opts.node_ip;
        node_opts.status_update_frequency = opts.node_status_update_frequency;
        let node_agent = node::NodeAgent::new(client.clone(), runtime, clock, node_opts, uid_tx);
        tokio::task::spawn_local(node_agent.run(shutdown.child_token()));

        let source = ApiSource::new(
            client.clone(),
            cfg.node_name.clone(),
            Some(checkpoint::Checkpoint::new(&cfg.root_dir, &cfg.node_name)),
        );
        tokio::task::spawn_local(source.run(src_tx.clone(), shutdown.child_token()));
        ext.sources.push(crate::source::apiserver::SOURCE);

        let (ev_tx, ev_rx) = crate::events::pod_events();
        let syncer = status_sync::StatusSyncer::new(client, cfg.node_name.clone(), uid_rx, ev_rx);
        tokio::task::spawn_local(syncer.run(shutdown.child_token()));
        ext.events = Some(ev_tx);
    }
    ext.source_channel = Some((src_tx, src_rx));
    Ok(ext)
}
