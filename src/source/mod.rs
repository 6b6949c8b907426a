//! Pod sources: where desired pods come from.
//!
//! Owns: the errors sources report. What every source sends — a
//! [`SourceUpdate`](crate::messages::SourceUpdate), always the FULL snapshot of that source's
//! pods (kubelet: `kubetypes.SET` updates) — is a message of the leaf `messages`. The merge
//! (`pod_config.rs`) diffs snapshots; a source never emits deltas.
//!
//! Must never: talk to the runtime or hold pod state beyond its own last snapshot.
//!
//! Sources: [`file`] (the static pod directory); with the feature `apiserver` also
//! `apiserver` (the pods the apiserver binds to this node) and `http` (`--manifest-url`).

#[cfg(feature = "apiserver")]
pub(crate) mod apiserver;
pub(crate) mod file;
#[cfg(feature = "apiserver")]
pub(crate) mod http;

use std::path::PathBuf;

use crate::manifest::ManifestError;

/// Problems a source reports (logged by the source; one line each, naming the file).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SourceError {
    #[error("{}: cannot read the manifest directory: {error}", path.display())]
    ReadDir {
        path: PathBuf,
        #[source]
        error: std::io::Error,
    },
    #[error("{}: cannot watch the manifest directory: {error}", path.display())]
    Watch {
        path: PathBuf,
        #[source]
        error: notify::Error,
    },
    #[error("{}: cannot stat: {error}", path.display())]
    Stat {
        path: PathBuf,
        #[source]
        error: std::io::Error,
    },
    #[error("{}: cannot read: {error}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        error: std::io::Error,
    },
    #[error("{}: the file is {size} bytes; manifests larger than {max} bytes are rejected", path.display())]
    TooLarge { path: PathBuf, size: u64, max: u64 },
    #[error(transparent)]
    Manifest(#[from] ManifestError),
}
