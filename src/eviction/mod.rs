//! The eviction manager, hard thresholds only (kubelet: `pkg/kubelet/eviction`,
//! `managerImpl.synchronize`).
//!
//! Owns: the pure decisions — parsing `--eviction-hard` ([`parse_thresholds`]), which
//! thresholds the node's signals meet, the node conditions with their transition period
//! and what to do next ([`Manager::step`]), and the ranking of pods for eviction
//! ([`rank`]). Measuring lives in [`observe`] (files and `statfs` under injected roots, the
//! runtime's container stats), as a task of its own that sends an [`observe::Observed`]
//! every 10 s to the event loop; the loop runs [`Manager::step`] and does what it says
//! (a forced container GC pass, one pod killed with a Failed/Evicted status).
//!
//! One cycle, as upstream's `synchronize`:
//! 1. observe the signals (`memory.available` = capacity − working set of the root cgroup;
//!    `nodefs.*` = `statfs` of `--root-dir`; `imagefs.*` = `statfs` of the image file
//!    system, else the same as nodefs; `pid.available` = `pid_max` − processes);
//! 2. every met threshold marks its condition (`MemoryPressure`, `DiskPressure`,
//!    `PIDPressure`) observed now; a condition stays reported until it has not been observed
//!    for `--eviction-pressure-transition-period` (5 min);
//! 3. nothing met: done. The previous eviction still terminating: wait (kubelet:
//!    `waitForPodsCleanup`);
//! 4. the threshold to act on: memory first, then the file systems, then pids (kubelet:
//!    `byEvictionPriority`);
//! 5. a disk signal not reclaimed yet in this episode: reclaim node-level resources first
//!    (dead containers; unused images once the image GC is wired — [`ReclaimStep`]);
//! 6. else evict the first pod of the ranking that may be evicted (never a static, mirror or
//!    system-critical pod), with a grace period of 1 s (kubelet:
//!    `immediateEvictionGracePeriodSeconds` for hard thresholds).
//!
//! Deliberate differences: upstream re-observes right after reclaiming and evicts in the
//! same cycle if it did not help; picolet measures the effect at the next observation (10 s
//! later). Soft thresholds, `--eviction-minimum-reclaim`, local-storage (ephemeral-storage
//! limit) evictions and the memcg threshold notifier are not implemented. A pod's disk
//! usage is its log directory and its `emptyDir` volumes (the CRI stats picolet reads have
//! no writable-layer figure), so disk ranking misses what a container writes to its root
//! file system.
//!
//! Must never: do I/O (this file), evict a critical pod.

pub(crate) mod observe;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use tokio::time::Instant;

/// kubelet: `evictionMonitoringPeriod`.
pub(crate) const MONITORING_PERIOD: Duration = Duration::from_secs(10);

/// The reclaim of unused images the eviction manager asks for under disk pressure (the
/// daemon makes it from the image manager: `ImageManager::delete_unused_images`).
#[derive(Clone)]
pub(crate) struct ImageReclaim(
    pub std::rc::Rc<dyn Fn() -> futures_util::future::LocalBoxFuture<'static, ()>>,
);

impl std::fmt::Debug for ImageReclaim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ImageReclaim")
    }
}
/// kubelet: `evictionPressureTransitionPeriod` default.
#[cfg(test)]
pub(crate) const DEFAULT_PRESSURE_TRANSITION_PERIOD: Duration = Duration::from_secs(300);
/// kubelet: `immediateEvictionGracePeriodSeconds` — the grace period of a hard eviction.
pub(crate) const EVICTION_GRACE_SECONDS: i64 = 1;
/// kubelet: `eviction.Reason`.
pub(crate) const REASON_EVICTED: &str = "Evicted";
/// kubelet: `DefaultEvictionHard` (Linux).
pub(crate) const DEFAULT_EVICTION_HARD: &str =
    "memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%,imagefs.available<15%";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EvictionError {
    #[error("eviction threshold {0:?}: expected SIGNAL<QUANTITY or SIGNAL<PERCENT%")]
    Syntax(String),
    #[error(
        "eviction threshold {0:?}: unknown signal (memory.available, nodefs.available, nodefs.inodesFree, imagefs.available, imagefs.inodesFree, pid.available)"
    )]
    UnknownSignal(String),
    #[error("eviction threshold {0:?}: {1}")]
    BadValue(String, &'static str),
    #[error("eviction threshold {0:?} is given twice")]
    Duplicate(String),
}

/// An eviction signal (kubelet: `evictionapi.Signal`), in eviction priority order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Signal {
    MemoryAvailable,
    NodeFsAvailable,
    NodeFsInodesFree,
    ImageFsAvailable,
    ImageFsInodesFree,
    PidAvailable,
}

impl Signal {
    pub const ALL: [Signal; 6] = [
        Signal::MemoryAvailable,
        Signal::NodeFsAvailable,
        Signal::NodeFsInodesFree,
        Signal::ImageFsAvailable,
        Signal::ImageFsInodesFree,
        Signal::PidAvailable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Signal::MemoryAvailable => "memory.available",
            Signal::NodeFsAvailable => "nodefs.available",
            Signal::NodeFsInodesFree => "nodefs.inodesFree",
            Signal::ImageFsAvailable => "imagefs.available",
            Signal::ImageFsInodesFree => "imagefs.inodesFree",
            Signal::PidAvailable => "pid.available",
        }
    }

    fn parse(s: &str) -> Option<Signal> {
        Signal::ALL.into_iter().find(|x| x.as_str() == s)
    }

    /// kubelet: `signalToNodeCondition`.
    pub fn condition(self) -> Condition {
        match self {
            Signal::MemoryAvailable => Condition::Memory,
            Signal::PidAvailable => Condition::Pid,
            _ => Condition::Disk,
        }
    }

    /// kubelet: `signalToResource` — what the eviction message says the node was low on.
    pub fn resource(self) -> &'static str {
        match self {
            Signal::MemoryAvailable => "memory",
            Signal::NodeFsAvailable | Signal::ImageFsAvailable => "ephemeral-storage",
            Signal::NodeFsInodesFree | Signal::ImageFsInodesFree => "inodes",
            Signal::PidAvailable => "pids",
        }
    }

    /// An amount of this signal as the kubelet prints it (`100Mi`; inodes and pids plain).
    pub fn format(self, v: u64) -> String {
        if self.is_bytes() {
            format_bytes(v)
        } else {
            v.to_string()
        }
    }

    /// Counted in bytes (else in inodes or processes).
    fn is_bytes(self) -> bool {
        matches!(
            self,
            Signal::MemoryAvailable | Signal::NodeFsAvailable | Signal::ImageFsAvailable
        )
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A node condition eviction reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Condition {
    Memory,
    Disk,
    Pid,
}

impl Condition {
    /// The Node condition type.
    pub fn as_str(self) -> &'static str {
        match self {
            Condition::Memory => "MemoryPressure",
            Condition::Disk => "DiskPressure",
            Condition::Pid => "PIDPressure",
        }
    }
}

/// The node conditions eviction reports (all `false` until the first observation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Conditions {
    pub memory_pressure: bool,
    pub disk_pressure: bool,
    pub pid_pressure: bool,
}

impl Conditions {
    pub fn has(&self, c: Condition) -> bool {
        match c {
            Condition::Memory => self.memory_pressure,
            Condition::Disk => self.disk_pressure,
            Condition::Pid => self.pid_pressure,
        }
    }

    fn set(&mut self, c: Condition) {
        match c {
            Condition::Memory => self.memory_pressure = true,
            Condition::Disk => self.disk_pressure = true,
            Condition::Pid => self.pid_pressure = true,
        }
    }

    /// The condition types that hold, as the admission message lists them.
    pub fn names(&self) -> Vec<&'static str> {
        [Condition::Memory, Condition::Disk, Condition::Pid]
            .into_iter()
            .filter(|c| self.has(*c))
            .map(Condition::as_str)
            .collect()
    }
}

/// A threshold's value: an absolute quantity or a percentage of the capacity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    Quantity(u64),
    /// 0 … 100.
    Percent(f64),
}

// Parsing refuses NaN (it is not within 0 … 100), so equality is total.
impl Eq for Value {}

/// One hard threshold: `signal < value`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Threshold {
    pub signal: Signal,
    pub value: Value,
}

impl Threshold {
    /// The threshold as a quantity against `capacity` (kubelet: `GetThresholdQuantity`).
    pub fn quantity(&self, capacity: u64) -> u64 {
        match self.value {
            Value::Quantity(q) => q,
            Value::Percent(p) => ((capacity as f64) * p / 100.0) as u64,
        }
    }

    /// kubelet: `thresholdsMet` — the observed available amount is below the threshold.
    pub fn met(&self, o: &Observation) -> bool {
        o.available < self.quantity(o.capacity)
    }
}

/// Parses kubelet's `--eviction-hard` syntax: `signal<quantity` or `signal<percent%`,
/// comma separated (kubelet: `ParseThresholdConfig`). An empty string: no thresholds.
pub fn parse_thresholds(s: &str) -> Result<Vec<Threshold>, EvictionError> {
    let mut out: Vec<Threshold> = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (name, value) = item
            .split_once('<')
            .ok_or_else(|| EvictionError::Syntax(item.to_string()))?;
        let t = threshold(name.trim(), value.trim(), item)?;
        out.push(t);
    }
    Ok(out)
}

/// The config file's `evictionHard` map (`{"memory.available": "100Mi"}`).
pub(crate) fn thresholds_from_map(
    map: &BTreeMap<String, String>,
) -> Result<Vec<Threshold>, EvictionError> {
    let mut out = Vec::new();
    for (name, value) in map {
        out.push(threshold(name, value, &format!("{name}<{value}"))?);
    }
    Ok(out)
}

fn threshold(name: &str, value: &str, item: &str) -> Result<Threshold, EvictionError> {
    let signal = Signal::parse(name).ok_or_else(|| EvictionError::UnknownSignal(item.into()))?;
    let value = if let Some(p) = value.strip_suffix('%') {
        let p: f64 = p
            .parse()
            .map_err(|_| EvictionError::BadValue(item.into(), "not a percentage"))?;
        if !(0.0..=100.0).contains(&p) {
            return Err(EvictionError::BadValue(
                item.into(),
                "a percentage must be within 0% and 100%",
            ));
        }
        Value::Percent(p)
    } else {
        let q = crate::api::parse_quantity(value, 0)
            .ok_or_else(|| EvictionError::BadValue(item.into(), "not a quantity"))?;
        Value::Quantity(u64::try_from(q).unwrap_or(0))
    };
    Ok(Threshold { signal, value })
}

/// Rejects a signal given twice (the kubelet keeps a map, so the last one would win
/// silently; picolet says so).
pub(crate) fn check_unique(ts: &[Threshold]) -> Result<(), EvictionError> {
    let mut seen = BTreeSet::new();
    for t in ts {
        if !seen.insert(t.signal) {
            return Err(EvictionError::Duplicate(t.signal.as_str().into()));
        }
    }
    Ok(())
}

/// One observed signal: what is available of what capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Observation {
    pub available: u64,
    pub capacity: u64,
}

/// Every signal that could be measured.
pub(crate) type Observations = BTreeMap<Signal, Observation>;

/// What to free before evicting (kubelet: `nodeReclaimFuncs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReclaimStep {
    /// A container GC pass that also empties the pods that no longer run, deleted or not
    /// (kubelet: `containerGC.DeleteAllUnusedContainers`).
    DeadContainers,
    /// Every unused image (kubelet: `imageGC.DeleteUnusedImages`). Not wired yet: the
    /// agent logs it as skipped until the image GC exists.
    UnusedImages,
}

/// kubelet: `buildSignalToNodeReclaimFuncs` — with a dedicated image file system, nodefs
/// reclaims dead containers and imagefs both; on one file system both reclaim both.
pub(crate) fn reclaim_steps(signal: Signal, dedicated_imagefs: bool) -> &'static [ReclaimStep] {
    const BOTH: &[ReclaimStep] = &[ReclaimStep::DeadContainers, ReclaimStep::UnusedImages];
    match signal {
        Signal::MemoryAvailable | Signal::PidAvailable => &[],
        Signal::NodeFsAvailable | Signal::NodeFsInodesFree if dedicated_imagefs => {
            &[ReclaimStep::DeadContainers]
        }
        _ => BOTH,
    }
}

/// What a cycle decided.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Action {
    /// Nothing to do (no threshold met, or the last evicted pod is still terminating).
    None,
    /// Free node-level resources for `threshold`; its effect is seen at the next cycle.
    Reclaim {
        threshold: Threshold,
        observed: Observation,
        steps: &'static [ReclaimStep],
    },
    /// Evict one pod for `threshold` (the caller ranks and picks it).
    Evict {
        threshold: Threshold,
        observed: Observation,
    },
}

/// The cycle's outcome: the conditions to report and what to do.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Decision {
    pub conditions: Conditions,
    pub action: Action,
}

/// The eviction manager's state between cycles.
#[derive(Debug, Clone)]
pub(crate) struct Manager {
    pub thresholds: Vec<Threshold>,
    pub transition_period: Duration,
    /// A separate image file system (its reclaim steps differ).
    pub dedicated_imagefs: bool,
    /// kubelet: `nodeConditionsLastObservedAt`.
    last_observed: BTreeMap<Condition, Instant>,
    /// Signals reclaimed since the last eviction (the next cycle evicts if still met).
    reclaimed: BTreeSet<Signal>,
}

impl Manager {
    pub(crate) fn new(thresholds: Vec<Threshold>, transition_period: Duration) -> Self {
        Manager {
            thresholds,
            transition_period,
            dedicated_imagefs: false,
            last_observed: BTreeMap::new(),
            reclaimed: BTreeSet::new(),
        }
    }

    /// One cycle (kubelet: `synchronize`, up to picking the pod). `cleanup_pending`: the
    /// pod evicted last is still terminating.
    pub(crate) fn step(
        &mut self,
        obs: &Observations,
        now: Instant,
        cleanup_pending: bool,
    ) -> Decision {
        // kubelet: thresholdsMet, then nodeConditionsObservedSince.
        let mut met: Vec<(Threshold, Observation)> = self
            .thresholds
            .iter()
            .filter_map(|t| obs.get(&t.signal).map(|o| (*t, *o)))
            .filter(|(t, o)| t.met(o))
            .collect();
        for (t, _) in &met {
            self.last_observed.insert(t.signal.condition(), now);
        }
        let period = self.transition_period;
        self.last_observed
            .retain(|_, at| now.saturating_duration_since(*at) <= period);
        let mut conditions = Conditions::default();
        for c in self.last_observed.keys() {
            conditions.set(*c);
        }
        let decide = |action| Decision { conditions, action };
        if met.is_empty() {
            self.reclaimed.clear();
            return decide(Action::None);
        }
        if cleanup_pending {
            return decide(Action::None);
        }
        // kubelet: byEvictionPriority — memory first; signals without reclaim last among
        // equals; picolet's order is the `Signal` order.
        crate::sort::sort_by_key(&mut met, |(t, _)| t.signal);
        let (threshold, observed) = met[0];
        let steps = reclaim_steps(threshold.signal, self.dedicated_imagefs);
        if !steps.is_empty() && self.reclaimed.insert(threshold.signal) {
            return decide(Action::Reclaim {
                threshold,
                observed,
                steps,
            });
        }
        self.reclaimed.clear();
        decide(Action::Evict {
            threshold,
            observed,
        })
    }
}

/// A pod that may be ranked for eviction, with its usage (`None`: no stats).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Candidate {
    pub uid: String,
    pub name: String,
    /// `spec.priority` (0 without one).
    pub priority: i32,
    /// Static, mirror, or system-critical priority: never evicted.
    pub critical: bool,
    pub memory_request: u64,
    pub memory_usage: Option<u64>,
    /// The sum of the containers' `ephemeral-storage` requests.
    pub disk_request: u64,
    pub disk_usage: Option<u64>,
}

/// kubelet: `rankMemoryPressure` = orderedBy(exceedMemoryRequests, priority, memory);
/// `rankDiskPressureFunc` = orderedBy(exceedDiskRequests, priority, disk);
/// `rankPIDPressure` = orderedBy(priority, process count — picolet has none). Stable.
pub(crate) fn rank(cands: &mut [Candidate], condition: Condition) {
    use std::cmp::Ordering;
    let usage = |c: &Candidate| match condition {
        Condition::Memory => (c.memory_usage, c.memory_request),
        _ => (c.disk_usage, c.disk_request),
    };
    // A pod without stats first; then a pod using more than it requested.
    let exceeds = |a: &Candidate, b: &Candidate| -> Ordering {
        match (usage(a), usage(b)) {
            ((None, _), (None, _)) => Ordering::Equal,
            ((None, _), _) => Ordering::Less,
            (_, (None, _)) => Ordering::Greater,
            ((Some(ua), ra), (Some(ub), rb)) => (ub > rb).cmp(&(ua > ra)),
        }
    };
    let priority = |a: &Candidate, b: &Candidate| a.priority.cmp(&b.priority);
    // Usage above the request, the larger first (kubelet: memory(), disk()).
    let above = |a: &Candidate, b: &Candidate| -> Ordering {
        let over = |c: &Candidate| {
            let (u, r) = usage(c);
            i128::from(u.unwrap_or(0)) - i128::from(r)
        };
        over(b).cmp(&over(a))
    };
    match condition {
        Condition::Pid => crate::sort::sort_by(cands, |a, b| priority(a, b)),
        _ => crate::sort::sort_by(cands, |a, b| {
            exceeds(a, b)
                .then_with(|| priority(a, b))
                .then_with(|| above(a, b))
        }),
    }
}

/// kubelet: `evictionMessage` — "The node was low on resource: memory. Threshold
/// quantity: 100Mi, available: 51200Ki. ", plus how much the pod used of what it
/// requested (per pod here; upstream names the container).
pub(crate) fn eviction_message(
    threshold: &Threshold,
    observed: &Observation,
    pod: &Candidate,
) -> String {
    let s = threshold.signal;
    let q = |v: u64| s.format(v);
    let mut m = format!(
        "The node was low on resource: {}. Threshold quantity: {}, available: {}. ",
        s.resource(),
        q(threshold.quantity(observed.capacity)),
        q(observed.available)
    );
    let (usage, request) = match s.condition() {
        Condition::Memory => (pod.memory_usage, pod.memory_request),
        Condition::Disk if s.is_bytes() => (pod.disk_usage, pod.disk_request),
        _ => (None, 0),
    };
    if let Some(u) = usage.filter(|u| *u > request) {
        m.push_str(&format!(
            "Pod {} was using {}, request is {}. ",
            pod.name,
            format_bytes(u),
            format_bytes(request)
        ));
    }
    m
}

/// Bytes as a Kubernetes quantity: the largest binary suffix that divides it (`100Mi`,
/// `51200Ki`), else plain bytes.
pub(crate) fn format_bytes(v: u64) -> String {
    const UNITS: [(&str, u32); 5] = [("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)];
    for (suffix, shift) in UNITS {
        if v != 0 && v % (1u64 << shift) == 0 {
            return format!("{}{suffix}", v >> shift);
        }
    }
    v.to_string()
}

/// kubelet: the eviction admit handler (`managerImpl.Admit`). `None`: admitted. Under no
/// pressure every pod is; a critical pod always is; under memory pressure alone only a
/// BestEffort pod is refused (upstream also admits one that tolerates the
/// `node.kubernetes.io/memory-pressure` taint: picolet's pod model has no tolerations);
/// under disk or PID pressure every pod is.
pub(crate) fn admit(pod: &crate::api::Pod, conditions: &Conditions) -> Option<String> {
    let names = conditions.names();
    if names.is_empty() || crate::qos::is_critical(pod) {
        return None;
    }
    let memory_only = conditions.memory_pressure && names.len() == 1;
    if memory_only {
        let best_effort = crate::qos::pod_qos(pod) == crate::qos::QosClass::BestEffort;
        if !best_effort {
            return None;
        }
    }
    // kubelet: nodeConditionMessageFmt, the conditions as Go prints a slice.
    Some(format!("The node had condition: [{}]. ", names.join(" ")))
}

#[cfg(test)]
mod tests;
