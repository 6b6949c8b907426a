//! The CRI boundary (kubelet: `kubecontainer.Runtime`, `cri-client`).
//!
//! Owns: the `Runtime` trait — the CRI operations picolet issues, expressed in domain types —
//! and those domain types. `client.rs` implements it over tonic/prost. Nothing outside
//! `client.rs` (and `fake_cri.rs`, its server-side mirror for tests) ever sees a prost type.
//!
//! One fake for this boundary: `fake_containerd.rs` is the one in-memory model of containerd
//! (state, IDs, clock-driven timestamps, events, stats); `fake.rs` (a `Runtime`, called
//! directly, paused time) and `fake_cri.rs` (a gRPC server, real time) are thin fronts over
//! it that add only their call log and fault injection. A behaviour of the runtime is
//! modelled once, in the model; a front never keeps runtime state of its own.
//!
//! Must never: hold pod state between calls (the event loop owns all state), or retry on its
//! own — failures are returned and become pod-worker state (retry with back-off).
//!
//! Layout:
//! - `client.rs` the tonic client over a unix socket, with per-call deadlines
//! - `fake_containerd.rs` the in-memory containerd both fakes front (tests and test tooling only)
//! - `fake.rs`   a `Runtime` over it for unit and agent tests: call log, injected `CriError`s
//! - `fake_cri.rs` (feature `fake-cri`) a CRI gRPC server on a unix socket over it, for
//!   client, fault and load tests: call log, latency, faults, restarts
//! - `credentials.rs` image pull credentials (docker config, pull secrets) as CRI auth
//! - `process.rs` the runtime's processes (for the node's stats)
//!
//! Imports only leaves (`api`, `clock`, `metrics`, `grpc`): the runtime manager
//! (`kuberuntime`), the volumes, the PLEG, the GC managers and the node API build on it.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use crate::clock::UnixNanos;

pub(crate) mod client;
pub(crate) mod credentials;
#[cfg(any(test, feature = "fakes"))]
#[allow(clippy::too_many_lines)] // a test double, not production code
pub(crate) mod fake;
#[cfg(any(test, feature = "fakes"))]
#[allow(clippy::too_many_lines)] // a test double, not production code
pub(crate) mod fake_containerd;
#[cfg(feature = "fake-cri")]
#[allow(clippy::too_many_lines)] // a test double, not production code
pub(crate) mod fake_cri;
pub(crate) mod process;

/// The pod's identity on its sandboxes and containers (kubelet: `k8s.io/kubelet/pkg/types/labels.go`;
/// the rest of the contract is `kuberuntime::labels`).
pub(crate) const POD_NAME_LABEL: &str = "io.kubernetes.pod.name";
pub const POD_NAMESPACE_LABEL: &str = "io.kubernetes.pod.namespace";
pub const POD_UID_LABEL: &str = "io.kubernetes.pod.uid";
pub(crate) const CONTAINER_NAME_LABEL: &str = "io.kubernetes.container.name";

/// Errors at the CRI boundary. The variants are what callers branch on: `NotFound` is
/// fine on the kill path, `Unavailable` means the runtime is down (retry later).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CriError {
    #[error("invalid CRI endpoint {endpoint:?}: {reason}")]
    BadEndpoint { endpoint: String, reason: String },
    #[error("CRI {method}: runtime unavailable: {message}")]
    Unavailable {
        method: &'static str,
        message: String,
    },
    #[error("CRI {method}: not found: {message}")]
    NotFound {
        method: &'static str,
        message: String,
    },
    #[error("CRI {method}: no answer within {timeout:?}")]
    Timeout {
        method: &'static str,
        timeout: Duration,
    },
    #[error("CRI {method} failed ({code}): {message}")]
    Rpc {
        method: &'static str,
        code: String,
        message: String,
    },
    /// The runtime does not implement the call (gRPC `Unimplemented`): containerd 1.6 and
    /// `GetContainerEvents`.
    #[error("CRI {method}: not implemented by the runtime: {message}")]
    Unimplemented {
        method: &'static str,
        message: String,
    },
    /// The runtime answered, but without something the CRI requires (kubelet:
    /// `verifySandboxStatus`, "ContainerId is not set", ...).
    #[error("CRI {method}: invalid response: {message}")]
    InvalidResponse {
        method: &'static str,
        message: String,
    },
}

impl CriError {
    pub fn is_not_found(&self) -> bool {
        matches!(self, CriError::NotFound { .. })
    }
}

/// Linux namespace mode, CRI `NamespaceMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum NamespaceMode {
    /// Shared by all containers of the pod (CRI `POD`).
    #[default]
    Pod,
    /// Private to the container (CRI `CONTAINER`).
    Container,
    /// The host's (CRI `NODE`).
    Node,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NamespaceOptions {
    pub network: NamespaceMode,
    pub pid: NamespaceMode,
    pub ipc: NamespaceMode,
    /// A user namespace of the pod's own (`hostUsers: false`): IDs 0.. in the pod are
    /// `host_id`.. on the host, for users and groups alike. `None`: the host's.
    pub userns: Option<IdMapping>,
}

/// CRI `IDMapping` with `container_id` 0 (kubelet: one range per pod, uids = gids).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct IdMapping {
    pub host_id: u32,
    pub length: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Protocol {
    #[default]
    Tcp,
    Udp,
    Sctp,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PortMapping {
    pub protocol: Protocol,
    pub container_port: i32,
    pub host_port: i32,
    pub host_ip: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DnsConfig {
    pub servers: Vec<String>,
    pub searches: Vec<String>,
    pub options: Vec<String>,
}

/// CRI `PodSandboxConfig`, the part picolet fills.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SandboxConfig {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub attempt: u32,
    /// Empty for host-network pods (containerd refuses a hostname without a private UTS ns).
    pub hostname: String,
    pub log_directory: String,
    pub dns: Option<DnsConfig>,
    pub port_mappings: Vec<PortMapping>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub cgroup_parent: String,
    pub namespace_options: NamespaceOptions,
    pub privileged: bool,
    pub sysctls: BTreeMap<String, String>,
    /// The pod-level seccomp profile (kubelet: the sandbox gets the pod's).
    pub seccomp: SecurityProfile,
    /// `RunPodSandboxRequest.runtime_handler` from `runtimeClassName` ("" = the runtime's
    /// default handler).
    pub runtime_handler: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MountPropagation {
    #[default]
    Private,
    HostToContainer,
    Bidirectional,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Mount {
    pub container_path: String,
    /// Empty for an image volume.
    pub host_path: String,
    pub readonly: bool,
    pub propagation: MountPropagation,
    /// An image volume: the image (its ID, as pulled) the runtime mounts; "" for a host path.
    pub image: String,
    /// An image volume's reference as the pod wrote it (CRI `user_specified_image`: CRI-O
    /// refuses the mount without it, it verifies signatures against it).
    pub image_reference: String,
    /// An image volume's subPath inside the image ("" = its root).
    pub image_sub_path: String,
}

/// CRI `LinuxContainerResources`, the part picolet fills. Zero means "not set".
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Resources {
    pub cpu_period: i64,
    pub cpu_quota: i64,
    pub cpu_shares: i64,
    pub memory_limit_in_bytes: i64,
    /// kubelet: `qos.GetContainerOOMScoreAdjust`.
    pub oom_score_adj: i64,
    /// cgroup v1 memory+swap (`NoSwap`: the memory limit); 0 = not set.
    pub memory_swap_limit_in_bytes: i64,
    /// cgroup v2 `memory.swap.max` (CRI `unified`); `None` = not set.
    pub swap_max: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ContainerSecurity {
    pub privileged: bool,
    pub namespace_options: NamespaceOptions,
    /// An ephemeral container's target: the container ID whose PID namespace it joins
    /// (CRI `NamespaceMode::TARGET` with `target_id`); "" = `namespace_options.pid`.
    pub pid_target: String,
    pub run_as_user: Option<i64>,
    pub run_as_group: Option<i64>,
    pub supplemental_groups: Vec<i64>,
    pub readonly_rootfs: bool,
    pub no_new_privs: bool,
    pub add_capabilities: Vec<String>,
    pub drop_capabilities: Vec<String>,
    /// Always set: `Unconfined` unless asked for (kubelet without `--seccomp-default`).
    pub seccomp: SecurityProfile,
    /// `None` = the runtime's default (containerd applies its AppArmor default profile
    /// where AppArmor is enabled).
    pub apparmor: Option<SecurityProfile>,
}

/// CRI `SecurityProfile` for seccomp or AppArmor.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SecurityProfile {
    pub kind: ProfileKind,
    /// Localhost only: the profile's absolute path (seccomp) or its name (AppArmor).
    pub localhost_ref: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProfileKind {
    RuntimeDefault,
    #[default]
    Unconfined,
    Localhost,
}

/// CRI `ContainerConfig`, the part picolet fills.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ContainerConfig {
    pub name: String,
    pub attempt: u32,
    pub image: String,
    pub command: Vec<String>,
    pub args: Vec<String>,
    pub working_dir: String,
    pub envs: Vec<(String, String)>,
    pub mounts: Vec<Mount>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// Relative to the sandbox's `log_directory`.
    pub log_path: String,
    pub stdin: bool,
    pub stdin_once: bool,
    pub tty: bool,
    pub resources: Resources,
    pub security: ContainerSecurity,
    /// Host devices (CRI `Device`: container path, host path, cgroup permissions), from
    /// device plugins.
    pub devices: Vec<Device>,
    /// Fully qualified CDI device names (CRI `CDIDevices`), from device plugins.
    pub cdi_devices: Vec<String>,
}

/// CRI `Device`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Device {
    pub container_path: String,
    pub host_path: String,
    pub permissions: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SandboxState {
    Ready,
    NotReady,
}

/// CRI `PodSandbox` (list) and `PodSandboxStatus` merged: `ip` and `network` are only
/// known after a `pod_sandbox_status` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    pub id: String,
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub attempt: u32,
    pub state: SandboxState,
    pub created_at: UnixNanos,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub ip: Option<String>,
    pub network: Option<NamespaceMode>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ContainerState {
    Created,
    Running,
    Exited,
    #[default]
    Unknown,
}

/// CRI `Container` (list) and `ContainerStatus` merged: the times, exit code, reason and
/// message are only filled by a `container_status` call (zero/empty from a list).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContainerInfo {
    pub id: String,
    pub sandbox_id: String,
    pub name: String,
    pub attempt: u32,
    pub image: String,
    pub image_ref: String,
    pub state: ContainerState,
    pub created_at: UnixNanos,
    pub started_at: UnixNanos,
    pub finished_at: UnixNanos,
    pub exit_code: i32,
    pub reason: String,
    pub message: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub log_path: String,
}

/// Which of a pod's sandboxes or of a container's instances is newer: the attempt number
/// first (picolet makes a new sandbox with the highest attempt seen + 1 and a new instance
/// with the newest one's restart count + 1), then the creation stamp.
///
/// picolet: the kubelet orders them by `CreatedAt` alone. On a board without an RTC that
/// boots with its clock behind the last boot's (systemd's epoch, 1970), the sandbox made in
/// this boot looks older than the dead one of the last: it would be taken for "changed" and
/// made again after every start, forever, and container GC would keep the dead one (found on
/// the emulated board). The attempt number does not go back with the clock.
impl Sandbox {
    /// The key of "newest" among a pod's sandboxes: the attempt number first (picolet makes
    /// a new sandbox with the highest attempt seen + 1, and a container's new instance with
    /// the newest one's restart count + 1, which is its attempt), then the creation stamp.
    ///
    /// picolet: the kubelet orders them by `CreatedAt` alone. On a board without an RTC
    /// that boots with its clock behind the last boot's (systemd's epoch, 1970), the sandbox
    /// made in this boot looks older than the dead one of the last: it is taken for
    /// "changed" and made again after every start, forever, container GC keeps the dead
    /// one, and a new instance reuses an old one's attempt ("name is reserved"). Found on
    /// the emulated board. The attempt number does not go back with the clock.
    pub fn recency(&self) -> (u32, UnixNanos) {
        (self.attempt, self.created_at)
    }
}

impl ContainerInfo {
    /// The key of "newest" among a container's instances: see [`Sandbox::recency`].
    pub fn recency(&self) -> (u32, UnixNanos) {
        (self.attempt, self.created_at)
    }
}

/// A label filter for the list calls (CRI `label_selector`), plus optional state.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListFilter {
    pub labels: BTreeMap<String, String>,
    pub sandbox_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeVersion {
    pub runtime_name: String,
    pub runtime_version: String,
    pub runtime_api_version: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeHealth {
    pub runtime_ready: bool,
    pub network_ready: bool,
    /// Reasons/messages of the conditions that are not ready.
    pub message: String,
    /// The runtime handlers that support user namespaces ("" = the default handler);
    /// `None` when the runtime reports no handlers at all (containerd 1.x, older CRI-O).
    pub userns_handlers: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInfo {
    pub id: String,
    pub repo_tags: Vec<String>,
    pub size: u64,
    /// The runtime will not let it be removed (containerd >= 1.7 pins its sandbox image);
    /// image GC skips it (kubelet: `image.Pinned`).
    pub pinned: bool,
    /// The image's `USER` as the runtime reads it (CRI `Image.uid`, `Image.username`).
    pub user: ImageUser,
}

/// Who an image runs as (kubelet: `getImageUser`): a numeric uid, a user name the runtime
/// could not turn into one, or nobody named — which the kubelet treats as root.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ImageUser {
    /// No `USER` in the image: root.
    #[default]
    Unset,
    Uid(i64),
    Name(String),
}

/// Usage of one image filesystem (CRI `FilesystemUsage`), for image GC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageFsUsage {
    pub timestamp: UnixNanos,
    pub mountpoint: String,
    pub used_bytes: u64,
    pub inodes_used: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecResult {
    pub exit_code: i32,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Which of the standard streams an `exec` or `attach` carries (kubelet:
/// `remotecommand.Options`). With `tty`, stderr is merged into stdout (`stderr` false).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StreamOptions {
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
}

fn unimplemented(method: &'static str) -> CriError {
    CriError::Unimplemented {
        method,
        message: "not implemented".to_string(),
    }
}

/// What the last relist saw, so that the next one can tell "nothing changed" without
/// decoding anything (opaque; a fresh one always lists).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelistDigest(pub(crate) Option<(u64, u64)>);

/// The relist's two lists: every sandbox and every container.
pub(crate) type Lists = (Vec<Sandbox>, Vec<ContainerInfo>);

/// CRI `ContainerEventType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContainerEventKind {
    Created,
    Started,
    Stopped,
    Deleted,
    /// A value newer than this client knows: treated as "something changed".
    Unknown,
}

/// CRI `ContainerEventResponse`: one change of a container or sandbox, with the state of
/// its sandbox after it (kubelet: evented PLEG's input).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerEvent {
    /// The container's id, or the sandbox's for the sandbox's own events.
    pub container_id: String,
    pub kind: ContainerEventKind,
    pub created_at: UnixNanos,
    /// The sandbox after the event (`PodSandboxStatus`, `ip` and `network` filled); `None`
    /// when the runtime no longer finds it (containerd, after `RemovePodSandbox`).
    pub sandbox: Option<Sandbox>,
    /// Every container of that sandbox after the event (`ContainerStatus`, with
    /// `sandbox_id` set to the sandbox's).
    pub containers: Vec<ContainerInfo>,
}

/// An open `GetContainerEvents` stream. It ends (`None`, or an error item) when the
/// runtime closes it or the connection breaks; it never restarts on its own.
pub type ContainerEvents =
    futures_util::stream::LocalBoxStream<'static, Result<ContainerEvent, CriError>>;

/// CRI `CpuUsage`: one cumulative sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuUsage {
    pub timestamp: UnixNanos,
    /// Cumulative CPU time, all cores, in nanoseconds.
    pub usage_core_nano_seconds: Option<u64>,
    /// The runtime's own rate (containerd: over the interval since its previous sample;
    /// 0 or absent on the first).
    pub usage_nano_cores: Option<u64>,
}

/// CRI `MemoryUsage`, the part picolet reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemoryUsage {
    pub timestamp: UnixNanos,
    pub working_set_bytes: Option<u64>,
    pub usage_bytes: Option<u64>,
    pub available_bytes: Option<u64>,
    pub rss_bytes: Option<u64>,
    pub page_faults: Option<u64>,
    pub major_page_faults: Option<u64>,
}

/// CRI `ContainerStats`: the container's attributes and usage. The pod it belongs to is in
/// its labels (`io.kubernetes.pod.*`), as the kubelet's CRI stats provider reads it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContainerStats {
    pub id: String,
    pub name: String,
    pub attempt: u32,
    pub labels: BTreeMap<String, String>,
    pub cpu: Option<CpuUsage>,
    pub memory: Option<MemoryUsage>,
}

/// CRI `PodSandboxStats` (Linux): the pod cgroup's usage and its containers'.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodSandboxStats {
    pub id: String,
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub labels: BTreeMap<String, String>,
    pub cpu: Option<CpuUsage>,
    pub memory: Option<MemoryUsage>,
    pub containers: Vec<ContainerStats>,
}

/// The CRI operations picolet uses (CRI `RuntimeService` + `ImageService`).
///
/// Futures are not `Send`: everything runs on one `current_thread` runtime. Implementations
/// are cheap to clone (a tonic channel; an `Rc` for the fake).
pub trait Runtime: Clone + 'static {
    fn version(&self) -> impl Future<Output = Result<RuntimeVersion, CriError>>;
    fn status(&self) -> impl Future<Output = Result<RuntimeHealth, CriError>>;

    fn run_pod_sandbox(
        &self,
        config: &SandboxConfig,
    ) -> impl Future<Output = Result<String, CriError>>;
    fn stop_pod_sandbox(&self, id: &str) -> impl Future<Output = Result<(), CriError>>;
    fn remove_pod_sandbox(&self, id: &str) -> impl Future<Output = Result<(), CriError>>;
    fn pod_sandbox_status(&self, id: &str) -> impl Future<Output = Result<Sandbox, CriError>>;
    fn list_pod_sandboxes(
        &self,
        filter: &ListFilter,
    ) -> impl Future<Output = Result<Vec<Sandbox>, CriError>>;

    fn create_container(
        &self,
        sandbox_id: &str,
        config: &ContainerConfig,
        sandbox: &SandboxConfig,
    ) -> impl Future<Output = Result<String, CriError>>;
    fn start_container(&self, id: &str) -> impl Future<Output = Result<(), CriError>>;
    /// SIGTERM, then SIGKILL after `timeout` seconds (done by the runtime).
    fn stop_container(&self, id: &str, timeout: i64) -> impl Future<Output = Result<(), CriError>>;
    fn remove_container(&self, id: &str) -> impl Future<Output = Result<(), CriError>>;
    fn list_containers(
        &self,
        filter: &ListFilter,
    ) -> impl Future<Output = Result<Vec<ContainerInfo>, CriError>>;
    fn container_status(&self, id: &str) -> impl Future<Output = Result<ContainerInfo, CriError>>;
    /// The relist's unfiltered lists of sandboxes and containers — or `None` when neither
    /// changed since `digest` (which it updates). The default always lists.
    fn relist(
        &self,
        digest: &mut RelistDigest,
    ) -> impl Future<Output = Result<Option<Lists>, CriError>> {
        let _ = digest;
        async move {
            let all = ListFilter::default();
            let sandboxes = self.list_pod_sandboxes(&all).await?;
            let containers = self.list_containers(&all).await?;
            Ok(Some((sandboxes, containers)))
        }
    }
    /// CRI `GetContainerEvents`: opens the runtime's event stream (evented PLEG). Resolves
    /// once the runtime accepted the call; [`CriError::Unimplemented`] from runtimes without
    /// it (containerd 1.6). The default: `Unimplemented`.
    fn container_events(&self) -> impl Future<Output = Result<ContainerEvents, CriError>> {
        async {
            Err(CriError::Unimplemented {
                method: "GetContainerEvents",
                message: "not implemented".to_string(),
            })
        }
    }
    /// The host process of running container `id` (of sandbox `id` when `sandbox`), opened
    /// for the PLEG's exit watch (see [`process`]): the PID comes from the runtime's verbose
    /// status. The default: [`process::ExitHandle::Unknown`] (nothing to watch).
    fn exit_handle(
        &self,
        id: &str,
        sandbox: bool,
    ) -> impl Future<Output = Result<process::ExitHandle, CriError>> {
        let _ = (id, sandbox);
        async { Ok(process::ExitHandle::Unknown) }
    }
    fn exec_sync(
        &self,
        id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> impl Future<Output = Result<ExecResult, CriError>>;
    /// CRI `Exec`: the URL on the runtime's streaming server that runs `cmd` in the
    /// container (kubelet: `GetExec`; the node API proxies the client to it). The default:
    /// `Unimplemented`.
    fn exec(
        &self,
        id: &str,
        cmd: &[String],
        streams: StreamOptions,
    ) -> impl Future<Output = Result<String, CriError>> {
        let _ = (id, cmd, streams);
        async { Err(unimplemented("Exec")) }
    }
    /// CRI `Attach`: the URL that attaches to the container's main process (kubelet:
    /// `GetAttach`). The default: `Unimplemented`.
    fn attach(
        &self,
        id: &str,
        streams: StreamOptions,
    ) -> impl Future<Output = Result<String, CriError>> {
        let _ = (id, streams);
        async { Err(unimplemented("Attach")) }
    }
    /// CRI `PortForward`: the URL that forwards to `ports` of the sandbox's network
    /// namespace (kubelet: `GetPortForward`). The default: `Unimplemented`.
    fn port_forward(
        &self,
        sandbox_id: &str,
        ports: &[i32],
    ) -> impl Future<Output = Result<String, CriError>> {
        let _ = (sandbox_id, ports);
        async { Err(unimplemented("PortForward")) }
    }

    /// `Ok(None)` when the image is not present.
    fn image_status(
        &self,
        image: &str,
    ) -> impl Future<Output = Result<Option<ImageInfo>, CriError>>;
    /// Returns the image reference (digest) the runtime pulled.
    fn pull_image(
        &self,
        image: &str,
        auth: Option<&credentials::AuthConfig>,
        sandbox: &SandboxConfig,
    ) -> impl Future<Output = Result<String, CriError>>;

    /// CRI `ListImages` (image GC). The default: `Unimplemented`.
    fn list_images(&self) -> impl Future<Output = Result<Vec<ImageInfo>, CriError>> {
        async { Err(unimplemented("ListImages")) }
    }
    /// CRI `RemoveImage` by id or reference; an absent image is not an error. The default:
    /// `Unimplemented`.
    fn remove_image(&self, image: &str) -> impl Future<Output = Result<(), CriError>> {
        let _ = image;
        async { Err(unimplemented("RemoveImage")) }
    }
    /// CRI `ImageFsInfo`: the file systems holding images. The default: `Unimplemented`.
    fn image_fs_info(&self) -> impl Future<Output = Result<Vec<ImageFsUsage>, CriError>> {
        async { Err(unimplemented("ImageFsInfo")) }
    }
    /// CRI `UpdateContainerResources`: new cpu and memory for a running container (in-place
    /// resize; only the cpu and memory fields of `resources` count). The default:
    /// `Unimplemented`.
    fn update_container_resources(
        &self,
        id: &str,
        resources: &Resources,
    ) -> impl Future<Output = Result<(), CriError>> {
        let _ = (id, resources);
        async { Err(unimplemented("UpdateContainerResources")) }
    }
    /// CRI `ReopenContainerLog`: the runtime reopens a running container's log file at its
    /// path (log rotation renamed the old one). The default: `Unimplemented`.
    fn reopen_container_log(&self, id: &str) -> impl Future<Output = Result<(), CriError>> {
        let _ = id;
        async { Err(unimplemented("ReopenContainerLog")) }
    }

    /// CRI `ListContainerStats`: usage of the containers matching `filter` (containerd
    /// 1.6 answers for exited ones too, without figures). The default: `Unimplemented`.
    fn list_container_stats(
        &self,
        filter: &ListFilter,
    ) -> impl Future<Output = Result<Vec<ContainerStats>, CriError>> {
        let _ = filter;
        async {
            Err(CriError::Unimplemented {
                method: "ListContainerStats",
                message: "not implemented".to_string(),
            })
        }
    }
    /// CRI `ListPodSandboxStats`: usage of the sandboxes matching `filter` (labels only).
    /// The default: `Unimplemented` (callers sum the containers' stats instead).
    fn list_pod_sandbox_stats(
        &self,
        filter: &ListFilter,
    ) -> impl Future<Output = Result<Vec<PodSandboxStats>, CriError>> {
        let _ = filter;
        async {
            Err(CriError::Unimplemented {
                method: "ListPodSandboxStats",
                message: "not implemented".to_string(),
            })
        }
    }
}

/// What the runtime holds for one pod UID (kubelet: `kubecontainer.PodStatus`): every
/// sandbox and every container carrying the pod's UID label, dead ones included.
/// Built by `sync::get_pod_status`; input of `plan::compute_pod_actions` and `status.rs`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct PodRuntimeStatus {
    pub uid: String,
    pub name: String,
    pub namespace: String,
    /// Newest first (by `recency()`), with `ip`/`network` filled from `pod_sandbox_status`.
    pub sandboxes: Vec<Sandbox>,
    /// Newest first (by `recency()`), filled from `container_status`.
    pub containers: Vec<ContainerInfo>,
}
