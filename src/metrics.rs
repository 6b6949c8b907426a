//! Prometheus metrics of the kubelet's kind (kubelet: `pkg/kubelet/metrics`): counters and
//! histograms that cost a few additions and never allocate once made, and their text
//! exposition (`text/plain; version=0.0.4`).
//!
//! A leaf: it imports nothing of picolet. What is measured is the runtime's CRI operations
//! ([`RuntimeMetrics`], fed by the CRI client), the pod start SLI (fed by the node
//! API's view), the pod workers' syncs and the probes ([`AgentMetrics`], fed on the
//! agent's thread) and the process itself (read from `/proc/self` when scraped).

use std::cell::{Cell, RefCell};
use std::fmt::Write as _;
use std::rc::{Rc, Weak};
use std::sync::Mutex;
use std::time::Duration;

/// Prometheus' default buckets (seconds), the kubelet's for runtime operations.
pub(crate) const DEFAULT_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// kubelet: `kubelet_pod_start_duration_seconds` buckets.
pub(crate) const POD_START_BUCKETS: &[f64] = &[
    0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 20.0, 30.0, 45.0, 60.0, 120.0, 180.0, 240.0,
    300.0, 360.0, 480.0, 600.0, 900.0, 1200.0, 1800.0, 2700.0, 3600.0,
];

/// A cumulative histogram with fixed buckets.
#[derive(Debug, Clone)]
pub(crate) struct Histogram {
    bounds: &'static [f64],
    /// `counts[i]`: observations ≤ `bounds[i]` but > `bounds[i-1]`; the last: above all.
    counts: Vec<u64>,
    sum: f64,
}

impl Histogram {
    pub(crate) fn new(bounds: &'static [f64]) -> Self {
        Histogram {
            bounds,
            counts: vec![0; bounds.len() + 1],
            sum: 0.0,
        }
    }

    pub(crate) fn observe(&mut self, seconds: f64) {
        let i = self
            .bounds
            .iter()
            .position(|&b| seconds <= b)
            .unwrap_or(self.bounds.len());
        self.counts[i] += 1;
        self.sum += seconds;
    }

    /// `name_bucket{labels,le=…}`, `name_sum`, `name_count`; `labels` is `k="v",…` or "".
    pub(crate) fn render(&self, out: &mut String, name: &str, labels: &str) {
        render_buckets(out, name, labels, self.bounds, &self.counts, self.sum);
    }
}

/// A histogram's exposition from its per-bucket counts (`counts[bounds.len()]`: above all).
fn render_buckets(
    out: &mut String,
    name: &str,
    labels: &str,
    bounds: &[f64],
    counts: &[u64],
    sum: f64,
) {
    let sep = if labels.is_empty() { "" } else { "," };
    let mut cumulative = 0;
    for (b, n) in bounds.iter().zip(counts) {
        cumulative += n;
        let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{b}\"}} {cumulative}");
    }
    let count: u64 = counts.iter().sum();
    let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {count}");
    let (open, close) = if labels.is_empty() {
        ("", "")
    } else {
        ("{", "}")
    };
    let _ = writeln!(out, "{name}_sum{open}{labels}{close} {sum}");
    let _ = writeln!(out, "{name}_count{open}{labels}{close} {count}");
}

/// kubelet: `kubelet_pod_worker_duration_seconds`'s `operation_type`s — a pod sync by its
/// update type (`SyncPod`'s `updateType.String()`), and the end of a terminated pod's
/// worker (pod_workers.go: `"terminated"`).
pub(crate) const POD_WORKER_OPERATIONS: [&str; 4] = ["create", "update", "sync", "terminated"];

/// A probe's result as `prober_probe_total` labels it (kubelet: `prober/worker.go`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeResultLabel {
    Successful,
    Failed,
    Unknown,
}

impl ProbeResultLabel {
    const ALL: [ProbeResultLabel; 3] = [Self::Successful, Self::Failed, Self::Unknown];

    fn as_str(self) -> &'static str {
        match self {
            Self::Successful => "successful",
            Self::Failed => "failed",
            Self::Unknown => "unknown",
        }
    }
}

/// One probe worker's `prober_probe_total` counters; its labels are made once, when the
/// worker starts (kubelet: the worker's `proberResults*MetricLabels`).
#[derive(Debug)]
pub struct ProbeCounts {
    labels: String,
    results: [Cell<u64>; 3],
}

impl ProbeCounts {
    /// One probe run's result.
    pub fn count(&self, result: ProbeResultLabel) {
        let c = &self.results[result as usize];
        c.set(c.get() + 1);
    }
}

/// A histogram on the agent's thread: fixed buckets in `Cell`s, nothing allocated per
/// observation.
#[derive(Debug, Default)]
struct LocalHistogram {
    /// Per bucket of [`DEFAULT_BUCKETS`]; the last: above all.
    counts: [Cell<u64>; DEFAULT_BUCKETS.len() + 1],
    sum: Cell<f64>,
}

/// The agent's own metrics: `kubelet_pod_worker_duration_seconds` (fed by the pod workers)
/// and `prober_probe_total` (fed by the probe workers). Shared by `Rc` on the agent's one
/// thread with the node API, which renders them.
#[derive(Debug, Default)]
pub struct AgentMetrics {
    pod_worker: [LocalHistogram; POD_WORKER_OPERATIONS.len()],
    /// The probe workers' counters; a worker that ends drops its own (kubelet: the
    /// worker deletes its series when it stops).
    probes: RefCell<Vec<Weak<ProbeCounts>>>,
}

impl AgentMetrics {
    /// One pod worker's work of `operation` (a name of [`POD_WORKER_OPERATIONS`]; others
    /// are ignored).
    pub fn pod_worker(&self, operation: &str, took: Duration) {
        let Some(i) = POD_WORKER_OPERATIONS.iter().position(|o| *o == operation) else {
            return;
        };
        let h = &self.pod_worker[i];
        let seconds = took.as_secs_f64();
        let b = DEFAULT_BUCKETS
            .iter()
            .position(|&b| seconds <= b)
            .unwrap_or(DEFAULT_BUCKETS.len());
        h.counts[b].set(h.counts[b].get() + 1);
        h.sum.set(h.sum.get() + seconds);
    }

    /// The counters of a new probe worker (`probe_type` as the kubelet writes it:
    /// `Liveness`, `Readiness`, `Startup`).
    pub fn probe(
        &self,
        probe_type: &str,
        container: &str,
        pod: &str,
        namespace: &str,
        pod_uid: &str,
    ) -> Rc<ProbeCounts> {
        let counts = Rc::new(ProbeCounts {
            labels: format!(
                "container=\"{container}\",namespace=\"{namespace}\",pod=\"{pod}\",pod_uid=\"{pod_uid}\",probe_type=\"{probe_type}\""
            ),
            results: Default::default(),
        });
        let mut probes = self.probes.borrow_mut();
        probes.retain(|w| w.strong_count() > 0);
        probes.push(Rc::downgrade(&counts));
        counts
    }

    pub fn render(&self, out: &mut String) {
        const NAME: &str = "kubelet_pod_worker_duration_seconds";
        out.push_str("# HELP kubelet_pod_worker_duration_seconds [ALPHA] Duration in seconds to sync a single pod. Broken down by operation type: create, update, or sync\n# TYPE kubelet_pod_worker_duration_seconds histogram\n");
        for (op, h) in POD_WORKER_OPERATIONS.iter().zip(&self.pod_worker) {
            let counts: [u64; DEFAULT_BUCKETS.len() + 1] =
                std::array::from_fn(|i| h.counts[i].get());
            if counts.iter().sum::<u64>() == 0 {
                continue;
            }
            let labels = format!("operation_type=\"{op}\"");
            render_buckets(out, NAME, &labels, DEFAULT_BUCKETS, &counts, h.sum.get());
        }
        out.push_str("# HELP prober_probe_total [ALPHA] Cumulative number of a liveness, readiness or startup probe for a container by result.\n# TYPE prober_probe_total counter\n");
        for p in self.probes.borrow().iter().filter_map(Weak::upgrade) {
            for r in ProbeResultLabel::ALL {
                let n = p.results[r as usize].get();
                if n > 0 {
                    let _ = writeln!(
                        out,
                        "prober_probe_total{{{},result=\"{}\"}} {n}",
                        p.labels,
                        r.as_str()
                    );
                }
            }
        }
    }
}

/// The CRI methods and the kubelet's `operation_type` label of each; `Relist` (the PLEG's
/// two list calls together) is only `kubelet_pleg_relist_duration_seconds`.
pub(crate) const OPERATIONS: &[(&str, &str)] = &[
    ("Version", "version"),
    ("Status", "status"),
    ("RunPodSandbox", "run_podsandbox"),
    ("StopPodSandbox", "stop_podsandbox"),
    ("RemovePodSandbox", "remove_podsandbox"),
    ("PodSandboxStatus", "podsandbox_status"),
    ("ListPodSandbox", "list_podsandbox"),
    ("CreateContainer", "create_container"),
    ("StartContainer", "start_container"),
    ("StopContainer", "stop_container"),
    ("RemoveContainer", "remove_container"),
    ("ListContainers", "list_containers"),
    ("ContainerStatus", "container_status"),
    ("ReopenContainerLog", "reopen_container_log"),
    ("GetContainerEvents", "get_container_events"),
    ("ExecSync", "exec_sync"),
    ("Exec", "exec"),
    ("Attach", "attach"),
    ("PortForward", "port_forward"),
    ("ListContainerStats", "list_container_stats"),
    ("ListPodSandboxStats", "list_podsandbox_stats"),
    ("ImageStatus", "image_status"),
    ("PullImage", "pull_image"),
    ("ListImages", "list_images"),
    ("RemoveImage", "remove_image"),
    ("ImageFsInfo", "image_fs_info"),
    (RELIST, "relist"),
];

/// The pseudo-method of the PLEG's relist.
pub const RELIST: &str = "Relist";

#[derive(Debug, Clone)]
struct Op {
    total: u64,
    errors: u64,
    duration: Histogram,
}

/// kubelet: `kubelet_runtime_operations_total`, `_errors_total`, `_duration_seconds`, and
/// `kubelet_pleg_relist_duration_seconds` (the relist's CRI calls). Behind a mutex so the
/// CRI client stays `Send`; it is never contended (one thread).
#[derive(Debug)]
pub struct RuntimeMetrics {
    ops: Mutex<Vec<Op>>,
}

impl Default for RuntimeMetrics {
    fn default() -> Self {
        RuntimeMetrics {
            ops: Mutex::new(
                OPERATIONS
                    .iter()
                    .map(|_| Op {
                        total: 0,
                        errors: 0,
                        duration: Histogram::new(DEFAULT_BUCKETS),
                    })
                    .collect(),
            ),
        }
    }
}

impl RuntimeMetrics {
    /// One call of CRI `method` (a name of [`OPERATIONS`]; others are ignored).
    pub fn record(&self, method: &str, took: Duration, ok: bool) {
        let Some(i) = OPERATIONS.iter().position(|(m, _)| *m == method) else {
            return;
        };
        let mut ops = self.lock();
        let op = &mut ops[i];
        op.total += 1;
        if !ok {
            op.errors += 1;
        }
        op.duration.observe(took.as_secs_f64());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Op>> {
        // A panic while recording leaves plain numbers: still fine to read.
        self.ops.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn total(&self, method: &str) -> u64 {
        OPERATIONS
            .iter()
            .position(|(m, _)| *m == method)
            .map(|i| self.lock()[i].total)
            .unwrap_or(0)
    }

    pub fn render(&self, out: &mut String) {
        let ops = self.lock().clone();
        let used = || {
            OPERATIONS
                .iter()
                .zip(&ops)
                .filter(|((m, _), op)| *m != RELIST && op.total > 0)
                .map(|((_, name), op)| (name, op))
        };
        out.push_str("# HELP kubelet_runtime_operations_total [ALPHA] Cumulative number of runtime operations by operation type.\n# TYPE kubelet_runtime_operations_total counter\n");
        for (name, op) in used() {
            let _ = writeln!(
                out,
                "kubelet_runtime_operations_total{{operation_type=\"{name}\"}} {}",
                op.total
            );
        }
        out.push_str("# HELP kubelet_runtime_operations_errors_total [ALPHA] Cumulative number of runtime operation errors by operation type.\n# TYPE kubelet_runtime_operations_errors_total counter\n");
        for (name, op) in used() {
            let _ = writeln!(
                out,
                "kubelet_runtime_operations_errors_total{{operation_type=\"{name}\"}} {}",
                op.errors
            );
        }
        out.push_str("# HELP kubelet_runtime_operations_duration_seconds [ALPHA] Duration in seconds of runtime operations. Broken down by operation type.\n# TYPE kubelet_runtime_operations_duration_seconds histogram\n");
        for (name, op) in used() {
            op.duration.render(
                out,
                "kubelet_runtime_operations_duration_seconds",
                &format!("operation_type=\"{name}\""),
            );
        }
        if let Some(i) = OPERATIONS.iter().position(|(m, _)| *m == RELIST) {
            out.push_str("# HELP kubelet_pleg_relist_duration_seconds [ALPHA] Duration in seconds for relisting pods in PLEG.\n# TYPE kubelet_pleg_relist_duration_seconds histogram\n");
            ops[i]
                .duration
                .render(out, "kubelet_pleg_relist_duration_seconds", "");
        }
    }
}

/// `process_*` from `/proc/self` (Prometheus' process collector names).
pub(crate) fn render_process(out: &mut String, proc_self: &std::path::Path) {
    let page = 4096u64;
    let ticks = 100.0; // USER_HZ on Linux
    if let Ok(statm) = std::fs::read_to_string(proc_self.join("statm"))
        && let Some(rss) = statm
            .split_whitespace()
            .nth(1)
            .and_then(|v| v.parse::<u64>().ok())
    {
        let _ = writeln!(
            out,
            "# HELP process_resident_memory_bytes Resident memory size in bytes.\n# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes {}",
            rss * page
        );
    }
    if let Ok(stat) = std::fs::read_to_string(proc_self.join("stat")) {
        // Fields after the `(comm)`, which may hold spaces: utime is field 14, stime 15.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        let num = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok());
        if let (Some(u), Some(s)) = (num(11), num(12)) {
            let _ = writeln!(
                out,
                "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total {}",
                (u + s) / ticks
            );
        }
    }
    if let Ok(dir) = std::fs::read_dir(proc_self.join("fd")) {
        let _ = writeln!(
            out,
            "# HELP process_open_fds Number of open file descriptors.\n# TYPE process_open_fds gauge\nprocess_open_fds {}",
            dir.count()
        );
    }
}

/// One gauge or counter line with its HELP and TYPE.
pub(crate) fn render_single(
    out: &mut String,
    name: &str,
    kind: &str,
    help: &str,
    value: impl std::fmt::Display,
) {
    let _ = writeln!(
        out,
        "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative() {
        let mut h = Histogram::new(&[0.1, 1.0]);
        h.observe(0.05);
        h.observe(0.5);
        h.observe(5.0);
        let mut out = String::new();
        h.render(&mut out, "x", "op=\"a\"");
        assert_eq!(
            out,
            "x_bucket{op=\"a\",le=\"0.1\"} 1\nx_bucket{op=\"a\",le=\"1\"} 2\n\
             x_bucket{op=\"a\",le=\"+Inf\"} 3\nx_sum{op=\"a\"} 5.55\nx_count{op=\"a\"} 3\n"
        );
        let mut out = String::new();
        h.render(&mut out, "y", "");
        assert!(out.contains("y_bucket{le=\"0.1\"} 1\n"), "{out}");
        assert!(out.contains("y_count 3\n"), "{out}");
    }

    #[test]
    fn runtime_operations_by_type() {
        let m = RuntimeMetrics::default();
        m.record("RunPodSandbox", Duration::from_millis(200), true);
        m.record("RunPodSandbox", Duration::from_millis(20), false);
        m.record(RELIST, Duration::from_millis(3), true);
        m.record("no_such_operation", Duration::ZERO, true);
        let mut out = String::new();
        m.render(&mut out);
        assert!(
            out.contains("kubelet_runtime_operations_total{operation_type=\"run_podsandbox\"} 2\n")
        );
        assert!(out.contains(
            "kubelet_runtime_operations_errors_total{operation_type=\"run_podsandbox\"} 1\n"
        ));
        assert!(out.contains("kubelet_pleg_relist_duration_seconds_count 1\n"));
        assert!(
            !out.contains("start_container"),
            "unused operations are left out"
        );
    }

    #[test]
    fn pod_worker_durations_and_probe_counts() {
        let m = AgentMetrics::default();
        m.pod_worker("sync", Duration::from_millis(20));
        m.pod_worker("sync", Duration::from_secs(20));
        m.pod_worker("create", Duration::from_millis(300));
        m.pod_worker("no_such_operation", Duration::ZERO);
        let live = m.probe("Liveness", "c", "web", "default", "u1");
        live.count(ProbeResultLabel::Successful);
        live.count(ProbeResultLabel::Successful);
        live.count(ProbeResultLabel::Failed);
        let gone = m.probe("Readiness", "c", "web", "default", "u1");
        gone.count(ProbeResultLabel::Unknown);
        drop(gone);
        let mut out = String::new();
        m.render(&mut out);
        for want in [
            "kubelet_pod_worker_duration_seconds_bucket{operation_type=\"sync\",le=\"0.025\"} 1\n",
            "kubelet_pod_worker_duration_seconds_bucket{operation_type=\"sync\",le=\"10\"} 1\n",
            "kubelet_pod_worker_duration_seconds_bucket{operation_type=\"sync\",le=\"+Inf\"} 2\n",
            "kubelet_pod_worker_duration_seconds_sum{operation_type=\"sync\"} 20.02\n",
            "kubelet_pod_worker_duration_seconds_count{operation_type=\"create\"} 1\n",
            "prober_probe_total{container=\"c\",namespace=\"default\",pod=\"web\",pod_uid=\"u1\",probe_type=\"Liveness\",result=\"successful\"} 2\n",
            "prober_probe_total{container=\"c\",namespace=\"default\",pod=\"web\",pod_uid=\"u1\",probe_type=\"Liveness\",result=\"failed\"} 1\n",
        ] {
            assert!(out.contains(want), "{want} not in\n{out}");
        }
        assert!(
            !out.contains("operation_type=\"update\""),
            "unused operations are left out"
        );
        assert!(!out.contains("Readiness"), "a stopped worker's series goes");
        assert!(!out.contains("result=\"unknown\""), "{out}");
    }

    #[test]
    fn process_figures_from_proc() {
        let dir = std::env::temp_dir().join(format!("picolet-metrics-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("fd")).unwrap();
        std::fs::write(dir.join("statm"), "1000 250 100 1 0 200 0\n").unwrap();
        std::fs::write(
            dir.join("stat"),
            "42 (pico let) S 1 42 42 0 -1 4194560 100 0 0 0 150 50 0 0 20 0 1 0 100 0 0\n",
        )
        .unwrap();
        let mut out = String::new();
        render_process(&mut out, &dir);
        assert!(
            out.contains("process_resident_memory_bytes 1024000\n"),
            "{out}"
        );
        assert!(out.contains("process_cpu_seconds_total 2\n"), "{out}");
        assert!(out.contains("process_open_fds 0\n"), "{out}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
