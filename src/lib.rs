//! picolet — a kubelet for edge devices.
//!
//! picolet turns *desired* pods into *running* containers on one small node, the way the
//! upstream kubelet does, in one small binary on one thread (tokio `current_thread`).
//!
//! ```text
//!  sources (full snapshots)        merge              desired view         one worker per UID
//!  ┌──────────────┐           ┌─────────────┐      ┌─────────────┐      ┌───────────────────┐
//!  │ file (inotify│──snapshot─▶ pod_config  │─────▶│ pod_manager │─────▶│ pod_workers       │
//!  │ + 20 s relist)│          │ PodUpdate   │      │ by UID/name │      │ Sync → Terminating│
//!  └──────────────┘           │ ADD/UPDATE/ │      └─────────────┘      │  → Terminated     │
//!   + http, api (apiserver)   │ DELETE/...  │                           └─────────┬─────────┘
//!                             └─────────────┘                                     │ plan + sync
//!        relist every 1 s (PLEG) ◀──────────────── runtime ◀──────────────────────┘
//!                                                  (CRI over a unix socket: containerd, CRI-O)
//! ```
//!
//! Layers: they import one way. A module never imports the module that wires it, and
//! messages that cross layers live in the leaf `events`.
//!
//! ```text
//!  main.rs → daemon      wiring: builds everything from `Options`, starts the tasks
//!  main.rs → cli         validate → manifest, admission; get/describe/logs → the apiserver client
//!  daemon  → agent       the loop → pod_config, pod_manager, pod_workers, pleg, prober, status, runtime
//!  agent   → prober      → runtime, status, probe
//!  daemon  → source      file, http, api → the apiserver client
//!  daemon  → apiserver   the client; the node and status_sync tasks → runtime
//!  status, runtime       → api, clock; runtime's hooks → probe
//!  runtime, prober, agent, apiserver's event sink → recorder
//!  runtime (sync), agent  → csi (→ api, config_data)
//!  leaves                api, clock, events, grpc, manifest, node, options, shrink, probe (its https
//!                        borrows the rustls config of `kube::tls`), recorder (→ api,
//!                        clock)
//! ```
//!
//! Fakes: one per external boundary, and each boundary's fake is one model with thin
//! fronts. containerd: `cri::fake_containerd` (the in-memory containerd: state, IDs,
//! injected clock, events, stats) ← `cri::fake` (a `Runtime`, called directly, paused
//! time) and `cri::fake_cri` (feature `fake-cri`: a CRI gRPC server that only decodes,
//! calls the model, encodes, and adds transport faults). The API server:
//! `kube::mock` (feature `mock-apiserver`). Time: `clock::TokioClock`.
//!
//! Layout:
//! - [`api`]          the `v1/Pod` subset (serde types), nothing else
//! - `apiserver`      (feature `apiserver`) the API server client, and the tasks that use
//!   it besides the sources: node and lease, status sync and mirror pods; the offline
//!   checkpoint
//! - [`manifest`]     pre-scan (cost limits), parse, default, validate a manifest; static pod identity
//! - [`source`]       pod sources; [`source::file`] is the static pod directory (with the
//!   feature `apiserver` also `source::apiserver` and `source::http`)
//! - [`pod_config`]   PodConfig: merges source snapshots into ordered `PodUpdate`s
//! - [`pod_manager`]  the desired pods, by UID and by full name
//! - [`pod_workers`]  the per-pod lifecycle state machine and its scheduling
//! - [`pleg`]         the pod lifecycle event generator's runtime half: the relist, and the
//!   runtime's container events where it has them (evented PLEG)
//! - [`runtime`]      the CRI boundary, the pure plan, the sync that executes it, container
//!   GC, log rotation and image GC (tasks of their own beside the loop); and its fake, the in-memory containerd with its two fronts (see Fakes above)
//! - [`probe`]        the network probe and hook handlers (tcpSocket, httpGet, grpc); a leaf
//! - [`prober`]       the probe manager: one worker task per probe, results by container
//!   ID for the plan (liveness/startup kills) and the status (ready, started)
//! - [`recorder`]     the event recorder: Kubernetes Events of what picolet did to pods, a
//!   bounded in-memory ring with aggregation of identical events (a leaf: `api`, `clock`)
//! - [`csi`]          CSI node plugins: the registration watcher on `<root-dir>/plugins_registry`,
//!   the registered drivers, and inline `csi:` volumes published / unpublished through their
//!   Node service (and, with `fake-cri`, the fake CSI plugin of the tests)
//! - [`qos`]          QoS class and OOM score of a pod (pure; status and the CRI config use it)
//! - [`status`]       pod status (phase, conditions, container states) from runtime state
//! - [`node`]         node checks (cgroups, preflight)
//! - [`cm`]           the container manager's cgroups: kubepods, QoS and pod cgroups,
//!   node allocatable (a leaf: `api`, `qos`; its worker thread does the file system)
//! - [`eviction`]     the eviction manager: thresholds, node pressure conditions, pod ranking
//!   (pure), and the task measuring the signals (`eviction::observe`)
//! - [`daemon`]       wiring: builds the sources, the apiserver tasks and the agent from
//!   the options, and the channels between them
//! - [`agent`]        the one event loop; shutdown order
//! - [`events`]       messages between layers (source snapshots, pod events) and the
//!   coalescing mailbox of pod events
//! - [`options`]      command-line flags and config file
//! - [`cli`]          the board's own commands: `validate` (manifests, offline) and `get`,
//!   `describe pod`, `logs` (kubectl's output, as clients of `local_api`)
//! - [`clock`]        injected wall-clock time
//! - [`sort`]         stable sorting with one copy of the sort code (binary size; a leaf)
//! - [`grpc`]   the protobuf codec of the generated gRPC code (1 KiB first buffers; a leaf)
//! - [`json`]         JSON objects built out of line, for `json!` at many keys (binary size; a leaf)

pub mod admission;
pub mod agent;
pub mod api;
#[cfg(feature = "apiserver")]
pub mod checkpoint;
pub mod cli;
pub mod clock;
pub mod cm;
pub mod config_data;
pub mod cri;
pub mod daemon;
pub mod eviction;
pub mod fieldpath;
pub mod grpc;
pub mod images;
pub mod json;
#[cfg(feature = "apiserver")]
pub mod kube;
pub mod kuberuntime;
#[cfg(feature = "apiserver")]
pub mod local_api;
pub mod logs;
pub mod manifest;
pub mod messages;
pub mod metrics;
pub mod node;
pub mod options;
pub mod pleg;
pub mod pod_config;
pub mod pod_manager;
pub mod pod_sync;
pub mod pod_workers;
pub mod probe;
pub mod prober;
pub mod qos;
pub mod recorder;
pub mod shrink;
pub mod sort;
pub mod source;
pub mod status;
pub mod volume;
