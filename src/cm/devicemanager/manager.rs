//! The device manager's effects (kubelet: `ManagerImpl` with its registration server
//! `plugin/v1beta1/server.go` and endpoints `endpoint.go`): one task owns the
//! [`DeviceState`]; everything else sends it messages.
//!
//! - The registration server: gRPC `v1beta1.Registration` on `<dir>/kubelet.sock`, over
//!   [`registration`]'s minimal HTTP/2. `Register` is checked ([`super::validate`]) and
//!   answered at once; the plugin is dialled after (kubelet: `runClient`).
//! - One endpoint task per registration: `GetDevicePluginOptions`, then the `ListAndWatch`
//!   stream, whose lists go to the manager task; the stream's end marks the plugin stopped.
//! - The manager task: the container requests of the syncs ([`Handle::container_devices`]:
//!   reuse, or pick devices, `GetPreferredAllocation`, `Allocate`; `PreStartContainer` when
//!   the plugin asks for it), the checkpoint file, the counts published to the node status
//!   and admission, and the grace period of stopped plugins.
//!
//! At start (kubelet: `ManagerImpl.Start`): the directory is made (0750), the checkpoint read,
//! every other file in it removed — plugins watch for their socket to vanish or for
//! `kubelet.sock` to be created, and register again — and the socket made.
//!
//! Must never: block the event loop (it only reads the published counts), or give a device
//! to two containers.

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::net::UnixListener;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use super::proto::device_plugin_client::DevicePluginClient;
use super::{
    CHECKPOINT_FILE, Checkpoint, ContainerDevices, DeviceError, DeviceMount, DeviceSpec,
    DeviceState, HEALTHY, KUBELET_SOCKET, PluginOptions, PodDevicesEntry, Registration, Resources,
};
use super::{proto, registration};

type Client = DevicePluginClient<tonic::transport::Channel>;

/// kubelet: the endpoint's dial and options calls are bounded (10 s).
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// kubelet: `pluginapi.KubeletPreStartContainerRPCTimeoutInSecs`.
const PRE_START_TIMEOUT: Duration = Duration::from_secs(30);

/// Why the device manager could not start.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    #[error("device plugin directory {0}: {1}")]
    Dir(PathBuf, io::Error),
    #[error("device plugin registration socket {0}: {1}")]
    Socket(PathBuf, io::Error),
}

enum Msg {
    Registered {
        resource: String,
        generation: u64,
        options: PluginOptions,
        client: Client,
    },
    Devices {
        resource: String,
        generation: u64,
        devices: Vec<(String, bool)>,
    },
    Stopped {
        resource: String,
        generation: u64,
    },
    Container {
        uid: String,
        container: String,
        requests: Vec<(String, usize)>,
        reply: oneshot::Sender<Result<ContainerDevices, DeviceError>>,
    },
}

/// The syncs' way to the manager (cheap to clone).
#[derive(Clone, Debug)]
pub struct Handle {
    tx: mpsc::UnboundedSender<Msg>,
}

impl std::fmt::Debug for Msg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("device manager message")
    }
}

impl Handle {
    /// kubelet: `GetDeviceRunContainerOptions` — what the container gets for the
    /// device-plugin resources among `requests` (`super::container_requests`): its devices
    /// from before (a restarted container keeps them), else newly allocated ones.
    /// Resources no plugin ever registered are skipped (the container starts without).
    pub async fn container_devices(
        &self,
        uid: &str,
        container: &str,
        requests: Vec<(String, usize)>,
    ) -> Result<ContainerDevices, DeviceError> {
        if requests.is_empty() {
            return Ok(ContainerDevices::default());
        }
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Msg::Container {
                uid: uid.to_string(),
                container: container.to_string(),
                requests,
                reply,
            })
            .map_err(|_| DeviceError::Stopped)?;
        rx.await.map_err(|_| DeviceError::Stopped)?
    }
}

/// The running manager: the syncs' handle and the counts (node status, admission).
pub struct Started {
    pub handle: Handle,
    pub resources: watch::Receiver<Resources>,
}

/// The UIDs of the pods admitted and not finished, published by the loop once all pod
/// sources are seen (kubelet: `UpdateAllocatedDevices` waits for `sourcesReady`); `None`
/// until then, when nothing is freed.
pub type ActivePods = Option<BTreeSet<String>>;

/// Starts the registration server and the manager task in `dir`. The devices of pods not
/// in `active` are freed. Must be called inside a `LocalSet`.
pub fn start(
    dir: &Path,
    active: watch::Receiver<ActivePods>,
    shutdown: CancellationToken,
) -> Result<Started, ManagerError> {
    let dir_err = |e| ManagerError::Dir(dir.to_path_buf(), e);
    std::fs::create_dir_all(dir).map_err(dir_err)?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o750)).map_err(dir_err)?;
    }
    let checkpoint_path = dir.join(CHECKPOINT_FILE);
    let state = match read_checkpoint(&checkpoint_path) {
        Ok(Some(cp)) => {
            log::info!(
                "device manager: checkpoint {}: {} device assignments restored",
                checkpoint_path.display(),
                cp.pod_device_entries.len()
            );
            DeviceState::from_checkpoint(&cp)
        }
        Ok(None) => DeviceState::default(),
        Err(e) => {
            // kubelet: "Continue after failing to read checkpoint file".
            log::warn!(
                "device manager: checkpoint {}: {e}; starting without assignments",
                checkpoint_path.display()
            );
            DeviceState::default()
        }
    };
    // kubelet: removeContents — every plugin socket goes, so plugins register again.
    for entry in std::fs::read_dir(dir).map_err(dir_err)?.flatten() {
        let path = entry.path();
        let keep = entry.file_name() == CHECKPOINT_FILE;
        if !keep && entry.file_type().is_ok_and(|t| !t.is_dir()) {
            if let Err(e) = std::fs::remove_file(&path) {
                log::warn!("device manager: remove {}: {e}", path.display());
            }
        }
    }
    let socket = dir.join(KUBELET_SOCKET);
    let listener =
        UnixListener::bind(&socket).map_err(|e| ManagerError::Socket(socket.clone(), e))?;
    log::info!(
        "device manager: registration server on {}",
        socket.display()
    );
    let (tx, rx) = mpsc::unbounded_channel();
    let (resources_tx, resources) = watch::channel(state.counts());
    let service = RegistrationService {
        dir: Arc::from(dir),
        tx: tx.clone(),
        generation: Arc::new(AtomicU64::new(0)),
    };
    crate::local_tasks::spawn_local(serve(listener, service, shutdown.clone()));
    let manager = Manager {
        state,
        clients: Vec::new(),
        resources: resources_tx,
        checkpoint_path,
    };
    crate::local_tasks::spawn_local(manager.run(rx, active, shutdown));
    Ok(Started {
        handle: Handle { tx },
        resources,
    })
}

/// `picolet check`: what the device plugin directory holds. `(ok, detail)`; not ok when
/// something answers on its `kubelet.sock` already (a running picolet or kubelet: two would
/// remove each other's sockets).
pub fn check_dir(dir: &Path) -> (bool, String) {
    let socket = dir.join(KUBELET_SOCKET);
    let mut detail = format!("plugins register on {}", socket.display());
    if dir != Path::new(super::DEFAULT_DIR) {
        detail.push_str(&format!(
            " (plugins that hard-code {} need it bind-mounted there, or their directory flag)",
            super::DEFAULT_DIR
        ));
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return (true, format!("{detail}; made at start"));
    };
    let others = entries
        .flatten()
        .filter(|e| e.file_name() != KUBELET_SOCKET && e.file_name() != CHECKPOINT_FILE)
        .count();
    let checkpoint = dir.join(CHECKPOINT_FILE).exists();
    detail.push_str(&format!(
        "; {others} plugin socket(s){}",
        if checkpoint { ", a checkpoint" } else { "" }
    ));
    if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
        return (
            false,
            format!(
                "{detail}; kubelet.sock answers: a picolet or kubelet already serves this directory"
            ),
        );
    }
    (true, detail)
}

/// The checkpoint file (kubelet: `checkpointmanager`'s data and checksum):
/// `{"Data": <Checkpoint>, "Checksum": <FNV-1a 32 of Data's JSON>}`, where Data's JSON is
/// the canonical encoding of [`Checkpoint`] (fields in order, lists in order), so the sum is
/// checked by encoding what was read again.
#[derive(serde::Serialize, serde::Deserialize)]
struct CheckpointFile {
    #[serde(rename = "Data")]
    data: Checkpoint,
    #[serde(rename = "Checksum")]
    checksum: u32,
}

/// A checkpoint file that cannot be used (kubelet: the device manager goes on without it).
#[derive(Debug)]
enum CheckpointError {
    Read(io::Error),
    Decode(crate::api::JsonError),
    Encode(serde_json::Error),
    Checksum,
}

impl std::fmt::Display for CheckpointError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Read(e) => e.fmt(f),
            Self::Decode(e) => e.fmt(f),
            Self::Encode(e) => e.fmt(f),
            Self::Checksum => f.write_str("checksum mismatch: the file is corrupt"),
        }
    }
}

impl std::error::Error for CheckpointError {}

/// `Ok(None)`: no file.
fn read_checkpoint(path: &Path) -> Result<Option<Checkpoint>, CheckpointError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(CheckpointError::Read(e)),
    };
    let file: CheckpointFile =
        crate::api::from_json_slice(&bytes).map_err(CheckpointError::Decode)?;
    let data = serde_json::to_vec(&file.data).map_err(CheckpointError::Encode)?;
    if fnv1a32(&data) != file.checksum {
        return Err(CheckpointError::Checksum);
    }
    Ok(Some(file.data))
}

/// Writes the checkpoint atomically (a temporary file renamed over it).
fn write_checkpoint(path: &Path, cp: Checkpoint) -> io::Result<()> {
    let checksum = fnv1a32(&serde_json::to_vec(&cp)?);
    let body = serde_json::to_vec(&CheckpointFile { data: cp, checksum })?;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, body)?;
    std::fs::rename(&tmp, path)
}

/// FNV-1a, 32 bits (the kubelet's checkpoints use FNV-32a too, over another rendering).
fn fnv1a32(data: &[u8]) -> u32 {
    data.iter().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

// ---------------------------------------------------------------------------------------
// The registration server

#[derive(Clone)]
struct RegistrationService {
    dir: Arc<Path>,
    tx: mpsc::UnboundedSender<Msg>,
    generation: Arc<AtomicU64>,
}

impl RegistrationService {
    /// kubelet: the registration server's `Register` — checked, answered at once, and the
    /// plugin dialled after (`runClient`).
    fn register(&self, message: &[u8]) -> registration::Answer {
        let r = <proto::RegisterRequest as prost::Message>::decode(message)
            .map_err(|e| (registration::INVALID_ARGUMENT, e.to_string()))?;
        let options = r.options.unwrap_or_default();
        let reg = Registration {
            version: r.version,
            endpoint: r.endpoint,
            resource: r.resource_name,
            options: PluginOptions {
                pre_start_required: options.pre_start_required,
                get_preferred_allocation_available: options.get_preferred_allocation_available,
            },
        };
        if let Err(e) = super::validate(&reg) {
            log::warn!(
                "device plugin {:?}: registration refused: {e}",
                reg.resource
            );
            return Err((registration::INVALID_ARGUMENT, e.to_string()));
        }
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        log::info!(
            "device plugin {}: registered (endpoint {}, options {:?})",
            reg.resource,
            reg.endpoint,
            reg.options
        );
        let socket = self.dir.join(&reg.endpoint);
        crate::local_tasks::spawn_local(endpoint(
            socket,
            reg.resource,
            generation,
            self.tx.clone(),
        ));
        // `Empty` encodes to nothing.
        Ok(Vec::new())
    }
}

async fn serve(listener: UnixListener, service: RegistrationService, shutdown: CancellationToken) {
    loop {
        let io = tokio::select! {
            _ = shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((io, _)) => io,
                Err(e) => {
                    log::warn!("device manager: accept: {e}");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            },
        };
        let service = service.clone();
        let stop = shutdown.clone();
        crate::local_tasks::spawn_local(async move {
            let conn = registration::serve_connection(io, |m| service.register(m));
            tokio::select! {
                _ = stop.cancelled() => {}
                r = conn => if let Err(e) = r {
                    log::debug!("device manager: registration connection: {e}");
                },
            }
        });
    }
}

/// One registered plugin (kubelet: `endpointImpl`): its options, then its device lists
/// until the stream ends.
async fn endpoint(
    socket: PathBuf,
    resource: String,
    generation: u64,
    tx: mpsc::UnboundedSender<Msg>,
) {
    let mut client = DevicePluginClient::new(crate::grpc::unix_channel(Arc::from(socket)));
    let options = tokio::time::timeout(
        CALL_TIMEOUT,
        client.get_device_plugin_options(proto::Empty {}),
    )
    .await;
    let options = match options {
        Ok(Ok(o)) => {
            let o = o.into_inner();
            PluginOptions {
                pre_start_required: o.pre_start_required,
                get_preferred_allocation_available: o.get_preferred_allocation_available,
            }
        }
        Ok(Err(e)) => {
            log::warn!(
                "device plugin {resource}: GetDevicePluginOptions: {}",
                e.message()
            );
            return;
        }
        Err(_) => {
            log::warn!("device plugin {resource}: GetDevicePluginOptions timed out");
            return;
        }
    };
    let registered = Msg::Registered {
        resource: resource.clone(),
        generation,
        options,
        client: client.clone(),
    };
    if tx.send(registered).is_err() {
        return;
    }
    let stopped = |why: String| {
        log::warn!(
            "device plugin {resource}: ListAndWatch ended: {why}; its devices are unhealthy"
        );
        let _ = tx.send(Msg::Stopped {
            resource: resource.clone(),
            generation,
        });
    };
    let mut stream = match client.list_and_watch(proto::Empty {}).await {
        Ok(s) => s.into_inner(),
        Err(e) => return stopped(e.message().to_string()),
    };
    loop {
        match stream.message().await {
            Ok(Some(list)) => {
                let devices = list
                    .devices
                    .into_iter()
                    .map(|d| {
                        let healthy = d.health == HEALTHY;
                        (d.id, healthy)
                    })
                    .collect();
                let msg = Msg::Devices {
                    resource: resource.clone(),
                    generation,
                    devices,
                };
                if tx.send(msg).is_err() {
                    return;
                }
            }
            Ok(None) => return stopped("the plugin closed it".into()),
            Err(e) => return stopped(e.message().to_string()),
        }
    }
}

// ---------------------------------------------------------------------------------------
// The manager task

struct Manager {
    state: DeviceState,
    /// The registered plugins' clients: (resource, generation, client, options).
    clients: Vec<(String, u64, Client, PluginOptions)>,
    resources: watch::Sender<Resources>,
    checkpoint_path: PathBuf,
}

async fn until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

impl Manager {
    async fn run(
        mut self,
        mut rx: mpsc::UnboundedReceiver<Msg>,
        mut active: watch::Receiver<ActivePods>,
        shutdown: CancellationToken,
    ) {
        loop {
            let expiry = self.state.next_expiry();
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => return,
                Some(msg) = rx.recv() => self.on_message(msg, &active).await,
                Ok(()) = active.changed() => {
                    let now_active = active.borrow_and_update().clone();
                    if let Some(a) = now_active
                        && self.state.prune(&a)
                    {
                        self.save();
                    }
                }
                _ = until(expiry) => {
                    if self.state.expire(tokio::time::Instant::now()) {
                        self.publish();
                        self.save();
                    }
                }
            }
        }
    }

    async fn on_message(&mut self, msg: Msg, active: &watch::Receiver<ActivePods>) {
        match msg {
            Msg::Registered {
                resource,
                generation,
                options,
                client,
            } => {
                self.state.register(&resource, generation);
                self.clients.retain(|c| c.0 != resource);
                self.clients.push((resource, generation, client, options));
                self.publish();
            }
            Msg::Devices {
                resource,
                generation,
                devices,
            } => {
                let healthy = devices.iter().filter(|(_, h)| *h).count();
                log::info!(
                    "device plugin {resource}: {} devices, {healthy} healthy",
                    devices.len()
                );
                if self.state.set_devices(&resource, generation, devices) {
                    self.publish();
                    self.save();
                }
            }
            Msg::Stopped {
                resource,
                generation,
            } => {
                self.clients
                    .retain(|c| (c.0.as_str(), c.1) != (resource.as_str(), generation));
                if self
                    .state
                    .stopped(&resource, generation, tokio::time::Instant::now())
                {
                    self.publish();
                }
            }
            Msg::Container {
                uid,
                container,
                requests,
                reply,
            } => {
                let now_active = active.borrow().clone();
                if let Some(mut a) = now_active {
                    a.insert(uid.clone());
                    if self.state.prune(&a) {
                        self.save();
                    }
                }
                let result = self.container(&uid, &container, &requests).await;
                if let Err(e) = &result {
                    log::warn!("pod {uid}: container {container:?}: devices: {e}");
                }
                let _ = reply.send(result);
            }
        }
    }

    fn publish(&self) {
        let counts = self.state.counts();
        self.resources.send_if_modified(|r| {
            let changed = *r != counts;
            *r = counts;
            changed
        });
    }

    fn save(&self) {
        if let Err(e) = write_checkpoint(&self.checkpoint_path, self.state.checkpoint()) {
            log::warn!(
                "device manager: checkpoint {}: {e}",
                self.checkpoint_path.display()
            );
        }
    }

    fn client(&self, resource: &str) -> Option<(Client, PluginOptions)> {
        let generation = self.state.endpoint(resource)?;
        let c = self
            .clients
            .iter()
            .find(|c| c.0 == resource && c.1 == generation)?;
        Some((c.2.clone(), c.3))
    }

    /// kubelet: `allocateContainerResources` + `GetDeviceRunContainerOptions` for one container.
    async fn container(
        &mut self,
        uid: &str,
        container: &str,
        requests: &[(String, usize)],
    ) -> Result<ContainerDevices, DeviceError> {
        let mut out = ContainerDevices::default();
        for (resource, needed) in requests {
            if !self.state.is_device_resource(resource) {
                continue;
            }
            let ids = match self.state.allocation(uid, container, resource) {
                Some(a) => {
                    out.merge(&a.alloc_resp);
                    a.device_ids.clone()
                }
                None => {
                    let (ids, response) = self.allocate(resource, *needed).await?;
                    log::info!("pod {uid}: container {container:?}: {resource} devices {ids:?}");
                    out.merge(&response);
                    self.state.record(PodDevicesEntry {
                        pod_uid: uid.to_string(),
                        container_name: container.to_string(),
                        resource_name: resource.clone(),
                        device_ids: ids.clone(),
                        alloc_resp: response,
                    });
                    self.save();
                    ids
                }
            };
            // kubelet: callPreStartContainerIfNeeded, before every start of the container.
            if let Some((mut client, options)) = self.client(resource)
                && options.pre_start_required
            {
                let call = client
                    .pre_start_container(proto::PreStartContainerRequest { devices_ids: ids });
                match tokio::time::timeout(PRE_START_TIMEOUT, call).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => {
                        let msg = e.message().to_string();
                        return Err(DeviceError::Rpc(resource.clone(), "PreStartContainer", msg));
                    }
                    Err(_) => {
                        let msg = "timed out".to_string();
                        return Err(DeviceError::Rpc(resource.clone(), "PreStartContainer", msg));
                    }
                }
            }
        }
        Ok(out)
    }

    /// kubelet: `devicesToAllocate` (with the plugin's preference) and the `Allocate` call.
    async fn allocate(
        &mut self,
        resource: &str,
        needed: usize,
    ) -> Result<(Vec<String>, ContainerDevices), DeviceError> {
        let available = self.state.available(resource, needed)?;
        let Some((mut client, options)) = self.client(resource) else {
            return Err(DeviceError::NoEndpoint(resource.to_string()));
        };
        let mut preferred = Vec::new();
        if options.get_preferred_allocation_available {
            let request = proto::PreferredAllocationRequest {
                container_requests: vec![proto::ContainerPreferredAllocationRequest {
                    available_device_i_ds: available.clone(),
                    must_include_device_i_ds: Vec::new(),
                    allocation_size: i32::try_from(needed).unwrap_or(i32::MAX),
                }],
            };
            match tokio::time::timeout(CALL_TIMEOUT, client.get_preferred_allocation(request)).await
            {
                Ok(Ok(r)) => {
                    preferred = r
                        .into_inner()
                        .container_responses
                        .into_iter()
                        .next()
                        .map(|c| c.device_i_ds)
                        .unwrap_or_default();
                }
                Ok(Err(e)) => log::warn!(
                    "device plugin {resource}: GetPreferredAllocation: {}; choosing without",
                    e.message()
                ),
                Err(_) => {
                    log::warn!("device plugin {resource}: GetPreferredAllocation timed out")
                }
            }
        }
        let ids = super::pick(&available, &preferred, needed);
        let request = proto::AllocateRequest {
            container_requests: vec![proto::ContainerAllocateRequest {
                devices_ids: ids.clone(),
            }],
        };
        let rpc = |msg: String| DeviceError::Rpc(resource.to_string(), "Allocate", msg);
        let response = match tokio::time::timeout(CALL_TIMEOUT, client.allocate(request)).await {
            Ok(Ok(r)) => r.into_inner(),
            Ok(Err(e)) => return Err(rpc(e.message().to_string())),
            Err(_) => return Err(rpc("timed out".into())),
        };
        let n = response.container_responses.len();
        let Some(c) = response
            .container_responses
            .into_iter()
            .next()
            .filter(|_| n == 1)
        else {
            return Err(DeviceError::BadResponse(resource.to_string(), n));
        };
        Ok((ids, from_proto(c)))
    }
}

fn from_proto(c: proto::ContainerAllocateResponse) -> ContainerDevices {
    ContainerDevices {
        envs: c.envs,
        mounts: c
            .mounts
            .into_iter()
            .map(|m| DeviceMount {
                container_path: m.container_path,
                host_path: m.host_path,
                read_only: m.read_only,
            })
            .collect(),
        devices: c
            .devices
            .into_iter()
            .map(|d| DeviceSpec {
                container_path: d.container_path,
                host_path: d.host_path,
                permissions: d.permissions,
            })
            .collect(),
        annotations: c.annotations,
        cdi_devices: c.cdi_devices.into_iter().map(|d| d.name).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value of the wrong type in the checkpoint names the field.
    #[test]
    fn malformed_checkpoint_names_the_field() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(CHECKPOINT_FILE);
        std::fs::write(&path, br#"{"Data": {}, "Checksum": "x"}"#).unwrap();
        let err = read_checkpoint(&path).unwrap_err().to_string();
        assert!(
            err.starts_with("Checksum: invalid type: string \"x\", expected u32"),
            "{err}"
        );
    }

    #[test]
    fn checkpoint_round_trip_and_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(CHECKPOINT_FILE);
        assert!(matches!(read_checkpoint(&path), Ok(None)));
        let mut state = DeviceState::default();
        state.register("example.com/dev", 1);
        state.set_devices("example.com/dev", 1, [("a".to_string(), true)]);
        let entry = PodDevicesEntry {
            pod_uid: "uid1".into(),
            container_name: "c".into(),
            resource_name: "example.com/dev".into(),
            device_ids: vec!["a".into()],
            alloc_resp: ContainerDevices {
                devices: vec![DeviceSpec {
                    container_path: "/dev/x".into(),
                    host_path: "/dev/y".into(),
                    permissions: "rw".into(),
                }],
                ..Default::default()
            },
        };
        state.record(entry.clone());
        write_checkpoint(&path, state.checkpoint()).unwrap();
        let read = read_checkpoint(&path).unwrap().unwrap();
        assert_eq!(read, state.checkpoint());
        let restored = DeviceState::from_checkpoint(&read);
        assert_eq!(
            restored.allocation("uid1", "c", "example.com/dev"),
            Some(&entry)
        );
        // Known, but no device until the plugin registers again.
        assert_eq!(restored.counts()[0].1.capacity, 0);
        // A changed byte is caught.
        let text = std::fs::read_to_string(&path)
            .unwrap()
            .replace("/dev/y", "/dev/z");
        std::fs::write(&path, text).unwrap();
        assert!(read_checkpoint(&path).is_err());
    }
}
