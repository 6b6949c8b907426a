//! Volumes (kubelet: `volumemanager` and its plugins): the host side of what a pod mounts.
//!
//! Owns: the pod's directories and their modes, hostPath checks, emptyDir (disk and
//! `Memory` tmpfs), subPath resolution, and the data volumes picolet writes (configMap,
//! secret, downwardAPI, projected, via the atomic writer).
//!
//! Must never: talk to the runtime beyond its mount types, or import the runtime manager
//! (`kuberuntime` builds on this).
//!
//! Layout:
//! - `mounts.rs` host side of volume mounts (hostPath checks, emptyDir, subPath), the pod
//!   directory layout and the tmpfs helper
//! - `data_volumes.rs` configMap, secret, downwardAPI and projected volumes
//! - `csi/` CSI node plugins: the registration watcher, the registered drivers, inline
//!   `csi:` volumes published and unpublished through their Node service

pub(crate) mod atomic_writer;
pub(crate) mod csi;
pub(crate) mod data_volumes;
pub(crate) mod mounts;
