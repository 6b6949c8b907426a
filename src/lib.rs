//! picolet — a kubelet for edge devices.
//!
//! picolet turns *desired* pods into *running* containers on one small node, the way the
//! upstream kubelet does, in one small binary on one thread (tokio `current_thread`).
//!
//! ```text
//!  sources (full snapshots)        merge              desired view         one worker per UID
//!  ┌──────────────┐           ┌─────────────┐      ┌─────────────┐      ┌───────────────────┐
//!  │ file (inotify│──snapshot─▶ config      │─────▶│ pod_manager │─────▶│ pod_workers       │
//!  │ + 20 s relist)│          │ PodUpdate   │      │ by UID/name │      │ Sync → Terminating│
//!  └──────────────┘           │ ADD/UPDATE/ │      └─────────────┘      │  → Terminated     │
//!   (http, apiserver: later)  │ DELETE/...  │                           └─────────┬─────────┘
//!                             └─────────────┘                                     │ plan + sync
//!        relist every 1 s (PLEG) ◀──────────────── runtime ◀──────────────────────┘
//!                                                  (CRI over a unix socket: containerd, CRI-O)
//! ```
//!
//! Layout:
//! - [`api`]          the `v1/Pod` subset (serde types), nothing else
//! - `apiserver`      (feature `apiserver`) the API server client: node, lease, status
//!   sync, mirror pods, the offline checkpoint
//! - [`manifest`]     pre-scan (cost limits), parse, default, validate a manifest; static pod identity
//! - [`source`]       pod sources; [`source::file`] is the static pod directory (with the
//!   feature `apiserver` also `source::apiserver` and `source::http`)
//! - [`pod_config`]   PodConfig: merges source snapshots into ordered `PodUpdate`s
//! - [`pod_manager`]  the desired pods, by UID and by full name
//! - [`pod_workers`]  the per-pod lifecycle state machine and its scheduling
//! - [`runtime`]      the CRI boundary, the pure plan, the sync that executes it, container GC
//! - [`status`]       pod status (phase, conditions, container states) from runtime state
//! - [`node`]         node checks (cgroups, preflight)
//! - [`agent`]        wiring and the one event loop; shutdown order
//! - [`events`]       messages between layers (pod events) and their coalescing mailbox
//! - [`options`]      command-line flags and config file
//! - [`clock`]        injected wall-clock time

pub mod agent;
pub mod api;
#[cfg(feature = "apiserver")]
pub mod apiserver;
pub mod clock;
pub mod events;
pub mod manifest;
pub mod node;
pub mod options;
pub mod pod_config;
pub mod pod_manager;
pub mod pod_workers;
pub mod runtime;
pub mod source;
pub mod status;
