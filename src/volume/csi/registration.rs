//! The plugin watcher (kubelet: `pluginmanager` — `pluginwatcher`, its reconciler and
//! `operationexecutor.RegisterPlugin`): registers the CSI drivers whose sockets appear in
//! `<root-dir>/plugins_registry/`, and unregisters those whose socket goes away.
//!
//! For a new socket: `GetInfo` (type `CSIPlugin`, a name, a `1.x` version, the endpoint;
//! an empty endpoint is the registration socket itself), then `NodeGetInfo` and
//! `NodeGetCapabilities` on the driver's endpoint (kubelet: `csiPlugin.RegisterPlugin` →
//! `NodeGetInfo`), then `NotifyRegistrationStatus` with the outcome. A socket that is
//! re-created (a plugin restart: another inode or change time) registers again. A failed registration is
//! tried again at the next scan.
//!
//! Owns: the inotify watch on the directory and the per-socket state. Runs as a task on
//! the event loop's thread: the directory listing is one small readdir per scan; the calls
//! are async with deadlines.

use std::collections::BTreeMap;
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::{RecommendedWatcher, RecursiveMode, Watcher as _};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::proto::registration::{
    InfoRequest, PluginInfo, RegistrationStatus, RegistrationStatusResponse,
};
use super::{
    CsiError, Driver, GET_INFO, INFO_TIMEOUT, NODE_GET_CAPABILITIES, NODE_GET_INFO,
    NOTIFY_REGISTRATION_STATUS, Registry, call,
};

/// kubelet: the plugin type of a CSI driver's registration.
pub(crate) const CSI_PLUGIN: &str = "CSIPlugin";
/// A full scan besides inotify (a missed event, a failed registration to try again).
pub(crate) const RESCAN_PERIOD: Duration = Duration::from_secs(10);

/// What tells one socket file from the next at the same path: its inode and change time
/// (kubelet: the socket's timestamp — a freed inode is often reused at once, so a
/// restarted plugin's socket may have the same inode number).
pub(crate) type SocketId = (u64, i64, i64);

/// The plugin sockets of `dir` (kubelet: the desired state of the world; dot files and
/// non-sockets are skipped, as upstream).
pub(crate) fn scan(dir: &Path) -> BTreeMap<PathBuf, SocketId> {
    let Ok(entries) = crate::dir_listing::read_dir(dir) else {
        return BTreeMap::new();
    };
    crate::sort::collect_map(
        entries
            .into_iter()
            .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
            .filter_map(|e| {
                let meta = e.metadata().ok()?;
                let id = (meta.ino(), meta.ctime(), meta.ctime_nsec());
                meta.file_type().is_socket().then(|| (e.path(), id))
            }),
    )
}

/// kubelet: `highestSupportedVersion` — a CSI driver must offer a `1.x` version.
pub(crate) fn supports_v1(versions: &[String]) -> bool {
    versions.iter().any(|v| {
        let v = v.strip_prefix('v').unwrap_or(v);
        v.split('.').next() == Some("1")
    })
}

/// Registers the driver behind the registration socket `socket`.
pub(crate) async fn register(socket: &Path, registry: &Registry) -> Result<Driver, CsiError> {
    let info: PluginInfo = call(socket, GET_INFO, &InfoRequest {}, INFO_TIMEOUT).await?;
    let result = validate_and_probe(socket, &info).await;
    let status = RegistrationStatus {
        plugin_registered: result.is_ok(),
        error: result
            .as_ref()
            .err()
            .map(ToString::to_string)
            .unwrap_or_default(),
    };
    // kubelet: the plugin hears the outcome; a plugin that does not answer it is still
    // registered (upstream logs and goes on too).
    if let Err(e) = call::<RegistrationStatusResponse>(
        socket,
        NOTIFY_REGISTRATION_STATUS,
        &status,
        INFO_TIMEOUT,
    )
    .await
    {
        log::warn!("CSI plugin {}: {e}", socket.display());
    }
    let driver = result?;
    registry.insert(driver.clone());
    Ok(driver)
}

async fn validate_and_probe(socket: &Path, info: &PluginInfo) -> Result<Driver, CsiError> {
    if info.r#type != CSI_PLUGIN {
        return Err(CsiError::Refused(format!(
            "plugin type {:?} is not supported (picolet registers {CSI_PLUGIN} only)",
            info.r#type
        )));
    }
    if info.name.is_empty() {
        return Err(CsiError::Refused("the plugin has no name".into()));
    }
    if !supports_v1(&info.supported_versions) {
        return Err(CsiError::Refused(format!(
            "none of the versions {:?} of CSI driver {} is supported (1.x)",
            info.supported_versions, info.name
        )));
    }
    // kubelet: an empty endpoint is the registration socket itself.
    let endpoint = if info.endpoint.is_empty() {
        socket.to_path_buf()
    } else {
        PathBuf::from(
            info.endpoint
                .strip_prefix("unix://")
                .unwrap_or(&info.endpoint),
        )
    };
    let node_info: super::proto::NodeGetInfoResponse = call(
        &endpoint,
        NODE_GET_INFO,
        &super::proto::NodeGetInfoRequest {},
        INFO_TIMEOUT,
    )
    .await?;
    let caps: super::proto::NodeGetCapabilitiesResponse = call(
        &endpoint,
        NODE_GET_CAPABILITIES,
        &super::proto::NodeGetCapabilitiesRequest {},
        INFO_TIMEOUT,
    )
    .await?;
    use super::proto::node_service_capability::Type;
    let capabilities = caps
        .capabilities
        .iter()
        .filter_map(|c| c.r#type.as_ref().map(|Type::Rpc(rpc)| rpc.r#type))
        .collect();
    Ok(Driver {
        name: info.name.clone(),
        endpoint,
        registration_socket: socket.to_path_buf(),
        node_id: node_info.node_id,
        capabilities,
    })
}

/// Watches `dir` until `shutdown` (kubelet: `pluginManager.Run`). The directory is created
/// if missing (0750, as upstream). The name of each driver that registers is sent on
/// `registered` (the pods waiting for it are synced at once).
pub(crate) async fn run(
    dir: PathBuf,
    registry: Registry,
    registered: mpsc::UnboundedSender<String>,
    shutdown: CancellationToken,
) {
    if let Err(e) = std::fs::create_dir_all(&dir) {
        log::warn!(
            "CSI plugin registration: cannot create {}: {e}",
            dir.display()
        );
    }
    let (tx, mut rx) = mpsc::channel::<()>(1);
    let _watcher = match watch(&dir, tx) {
        Ok(w) => Some(w),
        Err(e) => {
            log::warn!(
                "CSI plugin registration: cannot watch {} ({e}): scanning every {RESCAN_PERIOD:?}",
                dir.display()
            );
            None
        }
    };
    let mut tick = crate::local_tasks::interval(RESCAN_PERIOD);
    // Registered sockets with their identity; failed ones with theirs (logged once).
    let mut sockets: BTreeMap<PathBuf, SocketId> = BTreeMap::new();
    let mut failed: BTreeMap<PathBuf, SocketId> = BTreeMap::new();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
            Some(()) = rx.recv() => {}
        }
        let now = scan(&dir);
        // Gone or re-created: unregister.
        let stale: Vec<PathBuf> = sockets
            .iter()
            .filter(|(p, ino)| now.get(*p) != Some(ino))
            .map(|(p, _)| p.clone())
            .collect();
        for path in stale {
            sockets.remove(&path);
            if let Some(name) = registry.remove_socket(&path) {
                log::info!(
                    "CSI driver {name} unregistered: {} went away",
                    path.display()
                );
            }
        }
        failed.retain(|p, ino| now.get(p) == Some(ino) || !now.contains_key(p));
        for (path, ino) in now {
            if sockets.get(&path) == Some(&ino) {
                continue;
            }
            match register(&path, &registry).await {
                Ok(d) => {
                    log::info!(
                        "CSI driver {} registered from {} (endpoint {}, node ID {:?})",
                        d.name,
                        path.display(),
                        d.endpoint.display(),
                        d.node_id
                    );
                    failed.remove(&path);
                    sockets.insert(path, ino);
                    // The loop is gone only at shutdown.
                    let _ = registered.send(d.name);
                }
                Err(e) => {
                    if failed.insert(path.clone(), ino) != Some(ino) {
                        log::warn!("CSI plugin {}: registration failed: {e}", path.display());
                    } else {
                        log::debug!("CSI plugin {}: registration failed: {e}", path.display());
                    }
                }
            }
        }
    }
}

/// inotify on `dir`: any event that changes the directory becomes one pending "scan"
/// signal. Opens and closes are not changes — and must not be: the scan itself opens the
/// directory (notify's inotify mask includes IN_OPEN), so reacting to them would rescan
/// for ever, a core at 100 %.
fn watch(dir: &Path, tx: mpsc::Sender<()>) -> notify::Result<RecommendedWatcher> {
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if res.as_ref().is_ok_and(|e| changes_dir(&e.kind)) {
            // Full: a scan is pending already.
            let _ = tx.try_send(());
        }
    })?;
    watcher.watch(dir, RecursiveMode::NonRecursive)?;
    Ok(watcher)
}

/// Whether an event can mean a socket came or went.
fn changes_dir(kind: &notify::EventKind) -> bool {
    !matches!(kind, notify::EventKind::Access(_))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opening_the_directory_is_no_change() {
        use notify::EventKind;
        use notify::event::{AccessKind, AccessMode, CreateKind, ModifyKind, RemoveKind};
        assert!(!changes_dir(&EventKind::Access(AccessKind::Open(
            AccessMode::Any
        ))));
        assert!(!changes_dir(&EventKind::Access(AccessKind::Close(
            AccessMode::Read
        ))));
        assert!(changes_dir(&EventKind::Create(CreateKind::Any)));
        assert!(changes_dir(&EventKind::Remove(RemoveKind::Any)));
        assert!(changes_dir(&EventKind::Modify(ModifyKind::Any)));
    }

    /// The scan opens the directory: with the real inotify, a scan must not wake the
    /// watcher again (it did: a core at 100 % on an idle node).
    #[tokio::test]
    async fn a_scan_does_not_wake_the_watcher() {
        let tmp = tempfile::tempdir().unwrap();
        let (tx, mut rx) = mpsc::channel(1);
        let _watcher = watch(tmp.path(), tx).unwrap();
        for _ in 0..3 {
            let _ = scan(tmp.path());
        }
        // inotify delivers within milliseconds; a second of real time is plenty for an
        // event that should not come at all (no timing is asserted, only its absence).
        let woke = tokio::time::timeout(std::time::Duration::from_secs(1), rx.recv()).await;
        assert!(woke.is_err(), "a scan woke the watcher");
        // A new file does.
        std::fs::write(tmp.path().join("x.sock"), b"").unwrap();
        let woke = tokio::time::timeout(std::time::Duration::from_secs(60), rx.recv()).await;
        assert!(woke.is_ok(), "a new file did not wake the watcher");
    }

    #[test]
    fn versions() {
        let v = |s: &[&str]| s.iter().map(ToString::to_string).collect::<Vec<_>>();
        assert!(supports_v1(&v(&["1.0.0"])));
        assert!(supports_v1(&v(&["v1.5.0", "0.3.0"])));
        assert!(!supports_v1(&v(&["0.3.0"])));
        assert!(!supports_v1(&v(&[])));
        assert!(!supports_v1(&v(&["10.0.0"])));
    }
}
