//! A running container's (or sandbox's) host process, for the exit watch of the PLEG
//! (`pleg::exits`): the PID the runtime names in its verbose status, opened as a pidfd
//! that becomes readable the moment the process exits (Linux ≥ 5.3, `pidfd_open(2)`).
//!
//! kubelet: none — the kubelet learns of exits from the 1 s relist or from CRI container
//! events. picolet adds this for runtimes without `GetContainerEvents` (containerd 1.6) so
//! an idle board does not pay for a relist every second; see `pleg` for how it is used.
//!
//! Must never: watch a process that is not the container's. A PID is only a number: the
//! runtime's answer may be stale (the process exited and its PID was reused) or name a
//! process of another PID namespace (picolet in a container). So the pidfd is opened
//! first, which pins the process it names, and only then is the process checked: its
//! cgroup path must name the container (containerd: `…/<id>` or `cri-containerd-<id>.scope`,
//! CRI-O: `crio-<id>.scope`). A check that fails is [`ExitHandle::Unknown`], never an error.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{FromRawFd as _, OwnedFd};

/// What the exit watch can hold of a process.
#[derive(Debug)]
pub enum ExitHandle {
    /// A pidfd of the process: readable once it exited.
    Pidfd(OwnedFd),
    /// The runtime named no process, it is gone, or it is not the container's.
    Unknown,
    /// The kernel has no `pidfd_open` (Linux < 5.3): no process can be watched.
    Unsupported,
}

/// The `pid` of a verbose `ContainerStatus` / `PodSandboxStatus` answer: containerd and
/// CRI-O put a JSON object under the `info` key whose `pid` is the host PID of the
/// container's (sandbox's) main process. `None` when absent, zero or not a number.
pub(crate) fn verbose_pid(info: &BTreeMap<String, String>) -> Option<u32> {
    #[derive(serde::Deserialize)]
    struct Info {
        #[serde(default)]
        pid: Option<u32>,
    }
    let json = info.get("info")?;
    let parsed: Info = crate::api::from_json_slice(json.as_bytes()).ok()?;
    parsed.pid.filter(|&p| p > 1)
}

/// Whether a `/proc/<pid>/cgroup` text names the container `id` as the last component of
/// one of its paths (cgroup v1 has a line per hierarchy, v2 one line).
pub(crate) fn cgroup_names(cgroup: &str, id: &str) -> bool {
    !id.is_empty()
        && cgroup.lines().any(|line| {
            let path = line.splitn(3, ':').nth(2).unwrap_or("");
            let last = path.rsplit('/').next().unwrap_or("");
            let last = last.strip_suffix(".scope").unwrap_or(last);
            last == id || last.ends_with(&format!("-{id}"))
        })
}

/// `pidfd_open(pid, 0)`.
pub(crate) fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
    unsafe extern "C" {
        fn syscall(num: std::ffi::c_long, ...) -> std::ffi::c_long;
    }
    // The same number on every architecture picolet builds for (the syscall table was
    // unified from 5.1 on: x86_64, aarch64, arm).
    const SYS_PIDFD_OPEN: std::ffi::c_long = 434;
    let pid = std::ffi::c_int::try_from(pid).map_err(|_| io::Error::from_raw_os_error(22))?;
    // SAFETY: pidfd_open takes two integers and returns a new file descriptor or -1.
    let fd = unsafe { syscall(SYS_PIDFD_OPEN, pid, 0 as std::ffi::c_uint) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = std::ffi::c_int::try_from(fd).map_err(|_| io::Error::from_raw_os_error(24))?;
    // SAFETY: the kernel just returned this descriptor to us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens process `pid` for the exit watch; with `id`, only if the process's cgroup names
/// that container (see the module docs). `id = None` skips the check (the test fake,
/// whose processes are plain children of the test).
pub(crate) fn open(pid: u32, id: Option<&str>) -> ExitHandle {
    let fd = match pidfd_open(pid) {
        Ok(fd) => fd,
        Err(e) if e.raw_os_error() == Some(38) => return ExitHandle::Unsupported, // ENOSYS
        Err(_) => return ExitHandle::Unknown, // ESRCH: gone already
    };
    if let Some(id) = id {
        match std::fs::read_to_string(format!("/proc/{pid}/cgroup")) {
            Ok(cgroup) if cgroup_names(&cgroup, id) => {}
            _ => return ExitHandle::Unknown,
        }
    }
    ExitHandle::Pidfd(fd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pid_of_a_verbose_answer() {
        let info = |s: &str| BTreeMap::from([("info".to_string(), s.to_string())]);
        let cases: &[(&str, BTreeMap<String, String>, Option<u32>)] = &[
            (
                "containerd container",
                info(
                    r#"{"sandboxID":"abc","pid":4242,"removing":false,"runtimeSpec":{"process":{"args":["sh"]}}}"#,
                ),
                Some(4242),
            ),
            (
                "containerd sandbox",
                info(r#"{"pid":77,"processStatus":"running","image":"pause"}"#),
                Some(77),
            ),
            ("no pid", info(r#"{"sandboxID":"abc"}"#), None),
            ("exited: pid 0", info(r#"{"pid":0}"#), None),
            ("init is never a container", info(r#"{"pid":1}"#), None),
            ("not a number", info(r#"{"pid":"x"}"#), None),
            ("not json", info("pid=4"), None),
            ("no info key", BTreeMap::new(), None),
        ];
        for (what, info, want) in cases {
            assert_eq!(verbose_pid(info), *want, "{what}");
        }
    }

    #[test]
    fn a_cgroup_names_its_container() {
        let id = "0123abcd";
        let cases = [
            (
                "v1 cgroupfs",
                "4:memory:/kubepods/besteffort/podu1/0123abcd\n1:cpu:/kubepods/besteffort/podu1/0123abcd\n",
                true,
            ),
            (
                "v2 cgroupfs",
                "0::/kubepods/burstable/podu1/0123abcd\n",
                true,
            ),
            (
                "v2 systemd, containerd",
                "0::/kubepods.slice/kubepods-pod_u1.slice/cri-containerd-0123abcd.scope\n",
                true,
            ),
            (
                "v2 systemd, CRI-O",
                "0::/kubepods.slice/crio-0123abcd.scope\n",
                true,
            ),
            ("runtime default parent", "0::/k8s.io/0123abcd\n", true),
            (
                "another container",
                "0::/kubepods/besteffort/podu1/0123abce\n",
                false,
            ),
            (
                "a prefix is not the id",
                "0::/kubepods/besteffort/podu1/0123abcdef\n",
                false,
            ),
            ("the host", "0::/\n", false),
            (
                "a user session",
                "0::/user.slice/user-0.slice/session-1.scope\n",
                false,
            ),
        ];
        for (what, cgroup, want) in cases {
            assert_eq!(cgroup_names(cgroup, id), want, "{what}");
        }
        assert!(!cgroup_names("0::/\n", ""));
    }

    #[tokio::test]
    async fn a_child_is_watched_until_it_exits() {
        let Ok(mut child) = std::process::Command::new("sleep").arg("1000").spawn() else {
            return; // no `sleep` on this machine
        };
        let handle = open(child.id(), None);
        let _ = child.kill();
        let _ = child.wait();
        match handle {
            ExitHandle::Pidfd(fd) => {
                // Readable: the process exited (and was reaped) before we asked.
                // SAFETY: the OwnedFd moves in and stays open while the AsyncFd lives.
                let fd = unsafe {
                    tokio::io::unix::AsyncFd::register_with_interest(
                        fd,
                        tokio::io::Interest::READABLE,
                    )
                }
                .unwrap();
                let ready = tokio::time::timeout(std::time::Duration::from_secs(60), fd.readable());
                assert!(
                    ready.await.is_ok(),
                    "the pidfd of an exited child is readable"
                );
            }
            ExitHandle::Unsupported => {} // an old kernel: nothing to watch
            ExitHandle::Unknown => panic!("a live child could not be opened"),
        }
        // Its PID is gone now: not an error, just nothing to watch.
        assert!(matches!(
            open(child.id(), None),
            ExitHandle::Unknown | ExitHandle::Unsupported
        ));
        // Our own process's cgroup does not name a container.
        assert!(matches!(
            open(std::process::id(), Some("0123abcd")),
            ExitHandle::Unknown | ExitHandle::Unsupported
        ));
    }
}
