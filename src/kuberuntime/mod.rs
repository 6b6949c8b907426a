//! The runtime manager (kubelet: `kuberuntime`): what a pod's containers should be and
//! making it so through the CRI.
//!
//! Owns: the CRI labels/annotations contract by which pods are adopted after a restart, the
//! pure plan (`computePodActions`), the translation of a pod into CRI configs, the sync that
//! executes a plan (SyncPod / KillPod), crash-loop and image-pull back-off, lifecycle hooks,
//! the mounts the kubelet makes for every container, and container GC.
//!
//! Must never: import the loop (`agent`), the status, the prober or the PLEG; hold pod state
//! between syncs (the event loop owns it).
//!
//! Layout:
//! - `labels.rs` the CRI labels/annotations contract (how pods are adopted after a restart)
//! - `plan.rs`   pure `compute_pod_actions` (kubelet: `computePodActions`)
//! - `backoff.rs` crash-loop and image-pull back-off
//! - `cri_config.rs` pure translation of a pod into `SandboxConfig` / `ContainerConfig`
//! - `container_mounts.rs` the termination-message file and the managed `/etc/hosts`
//! - `hooks.rs`  postStart / preStop handlers
//! - `sync/`     executes a plan: SyncPod (`mod.rs`) against a `Runtime`, with the runtime
//!   view it reads (`inspect.rs`), the sandbox (`sandbox.rs`), images (`image.rs`), container
//!   start and what a dead one leaves (`container.rs`), KillPod and cleanup (`kill.rs`)
//! - `cni_cache.rs` the empty CNI cache files a power cut leaves, removed once per boot
//! - `gc.rs`     container GC: which dead containers, sandboxes and pod log dirs go, and going
//! - `userns.rs` the ID ranges of pods with their own user namespace (`hostUsers: false`)

pub(crate) mod backoff;
pub(crate) mod cni_cache;
pub(crate) mod container_mounts;
pub(crate) mod cri_config;
pub(crate) mod gc;
pub(crate) mod hooks;
pub(crate) mod labels;
pub(crate) mod plan;
pub(crate) mod sync;
pub(crate) mod userns;
