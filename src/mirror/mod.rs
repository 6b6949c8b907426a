//! The image mirror: a read-only OCI distribution endpoint (`/v2/`) on loopback, backed by
//! a directory of image archives, which the runtime uses as a mirror of every registry
//! (containerd's `hosts.toml`, CRI-O's `registries.conf`). CRI has no call to import an
//! image; the runtime pulls what picolet serves, so an air-gapped node runs images dropped
//! into a directory (k3s imports tarballs into containerd instead; picolet stays a CRI
//! client).
//!
//! Owns: the directory's index ([`Index`]: each archive read once, in a blocking thread,
//! and again only when its size or mtime changes; a change seen by inotify is served
//! within a second), and the server ([`server`]).
//!
//! Rules: an archive that cannot be read is one log line naming it and what is wrong, and
//! serves nothing (again when it changes); two archives naming the same tag: the newer one
//! (mtime) serves it, said once in the log; content by digest comes from any archive. No
//! archive is held in memory: manifests (small) are, blobs are read from the archive at the
//! offset the index keeps.
//!
//! Must never: write into the directory or to the runtime; accept a request from anywhere
//! but loopback unless told (`--image-mirror-address`).

pub(crate) mod archive;
mod gzip;
pub(crate) mod server;
mod tar;

use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, SystemTime};

use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use archive::{Archive, Loc, Manifest};

/// How long after a change event the directory is read again (several events of one copy
/// make one rescan).
const DEBOUNCE: Duration = Duration::from_millis(200);

#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    #[error("image mirror: cannot listen on {addr}: {source}")]
    Listen {
        addr: String,
        source: std::io::Error,
    },
    #[error("image mirror: bad address {0:?} (want host:port, e.g. 127.0.0.1:10261)")]
    Address(String),
}

/// `index.docker.io` and friends are Docker Hub (`docker.io`).
pub(crate) fn registry_alias(host: &str) -> &str {
    match host {
        "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com" => "docker.io",
        h => h,
    }
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, bytes);
    d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// One archive of the directory as last read.
#[derive(Clone)]
struct Entry {
    path: PathBuf,
    /// Size and mtime when read: a change reads it again.
    stamp: (u64, SystemTime),
    /// `None`: it could not be read (logged once).
    archive: Option<Rc<Archive>>,
}

/// A blob found: where to read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BlobAt {
    pub path: PathBuf,
    pub gzip: bool,
    pub loc: Loc,
}

/// The directory's archives, newest first.
#[derive(Default)]
pub(crate) struct Index {
    entries: Vec<Entry>,
}

impl Index {
    /// The manifest a tag names: `name` is `registry/repository:tag`, normalised.
    pub(crate) fn tag(&self, name: &str) -> Option<&Manifest> {
        self.archives().find_map(|a| {
            let (_, d) = a.tags.iter().find(|(t, _)| t == name)?;
            a.manifests.iter().find(|m| &m.digest == d)
        })
    }

    /// Whether any archive has a tag in `registry/repository`.
    pub(crate) fn has_repository(&self, repo: &str) -> bool {
        self.archives().any(|a| {
            a.tags
                .iter()
                .any(|(t, _)| t.rsplit_once(':').is_some_and(|(r, _)| r == repo))
        })
    }

    /// The registries whose repositories the archives hold (for a request without `ns`).
    pub(crate) fn knows_registry(&self, registry: &str) -> bool {
        let prefix = format!("{registry}/");
        self.archives()
            .any(|a| a.tags.iter().any(|(t, _)| t.starts_with(&prefix)))
    }

    pub(crate) fn manifest(&self, digest: &str) -> Option<&Manifest> {
        self.archives()
            .find_map(|a| a.manifests.iter().find(|m| m.digest == digest))
    }

    pub(crate) fn blob(&self, digest: &str) -> Option<BlobAt> {
        self.entries.iter().find_map(|e| {
            let a = e.archive.as_ref()?;
            let i = a
                .blobs
                .binary_search_by(|(d, _)| d.as_str().cmp(digest))
                .ok()?;
            Some(BlobAt {
                path: e.path.clone(),
                gzip: a.gzip,
                loc: a.blobs[i].1,
            })
        })
    }

    /// Every tag served, with the archive serving it (for `picolet check` and the log).
    pub(crate) fn tags(&self) -> Vec<(String, PathBuf)> {
        let mut out: Vec<(String, PathBuf)> = Vec::new();
        for e in &self.entries {
            for (t, _) in e.archive.iter().flat_map(|a| a.tags.iter()) {
                if !out.iter().any(|(x, _)| x == t) {
                    out.push((t.clone(), e.path.clone()));
                }
            }
        }
        out
    }

    fn archives(&self) -> impl Iterator<Item = &Archive> {
        self.entries.iter().filter_map(|e| e.archive.as_deref())
    }

    /// Puts the archives of a rescan in place: one log line per archive gone, one per tag
    /// two archives name (when that changed).
    fn install(&mut self, mut next: Vec<Entry>) {
        for gone in &self.entries {
            if gone.archive.is_some() && !next.iter().any(|e| e.path == gone.path) {
                log::info!("image mirror: {}: gone", gone.path.display());
            }
        }
        // Newest first: the newer archive serves a tag both name.
        crate::sort::sort_by_key(&mut next, |e| std::cmp::Reverse(e.stamp.1));
        let before = self.conflicts();
        self.entries = next;
        for (tag, winner, others) in self.conflicts() {
            if !before.iter().any(|(t, w, _)| *t == tag && *w == winner) {
                log::warn!(
                    "image mirror: {tag} is in {} and {}: the newer, {}, serves it",
                    winner.display(),
                    others
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                    winner.display()
                );
            }
        }
    }

    /// Tags more than one archive names: (tag, the archive serving it, the others).
    fn conflicts(&self) -> Vec<(String, PathBuf, Vec<PathBuf>)> {
        let mut out: Vec<(String, PathBuf, Vec<PathBuf>)> = Vec::new();
        for e in &self.entries {
            for (t, _) in e.archive.iter().flat_map(|a| a.tags.iter()) {
                match out.iter_mut().find(|(x, _, _)| x == t) {
                    Some((_, _, others)) => others.push(e.path.clone()),
                    None => out.push((t.clone(), e.path.clone(), Vec::new())),
                }
            }
        }
        out.retain(|(_, _, others)| !others.is_empty());
        out
    }
}

/// Reads `dir` again: archives new or changed since the last pass are read (in a blocking
/// thread, the index serving meanwhile as it was), gone ones dropped; one log line per
/// archive read or refused. Returns how many archives were read.
pub(crate) async fn rescan(index: &std::cell::RefCell<Index>, dir: &Path) -> usize {
    let mut next: Vec<Entry> = Vec::new();
    let mut to_read = Vec::new();
    {
        let idx = index.borrow();
        for (path, stamp) in list(dir) {
            match idx
                .entries
                .iter()
                .find(|e| e.path == path && e.stamp == stamp)
            {
                Some(e) => next.push(e.clone()),
                None => to_read.push((path, stamp)),
            }
        }
    }
    let read_count = to_read.len();
    for (path, stamp) in to_read {
        let p = path.clone();
        let read = tokio::task::spawn_blocking(move || archive::read(&p))
            .await
            .unwrap_or_else(|e| Err(archive::ArchiveError::Task(e)));
        let archive = match read {
            Ok(a) => {
                let tags: Vec<&str> = a.tags.iter().map(|(t, _)| t.as_str()).collect();
                log::info!(
                    "image mirror: {}: {} ({} manifest(s), {} blob(s){})",
                    path.display(),
                    if tags.is_empty() {
                        "no tag".to_string()
                    } else {
                        tags.join(", ")
                    },
                    a.manifests.len(),
                    a.blobs.len(),
                    if a.notes.is_empty() {
                        String::new()
                    } else {
                        format!("; {}", a.notes.join("; "))
                    }
                );
                Some(Rc::new(a))
            }
            Err(e) => {
                log::warn!("image mirror: {}: not served: {e}", path.display());
                None
            }
        };
        next.push(Entry {
            path,
            stamp,
            archive,
        });
    }
    index.borrow_mut().install(next);
    read_count
}

/// The directory's candidate archives with their size and mtime: regular files, not hidden
/// (`.name`), not a copy in progress by its name (`*.tmp`, `*.part`, `*~`).
fn list(dir: &Path) -> Vec<(PathBuf, (u64, SystemTime))> {
    let mut out = Vec::new();
    let entries = match crate::dir_listing::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return out,
        Err(e) => {
            log::warn!("image mirror: {}: {e}", dir.display());
            return out;
        }
    };
    for e in entries {
        let name = e.file_name();
        let Some(n) = name.to_str() else { continue };
        if n.starts_with('.') || n.ends_with(".tmp") || n.ends_with(".part") || n.ends_with('~') {
            continue;
        }
        let path = dir.join(n);
        let Ok(md) = std::fs::metadata(&path) else {
            continue;
        };
        if md.is_file() {
            out.push((
                path,
                (md.len(), md.modified().unwrap_or(SystemTime::UNIX_EPOCH)),
            ));
        }
    }
    out
}

/// Watches `dir` and keeps `index` current until `shutdown`. A directory that does not
/// exist yet is looked for again every 10 s (it may be made later, or be on a mount).
/// `after_read` runs after a pass that read an archive: the daemon gives the heap back
/// there (glibc keeps the blocking thread's arena: +300 KiB for 20 archives otherwise).
pub(crate) async fn keep_current(
    dir: PathBuf,
    index: Rc<std::cell::RefCell<Index>>,
    shutdown: CancellationToken,
    after_read: fn(),
) {
    let (tx, mut rx) = mpsc::channel::<()>(1);
    let mut watcher: Option<RecommendedWatcher> = None;
    loop {
        if watcher.is_none() {
            watcher = watch(&dir, tx.clone());
        }
        if rescan(&index, &dir).await > 0 {
            after_read();
        }
        let wait = if watcher.is_some() {
            Duration::from_secs(3600)
        } else {
            Duration::from_secs(10)
        };
        tokio::select! {
            _ = shutdown.cancelled() => return,
            got = rx.recv() => if got.is_none() { return },
            () = tokio::time::sleep(wait) => {}
        }
        tokio::time::sleep(DEBOUNCE).await;
        while rx.try_recv().is_ok() {}
    }
}

fn watch(dir: &Path, tx: mpsc::Sender<()>) -> Option<RecommendedWatcher> {
    use notify::event::{AccessKind, AccessMode};
    let mut w = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        let matters = match res {
            Ok(ev) => match ev.kind {
                EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
                // A copy in progress: wait for its close.
                EventKind::Access(_) | EventKind::Create(_) => false,
                EventKind::Modify(notify::event::ModifyKind::Data(_)) => false,
                _ => true,
            },
            Err(_) => true,
        };
        if matters {
            let _ = tx.try_send(());
        }
    })
    .ok()?;
    w.watch(dir, RecursiveMode::NonRecursive).ok()?;
    Some(w)
}

#[cfg(test)]
mod tests;

/// Why the runtime does not pull through the mirror: what to add to its configuration, and
/// where (for `picolet check`).
#[derive(Debug)]
pub enum MirrorConfigError {
    /// CRI-O: no `registries.conf` (or drop-in) names the mirror; the drop-in to write.
    CrioNoMirror { drop_in: PathBuf, addr: String },
    /// containerd 1.x without the CRI plugin's registry `config_path`: its `config.toml`.
    ContainerdNoConfigPath { config: PathBuf },
    /// containerd reads `hosts.toml` files, but none names the mirror; the first directory.
    ContainerdNoHost { certs_dir: String, addr: String },
}

impl std::fmt::Display for MirrorConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MirrorConfigError::CrioNoMirror { drop_in, addr } => write!(
                f,
                "CRI-O does not use it: add {} with, per registry (docker.io, registry.k8s.io, \
                 quay.io, ghcr.io, ...): [[registry]] prefix = \"docker.io\" location = \
                 \"docker.io\" [[registry.mirror]] location = \"{addr}/docker.io\" insecure = \
                 true (packaging/runtime/crio-registries.conf)",
                drop_in.display()
            ),
            MirrorConfigError::ContainerdNoConfigPath { config } => write!(
                f,
                "containerd reads no hosts.toml: add to {}: [plugins.\"io.containerd.grpc.v1.\
                 cri\".registry] config_path = \"/etc/containerd/certs.d\", restart containerd, \
                 and see the next line",
                config.display()
            ),
            MirrorConfigError::ContainerdNoHost { certs_dir, addr } => write!(
                f,
                "containerd does not use it: write {certs_dir}/_default/hosts.toml: [host.\"http://{addr}\"] \
                 capabilities = [\"pull\", \"resolve\"] (packaging/runtime/containerd-hosts.toml)"
            ),
        }
    }
}

impl std::error::Error for MirrorConfigError {}

/// Whether the runtime pulls through the mirror at `addr`, read from its configuration under
/// `etc` (`/etc`): `Ok(how)`, or `Err(what to add, and where)` for `picolet check`.
/// `runtime` and `version` are the CRI `Version` answer's (`containerd` `1.6.20`, `v2.4.2`;
/// `cri-o` `1.36.3`).
pub fn runtime_uses_mirror(
    runtime: &str,
    version: &str,
    addr: &str,
    etc: &Path,
) -> Result<String, MirrorConfigError> {
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    let uncommented = |text: &str| -> String {
        text.lines()
            .map(|l| l.split('#').next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n")
    };
    if runtime.contains("cri-o") || runtime.contains("crio") {
        // CRI-O: registries.conf and its drop-ins, a mirror location on the address.
        let mut files = vec![etc.join("containers/registries.conf")];
        if let Ok(d) = crate::dir_listing::read_dir(&etc.join("containers/registries.conf.d")) {
            let mut more: Vec<PathBuf> = d
                .into_iter()
                .map(|e| etc.join("containers/registries.conf.d").join(e.file_name()))
                .collect();
            crate::sort::sort_by_key(&mut more, |p| p.clone());
            files.extend(more);
        }
        let want = format!("\"{addr}/");
        return match files.iter().find(|p| uncommented(&read(p)).contains(&want)) {
            Some(p) => Ok(format!("CRI-O pulls through it ({})", p.display())),
            None => Err(MirrorConfigError::CrioNoMirror {
                drop_in: etc.join("containers/registries.conf.d/50-picolet-mirror.conf"),
                addr: addr.to_string(),
            }),
        };
    }
    // containerd: the CRI plugin's registry config_path, then `_default/hosts.toml` there.
    let config = etc.join("containerd/config.toml");
    let text = uncommented(&read(&config));
    let two = version.trim_start_matches('v').starts_with('2');
    let paths: Vec<String> = match text
        .lines()
        .find_map(|l| l.trim().strip_prefix("config_path"))
        .and_then(|rest| rest.split('"').nth(1))
    {
        Some(p) if !p.is_empty() => p.split(':').map(str::to_string).collect(),
        // containerd 2.x reads these when its config names none; 1.6/1.7 none at all.
        _ if two => vec![
            etc.join("containerd/certs.d").display().to_string(),
            etc.join("docker/certs.d").display().to_string(),
        ],
        _ => {
            return Err(MirrorConfigError::ContainerdNoConfigPath { config });
        }
    };
    let want = format!("\"http://{addr}\"");
    for dir in &paths {
        let hosts = Path::new(dir).join("_default/hosts.toml");
        if uncommented(&read(&hosts)).contains(&want) {
            return Ok(format!("containerd pulls through it ({})", hosts.display()));
        }
    }
    Err(MirrorConfigError::ContainerdNoHost {
        certs_dir: paths
            .first()
            .map_or("/etc/containerd/certs.d", String::as_str)
            .to_string(),
        addr: addr.to_string(),
    })
}
