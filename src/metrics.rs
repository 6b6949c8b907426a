//! Prometheus metrics of the kubelet's kind (kubelet: `pkg/kubelet/metrics`): counters and
//! histograms that cost a few `Cell` updates and never allocate once made, and their text
//! exposition (`text/plain; version=0.0.4`).
//!
//! A leaf: it imports nothing of picolet. What is measured is the runtime's CRI operations
//! ([`RuntimeMetrics`], fed by `runtime::instrumented`), the pod start SLI (fed by the node
//! API's view) and the process itself (read from `/proc/self` when scraped).

use std::cell::Cell;
use std::fmt::Write as _;
use std::time::Duration;

/// Prometheus' default buckets (seconds), the kubelet's for runtime operations.
pub const DEFAULT_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// kubelet: `kubelet_pod_start_duration_seconds` buckets.
pub const POD_START_BUCKETS: &[f64] = &[
    0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 20.0, 30.0, 45.0, 60.0, 120.0, 180.0, 240.0,
    300.0, 360.0, 480.0, 600.0, 900.0, 1200.0, 1800.0, 2700.0, 3600.0,
];

/// A cumulative histogram with fixed buckets.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    /// `counts[i]`: observations ≤ `bounds[i]` but > `bounds[i-1]`; the last: above all.
    counts: Vec<Cell<u64>>,
    sum: Cell<f64>,
}

impl Histogram {
    pub fn new(bounds: &'static [f64]) -> Self {
        Histogram {
            bounds,
            counts: (0..=bounds.len()).map(|_| Cell::new(0)).collect(),
            sum: Cell::new(0.0),
        }
    }

    pub fn observe(&self, seconds: f64) {
        let i = self
            .bounds
            .iter()
            .position(|&b| seconds <= b)
            .unwrap_or(self.bounds.len());
        self.counts[i].set(self.counts[i].get() + 1);
        self.sum.set(self.sum.get() + seconds);
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().map(Cell::get).sum()
    }

    /// `name_bucket{labels,le=…}`, `name_sum`, `name_count`; `labels` is `k="v",…` or "".
    pub fn render(&self, out: &mut String, name: &str, labels: &str) {
        let sep = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0;
        for (i, b) in self.bounds.iter().enumerate() {
            cumulative += self.counts[i].get();
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{b}\"}} {cumulative}");
        }
        let _ = writeln!(
            out,
            "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {}",
            self.count()
        );
        let braces = |s: &str| {
            if s.is_empty() {
                String::new()
            } else {
                format!("{{{s}}}")
            }
        };
        let _ = writeln!(out, "{name}_sum{} {}", braces(labels), self.sum.get());
        let _ = writeln!(out, "{name}_count{} {}", braces(labels), self.count());
    }
}

/// The CRI operations, by the kubelet's `operation_type` label.
pub const OPERATIONS: &[&str] = &[
    "version",
    "status",
    "run_podsandbox",
    "stop_podsandbox",
    "remove_podsandbox",
    "podsandbox_status",
    "list_podsandbox",
    "create_container",
    "start_container",
    "stop_container",
    "remove_container",
    "list_containers",
    "container_status",
    "relist",
    "get_container_events",
    "exec_sync",
    "image_status",
    "pull_image",
    "exec",
    "attach",
    "port_forward",
    "list_container_stats",
    "list_podsandbox_stats",
];

#[derive(Debug)]
struct Op {
    total: Cell<u64>,
    errors: Cell<u64>,
    duration: Histogram,
}

/// kubelet: `kubelet_runtime_operations_total`, `_errors_total`, `_duration_seconds`, and
/// `kubelet_pleg_relist_duration_seconds` (the relist's CRI calls).
#[derive(Debug)]
pub struct RuntimeMetrics {
    ops: Vec<Op>,
}

impl Default for RuntimeMetrics {
    fn default() -> Self {
        RuntimeMetrics {
            ops: OPERATIONS
                .iter()
                .map(|_| Op {
                    total: Cell::new(0),
                    errors: Cell::new(0),
                    duration: Histogram::new(DEFAULT_BUCKETS),
                })
                .collect(),
        }
    }
}

impl RuntimeMetrics {
    /// One call of `operation` (a name of [`OPERATIONS`]; others are ignored).
    pub fn record(&self, operation: &str, took: Duration, ok: bool) {
        let Some(i) = OPERATIONS.iter().position(|o| *o == operation) else {
            return;
        };
        let op = &self.ops[i];
        op.total.set(op.total.get() + 1);
        if !ok {
            op.errors.set(op.errors.get() + 1);
        }
        op.duration.observe(took.as_secs_f64());
    }

    pub fn total(&self, operation: &str) -> u64 {
        OPERATIONS
            .iter()
            .position(|o| *o == operation)
            .map(|i| self.ops[i].total.get())
            .unwrap_or(0)
    }

    pub fn render(&self, out: &mut String) {
        let used = || {
            OPERATIONS
                .iter()
                .zip(&self.ops)
                .filter(|(_, op)| op.total.get() > 0)
        };
        out.push_str("# HELP kubelet_runtime_operations_total [ALPHA] Cumulative number of runtime operations by operation type.\n# TYPE kubelet_runtime_operations_total counter\n");
        for (name, op) in used() {
            let _ = writeln!(
                out,
                "kubelet_runtime_operations_total{{operation_type=\"{name}\"}} {}",
                op.total.get()
            );
        }
        out.push_str("# HELP kubelet_runtime_operations_errors_total [ALPHA] Cumulative number of runtime operation errors by operation type.\n# TYPE kubelet_runtime_operations_errors_total counter\n");
        for (name, op) in used() {
            let _ = writeln!(
                out,
                "kubelet_runtime_operations_errors_total{{operation_type=\"{name}\"}} {}",
                op.errors.get()
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
        if let Some(i) = OPERATIONS.iter().position(|o| *o == "relist") {
            out.push_str("# HELP kubelet_pleg_relist_duration_seconds [ALPHA] Duration in seconds for relisting pods in PLEG.\n# TYPE kubelet_pleg_relist_duration_seconds histogram\n");
            self.ops[i]
                .duration
                .render(out, "kubelet_pleg_relist_duration_seconds", "");
        }
    }
}

/// `process_*` from `/proc/self` (Prometheus' process collector names).
pub fn render_process(out: &mut String, proc_self: &std::path::Path) {
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
pub fn render_single(
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
        let h = Histogram::new(&[0.1, 1.0]);
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
        m.record("run_podsandbox", Duration::from_millis(200), true);
        m.record("run_podsandbox", Duration::from_millis(20), false);
        m.record("relist", Duration::from_millis(3), true);
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
