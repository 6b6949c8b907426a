//! Measuring the eviction signals (kubelet: `makeSignalObservations` over the summary
//! provider — cadvisor for the root cgroup, `statfs` for the file systems, the CRI for the
//! pods).
//!
//! Owns: [`observe_node`] (files under injected roots and a `statfs` boundary, pure enough
//! to test with a tempdir and a fake `statfs`), [`pod_disk_usage`] (a directory walk), and
//! [`run`], the task that measures every [`super::MONITORING_PERIOD`] and sends an
//! [`Observed`] to the event loop. File-system work runs on the blocking pool; the CRI call
//! is awaited in the task, never on the loop.
//!
//! `memory.available` = `MemTotal` − working set of the root cgroup, working set = usage −
//! inactive file pages (cadvisor): cgroup v1 `memory/memory.usage_in_bytes` −
//! `total_inactive_file` of `memory/memory.stat`; cgroup v2 (the root has no
//! `memory.current`) `MemTotal − MemFree` − `inactive_file` of the root `memory.stat` (else
//! `Inactive(file)` of `/proc/meminfo`), as runc's `rootStatsFromMeminfo`.
//! `pid.available` = `kernel/pid_max` − the processes of `/proc/loadavg` (kubelet: `rlimit`
//! stats).
//!
//! Must never: block the event loop, fail the task (a signal that cannot be measured is
//! left out and logged once).

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{Observation, Observations, Signal};
use crate::cri;
use crate::cri::{ListFilter, Runtime};

/// `statfs` figures of one file system.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FsStats {
    pub bytes_total: u64,
    pub bytes_available: u64,
    pub inodes_total: u64,
    pub inodes_free: u64,
}

/// The `statfs` boundary: the real one is [`statfs`]; tests pass a fake.
pub(crate) type StatFs = fn(&Path) -> io::Result<FsStats>;

/// The real `statvfs(2)` (available = blocks for unprivileged users, as `df`).
pub(crate) fn statfs(path: &Path) -> io::Result<FsStats> {
    let s = nix::sys::statvfs::statvfs(path).map_err(io::Error::from)?;
    let frsize = s.fragment_size() as u64;
    Ok(FsStats {
        bytes_total: (s.blocks() as u64).saturating_mul(frsize),
        bytes_available: (s.blocks_available() as u64).saturating_mul(frsize),
        inodes_total: s.files() as u64,
        inodes_free: s.files_free() as u64,
    })
}

/// Where the measurements come from.
#[derive(Debug, Clone)]
pub struct Sources {
    /// `/proc` (meminfo, loadavg, sys/kernel/pid_max).
    pub proc_root: PathBuf,
    /// `/sys/fs/cgroup`.
    pub cgroup_root: PathBuf,
    /// The node file system: `--root-dir`.
    pub nodefs: PathBuf,
    /// The image file system (CRI `ImageFsInfo`'s mountpoint); `None`: the same as nodefs.
    pub imagefs: Option<PathBuf>,
    /// `--pod-log-dir` and `--root-dir`, for the pods' disk usage.
    pub pod_log_dir: PathBuf,
    pub root_dir: PathBuf,
}

impl Sources {
    /// The host's paths for a picolet with this root and log directory.
    pub fn host(root_dir: &Path, pod_log_dir: &Path) -> Self {
        Sources {
            proc_root: "/proc".into(),
            cgroup_root: "/sys/fs/cgroup".into(),
            nodefs: root_dir.to_path_buf(),
            imagefs: None,
            pod_log_dir: pod_log_dir.to_path_buf(),
            root_dir: root_dir.to_path_buf(),
        }
    }
}

/// The node's signals, and why any could not be measured. `memory_need(capacity)`: the
/// largest `memory.available` threshold (see [`memory_available`]).
pub(crate) fn observe_node(
    src: &Sources,
    statfs: StatFs,
    memory_need: &dyn Fn(u64) -> u64,
) -> (Observations, Vec<String>) {
    let mut obs = Observations::new();
    let mut errors = Vec::new();
    match memory_available(&src.proc_root, &src.cgroup_root, memory_need) {
        Ok(o) => {
            obs.insert(Signal::MemoryAvailable, o);
        }
        Err(e) => errors.push(format!("memory.available: {e}")),
    }
    match pid_available(&src.proc_root) {
        Ok(o) => {
            obs.insert(Signal::PidAvailable, o);
        }
        Err(e) => errors.push(format!("pid.available: {e}")),
    }
    match statfs(&src.nodefs) {
        Ok(s) => {
            fs_observations(
                &mut obs,
                s,
                Signal::NodeFsAvailable,
                Signal::NodeFsInodesFree,
            );
            if src.imagefs.is_none() {
                fs_observations(
                    &mut obs,
                    s,
                    Signal::ImageFsAvailable,
                    Signal::ImageFsInodesFree,
                );
            }
        }
        Err(e) => errors.push(format!("nodefs ({}): {e}", src.nodefs.display())),
    }
    if let Some(p) = &src.imagefs {
        match statfs(p) {
            Ok(s) => fs_observations(
                &mut obs,
                s,
                Signal::ImageFsAvailable,
                Signal::ImageFsInodesFree,
            ),
            Err(e) => errors.push(format!("imagefs ({}): {e}", p.display())),
        }
    }
    (obs, errors)
}

fn fs_observations(obs: &mut Observations, s: FsStats, bytes: Signal, inodes: Signal) {
    obs.insert(
        bytes,
        Observation {
            available: s.bytes_available,
            capacity: s.bytes_total,
        },
    );
    // A file system without an inode count (btrfs reports 0) has no inode signal.
    if s.inodes_total > 0 {
        obs.insert(
            inodes,
            Observation {
                available: s.inodes_free,
                capacity: s.inodes_total,
            },
        );
    }
}

fn read(path: &Path) -> io::Result<String> {
    std::fs::read_to_string(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

/// A `Key:  123 kB` line of `/proc/meminfo`, in bytes.
fn meminfo_bytes(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse::<u64>().ok())
        .map(|kib| kib.saturating_mul(1024))
}

/// A `key value` line of a cgroup `memory.stat`.
fn stat_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

fn invalid(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// kubelet (cadvisor): capacity − working set of the root cgroup, the working set being
/// the usage less the inactive file pages.
///
/// picolet differs in one way: the inactive file pages (the root's `memory.stat`, whose
/// read makes the kernel flush every cgroup's counters — the largest single cost of an
/// idle node, measured with perf) are read only when they can matter: while capacity −
/// usage, a lower bound of the available memory, is below `need(capacity)`, the largest
/// threshold. Above it no threshold can be met, and that lower bound is what is observed.
pub fn memory_available(
    proc_root: &Path,
    cgroup_root: &Path,
    need: &dyn Fn(u64) -> u64,
) -> io::Result<Observation> {
    let meminfo = read(&proc_root.join("meminfo"))?;
    let capacity = meminfo_bytes(&meminfo, "MemTotal")
        .ok_or_else(|| invalid("no MemTotal in meminfo".into()))?;
    let enough = |usage: u64| capacity.saturating_sub(usage) >= need(capacity);
    let working_set = if cgroup_root.join("cgroup.controllers").exists() {
        // cgroup v2: the root has no memory.current.
        let free = meminfo_bytes(&meminfo, "MemFree")
            .ok_or_else(|| invalid("no MemFree in meminfo".into()))?;
        let usage = capacity.saturating_sub(free);
        if enough(usage) {
            return Ok(Observation {
                available: capacity.saturating_sub(usage),
                capacity,
            });
        }
        let inactive = std::fs::read_to_string(cgroup_root.join("memory.stat"))
            .ok()
            .and_then(|t| stat_value(&t, "inactive_file"))
            .or_else(|| meminfo_bytes(&meminfo, "Inactive(file)"))
            .unwrap_or(0);
        usage.saturating_sub(inactive)
    } else {
        let dir = cgroup_root.join("memory");
        let usage_path = dir.join("memory.usage_in_bytes");
        let usage: u64 = read(&usage_path)?
            .trim()
            .parse()
            .map_err(|_| invalid(format!("{}: not a number", usage_path.display())))?;
        if enough(usage) {
            return Ok(Observation {
                available: capacity.saturating_sub(usage),
                capacity,
            });
        }
        let stat = read(&dir.join("memory.stat"))?;
        let inactive = stat_value(&stat, "total_inactive_file").unwrap_or(0);
        usage.saturating_sub(inactive)
    };
    Ok(Observation {
        available: capacity.saturating_sub(working_set),
        capacity,
    })
}

/// kubelet: `pid.available` = `pid_max` − the running processes.
pub(crate) fn pid_available(proc_root: &Path) -> io::Result<Observation> {
    let max_path = proc_root.join("sys/kernel/pid_max");
    let max: u64 = read(&max_path)?
        .trim()
        .parse()
        .map_err(|_| invalid(format!("{}: not a number", max_path.display())))?;
    // loadavg: "0.00 0.01 0.05 1/123 4567" — the fourth field's total.
    let load = read(&proc_root.join("loadavg"))?;
    let procs: u64 = load
        .split_whitespace()
        .nth(3)
        .and_then(|f| f.split_once('/'))
        .and_then(|(_, n)| n.parse().ok())
        .ok_or_else(|| invalid("loadavg: no process count".into()))?;
    Ok(Observation {
        available: max.saturating_sub(procs),
        capacity: max,
    })
}

/// Bytes under `dir` (files only, symlinks not followed, other file systems included:
/// a pod's `emptyDir` is on nodefs unless it is `medium: Memory`, which costs memory).
pub(crate) fn dir_usage(dir: &Path) -> u64 {
    let mut total = 0u64;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = crate::dir_listing::read_dir(&d) else {
            continue;
        };
        for e in entries {
            let Ok(md) = e.metadata() else { continue };
            if md.is_dir() {
                stack.push(e.path());
            } else if md.is_file() {
                total = total.saturating_add(md.len());
            }
        }
    }
    total
}

/// A pod's disk usage: its log directory and its `emptyDir` volumes.
pub(crate) fn pod_disk_usage(src: &Sources, pod: &PodRef) -> u64 {
    let logs = src
        .pod_log_dir
        .join(format!("{}_{}_{}", pod.namespace, pod.name, pod.uid));
    let empty_dirs = src
        .root_dir
        .join("pods")
        .join(&pod.uid)
        .join("volumes/kubernetes.io~empty-dir");
    dir_usage(&logs).saturating_add(dir_usage(&empty_dirs))
}

/// A pod as the runtime's labels name it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct PodRef {
    pub uid: String,
    pub namespace: String,
    pub name: String,
}

/// One pod's usage (`None`: not measured).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct PodUsage {
    /// The sum of its containers' working sets.
    pub memory: Option<u64>,
    pub disk: Option<u64>,
}

/// One observation, for the loop.
#[derive(Debug, Clone, Default)]
pub(crate) struct Observed {
    pub node: Observations,
    /// By pod UID.
    pub pods: HashMap<String, PodUsage>,
}

/// Per pod: the summed working sets of its containers (CRI `ListContainerStats`).
pub(crate) fn pod_memory(stats: &[crate::cri::ContainerStats]) -> HashMap<String, (PodRef, u64)> {
    let mut out: HashMap<String, (PodRef, u64)> = HashMap::new();
    for s in stats {
        let Some(uid) = s.labels.get(cri::POD_UID_LABEL) else {
            continue;
        };
        let label = |k: &str| s.labels.get(k).cloned().unwrap_or_default();
        let entry = out.entry(uid.clone()).or_insert_with(|| {
            (
                PodRef {
                    uid: uid.clone(),
                    namespace: label(cri::POD_NAMESPACE_LABEL),
                    name: label(cri::POD_NAME_LABEL),
                },
                0,
            )
        });
        let ws = s.memory.and_then(|m| m.working_set_bytes).unwrap_or(0);
        entry.1 = entry.1.saturating_add(ws);
    }
    out
}

/// The measuring task: every period, the node's signals (blocking pool), the pods' memory
/// (CRI), and — while a disk threshold is met — the pods' disk usage (blocking pool); sent
/// to the loop. Ends with `shutdown` or when the loop is gone.
pub(crate) async fn run<R: Runtime>(
    runtime: R,
    src: Sources,
    statfs: StatFs,
    thresholds: Vec<super::Threshold>,
    tx: mpsc::Sender<Observed>,
    shutdown: CancellationToken,
) {
    let mut tick = crate::local_tasks::interval(super::MONITORING_PERIOD);
    let mut logged: Vec<String> = Vec::new();
    let mut stats_failing = false;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let s = src.clone();
        let memory: Vec<super::Threshold> = thresholds
            .iter()
            .filter(|t| t.signal == Signal::MemoryAvailable)
            .copied()
            .collect();
        let need = move |capacity| {
            memory
                .iter()
                .map(|t| t.quantity(capacity))
                .max()
                .unwrap_or(0)
        };
        let Ok((node, errors)) =
            tokio::task::spawn_blocking(move || observe_node(&s, statfs, &need)).await
        else {
            continue;
        };
        // Each distinct failure once, not every 10 s.
        for e in &errors {
            if !logged.contains(e) {
                log::warn!("eviction: cannot measure {e}");
            }
        }
        logged = errors;
        // The pods' usage only ranks pods for an eviction: read it only when a threshold
        // is met (at idle, on a healthy node, the cycle makes no CRI call).
        let any_met = thresholds
            .iter()
            .any(|t| node.get(&t.signal).is_some_and(|o| t.met(o)));
        let stats = match async {
            if any_met {
                runtime.list_container_stats(&ListFilter::default()).await
            } else {
                Ok(Vec::new())
            }
        }
        .await
        {
            Ok(s) => {
                stats_failing = false;
                s
            }
            Err(e) => {
                // The runtime being away is logged by the relister; once per streak here.
                if !stats_failing {
                    log::info!("eviction: cannot read container stats: {e}");
                }
                stats_failing = true;
                Vec::new()
            }
        };
        let memory = pod_memory(&stats);
        let disk_met = thresholds.iter().any(|t| {
            t.signal.condition() == super::Condition::Disk
                && node.get(&t.signal).is_some_and(|o| t.met(o))
        });
        let mut pods: HashMap<String, PodUsage> = memory
            .iter()
            .map(|(uid, (_, m))| {
                let usage = PodUsage {
                    memory: (!stats_failing).then_some(*m),
                    disk: None,
                };
                (uid.clone(), usage)
            })
            .collect();
        if disk_met {
            let refs: Vec<PodRef> = memory.into_values().map(|(r, _)| r).collect();
            let s = src.clone();
            if let Ok(disk) = tokio::task::spawn_blocking(move || {
                refs.into_iter()
                    .map(|r| {
                        let d = pod_disk_usage(&s, &r);
                        (r.uid, d)
                    })
                    .collect::<Vec<_>>()
            })
            .await
            {
                for (uid, d) in disk {
                    pods.entry(uid).or_default().disk = Some(d);
                }
            }
        }
        if tx.send(Observed { node, pods }).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A threshold no lower bound meets: the exact working set is always read.
    const EXACT: fn(u64) -> u64 = |_| u64::MAX;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    const MEMINFO: &str =
        "MemTotal:        1000000 kB\nMemFree:          200000 kB\nInactive(file):   100000 kB\n";

    fn fake_statfs(_: &Path) -> io::Result<FsStats> {
        Ok(FsStats {
            bytes_total: 1000,
            bytes_available: 50,
            inodes_total: 100,
            inodes_free: 40,
        })
    }

    fn broken_statfs(p: &Path) -> io::Result<FsStats> {
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            p.display().to_string(),
        ))
    }

    fn sources(dir: &Path) -> Sources {
        Sources {
            proc_root: dir.join("proc"),
            cgroup_root: dir.join("cgroup"),
            nodefs: dir.join("root"),
            imagefs: None,
            pod_log_dir: dir.join("logs"),
            root_dir: dir.join("root"),
        }
    }

    #[test]
    fn memory_on_cgroup_v1_and_v2() {
        let dir = tempfile::tempdir().unwrap();
        let src = sources(dir.path());
        write(&src.proc_root, "meminfo", MEMINFO);
        // v1: usage 600000 KiB − inactive 150000 KiB → working set 450000 KiB.
        write(
            &src.cgroup_root,
            "memory/memory.usage_in_bytes",
            &format!("{}\n", 600_000u64 * 1024),
        );
        write(
            &src.cgroup_root,
            "memory/memory.stat",
            &format!(
                "cache 1\ninactive_file 7\ntotal_inactive_file {}\n",
                150_000u64 * 1024
            ),
        );
        let o = memory_available(&src.proc_root, &src.cgroup_root, &EXACT).unwrap();
        assert_eq!(o.capacity, 1_000_000 * 1024);
        assert_eq!(o.available, 550_000 * 1024);

        // v2 without a root memory.stat: (MemTotal − MemFree) − Inactive(file).
        write(&src.cgroup_root, "cgroup.controllers", "cpu memory\n");
        let o = memory_available(&src.proc_root, &src.cgroup_root, &EXACT).unwrap();
        assert_eq!(o.available, (1_000_000 - 700_000) * 1024);
        // v2 with one: its inactive_file.
        write(
            &src.cgroup_root,
            "memory.stat",
            &format!("inactive_file {}\n", 300_000u64 * 1024),
        );
        let o = memory_available(&src.proc_root, &src.cgroup_root, &EXACT).unwrap();
        assert_eq!(o.available, (1_000_000 - 500_000) * 1024);
    }

    #[test]
    fn memory_stat_is_read_only_when_a_threshold_could_be_met() {
        let dir = tempfile::tempdir().unwrap();
        let src = sources(dir.path());
        write(&src.proc_root, "meminfo", MEMINFO);
        // v1, usage 600000 KiB of 1000000: at least 400000 KiB available.
        write(
            &src.cgroup_root,
            "memory/memory.usage_in_bytes",
            &format!("{}\n", 600_000u64 * 1024),
        );
        // No memory.stat at all: a read of it would fail.
        let at_most = |kib: u64| move |_cap: u64| kib * 1024;
        let o = memory_available(&src.proc_root, &src.cgroup_root, &at_most(400_000)).unwrap();
        assert_eq!(o.available, 400_000 * 1024, "the lower bound");
        assert_eq!(o.capacity, 1_000_000 * 1024);
        memory_available(&src.proc_root, &src.cgroup_root, &at_most(400_001))
            .expect_err("a threshold above the bound needs memory.stat");
        // The threshold as a function of the capacity (a percentage).
        let forty_percent = |cap: u64| cap / 100 * 40;
        memory_available(&src.proc_root, &src.cgroup_root, &forty_percent).unwrap();
        // v2: capacity − (MemTotal − MemFree) = MemFree, from meminfo alone.
        write(&src.cgroup_root, "cgroup.controllers", "cpu memory\n");
        write(&src.cgroup_root, "memory.stat", "inactive_file 1024\n");
        let o = memory_available(&src.proc_root, &src.cgroup_root, &at_most(100)).unwrap();
        assert_eq!(o.available, 200_000 * 1024);
        let o = memory_available(&src.proc_root, &src.cgroup_root, &EXACT).unwrap();
        assert_eq!(o.available, 200_001 * 1024);
    }

    #[test]
    fn node_observations_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        let src = sources(dir.path());
        write(&src.proc_root, "meminfo", MEMINFO);
        write(&src.proc_root, "sys/kernel/pid_max", "4096\n");
        write(&src.proc_root, "loadavg", "0.10 0.20 0.30 2/96 12345\n");
        write(&src.cgroup_root, "cgroup.controllers", "memory\n");
        let (obs, errors) = observe_node(&src, fake_statfs, &EXACT);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            obs[&Signal::PidAvailable],
            Observation {
                available: 4000,
                capacity: 4096
            }
        );
        let fs = Observation {
            available: 50,
            capacity: 1000,
        };
        assert_eq!(obs[&Signal::NodeFsAvailable], fs);
        assert_eq!(obs[&Signal::ImageFsAvailable], fs);
        assert_eq!(
            obs[&Signal::NodeFsInodesFree],
            Observation {
                available: 40,
                capacity: 100
            }
        );

        // Nothing measurable: every signal is left out, each with its reason.
        let empty = sources(&dir.path().join("none"));
        let (obs, errors) = observe_node(&empty, broken_statfs, &EXACT);
        assert!(obs.is_empty());
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(errors[0].starts_with("memory.available:"), "{errors:?}");
    }

    #[test]
    fn pod_usage_from_stats_and_directories() {
        use crate::cri::{ContainerStats, MemoryUsage};
        let stat = |uid: &str, ws: Option<u64>| ContainerStats {
            labels: [
                (cri::POD_UID_LABEL.to_string(), uid.to_string()),
                (cri::POD_NAMESPACE_LABEL.to_string(), "ns".to_string()),
                (cri::POD_NAME_LABEL.to_string(), format!("pod-{uid}")),
            ]
            .into(),
            memory: Some(MemoryUsage {
                working_set_bytes: ws,
                ..Default::default()
            }),
            ..Default::default()
        };
        let m = pod_memory(&[stat("a", Some(10)), stat("a", Some(5)), stat("b", None)]);
        assert_eq!(m["a"].1, 15);
        assert_eq!(m["b"].1, 0);
        assert_eq!(m["a"].0.name, "pod-a");

        let dir = tempfile::tempdir().unwrap();
        let src = sources(dir.path());
        write(&src.pod_log_dir, "ns_pod-a_a/c/0.log", "12345");
        write(
            &src.root_dir,
            "pods/a/volumes/kubernetes.io~empty-dir/v/f",
            "123",
        );
        assert_eq!(pod_disk_usage(&src, &m["a"].0), 8);
        assert_eq!(pod_disk_usage(&src, &m["b"].0), 0);
    }
}
