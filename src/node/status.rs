//! The Node object and the node Lease (kubelet: `kubelet_node_status.go`,
//! `nodelease/controller.go`).
//!
//! Owns: registering the Node (labels `kubernetes.io/hostname`, `kubernetes.io/os`,
//! `kubernetes.io/arch` and `--node-labels`), its status (Ready from the CRI `Status`,
//! addresses, capacity/allocatable, nodeInfo) and its Lease in `kube-node-lease`; it
//! publishes the Node's UID (mirror pods need it for their owner reference).
//!
//! Timing (upstream's): status computed every 10 s (`--node-status-update-frequency`) and
//! PATCHed only when it changed (heartbeat times aside) or every 5 min; Lease of 40 s
//! renewed every 10 s. Registration retries 100 ms doubling to 7 s; every other failure
//! is logged once per streak and retried at the next tick. A Node deleted behind picolet's
//! back is registered again.
//!
//! Pure parts, table-tested: [`node_status`] (facts + runtime health + previous → status)
//! and [`needs_report`]. Facts are read from injected roots (`/proc`, `/etc`, `/sys`).
//!
//! Must never: panic, or block the event loop (it is its own task).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::api::cluster::{
    Lease, LeaseSpec, Node, NodeAddress, NodeCondition, NodeStatus, NodeSystemInfo,
};
use crate::api::{ObjectMeta, OwnerReference};
use crate::clock::{self, Clock, UnixNanos};
use crate::cri::{Runtime, RuntimeHealth, RuntimeVersion};
use crate::kube::{ApiError, Backoff, Client, PatchKind};

pub(crate) use crate::node::go_arch;
pub(crate) use crate::node::parse_meminfo;
#[cfg(test)]
pub(crate) use crate::node::{LABEL_ARCH, LABEL_HOSTNAME, LABEL_OS};
pub(crate) const LEASE_NAMESPACE: &str = "kube-node-lease";

/// The `kubeletVersion` picolet reports: its own version, recognisable and valid semver.
pub(crate) const KUBELET_VERSION: &str = concat!("v", env!("CARGO_PKG_VERSION"), "-picolet");

/// What the node task needs to know.
#[derive(Debug, Clone)]
pub struct NodeOptions {
    pub node_name: String,
    /// `--node-labels`, added to the default labels (which win on conflict).
    pub labels: BTreeMap<String, String>,
    /// `--max-pods`.
    pub max_pods: u32,
    /// `--port`: the node API's port, reported as `daemonEndpoints.kubeletEndpoint` (0: none).
    pub kubelet_port: u16,
    /// `--node-ip`: the InternalIP address; else the local address that reaches the
    /// apiserver.
    pub node_ip: Option<IpAddr>,
    /// kubelet: `nodeStatusUpdateFrequency` (10 s).
    pub status_update_frequency: Duration,
    /// kubelet: `nodeStatusReportFrequency` (5 min).
    pub status_report_frequency: Duration,
    /// kubelet: `nodeLeaseDurationSeconds` (40 s).
    pub lease_duration: Duration,
    /// kubelet: renew interval = 0.25 × lease duration (10 s).
    pub lease_renew_interval: Duration,
    /// Roots of `/proc`, `/etc` and `/sys` (tests use a tempdir).
    pub proc_root: PathBuf,
    pub etc_root: PathBuf,
    pub sys_root: PathBuf,
    /// `--system-reserved`, `--kube-reserved`, hard eviction: allocatable = capacity − these.
    pub allocatable: crate::cm::NodeAllocatable,
}

impl NodeOptions {
    pub fn new(node_name: impl Into<String>) -> Self {
        NodeOptions {
            node_name: node_name.into(),
            labels: BTreeMap::new(),
            max_pods: 110,
            kubelet_port: 0,
            node_ip: None,
            status_update_frequency: Duration::from_secs(10),
            status_report_frequency: Duration::from_secs(300),
            lease_duration: Duration::from_secs(40),
            lease_renew_interval: Duration::from_secs(10),
            proc_root: PathBuf::from("/proc"),
            etc_root: PathBuf::from("/etc"),
            sys_root: PathBuf::from("/sys"),
            allocatable: crate::cm::NodeAllocatable::default(),
        }
    }
}

/// The Node's labels: `--node-labels`, then the default labels (kubelet: `initialNode`).
pub(crate) fn node_labels(opts: &NodeOptions) -> BTreeMap<String, String> {
    crate::node::node_labels(&opts.node_name, &opts.labels)
}

/// Machine facts, read once at start (and the runtime version once reachable).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeFacts {
    pub hostname: String,
    pub internal_ip: Option<IpAddr>,
    pub cpus: u32,
    /// `MemTotal` in KiB.
    pub memory_kib: u64,
    /// `SwapTotal` in KiB.
    pub swap_kib: u64,
    pub max_pods: u32,
    /// The node API's port (kubelet: `daemonEndpoints.kubeletEndpoint.Port`).
    pub kubelet_port: u16,
    pub kernel_version: String,
    pub os_image: String,
    pub machine_id: String,
    pub boot_id: String,
    pub system_uuid: String,
    /// `containerd://1.6.20`, empty until the runtime answered.
    pub runtime_version: String,
    /// What allocatable subtracts from the capacity.
    pub allocatable: crate::cm::NodeAllocatable,
    /// The eviction manager's pressure conditions (kept up to date by the node task).
    pub pressure: crate::eviction::Conditions,
    /// A graceful node shutdown is under way (`node::shutdown`): Ready is False.
    pub shutting_down: bool,
    /// The device plugins' resources (`cm::devicemanager`): capacity and allocatable.
    pub devices: crate::cm::devicemanager::Resources,
}

impl NodeFacts {
    /// Reads the facts from the injected roots; what cannot be read stays empty.
    pub fn read(opts: &NodeOptions) -> Self {
        let read = |p: PathBuf| std::fs::read_to_string(p).unwrap_or_default();
        let cpuinfo = read(opts.proc_root.join("cpuinfo"));
        let meminfo = read(opts.proc_root.join("meminfo"));
        let cpus = cpuinfo
            .lines()
            .filter(|l| l.starts_with("processor"))
            .count() as u32;
        let cpus = if cpus > 0 {
            cpus
        } else {
            std::thread::available_parallelism()
                .map(|n| n.get() as u32)
                .unwrap_or(1)
        };
        NodeFacts {
            hostname: opts.node_name.clone(),
            internal_ip: opts.node_ip,
            cpus,
            memory_kib: parse_meminfo(&meminfo).unwrap_or(0),
            swap_kib: crate::node::meminfo_field(&meminfo, "SwapTotal:").unwrap_or(0),
            max_pods: opts.max_pods,
            kubelet_port: opts.kubelet_port,
            kernel_version: read(opts.proc_root.join("sys/kernel/osrelease"))
                .trim()
                .to_string(),
            os_image: parse_os_release(&read(opts.etc_root.join("os-release"))),
            machine_id: read(opts.etc_root.join("machine-id")).trim().to_string(),
            boot_id: read(opts.proc_root.join("sys/kernel/random/boot_id"))
                .trim()
                .to_string(),
            system_uuid: read(opts.sys_root.join("class/dmi/id/product_uuid"))
                .trim()
                .to_string(),
            runtime_version: String::new(),
            allocatable: opts.allocatable,
            pressure: Default::default(),
            shutting_down: false,
            devices: Default::default(),
        }
    }
}

/// `PRETTY_NAME` of os-release, else `NAME VERSION`, else "Linux".
pub(crate) fn parse_os_release(text: &str) -> String {
    let get = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .map(|v| v.trim().trim_matches('"').trim_matches('\'').to_string())
            .filter(|v| !v.is_empty())
    };
    get("PRETTY_NAME")
        .or_else(|| match (get("NAME"), get("VERSION")) {
            (Some(n), Some(v)) => Some(format!("{n} {v}")),
            (Some(n), None) => Some(n),
            _ => None,
        })
        .unwrap_or_else(|| "Linux".into())
}

/// The node status from the facts, the runtime's health (`None`: not reachable) and the
/// status last sent (for `lastTransitionTime`) (kubelet: `setNodeStatus`, which runs
/// the setters of `nodestatus/setters.go` in turn).
pub(crate) fn node_status(
    facts: &NodeFacts,
    health: Option<&RuntimeHealth>,
    previous: Option<&NodeStatus>,
    now: UnixNanos,
) -> NodeStatus {
    let stamp = clock::rfc3339(now);
    let conditions = node_conditions(facts, health, previous, &stamp);
    let (capacity, allocatable) = machine_resources(facts);
    NodeStatus {
        allocatable,
        capacity,
        conditions,
        addresses: node_addresses(facts),
        daemon_endpoints: Some(json!({"kubeletEndpoint": {"Port": facts.kubelet_port}})),
        node_info: Some(version_info(facts)),
    }
}

/// kubelet: the `ReadyCondition` setter — status, reason and message of `Ready`: NotReady
/// while shutting down or when the runtime is down or not ready.
fn ready_condition(
    facts: &NodeFacts,
    health: Option<&RuntimeHealth>,
) -> (&'static str, &'static str, String) {
    match health {
        // kubelet: the shutdown manager's `ShutdownStatus` makes the node NotReady.
        _ if facts.shutting_down => (
            "False",
            "KubeletNotReady",
            super::shutdown::NODE_NOT_READY_MESSAGE.to_string(),
        ),
        Some(h) if h.runtime_ready && h.network_ready => (
            "True",
            "KubeletReady",
            "picolet is posting ready status".to_string(),
        ),
        Some(h) => (
            "False",
            "KubeletNotReady",
            format!(
                "container runtime not ready: RuntimeReady={} NetworkReady={} {}",
                h.runtime_ready, h.network_ready, h.message
            )
            .trim()
            .to_string(),
        ),
        None => (
            "False",
            "KubeletNotReady",
            "container runtime is down".to_string(),
        ),
    }
}

/// The node's conditions, each stamped `now` as its heartbeat and keeping the previous
/// `lastTransitionTime` while its status is unchanged: the three pressure conditions,
/// then `Ready`.
fn node_conditions(
    facts: &NodeFacts,
    health: Option<&RuntimeHealth>,
    previous: Option<&NodeStatus>,
    stamp: &Option<String>,
) -> Vec<NodeCondition> {
    let (ready, reason, message) = ready_condition(facts, health);
    let condition = |type_: &str, status: &str, reason: &str, message: String| {
        let transition = previous
            .and_then(|p| p.conditions.iter().find(|c| c.type_ == type_))
            .filter(|c| c.status == status)
            .and_then(|c| c.last_transition_time.clone())
            .or_else(|| stamp.clone());
        NodeCondition {
            type_: type_.into(),
            status: status.into(),
            last_heartbeat_time: stamp.clone(),
            last_transition_time: transition,
            reason: Some(reason.into()),
            message: Some(message),
        }
    };
    // kubelet: the MemoryPressureCondition, DiskPressureCondition and PIDPressureCondition
    // setters over the eviction manager's view.
    let pressure = |type_: &str, on: bool, yes: (&str, &str), no: (&str, &str)| {
        let (status, (reason, message)) = if on { ("True", yes) } else { ("False", no) };
        condition(type_, status, reason, message.into())
    };
    let p = &facts.pressure;
    vec![
        pressure(
            "MemoryPressure",
            p.memory_pressure,
            (
                "KubeletHasInsufficientMemory",
                "picolet has insufficient memory available",
            ),
            (
                "KubeletHasSufficientMemory",
                "picolet has sufficient memory available",
            ),
        ),
        pressure(
            "DiskPressure",
            p.disk_pressure,
            ("KubeletHasDiskPressure", "picolet has disk pressure"),
            ("KubeletHasNoDiskPressure", "picolet has no disk pressure"),
        ),
        pressure(
            "PIDPressure",
            p.pid_pressure,
            (
                "KubeletHasInsufficientPID",
                "picolet has insufficient PID available",
            ),
            (
                "KubeletHasSufficientPID",
                "picolet has sufficient PID available",
            ),
        ),
        condition("Ready", ready, reason, message),
    ]
}

/// kubelet: the `NodeAddress` setter — the internal IP when known, then the hostname.
fn node_addresses(facts: &NodeFacts) -> Vec<NodeAddress> {
    let mut addresses = Vec::new();
    if let Some(ip) = facts.internal_ip {
        addresses.push(NodeAddress {
            type_: "InternalIP".into(),
            address: ip.to_string(),
        });
    }
    addresses.push(NodeAddress {
        type_: "Hostname".into(),
        address: facts.hostname.clone(),
    });
    addresses
}

/// kubelet: the `MachineInfo` setter — capacity and allocatable (cpu, memory, pods and
/// the device plugins' resources).
fn machine_resources(facts: &NodeFacts) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let mut capacity = BTreeMap::new();
    capacity.insert("cpu".to_string(), facts.cpus.to_string());
    capacity.insert("memory".to_string(), format!("{}Ki", facts.memory_kib));
    capacity.insert("pods".to_string(), facts.max_pods.to_string());
    // kubelet: MachineInfo's allocatable setter — capacity − reserved − hard eviction.
    let (cpu_milli, memory) = facts.allocatable.allocatable(
        i64::from(facts.cpus) * 1000,
        i64::try_from(facts.memory_kib.saturating_mul(1024)).unwrap_or(i64::MAX),
    );
    let mut allocatable = capacity.clone();
    allocatable.insert(
        "cpu".into(),
        if cpu_milli % 1000 == 0 {
            (cpu_milli / 1000).to_string()
        } else {
            format!("{cpu_milli}m")
        },
    );
    allocatable.insert(
        "memory".into(),
        if memory % 1024 == 0 {
            format!("{}Ki", memory / 1024)
        } else {
            memory.to_string()
        },
    );
    // kubelet: the device manager's resources (`GetCapacity`): every device in capacity,
    // the healthy ones in allocatable; a resource whose plugin is gone stays, at 0.
    for (name, count) in &facts.devices {
        capacity.insert(name.clone(), count.capacity.to_string());
        allocatable.insert(name.clone(), count.allocatable.to_string());
    }
    (capacity, allocatable)
}

/// kubelet: the `VersionInfo` and `MachineInfo` setters' `nodeInfo` — ids, kernel, OS
/// image, runtime and kubelet versions, architecture and swap.
fn version_info(facts: &NodeFacts) -> NodeSystemInfo {
    NodeSystemInfo {
        machine_id: facts.machine_id.clone(),
        system_uuid: facts.system_uuid.clone(),
        boot_id: facts.boot_id.clone(),
        kernel_version: facts.kernel_version.clone(),
        os_image: facts.os_image.clone(),
        container_runtime_version: facts.runtime_version.clone(),
        kubelet_version: KUBELET_VERSION.into(),
        kube_proxy_version: String::new(),
        operating_system: "linux".into(),
        architecture: go_arch().into(),
        // kubelet: the MachineInfo setter, with NodeSwap (GA) and swap on.
        swap: (facts.swap_kib > 0)
            .then(|| json!({"capacity": facts.swap_kib.saturating_mul(1024)})),
    }
}

/// Whether to PATCH: the status changed (heartbeat times aside), or the last report is
/// `report_every` old (kubelet: `tryUpdateNodeStatus` + `nodeStatusReportFrequency`).
pub(crate) fn needs_report(
    last_sent: Option<&NodeStatus>,
    new: &NodeStatus,
    last_sent_at: Option<Instant>,
    now: Instant,
    report_every: Duration,
) -> bool {
    let Some(last) = last_sent else {
        return true;
    };
    if last_sent_at.is_none_or(|at| now.duration_since(at) >= report_every) {
        return true;
    }
    without_heartbeats(last) != without_heartbeats(new)
}

fn without_heartbeats(s: &NodeStatus) -> NodeStatus {
    let mut s = s.clone();
    for c in &mut s.conditions {
        c.last_heartbeat_time = None;
    }
    s
}

/// `metav1.MicroTime`: RFC 3339 with microseconds.
pub(crate) fn micro_time(t: UnixNanos) -> String {
    let nanos = clock::rfc3339_nanos(t);
    // `…:SS.nnnnnnnnnZ` → `…:SS.uuuuuuZ`
    match nanos.len() {
        n if n > 4 => format!("{}Z", &nanos[..n - 4]),
        _ => nanos,
    }
}

/// The local address the kernel would use to reach `server` (a UDP "connect" sends
/// nothing): the node's InternalIP when `--node-ip` is not given.
pub(crate) fn local_ip_towards(server: &str) -> Option<IpAddr> {
    let uri: http::Uri = server.parse().ok()?;
    let host = uri.host()?.trim_start_matches('[').trim_end_matches(']');
    let port = uri.port_u16().unwrap_or(443);
    let target = std::net::ToSocketAddrs::to_socket_addrs(&(host, port))
        .ok()?
        .next()?;
    let bind = if target.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    };
    let sock = std::net::UdpSocket::bind(bind).ok()?;
    sock.connect(target).ok()?;
    let ip = sock.local_addr().ok()?.ip();
    (!ip.is_unspecified()).then_some(ip)
}

/// The next change of `rx`; pending forever without one (or once its sender is gone).
async fn changed(rx: &mut Option<watch::Receiver<bool>>) -> Result<(), ()> {
    match rx {
        Some(r) => match r.changed().await {
            Ok(()) => Ok(()),
            Err(_) => {
                *rx = None;
                std::future::pending().await
            }
        },
        None => std::future::pending().await,
    }
}

/// The next change of the device plugins' resources; pending forever without a receiver
/// (or once its sender is gone).
async fn devices_changed(
    rx: &mut Option<watch::Receiver<crate::cm::devicemanager::Resources>>,
) -> Result<(), ()> {
    match rx {
        Some(r) => match r.changed().await {
            Ok(()) => Ok(()),
            Err(_) => {
                *rx = None;
                std::future::pending().await
            }
        },
        None => std::future::pending().await,
    }
}

/// The node task: registers, then keeps status and lease fresh until `shutdown`.
pub struct NodeAgent<R: Runtime, C: Clock> {
    client: Client,
    runtime: R,
    clock: C,
    opts: NodeOptions,
    node_uid: watch::Sender<Option<String>>,
    pressure: Option<watch::Receiver<crate::eviction::Conditions>>,
    shutting_down: Option<watch::Receiver<bool>>,
    devices: Option<watch::Receiver<crate::cm::devicemanager::Resources>>,
}

impl<R: Runtime, C: Clock> NodeAgent<R, C> {
    /// `node_uid` receives the Node's UID once registered (mirror pods wait for it).
    pub fn new(
        client: Client,
        runtime: R,
        clock: C,
        opts: NodeOptions,
        node_uid: watch::Sender<Option<String>>,
    ) -> Self {
        NodeAgent {
            client,
            runtime,
            clock,
            opts,
            node_uid,
            pressure: None,
            shutting_down: None,
            devices: None,
        }
    }

    /// The device plugins' resources go into the status, reported at once when they change.
    pub fn with_devices(
        mut self,
        rx: Option<watch::Receiver<crate::cm::devicemanager::Resources>>,
    ) -> Self {
        self.devices = rx;
        self
    }

    /// A graceful node shutdown makes the node NotReady, reported at once.
    pub fn with_shutting_down(mut self, rx: watch::Receiver<bool>) -> Self {
        self.shutting_down = Some(rx);
        self
    }

    /// The eviction manager's conditions go into the status.
    pub fn with_pressure(mut self, rx: watch::Receiver<crate::eviction::Conditions>) -> Self {
        self.pressure = Some(rx);
        self
    }

    pub async fn run(self, shutdown: CancellationToken) {
        let mut facts = NodeFacts::read(&self.opts);
        if facts.internal_ip.is_none() {
            facts.internal_ip = local_ip_towards(self.client.server());
        }
        let mut state = NodeState::default();
        let mut shutting_down = self.shutting_down.clone();
        let mut devices = self.devices.clone();
        let mut status_tick = crate::local_tasks::interval(self.opts.status_update_frequency);
        let mut lease_tick = crate::local_tasks::interval(self.opts.lease_renew_interval);
        loop {
            if state.node_uid.is_none() {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = self.register(&mut state, &facts) => {}
                }
                continue;
            }
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => return,
                _ = status_tick.tick() => self.update_status(&mut state, &mut facts).await,
                // kubelet: the shutdown manager syncs the node status at once.
                Ok(()) = changed(&mut shutting_down) => {
                    log::info!("node {}: shutting down: reporting NotReady", self.opts.node_name);
                    self.update_status(&mut state, &mut facts).await;
                }
                _ = lease_tick.tick() => self.renew_lease(&mut state).await,
                // kubelet: the device manager's capacity changes reach the status at its
                // next update; here at once.
                Ok(()) = devices_changed(&mut devices) => self.update_status(&mut state, &mut facts).await,
            }
        }
    }

    /// kubelet: `registerWithAPIServer` — create, or adopt the existing Node and make sure
    /// it carries the default labels. Retries until it succeeds.
    async fn register(&self, state: &mut NodeState, facts: &NodeFacts) {
        let mut backoff = Backoff::new(
            Duration::from_millis(100),
            Duration::from_secs(7),
            &self.opts.node_name,
        );
        let mut failures = 0u32;
        loop {
            match self.try_register(facts).await {
                Ok(uid) => {
                    log::info!(
                        "node {} registered with the apiserver {} (uid {uid})",
                        self.opts.node_name,
                        self.client.server()
                    );
                    state.node_uid = Some(uid.clone());
                    state.last_sent = None;
                    self.node_uid.send_replace(Some(uid));
                    return;
                }
                Err(e) => {
                    // The first failure, then one line a minute or so (7 s × 8).
                    if failures % 8 == 0 {
                        log::warn!(
                            "node {}: cannot register (will keep trying): {e}",
                            self.opts.node_name
                        );
                    } else {
                        log::debug!("node {}: cannot register: {e}", self.opts.node_name);
                    }
                    failures = failures.wrapping_add(1);
                }
            }
            tokio::time::sleep(backoff.next_delay()).await;
        }
    }

    async fn try_register(&self, facts: &NodeFacts) -> Result<String, ApiError> {
        let labels = node_labels(&self.opts);
        let node = Node {
            api_version: "v1".into(),
            kind: "Node".into(),
            metadata: ObjectMeta {
                name: self.opts.node_name.clone(),
                labels: labels.clone(),
                ..ObjectMeta::default()
            },
            spec: Default::default(),
            status: Some(node_status(facts, None, None, self.clock.now())),
        };
        match self.client.create::<_, Node>("/api/v1/nodes", &node).await {
            Ok(created) => Ok(created.metadata.uid),
            Err(e) if e.is_already_exists() || e.is_conflict() => {
                let path = format!("/api/v1/nodes/{}", self.opts.node_name);
                let existing: Node = self.client.get(&path).await?;
                let missing: BTreeMap<&String, &String> = crate::sort::collect_map(
                    labels
                        .iter()
                        .filter(|(k, v)| existing.metadata.labels.get(*k) != Some(*v)),
                );
                if !missing.is_empty() {
                    // kubelet: reconcile the default labels of an existing Node.
                    self.client
                        .patch::<Node>(
                            &path,
                            PatchKind::Merge,
                            &json!({"metadata": {"labels": missing}}),
                        )
                        .await?;
                }
                Ok(existing.metadata.uid)
            }
            Err(e) => Err(e),
        }
    }

    async fn update_status(&self, state: &mut NodeState, facts: &mut NodeFacts) {
        if facts.runtime_version.is_empty() {
            if let Ok(RuntimeVersion {
                runtime_name,
                runtime_version,
                ..
            }) = self.runtime.version().await
            {
                facts.runtime_version = format!("{runtime_name}://{runtime_version}");
            }
        }
        let health = self.runtime.status().await.ok();
        if let Some(rx) = &self.pressure {
            facts.pressure = *rx.borrow();
        }
        if let Some(rx) = &self.shutting_down {
            facts.shutting_down = *rx.borrow();
        }
        if let Some(rx) = &self.devices {
            facts.devices = rx.borrow().clone();
        }
        let status = node_status(
            facts,
            health.as_ref(),
            state.last_sent.as_ref(),
            self.clock.now(),
        );
        let now = Instant::now();
        if !needs_report(
            state.last_sent.as_ref(),
            &status,
            state.last_sent_at,
            now,
            self.opts.status_report_frequency,
        ) {
            return;
        }
        let path = format!("/api/v1/nodes/{}/status", self.opts.node_name);
        let body = json!({ "status": status });
        match self
            .client
            .patch::<Node>(&path, PatchKind::StrategicMerge, &body)
            .await
        {
            Ok(_) => {
                if state.status_failing {
                    log::info!("node {}: status reported again", self.opts.node_name);
                }
                state.status_failing = false;
                let ready_changed = state
                    .last_sent
                    .as_ref()
                    .map(ready_of)
                    .is_none_or(|r| r != ready_of(&status));
                if ready_changed {
                    log::info!("node {}: Ready={}", self.opts.node_name, ready_of(&status));
                }
                state.last_sent = Some(status);
                state.last_sent_at = Some(now);
            }
            Err(e) if e.is_not_found() => {
                log::warn!(
                    "node {}: the Node object is gone; registering again",
                    self.opts.node_name
                );
                state.node_uid = None;
            }
            Err(e) => {
                if !state.status_failing {
                    log::warn!("node {}: cannot update status: {e}", self.opts.node_name);
                }
                state.status_failing = true;
            }
        }
    }

    /// kubelet: nodelease `sync` — create the Lease or renew it (PUT with the last known
    /// resourceVersion; on a conflict, read it again and retry once).
    async fn renew_lease(&self, state: &mut NodeState) {
        let result = match self.try_renew_lease(state).await {
            Err(e) if e.is_conflict() => {
                state.lease = None;
                self.try_renew_lease(state).await
            }
            other => other,
        };
        match result {
            Ok(()) => {
                if state.lease_failing {
                    log::info!("node {}: lease renewed again", self.opts.node_name);
                }
                state.lease_failing = false;
            }
            Err(e) => {
                state.lease = None;
                if !state.lease_failing {
                    log::warn!("node {}: cannot renew the lease: {e}", self.opts.node_name);
                }
                state.lease_failing = true;
            }
        }
    }

    async fn try_renew_lease(&self, state: &mut NodeState) -> Result<(), ApiError> {
        let name = &self.opts.node_name;
        let path = format!("/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases");
        let item = format!("{path}/{name}");
        let lease = match state.lease.take() {
            Some(l) => Some(l),
            None => self.client.get_opt::<Lease>(&item).await?,
        };
        let spec = LeaseSpec {
            holder_identity: Some(name.clone()),
            lease_duration_seconds: Some(self.opts.lease_duration.as_secs() as i64),
            renew_time: Some(micro_time(self.clock.now())),
        };
        let owner = state.node_uid.as_ref().map(|uid| OwnerReference {
            api_version: "v1".into(),
            kind: "Node".into(),
            name: name.clone(),
            uid: uid.clone(),
            controller: None,
        });
        let renewed: Lease = match lease {
            None => {
                let lease = Lease {
                    api_version: "coordination.k8s.io/v1".into(),
                    kind: "Lease".into(),
                    metadata: ObjectMeta {
                        name: name.clone(),
                        namespace: LEASE_NAMESPACE.into(),
                        owner_references: owner.into_iter().collect(),
                        ..ObjectMeta::default()
                    },
                    spec,
                };
                self.client.create(&path, &lease).await?
            }
            Some(mut lease) => {
                lease.spec = spec;
                if lease.metadata.owner_references.is_empty() {
                    lease.metadata.owner_references = owner.into_iter().collect();
                }
                self.client.replace(&item, &lease).await?
            }
        };
        state.lease = Some(renewed);
        Ok(())
    }
}

fn ready_of(s: &NodeStatus) -> &str {
    s.conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map_or("Unknown", |c| c.status.as_str())
}

#[derive(Default)]
struct NodeState {
    node_uid: Option<String>,
    last_sent: Option<NodeStatus>,
    last_sent_at: Option<Instant>,
    status_failing: bool,
    lease: Option<Lease>,
    lease_failing: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::parse_labels;

    fn facts() -> NodeFacts {
        NodeFacts {
            hostname: "pi-1".into(),
            internal_ip: Some("192.0.2.7".parse().unwrap()),
            cpus: 4,
            memory_kib: 3_884_300,
            max_pods: 110,
            kernel_version: "6.6.31".into(),
            os_image: "Debian GNU/Linux 12 (bookworm)".into(),
            runtime_version: "containerd://1.6.20".into(),
            ..NodeFacts::default()
        }
    }

    #[test]
    fn pressure_conditions_follow_the_eviction_manager() {
        let mut f = facts();
        let of = |s: &NodeStatus, t: &str| {
            let c = s.conditions.iter().find(|c| c.type_ == t).unwrap();
            (c.status.clone(), c.reason.clone().unwrap())
        };
        let s = node_status(&f, None, None, 1);
        assert_eq!(
            of(&s, "MemoryPressure"),
            ("False".into(), "KubeletHasSufficientMemory".into())
        );
        f.pressure = crate::eviction::Conditions {
            memory_pressure: true,
            disk_pressure: true,
            pid_pressure: true,
        };
        let s = node_status(&f, None, Some(&s), 2_000_000_000);
        let table = [
            ("MemoryPressure", "KubeletHasInsufficientMemory"),
            ("DiskPressure", "KubeletHasDiskPressure"),
            ("PIDPressure", "KubeletHasInsufficientPID"),
        ];
        for (t, reason) in table {
            assert_eq!(of(&s, t), ("True".into(), reason.into()), "{t}");
        }
    }

    #[test]
    fn a_node_shutting_down_is_not_ready() {
        let mut f = facts();
        let h = RuntimeHealth {
            runtime_ready: true,
            network_ready: true,
            message: String::new(),
            userns_handlers: None,
        };
        assert_eq!(ready_of(&node_status(&f, Some(&h), None, 1)), "True");
        f.shutting_down = true;
        let s = node_status(&f, Some(&h), None, 1);
        let c = s.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(c.status, "False");
        assert_eq!(c.reason.as_deref(), Some("KubeletNotReady"));
        assert_eq!(c.message.as_deref(), Some("node is shutting down"));
    }

    fn health(runtime: bool, network: bool) -> RuntimeHealth {
        RuntimeHealth {
            runtime_ready: runtime,
            network_ready: network,
            message: String::new(),
            userns_handlers: None,
        }
    }

    const T0: UnixNanos = 1_796_000_000_000_000_000;
    const SEC: UnixNanos = 1_000_000_000;

    #[test]
    fn device_plugin_resources_in_capacity_and_allocatable() {
        let mut f = facts();
        let count = |capacity, allocatable| crate::cm::devicemanager::ResourceCount {
            capacity,
            allocatable,
        };
        f.devices = vec![
            ("example.com/dev".to_string(), count(3, 2)),
            // A plugin gone for 5 minutes: still listed, at 0.
            ("vendor.io/gone".to_string(), count(0, 0)),
        ];
        let s = node_status(&f, Some(&health(true, true)), None, T0);
        assert_eq!(s.capacity["example.com/dev"], "3");
        assert_eq!(s.allocatable["example.com/dev"], "2");
        assert_eq!(s.capacity["vendor.io/gone"], "0");
        assert_eq!(s.allocatable["vendor.io/gone"], "0");
        assert_eq!(s.capacity["cpu"], "4");
    }

    #[test]
    fn status_from_facts_and_health() {
        let s = node_status(&facts(), Some(&health(true, true)), None, T0);
        assert_eq!(s.capacity["cpu"], "4");
        assert_eq!(s.capacity["memory"], "3884300Ki");
        assert_eq!(s.capacity["pods"], "110");
        assert_eq!(s.allocatable, s.capacity);
        // Reserved resources and the hard eviction threshold come off the allocatable.
        let mut f = facts();
        f.allocatable = crate::cm::NodeAllocatable {
            reserved: crate::cm::Reserved {
                cpu_milli: 250,
                memory_bytes: 256 << 20,
            },
            eviction_hard_memory: crate::cm::DEFAULT_EVICTION_HARD_MEMORY,
        };
        let reserved = node_status(&f, None, None, T0);
        assert_eq!(reserved.allocatable["cpu"], "3750m");
        assert_eq!(
            reserved.allocatable["memory"],
            format!("{}Ki", 3884300 - 356 * 1024)
        );
        assert_eq!(reserved.allocatable["pods"], "110");
        assert_eq!(reserved.capacity["memory"], "3884300Ki");
        assert_eq!(
            s.addresses,
            vec![
                NodeAddress {
                    type_: "InternalIP".into(),
                    address: "192.0.2.7".into()
                },
                NodeAddress {
                    type_: "Hostname".into(),
                    address: "pi-1".into()
                },
            ]
        );
        let info = s.node_info.as_ref().unwrap();
        assert_eq!(info.kubelet_version, KUBELET_VERSION);
        assert_eq!(info.container_runtime_version, "containerd://1.6.20");
        assert_eq!(info.operating_system, "linux");
        assert_eq!(info.architecture, go_arch());
        assert_eq!(info.swap, None);
        assert_eq!(ready_of(&s), "True");
        // kubelet: nodeInfo.swap.capacity when the node has swap (NodeSwap, GA).
        let with_swap = NodeFacts {
            swap_kib: 102_396,
            ..facts()
        };
        let info = node_status(&with_swap, None, None, T0).node_info.unwrap();
        assert_eq!(info.swap, Some(json!({"capacity": 102_396u64 * 1024})));

        // (health, Ready) table
        for (h, want) in [
            (Some(health(true, true)), "True"),
            (Some(health(true, false)), "False"),
            (Some(health(false, true)), "False"),
            (None, "False"),
        ] {
            let s = node_status(&facts(), h.as_ref(), None, T0);
            assert_eq!(ready_of(&s), want, "{h:?}");
        }
    }

    #[test]
    fn transition_time_moves_only_on_change() {
        let first = node_status(&facts(), Some(&health(true, true)), None, T0);
        let same = node_status(
            &facts(),
            Some(&health(true, true)),
            Some(&first),
            T0 + 10 * SEC,
        );
        let ready = |s: &NodeStatus| s.conditions.iter().find(|c| c.type_ == "Ready").cloned();
        assert_eq!(
            ready(&same).unwrap().last_transition_time,
            ready(&first).unwrap().last_transition_time
        );
        assert_ne!(
            ready(&same).unwrap().last_heartbeat_time,
            ready(&first).unwrap().last_heartbeat_time
        );
        let down = node_status(&facts(), None, Some(&same), T0 + 20 * SEC);
        assert_eq!(
            ready(&down).unwrap().last_transition_time,
            clock::rfc3339(T0 + 20 * SEC)
        );
    }

    #[test]
    fn report_only_on_change_or_when_due() {
        let t = Instant::now();
        let every = Duration::from_secs(300);
        let a = node_status(&facts(), Some(&health(true, true)), None, T0);
        let a_later = node_status(&facts(), Some(&health(true, true)), Some(&a), T0 + 10 * SEC);
        let b = node_status(&facts(), None, Some(&a), T0 + 10 * SEC);
        // (last sent, new, sent at, now) → report?
        let cases = [
            (None, &a, None, t, true),
            (
                Some(&a),
                &a_later,
                Some(t),
                t + Duration::from_secs(10),
                false,
            ),
            (Some(&a), &b, Some(t), t + Duration::from_secs(10), true),
            (Some(&a), &a_later, Some(t), t + every, true),
        ];
        for (i, (last, new, at, now, want)) in cases.into_iter().enumerate() {
            assert_eq!(needs_report(last, new, at, now, every), want, "case {i}");
        }
    }

    #[test]
    fn parsers() {
        assert_eq!(
            parse_meminfo("MemTotal:        3884300 kB\nMemFree: 1 kB\n"),
            Some(3_884_300)
        );
        assert_eq!(parse_meminfo(""), None);
        assert_eq!(
            parse_os_release("NAME=\"Debian\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n"),
            "Debian GNU/Linux 12 (bookworm)"
        );
        assert_eq!(
            parse_os_release("NAME='OpenWrt'\nVERSION='24.10.0'\n"),
            "OpenWrt 24.10.0"
        );
        assert_eq!(parse_os_release(""), "Linux");
        assert_eq!(
            parse_labels("a=b, example.com/role=edge,empty=").unwrap(),
            [
                ("a".to_string(), "b".to_string()),
                ("empty".into(), "".into()),
                ("example.com/role".into(), "edge".into())
            ]
            .into_iter()
            .collect()
        );
        assert!(parse_labels("novalue").is_err());
        assert!(parse_labels("=v").is_err());
        assert_eq!(micro_time(T0 + 123_456_789), "2026-11-30T00:53:20.123456Z");
    }

    #[test]
    fn default_labels_win() {
        let mut opts = NodeOptions::new("pi-1");
        opts.labels = parse_labels("kubernetes.io/hostname=evil,zone=a").unwrap();
        let l = node_labels(&opts);
        assert_eq!(l[LABEL_HOSTNAME], "pi-1");
        assert_eq!(l[LABEL_OS], "linux");
        assert_eq!(l["zone"], "a");
        assert!(l.contains_key(LABEL_ARCH));
    }

    #[test]
    fn facts_from_roots() {
        let dir = tempfile::tempdir().unwrap();
        let proc_ = dir.path().join("proc");
        let etc = dir.path().join("etc");
        std::fs::create_dir_all(proc_.join("sys/kernel/random")).unwrap();
        std::fs::create_dir_all(&etc).unwrap();
        std::fs::write(proc_.join("cpuinfo"), "processor\t: 0\n\nprocessor\t: 1\n").unwrap();
        std::fs::write(
            proc_.join("meminfo"),
            "MemTotal: 1000 kB\nSwapTotal: 512 kB\n",
        )
        .unwrap();
        std::fs::write(proc_.join("sys/kernel/osrelease"), "6.1.0\n").unwrap();
        std::fs::write(proc_.join("sys/kernel/random/boot_id"), "b00t\n").unwrap();
        std::fs::write(etc.join("os-release"), "PRETTY_NAME=\"Test OS\"\n").unwrap();
        std::fs::write(etc.join("machine-id"), "m1\n").unwrap();
        let mut opts = NodeOptions::new("n");
        opts.proc_root = proc_;
        opts.etc_root = etc;
        opts.sys_root = dir.path().join("sys");
        opts.max_pods = 20;
        let f = NodeFacts::read(&opts);
        assert_eq!((f.cpus, f.memory_kib, f.max_pods), (2, 1000, 20));
        assert_eq!(f.swap_kib, 512);
        assert_eq!(f.kernel_version, "6.1.0");
        assert_eq!(f.os_image, "Test OS");
        assert_eq!((f.machine_id.as_str(), f.boot_id.as_str()), ("m1", "b00t"));
        assert_eq!(f.system_uuid, "");
    }
}
