//! The atomic writer of configMap, secret, downwardAPI and projected volumes (kubelet:
//! `pkg/volume/util/atomic_writer.go`).
//!
//! A volume directory holds:
//! - `..<stamp>/`: one directory per written version, with the files;
//! - `..data -> ..<stamp>`: the current version, swapped by `rename(2)` of a new symlink;
//! - `<top> -> ..data/<top>`: one symlink per top-level name of the payload.
//!
//! A reader (the container) therefore never sees half an update: each path resolves through
//! `..data`, which names a complete version. A write that is interrupted (picolet killed,
//! power lost) before the swap leaves the old version visible; the stray directory is removed
//! by the next write.
//!
//! Must never: write outside `dir`, follow a payload path out of it (paths are checked), or
//! rewrite a version whose content and modes are unchanged (nothing is written when nothing
//! changed: an SD card is not worn by resyncs).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Component, Path, PathBuf};

/// One file of a payload.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct FileProjection {
    pub data: Vec<u8>,
    pub mode: u32,
}

impl std::fmt::Debug for FileProjection {
    // The bytes may be a secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "FileProjection({} bytes, {:o})",
            self.data.len(),
            self.mode
        )
    }
}

/// Relative path → file.
pub(crate) type Payload = BTreeMap<String, FileProjection>;

#[derive(Debug, thiserror::Error)]
pub(crate) enum WriteError {
    #[error("invalid path {path:?} in the volume: {why}")]
    Path { path: String, why: &'static str },
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn io_err(op: &'static str, path: &Path) -> impl FnOnce(io::Error) -> WriteError {
    move |source| WriteError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

const DATA_DIR: &str = "..data";
const DATA_TMP: &str = "..data_tmp";

/// kubelet: `SetVolumeOwnership` for a read-only volume — with an fsGroup, files get that
/// group and `g+r` (`u+r` too), directories `g+rx` and set-gid.
fn effective_mode(mode: u32, fs_group: Option<u32>) -> u32 {
    match fs_group {
        Some(_) => (mode & 0o777) | 0o440,
        None => mode & 0o777,
    }
}

fn check_path(p: &str) -> Result<(), WriteError> {
    let bad = |why| {
        Err(WriteError::Path {
            path: p.to_string(),
            why,
        })
    };
    if p.is_empty() {
        return bad("empty");
    }
    if p.starts_with("..") {
        return bad("starts with '..'");
    }
    for c in Path::new(p).components() {
        match c {
            Component::Normal(_) => {}
            Component::RootDir => return bad("absolute"),
            _ => return bad("contains '.' or '..'"),
        }
    }
    Ok(())
}

fn top_level(p: &str) -> &str {
    p.split('/').next().unwrap_or(p)
}

/// Writes `payload` into `dir` (which must exist), unless the current version already holds
/// exactly it. `stamp` names the new version (e.g. `2026_12_01_19_30_00.000000001`; the
/// caller passes the wall clock). Returns whether a new version was written.
pub(crate) fn write(
    dir: &Path,
    payload: &Payload,
    stamp: &str,
    fs_group: Option<u32>,
) -> Result<bool, WriteError> {
    for p in payload.keys() {
        check_path(p)?;
    }
    let current = fs::read_link(dir.join(DATA_DIR))
        .ok()
        .and_then(|t| t.to_str().map(str::to_string))
        .filter(|t| t.starts_with("..") && !t.contains('/'));
    if let Some(cur) = &current
        && same_content(&dir.join(cur), payload, fs_group)
    {
        // The version is right; repair a missing user-visible link (cheap, rare).
        link_top_level(dir, payload)?;
        return Ok(false);
    }

    // 1. The new version, complete, next to the old one.
    let mut name = format!("..{stamp}");
    let mut n = 0;
    while dir.join(&name).exists() || Some(&name) == current.as_ref() {
        n += 1;
        name = format!("..{stamp}.{n}");
    }
    let version = dir.join(&name);
    fs::create_dir(&version).map_err(io_err("create", &version))?;
    set_dir_mode(&version, fs_group)?;
    for (p, file) in payload {
        let path = version.join(p);
        if let Some(parent) = path.parent()
            && parent != version
        {
            create_dirs(&version, parent, fs_group)?;
        }
        fs::write(&path, &file.data).map_err(io_err("write", &path))?;
        if let Some(gid) = fs_group {
            std::os::unix::fs::lchown(&path, None, Some(gid)).map_err(io_err("chown", &path))?;
        }
        fs::set_permissions(
            &path,
            fs::Permissions::from_mode(effective_mode(file.mode, fs_group)),
        )
        .map_err(io_err("chmod", &path))?;
    }

    // 2. The swap: a new symlink renamed over `..data` (atomic).
    let tmp = dir.join(DATA_TMP);
    let _ = fs::remove_file(&tmp);
    symlink(&name, &tmp).map_err(io_err("symlink", &tmp))?;
    let data = dir.join(DATA_DIR);
    fs::rename(&tmp, &data).map_err(io_err("rename", &data))?;

    // 3. User-visible names: new ones linked, old ones removed.
    link_top_level(dir, payload)?;
    let wanted: BTreeSet<&str> = crate::sort::collect_set(payload.keys().map(|p| top_level(p)));
    let entries = fs::read_dir(dir).map_err(io_err("read", dir))?;
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(n) = file_name.to_str() else {
            continue;
        };
        let path = entry.path();
        if n.starts_with("..") {
            // Old versions, and strays of an interrupted write.
            if n != name && n != DATA_DIR && entry.file_type().is_ok_and(|t| t.is_dir()) {
                fs::remove_dir_all(&path).map_err(io_err("remove", &path))?;
            }
            continue;
        }
        let ours = fs::read_link(&path).is_ok_and(|t| t.starts_with(DATA_DIR));
        if ours && !wanted.contains(n) {
            fs::remove_file(&path).map_err(io_err("remove", &path))?;
        }
    }
    Ok(true)
}

fn link_top_level(dir: &Path, payload: &Payload) -> Result<(), WriteError> {
    let tops: BTreeSet<&str> = crate::sort::collect_set(payload.keys().map(|p| top_level(p)));
    for top in tops {
        let link = dir.join(top);
        if fs::symlink_metadata(&link).is_ok() {
            continue;
        }
        symlink(Path::new(DATA_DIR).join(top), &link).map_err(io_err("symlink", &link))?;
    }
    Ok(())
}

fn set_dir_mode(dir: &Path, fs_group: Option<u32>) -> Result<(), WriteError> {
    let mode = match fs_group {
        Some(gid) => {
            std::os::unix::fs::lchown(dir, None, Some(gid)).map_err(io_err("chown", dir))?;
            0o2755
        }
        None => 0o755,
    };
    fs::set_permissions(dir, fs::Permissions::from_mode(mode)).map_err(io_err("chmod", dir))
}

fn create_dirs(version: &Path, parent: &Path, fs_group: Option<u32>) -> Result<(), WriteError> {
    let Ok(rel) = parent.strip_prefix(version) else {
        return Ok(());
    };
    let mut at = version.to_path_buf();
    for c in rel.components() {
        at.push(c);
        if !at.is_dir() {
            fs::create_dir(&at).map_err(io_err("create", &at))?;
            set_dir_mode(&at, fs_group)?;
        }
    }
    Ok(())
}

/// The version directory holds exactly the payload's files, bytes and modes (and group).
fn same_content(version: &Path, payload: &Payload, fs_group: Option<u32>) -> bool {
    let mut found = BTreeSet::new();
    if !collect_files(version, version, &mut found) || found.len() != payload.len() {
        return false;
    }
    payload.iter().all(|(p, file)| {
        let path = version.join(p);
        let Ok(meta) = fs::symlink_metadata(&path) else {
            return false;
        };
        meta.is_file()
            && meta.mode() & 0o777 == effective_mode(file.mode, fs_group)
            && fs_group.is_none_or(|g| meta.gid() == g)
            && meta.len() == file.data.len() as u64
            && fs::read(&path).is_ok_and(|d| d == file.data)
    })
}

fn collect_files(root: &Path, dir: &Path, out: &mut BTreeSet<PathBuf>) -> bool {
    let Ok(entries) = fs::read_dir(dir) else {
        return false;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() => {
                if !collect_files(root, &path, out) {
                    return false;
                }
            }
            Ok(_) => {
                if let Ok(rel) = path.strip_prefix(root) {
                    out.insert(rel.to_path_buf());
                }
            }
            Err(_) => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(files: &[(&str, &str, u32)]) -> Payload {
        files
            .iter()
            .map(|(p, d, m)| {
                (
                    p.to_string(),
                    FileProjection {
                        data: d.as_bytes().to_vec(),
                        mode: *m,
                    },
                )
            })
            .collect()
    }

    fn read(dir: &Path, p: &str) -> String {
        fs::read_to_string(dir.join(p)).unwrap()
    }

    fn mode(dir: &Path, p: &str) -> u32 {
        fs::metadata(dir.join(p)).unwrap().mode() & 0o7777
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| !n.starts_with("..") || n == DATA_DIR)
            .collect();
        crate::sort::sort(&mut v);
        v
    }

    fn versions(dir: &Path) -> usize {
        fs::read_dir(dir)
            .unwrap()
            .filter(|e| {
                let e = e.as_ref().unwrap();
                let n = e.file_name().into_string().unwrap();
                n.starts_with("..") && n != DATA_DIR && e.file_type().unwrap().is_dir()
            })
            .count()
    }

    #[test]
    fn writes_links_and_swaps_versions() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let p1 = payload(&[("app.conf", "a=1\n", 0o644), ("sub/x.txt", "x", 0o400)]);
        assert!(write(dir, &p1, "2026_01_01_00_00_00.000000001", None).unwrap());
        assert_eq!(read(dir, "app.conf"), "a=1\n");
        assert_eq!(read(dir, "sub/x.txt"), "x");
        assert_eq!(mode(dir, "app.conf"), 0o644);
        assert_eq!(mode(dir, "sub/x.txt"), 0o400);
        assert_eq!(names(dir), ["..data", "app.conf", "sub"]);
        assert_eq!(
            fs::read_link(dir.join("app.conf")).unwrap(),
            Path::new("..data/app.conf")
        );

        // The same payload again: nothing written.
        assert!(!write(dir, &p1, "2026_01_01_00_00_01.000000000", None).unwrap());
        assert_eq!(versions(dir), 1);

        // A changed value, a removed key, a new key; a changed mode alone is a change too.
        let p2 = payload(&[("app.conf", "a=2\n", 0o644), ("new", "n", 0o644)]);
        assert!(write(dir, &p2, "2026_01_01_00_00_02.000000000", None).unwrap());
        assert_eq!(read(dir, "app.conf"), "a=2\n");
        assert_eq!(names(dir), ["..data", "app.conf", "new"]);
        assert_eq!(versions(dir), 1);
        let p3 = payload(&[("app.conf", "a=2\n", 0o600), ("new", "n", 0o644)]);
        assert!(write(dir, &p3, "2026_01_01_00_00_03.000000000", None).unwrap());
        assert_eq!(mode(dir, "app.conf"), 0o600);

        // An empty payload (an optional object that is missing) leaves an empty volume.
        assert!(write(dir, &Payload::new(), "2026_01_01_00_00_04.000000000", None).unwrap());
        assert_eq!(names(dir), ["..data"]);
    }

    #[test]
    fn an_interrupted_write_leaves_the_old_version_visible_and_is_cleaned_up() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let p1 = payload(&[("k", "old", 0o644)]);
        write(dir, &p1, "2026_01_01_00_00_00.0", None).unwrap();
        // A writer killed after creating its version, before the swap.
        let stray = dir.join("..2026_01_01_00_00_01.0");
        fs::create_dir(&stray).unwrap();
        fs::write(stray.join("k"), "half").unwrap();
        fs::write(dir.join(DATA_TMP), "").unwrap();
        assert_eq!(read(dir, "k"), "old");
        // The next write completes and removes the stray.
        let p2 = payload(&[("k", "new", 0o644)]);
        assert!(write(dir, &p2, "2026_01_01_00_00_02.0", None).unwrap());
        assert_eq!(read(dir, "k"), "new");
        assert_eq!(versions(dir), 1);
        assert!(!dir.join(DATA_TMP).exists());
    }

    #[test]
    fn fs_group_owns_the_files_and_adds_group_read() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        // Our own gid: chown to it works without root.
        let gid = fs::metadata(dir).unwrap().gid();
        let p = payload(&[("tls.key", "k", 0o400), ("d/c", "c", 0o600)]);
        write(dir, &p, "s1", Some(gid)).unwrap();
        assert_eq!(mode(dir, "tls.key"), 0o440);
        assert_eq!(mode(dir, "d/c"), 0o640);
        assert_eq!(fs::metadata(dir.join("tls.key")).unwrap().gid(), gid);
        assert_eq!(mode(dir, "d") & 0o2000, 0o2000);
        assert!(!write(dir, &p, "s2", Some(gid)).unwrap());
    }

    #[test]
    fn paths_cannot_leave_the_volume() {
        let tmp = tempfile::tempdir().unwrap();
        for bad in ["../x", "/etc/passwd", "a/../../x", "..data", "./a", ""] {
            let p = payload(&[(bad, "x", 0o644)]);
            assert!(
                matches!(
                    write(tmp.path(), &p, "s", None),
                    Err(WriteError::Path { .. })
                ),
                "{bad}"
            );
        }
    }
}
