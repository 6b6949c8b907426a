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
pub mod manager;
#[cfg(feature = "device-plugins")]
pub mod proto;

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
pub const VERSION: &str = "v1beta1";
/// kubelet: `endpointStopGracePeriod` — a stopped plugin's devices are dropped after it.
pub const ENDPOINT_STOP_GRACE: Duration = Duration::from_secs(5 * 60);
/// kubelet: `pluginapi.Healthy`.
pub const HEALTHY: &str = "Healthy";

/// One resource's counts in the Node's status: capacity = every device the plugin lists,
/// allocatable = the healthy ones.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResourceCount {
    pub capacity: i64,
    pub allocatable: i64,
}

/// The device-plugin resources by name (the node status and admission read them).
pub type Resources = BTreeMap<String, ResourceCount>;

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

/// The devices of one resource given to one container, and the plugin's answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocation {
    pub ids: Vec<String>,
    pub response: ContainerDevices,
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
pub fn is_extended_resource_name(name: &str) -> bool {
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
pub struct Registration {
    pub version: String,
    pub endpoint: String,
    pub resource: String,
    pub options: PluginOptions,
}

/// `DevicePluginOptions`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PluginOptions {
    pub pre_start_required: bool,
    pub get_preferred_allocation_available: bool,
}

/// kubelet: the registration server's `Register` checks (its error messages).
pub fn validate(r: &Registration) -> Result<(), String> {
    if r.version != VERSION {
        return Err(format!(
            "requested API version {:?} is not supported by kubelet. Supported versions are [{VERSION:?}]",
            r.version
        ));
    }
    if !is_extended_resource_name(&r.resource) {
        return Err(format!("the ResourceName {:?} is invalid", r.resource));
    }
    // The endpoint is a file name in the plugin directory, never a path out of it.
    if r.endpoint.is_empty()
        || r.endpoint.contains('/')
        || r.endpoint == "."
        || r.endpoint == ".."
        || r.endpoint == KUBELET_SOCKET
    {
        return Err(format!("invalid endpoint {:?}", r.endpoint));
    }
    Ok(())
}

#[derive(Debug, Clone, Default)]
struct Resource {
    /// Device ID → healthy.
    devices: BTreeMap<String, bool>,
    /// The registered plugin's generation (`None`: stopped).
    endpoint: Option<u64>,
    /// When the plugin stopped (the grace period runs from here).
    stopped_at: Option<Instant>,
}

/// (pod UID, container name) → resource → devices.
type Assignments = BTreeMap<(String, String), BTreeMap<String, Allocation>>;

/// The device manager's state: resources, their devices, and who holds which devices.
#[derive(Debug, Clone, Default)]
pub struct DeviceState {
    resources: BTreeMap<String, Resource>,
    allocations: Assignments,
}

impl DeviceState {
    /// kubelet: `readCheckpoint` — the checkpointed resources are known with no device
    /// (capacity 0) until their plugin registers again; the assignments are kept.
    pub fn from_checkpoint(cp: &Checkpoint) -> Self {
        let mut s = DeviceState::default();
        for resource in cp.registered_devices.keys() {
            s.resources.insert(resource.clone(), Resource::default());
        }
        for e in &cp.pod_device_entries {
            s.resources.entry(e.resource_name.clone()).or_default();
            s.allocations
                .entry((e.pod_uid.clone(), e.container_name.clone()))
                .or_default()
                .insert(
                    e.resource_name.clone(),
                    Allocation {
                        ids: e.device_ids.clone(),
                        response: e.alloc_resp.clone(),
                    },
                );
        }
        s
    }

    /// What the checkpoint file keeps.
    pub fn checkpoint(&self) -> Checkpoint {
        let mut cp = Checkpoint::default();
        for ((uid, container), by_resource) in &self.allocations {
            for (resource, a) in by_resource {
                cp.pod_device_entries.push(PodDevicesEntry {
                    pod_uid: uid.clone(),
                    container_name: container.clone(),
                    resource_name: resource.clone(),
                    device_ids: a.ids.clone(),
                    alloc_resp: a.response.clone(),
                });
            }
        }
        for (name, r) in &self.resources {
            cp.registered_devices
                .insert(name.clone(), r.devices.keys().cloned().collect());
        }
        cp
    }

    /// `* --Register--> registered(generation)`: the devices stay until the new plugin's
    /// first list replaces them.
    pub fn register(&mut self, resource: &str, generation: u64) {
        let r = self.resources.entry(resource.to_string()).or_default();
        r.endpoint = Some(generation);
        r.stopped_at = None;
    }

    /// `registered(generation) --list--> registered(generation)`: the plugin's full list
    /// replaces the devices. A list of an older generation is ignored. Returns whether the
    /// counts changed.
    pub fn set_devices(
        &mut self,
        resource: &str,
        generation: u64,
        devices: impl IntoIterator<Item = (String, bool)>,
    ) -> bool {
        let Some(r) = self.resources.get_mut(resource) else {
            return false;
        };
        if r.endpoint != Some(generation) {
            return false;
        }
        let before = count(r);
        r.devices = devices.into_iter().collect();
        count(r) != before
    }

    /// `registered(generation) --stream ends--> stopped(now)`: every device unhealthy
    /// (kubelet: `markResourceUnhealthy`). Ignored for an older generation (a restarted
    /// plugin's old stream). Returns whether the counts changed.
    pub fn stopped(&mut self, resource: &str, generation: u64, now: Instant) -> bool {
        let Some(r) = self.resources.get_mut(resource) else {
            return false;
        };
        if r.endpoint != Some(generation) {
            return false;
        }
        let before = count(r);
        r.endpoint = None;
        r.stopped_at = Some(now);
        for healthy in r.devices.values_mut() {
            *healthy = false;
        }
        count(r) != before
    }

    /// `stopped(at) --grace period--> stopped, no devices`: the resource reads capacity 0
    /// (kubelet: `GetCapacity` drops an endpoint stopped for `endpointStopGracePeriod`).
    /// Returns whether anything changed.
    pub fn expire(&mut self, now: Instant) -> bool {
        let mut changed = false;
        for r in self.resources.values_mut() {
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
    pub fn next_expiry(&self) -> Option<Instant> {
        self.resources
            .values()
            .filter_map(|r| r.stopped_at)
            .min()
            .map(|at| at + ENDPOINT_STOP_GRACE)
    }

    /// The node status's counts.
    pub fn counts(&self) -> Resources {
        self.resources
            .iter()
            .map(|(name, r)| (name.clone(), count(r)))
            .collect()
    }

    /// The registered plugin's generation of `resource`.
    pub fn endpoint(&self, resource: &str) -> Option<u64> {
        self.resources.get(resource)?.endpoint
    }

    /// kubelet: `isDevicePluginResource` — a resource some plugin registered (or the
    /// checkpoint named).
    pub fn is_device_resource(&self, resource: &str) -> bool {
        self.resources.contains_key(resource)
    }

    /// kubelet: `UpdateAllocatedDevices` — the devices of pods no longer active are free
    /// again. Returns whether any assignment went.
    pub fn prune(&mut self, active: &BTreeSet<String>) -> bool {
        let before = self.allocations.len();
        self.allocations.retain(|(uid, _), _| active.contains(uid));
        self.allocations.len() != before
    }

    /// The container's devices of `resource`, if it has them already (a restarted
    /// container keeps its devices).
    pub fn allocation(&self, uid: &str, container: &str, resource: &str) -> Option<&Allocation> {
        self.allocations
            .get(&(uid.to_string(), container.to_string()))?
            .get(resource)
    }

    /// kubelet: `devicesToAllocate` — the healthy devices of `resource` no container holds,
    /// when there are at least `needed`; else the kubelet's error.
    pub fn available(&self, resource: &str, needed: usize) -> Result<Vec<String>, DeviceError> {
        let Some(r) = self.resources.get(resource) else {
            return Err(DeviceError::Unregistered(resource.to_string()));
        };
        if !r.devices.values().any(|h| *h) {
            return Err(DeviceError::NoHealthy(resource.to_string()));
        }
        let in_use: BTreeSet<&String> = self
            .allocations
            .values()
            .filter_map(|m| m.get(resource))
            .flat_map(|a| &a.ids)
            .collect();
        let free: Vec<String> = r
            .devices
            .iter()
            .filter(|(id, healthy)| **healthy && !in_use.contains(id))
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

    /// Records the container's devices of `resource`.
    pub fn record(&mut self, uid: &str, container: &str, resource: &str, a: Allocation) {
        self.allocations
            .entry((uid.to_string(), container.to_string()))
            .or_default()
            .insert(resource.to_string(), a);
    }

    /// The device IDs each container of a pod holds (for logs and tests).
    pub fn devices_of(&self, uid: &str, container: &str) -> BTreeMap<String, Vec<String>> {
        self.allocations
            .get(&(uid.to_string(), container.to_string()))
            .map(|m| m.iter().map(|(r, a)| (r.clone(), a.ids.clone())).collect())
            .unwrap_or_default()
    }
}

fn count(r: &Resource) -> ResourceCount {
    ResourceCount {
        capacity: r.devices.len() as i64,
        allocatable: r.devices.values().filter(|h| **h).count() as i64,
    }
}

/// The choice among `available` devices: the plugin's preference first (those still
/// available), then the rest in order, `needed` in all.
pub fn pick(available: &[String], preferred: &[String], needed: usize) -> Vec<String> {
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
pub fn container_requests(c: &crate::api::Container) -> Vec<(String, usize)> {
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

/// A pod's need of one extended resource (kubelet: `PodRequests` — the sum over the app
/// containers and sidecars, or the largest init container's if that is more).
pub fn pod_request(pod: &Pod, resource: &str) -> usize {
    let of = |c: &crate::api::Container| {
        container_requests(c)
            .into_iter()
            .find(|(r, _)| r == resource)
            .map_or(0, |(_, n)| n)
    };
    let apps: usize = pod.spec.containers.iter().map(of).sum();
    let init = pod.spec.init_containers.iter().map(of).max().unwrap_or(0);
    apps.max(init)
}

/// kubelet: admission's device checks for `pod` against the device-plugin resources and
/// the pods admitted before (`others`). A resource the node does not know is skipped
/// (kubelet: `removeMissingExtendedResources`; such pods are admitted without the device,
/// returned in `Ok`); one it knows must have enough healthy devices free, else the
/// kubelet's Allocate error.
pub fn admit(
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
        let Some(count) = resources.get(&resource) else {
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
/// content: JSON with the plugin's answer as JSON (the kubelet keeps it as protobuf
/// bytes) and a CRC-32 of the data in `Checksum` (see `manager::write_checkpoint`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    #[serde(rename = "PodDeviceEntries", default)]
    pub pod_device_entries: Vec<PodDevicesEntry>,
    #[serde(rename = "RegisteredDevices", default)]
    pub registered_devices: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodDevicesEntry {
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

#[cfg(test)]
mod tests;
