//! The device manager (kubelet: `pkg/kubelet/cm/devicemanager`), feature `device-plugins`:
//! hardware (GPUs, USB and serial devices, cameras, I2C, GPIO) offered by device plugins
//! over the kubelet's device plugin API `v1beta1`, counted as extended resources of the node
//! and given to the containers that ask for them.
//!
//! The lifecycle of one resource (`vendor/name`), as the kubelet's endpoints do it:
//!
//! ```text
//!   unknown --Register--> registered(gen) --ListAndWatch lists--> registered(gen) (devices replaced)
//!   registered(gen) --Register again (plugin restarted)--> registered(gen+1)  (old stream's news ignored)
//!   registered(gen) --stream ends--> stopped(at): every device unhealthy (allocatable 0)
//!   stopped(at) --5 min (endpointStopGracePeriod)--> stopped, no devices (capacity 0, still known)
//!   picolet restart: checkpointed resources --> stopped, no devices, until their plugin registers
//! ```
//!
//! Owns: [`DeviceState`], the pure state machine of the above plus the assignments of
//! devices to containers (`(pod UID, container, resource) → device IDs and the plugin's
//! Allocate answer`), its checkpoint's format ([`Checkpoint`]), the admission check of a
//! pod's device requests ([`admit`]), and what a container gets ([`ContainerDevices`]).
//! [`manager`] is the effects: the registration server, the plugins' streams, the Allocate
//! calls and the checkpoint file, in one task that owns a `DeviceState`.
//!
//! Must never: do I/O here (that is [`manager`]); import the loop or the runtime manager.
//!
//! Deliberately different from upstream:
//! - No topology manager: devices' NUMA topology hints are read and ignored, any healthy
//!   device may be given (an edge board has one NUMA node).
//! - Allocation happens at the container's creation (the first start of each container),
//!   not inside admission: admission checks the counts (the same upstream reasons and
//!   messages, see [`admit`]) without blocking the event loop on a plugin's RPC; an
//!   Allocate that fails then leaves the container waiting with `CreateContainerConfigError`
//!   and is retried with the container's back-off, where the kubelet would fail the pod
//!   with `UnexpectedAdmissionError`.
//! - Init containers' devices are not handed on to the app containers (the kubelet's
//!   `devicesToReuse`): a pod needs the sum.

#[cfg(feature = "device-plugins")]
pub(crate) mod manager;
crate::grpc::generated_module! {
    #[cfg(feature = "device-plugins")]
    pub mod proto;
}
#[cfg(feature = "device-plugins")]
mod registration;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::api::Pod;

/// kubelet: `pluginapi.DevicePluginPath`, where plugins hard-code the kubelet's socket.
pub const DEFAULT_DIR: &str = "/var/lib/kubelet/device-plugins";
/// kubelet: `pluginapi.KubeletSocket`'s file name: the registration server.
pub const KUBELET_SOCKET: &str = "kubelet.sock";
/// kubelet: `kubeletDeviceManagerCheckpoint`.
pub const CHECKPOINT_FILE: &str = "kubelet_internal_checkpoint";
/// kubelet: `pluginapi.SupportedVersions`.
pub(crate) const VERSION: &str = "v1beta1";
/// kubelet: `endpointStopGracePeriod` — a stopped plugin's devices are dropped after it.
pub(crate) const ENDPOINT_STOP_GRACE: Duration = Duration::from_secs(5 * 60);
/// kubelet: `pluginapi.Healthy`.
pub(crate) const HEALTHY: &str = "Healthy";

/// One resource's counts in the Node's status: capacity = every device the plugin lists,
/// allocatable = the healthy ones.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResourceCount {
    pub capacity: i64,
    pub allocatable: i64,
}

/// The device-plugin resources, sorted by name (the node status and admission read them).
pub type Resources = Vec<(String, ResourceCount)>;

/// What a plugin's `Allocate` says one container gets (protobuf `ContainerAllocateResponse`),
/// and, merged over the container's resources, what `CreateContainer` adds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerDevices {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub envs: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mounts: Vec<DeviceMount>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceSpec>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Fully qualified CDI device names (`vendor.com/class=name`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cdi_devices: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceMount {
    pub container_path: String,
    pub host_path: String,
    #[serde(default)]
    pub read_only: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceSpec {
    pub container_path: String,
    pub host_path: String,
    #[serde(default)]
    pub permissions: String,
}

impl ContainerDevices {
    pub fn is_empty(&self) -> bool {
        self == &ContainerDevices::default()
    }

    /// kubelet: `deviceRunContainerOptions` — one resource's answer added to what the
    /// container already gets: environment and annotations by key (a conflict is logged,
    /// the later value kept), mounts and devices by container path (the first wins), CDI
    /// names deduplicated.
    pub fn merge(&mut self, other: &ContainerDevices) {
        for (k, v) in &other.envs {
            if let Some(old) = self.envs.insert(k.clone(), v.clone())
                && old != *v
            {
                log::warn!(
                    "device plugins: environment variable {k} has conflicting settings ({old:?}, {v:?})"
                );
            }
        }
        for m in &other.mounts {
            if !self
                .mounts
                .iter()
                .any(|x| x.container_path == m.container_path)
            {
                self.mounts.push(m.clone());
            }
        }
        for d in &other.devices {
            if !self
                .devices
                .iter()
                .any(|x| x.container_path == d.container_path)
            {
                self.devices.push(d.clone());
            }
        }
        for (k, v) in &other.annotations {
            self.annotations.insert(k.clone(), v.clone());
        }
        for c in &other.cdi_devices {
            if !self.cdi_devices.contains(c) {
                self.cdi_devices.push(c.clone());
            }
        }
    }
}

/// Why a container's devices cannot be given (the kubelet's messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceError {
    #[error("cannot allocate unregistered device {0}")]
    Unregistered(String),
    #[error("no healthy devices present; cannot allocate unhealthy devices {0}")]
    NoHealthy(String),
    #[error(
        "requested number of devices unavailable for {resource}. Requested: {requested}, Available: {available}"
    )]
    Unavailable {
        resource: String,
        requested: usize,
        available: usize,
    },
    #[error("endpoint not found in cache for a registered resource: {0}")]
    NoEndpoint(String),
    /// A plugin's RPC failed (resource, call, status message).
    #[error("device plugin {0}: {1} failed: {2}")]
    Rpc(String, &'static str, String),
    #[error("device plugin {0}: Allocate answered {1} containers for one")]
    BadResponse(String, usize),
    /// The manager's task is gone (picolet is stopping).
    #[error("the device manager is not running")]
    Stopped,
}

/// kubelet: `IsExtendedResourceName` for a plugin's resource: `domain/name`, not in the
/// `kubernetes.io` domain, and not a `requests.` quota name.
pub(crate) fn is_extended_resource_name(name: &str) -> bool {
    let Some((domain, rest)) = name.split_once('/') else {
        return false;
    };
    let native = domain == "kubernetes.io" || domain.ends_with(".kubernetes.io");
    !native
        && !rest.is_empty()
        && !rest.contains('/')
        && !domain.is_empty()
        && !name.starts_with("requests.")
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._/".contains(&b))
}

/// What one `Register` asks (the registration server's pure check).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Registration {
    pub version: String,
    pub endpoint: String,
    pub resource: String,
    pub options: PluginOptions,
}

/// `DevicePluginOptions`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PluginOptions {
    pub pre_start_required: bool,
    pub get_preferred_allocation_available: bool,
}

/// Why a plugin's registration is refused (the kubelet's messages, sent back to it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RegistrationError {
    /// A device plugin API version other than [`VERSION`].
    Version(String),
    /// Not an extended resource name.
    ResourceName(String),
    /// Not a plain file name in the plugin directory (or the kubelet's own socket).
    Endpoint(String),
}

impl std::fmt::Display for RegistrationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RegistrationError::Version(v) => write!(
                f,
                "requested API version {v:?} is not supported by kubelet. Supported versions are [{VERSION:?}]"
            ),
            RegistrationError::ResourceName(r) => write!(f, "the ResourceName {r:?} is invalid"),
            RegistrationError::Endpoint(e) => write!(f, "invalid endpoint {e:?}"),
        }
    }
}

impl std::error::Error for RegistrationError {}

/// kubelet: the registration server's `Register` checks (its error messages).
pub(crate) fn validate(r: &Registration) -> Result<(), RegistrationError> {
    if r.version != VERSION {
        return Err(RegistrationError::Version(r.version.clone()));
    }
    if !is_extended_resource_name(&r.resource) {
        return Err(RegistrationError::ResourceName(r.resource.clone()));
    }
    // The endpoint is a file name in the plugin directory, never a path out of it.
    if r.endpoint.is_empty()
        || r.endpoint.contains('/')
        || r.endpoint == "."
        || r.endpoint == ".."
        || r.endpoint == KUBELET_SOCKET
    {
        return Err(RegistrationError::Endpoint(r.endpoint.clone()));
    }
    Ok(())
}

#[derive(Debug, Clone, Default)]
struct Resource {
    name: String,
    /// (device ID, healthy), in the plugin's order.
    devices: Vec<(String, bool)>,
    /// The registered plugin's generation (`None`: stopped).
    endpoint: Option<u64>,
    /// When the plugin stopped (the grace period runs from here).
    stopped_at: Option<Instant>,
}

/// The device manager's state: resources, their devices, and who holds which devices.
/// (Flat vectors, not maps: a node has a handful of resources and pods, and every map
/// type is code in the binary.)
#[derive(Debug, Clone, Default)]
pub(crate) struct DeviceState {
    resources: Vec<Resource>,
    /// One entry per (pod UID, container, resource), as the checkpoint keeps them.
    allocations: Vec<PodDevicesEntry>,
}

impl DeviceState {
    /// kubelet: `readCheckpoint` — the checkpointed resources are known with no device
    /// (capacity 0) until their plugin registers again; the assignments are kept.
    pub(crate) fn from_checkpoint(cp: &Checkpoint) -> Self {
        let mut s = DeviceState {
            resources: Vec::new(),
            allocations: cp.pod_device_entries.clone(),
        };
        let names = cp.registered_devices.iter().map(|r| &r.resource);
        for name in names.chain(cp.pod_device_entries.iter().map(|e| &e.resource_name)) {
            s.resource_mut(name);
        }
        s
    }

    /// What the checkpoint file keeps.
    pub(crate) fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            pod_device_entries: self.allocations.clone(),
            registered_devices: self
                .resources
                .iter()
                .map(|r| RegisteredDevices {
                    resource: r.name.clone(),
                    device_ids: r.devices.iter().map(|(id, _)| id.clone()).collect(),
                })
                .collect(),
        }
    }

    fn resource(&self, name: &str) -> Option<&Resource> {
        self.resources.iter().find(|r| r.name == name)
    }

    fn resource_mut(&mut self, name: &str) -> &mut Resource {
        let i = match self.resources.iter().position(|r| r.name == name) {
            Some(i) => i,
            None => {
                self.resources.push(Resource {
                    name: name.to_string(),
                    ..Resource::default()
                });
                self.resources.len() - 1
            }
        };
        &mut self.resources[i]
    }

    /// `* --Register--> registered(generation)`: the devices stay until the new plugin's
    /// first list replaces them.
    pub(crate) fn register(&mut self, resource: &str, generation: u64) {
        let r = self.resource_mut(resource);
        r.endpoint = Some(generation);
        r.stopped_at = None;
    }

    /// The resource of the registered plugin of `generation`.
    fn current(&mut self, resource: &str, generation: u64) -> Option<&mut Resource> {
        self.resources
            .iter_mut()
            .find(|r| r.name == resource && r.endpoint == Some(generation))
    }

    /// `registered(generation) --list--> registered(generation)`: the plugin's full list
    /// replaces the devices. A list of an older generation is ignored. Returns whether the
    /// counts changed.
    pub(crate) fn set_devices(
        &mut self,
        resource: &str,
        generation: u64,
        devices: impl IntoIterator<Item = (String, bool)>,
    ) -> bool {
        let Some(r) = self.current(resource, generation) else {
            return false;
        };
        let before = count(r);
        r.devices.clear();
        for (id, healthy) in devices {
            // A repeated ID: the last entry counts.
            r.devices.retain(|(x, _)| *x != id);
            r.devices.push((id, healthy));
        }
        count(r) != before
    }

    /// `registered(generation) --stream ends--> stopped(now)`: every device unhealthy
    /// (kubelet: `markResourceUnhealthy`). Ignored for an older generation (a restarted
    /// plugin's old stream). Returns whether the counts changed.
    pub(crate) fn stopped(&mut self, resource: &str, generation: u64, now: Instant) -> bool {
        let Some(r) = self.current(resource, generation) else {
            return false;
        };
        let before = count(r);
        r.endpoint = None;
        r.stopped_at = Some(now);
        for (_, healthy) in &mut r.devices {
            *healthy = false;
        }
        count(r) != before
    }

    /// `stopped(at) --grace period--> stopped, no devices`: the resource reads capacity 0
    /// (kubelet: `GetCapacity` drops an endpoint stopped for `endpointStopGracePeriod`).
    /// Returns whether anything changed.
    pub(crate) fn expire(&mut self, now: Instant) -> bool {
        let mut changed = false;
        for r in &mut self.resources {
            if r.endpoint.is_none()
                && r.stopped_at
                    .is_some_and(|at| now.duration_since(at) >= ENDPOINT_STOP_GRACE)
            {
                r.stopped_at = None;
                changed |= !r.devices.is_empty();
                r.devices.clear();
            }
        }
        changed
    }

    /// The earliest moment [`expire`](Self::expire) has something to do.
    pub(crate) fn next_expiry(&self) -> Option<Instant> {
        self.resources
            .iter()
            .filter_map(|r| r.stopped_at)
            .min()
            .map(|at| at + ENDPOINT_STOP_GRACE)
    }

    /// The node status's counts, by resource name.
    pub(crate) fn counts(&self) -> Resources {
        let mut out: Resources = self
            .resources
            .iter()
            .map(|r| (r.name.clone(), count(r)))
            .collect();
        out.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// The registered plugin's generation of `resource`.
    pub(crate) fn endpoint(&self, resource: &str) -> Option<u64> {
        self.resource(resource)?.endpoint
    }

    /// kubelet: `isDevicePluginResource` — a resource some plugin registered (or the
    /// checkpoint named).
    pub(crate) fn is_device_resource(&self, resource: &str) -> bool {
        self.resource(resource).is_some()
    }

    /// kubelet: `UpdateAllocatedDevices` — the devices of pods no longer active are free
    /// again. Returns whether any assignment went.
    pub(crate) fn prune(&mut self, active: &BTreeSet<String>) -> bool {
        let before = self.allocations.len();
        self.allocations.retain(|e| active.contains(&e.pod_uid));
        self.allocations.len() != before
    }

    /// The container's devices of `resource`, if it has them already (a restarted
    /// container keeps its devices).
    pub(crate) fn allocation(
        &self,
        uid: &str,
        container: &str,
        resource: &str,
    ) -> Option<&PodDevicesEntry> {
        self.allocations.iter().find(|e| {
            e.pod_uid == uid && e.container_name == container && e.resource_name == resource
        })
    }

    /// kubelet: `devicesToAllocate` — the healthy devices of `resource` no container holds,
    /// when there are at least `needed`; else the kubelet's error.
    pub(crate) fn available(
        &self,
        resource: &str,
        needed: usize,
    ) -> Result<Vec<String>, DeviceError> {
        let Some(r) = self.resource(resource) else {
            return Err(DeviceError::Unregistered(resource.to_string()));
        };
        if !r.devices.iter().any(|(_, h)| *h) {
            return Err(DeviceError::NoHealthy(resource.to_string()));
        }
        let in_use = |id: &String| {
            self.allocations
                .iter()
                .any(|e| e.resource_name == resource && e.device_ids.contains(id))
        };
        let free: Vec<String> = r
            .devices
            .iter()
            .filter(|(id, healthy)| *healthy && !in_use(id))
            .map(|(id, _)| id.clone())
            .collect();
        if free.len() < needed {
            return Err(DeviceError::Unavailable {
                resource: resource.to_string(),
                requested: needed,
                available: free.len(),
            });
        }
        Ok(free)
    }

    /// Records the container's devices of `resource` (replacing any it had).
    pub(crate) fn record(&mut self, entry: PodDevicesEntry) {
        self.allocations.retain(|e| {
            (&e.pod_uid, &e.container_name, &e.resource_name)
                != (&entry.pod_uid, &entry.container_name, &entry.resource_name)
        });
        self.allocations.push(entry);
    }
}

fn count(r: &Resource) -> ResourceCount {
    ResourceCount {
        capacity: r.devices.len() as i64,
        allocatable: r.devices.iter().filter(|(_, h)| *h).count() as i64,
    }
}

/// The choice among `available` devices: the plugin's preference first (those still
/// available), then the rest in order, `needed` in all.
pub(crate) fn pick(available: &[String], preferred: &[String], needed: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(needed);
    for id in preferred.iter().chain(available) {
        if out.len() == needed {
            break;
        }
        if available.contains(id) && !out.contains(id) {
            out.push(id.clone());
        }
    }
    out
}

/// The device-plugin resources one container asks for, from its limits (kubelet: the
/// device manager allocates from `container.Resources.Limits`; an extended resource's
/// request equals its limit), with a count above 0.
pub(crate) fn container_requests(c: &crate::api::Container) -> Vec<(String, usize)> {
    let Some(r) = c.resources.as_ref() else {
        return Vec::new();
    };
    r.limits
        .iter()
        .chain(r.requests.iter())
        .filter(|(name, _)| is_extended_resource_name(name))
        .filter_map(|(name, q)| {
            let n = usize::try_from(q.scaled(0)?).ok()?;
            (n > 0).then(|| (name.clone(), n))
        })
        .fold(Vec::new(), |mut out, (name, n)| {
            if !out.iter().any(|(x, _)| *x == name) {
                out.push((name, n));
            }
            out
        })
}

/// A pod's need of one extended resource (kubelet: `PodRequests`, [`crate::qos::aggregate`]).
pub(crate) fn pod_request(pod: &Pod, resource: &str) -> usize {
    let need = crate::qos::aggregate(pod, |c| {
        container_requests(c)
            .into_iter()
            .find(|(r, _)| r == resource)
            .map_or(0, |(_, n)| i64::try_from(n).unwrap_or(i64::MAX))
    });
    usize::try_from(need).unwrap_or(usize::MAX)
}

/// kubelet: admission's device checks for `pod` against the device-plugin resources and
/// the pods admitted before (`others`). A resource the node does not know is skipped
/// (kubelet: `removeMissingExtendedResources`; such pods are admitted without the device,
/// returned in `Ok`); one it knows must have enough healthy devices free, else the
/// kubelet's Allocate error.
pub(crate) fn admit(
    pod: &Pod,
    resources: &Resources,
    others: &[&Pod],
) -> Result<Vec<String>, DeviceError> {
    let mut wanted: Vec<String> = Vec::new();
    for c in pod.spec.init_containers.iter().chain(&pod.spec.containers) {
        for (r, _) in container_requests(c) {
            if !wanted.contains(&r) {
                wanted.push(r);
            }
        }
    }
    let mut missing = Vec::new();
    for resource in wanted {
        let Some((_, count)) = resources.iter().find(|(name, _)| *name == resource) else {
            missing.push(resource);
            continue;
        };
        let needed = pod_request(pod, &resource);
        if count.allocatable <= 0 {
            return Err(DeviceError::NoHealthy(resource));
        }
        let used: usize = others.iter().map(|p| pod_request(p, &resource)).sum();
        let available = usize::try_from(count.allocatable)
            .unwrap_or(0)
            .saturating_sub(used);
        if needed > available {
            return Err(DeviceError::Unavailable {
                resource,
                requested: needed,
                available,
            });
        }
    }
    Ok(missing)
}

/// The checkpoint (kubelet: `kubelet_internal_checkpoint`, `checkpoint.Data`): the
/// assignments and the devices each resource had. picolet's own encoding of the same
/// content: JSON, the plugin's answer as JSON (the kubelet keeps it as protobuf bytes), the
/// registered devices as a list, and a checksum of the data (see `manager`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Checkpoint {
    #[serde(rename = "PodDeviceEntries", default)]
    pub pod_device_entries: Vec<PodDevicesEntry>,
    #[serde(rename = "RegisteredDevices", default)]
    pub registered_devices: Vec<RegisteredDevices>,
}

/// One container's devices of one resource, and the plugin's answer for them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PodDevicesEntry {
    #[serde(rename = "PodUID")]
    pub pod_uid: String,
    #[serde(rename = "ContainerName")]
    pub container_name: String,
    #[serde(rename = "ResourceName")]
    pub resource_name: String,
    #[serde(rename = "DeviceIDs")]
    pub device_ids: Vec<String>,
    #[serde(rename = "AllocResp")]
    pub alloc_resp: ContainerDevices,
}

/// The devices a resource had at the checkpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RegisteredDevices {
    #[serde(rename = "Resource")]
    pub resource: String,
    #[serde(rename = "DeviceIDs")]
    pub device_ids: Vec<String>,
}

#[cfg(test)]
mod tests;
