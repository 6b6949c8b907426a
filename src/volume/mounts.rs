//! Host-side preparation of a container's mounts (kubelet: `makeMounts`, the hostPath
//! type checks of `volume/hostpath`, `emptyDir` setup, `subPath` handling, the
//! termination-log file).
//!
//! Owns: the directories picolet creates under `<root_dir>/pods/<uid>/` and the checks on
//! host paths before a container is created. Volumes are `hostPath`, `emptyDir` and the
//! data volumes `data_volumes.rs` writes (configMap, secret, downwardAPI, projected; mounted
//! read-only); anything else fails the container with `CreateContainerConfigError`.
//!
//! Must never: mount anything itself but the tmpfs of a `Memory` emptyDir (through
//! [`Tmpfs`], the one mount boundary; the runtime bind-mounts the rest), touch paths outside the
//! pod directory except the hostPaths the manifest names, or follow a `subPath` out of its
//! volume. Filesystem calls are synchronous `std::fs` on purpose: they are local metadata
//! operations, and blocking-pool threads would let paused-time tests auto-advance.

use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use crate::api;
use crate::cri::{Mount, MountPropagation};

#[derive(Debug, thiserror::Error)]
pub enum MountError {
    #[error("volumeMount {mount:?}: no volume named {volume:?} in the pod")]
    VolumeNotFound { mount: String, volume: String },
    #[error(
        "volume {volume:?}: {kind} volumes are not supported by picolet (hostPath, emptyDir only)"
    )]
    UnsupportedVolume { volume: String, kind: String },
    #[error("hostPath {path}: unknown type {type_:?}")]
    UnknownHostPathType { path: PathBuf, type_: String },
    #[error("hostPath type check failed: {path} is not a {expected}")]
    HostPathType {
        path: PathBuf,
        expected: &'static str,
    },
    #[error("hostPath type check failed: {path} does not exist (type {expected})")]
    HostPathMissing {
        path: PathBuf,
        expected: &'static str,
    },
    #[error("volumeMount {mount:?}: subPath {sub_path:?} {reason}")]
    SubPath {
        mount: String,
        sub_path: String,
        reason: &'static str,
    },
    #[error("volumeMount {mount:?}: mountPropagation {value:?} {reason}")]
    Propagation {
        mount: String,
        value: String,
        reason: &'static str,
    },
    #[error("volume {volume:?}: its image is not pulled yet")]
    ImageNotPulled { volume: String },
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

pub(crate) fn io_err(op: &'static str, path: &Path) -> impl FnOnce(io::Error) -> MountError {
    move |source| MountError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

/// The one mount picolet makes itself: a tmpfs for `emptyDir.medium: Memory` (kubelet:
/// `emptydir` with `StorageMediumMemory`), so what a pod keeps there never reaches the SD
/// card. A trait because mounting needs root: tests use [`FakeTmpfs`].
pub(crate) trait Tmpfs: Send + Sync {
    /// Mounts a tmpfs of `size` bytes (None: the kernel's default, half the RAM) on `dir`,
    /// its root directory of `access`.
    fn mount(&self, dir: &Path, size: Option<u64>, access: TmpfsAccess) -> io::Result<()>;
    /// Lazily unmounts `dir` (`MNT_DETACH`).
    fn unmount(&self, dir: &Path) -> io::Result<()>;
}

/// Who may use a tmpfs's root directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TmpfsAccess {
    /// `1777`: an emptyDir any container user writes to (kubelet: emptyDir is 0777).
    Shared,
    /// A Secret's or projected volume's: `0755` root-owned, or `2750` owned by the pod's
    /// `fsGroup` when it has one. Never writable by others; the host's other users are kept
    /// out by the 0750 pod directories above it (see [`make_pod_data_dirs`]).
    Private { fs_group: Option<u32> },
}

impl TmpfsAccess {
    /// The tmpfs mount options for this access (`mode=`, `gid=`).
    pub(crate) fn options(self) -> String {
        match self {
            TmpfsAccess::Shared => "mode=1777".to_string(),
            TmpfsAccess::Private { fs_group: None } => "mode=0755".to_string(),
            TmpfsAccess::Private { fs_group: Some(g) } => format!("mode=2750,gid={g}"),
        }
    }
}

/// The tmpfs mount's data: the access, the size, `noswap`.
pub(crate) fn tmpfs_data(access: TmpfsAccess, size: Option<u64>, noswap: bool) -> String {
    let mut data = access.options();
    if let Some(bytes) = size {
        data += &format!(",size={bytes}");
    }
    if noswap {
        data += ",noswap";
    }
    data
}

/// `mount(2)` and `umount2(2)`.
#[derive(Default)]
pub(crate) struct SysTmpfs {
    /// Mount with `noswap` (kernel ≥ 6.4), so memory-backed volumes (Secrets, `Memory`
    /// emptyDirs) never reach a swap device (kubelet: `IsTmpfsNoswapOptionSupported`, asked
    /// when the node has swap).
    pub noswap: bool,
}

impl Tmpfs for SysTmpfs {
    fn mount(&self, dir: &Path, size: Option<u64>, access: TmpfsAccess) -> io::Result<()> {
        use nix::mount::{MsFlags, mount};
        let data = tmpfs_data(access, size, self.noswap);
        mount(
            Some("tmpfs"),
            dir,
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some(data.as_str()),
        )
        .map_err(io::Error::from)
    }

    fn unmount(&self, dir: &Path) -> io::Result<()> {
        nix::mount::umount2(dir, nix::mount::MntFlags::MNT_DETACH).map_err(io::Error::from)
    }
}

/// Records mounts instead of making them (the directory stays a plain one).
#[cfg(test)]
#[derive(Default)]
pub(crate) struct FakeTmpfs {
    pub mounted: std::sync::Mutex<Vec<(PathBuf, Option<u64>)>>,
    /// The access of each mount, in the same order.
    pub access: std::sync::Mutex<Vec<TmpfsAccess>>,
}

#[cfg(test)]
impl Tmpfs for FakeTmpfs {
    fn mount(&self, dir: &Path, size: Option<u64>, access: TmpfsAccess) -> io::Result<()> {
        self.mounted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((dir.to_path_buf(), size));
        self.access
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(access);
        Ok(())
    }

    fn unmount(&self, dir: &Path) -> io::Result<()> {
        self.mounted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|(d, _)| d != dir);
        Ok(())
    }
}

/// `dir` is a mount point: its device differs from its parent's.
pub(crate) fn is_mount_point(dir: &Path) -> bool {
    match (fs::metadata(dir), dir.parent().map(fs::metadata)) {
        (Ok(d), Some(Ok(p))) => d.dev() != p.dev(),
        _ => false,
    }
}

/// Before a pod directory is removed: unmount every `Memory` emptyDir, secret and projected
/// volume still mounted in it
/// (a removal would empty the tmpfs and then fail on the busy mount point).
pub(crate) fn unmount_pod_volumes(
    root_dir: &Path,
    uid: &str,
    tmpfs: &dyn Tmpfs,
) -> Result<(), MountError> {
    let volumes = pod_dir(root_dir, uid).join("volumes");
    let plugins = ["kubernetes.io~empty-dir"]
        .into_iter()
        .chain(TMPFS_PLUGIN_DIRS);
    for plugin in plugins {
        let Ok(entries) = fs::read_dir(volumes.join(plugin)) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if is_mount_point(&path) {
                tmpfs.unmount(&path).map_err(io_err("unmount", &path))?;
            }
        }
    }
    Ok(())
}

/// kubelet: `calculateEmptyDirMemorySize` — the node's memory, lowered to the pod's memory
/// limit when every container has one, and to `sizeLimit` when set.
pub(crate) fn memory_medium_size(
    pod: &api::Pod,
    size_limit: Option<&api::Quantity>,
    memory_capacity: u64,
) -> Option<u64> {
    let mut size = (memory_capacity > 0).then_some(memory_capacity);
    let limits: Option<u64> = pod
        .spec
        .containers
        .iter()
        .map(|c| {
            c.resources
                .as_ref()
                .and_then(|r| r.limits.get("memory"))
                .and_then(|q| q.scaled(0))
                .and_then(|v| u64::try_from(v).ok())
        })
        .sum();
    if let Some(l) = limits.filter(|l| *l > 0) {
        size = Some(size.map_or(l, |s| s.min(l)));
    }
    if let Some(l) = size_limit
        .and_then(|q| q.scaled(0))
        .and_then(|v| u64::try_from(v).ok())
        .filter(|l| *l > 0)
    {
        size = Some(size.map_or(l, |s| s.min(l)));
    }
    size
}

/// `<root_dir>/pods/<uid>` (kubelet: `getPodDir`): everything picolet writes for a pod.
pub(crate) fn pod_dir(root_dir: &Path, uid: &str) -> PathBuf {
    root_dir.join("pods").join(uid)
}
/// The plugin directory of a data volume and whether it is a tmpfs; `None` for other kinds.
pub(crate) fn plugin_dir(volume: &api::Volume) -> Option<(&'static str, bool)> {
    if volume.config_map.is_some() {
        Some(("kubernetes.io~configmap", false))
    } else if volume.secret.is_some() {
        Some(("kubernetes.io~secret", true))
    } else if volume.downward_api.is_some() {
        Some(("kubernetes.io~downward-api", false))
    } else if volume.projected.is_some() {
        Some(("kubernetes.io~projected", true))
    } else {
        None
    }
}

/// The plugin directories that may hold tmpfs mounts (unmounted before a pod directory is
/// removed).
pub(crate) const TMPFS_PLUGIN_DIRS: [&str; 2] = ["kubernetes.io~secret", "kubernetes.io~projected"];

/// `<root>/pods/<uid>/volumes/<plugin>/<name>` of a data volume.
pub(crate) fn volume_dir(root_dir: &Path, uid: &str, volume: &api::Volume) -> Option<PathBuf> {
    let (plugin, _) = plugin_dir(volume)?;
    Some(
        pod_dir(root_dir, uid)
            .join("volumes")
            .join(plugin)
            .join(&volume.name),
    )
}

/// `<root_dir>/pods/<uid>/volumes/kubernetes.io~empty-dir/<name>`.
pub(crate) fn empty_dir_path(root_dir: &Path, uid: &str, volume: &str) -> PathBuf {
    pod_dir(root_dir, uid)
        .join("volumes")
        .join("kubernetes.io~empty-dir")
        .join(volume)
}

/// The mode of picolet's own directories: the root directory, `pods/`, each pod's
/// directory and its `volumes/` and `plugins/` (kubelet: `setupDataDirs`, `makePodDataDirs`).
/// With them, no other user of the host reaches a pod's volumes: a Secret's files are read
/// by the containers (through their bind mounts) and root only.
pub(crate) const DATA_DIR_MODE: u32 = 0o750;

/// kubelet: `setupDataDirs` — `<root_dir>` and `<root_dir>/pods`, 0750. Deliberate
/// difference: an existing directory that group can write or others can enter (an earlier
/// picolet made them 0755, or a caller's umask did) loses those bits, with one INFO line;
/// the kubelet leaves an existing directory as it finds it.
pub(crate) fn setup_data_dirs(root_dir: &Path) -> Result<(), MountError> {
    private_dir(root_dir)?;
    private_dir(&root_dir.join("pods"))
}

fn private_dir(dir: &Path) -> Result<(), MountError> {
    match fs::metadata(dir) {
        Ok(meta) => {
            let mode = meta.mode() & 0o7777;
            if mode & 0o027 != 0 {
                let tight = mode & !0o027;
                fs::set_permissions(dir, fs::Permissions::from_mode(tight))
                    .map_err(io_err("chmod", dir))?;
                log::info!(
                    "{}: mode {mode:o} → {tight:o}: no other user may enter picolet's directories",
                    dir.display()
                );
            }
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => create_private(dir),
        Err(e) => Err(io_err("stat", dir)(e)),
    }
}

/// Creates `dir` DATA_DIR_MODE whatever the umask, and its missing parents 0755 (a parent
/// such as `/var/lib` on a fresh OpenWrt serves other daemons too).
fn create_private(dir: &Path) -> Result<(), MountError> {
    use std::os::unix::fs::DirBuilderExt;
    if let Some(parent) = dir.parent() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(parent)
            .map_err(io_err("create directory", parent))?;
    }
    fs::DirBuilder::new()
        .mode(DATA_DIR_MODE)
        .create(dir)
        .or_else(|e| match e.kind() {
            io::ErrorKind::AlreadyExists if dir.is_dir() => Ok(()),
            _ => Err(e),
        })
        .map_err(io_err("create directory", dir))?;
    fs::set_permissions(dir, fs::Permissions::from_mode(DATA_DIR_MODE))
        .map_err(io_err("chmod", dir))
}

/// kubelet: `makePodDataDirs` — `pods/<uid>`, `volumes/` and `plugins/` in it, 0750, made
/// before the pod's volumes (every sync; a stat when they exist).
pub(crate) fn make_pod_data_dirs(root_dir: &Path, uid: &str) -> Result<(), MountError> {
    let pod = pod_dir(root_dir, uid);
    for dir in [pod.join("volumes"), pod.join("plugins")] {
        if !dir.is_dir() {
            create_private(&pod)?;
            create_private(&dir)?;
        }
    }
    Ok(())
}

/// Create `dir` (and parents) if missing, then set `mode` on it (not on the parents),
/// whatever the umask.
pub(crate) fn ensure_dir(dir: &Path, mode: u32) -> Result<(), MountError> {
    if !dir.is_dir() {
        fs::create_dir_all(dir).map_err(io_err("create directory", dir))?;
        fs::set_permissions(dir, fs::Permissions::from_mode(mode)).map_err(io_err("chmod", dir))?;
    }
    Ok(())
}

/// The mounts for one container's `volumeMounts`, with their host side prepared.
/// `images`: the image volumes' pulled images, by volume name (see [`image_volumes`]).
pub(crate) fn prepare_mounts(
    root_dir: &Path,
    pod: &api::Pod,
    container: &api::Container,
    envs: &[(String, String)],
    images: &[(String, String)],
    tmpfs: &dyn Tmpfs,
    memory_capacity: u64,
) -> Result<Vec<Mount>, MountError> {
    let privileged = container
        .security_context
        .as_ref()
        .and_then(|sc| sc.privileged)
        .unwrap_or(false);
    let mut out = Vec::with_capacity(container.volume_mounts.len());
    for vm in &container.volume_mounts {
        let Some(volume) = pod.spec.volumes.iter().find(|v| v.name == vm.name) else {
            return Err(MountError::VolumeNotFound {
                mount: vm.mount_path.clone(),
                volume: vm.name.clone(),
            });
        };
        // kubelet: subPathExpr expands `$(VAR)` with the container's environment (a
        // reference to an unknown variable stays as written), then is checked like subPath.
        let expanded = vm
            .sub_path_expr
            .as_deref()
            .filter(|s| !s.is_empty())
            .map(|expr| {
                crate::fieldpath::expand(expr, |name| {
                    envs.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
                })
            });
        let sub = match (vm.sub_path.as_deref().filter(|s| !s.is_empty()), &expanded) {
            (Some(_), Some(_)) => {
                return Err(MountError::SubPath {
                    mount: vm.mount_path.clone(),
                    sub_path: vm.sub_path.clone().unwrap_or_default(),
                    reason: "and subPathExpr are mutually exclusive",
                });
            }
            (Some(s), None) => Some(s.to_string()),
            (None, e) => e.clone(),
        };
        let sub = sub.filter(|s| !s.is_empty());
        if volume.image.is_some() {
            // kubelet: an image volume is the runtime's to mount (CRI Mount.image, its
            // subPath as image_sub_path, resolved by the runtime inside the image), always
            // read-only.
            let image = images
                .iter()
                .find(|(name, _)| *name == volume.name)
                .map(|(_, image)| image.clone())
                .ok_or_else(|| MountError::ImageNotPulled {
                    volume: volume.name.clone(),
                })?;
            if let Some(sub) = &sub {
                check_sub_path(sub, &vm.mount_path)?;
            }
            out.push(Mount {
                container_path: vm.mount_path.clone(),
                host_path: String::new(),
                readonly: true,
                propagation: propagation(vm, privileged)?,
                image,
                image_reference: volume
                    .image
                    .as_ref()
                    .map(|i| i.reference.clone())
                    .unwrap_or_default(),
                image_sub_path: sub.unwrap_or_default(),
            });
            continue;
        }
        // configMap, secret, downwardAPI, projected: set up by `data_volumes` before the
        // containers start, always read-only (kubelet: their mounters report ReadOnly).
        let data_dir = volume_dir(root_dir, &pod.metadata.uid, volume);
        let is_data = data_dir.is_some();
        let base = match data_dir {
            Some(dir) => dir,
            None => volume_host_path(root_dir, pod, volume, tmpfs, memory_capacity)?,
        };
        let host_path = match sub {
            // A key of a data volume: the file of the current version (as upstream, such a
            // mount does not see later updates).
            Some(sub) if is_data => data_sub_path(&base, &sub, &vm.mount_path)?,
            Some(sub) => sub_path(&base, &sub, &vm.mount_path)?,
            None => base,
        };
        out.push(Mount {
            container_path: vm.mount_path.clone(),
            host_path: host_path.to_string_lossy().into_owned(),
            // kubelet: a csi volume with readOnly mounts read-only (its attributes).
            readonly: vm.read_only
                || is_data
                || volume
                    .csi
                    .as_ref()
                    .is_some_and(|c| c.read_only == Some(true)),
            propagation: propagation(vm, privileged)?,
            ..Default::default()
        });
    }
    Ok(out)
}

/// The image volumes a container mounts, each once: `(volume name, reference, pull policy)`
/// (kubelet: `getImageVolumes`, for the volumes this container's `volumeMounts` name).
pub(crate) fn image_volumes<'a>(
    pod: &'a api::Pod,
    container: &api::Container,
) -> Vec<(&'a str, &'a str, api::PullPolicy)> {
    let mut out: Vec<(&str, &str, api::PullPolicy)> = Vec::new();
    for v in &pod.spec.volumes {
        let Some(iv) = &v.image else { continue };
        if container.volume_mounts.iter().any(|m| m.name == v.name) {
            let policy = iv
                .pull_policy
                .unwrap_or_else(|| api::default_pull_policy(&iv.reference));
            out.push((&v.name, &iv.reference, policy));
        }
    }
    out
}

/// The host directory/file backing a volume, created or checked as its type says.
fn volume_host_path(
    root_dir: &Path,
    pod: &api::Pod,
    volume: &api::Volume,
    tmpfs: &dyn Tmpfs,
    memory_capacity: u64,
) -> Result<PathBuf, MountError> {
    if let Some(hp) = &volume.host_path {
        let path = PathBuf::from(&hp.path);
        check_host_path(&path, hp.type_.as_deref().unwrap_or(""))?;
        return Ok(path);
    }
    if volume.csi.is_some() {
        // Published by its driver before the containers start (`csi::publish_pod_volumes`).
        return Ok(crate::volume::csi::target_path(
            root_dir,
            &pod.metadata.uid,
            &volume.name,
        ));
    }
    if let Some(ed) = &volume.empty_dir {
        let dir = empty_dir_path(root_dir, &pod.metadata.uid, &volume.name);
        let fs_group = pod
            .spec
            .security_context
            .as_ref()
            .and_then(|sc| sc.fs_group)
            .and_then(|g| u32::try_from(g).ok());
        let new = !dir.is_dir();
        // kubelet: emptyDir is world-writable so non-root containers can use it
        ensure_dir(&dir, 0o777)?;
        match ed.medium.as_deref().unwrap_or("") {
            "" if new => empty_dir_ownership(&dir, fs_group)?,
            "" => {}
            // Mounted once per pod: a restarted container (or picolet) finds it mounted.
            "Memory" if !is_mount_point(&dir) => {
                let size = memory_medium_size(pod, ed.size_limit.as_ref(), memory_capacity);
                tmpfs
                    .mount(&dir, size, TmpfsAccess::Shared)
                    .map_err(io_err("mount tmpfs on", &dir))?;
                empty_dir_ownership(&dir, fs_group)?;
                log::info!(
                    "pod {}: emptyDir {:?} is a tmpfs of {}",
                    pod.full_name(),
                    volume.name,
                    size.map_or("the kernel's default size".to_string(), |s| format!(
                        "{s} bytes"
                    ))
                );
            }
            "Memory" => {}
            other => {
                return Err(MountError::UnsupportedVolume {
                    volume: volume.name.clone(),
                    kind: format!("emptyDir medium {other:?}"),
                });
            }
        }
        return Ok(dir);
    }
    Err(MountError::UnsupportedVolume {
        volume: volume.name.clone(),
        kind: volume
            .other
            .keys()
            .next()
            .cloned()
            .unwrap_or_else(|| "untyped".into()),
    })
}

/// kubelet: `SetVolumeOwnership` of a new emptyDir (set up once, empty): with the pod's
/// `fsGroup`, the directory's group becomes it and its mode gains `g+rwx` and setgid, so
/// what containers create in it belongs to the group (a tmpfs' `1777` becomes `3777`).
fn empty_dir_ownership(dir: &Path, fs_group: Option<u32>) -> Result<(), MountError> {
    let Some(gid) = fs_group else {
        return Ok(());
    };
    std::os::unix::fs::lchown(dir, None, Some(gid)).map_err(io_err("chown", dir))?;
    let mode = fs::metadata(dir)
        .map_err(io_err("stat", dir))?
        .permissions()
        .mode();
    fs::set_permissions(dir, fs::Permissions::from_mode((mode & 0o7777) | 0o2770))
        .map_err(io_err("chmod", dir))
}

/// kubelet: hostPath `type` checks. `""` checks nothing (the runtime creates a missing
/// directory); `DirectoryOrCreate` creates 0755; `FileOrCreate` creates an empty 0644 file
/// (not its parent, as upstream); the others must exist with that type.
pub(crate) fn check_host_path(path: &Path, type_: &str) -> Result<(), MountError> {
    if type_.is_empty() {
        return Ok(());
    }
    let meta = match fs::metadata(path) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_err("stat", path)(e)),
    };
    let wrong = |expected| MountError::HostPathType {
        path: path.to_path_buf(),
        expected,
    };
    let exists_as = |expected: &'static str, ok: fn(&fs::Metadata) -> bool| match &meta {
        Some(m) if ok(m) => Ok(()),
        Some(_) => Err(wrong(expected)),
        None => Err(MountError::HostPathMissing {
            path: path.to_path_buf(),
            expected,
        }),
    };
    match type_ {
        "DirectoryOrCreate" => match &meta {
            Some(m) if m.is_dir() => Ok(()),
            Some(_) => Err(wrong("directory")),
            None => {
                fs::create_dir_all(path).map_err(io_err("create directory", path))?;
                fs::set_permissions(path, fs::Permissions::from_mode(0o755))
                    .map_err(io_err("chmod", path))
            }
        },
        "Directory" => exists_as("directory", |m| m.is_dir()),
        "FileOrCreate" => match &meta {
            Some(m) if m.is_file() => Ok(()),
            Some(_) => Err(wrong("file")),
            None => {
                fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(path)
                    .map_err(io_err("create file", path))?;
                fs::set_permissions(path, fs::Permissions::from_mode(0o644))
                    .map_err(io_err("chmod", path))
            }
        },
        "File" => exists_as("file", |m| m.is_file()),
        "Socket" => exists_as("socket", |m| m.file_type().is_socket()),
        "CharDevice" => exists_as("character device", |m| m.file_type().is_char_device()),
        "BlockDevice" => exists_as("block device", |m| m.file_type().is_block_device()),
        other => Err(MountError::UnknownHostPathType {
            path: path.to_path_buf(),
            type_: other.into(),
        }),
    }
}

/// `<volume>/<subPath>`: relative, no `..`, created as a directory with the volume's mode
/// when missing, and still inside the volume once symlinks are resolved.
fn sub_path_error(sub: &str, mount: &str) -> impl Fn(&'static str) -> MountError {
    move |reason| MountError::SubPath {
        mount: mount.into(),
        sub_path: sub.into(),
        reason,
    }
}

/// A subPath is relative and has no `..`.
fn check_sub_path(sub: &str, mount: &str) -> Result<(), MountError> {
    let err = sub_path_error(sub, mount);
    let rel = Path::new(sub);
    if rel.is_absolute() {
        return Err(err("must be a relative path"));
    }
    if rel.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(err("must not contain '..'"));
    }
    Ok(())
}

fn sub_path(base: &Path, sub: &str, mount: &str) -> Result<PathBuf, MountError> {
    let err = sub_path_error(sub, mount);
    check_sub_path(sub, mount)?;
    let full = base.join(sub);
    if fs::symlink_metadata(&full).is_err() {
        let mode = fs::metadata(base)
            .map(|m| m.permissions().mode() & 0o7777)
            .unwrap_or(0o755);
        fs::create_dir_all(&full).map_err(io_err("create subPath", &full))?;
        fs::set_permissions(&full, fs::Permissions::from_mode(mode))
            .map_err(io_err("chmod", &full))?;
    }
    let real_base = fs::canonicalize(base).map_err(io_err("resolve", base))?;
    let real = fs::canonicalize(&full).map_err(io_err("resolve", &full))?;
    if !real.starts_with(&real_base) {
        return Err(err("resolves outside its volume"));
    }
    Ok(full)
}

/// `subPath` into a configMap/secret/downwardAPI/projected volume: it must exist (nothing is
/// created in a volume picolet writes), and resolves to the file in the current version.
fn data_sub_path(base: &Path, sub: &str, mount: &str) -> Result<PathBuf, MountError> {
    let err = sub_path_error(sub, mount);
    check_sub_path(sub, mount)?;
    let real_base = fs::canonicalize(base).map_err(io_err("resolve", base))?;
    let full = base.join(sub);
    let real = fs::canonicalize(&full).map_err(|_| err("does not exist in the volume"))?;
    if !real.starts_with(&real_base) {
        return Err(err("resolves outside its volume"));
    }
    Ok(real)
}

fn propagation(vm: &api::VolumeMount, privileged: bool) -> Result<MountPropagation, MountError> {
    match vm.mount_propagation.as_deref() {
        None | Some("") | Some("None") => Ok(MountPropagation::Private),
        Some("HostToContainer") => Ok(MountPropagation::HostToContainer),
        Some("Bidirectional") if privileged => Ok(MountPropagation::Bidirectional),
        Some(v @ "Bidirectional") => Err(MountError::Propagation {
            mount: vm.mount_path.clone(),
            value: v.into(),
            reason: "is only available to privileged containers",
        }),
        Some(v) => Err(MountError::Propagation {
            mount: vm.mount_path.clone(),
            value: v.into(),
            reason: "is not a known mode",
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    fn pod(volumes: Vec<api::Volume>) -> api::Pod {
        let mut p = api::Pod::default();
        p.metadata.name = "p".into();
        p.metadata.namespace = "default".into();
        p.metadata.uid = "uid-1".into();
        p.spec.volumes = volumes;
        p
    }

    fn host_path_vol(name: &str, path: &Path, t: Option<&str>) -> api::Volume {
        api::Volume {
            name: name.into(),
            host_path: Some(api::HostPathVolumeSource {
                path: path.to_string_lossy().into_owned(),
                type_: t.map(str::to_string),
            }),
            ..Default::default()
        }
    }

    fn mount(name: &str, at: &str) -> api::VolumeMount {
        api::VolumeMount {
            name: name.into(),
            mount_path: at.into(),
            ..Default::default()
        }
    }

    fn container(mounts: Vec<api::VolumeMount>) -> api::Container {
        api::Container {
            name: "c".into(),
            volume_mounts: mounts,
            ..Default::default()
        }
    }

    fn mode(p: &Path) -> u32 {
        fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn image_volumes_are_the_runtimes_to_mount() {
        let tmp = tempfile::tempdir().unwrap();
        let image_vol = |name: &str, reference: &str, policy| api::Volume {
            name: name.into(),
            image: Some(api::ImageVolumeSource {
                reference: reference.into(),
                pull_policy: policy,
            }),
            ..Default::default()
        };
        let p = pod(vec![
            image_vol("models", "quay.io/acme/models:v2", None),
            image_vol("tools", "tools:1", Some(api::PullPolicy::Never)),
            image_vol("unused", "unused:1", None),
        ]);
        let c = container(vec![
            api::VolumeMount {
                sub_path: Some("weights/v2".into()),
                read_only: false, // an image volume is read-only whatever the mount says
                ..mount("models", "/models")
            },
            mount("tools", "/opt/tools"),
            mount("models", "/all-models"),
        ]);
        // Each image once, in the pod's order; a volume no mount names is not pulled.
        assert_eq!(
            image_volumes(&p, &c),
            [
                (
                    "models",
                    "quay.io/acme/models:v2",
                    api::PullPolicy::IfNotPresent
                ),
                ("tools", "tools:1", api::PullPolicy::Never),
            ]
        );
        let images = [
            ("models".to_string(), "sha256:aaa".to_string()),
            ("tools".to_string(), "sha256:bbb".to_string()),
        ];
        let fake = FakeTmpfs::default();
        let ms = prepare_mounts(tmp.path(), &p, &c, &[], &images, &fake, 0).unwrap();
        let want = |at: &str, image: &str, reference: &str, sub: &str| Mount {
            container_path: at.into(),
            host_path: String::new(),
            readonly: true,
            propagation: MountPropagation::Private,
            image: image.into(),
            image_reference: reference.into(),
            image_sub_path: sub.into(),
        };
        assert_eq!(
            ms,
            [
                want(
                    "/models",
                    "sha256:aaa",
                    "quay.io/acme/models:v2",
                    "weights/v2"
                ),
                want("/opt/tools", "sha256:bbb", "tools:1", ""),
                want("/all-models", "sha256:aaa", "quay.io/acme/models:v2", ""),
            ]
        );
        // Nothing was made on the host for them.
        assert!(!tmp.path().join("pods").exists());
        // Not pulled yet (a caller's bug): named, not mounted empty.
        let e = prepare_mounts(tmp.path(), &p, &c, &[], &images[..1], &fake, 0).unwrap_err();
        assert_eq!(
            e.to_string(),
            "volume \"tools\": its image is not pulled yet"
        );
        // A subPath that leaves the image is refused as any other.
        let bad = container(vec![api::VolumeMount {
            sub_path: Some("../etc".into()),
            ..mount("models", "/models")
        }]);
        let e = prepare_mounts(tmp.path(), &p, &bad, &[], &images, &fake, 0).unwrap_err();
        assert!(e.to_string().contains("must not contain '..'"), "{e}");
    }

    #[test]
    fn host_path_types() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path();
        fs::create_dir(t.join("dir")).unwrap();
        fs::write(t.join("file"), b"x").unwrap();
        let _sock = UnixListener::bind(t.join("sock")).unwrap();

        // (path, type, ok?)
        let cases = [
            ("missing", "", true),
            ("dir", "Directory", true),
            ("file", "Directory", false),
            ("missing", "Directory", false),
            ("file", "File", true),
            ("dir", "File", false),
            ("missing", "File", false),
            ("sock", "Socket", true),
            ("file", "Socket", false),
            ("file", "CharDevice", false),
            ("file", "BlockDevice", false),
            ("dir", "DirectoryOrCreate", true),
            ("file", "DirectoryOrCreate", false),
            ("file", "FileOrCreate", true),
            ("dir", "FileOrCreate", false),
            ("dir", "Bogus", false),
        ];
        for (name, ty, ok) in cases {
            let got = check_host_path(&t.join(name), ty);
            assert_eq!(got.is_ok(), ok, "{name} {ty}: {got:?}");
        }
        assert!(check_host_path(Path::new("/dev/null"), "CharDevice").is_ok());

        check_host_path(&t.join("new/sub"), "DirectoryOrCreate").unwrap();
        assert!(t.join("new/sub").is_dir());
        assert_eq!(mode(&t.join("new/sub")), 0o755);
        check_host_path(&t.join("dir/newfile"), "FileOrCreate").unwrap();
        assert!(t.join("dir/newfile").is_file());
        assert_eq!(mode(&t.join("dir/newfile")), 0o644);
        // FileOrCreate does not create the parent
        assert!(check_host_path(&t.join("nodir/f"), "FileOrCreate").is_err());
    }

    #[test]
    fn empty_dir_and_host_path_mounts() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        let data = tmp.path().join("data");
        let p = pod(vec![
            api::Volume {
                name: "cache".into(),
                empty_dir: Some(api::EmptyDirVolumeSource::default()),
                ..Default::default()
            },
            api::Volume {
                name: "mem".into(),
                empty_dir: Some(api::EmptyDirVolumeSource {
                    medium: Some("Memory".into()),
                    size_limit: None,
                }),
                ..Default::default()
            },
            host_path_vol("data", &data, Some("DirectoryOrCreate")),
        ]);
        let c = container(vec![
            mount("cache", "/cache"),
            api::VolumeMount {
                read_only: true,
                mount_propagation: Some("HostToContainer".into()),
                ..mount("data", "/data")
            },
            api::VolumeMount {
                sub_path: Some("a/b".into()),
                ..mount("cache", "/sub")
            },
            mount("mem", "/mem"),
        ]);
        let fake = FakeTmpfs::default();
        let ms = prepare_mounts(&root, &p, &c, &[], &[], &fake, 1 << 30).unwrap();
        let cache = root.join("pods/uid-1/volumes/kubernetes.io~empty-dir/cache");
        assert_eq!(ms[0].host_path, cache.to_string_lossy());
        assert_eq!(mode(&cache), 0o777);
        assert!(!ms[0].readonly);
        assert_eq!(ms[1].host_path, data.to_string_lossy());
        assert!(ms[1].readonly);
        assert_eq!(ms[1].propagation, MountPropagation::HostToContainer);
        assert!(data.is_dir());
        assert_eq!(ms[2].host_path, cache.join("a/b").to_string_lossy());
        assert!(cache.join("a/b").is_dir());
        assert_eq!(mode(&cache.join("a/b")), 0o777);
        assert_eq!(ms[2].container_path, "/sub");
        let mem = root.join("pods/uid-1/volumes/kubernetes.io~empty-dir/mem");
        assert!(mem.is_dir());
        // medium Memory: a tmpfs as large as the node's memory (no limits, no sizeLimit)
        assert_eq!(*fake.mounted.lock().unwrap(), vec![(mem, Some(1 << 30))]);
    }

    /// kubelet: `SetVolumeOwnership` — with an fsGroup a new emptyDir belongs to the group,
    /// g+rwx and setgid. Conformance: "EmptyDir volumes when FSGroup is specified ... new
    /// files should be created with FSGroup ownership", "... nonexistent volume subPath
    /// should have the correct mode and owner using FSGroup".
    #[test]
    fn empty_dir_with_fs_group() {
        use std::os::unix::fs::MetadataExt as _;
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        let mut p = pod(vec![api::Volume {
            name: "cache".into(),
            empty_dir: Some(api::EmptyDirVolumeSource::default()),
            ..Default::default()
        }]);
        // A group this process may give a directory it owns: any as root, else its own.
        let root_user = fs::metadata("/proc/self").unwrap().uid() == 0;
        let gid = if root_user {
            123
        } else {
            fs::metadata(tmp.path()).unwrap().gid()
        };
        p.spec.security_context = Some(api::PodSecurityContext {
            fs_group: Some(i64::from(gid)),
            ..Default::default()
        });
        let c = container(vec![api::VolumeMount {
            sub_path: Some("a".into()),
            ..mount("cache", "/sub")
        }]);
        prepare_mounts(&root, &p, &c, &[], &[], &FakeTmpfs::default(), 1 << 30).unwrap();
        let cache = root.join("pods/uid-1/volumes/kubernetes.io~empty-dir/cache");
        assert_eq!(mode(&cache), 0o2777);
        assert_eq!(fs::metadata(&cache).unwrap().gid(), gid);
        // The subPath directory takes the volume's mode (and its group, by setgid).
        assert_eq!(mode(&cache.join("a")), 0o2777);
        assert_eq!(fs::metadata(cache.join("a")).unwrap().gid(), gid);
    }

    #[test]
    fn mount_errors() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        let outside = tmp.path().join("outside");
        fs::create_dir(&outside).unwrap();
        let p = pod(vec![
            api::Volume {
                name: "ed".into(),
                empty_dir: Some(api::EmptyDirVolumeSource::default()),
                ..Default::default()
            },
            api::Volume {
                name: "cm".into(),
                other: [("configMap".to_string(), serde_json::json!({"name": "x"}))]
                    .into_iter()
                    .collect(),
                ..Default::default()
            },
            host_path_vol("hp", &tmp.path().join("nope"), Some("Directory")),
        ]);
        // a symlink inside the emptyDir that points outside it
        let ed = empty_dir_path(&root, "uid-1", "ed");
        fs::create_dir_all(&ed).unwrap();
        std::os::unix::fs::symlink(&outside, ed.join("escape")).unwrap();

        let cases: Vec<(api::VolumeMount, &str)> = vec![
            (mount("missing", "/x"), "no volume named"),
            (mount("cm", "/x"), "configMap volumes are not supported"),
            (mount("hp", "/x"), "does not exist"),
            (
                api::VolumeMount {
                    sub_path: Some("../x".into()),
                    ..mount("ed", "/x")
                },
                "must not contain '..'",
            ),
            (
                api::VolumeMount {
                    sub_path: Some("/etc".into()),
                    ..mount("ed", "/x")
                },
                "must be a relative path",
            ),
            (
                api::VolumeMount {
                    sub_path: Some("escape".into()),
                    ..mount("ed", "/x")
                },
                "resolves outside its volume",
            ),
            (
                api::VolumeMount {
                    mount_propagation: Some("Bidirectional".into()),
                    ..mount("ed", "/x")
                },
                "only available to privileged",
            ),
            (
                api::VolumeMount {
                    mount_propagation: Some("Sideways".into()),
                    ..mount("ed", "/x")
                },
                "not a known mode",
            ),
        ];
        for (vm, want) in cases {
            let err = prepare_mounts(
                &root,
                &p,
                &container(vec![vm.clone()]),
                &[],
                &[],
                &FakeTmpfs::default(),
                0,
            )
            .unwrap_err();
            assert!(err.to_string().contains(want), "{vm:?}: {err}");
        }
        // privileged containers may use Bidirectional
        let mut c = container(vec![api::VolumeMount {
            mount_propagation: Some("Bidirectional".into()),
            ..mount("ed", "/x")
        }]);
        c.security_context = Some(Box::new(api::SecurityContext {
            privileged: Some(true),
            ..Default::default()
        }));
        assert_eq!(
            prepare_mounts(&root, &p, &c, &[], &[], &FakeTmpfs::default(), 0).unwrap()[0]
                .propagation,
            MountPropagation::Bidirectional
        );
    }

    #[test]
    fn data_dirs_are_private_whatever_they_were() {
        let t = tempfile::tempdir().unwrap();
        // Missing: made 0750, its missing parents 0755 (they are not picolet's).
        let root = t.path().join("var/lib/picolet");
        setup_data_dirs(&root).unwrap();
        assert_eq!(mode(&root), 0o750);
        assert_eq!(mode(&root.join("pods")), 0o750);
        assert_eq!(mode(&t.path().join("var/lib")), 0o755);
        // Made by someone else: group-write and others' bits go, the rest stays.
        fs::set_permissions(&root, fs::Permissions::from_mode(0o775)).unwrap();
        fs::set_permissions(root.join("pods"), fs::Permissions::from_mode(0o700)).unwrap();
        setup_data_dirs(&root).unwrap();
        assert_eq!(mode(&root), 0o750);
        assert_eq!(mode(&root.join("pods")), 0o700);
        // A pod's directories: 0750, made once.
        make_pod_data_dirs(&root, "u1").unwrap();
        for d in ["pods/u1", "pods/u1/volumes", "pods/u1/plugins"] {
            assert_eq!(mode(&root.join(d)), 0o750, "{d}");
        }
        make_pod_data_dirs(&root, "u1").unwrap();
        // A file in the way is an error naming it.
        let file = t.path().join("file");
        fs::write(&file, "").unwrap();
        let err = setup_data_dirs(&file).unwrap_err().to_string();
        assert!(
            err.contains(&file.join("pods").display().to_string()),
            "{err}"
        );
    }

    #[test]
    fn tmpfs_access_options() {
        assert_eq!(TmpfsAccess::Shared.options(), "mode=1777");
        assert_eq!(
            TmpfsAccess::Private { fs_group: None }.options(),
            "mode=0755"
        );
        assert_eq!(
            TmpfsAccess::Private {
                fs_group: Some(2000)
            }
            .options(),
            "mode=2750,gid=2000"
        );
        // kubelet: generateTmpfsMountOptions — `noswap` when the node has swap and the
        // kernel has the option (6.4).
        assert_eq!(
            tmpfs_data(TmpfsAccess::Shared, Some(1 << 20), true),
            "mode=1777,size=1048576,noswap"
        );
        assert_eq!(tmpfs_data(TmpfsAccess::Shared, None, false), "mode=1777");
    }

    #[test]
    fn memory_medium_size_follows_the_kubelet() {
        let q = |s: &str| api::Quantity::Str(s.into());
        let mut p = pod(vec![]);
        let gi = 1u64 << 30;
        assert_eq!(memory_medium_size(&p, None, gi), Some(gi));
        assert_eq!(memory_medium_size(&p, Some(&q("64Mi")), gi), Some(64 << 20));
        assert_eq!(memory_medium_size(&p, Some(&q("2Gi")), gi), Some(gi));
        assert_eq!(memory_medium_size(&p, None, 0), None);
        p.spec.containers = vec![api::Container {
            name: "c".into(),
            resources: Some(api::ResourceRequirements {
                limits: [("memory".into(), q("128Mi"))].into(),
                ..Default::default()
            }),
            ..Default::default()
        }];
        assert_eq!(memory_medium_size(&p, None, gi), Some(128 << 20));
        assert_eq!(memory_medium_size(&p, Some(&q("64Mi")), gi), Some(64 << 20));
        p.spec.containers.push(api::Container::default());
        assert_eq!(
            memory_medium_size(&p, None, gi),
            Some(gi),
            "one container without a limit"
        );
    }

    #[test]
    fn sub_path_expr_expands_the_containers_env() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        let p = pod(vec![api::Volume {
            name: "logs".into(),
            empty_dir: Some(api::EmptyDirVolumeSource::default()),
            ..Default::default()
        }]);
        let envs = vec![("POD_NAME".to_string(), "web-0".to_string())];
        let c = container(vec![api::VolumeMount {
            sub_path_expr: Some("pods/$(POD_NAME)".into()),
            ..mount("logs", "/logs")
        }]);
        let ms = prepare_mounts(&root, &p, &c, &envs, &[], &FakeTmpfs::default(), 0).unwrap();
        let logs = empty_dir_path(&root, "uid-1", "logs");
        assert_eq!(ms[0].host_path, logs.join("pods/web-0").to_string_lossy());
        assert!(logs.join("pods/web-0").is_dir());
        // An expansion that climbs out of the volume is refused like a subPath would be.
        let evil = vec![("POD_NAME".to_string(), "../../etc".to_string())];
        assert!(prepare_mounts(&root, &p, &c, &evil, &[], &FakeTmpfs::default(), 0).is_err());
        // Both at once: refused.
        let both = container(vec![api::VolumeMount {
            sub_path: Some("a".into()),
            sub_path_expr: Some("b".into()),
            ..mount("logs", "/logs")
        }]);
        let e = prepare_mounts(&root, &p, &both, &envs, &[], &FakeTmpfs::default(), 0).unwrap_err();
        assert!(e.to_string().contains("mutually exclusive"), "{e}");
    }
}
