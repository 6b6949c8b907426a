//! Resource usage for the node API: the kubelet's `/stats/summary` and
//! `/metrics/resource` (kubelet: `pkg/kubelet/server/stats`, `metrics/collectors`), and
//! `metrics.k8s.io/v1beta1` as metrics-server serves it, so `kubectl top` works on a board
//! without a cluster.
//!
//! Owns: the last [`Snapshot`] (kept at most [`CACHE_TTL`]) and the previous cumulative CPU
//! sample of the node, of each pod and of each container (one each: the map is replaced by
//! every snapshot, so it never holds a container that is gone), from which CPU *rates* are
//! computed the way metrics-server does: `Δ usageCoreNanoSeconds / Δ time`.
//!
//! Sources: running containers from CRI `ListContainerStats` (their pod from the
//! `io.kubernetes.pod.*` labels; `ListContainers` says which are running); pods from CRI `ListPodSandboxStats` (the pod cgroup), or —
//! when the runtime answers `Unimplemented` — the sum of their containers' (kubelet: the CRI
//! stats provider without `PodAndContainerStatsFromCRI`, metrics-server's pod sum); the node
//! from `/proc/stat` and `/proc/meminfo` under an injected root.
//!
//! Must never: read anything while nobody asks (stats are collected per request, at most
//! once per [`CACHE_TTL`]), or hold a borrow across an `.await`.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::clock::{self, Clock, UnixNanos, go_duration};
use crate::cri;
use crate::cri::{ContainerState, CriError, ListFilter, Runtime};

/// A snapshot answers every request within this (kubelet: the summary is cached by
/// cAdvisor's housekeeping, ~10 s; metrics-server scrapes every 15 s).
pub(crate) const CACHE_TTL: Duration = Duration::from_secs(10);
/// With no earlier sample to compute a rate from (the first request, or one after a long
/// quiet time), a second sample is taken this long after the first.
pub(crate) const PRIME_INTERVAL: Duration = Duration::from_secs(1);
/// An earlier sample older than this is not used for a rate: it would be an average over
/// minutes, not "now" (metrics-server keeps two scrapes, 15 s apart).
pub(crate) const MAX_WINDOW: Duration = Duration::from_secs(5 * 60);

/// After `ListPodSandboxStats` failed, it is not asked again for this long.
pub(crate) const POD_STATS_RETRY: Duration = Duration::from_secs(10 * 60);

/// `/proc/stat` counts in USER_HZ, which the kernel ABI fixes at 100 on every Linux arch.
const NANOS_PER_TICK: u64 = 10_000_000;

/// CPU and memory of one thing at one time: the CRI's own sample types (a node's figures
/// read from `/proc` fill the same).
pub(crate) use crate::cri::{CpuUsage as Cpu, MemoryUsage as Memory};

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ContainerUsage {
    pub id: String,
    pub name: String,
    pub cpu: Option<Cpu>,
    pub memory: Option<Memory>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct PodUsage {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub cpu: Option<Cpu>,
    pub memory: Option<Memory>,
    /// By name.
    pub containers: Vec<ContainerUsage>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct NodeUsage {
    pub boot_time: Option<UnixNanos>,
    pub cpu: Option<Cpu>,
    pub memory: Option<Memory>,
}

/// Everything one request reports.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Snapshot {
    pub node: NodeUsage,
    /// By namespace, then name.
    pub pods: Vec<PodUsage>,
    /// The interval the rates are over (0: only the runtime's own rates, if any).
    pub window: Duration,
    /// The runtime could not be asked: containers and pods are missing.
    pub runtime_error: Option<CriError>,
}

// ---------------------------------------------------------------------------------------
// The node, from /proc
// ---------------------------------------------------------------------------------------

/// `/proc/stat` → (CPU time used, all cores, in ns; boot time). Used = every column but
/// `idle` and `iowait` (kubelet: the root cgroup's `cpuacct.usage`, which counts the same;
/// `guest` is already inside `user`).
pub(crate) fn parse_proc_stat(text: &str) -> (Option<u64>, Option<UnixNanos>) {
    let mut cpu = None;
    let mut btime = None;
    for line in text.lines() {
        let mut f = line.split_ascii_whitespace();
        match f.next() {
            Some("cpu") => {
                let v: Vec<u64> = f.take(8).filter_map(|x| x.parse().ok()).collect();
                if v.len() >= 4 {
                    let busy: u64 = v
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| *i != 3 && *i != 4)
                        .map(|(_, x)| *x)
                        .sum();
                    cpu = Some(busy.saturating_mul(NANOS_PER_TICK));
                }
            }
            Some("btime") => {
                btime = f
                    .next()
                    .and_then(|x| x.parse::<i64>().ok())
                    .map(|s| s.saturating_mul(1_000_000_000));
            }
            _ => {}
        }
    }
    (cpu, btime)
}

/// `/proc/meminfo` → node memory (kubelet/cAdvisor on the root cgroup: usage = total −
/// free, working set = usage − inactive file pages, available = capacity − working set).
pub(crate) fn parse_meminfo(text: &str, time: UnixNanos) -> Option<Memory> {
    let field = |name: &str| {
        text.lines().find_map(|l| {
            let rest = l.strip_prefix(name)?.strip_prefix(':')?;
            let kib: u64 = rest.split_ascii_whitespace().next()?.parse().ok()?;
            Some(kib.saturating_mul(1024))
        })
    };
    let total = field("MemTotal")?;
    let free = field("MemFree")?;
    let usage = total.saturating_sub(free);
    let working_set = usage.saturating_sub(field("Inactive(file)").unwrap_or(0));
    Some(Memory {
        timestamp: time,
        working_set_bytes: Some(working_set),
        usage_bytes: Some(usage),
        available_bytes: Some(total.saturating_sub(working_set)),
        rss_bytes: field("AnonPages"),
        page_faults: None,
        major_page_faults: None,
    })
}

/// Reads the node's figures under `proc_root` (small in-memory files: no disk I/O). What
/// cannot be read is left out.
pub(crate) fn read_node(
    proc_root: &Path,
    time: UnixNanos,
) -> (Option<u64>, Option<UnixNanos>, Option<Memory>) {
    let stat = std::fs::read_to_string(proc_root.join("stat")).unwrap_or_default();
    let (cpu, btime) = parse_proc_stat(&stat);
    let meminfo = std::fs::read_to_string(proc_root.join("meminfo")).unwrap_or_default();
    (cpu, btime, parse_meminfo(&meminfo, time))
}

// ---------------------------------------------------------------------------------------
// Rates
// ---------------------------------------------------------------------------------------

/// The rate between two cumulative samples `(time, core ns)`, in nanocores; `None` when
/// the interval is empty, too long, or the counter went back (a restarted container).
pub(crate) fn rate(prev: (UnixNanos, u64), now: (UnixNanos, u64)) -> Option<u64> {
    let dt = now.0.checked_sub(prev.0).filter(|d| *d > 0)?;
    if dt as u128 > MAX_WINDOW.as_nanos() {
        return None;
    }
    let du = now.1.checked_sub(prev.1)?;
    u64::try_from(u128::from(du) * 1_000_000_000 / dt as u128).ok()
}

/// Previous cumulative samples, by key (`node`, `pod/<uid>`, `container/<id>`).
type Samples = HashMap<String, (UnixNanos, u64)>;

/// Fills `cpu.usage_nano_cores` from the previous sample of `key` when there is one
/// (metrics-server); otherwise keeps what the runtime said. Records the sample in `next`.
fn with_rate(cpu: &mut Cpu, key: String, prev: &Samples, next: &mut Samples) {
    let Some(total) = cpu.usage_core_nano_seconds else {
        return;
    };
    if let Some(r) = prev
        .get(&key)
        .and_then(|p| rate(*p, (cpu.timestamp, total)))
    {
        cpu.usage_nano_cores = Some(r);
    }
    next.insert(key, (cpu.timestamp, total));
}

/// Computes every rate of `snap` against `prev`; returns the samples to keep.
pub(crate) fn apply_rates(snap: &mut Snapshot, prev: &Samples) -> Samples {
    let mut next = Samples::new();
    if let Some(cpu) = snap.node.cpu.as_mut() {
        with_rate(cpu, "node".into(), prev, &mut next);
    }
    for pod in &mut snap.pods {
        if let Some(cpu) = pod.cpu.as_mut() {
            with_rate(cpu, format!("pod/{}", pod.uid), prev, &mut next);
        }
        for c in &mut pod.containers {
            if let Some(cpu) = c.cpu.as_mut() {
                with_rate(cpu, format!("container/{}", c.id), prev, &mut next);
            }
        }
    }
    next
}

// ---------------------------------------------------------------------------------------
// Collection
// ---------------------------------------------------------------------------------------

/// Groups container stats by pod (labels) and fills each pod's own figures from `sandboxes`
/// when the runtime gave them, else as the sum of its containers'.
pub(crate) fn pods_from(
    containers: Vec<crate::cri::ContainerStats>,
    sandboxes: Option<Vec<crate::cri::PodSandboxStats>>,
) -> Vec<PodUsage> {
    let mut pods: BTreeMap<String, PodUsage> = BTreeMap::new();
    for c in containers {
        let label = |k: &str| c.labels.get(k).cloned().unwrap_or_default();
        let uid = label(cri::POD_UID_LABEL);
        if uid.is_empty() {
            continue; // not a Kubernetes container
        }
        let pod = pods.entry(uid.clone()).or_insert_with(|| PodUsage {
            name: label(cri::POD_NAME_LABEL),
            namespace: label(cri::POD_NAMESPACE_LABEL),
            uid,
            ..Default::default()
        });
        pod.containers.push(ContainerUsage {
            id: c.id,
            name: c.name,
            cpu: c.cpu,
            memory: c.memory,
        });
    }
    let by_uid: HashMap<String, crate::cri::PodSandboxStats> = sandboxes
        .unwrap_or_default()
        .into_iter()
        .map(|s| (s.uid.clone(), s))
        .collect();
    for pod in pods.values_mut() {
        crate::sort::sort_by(&mut pod.containers, |a, b| a.name.cmp(&b.name));
        match by_uid.get(&pod.uid) {
            Some(sb) if sb.cpu.is_some() || sb.memory.is_some() => {
                pod.cpu = sb.cpu;
                pod.memory = sb.memory;
            }
            _ => {
                pod.cpu = sum_cpu(&pod.containers);
                pod.memory = sum_memory(&pod.containers);
            }
        }
    }
    let mut out: Vec<PodUsage> = pods.into_values().collect();
    crate::sort::sort_by(&mut out, |a, b| {
        (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name))
    });
    out
}

fn sum(values: impl Iterator<Item = Option<u64>>) -> Option<u64> {
    values.fold(None, |acc, v| match (acc, v) {
        (None, v) => v,
        (a, None) => a,
        (Some(a), Some(b)) => Some(a.saturating_add(b)),
    })
}

/// kubelet: a pod's usage without pod cgroup stats is its containers' sum.
fn sum_cpu(cs: &[ContainerUsage]) -> Option<Cpu> {
    let cpus: Vec<Cpu> = cs.iter().filter_map(|c| c.cpu).collect();
    (!cpus.is_empty()).then(|| Cpu {
        timestamp: cpus.iter().map(|c| c.timestamp).max().unwrap_or(0),
        usage_core_nano_seconds: sum(cpus.iter().map(|c| c.usage_core_nano_seconds)),
        usage_nano_cores: sum(cpus.iter().map(|c| c.usage_nano_cores)),
    })
}

fn sum_memory(cs: &[ContainerUsage]) -> Option<Memory> {
    let ms: Vec<Memory> = cs.iter().filter_map(|c| c.memory).collect();
    (!ms.is_empty()).then(|| Memory {
        timestamp: ms.iter().map(|m| m.timestamp).max().unwrap_or(0),
        working_set_bytes: sum(ms.iter().map(|m| m.working_set_bytes)),
        usage_bytes: sum(ms.iter().map(|m| m.usage_bytes)),
        available_bytes: None,
        rss_bytes: sum(ms.iter().map(|m| m.rss_bytes)),
        page_faults: sum(ms.iter().map(|m| m.page_faults)),
        major_page_faults: sum(ms.iter().map(|m| m.major_page_faults)),
    })
}

struct State {
    cached: Option<(tokio::time::Instant, Rc<Snapshot>)>,
    prev: Samples,
    /// When the samples in `prev` were taken.
    prev_at: Option<tokio::time::Instant>,
    /// `ListPodSandboxStats` is not asked before this: it failed (`None` with
    /// `no_pod_stats`: `Unimplemented`, never again).
    pod_stats_after: Option<tokio::time::Instant>,
    no_pod_stats: bool,
}

/// Collects snapshots on demand, with the cache and the previous samples.
pub(crate) struct Stats {
    proc_root: PathBuf,
    state: RefCell<State>,
}

impl Stats {
    pub(crate) fn new(proc_root: PathBuf) -> Self {
        Stats {
            proc_root,
            state: RefCell::new(State {
                cached: None,
                prev: Samples::new(),
                prev_at: None,
                pod_stats_after: None,
                no_pod_stats: false,
            }),
        }
    }

    /// The current snapshot: the cached one if younger than [`CACHE_TTL`], else a new one.
    /// Without a recent earlier sample it samples twice, [`PRIME_INTERVAL`] apart.
    pub(crate) async fn snapshot<R: Runtime, C: Clock>(
        &self,
        runtime: &R,
        clock: &C,
    ) -> Rc<Snapshot> {
        if let Some((at, snap)) = &self.state.borrow().cached {
            if at.elapsed() < CACHE_TTL {
                return Rc::clone(snap);
            }
        }
        let recent = self
            .state
            .borrow()
            .prev_at
            .is_some_and(|t| t.elapsed() < MAX_WINDOW);
        if !recent {
            self.collect(runtime, clock).await;
            tokio::time::sleep(PRIME_INTERVAL).await;
        }
        let snap = Rc::new(self.collect(runtime, clock).await);
        self.state.borrow_mut().cached = Some((tokio::time::Instant::now(), Rc::clone(&snap)));
        snap
    }

    /// One sample of everything, its rates computed against the previous one, which it
    /// then replaces.
    async fn collect<R: Runtime, C: Clock>(&self, runtime: &R, clock: &C) -> Snapshot {
        let all = ListFilter::default();
        let ask = {
            let st = self.state.borrow();
            !st.no_pod_stats
                && st
                    .pod_stats_after
                    .is_none_or(|t| tokio::time::Instant::now() >= t)
        };
        let sandboxes = match ask {
            false => None,
            true => match runtime.list_pod_sandbox_stats(&all).await {
                Ok(s) => Some(s),
                Err(CriError::Unimplemented { .. }) => {
                    log::info!(
                        "node API: the runtime has no ListPodSandboxStats; a pod's usage is \
                         the sum of its containers'"
                    );
                    self.state.borrow_mut().no_pod_stats = true;
                    None
                }
                Err(e) => {
                    // containerd 1.6 fails it for sandboxes without a cgroup parent
                    // ("cgroupPath is empty"): sum the containers, ask again later.
                    log::info!(
                        "node API: {e}; a pod's usage is the sum of its containers' for the \
                         next {}s",
                        POD_STATS_RETRY.as_secs()
                    );
                    self.state.borrow_mut().pod_stats_after =
                        Some(tokio::time::Instant::now() + POD_STATS_RETRY);
                    None
                }
            },
        };
        // containerd answers for exited containers too (without figures): keep the running
        // ones (kubelet: `removeTerminatedContainers`).
        let running: Option<HashSet<String>> = match runtime.list_containers(&all).await {
            Ok(cs) => Some(
                cs.into_iter()
                    .filter(|c| c.state == ContainerState::Running)
                    .map(|c| c.id)
                    .collect(),
            ),
            Err(e) => {
                log::debug!("node API: {e}");
                None
            }
        };
        let (pods, runtime_error) = match runtime.list_container_stats(&all).await {
            Ok(mut containers) => {
                if let Some(running) = &running {
                    containers.retain(|c| running.contains(&c.id));
                }
                (pods_from(containers, sandboxes), None)
            }
            Err(e) => {
                log::warn!("node API: no container stats: {e}");
                (Vec::new(), Some(e))
            }
        };
        let now = clock.now();
        let (cpu, boot_time, memory) = read_node(&self.proc_root, now);
        let mut snap = Snapshot {
            node: NodeUsage {
                boot_time,
                cpu: cpu.map(|total| Cpu {
                    timestamp: now,
                    usage_core_nano_seconds: Some(total),
                    usage_nano_cores: None,
                }),
                memory,
            },
            pods,
            window: Duration::ZERO,
            runtime_error,
        };
        let mut st = self.state.borrow_mut();
        let prev_node = st.prev.get("node").map(|p| p.0);
        st.prev = apply_rates(&mut snap, &st.prev);
        st.prev_at = Some(tokio::time::Instant::now());
        if let Some(t) = prev_node.filter(|t| now > *t) {
            snap.window = Duration::from_nanos(u64::try_from(now - t).unwrap_or(0));
        }
        snap
    }
}

// ---------------------------------------------------------------------------------------
// Renderings
// ---------------------------------------------------------------------------------------

fn time(t: UnixNanos) -> Value {
    clock::rfc3339(t).map_or(Value::Null, Value::String)
}

fn cpu_json(c: &Cpu) -> Value {
    let mut v = json!({"time": time(c.timestamp)});
    if let Some(x) = c.usage_nano_cores {
        v["usageNanoCores"] = json!(x);
    }
    if let Some(x) = c.usage_core_nano_seconds {
        v["usageCoreNanoSeconds"] = json!(x);
    }
    v
}

fn memory_json(m: &Memory) -> Value {
    let mut v = json!({"time": time(m.timestamp)});
    for (k, x) in [
        ("availableBytes", m.available_bytes),
        ("usageBytes", m.usage_bytes),
        ("workingSetBytes", m.working_set_bytes),
        ("rssBytes", m.rss_bytes),
        ("pageFaults", m.page_faults),
        ("majorPageFaults", m.major_page_faults),
    ] {
        if let Some(x) = x {
            v[k] = json!(x);
        }
    }
    v
}

/// kubelet: `statsapi.Summary` (`/stats/summary`), the fields picolet knows.
pub(crate) fn summary(snap: &Snapshot, node_name: &str) -> Value {
    let mut node = json!({"nodeName": node_name});
    if let Some(t) = snap.node.boot_time {
        node["startTime"] = time(t);
    }
    if let Some(c) = &snap.node.cpu {
        node["cpu"] = cpu_json(c);
    }
    if let Some(m) = &snap.node.memory {
        node["memory"] = memory_json(m);
    }
    let pods: Vec<Value> = snap
        .pods
        .iter()
        .map(|p| {
            let containers: Vec<Value> = p
                .containers
                .iter()
                .map(|c| {
                    let mut v = json!({"name": c.name});
                    if let Some(cpu) = &c.cpu {
                        v["cpu"] = cpu_json(cpu);
                    }
                    if let Some(m) = &c.memory {
                        v["memory"] = memory_json(m);
                    }
                    v
                })
                .collect();
            let mut v = json!({
                "podRef": {"name": p.name, "namespace": p.namespace, "uid": p.uid},
                "containers": containers,
            });
            if let Some(cpu) = &p.cpu {
                v["cpu"] = cpu_json(cpu);
            }
            if let Some(m) = &p.memory {
                v["memory"] = memory_json(m);
            }
            v
        })
        .collect();
    json!({"node": node, "pods": pods})
}

/// A Prometheus label value, escaped.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn seconds(core_nanos: u64) -> String {
    format!("{}", core_nanos as f64 / 1e9)
}

fn millis(t: UnixNanos) -> i64 {
    t / 1_000_000
}

/// kubelet: `/metrics/resource` (`collectors/resource_metrics.go`): Prometheus text, one
/// sample per figure known, with the sample's own time in milliseconds.
pub(crate) fn resource_metrics(snap: &Snapshot) -> String {
    let mut out = String::new();
    let mut family = |name: &str, kind: &str, help: &str, samples: Vec<(String, String, i64)>| {
        out.push_str(&format!(
            "# HELP {name} [STABLE] {help}\n# TYPE {name} {kind}\n"
        ));
        for (labels, value, t) in samples {
            out.push_str(&format!("{name}{labels} {value} {t}\n"));
        }
    };
    let pod_labels = |p: &PodUsage| {
        format!(
            "{{namespace=\"{}\",pod=\"{}\"}}",
            label(&p.namespace),
            label(&p.name)
        )
    };
    let container_labels = |p: &PodUsage, c: &ContainerUsage| {
        format!(
            "{{container=\"{}\",namespace=\"{}\",pod=\"{}\"}}",
            label(&c.name),
            label(&p.namespace),
            label(&p.name)
        )
    };
    let cpu = |c: &Option<Cpu>| {
        c.and_then(|c| {
            c.usage_core_nano_seconds
                .map(|v| (seconds(v), millis(c.timestamp)))
        })
    };
    let ws = |m: &Option<Memory>| {
        m.and_then(|m| {
            m.working_set_bytes
                .map(|v| (v.to_string(), millis(m.timestamp)))
        })
    };
    let containers = || {
        snap.pods
            .iter()
            .flat_map(|p| p.containers.iter().map(move |c| (p, c)))
    };
    family(
        "container_cpu_usage_seconds_total",
        "counter",
        "Cumulative cpu time consumed by the container in core-seconds",
        containers()
            .filter_map(|(p, c)| cpu(&c.cpu).map(|(v, t)| (container_labels(p, c), v, t)))
            .collect(),
    );
    family(
        "container_memory_working_set_bytes",
        "gauge",
        "Current working set of the container in bytes",
        containers()
            .filter_map(|(p, c)| ws(&c.memory).map(|(v, t)| (container_labels(p, c), v, t)))
            .collect(),
    );
    family(
        "node_cpu_usage_seconds_total",
        "counter",
        "Cumulative cpu time consumed by the node in core-seconds",
        cpu(&snap.node.cpu)
            .map(|(v, t)| (String::new(), v, t))
            .into_iter()
            .collect(),
    );
    family(
        "node_memory_working_set_bytes",
        "gauge",
        "Current working set of the node in bytes",
        ws(&snap.node.memory)
            .map(|(v, t)| (String::new(), v, t))
            .into_iter()
            .collect(),
    );
    family(
        "pod_cpu_usage_seconds_total",
        "counter",
        "Cumulative cpu time consumed by the pod in core-seconds",
        snap.pods
            .iter()
            .filter_map(|p| cpu(&p.cpu).map(|(v, t)| (pod_labels(p), v, t)))
            .collect(),
    );
    family(
        "pod_memory_working_set_bytes",
        "gauge",
        "Current working set of the pod in bytes",
        snap.pods
            .iter()
            .filter_map(|p| ws(&p.memory).map(|(v, t)| (pod_labels(p), v, t)))
            .collect(),
    );
    out.push_str(
        "# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container \
         metrics, 0 otherwise\n# TYPE resource_scrape_error gauge\n",
    );
    out.push_str(&format!(
        "resource_scrape_error {}\n",
        u8::from(snap.runtime_error.is_some())
    ));
    out
}

/// A CPU figure in nanocores as a canonical `resource.Quantity` (metrics-server:
/// `resource.NewScaledQuantity(nanocores, -9)`): `12345n`, `3m` for 3000000n, `2` for two
/// cores.
pub(crate) fn cpu_quantity(nano_cores: u64) -> String {
    if nano_cores == 0 {
        return "0".into();
    }
    const SUFFIXES: [&str; 10] = ["n", "u", "m", "", "k", "M", "G", "T", "P", "E"];
    let (mut n, mut i) = (nano_cores, 0);
    while n % 1000 == 0 && i + 1 < SUFFIXES.len() {
        n /= 1000;
        i += 1;
    }
    format!("{n}{}", SUFFIXES[i])
}

/// Bytes as a canonical `BinarySI` `resource.Quantity` (metrics-server:
/// `resource.NewQuantity(bytes, resource.BinarySI)`): the largest power of 1024 that divides
/// it exactly (`1234Ki`, `5Mi`); below 1024, or not a multiple of 1024, plain bytes.
pub(crate) fn memory_quantity(bytes: u64) -> String {
    if bytes < 1024 {
        return bytes.to_string();
    }
    const SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    let (mut n, mut i) = (bytes, 0);
    while n % 1024 == 0 && i + 1 < SUFFIXES.len() {
        n /= 1024;
        i += 1;
    }
    format!("{n}{}", SUFFIXES[i])
}

fn usage(cpu: &Option<Cpu>, memory: &Option<Memory>) -> Value {
    json!({
        "cpu": cpu_quantity(cpu.and_then(|c| c.usage_nano_cores).unwrap_or(0)),
        "memory": memory_quantity(memory.and_then(|m| m.working_set_bytes).unwrap_or(0)),
    })
}

/// The sample time a metrics object reports: its CPU sample's, else now.
fn stamp(cpu: &Option<Cpu>, now: UnixNanos) -> Value {
    time(cpu.map_or(now, |c| c.timestamp))
}

/// metrics-server's `NodeMetrics` for this node (usage: CPU rate, memory working set).
pub(crate) fn node_metrics(
    snap: &Snapshot,
    node_name: &str,
    labels: &BTreeMap<String, String>,
    now: UnixNanos,
) -> Value {
    json!({
        "kind": "NodeMetrics", "apiVersion": "metrics.k8s.io/v1beta1",
        "metadata": {"name": node_name, "creationTimestamp": time(now), "labels": labels},
        "timestamp": stamp(&snap.node.cpu, now),
        "window": go_duration(snap.window),
        "usage": usage(&snap.node.cpu, &snap.node.memory),
    })
}

/// metrics-server's `PodMetrics` of one pod (its containers only, as metrics-server reports
/// them; kubectl sums them). `labels`: the pod's.
pub(crate) fn pod_metrics(
    snap: &Snapshot,
    pod: &PodUsage,
    labels: &Value,
    now: UnixNanos,
) -> Value {
    let containers: Vec<Value> = pod
        .containers
        .iter()
        .map(|c| json!({"name": c.name, "usage": usage(&c.cpu, &c.memory)}))
        .collect();
    json!({
        "kind": "PodMetrics", "apiVersion": "metrics.k8s.io/v1beta1",
        "metadata": {
            "name": pod.name, "namespace": pod.namespace,
            "creationTimestamp": time(now), "labels": labels,
        },
        "timestamp": stamp(&pod.cpu, now),
        "window": go_duration(snap.window),
        "containers": containers,
    })
}

/// `GET /apis/metrics.k8s.io/v1beta1`.
pub(crate) fn metrics_resources() -> Value {
    let r = |name: &str, namespaced: bool, kind: &str| {
        json!({"name": name, "singularName": "", "namespaced": namespaced, "kind": kind,
               "verbs": ["get", "list"]})
    };
    json!({
        "kind": "APIResourceList", "apiVersion": "v1",
        "groupVersion": "metrics.k8s.io/v1beta1",
        "resources": [r("nodes", false, "NodeMetrics"), r("pods", true, "PodMetrics")],
    })
}

/// The `metrics.k8s.io` entry of `GET /apis`.
pub(crate) fn metrics_group() -> Value {
    let v = json!({"groupVersion": "metrics.k8s.io/v1beta1", "version": "v1beta1"});
    json!({"name": "metrics.k8s.io", "versions": [v.clone()], "preferredVersion": v})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::TokioClock;
    use crate::cri::fake::{Call, FakeRuntime};
    use crate::cri::{ContainerConfig, SandboxConfig};
    use crate::cri::{CpuUsage, MemoryUsage};

    const T0: UnixNanos = 1_800_000_000_000_000_000;

    #[test]
    fn proc_stat_and_meminfo() {
        let stat = "cpu  100 5 50 1000 20 3 2 1 0 0\ncpu0 1 2 3 4\nbtime 1700000000\n";
        let (cpu, btime) = parse_proc_stat(stat);
        // user + nice + system + irq + softirq + steal = 161 ticks of 10 ms
        assert_eq!(cpu, Some(1_610_000_000));
        assert_eq!(btime, Some(1_700_000_000_000_000_000));
        assert_eq!(parse_proc_stat("garbage"), (None, None));

        let meminfo = "MemTotal:       1000 kB\nMemFree:         200 kB\n\
                       MemAvailable:    600 kB\nInactive(file):  300 kB\nAnonPages: 100 kB\n";
        let m = parse_meminfo(meminfo, 7).unwrap();
        assert_eq!(m.timestamp, 7);
        assert_eq!(m.usage_bytes, Some(800 * 1024));
        assert_eq!(m.working_set_bytes, Some(500 * 1024));
        assert_eq!(m.available_bytes, Some(500 * 1024));
        assert_eq!(m.rss_bytes, Some(100 * 1024));
        assert_eq!(parse_meminfo("MemTotal: 5 kB\n", 0), None);
    }

    #[test]
    fn rates() {
        let s = 1_000_000_000;
        // half a core over 10 s
        assert_eq!(rate((0, 0), (10 * s, 5 * s as u64)), Some(500_000_000));
        assert_eq!(rate((10, 100), (10, 200)), None, "no interval");
        assert_eq!(rate((0, 200), (s, 100)), None, "a restarted counter");
        assert_eq!(rate((0, 0), (6 * 60 * s, 1)), None, "older than MAX_WINDOW");
    }

    #[test]
    fn quantities() {
        assert_eq!(cpu_quantity(0), "0");
        assert_eq!(cpu_quantity(12_345), "12345n");
        assert_eq!(cpu_quantity(1_000), "1u");
        assert_eq!(cpu_quantity(3_000_000), "3m");
        assert_eq!(cpu_quantity(1_500_000_000), "1500m");
        assert_eq!(cpu_quantity(2_000_000_000), "2");
        assert_eq!(memory_quantity(0), "0");
        assert_eq!(memory_quantity(1000), "1000");
        assert_eq!(memory_quantity(1025), "1025");
        assert_eq!(memory_quantity(1024), "1Ki");
        assert_eq!(memory_quantity(1234 * 1024), "1234Ki");
        assert_eq!(memory_quantity(5 << 20), "5Mi");
        assert_eq!(memory_quantity(3 << 30), "3Gi");
    }

    fn container_stats(
        id: &str,
        name: &str,
        uid: &str,
        cpu: u64,
        ws: u64,
    ) -> crate::cri::ContainerStats {
        crate::cri::ContainerStats {
            id: id.into(),
            name: name.into(),
            attempt: 0,
            labels: [
                (cri::POD_UID_LABEL, uid),
                (cri::POD_NAME_LABEL, "web"),
                (cri::POD_NAMESPACE_LABEL, "default"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
            cpu: Some(CpuUsage {
                timestamp: T0,
                usage_core_nano_seconds: Some(cpu),
                usage_nano_cores: Some(cpu / 10),
            }),
            memory: Some(MemoryUsage {
                timestamp: T0,
                working_set_bytes: Some(ws),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn pods_sum_their_containers_without_sandbox_stats() {
        let mut unlabelled = container_stats("x", "x", "", 1, 1);
        unlabelled.labels.clear();
        let cs = vec![
            container_stats("b", "sidecar", "u1", 100, 1 << 20),
            container_stats("a", "app", "u1", 300, 3 << 20),
            unlabelled,
        ];
        let pods = pods_from(cs.clone(), None);
        assert_eq!(
            pods.len(),
            1,
            "containers without a pod UID are not a pod's"
        );
        let p = &pods[0];
        assert_eq!((p.name.as_str(), p.namespace.as_str()), ("web", "default"));
        let names: Vec<&str> = p.containers.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["app", "sidecar"]);
        let cpu = p.cpu.unwrap();
        assert_eq!(cpu.usage_core_nano_seconds, Some(400));
        assert_eq!(cpu.usage_nano_cores, Some(40));
        assert_eq!(p.memory.unwrap().working_set_bytes, Some(4 << 20));

        // The pod cgroup's own figures win (they include the sandbox).
        let sandbox = crate::cri::PodSandboxStats {
            uid: "u1".into(),
            cpu: Some(CpuUsage {
                timestamp: T0,
                usage_core_nano_seconds: Some(450),
                usage_nano_cores: None,
            }),
            memory: Some(MemoryUsage {
                timestamp: T0,
                working_set_bytes: Some(5 << 20),
                ..Default::default()
            }),
            ..Default::default()
        };
        let pods = pods_from(cs, Some(vec![sandbox]));
        assert_eq!(pods[0].cpu.unwrap().usage_core_nano_seconds, Some(450));
        assert_eq!(pods[0].memory.unwrap().working_set_bytes, Some(5 << 20));
    }

    fn sample_snapshot() -> Snapshot {
        let mut snap = Snapshot {
            node: NodeUsage {
                boot_time: Some(T0 - 3_600_000_000_000),
                cpu: Some(Cpu {
                    timestamp: T0,
                    usage_core_nano_seconds: Some(2_500_000_000),
                    usage_nano_cores: Some(250_000_000),
                }),
                memory: parse_meminfo("MemTotal: 4096 kB\nMemFree: 1024 kB\n", T0),
            },
            pods: pods_from(
                vec![container_stats("a", "app", "u1", 1_500_000_000, 3 << 20)],
                None,
            ),
            window: Duration::from_secs(10),
            runtime_error: None,
        };
        snap.pods[0].containers[0]
            .cpu
            .as_mut()
            .unwrap()
            .usage_nano_cores = Some(3_000_000);
        snap
    }

    #[test]
    fn summary_json() {
        let v = summary(&sample_snapshot(), "board");
        assert_eq!(v["node"]["nodeName"], "board");
        assert_eq!(v["node"]["startTime"], "2027-01-15T07:00:00Z");
        assert_eq!(v["node"]["cpu"]["usageNanoCores"], 250_000_000);
        assert_eq!(v["node"]["cpu"]["usageCoreNanoSeconds"], 2_500_000_000u64);
        assert_eq!(v["node"]["cpu"]["time"], "2027-01-15T08:00:00Z");
        assert_eq!(v["node"]["memory"]["workingSetBytes"], 3 << 20);
        assert_eq!(v["node"]["memory"]["availableBytes"], 1 << 20);
        let pod = &v["pods"][0];
        assert_eq!(
            pod["podRef"],
            json!({"name": "web", "namespace": "default", "uid": "u1"})
        );
        assert_eq!(pod["containers"][0]["name"], "app");
        assert_eq!(pod["containers"][0]["cpu"]["usageNanoCores"], 3_000_000);
        assert_eq!(pod["containers"][0]["memory"]["workingSetBytes"], 3 << 20);
        assert_eq!(pod["memory"]["workingSetBytes"], 3 << 20);
    }

    #[test]
    fn prometheus_text() {
        let text = resource_metrics(&sample_snapshot());
        let ms = T0 / 1_000_000;
        for line in [
            "# TYPE container_cpu_usage_seconds_total counter".to_string(),
            format!(
                "container_cpu_usage_seconds_total{{container=\"app\",namespace=\"default\",pod=\"web\"}} 1.5 {ms}"
            ),
            format!(
                "container_memory_working_set_bytes{{container=\"app\",namespace=\"default\",pod=\"web\"}} 3145728 {ms}"
            ),
            format!("node_cpu_usage_seconds_total 2.5 {ms}"),
            format!("node_memory_working_set_bytes 3145728 {ms}"),
            format!("pod_cpu_usage_seconds_total{{namespace=\"default\",pod=\"web\"}} 1.5 {ms}"),
            format!(
                "pod_memory_working_set_bytes{{namespace=\"default\",pod=\"web\"}} 3145728 {ms}"
            ),
            "resource_scrape_error 0".to_string(),
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line:?} missing in\n{text}"
            );
        }
        assert_eq!(label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn metrics_objects() {
        let snap = sample_snapshot();
        let labels = BTreeMap::from([("kubernetes.io/os".to_string(), "linux".to_string())]);
        let n = node_metrics(&snap, "board", &labels, T0 + 5);
        assert_eq!(n["kind"], "NodeMetrics");
        assert_eq!(n["metadata"]["name"], "board");
        assert_eq!(n["metadata"]["labels"]["kubernetes.io/os"], "linux");
        assert_eq!(n["usage"], json!({"cpu": "250m", "memory": "3Mi"}));
        assert_eq!(n["window"], "10s");
        assert_eq!(n["timestamp"], "2027-01-15T08:00:00Z");
        let p = pod_metrics(&snap, &snap.pods[0], &json!({"app": "web"}), T0);
        assert_eq!(p["metadata"]["namespace"], "default");
        assert_eq!(p["metadata"]["labels"]["app"], "web");
        assert_eq!(
            p["containers"],
            json!([{"name": "app", "usage": {"cpu": "3m", "memory": "3Mi"}}])
        );
        assert_eq!(metrics_group()["preferredVersion"]["version"], "v1beta1");
        assert_eq!(metrics_resources()["resources"][1]["kind"], "PodMetrics");
    }

    /// The collector against the fake runtime and a fake /proc, on paused time: the first
    /// request samples twice (PRIME_INTERVAL apart), answers from the cache for CACHE_TTL,
    /// then computes rates from the previous sample.
    #[tokio::test(start_paused = true)]
    async fn snapshots_rates_and_cache() {
        let dir = tempfile::tempdir().unwrap();
        let proc_root = dir.path().to_path_buf();
        let write_stat = |ticks: u64| {
            std::fs::write(
                proc_root.join("stat"),
                format!("cpu  {ticks} 0 0 5000 0 0 0 0\n"),
            )
            .unwrap()
        };
        write_stat(1000);
        std::fs::write(
            proc_root.join("meminfo"),
            "MemTotal: 2048 kB\nMemFree: 1024 kB\nInactive(file): 0 kB\n",
        )
        .unwrap();
        let clock = TokioClock::new(T0);
        let rt = FakeRuntime::new(clock);
        rt.add_image("busybox");
        let mut sb = SandboxConfig {
            name: "web".into(),
            namespace: "default".into(),
            uid: "u1".into(),
            ..Default::default()
        };
        sb.labels = [
            (cri::POD_NAME_LABEL, "web"),
            (cri::POD_NAMESPACE_LABEL, "default"),
            (cri::POD_UID_LABEL, "u1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let sandbox = rt.run_pod_sandbox(&sb).await.unwrap();
        let cc = ContainerConfig {
            name: "app".into(),
            image: "busybox".into(),
            labels: {
                let mut l = sb.labels.clone();
                l.insert(cri::CONTAINER_NAME_LABEL.into(), "app".into());
                l
            },
            ..Default::default()
        };
        let id = rt.create_container(&sandbox, &cc, &sb).await.unwrap();
        rt.start_container(&id).await.unwrap();
        rt.set_usage("app", 1_000_000_000, 3 << 20);
        rt.take_calls();

        let stats = Stats::new(proc_root.clone());
        let first = stats.snapshot(&rt, &clock).await;
        let stats_calls = |rt: &FakeRuntime| {
            rt.take_calls()
                .into_iter()
                .filter(|c| *c == Call::ListContainerStats)
                .count()
        };
        assert_eq!(stats_calls(&rt), 2, "primed: two samples");
        assert_eq!(first.window, PRIME_INTERVAL);
        let pod = &first.pods[0];
        assert_eq!((pod.name.as_str(), pod.uid.as_str()), ("web", "u1"));
        assert_eq!(pod.containers[0].cpu.unwrap().usage_nano_cores, Some(0));
        assert_eq!(pod.memory.unwrap().working_set_bytes, Some(3 << 20));
        assert_eq!(first.node.cpu.unwrap().usage_nano_cores, Some(0));
        assert_eq!(first.node.memory.unwrap().working_set_bytes, Some(1 << 20));

        // Within the TTL: the same snapshot, nothing asked.
        tokio::time::advance(Duration::from_secs(5)).await;
        let again = stats.snapshot(&rt, &clock).await;
        assert!(Rc::ptr_eq(&first, &again));
        assert_eq!(stats_calls(&rt), 0);

        // 10 s after the last sample: half a core in the container, one core on the node.
        rt.set_usage("app", 6_000_000_000, 4 << 20);
        write_stat(2000);
        tokio::time::advance(Duration::from_secs(5)).await;
        let later = stats.snapshot(&rt, &clock).await;
        assert_eq!(stats_calls(&rt), 1, "a recent sample: no priming");
        assert_eq!(later.window, Duration::from_secs(10));
        assert_eq!(
            later.pods[0].containers[0].cpu.unwrap().usage_nano_cores,
            Some(500_000_000)
        );
        assert_eq!(
            later.pods[0].cpu.unwrap().usage_nano_cores,
            Some(500_000_000)
        );
        assert_eq!(
            later.node.cpu.unwrap().usage_nano_cores,
            Some(1_000_000_000)
        );
        let pm = pod_metrics(&later, &later.pods[0], &json!({}), clock.now());
        assert_eq!(
            pm["containers"][0]["usage"],
            json!({"cpu": "500m", "memory": "4Mi"})
        );

        // A container that is gone leaves no sample behind.
        rt.stop_container(&id, 0).await.unwrap();
        tokio::time::advance(CACHE_TTL).await;
        let empty = stats.snapshot(&rt, &clock).await;
        assert!(empty.pods.is_empty());
        assert_eq!(stats.state.borrow().prev.len(), 1, "only the node's");
    }

    #[tokio::test(start_paused = true)]
    async fn sandbox_stats_when_the_runtime_has_them() {
        let dir = tempfile::tempdir().unwrap();
        let clock = TokioClock::new(T0);
        let rt = FakeRuntime::new(clock);
        let stats = Stats::new(dir.path().to_path_buf());
        // Unimplemented (the fake's default): asked once, never again.
        stats.snapshot(&rt, &clock).await;
        tokio::time::advance(CACHE_TTL).await;
        stats.snapshot(&rt, &clock).await;
        let asked = rt
            .take_calls()
            .into_iter()
            .filter(|c| *c == Call::ListPodSandboxStats)
            .count();
        assert_eq!(asked, 1);
        assert!(stats.state.borrow().no_pod_stats);

        // Another failure: retried after POD_STATS_RETRY.
        let stats = Stats::new(dir.path().to_path_buf());
        rt.serve_pod_stats(true);
        rt.fail_once(
            crate::cri::fake::Method::ListPodSandboxStats,
            FakeRuntime::rpc_error(
                crate::cri::fake::Method::ListPodSandboxStats,
                "cgroupPath is empty",
            ),
        );
        stats.snapshot(&rt, &clock).await;
        tokio::time::advance(CACHE_TTL).await;
        stats.snapshot(&rt, &clock).await;
        tokio::time::advance(POD_STATS_RETRY).await;
        let snap = stats.snapshot(&rt, &clock).await;
        let asked = rt
            .take_calls()
            .into_iter()
            .filter(|c| *c == Call::ListPodSandboxStats)
            .count();
        // The failure; nothing until the retry time; then a primed snapshot (the samples
        // are older than MAX_WINDOW by then) asks twice.
        assert_eq!(asked, 3);
        assert!(snap.runtime_error.is_none());
    }
}
