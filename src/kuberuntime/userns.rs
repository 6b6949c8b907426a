//! User namespaces for pods (`hostUsers: false`; kubelet: `userns/userns_manager.go`).
//!
//! Each such pod gets 65536 IDs of its own: pod IDs 0–65535 are host IDs `slot × 65536`…,
//! the same for users and groups, slot 1 and up (the host's own 0–65535 are never given).
//! The range is chosen once and kept in the pod's directory, `pods/<uid>/userns`, in the
//! kubelet's JSON (`uidMappings`/`gidMappings` of `hostId`, `containerId`, `length`): a
//! restarted container, a new sandbox and a restarted picolet find the same range, and it is
//! free again when the pod's directory is removed. Which slots are taken is read from those
//! files when a pod needs one (rare: at its first sandbox), so there is no second record to
//! disagree with the disk. All allocation runs on the pod workers' one thread with no await
//! between the scan and the write: two pods never get the same slot.
//!
//! picolet: the kubelet's range is configurable (`getsubids` of the `kubelet` user,
//! `userNamespaces.idsPerPod`); picolet's is fixed at the kubelet's defaults (first ID
//! 65536, 65536 per pod, up to 2³² − 65536).

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::api;
use crate::cri::{CriError, IdMapping};
use crate::volume::mounts;

/// kubelet: the default `idsPerPod`.
pub(crate) const IDS_PER_POD: u32 = 65_536;
/// The highest slot: its range ends at 2³² − 1.
const MAX_SLOT: u32 = u32::MAX / IDS_PER_POD;
/// The file in a pod's directory (kubelet: `userns` under the pod's directory).
pub(crate) const FILE: &str = "userns";

/// Why a pod cannot have its user namespace (the text is the sandbox failure's message).
#[derive(Debug)]
pub(crate) enum UsernsError {
    /// The runtime reports handlers, but not this one with user-namespace support.
    HandlerUnsupported { handler: String },
    /// The runtime reports no runtime handler features at all (containerd 1.x).
    NoHandlerFeatures { handler: String },
    /// The runtime's `Status` failed: its support cannot be told.
    RuntimeStatus(CriError),
    /// The kubelet's file does not hold one range picolet reads (what is wrong with it).
    Malformed(String),
    /// The pod's file could not be read or written.
    Io {
        uid: String,
        path: PathBuf,
        source: std::io::Error,
    },
    /// The pod's file is there but not readable as a range.
    BadFile {
        uid: String,
        path: PathBuf,
        reason: String,
    },
    /// Every range is taken.
    NoRangeLeft { uid: String },
}

impl std::fmt::Display for UsernsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UsernsError::HandlerUnsupported { handler } => write!(
                f,
                "RuntimeClass handler {handler:?} does not support user namespaces (containerd >= 2.0 with runc >= 1.2 or crun >= 1.9, CRI-O >= 1.25, and a kernel with idmapped mounts, >= 6.3 for tmpfs)"
            ),
            UsernsError::NoHandlerFeatures { handler } => write!(
                f,
                "RuntimeClass handler {handler:?} does not support user namespaces: the runtime reports no runtime handler features (containerd 1.x); hostUsers: false needs containerd >= 2.0 with runc >= 1.2 or crun >= 1.9, or CRI-O >= 1.25"
            ),
            UsernsError::RuntimeStatus(e) => write!(
                f,
                "cannot tell whether the runtime supports user namespaces: {e}"
            ),
            UsernsError::Malformed(reason) => f.write_str(reason),
            UsernsError::Io { uid, path, source } => write!(
                f,
                "user namespace of pod {uid}: {}: {source}",
                path.display()
            ),
            UsernsError::BadFile { uid, path, reason } => write!(
                f,
                "user namespace of pod {uid}: {}: {reason}",
                path.display()
            ),
            UsernsError::NoRangeLeft { uid } => write!(
                f,
                "no user namespace range left for pod {uid}: all {MAX_SLOT} ranges of {IDS_PER_POD} IDs are taken"
            ),
        }
    }
}

impl std::error::Error for UsernsError {}

/// Whether the pod asks for a user namespace of its own.
pub(crate) fn wanted(pod: &api::Pod) -> bool {
    pod.spec.host_users == Some(false)
}

/// kubelet: `runtimeHandlerSupportsUserNamespaces` — the pod's handler ("" = the runtime's
/// default) must report the feature in `Status`; a runtime that reports no handlers
/// (containerd 1.x) cannot give pods user namespaces (it would run the pod in the host's).
pub(crate) fn runtime_supports(
    handlers: Option<&[String]>,
    handler: &str,
) -> Result<(), UsernsError> {
    match handlers {
        Some(hs) if hs.iter().any(|h| h == handler) => Ok(()),
        Some(_) => Err(UsernsError::HandlerUnsupported {
            handler: handler.to_string(),
        }),
        None => Err(UsernsError::NoHandlerFeatures {
            handler: handler.to_string(),
        }),
    }
}

/// The lowest slot no range in `used` (host IDs) starts at.
pub(crate) fn free_slot(used: &[u32]) -> Option<u32> {
    (1..=MAX_SLOT).find(|slot| !used.contains(&(slot * IDS_PER_POD)))
}

/// The kubelet's file: `{"uidMappings":[{"hostId":…,"containerId":0,"length":…}],"gidMappings":[…]}`.
pub(crate) fn encode(m: IdMapping) -> String {
    let one = format!(
        "[{{\"hostId\":{},\"containerId\":0,\"length\":{}}}]",
        m.host_id, m.length
    );
    format!("{{\"uidMappings\":{one},\"gidMappings\":{one}}}")
}

/// Reads the kubelet's file: one mapping from container ID 0, the same for users and groups,
/// of `IDS_PER_POD` IDs at a multiple of it (what picolet and the kubelet's defaults write).
/// A small reader of its own (binary size): the three numbers of each list, in any order and
/// spacing, and nothing more than one mapping per list.
pub(crate) fn decode(text: &str) -> Result<IdMapping, UsernsError> {
    use UsernsError::Malformed;
    let list = |key: &str| -> Result<[u32; 3], UsernsError> {
        let quoted = format!("\"{key}\"");
        let start = text
            .find(&quoted)
            .ok_or_else(|| Malformed(format!("no {key}")))?
            + quoted.len();
        let rest = &text[start..];
        let body = rest
            .split_once('[')
            .and_then(|(_, b)| b.split_once(']'))
            .map(|(b, _)| b)
            .ok_or_else(|| Malformed(format!("{key}: not a list")))?;
        if body.matches('{').count() != 1 {
            return Err(Malformed(format!(
                "{key}: {} mappings, picolet reads one",
                body.matches('{').count()
            )));
        }
        let mut out = [0u32; 3];
        for (i, field) in ["hostId", "containerId", "length"].iter().enumerate() {
            let quoted = format!("\"{field}\"");
            out[i] = body
                .find(&quoted)
                .map(|at| &body[at + quoted.len()..])
                .and_then(|v| v.trim_start().strip_prefix(':'))
                .map(|v| {
                    let v = v.trim_start();
                    &v[..v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len())]
                })
                .and_then(|digits| digits.parse().ok())
                .ok_or_else(|| {
                    Malformed(format!("{key}: {field} missing or not a 32-bit number"))
                })?;
        }
        Ok(out)
    };
    let (uids, gids) = (list("uidMappings")?, list("gidMappings")?);
    if uids != gids {
        return Err(Malformed("uidMappings and gidMappings differ".into()));
    }
    let [host_id, container_id, length] = uids;
    if container_id != 0 {
        return Err(Malformed("containerId is not 0".into()));
    }
    if length != IDS_PER_POD || host_id % IDS_PER_POD != 0 || host_id == 0 {
        return Err(Malformed(format!(
            "range {host_id}+{length} is not one of {IDS_PER_POD} IDs from a multiple of it above 0"
        )));
    }
    Ok(IdMapping { host_id, length })
}

fn path_of(root_dir: &Path, uid: &str) -> PathBuf {
    mounts::pod_dir(root_dir, uid).join(FILE)
}

/// The pod's range: the one on disk, else the lowest free one, written to disk first.
/// Errors name the pod and the file.
pub(crate) fn allocate(root_dir: &Path, uid: &str) -> Result<IdMapping, UsernsError> {
    let path = path_of(root_dir, uid);
    let io = |source| UsernsError::Io {
        uid: uid.to_string(),
        path: path.clone(),
        source,
    };
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            return decode(&text).map_err(|e| match e {
                UsernsError::Malformed(reason) => UsernsError::BadFile {
                    uid: uid.to_string(),
                    path: path.clone(),
                    reason,
                },
                e => e,
            });
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(e)),
    }
    let used = used_ranges(root_dir);
    let slot = free_slot(&used).ok_or_else(|| UsernsError::NoRangeLeft {
        uid: uid.to_string(),
    })?;
    let m = IdMapping {
        host_id: slot * IDS_PER_POD,
        length: IDS_PER_POD,
    };
    let dir = mounts::pod_dir(root_dir, uid);
    let tmp = dir.join(".userns.tmp");
    let write = || -> std::io::Result<()> {
        std::fs::create_dir_all(&dir)?;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(encode(m).as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        std::fs::File::open(&dir)?.sync_all()
    };
    write().map_err(io)?;
    Ok(m)
}

/// The ranges the pods' files hold (unreadable ones are skipped: their pods keep what they
/// have, and a new pod may not get a slot only a broken file names — said at that pod's
/// sync, which fails on it).
fn used_ranges(root_dir: &Path) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir(root_dir.join("pods")) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join(FILE)).ok())
        .filter_map(|text| decode(&text).ok())
        .map(|m| m.host_id)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_the_lowest_free_above_the_hosts_own() {
        assert_eq!(free_slot(&[]), Some(1));
        assert_eq!(free_slot(&[65_536]), Some(2));
        assert_eq!(free_slot(&[131_072]), Some(1));
        assert_eq!(free_slot(&[65_536, 196_608]), Some(2));
        let all: Vec<u32> = (1..=MAX_SLOT).map(|s| s * IDS_PER_POD).collect();
        assert_eq!(free_slot(&all), None);
        // The last slot's range ends at 2^32 - 1.
        assert_eq!(
            u64::from(MAX_SLOT) * u64::from(IDS_PER_POD) + u64::from(IDS_PER_POD),
            1 << 32
        );
    }

    #[test]
    fn the_kubelets_file_round_trips_and_odd_ones_are_named() {
        let m = IdMapping {
            host_id: 131_072,
            length: IDS_PER_POD,
        };
        assert_eq!(
            encode(m),
            r#"{"uidMappings":[{"hostId":131072,"containerId":0,"length":65536}],"gidMappings":[{"hostId":131072,"containerId":0,"length":65536}]}"#
        );
        assert_eq!(decode(&encode(m)).unwrap(), m);
        for (text, why) in [
            ("{", "no uidMappings"),
            ("{}", "no uidMappings"),
            (r#"{"uidMappings":[],"gidMappings":[]}"#, "0 mappings"),
            (
                r#"{"uidMappings":[{"hostId":65536,"containerId":0,"length":65536}],"gidMappings":[{"hostId":131072,"containerId":0,"length":65536}]}"#,
                "differ",
            ),
            (
                r#"{"uidMappings":[{"hostId":0,"containerId":0,"length":65536}],"gidMappings":[{"hostId":0,"containerId":0,"length":65536}]}"#,
                "above 0",
            ),
            (
                r#"{"uidMappings":[{"hostId":65536,"containerId":1,"length":65536}],"gidMappings":[{"hostId":65536,"containerId":1,"length":65536}]}"#,
                "containerId is not 0",
            ),
        ] {
            let e = decode(text).unwrap_err().to_string();
            assert!(e.contains(why), "{text}: {e}");
        }
    }

    #[test]
    fn allocation_is_kept_on_disk_and_freed_with_the_pod_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let a = allocate(root, "uid-a").unwrap();
        let b = allocate(root, "uid-b").unwrap();
        assert_eq!((a.host_id, b.host_id), (65_536, 131_072));
        // Asked again (a new sandbox, a restarted picolet): the same range.
        assert_eq!(allocate(root, "uid-a").unwrap(), a);
        assert_eq!(
            std::fs::read_to_string(root.join("pods/uid-a/userns")).unwrap(),
            encode(a)
        );
        // The pod's directory removed: its range is free for the next pod.
        std::fs::remove_dir_all(root.join("pods/uid-a")).unwrap();
        assert_eq!(allocate(root, "uid-c").unwrap().host_id, 65_536);
        // A broken file is named, not replaced by another range.
        std::fs::write(root.join("pods/uid-b/userns"), "{").unwrap();
        let e = allocate(root, "uid-b").unwrap_err().to_string();
        assert!(e.contains("pods/uid-b/userns"), "{e}");
    }

    #[test]
    fn runtime_support_follows_the_handlers_it_reports() {
        let hs = vec![String::new(), "edge".to_string()];
        assert!(runtime_supports(Some(&hs), "").is_ok());
        assert!(runtime_supports(Some(&hs), "edge").is_ok());
        let e = runtime_supports(Some(&hs), "kata").unwrap_err().to_string();
        assert!(
            e.starts_with("RuntimeClass handler \"kata\" does not support user namespaces"),
            "{e}"
        );
        let e = runtime_supports(None, "").unwrap_err().to_string();
        assert!(e.contains("containerd 1.x"), "{e}");
        assert!(runtime_supports(Some(&[]), "").is_err());
    }
}
