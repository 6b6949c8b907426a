//! The effects of [`crate::cm`]: one worker task takes the plans in the order the event
//! loop made them and applies each on the blocking pool (`spawn_blocking`) to the cgroup
//! file system under an injected root (`/sys/fs/cgroup`, a tempdir in tests), so the last
//! QoS value planned is the last written.
//!
//! Owns: the pods whose cgroups exist (their QoS class and cpu request, for the burstable
//! cgroup's shares; kubelet: the QoS container manager's `activePods`), the worker task.
//! Must never: touch the file system on the event loop's thread.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use tokio::sync::mpsc;

use super::{CgroupDriver, CgroupVersion, Layout, Op, Resources};
use crate::api::Pod;
use crate::qos::{self, QosClass};

#[derive(Debug, thiserror::Error)]
pub(crate) enum CgroupError {
    #[error("cgroup {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("cgroup {path}: not removed, still busy (a process is left in it)")]
    Busy { path: String },
    #[error("the cgroup worker is gone")]
    WorkerGone,
    #[error("cgroup work failed: {0}")]
    Join(String),
}

/// What [`PodCgroups::start`] needs (the daemon builds it from the options).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodCgroupsConfig {
    pub layout: Layout,
    /// The cgroup mount root, `/sys/fs/cgroup`.
    pub mount_root: PathBuf,
    /// `kubepods`' limits (node allocatable when enforced, else the capacity).
    pub kubepods: Resources,
}

enum Work {
    Apply(Vec<Op>),
    /// Remove a pod's cgroup from every hierarchy (found by the worker), then apply.
    RemovePod {
        class: QosClass,
        uid: String,
        then: Vec<Op>,
    },
    /// Remove the pod cgroups of pods not in `keep`.
    RemoveOrphans {
        keep: HashSet<String>,
    },
}

struct Job {
    work: Work,
    reply: Option<tokio::sync::oneshot::Sender<Result<(), CgroupError>>>,
}

/// The loop's handle; clones share the state and the worker.
#[derive(Clone)]
pub(crate) struct PodCgroups {
    layout: Layout,
    /// uid → (class, cpu request in millicores) of the pods whose cgroups picolet made or
    /// saw.
    pods: Rc<RefCell<BTreeMap<String, (QosClass, i64)>>>,
    /// Pods whose cgroup removal failed: retried by [`PodCgroups::retry_removals`].
    pending_removal: Rc<RefCell<BTreeSet<String>>>,
    tx: mpsc::UnboundedSender<Job>,
}

impl PodCgroups {
    /// Starts the worker (inside a `LocalSet`) and queues the creation of `kubepods` and
    /// the QoS cgroups (a failure is an ERROR line; each pod's creation then fails with its
    /// own reason). The worker ends when the last handle is dropped.
    pub(crate) fn start(cfg: PodCgroupsConfig) -> Self {
        let (tx, rx) = mpsc::unbounded_channel::<Job>();
        crate::local_tasks::spawn_local(worker(
            Arc::new(cfg.layout.clone()),
            Arc::new(cfg.mount_root.clone()),
            rx,
        ));
        let this = PodCgroups {
            layout: cfg.layout.clone(),
            pods: Rc::default(),
            pending_removal: Rc::default(),
            tx,
        };
        // With the systemd driver no limits are written: slices belong to systemd and are
        // only named (the options refuse this driver with --cgroups-per-qos; the layout
        // keeps the naming for a D-Bus client).
        if cfg.layout.driver != CgroupDriver::Systemd {
            let ops = super::node_ops(&cfg.layout, &cfg.kubepods, 0);
            this.send(Work::Apply(ops), None);
        }
        this
    }

    fn send(
        &self,
        work: Work,
        reply: Option<tokio::sync::oneshot::Sender<Result<(), CgroupError>>>,
    ) -> bool {
        self.tx.send(Job { work, reply }).is_ok()
    }

    async fn run(&self, work: Work) -> Result<(), CgroupError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if !self.send(work, Some(tx)) {
            return Err(CgroupError::WorkerGone);
        }
        rx.await.unwrap_or(Err(CgroupError::WorkerGone))
    }

    /// The sandbox's cgroup parent.
    pub(crate) fn sandbox_parent(&self, pod: &Pod) -> String {
        self.layout.sandbox_parent(pod)
    }

    fn burstable_request(&self) -> i64 {
        self.pods
            .borrow()
            .values()
            .filter(|(c, _)| *c == QosClass::Burstable)
            .map(|(_, r)| *r)
            .sum()
    }

    /// Counts a pod that runs (adopted after a restart, or synced again); queues a QoS
    /// update when it changes the burstable total. No I/O here.
    pub(crate) fn track(&self, pod: &Pod) {
        let class = qos::pod_qos(pod);
        let request = super::pod_cpu_request(pod);
        let old = self
            .pods
            .borrow_mut()
            .insert(pod.uid().to_string(), (class, request));
        if old != Some((class, request))
            && (class == QosClass::Burstable || old.is_some_and(|o| o.0 == QosClass::Burstable))
        {
            let ops = super::qos_ops(&self.layout, self.burstable_request());
            self.send(Work::Apply(ops), None);
        }
    }

    /// kubelet: `UpdateQOSCgroups` then `podContainerManager.EnsureExists` — before the
    /// pod's sandbox is created. Returns the sandbox's cgroup parent.
    pub(crate) async fn ensure(&self, pod: &Pod) -> Result<String, CgroupError> {
        let class = qos::pod_qos(pod);
        self.pending_removal.borrow_mut().remove(pod.uid());
        self.pods
            .borrow_mut()
            .insert(pod.uid().to_string(), (class, super::pod_cpu_request(pod)));
        let mut ops = super::qos_ops(&self.layout, self.burstable_request());
        let name = self.layout.pod_cgroup(class, pod.uid());
        ops.extend(super::ensure_ops(
            &self.layout,
            &name,
            &super::pod_resources(pod),
        ));
        self.run(Work::Apply(ops)).await?;
        Ok(self.layout.path(&name))
    }

    /// kubelet: `SetPodCgroupConfig` in an in-place resize — the pod cgroup's cpu values
    /// (shares and quota) or its memory limit from the (allocated) pod, and the burstable
    /// cgroup's shares after it. A limit the pod does not set is left as it is.
    pub(crate) async fn resize(&self, pod: &Pod, cpu: bool) -> Result<(), CgroupError> {
        if self.layout.driver == CgroupDriver::Systemd {
            return Ok(());
        }
        self.track(pod);
        let all = super::pod_resources(pod);
        let res = if cpu {
            super::Resources {
                memory_limit: None,
                ..all
            }
        } else {
            super::Resources {
                memory_limit: all.memory_limit,
                ..Default::default()
            }
        };
        let name = self.layout.pod_cgroup(qos::pod_qos(pod), pod.uid());
        self.run(Work::Apply(super::ensure_ops(&self.layout, &name, &res)))
            .await
    }

    /// The pod is terminated and its containers gone: its cgroup goes (kubelet:
    /// `cleanupOrphanedPodCgroups` → `podContainerManager.Destroy`), then the QoS shares
    /// are updated. A failure is kept for [`PodCgroups::retry_removals`].
    pub(crate) async fn remove(&self, uid: &str, pod: Option<&Pod>) -> Result<(), CgroupError> {
        if self.layout.driver == CgroupDriver::Systemd {
            self.pods.borrow_mut().remove(uid);
            return Ok(());
        }
        let known = self.pods.borrow_mut().remove(uid).map(|(c, _)| c);
        let classes: Vec<QosClass> = match known.or_else(|| pod.map(qos::pod_qos)) {
            Some(c) => vec![c],
            // Not seen since a restart and no spec: look in every QoS cgroup.
            None => vec![
                QosClass::Guaranteed,
                QosClass::Burstable,
                QosClass::BestEffort,
            ],
        };
        let mut result = Ok(());
        for (i, class) in classes.iter().enumerate() {
            let then = if i + 1 == classes.len() {
                super::qos_ops(&self.layout, self.burstable_request())
            } else {
                Vec::new()
            };
            let r = self
                .run(Work::RemovePod {
                    class: *class,
                    uid: uid.to_string(),
                    then,
                })
                .await;
            if r.is_err() {
                result = r;
            }
        }
        if result.is_err() {
            self.pending_removal.borrow_mut().insert(uid.to_string());
        } else {
            self.pending_removal.borrow_mut().remove(uid);
        }
        result
    }

    /// kubelet: `cleanupOrphanedPodCgroups` — the pod cgroups of pods that are not in
    /// `keep` (the desired pods and those the runtime holds) are removed: their pod went
    /// while picolet was down, or went without a termination picolet saw. A cgroup still
    /// busy is left for the next call.
    pub(crate) fn remove_orphans(&self, mut keep: HashSet<String>) {
        if self.layout.driver == CgroupDriver::Systemd {
            return;
        }
        keep.extend(self.pods.borrow().keys().cloned());
        self.send(Work::RemoveOrphans { keep }, None);
    }

    pub(crate) fn has_pending_removals(&self) -> bool {
        !self.pending_removal.borrow().is_empty()
    }

    /// Housekeeping: retries the removals that failed (each once per call).
    pub(crate) async fn retry_removals(&self) {
        let pending: Vec<String> = self.pending_removal.borrow().iter().cloned().collect();
        for uid in pending {
            match self.remove(&uid, None).await {
                Ok(()) => log::info!("cgroups: pod {uid}: cgroup removed on retry"),
                Err(e) => log::debug!("cgroups: pod {uid}: still not removed: {e}"),
            }
        }
    }
}

async fn worker(layout: Arc<Layout>, root: Arc<PathBuf>, mut rx: mpsc::UnboundedReceiver<Job>) {
    while let Some(job) = rx.recv().await {
        let (layout, root) = (Arc::clone(&layout), Arc::clone(&root));
        let work = job.work;
        let result = tokio::task::spawn_blocking(move || execute(&layout, &root, work))
            .await
            .unwrap_or_else(|e| Err(CgroupError::Join(e.to_string())));
        match job.reply {
            Some(reply) => {
                let _ = reply.send(result);
            }
            None => {
                if let Err(e) = result {
                    log::error!("cgroups: {e}");
                }
            }
        }
    }
}

fn execute(layout: &Layout, root: &Path, work: Work) -> Result<(), CgroupError> {
    match work {
        Work::Apply(ops) => apply(root, &ops),
        Work::RemovePod { class, uid, then } => {
            let hierarchies = match layout.version {
                CgroupVersion::V1 => v1_hierarchies(root),
                CgroupVersion::V2 => Vec::new(),
            };
            let dirs = super::pod_dirs(layout, class, &uid, &hierarchies);
            remove_dirs(root, &dirs).and_then(|()| apply(root, &then))
        }
        Work::RemoveOrphans { keep } => {
            remove_orphans(layout, root, &keep);
            Ok(())
        }
    }
}

/// The file-system half of [`PodCgroups::remove_orphans`].
pub(crate) fn remove_orphans(layout: &Layout, root: &Path, keep: &HashSet<String>) {
    let hierarchies = match layout.version {
        CgroupVersion::V1 => v1_hierarchies(root),
        CgroupVersion::V2 => Vec::new(),
    };
    // Where pod cgroups are listed: v1's first managed controller, or v2's one tree.
    let listing = match layout.version {
        CgroupVersion::V1 => match layout.v1_controllers.first() {
            Some(c) => root.join(c),
            None => return,
        },
        CgroupVersion::V2 => root.to_path_buf(),
    };
    for class in [
        QosClass::Guaranteed,
        QosClass::Burstable,
        QosClass::BestEffort,
    ] {
        let qos_dir = listing.join(
            layout
                .path(&layout.qos_cgroup(class))
                .trim_start_matches('/'),
        );
        let Ok(entries) = std::fs::read_dir(&qos_dir) else {
            continue;
        };
        for e in entries.flatten() {
            let Some(uid) = e
                .file_name()
                .to_str()
                .and_then(|n| n.strip_prefix("pod"))
                .map(str::to_string)
            else {
                continue;
            };
            if keep.contains(&uid) {
                continue;
            }
            let dirs = super::pod_dirs(layout, class, &uid, &hierarchies);
            match remove_dirs(root, &dirs) {
                Ok(()) => log::info!(
                    "cgroups: removed the cgroup of pod {uid}: no source wants it and the runtime holds nothing of it"
                ),
                Err(e) => log::debug!("cgroups: orphaned pod {uid}: {e}"),
            }
        }
    }
}

/// The mounted v1 hierarchies under `root` (`cpu,cpuacct`, `memory`, …; the symlinks such
/// as `cpu` → `cpu,cpuacct` are skipped so each hierarchy counts once).
pub(crate) fn v1_hierarchies(root: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut out: Vec<String> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    crate::sort::sort(&mut out);
    out
}

/// Applies `ops` under `root`, stopping at the first failure.
pub(crate) fn apply(root: &Path, ops: &[Op]) -> Result<(), CgroupError> {
    let io = |p: &Path| {
        let path = p.display().to_string();
        move |source| CgroupError::Io { path, source }
    };
    for op in ops {
        match op {
            Op::Mkdir(rel) => {
                let p = root.join(rel);
                std::fs::create_dir_all(&p).map_err(io(&p))?;
            }
            Op::Write { file, value } => {
                let p = root.join(file);
                let current = std::fs::read_to_string(&p).unwrap_or_default();
                if current.trim() != value {
                    std::fs::write(&p, value).map_err(io(&p))?;
                }
            }
            Op::EnableControllers(rel) => {
                let dir = root.join(rel);
                let available = std::fs::read_to_string(dir.join("cgroup.controllers"))
                    .map_err(io(&dir.join("cgroup.controllers")))?;
                let enabled =
                    std::fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap_or_default();
                let want: Vec<String> = available
                    .split_whitespace()
                    .filter(|c| ["cpu", "memory", "pids"].contains(c))
                    .filter(|c| !enabled.split_whitespace().any(|e| e == *c))
                    .map(|c| format!("+{c}"))
                    .collect();
                if !want.is_empty() {
                    let p = dir.join("cgroup.subtree_control");
                    std::fs::write(&p, want.join(" ")).map_err(io(&p))?;
                }
            }
        }
    }
    Ok(())
}

/// Removes the cgroup directories (and any child cgroups left in them, deepest first). A
/// directory already gone is fine; one with a process left is [`CgroupError::Busy`].
pub(crate) fn remove_dirs(root: &Path, dirs: &[String]) -> Result<(), CgroupError> {
    let mut first_err = None;
    for rel in dirs {
        let p = root.join(rel);
        if !p.is_dir() {
            continue;
        }
        if let Err(e) = remove_cgroup(&p) {
            first_err.get_or_insert(e);
        }
    }
    first_err.map_or(Ok(()), Err)
}

/// `rmdir` of a cgroup and its child cgroups (a cgroup's knob files go with their
/// directory). A plain directory tree (the tests' injected root) says "not empty" where
/// cgroupfs never does: its files are removed as the kernel drops a cgroup's knobs.
fn remove_cgroup(dir: &Path) -> Result<(), CgroupError> {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_cgroup(&e.path())?;
            }
        }
    }
    match std::fs::remove_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::DirectoryNotEmpty => {
            if let Ok(entries) = std::fs::read_dir(dir) {
                for e in entries.flatten() {
                    if e.file_type().is_ok_and(|t| t.is_file()) {
                        let _ = std::fs::remove_file(e.path());
                    }
                }
            }
            std::fs::remove_dir(dir).map_err(|source| CgroupError::Io {
                path: dir.display().to_string(),
                source,
            })
        }
        Err(e) if e.raw_os_error() == Some(nix::libc::EBUSY) => Err(CgroupError::Busy {
            path: dir.display().to_string(),
        }),
        Err(source) => Err(CgroupError::Io {
            path: dir.display().to_string(),
            source,
        }),
    }
}
