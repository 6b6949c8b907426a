//! The container manager's cgroup half (kubelet: `pkg/kubelet/cm`): the node allocatable
//! cgroup `kubepods`, the QoS cgroups `kubepods/burstable` and `kubepods/besteffort`, and
//! one cgroup per pod, `kubepods[/<qos>]/pod<uid>`, passed to the runtime as the sandbox's
//! cgroup parent. With `--cgroups-per-qos=false` none of this exists and sandboxes get
//! `--cgroup-root` (or the runtime's default).
//!
//! Owns: the pure part — names (cgroupfs and systemd), the resource values (pod limits,
//! QoS cpu shares, node allocatable), and the plan of file-system operations for cgroup v1
//! and v2 ([`Op`]); [`manager`] executes plans on an injected root off the event loop.
//!
//! Must never: do I/O (that is [`manager`]).
//!
//! Deliberately different from upstream:
//! - `--cgroup-driver=systemd`: picolet only *names* the slices
//!   (`kubepods-burstable-pod<uid_>.slice`). systemd creates a slice when the runtime
//!   (runc with `SystemdCgroup = true`) starts the pod's first scope in it; the limits on
//!   slices need systemd's D-Bus API, which picolet does not speak, so with that driver no
//!   pod, QoS or node allocatable limits are written (a WARN at start says so).
//! - QoS memory limits: like the kubelet without the alpha `QOSReserved` gate, the QoS
//!   cgroups get cpu shares only; their memory is bounded by `kubepods`.

pub(crate) mod devicemanager;
pub(crate) mod manager;

use crate::api::Pod;
use crate::qos::{self, QosClass};

/// `--cgroup-driver`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CgroupDriver {
    #[default]
    Cgroupfs,
    Systemd,
}

impl CgroupDriver {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "cgroupfs" => Some(CgroupDriver::Cgroupfs),
            "systemd" => Some(CgroupDriver::Systemd),
            _ => None,
        }
    }
}

/// The host's cgroup hierarchy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    /// One hierarchy per controller under the mount root (`cpu/`, `memory/`, `pids/`…).
    V1,
    /// The unified hierarchy.
    V2,
}

/// The resources reserved away from pods (kubelet `--system-reserved`, `--kube-reserved`,
/// and the hard eviction threshold for memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reserved {
    pub cpu_milli: i64,
    pub memory_bytes: i64,
}

/// kubelet: the default `--eviction-hard` `memory.available<100Mi` (the daemon takes the
/// parsed `--eviction-hard`; tests use this).
#[cfg(test)]
pub(crate) const DEFAULT_EVICTION_HARD_MEMORY: i64 = 100 << 20;

/// Node allocatable (kubelet `GetNodeAllocatableReservation` subtracted from capacity).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NodeAllocatable {
    /// `--system-reserved` + `--kube-reserved`.
    pub reserved: Reserved,
    /// The hard eviction threshold of `memory.available` (bytes).
    pub eviction_hard_memory: i64,
}

impl NodeAllocatable {
    /// What the Node reports and admission uses: capacity − reserved − hard eviction
    /// (kubelet: `GetNodeAllocatable`), never below 0.
    pub fn allocatable(&self, cpu_capacity_milli: i64, memory_capacity: i64) -> (i64, i64) {
        (
            (cpu_capacity_milli - self.reserved.cpu_milli).max(0),
            (memory_capacity - self.reserved.memory_bytes - self.eviction_hard_memory).max(0),
        )
    }

    /// What `kubepods` is limited to with `--enforce-node-allocatable=pods`: capacity −
    /// reserved (kubelet: `getNodeAllocatableInternalAbsolute`; the hard eviction margin is
    /// left to the eviction manager, not the cgroup).
    pub fn enforced(&self, cpu_capacity_milli: i64, memory_capacity: i64) -> (i64, i64) {
        (
            (cpu_capacity_milli - self.reserved.cpu_milli).max(0),
            (memory_capacity - self.reserved.memory_bytes).max(0),
        )
    }
}

/// How pod cgroups are laid out (from the options and the detected hierarchy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub version: CgroupVersion,
    pub driver: CgroupDriver,
    /// `--cgroup-root` split into components ("/" → none).
    pub root: Vec<String>,
    /// v1: the controllers among [`V1_CONTROLLERS`] the kernel enables (a Raspberry Pi
    /// kernel without `cgroup_enable=memory` has no memory hierarchy).
    pub v1_controllers: Vec<&'static str>,
}

/// The components of a cgroup name, driver-neutral (kubelet: `CgroupName`).
pub(crate) type CgroupName = Vec<String>;

/// kubelet: `defaultNodeAllocatableCgroupName`.
pub(crate) const KUBEPODS: &str = "kubepods";
/// kubelet: `MinShares`, `MaxShares`, `QuotaPeriod`, `MinQuotaPeriod`.
pub(crate) const MIN_SHARES: u64 = 2;
pub(crate) const MAX_SHARES: u64 = 262_144;
pub(crate) const CFS_PERIOD_US: u64 = 100_000;
pub(crate) const MIN_QUOTA_US: i64 = 1000;

/// `--cgroup-root` → components (`/a/b` → `[a, b]`; with systemd a slice name such as
/// `/system.slice` is taken as the component `system`).
pub fn split_root(root: &str) -> Vec<String> {
    root.split('/')
        .filter(|c| !c.is_empty())
        .map(|c| c.strip_suffix(".slice").unwrap_or(c).to_string())
        .collect()
}

impl Layout {
    fn name(&self, parts: &[&str]) -> CgroupName {
        let mut n = self.root.clone();
        n.extend(parts.iter().map(|s| s.to_string()));
        n
    }

    /// `kubepods`.
    pub fn kubepods(&self) -> CgroupName {
        self.name(&[KUBEPODS])
    }

    /// The QoS cgroup of a class (kubelet: Guaranteed pods sit directly under `kubepods`).
    pub fn qos_cgroup(&self, class: QosClass) -> CgroupName {
        match class {
            QosClass::Guaranteed => self.kubepods(),
            QosClass::Burstable => self.name(&[KUBEPODS, "burstable"]),
            QosClass::BestEffort => self.name(&[KUBEPODS, "besteffort"]),
        }
    }

    /// kubelet: `GetPodContainerName` — `<qos cgroup>/pod<uid>`.
    pub fn pod_cgroup(&self, class: QosClass, uid: &str) -> CgroupName {
        let mut n = self.qos_cgroup(class);
        n.push(format!("pod{uid}"));
        n
    }

    /// The path of a cgroup relative to the hierarchy's root, as the runtime and the file
    /// system see it: cgroupfs `/kubepods/burstable/pod<uid>`; systemd
    /// `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice`
    /// (kubelet: `CgroupName.ToCgroupfs`, `ToSystemd`: `-` inside a component becomes `_`,
    /// each slice's name repeats its ancestors').
    pub fn path(&self, name: &CgroupName) -> String {
        match self.driver {
            CgroupDriver::Cgroupfs => {
                let mut s = String::new();
                for c in name {
                    s.push('/');
                    s.push_str(c);
                }
                if s.is_empty() { "/".into() } else { s }
            }
            CgroupDriver::Systemd => {
                let mut s = String::new();
                let mut prefix = String::new();
                for c in name {
                    if !prefix.is_empty() {
                        prefix.push('-');
                    }
                    prefix.push_str(&c.replace('-', "_"));
                    s.push('/');
                    s.push_str(&prefix);
                    s.push_str(".slice");
                }
                if s.is_empty() { "/".into() } else { s }
            }
        }
    }

    /// The sandbox's cgroup parent (kubelet: `GetPodCgroupParent`). containerd takes the
    /// path with cgroupfs and the last slice of it with systemd (`path.Base`).
    pub fn sandbox_parent(&self, pod: &Pod) -> String {
        self.path(&self.pod_cgroup(qos::pod_qos(pod), pod.uid()))
    }
}

/// Values written to a cgroup (kubelet: `ResourceConfig`); `None`: left alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Resources {
    pub cpu_shares: Option<u64>,
    /// CFS quota in µs per [`CFS_PERIOD_US`].
    pub cpu_quota: Option<i64>,
    pub memory_limit: Option<i64>,
}

/// kubelet: `MilliCPUToShares`.
pub(crate) fn milli_cpu_to_shares(milli: i64) -> u64 {
    if milli <= 0 {
        return MIN_SHARES;
    }
    ((milli as u64).saturating_mul(1024) / 1000).clamp(MIN_SHARES, MAX_SHARES)
}

/// kubelet: `MilliCPUToQuota` (period 100 ms; at least 1 ms).
pub(crate) fn milli_cpu_to_quota(milli: i64) -> i64 {
    if milli <= 0 {
        return 0;
    }
    (milli.saturating_mul(CFS_PERIOD_US as i64) / 1000).max(MIN_QUOTA_US)
}

/// kubelet: `CpuSharesToCpuWeight` (cgroup v2): 2…262144 → 1…10000.
pub(crate) fn shares_to_weight(shares: u64) -> u64 {
    if shares == 0 {
        return 0;
    }
    1 + ((shares.saturating_sub(2)) * 9999) / 262_142
}

/// A pod's cpu request (milli) and its cpu and memory limits (when declared): kubelet
/// `ResourceConfigForPod` ([`qos::pod_request`], [`qos::pod_limit`]).
fn pod_totals(pod: &Pod) -> (i64, Option<i64>, Option<i64>) {
    (
        qos::pod_request(pod, "cpu"),
        qos::pod_limit(pod, "cpu"),
        qos::pod_limit(pod, "memory"),
    )
}

/// The cpu request the burstable QoS cgroup counts for a pod (millicores).
pub(crate) fn pod_cpu_request(pod: &Pod) -> i64 {
    pod_totals(pod).0
}

/// kubelet: `ResourceConfigForPod` — cpu shares from the requests; the CFS quota and the
/// memory limit only when every container limits cpu (memory); BestEffort: minimal shares.
pub(crate) fn pod_resources(pod: &Pod) -> Resources {
    let (cpu_request, cpu_limit, mem_limit) = pod_totals(pod);
    match qos::pod_qos(pod) {
        QosClass::BestEffort => Resources {
            cpu_shares: Some(MIN_SHARES),
            ..Resources::default()
        },
        QosClass::Guaranteed | QosClass::Burstable => Resources {
            cpu_shares: Some(milli_cpu_to_shares(cpu_request)),
            cpu_quota: cpu_limit.map(milli_cpu_to_quota),
            memory_limit: mem_limit,
        },
    }
}

/// kubelet: `qosContainerManager.setCPUCgroupConfig` — besteffort gets the minimal shares,
/// burstable the shares of the summed cpu requests of its pods.
pub(crate) fn qos_resources(burstable_cpu_request_milli: i64) -> [(QosClass, Resources); 2] {
    [
        (
            QosClass::Burstable,
            Resources {
                cpu_shares: Some(milli_cpu_to_shares(burstable_cpu_request_milli)),
                ..Resources::default()
            },
        ),
        (
            QosClass::BestEffort,
            Resources {
                cpu_shares: Some(MIN_SHARES),
                ..Resources::default()
            },
        ),
    ]
}

/// kubelet: `getCgroupConfig(nodeAllocatable)` for `kubepods`: shares from the cpu, the
/// memory limit.
pub fn kubepods_resources(cpu_milli: i64, memory_bytes: i64) -> Resources {
    Resources {
        cpu_shares: Some(milli_cpu_to_shares(cpu_milli)),
        cpu_quota: None,
        memory_limit: (memory_bytes > 0).then_some(memory_bytes),
    }
}

/// kubelet: `events.FailedToCreatePodContainer`.
pub(crate) const FAILED_CREATE_POD_CONTAINER: &str = "FailedCreatePodContainer";

/// One file-system step, relative to the cgroup mount root (`/sys/fs/cgroup`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Op {
    /// `mkdir -p` of a cgroup directory.
    Mkdir(String),
    /// Write `value` to the file (a cgroup knob).
    Write { file: String, value: String },
    /// cgroup v2: enable the available controllers among cpu, memory, pids for the
    /// children of this directory (`cgroup.subtree_control`).
    EnableControllers(String),
}

/// v1 controllers picolet creates cgroups in and writes to (runc creates the others on its
/// own when it starts a container under the pod's cgroup).
pub const V1_CONTROLLERS: [&str; 3] = ["cpu", "memory", "pids"];

/// The operations that create `name` (and its missing ancestors) and set `res`, for
/// cgroupfs (systemd: nothing, see the module doc).
pub(crate) fn ensure_ops(layout: &Layout, name: &CgroupName, res: &Resources) -> Vec<Op> {
    if layout.driver == CgroupDriver::Systemd {
        return Vec::new();
    }
    let path = layout.path(name);
    let mut ops = Vec::new();
    match layout.version {
        CgroupVersion::V1 => {
            let has = |c: &str| layout.v1_controllers.contains(&c);
            for c in V1_CONTROLLERS.into_iter().filter(|c| has(c)) {
                ops.push(Op::Mkdir(format!("{c}{path}")));
            }
            let w = |ctrl: &str, file: &str, value: String| Op::Write {
                file: format!("{ctrl}{path}/{file}"),
                value,
            };
            if let Some(s) = res.cpu_shares.filter(|_| has("cpu")) {
                ops.push(w("cpu", "cpu.shares", s.to_string()));
            }
            if let Some(q) = res.cpu_quota.filter(|_| has("cpu")) {
                ops.push(w("cpu", "cpu.cfs_period_us", CFS_PERIOD_US.to_string()));
                ops.push(w("cpu", "cpu.cfs_quota_us", q.to_string()));
            }
            if let Some(m) = res.memory_limit.filter(|_| has("memory")) {
                ops.push(w("memory", "memory.limit_in_bytes", m.to_string()));
            }
        }
        CgroupVersion::V2 => {
            // Controllers reach a child only through every ancestor's subtree_control.
            let mut parent = String::new();
            for c in name {
                ops.push(Op::EnableControllers(parent.clone()));
                parent = format!("{parent}/{c}");
            }
            ops.push(Op::Mkdir(path.trim_start_matches('/').to_string()));
            let rel = path.trim_start_matches('/');
            let w = |file: &str, value: String| Op::Write {
                file: format!("{rel}/{file}"),
                value,
            };
            if let Some(s) = res.cpu_shares {
                ops.push(w("cpu.weight", shares_to_weight(s).to_string()));
            }
            if let Some(q) = res.cpu_quota {
                ops.push(w("cpu.max", format!("{q} {CFS_PERIOD_US}")));
            }
            if let Some(m) = res.memory_limit {
                ops.push(w("memory.max", m.to_string()));
            }
        }
    }
    // Mkdir of a nested path also creates the ancestors: fine, they get their values from
    // their own ops (kubepods and the QoS cgroups are planned first).
    for op in &mut ops {
        if let Op::EnableControllers(p) = op {
            *p = p.trim_start_matches('/').to_string();
        }
    }
    ops
}

/// The operations that bring `kubepods` and the QoS cgroups to their values.
pub(crate) fn node_ops(
    layout: &Layout,
    kubepods: &Resources,
    burstable_cpu_request: i64,
) -> Vec<Op> {
    let mut ops = ensure_ops(layout, &layout.kubepods(), kubepods);
    ops.extend(qos_ops(layout, burstable_cpu_request));
    ops
}

/// The operations that update the QoS cgroups.
pub(crate) fn qos_ops(layout: &Layout, burstable_cpu_request: i64) -> Vec<Op> {
    qos_resources(burstable_cpu_request)
        .iter()
        .flat_map(|(class, res)| ensure_ops(layout, &layout.qos_cgroup(*class), res))
        .collect()
}

/// The directories (relative to the mount root) a pod's cgroup may have, to remove once the
/// pod is terminated. v1: every hierarchy, since runc creates the pod's cgroup in all of
/// them; the caller lists the mounted hierarchies.
pub(crate) fn pod_dirs(
    layout: &Layout,
    class: QosClass,
    uid: &str,
    v1_hierarchies: &[String],
) -> Vec<String> {
    let path = layout.path(&layout.pod_cgroup(class, uid));
    match layout.version {
        CgroupVersion::V1 => v1_hierarchies
            .iter()
            .map(|h| format!("{h}{path}"))
            .collect(),
        CgroupVersion::V2 => vec![path.trim_start_matches('/').to_string()],
    }
}

#[cfg(test)]
mod tests;
