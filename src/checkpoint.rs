//! Offline autonomy: the last-seen set of API pods, on disk (KubeEdge and OpenYurt have
//! this; the kubelet does not).
//!
//! Owns: one JSON file under `--root-dir` (`checkpoints/api-pods.json`): the node name and
//! the pods of the last API snapshot in *checkpoint form* — without `resourceVersion` and
//! without status, except a terminal phase (a finished pod must not run again) — so that
//! status updates and watch resyncs do not rewrite it. Written only when that form
//! changes, atomically (a temporary file, fsync, rename, fsync of the directory), mode
//! 0600 (pods carry environment values).
//!
//! The API source delivers the checkpoint as its first snapshot when the apiserver cannot
//! be reached at start: a node restarted during an outage keeps running its pods — no
//! kill, no restart — and reconciles when the apiserver returns.
//!
//! Must never: write at idle (an SD card wears out), or hand over pods of another node
//! (a checkpoint written under another node name is ignored).

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::api::{Pod, PodStatus};

/// File name under `<root-dir>/checkpoints/`.
pub(crate) const FILE_NAME: &str = "api-pods.json";

#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("checkpoint {}: cannot read: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("checkpoint {}: cannot parse (ignored): {source}", path.display())]
    Parse {
        path: PathBuf,
        #[source]
        source: crate::api::JsonError,
    },
    #[error("checkpoint {}: cannot write: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("checkpoint: cannot encode: {0}")]
    Encode(#[source] serde_json::Error),
}

/// What is written. The pods go through `serde_json::to_value` (as everywhere else), so
/// `Pod`'s `Serialize` code is in the binary once.
#[derive(Debug, Serialize)]
struct File {
    version: u32,
    node: String,
    pods: Vec<serde_json::Value>,
}

/// What is read back: the pods as JSON, each decoded by `api::decode_pod` (one decoder of
/// `Pod` in the binary).
#[derive(Debug, Deserialize)]
struct FileIn {
    node: String,
    pods: Vec<serde_json::Value>,
}

/// The checkpoint file of one node.
#[derive(Debug)]
pub struct Checkpoint {
    path: PathBuf,
    node_name: String,
    /// The bytes on disk, once known: a store of the same bytes is skipped.
    on_disk: Option<Vec<u8>>,
}

impl Checkpoint {
    /// The checkpoint under `root_dir` for `node_name`.
    pub fn new(root_dir: &Path, node_name: &str) -> Self {
        Checkpoint {
            path: root_dir.join("checkpoints").join(FILE_NAME),
            node_name: node_name.to_string(),
            on_disk: None,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The pods of the checkpoint; `Ok(None)` when there is none (or it belongs to
    /// another node name).
    pub fn load(&mut self) -> Result<Option<Vec<Pod>>, CheckpointError> {
        let bytes = match fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(CheckpointError::Read {
                    path: self.path.clone(),
                    source,
                });
            }
        };
        let file: FileIn =
            crate::api::from_json_slice(&bytes).map_err(|source| CheckpointError::Parse {
                path: self.path.clone(),
                source,
            })?;
        self.on_disk = Some(bytes);
        if file.node != self.node_name {
            log::warn!(
                "checkpoint {}: written for node {:?}, this is {:?}: ignored",
                self.path.display(),
                file.node,
                self.node_name
            );
            return Ok(None);
        }
        let mut pods = Vec::with_capacity(file.pods.len());
        for v in &file.pods {
            match crate::api::decode_pod(v) {
                Ok(p) => pods.push(p),
                Err(e) => log::warn!(
                    "checkpoint {}: a pod does not decode ({e}); skipped",
                    self.path.display()
                ),
            }
        }
        Ok(Some(pods))
    }

    /// The bytes `pods` (in checkpoint form) encode to, if they differ from the file.
    fn encode(&self, pods: &[Arc<Pod>]) -> Result<Option<Vec<u8>>, CheckpointError> {
        let file = File {
            version: 1,
            node: self.node_name.clone(),
            pods: pods
                .iter()
                .map(|p| serde_json::to_value(checkpoint_form(p)))
                .collect::<Result<_, _>>()
                .map_err(CheckpointError::Encode)?,
        };
        let bytes = serde_json::to_vec(&file).map_err(CheckpointError::Encode)?;
        Ok((self.on_disk.as_ref() != Some(&bytes)).then_some(bytes))
    }

    /// Stores `pods` (in checkpoint form) if that differs from the file; returns whether
    /// it wrote. Blocks on the write and its fsyncs.
    pub fn store(&mut self, pods: &[Arc<Pod>]) -> Result<bool, CheckpointError> {
        let Some(bytes) = self.encode(pods)? else {
            return Ok(false);
        };
        write_atomic(&self.path, &bytes).map_err(|source| CheckpointError::Write {
            path: self.path.clone(),
            source,
        })?;
        self.on_disk = Some(bytes);
        Ok(true)
    }

    /// [`Checkpoint::store`] with the write and its fsyncs (hundreds of milliseconds on an
    /// SD card) on tokio's blocking pool, so the calling thread — the agent's one thread —
    /// goes on meanwhile.
    pub async fn store_off_thread(&mut self, pods: &[Arc<Pod>]) -> Result<bool, CheckpointError> {
        let Some(bytes) = self.encode(pods)? else {
            return Ok(false);
        };
        let path = self.path.clone();
        let written =
            tokio::task::spawn_blocking(move || write_atomic(&path, &bytes).map(|()| bytes))
                .await
                .unwrap_or_else(|join| Err(std::io::Error::other(join.to_string())));
        match written {
            Ok(bytes) => {
                self.on_disk = Some(bytes);
                Ok(true)
            }
            Err(source) => Err(CheckpointError::Write {
                path: self.path.clone(),
                source,
            }),
        }
    }
}

/// A pod as checkpointed: no resourceVersion, no status except a terminal phase.
pub(crate) fn checkpoint_form(pod: &Pod) -> Pod {
    let mut p = pod.clone();
    p.metadata.resource_version.clear();
    // The API object as the apiserver sent it: the source's own annotation is added again
    // when the checkpoint is read.
    p.metadata
        .annotations
        .remove(crate::api::ANNOTATION_CONFIG_SOURCE);
    p.status = pod
        .status
        .as_ref()
        .and_then(|s| s.phase)
        .filter(|ph| ph.is_terminal())
        .map(|ph| PodStatus {
            phase: Some(ph),
            ..PodStatus::default()
        });
    p
}

/// Written whole (a temporary file, fsync, rename, directory fsync), mode 0600 in a 0700
/// directory: for the object manager's checkpoint, the certificate store and the node
/// API's credentials too.
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomic(path, bytes)
}

fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    // The whole name plus `.tmp`: two files of one stem (`x.pem`, `x.key`) never share one.
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    // The rename itself is durable only once the directory is synced.
    fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::api::PodPhase;

    fn pod(name: &str, rv: &str, phase: Option<PodPhase>) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = name.into();
        p.metadata.namespace = "default".into();
        p.metadata.uid = format!("uid-{name}");
        p.metadata.resource_version = rv.into();
        p.status = phase.map(|ph| PodStatus {
            phase: Some(ph),
            pod_ip: Some("10.0.0.1".into()),
            ..PodStatus::default()
        });
        p
    }

    #[tokio::test]
    async fn store_off_thread_writes_the_same_file_only_on_change() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Checkpoint::new(dir.path(), "pi-1");
        let pods = [Arc::new(pod("a", "1", None))];
        assert!(c.store_off_thread(&pods).await.unwrap());
        assert!(!c.store_off_thread(&pods).await.unwrap());
        assert!(
            !c.store(&pods).unwrap(),
            "the same bytes as the blocking path"
        );
        let mut again = Checkpoint::new(dir.path(), "pi-1");
        assert_eq!(again.load().unwrap().map(|p| p.len()), Some(1));
    }

    #[test]
    fn round_trip_written_only_on_change_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Checkpoint::new(dir.path(), "pi-1");
        assert!(c.load().unwrap().is_none());
        assert!(
            c.store(&[Arc::new(pod("a", "1", Some(PodPhase::Running)))])
                .unwrap()
        );
        let mode = fs::metadata(c.path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let dir_mode = fs::metadata(c.path().parent().unwrap())
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(dir_mode, 0o700);
        // A new resourceVersion or a new non-terminal status is not a change.
        assert!(
            !c.store(&[Arc::new(pod("a", "7", Some(PodPhase::Pending)))])
                .unwrap()
        );
        assert!(!c.store(&[Arc::new(pod("a", "8", None))]).unwrap());
        // A terminal phase is.
        assert!(
            c.store(&[Arc::new(pod("a", "9", Some(PodPhase::Succeeded)))])
                .unwrap()
        );
        assert!(c.store(&[]).unwrap());
        assert!(c.store(&[Arc::new(pod("b", "1", None))]).unwrap());

        // A fresh instance reads it back, and does not rewrite the same content.
        let mut again = Checkpoint::new(dir.path(), "pi-1");
        let pods = again.load().unwrap().unwrap();
        assert_eq!(pods.len(), 1);
        assert_eq!(pods[0].metadata.name, "b");
        assert!(pods[0].metadata.resource_version.is_empty());
        assert!(!again.store(&[Arc::new(pod("b", "5", None))]).unwrap());
        assert!(!dir.path().join("checkpoints/api-pods.json.tmp").exists());
    }

    #[test]
    fn other_node_or_garbage_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Checkpoint::new(dir.path(), "pi-1");
        c.store(&[Arc::new(pod("a", "1", None))]).unwrap();
        let mut other = Checkpoint::new(dir.path(), "pi-2");
        assert!(other.load().unwrap().is_none());
        fs::write(c.path(), b"{garbage").unwrap();
        let mut c = Checkpoint::new(dir.path(), "pi-1");
        let err = c.load().unwrap_err();
        assert!(matches!(err, CheckpointError::Parse { .. }), "{err}");
        // A value of the wrong type: the file and the field are named.
        fs::write(c.path(), br#"{"node": "pi-1", "pods": {}}"#).unwrap();
        let err = c.load().unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "checkpoint {}: cannot parse (ignored): pods: invalid type: map, expected a sequence",
                c.path().display()
            )
        );
        // And a store replaces it.
        assert!(c.store(&[]).unwrap());
        assert_eq!(c.load().unwrap(), Some(vec![]));
    }

    #[test]
    fn terminal_phase_survives_the_checkpoint_form() {
        let p = checkpoint_form(&pod("a", "3", Some(PodPhase::Failed)));
        assert_eq!(
            p.status,
            Some(PodStatus {
                phase: Some(PodPhase::Failed),
                ..PodStatus::default()
            })
        );
        assert!(
            checkpoint_form(&pod("a", "3", Some(PodPhase::Running)))
                .status
                .is_none()
        );
    }
}
