//! The CNI cache after a power cut (picolet's own; the kubelet has no such step — README,
//! "Deliberate differences").
//!
//! libcni caches what each pod network attachment returned in
//! `<cache>/results/<network>-<sandbox>-<interface>`, and the host-local IPAM plugin keeps
//! its reservations in `<cache>/networks/<network>/<ip>`; neither is synced to disk. After a
//! power cut either can be an empty file. containerd (and CRI-O) then fail every
//! StopPodSandbox of the old sandbox ("failed to get network … cached result: decoding
//! version from network config: unexpected end of JSON input", containerd/containerd#8197),
//! and since a pod's new sandbox is made only once its old one is stopped (kubelet:
//! `killPodWithSyncResult` before `createPodSandbox`), the pod never comes back; an empty
//! reservation is never released, its address lost for good.
//!
//! An empty file is never a valid result or reservation, and what it described died with
//! the boot. So on its first start in a boot picolet removes the empty ones, one log line
//! each; the runtime's teardown then goes on without a cached result (the plugins get the
//! network config alone, as for a sandbox whose result was never cached). Non-empty files,
//! and host-local's `lock`, are never touched; nothing is done on a later start in the same
//! boot (a file being written at that moment must not be taken for a broken one).

use std::io;
use std::path::{Path, PathBuf};

/// Where the boot ID of picolet's last start is kept, under `--root-dir`.
pub(crate) const BOOT_ID_FILE: &str = "boot_id";

/// Whether this is picolet's first start since the node booted (`boot_id` from
/// `/proc/sys/kernel/random/boot_id`); records `boot_id` under `root_dir` when it is.
/// When the record cannot be read or written the answer is "first" (the repair is harmless
/// at any start but for a file being written at that very moment).
pub(crate) fn first_start_in_boot(root_dir: &Path, boot_id: &str) -> io::Result<bool> {
    let path = root_dir.join(BOOT_ID_FILE);
    let boot_id = boot_id.trim();
    if std::fs::read_to_string(&path).is_ok_and(|s| s.trim() == boot_id) {
        return Ok(false);
    }
    // Written whole then renamed: a torn record only means one more repair pass.
    let tmp = root_dir.join(".boot_id.tmp");
    std::fs::write(&tmp, format!("{boot_id}\n"))?;
    std::fs::rename(&tmp, &path)?;
    Ok(true)
}

/// Removes the empty CNI result files and host-local reservations under `cache_dir`;
/// returns what was removed and what could not be (path and error). A missing directory is
/// nothing to do.
pub(crate) fn remove_empty_entries(cache_dir: &Path) -> (Vec<PathBuf>, Vec<(PathBuf, io::Error)>) {
    let mut removed = Vec::new();
    let mut failed = Vec::new();
    let mut sweep = |dir: &Path, wanted: &dyn Fn(&str) -> bool| {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            // symlink_metadata: a link is not followed, and never an "empty file".
            let empty = std::fs::symlink_metadata(&path)
                .is_ok_and(|m| m.file_type().is_file() && m.len() == 0);
            if !empty || !wanted(name) {
                continue;
            }
            match std::fs::remove_file(&path) {
                Ok(()) => removed.push(path),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => failed.push((path, e)),
            }
        }
    };
    sweep(&cache_dir.join("results"), &|_| true);
    if let Ok(networks) = std::fs::read_dir(cache_dir.join("networks")) {
        for network in networks.flatten() {
            if network.file_type().is_ok_and(|t| t.is_dir()) {
                sweep(&network.path(), &is_reservation);
            }
        }
    }
    removed.sort();
    (removed, failed)
}

/// host-local's files: one per reserved address, named by it, and `last_reserved_ip.<range>`
/// (`lock` is empty by design and stays).
fn is_reservation(name: &str) -> bool {
    name.parse::<std::net::IpAddr>().is_ok() || name.starts_with("last_reserved_ip")
}

/// The boot-time step: on the first start in a boot, [`remove_empty_entries`], logged.
/// `cache_dir` empty: off.
pub(crate) fn repair_after_boot(root_dir: &Path, boot_id: &str, cache_dir: &Path) {
    if cache_dir.as_os_str().is_empty() {
        return;
    }
    match first_start_in_boot(root_dir, boot_id) {
        Ok(false) => return,
        Ok(true) => {}
        Err(e) => log::warn!(
            "cannot record the boot ID in {}: {e}; the CNI cache is checked at every start",
            root_dir.join(BOOT_ID_FILE).display()
        ),
    }
    let (removed, failed) = remove_empty_entries(cache_dir);
    for path in removed {
        log::warn!(
            "removed the empty CNI cache file {} (left by a power cut; the runtime could not \
             stop its pod's old sandbox with it)",
            path.display()
        );
    }
    for (path, e) in failed {
        log::warn!(
            "cannot remove the empty CNI cache file {}: {e}",
            path.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn only_the_first_start_in_a_boot_counts() {
        let root = tempfile::tempdir().unwrap();
        assert!(first_start_in_boot(root.path(), "b1\n").unwrap());
        assert!(!first_start_in_boot(root.path(), "b1").unwrap());
        assert!(!first_start_in_boot(root.path(), "b1\n").unwrap());
        assert!(first_start_in_boot(root.path(), "b2").unwrap());
        assert!(!first_start_in_boot(root.path(), "b2").unwrap());
        // A torn record (power cut while it was written): one more first start.
        fs::write(root.path().join(BOOT_ID_FILE), "").unwrap();
        assert!(first_start_in_boot(root.path(), "b2").unwrap());
        assert_eq!(
            fs::read_to_string(root.path().join(BOOT_ID_FILE)).unwrap(),
            "b2\n"
        );
    }

    #[test]
    fn removes_only_empty_results_and_reservations() {
        let cache = tempfile::tempdir().unwrap();
        let c = cache.path();
        let files: &[(&str, &str)] = &[
            ("results/lab-aaaa-eth0", ""),
            ("results/lab-bbbb-eth0", "{\"cniVersion\":\"0.4.0\"}"),
            ("networks/lab/10.88.0.3", ""),
            ("networks/lab/10.88.0.4", "bbbb\neth0"),
            ("networks/lab/fd00::5", ""),
            ("networks/lab/last_reserved_ip.0", ""),
            ("networks/lab/lock", ""),
            ("networks/lab/notes", ""),
            ("networks/stray-file", ""),
            ("other/empty", ""),
        ];
        for (path, text) in files {
            let p = c.join(path);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        }
        fs::create_dir(c.join("results/a-dir")).unwrap();
        std::os::unix::fs::symlink("/nonexistent", c.join("results/a-link")).unwrap();
        let (removed, failed) = remove_empty_entries(c);
        assert!(failed.is_empty(), "{failed:?}");
        let removed: Vec<_> = removed
            .iter()
            .map(|p| p.strip_prefix(c).unwrap().to_str().unwrap().to_string())
            .collect();
        assert_eq!(
            removed,
            [
                "networks/lab/10.88.0.3",
                "networks/lab/fd00::5",
                "networks/lab/last_reserved_ip.0",
                "results/lab-aaaa-eth0",
            ]
        );
        for kept in [
            "results/lab-bbbb-eth0",
            "networks/lab/10.88.0.4",
            "networks/lab/lock",
            "networks/lab/notes",
            "networks/stray-file",
            "other/empty",
            "results/a-dir",
        ] {
            assert!(c.join(kept).exists(), "{kept} removed");
        }
        assert!(fs::symlink_metadata(c.join("results/a-link")).is_ok());
        // Nothing there at all: nothing to do.
        assert_eq!(remove_empty_entries(&c.join("missing")).0.len(), 0);
    }

    #[test]
    fn repairs_once_per_boot_and_never_when_off() {
        let root = tempfile::tempdir().unwrap();
        let cache = tempfile::tempdir().unwrap();
        let result = cache.path().join("results/lab-aaaa-eth0");
        fs::create_dir_all(result.parent().unwrap()).unwrap();
        fs::write(&result, "").unwrap();
        repair_after_boot(root.path(), "b1", Path::new(""));
        assert!(result.exists(), "off: nothing removed");
        assert!(!root.path().join(BOOT_ID_FILE).exists());
        repair_after_boot(root.path(), "b1", cache.path());
        assert!(!result.exists());
        // Later in the same boot: an empty file (one being written) stays.
        fs::write(&result, "").unwrap();
        repair_after_boot(root.path(), "b1", cache.path());
        assert!(result.exists());
        repair_after_boot(root.path(), "b2", cache.path());
        assert!(!result.exists());
    }
}
