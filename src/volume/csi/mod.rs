//! CSI node plugins (kubelet: `pkg/volume/csi`, `pkg/kubelet/pluginmanager`): the drivers
//! registered on the kubelet's plugin registration socket directory, and inline ephemeral
//! `csi:` volumes published through their Node service.
//!
//! Owns: the registry of drivers (name → endpoint, filled by [`registration`]), the Node
//! service client (`csi.v1`: `NodeGetInfo`, `NodeGetCapabilities`, `NodePublishVolume`,
//! `NodeUnpublishVolume`), the request picolet sends for an inline volume, and the
//! volume's directory `<root>/pods/<uid>/volumes/kubernetes.io~csi/<name>/` with its
//! `vol_data.json` (what unpublishing needs, found again after a picolet restart) and the
//! target path `mount` the driver publishes to.
//!
//! Must never: log a request (it carries the `nodePublishSecretRef` Secret), remove a
//! volume directory while something is still mounted on its target path, or retry on its
//! own (a failure goes back to the pod worker, which retries with back-off).
//!
//! Where picolet differs from the kubelet: without an apiserver there are no CSIDriver
//! objects, so the pod info keys (`csi.storage.k8s.io/pod.*`) are always sent for inline
//! volumes (the kubelet sends them when the CSIDriver says `podInfoOnMount`); every driver
//! is assumed to support the `Ephemeral` lifecycle mode; no fsGroup is applied (no
//! `VOLUME_MOUNT_GROUP`, no recursive chown). PersistentVolumeClaims stay refused: they
//! need an attach/detach controller and `NodeStageVolume`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tonic::transport::Channel;

use crate::api;
use crate::config_data::{ConfigObjects, Kind, ObjectKey, Scope};

#[cfg(feature = "fake-cri")]
#[allow(clippy::too_many_lines)] // a test double, not production code
pub(crate) mod fake;
pub(crate) mod registration;
pub(crate) mod sha256;

crate::grpc::generated_module! {
    /// The generated `csi.v1` and `pluginregistration` messages, clients and (with feature
    /// `fake-cri`, for the fake plugin of the tests) servers.
    pub mod proto {
        include!(concat!(env!("OUT_DIR"), "/csi.v1.rs"));
        pub mod registration {
            include!(concat!(env!("OUT_DIR"), "/pluginregistration.rs"));
        }
    }
}

/// The plugin directory of CSI volumes under a pod's `volumes/`.
pub(crate) const PLUGIN_DIR: &str = "kubernetes.io~csi";
/// kubelet: `<root-dir>/plugins_registry` (`config.DefaultKubeletPluginsRegistrationDirName`).
pub(crate) const REGISTRY_DIR: &str = "plugins_registry";
/// kubelet: `csiTimeout` — the deadline of a publish or unpublish call.
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(120);
/// The deadline of the registration-time calls (GetInfo, NodeGetInfo, …).
pub(crate) const INFO_TIMEOUT: Duration = Duration::from_secs(10);
/// kubelet: the volume context keys of an inline volume (`csi_mounter.go`).
pub(crate) const KEY_EPHEMERAL: &str = "csi.storage.k8s.io/ephemeral";
pub(crate) const KEY_POD_NAME: &str = "csi.storage.k8s.io/pod.name";
pub(crate) const KEY_POD_NAMESPACE: &str = "csi.storage.k8s.io/pod.namespace";
pub(crate) const KEY_POD_UID: &str = "csi.storage.k8s.io/pod.uid";
pub(crate) const KEY_SERVICE_ACCOUNT: &str = "csi.storage.k8s.io/serviceAccount.name";

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum CsiError {
    /// kubelet's message, word for word.
    #[error("driver name {0} not found in the list of registered CSI drivers")]
    NotRegistered(String),
    #[error("{method}: rpc error: code = {code:?} desc = {message}")]
    Rpc {
        method: &'static str,
        code: tonic::Code,
        message: String,
    },
    #[error("{method}: no answer within {timeout:?}")]
    Timeout {
        method: &'static str,
        timeout: Duration,
    },
    #[error("{what} {}: {message}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        message: String,
    },
    #[error("{0}")]
    Refused(String),
    /// The pod's `nodePublishSecretRef` names a Secret not known in its namespace.
    #[error("fetching NodePublishSecretRef {namespace}/{name} failed: secret {name:?} not found")]
    PublishSecretNotFound { namespace: String, name: String },
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> CsiError + 'a {
    move |e| CsiError::Io {
        what,
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// A registered driver.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Driver {
    pub name: String,
    /// The socket of its Node service.
    pub endpoint: PathBuf,
    /// The registration socket it came from (its removal unregisters the driver).
    pub registration_socket: PathBuf,
    /// `NodeGetInfo`'s node ID.
    pub node_id: String,
    /// `NodeGetCapabilities`, as `NodeServiceCapability.RPC.Type` numbers.
    pub capabilities: Vec<i32>,
}

#[derive(Debug, Default)]
struct State {
    drivers: BTreeMap<String, Driver>,
    /// Target paths published since picolet started (a restart publishes again, which the
    /// spec makes idempotent).
    published: BTreeSet<PathBuf>,
}

/// The registered drivers, shared by the registration watcher and the pod syncs (short
/// critical sections, never held across an await).
#[derive(Debug, Clone, Default)]
pub(crate) struct Registry {
    state: Arc<Mutex<State>>,
}

impl Registry {
    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let mut guard = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut guard)
    }

    pub(crate) fn get(&self, name: &str) -> Option<Driver> {
        self.with(|s| s.drivers.get(name).cloned())
    }

    /// Registers (or replaces) a driver.
    pub(crate) fn insert(&self, driver: Driver) {
        self.with(|s| s.drivers.insert(driver.name.clone(), driver));
    }

    /// Unregisters the driver that came from `socket`; its name if there was one.
    pub(crate) fn remove_socket(&self, socket: &Path) -> Option<String> {
        self.with(|s| {
            let name = s
                .drivers
                .values()
                .find(|d| d.registration_socket == socket)?
                .name
                .clone();
            s.drivers.remove(&name);
            Some(name)
        })
    }

    fn is_published(&self, target: &Path) -> bool {
        self.with(|s| s.published.contains(target))
    }

    fn set_published(&self, target: &Path, published: bool) {
        self.with(|s| {
            if published {
                s.published.insert(target.to_path_buf());
            } else {
                s.published.remove(target);
            }
        });
    }
}

/// A lazy tonic channel over the unix socket `path` (the CRI client's: one connector type
/// in the binary).
pub(crate) fn unix_channel(path: &Path) -> Channel {
    crate::grpc::unix_channel(Arc::from(path))
}

/// The gRPC paths of the calls picolet makes.
pub(crate) const NODE_PUBLISH: &str = "/csi.v1.Node/NodePublishVolume";
pub(crate) const NODE_UNPUBLISH: &str = "/csi.v1.Node/NodeUnpublishVolume";
pub(crate) const NODE_GET_INFO: &str = "/csi.v1.Node/NodeGetInfo";
pub(crate) const NODE_GET_CAPABILITIES: &str = "/csi.v1.Node/NodeGetCapabilities";
pub(crate) const GET_INFO: &str = "/pluginregistration.Registration/GetInfo";
pub(crate) const NOTIFY_REGISTRATION_STATUS: &str =
    "/pluginregistration.Registration/NotifyRegistrationStatus";

/// One unary call on `endpoint` under `timeout`: the request is encoded and the answer
/// decoded here, around one non-generic gRPC call ([`raw_call`]) that every CSI and
/// registration method shares (the generated clients would compile tonic's call path once
/// per method).
pub(crate) async fn call<Resp: prost::Message + Default>(
    endpoint: &Path,
    path: &'static str,
    req: &impl prost::Message,
    timeout: Duration,
) -> Result<Resp, CsiError> {
    let method = path.rsplit('/').next().unwrap_or(path);
    let bytes = raw_call(
        unix_channel(endpoint),
        method,
        path,
        req.encode_to_vec().into(),
        timeout,
    )
    .await?;
    Resp::decode(bytes).map_err(|e| CsiError::Rpc {
        method,
        code: tonic::Code::Internal,
        message: format!("cannot decode the answer: {e}"),
    })
}

async fn raw_call(
    channel: Channel,
    method: &'static str,
    path: &'static str,
    req: prost::bytes::Bytes,
    timeout: Duration,
) -> Result<prost::bytes::Bytes, CsiError> {
    let mut grpc = tonic::client::Grpc::new(channel);
    let call = async {
        grpc.ready()
            .await
            .map_err(|e| tonic::Status::unavailable(format!("Service was not ready: {e}")))?;
        let mut request = tonic::Request::new(req);
        request.set_timeout(timeout);
        grpc.unary(
            request,
            tonic::codegen::http::uri::PathAndQuery::from_static(path),
            BytesCodec,
        )
        .await
    };
    match tokio::time::timeout(timeout, call).await {
        Err(_) => Err(CsiError::Timeout { method, timeout }),
        Ok(Ok(r)) => Ok(r.into_inner()),
        Ok(Err(status)) => Err(CsiError::Rpc {
            method,
            code: status.code(),
            message: status.message().to_string(),
        }),
    }
}

/// Protobuf bytes both ways (encoded and decoded by [`call`]).
struct BytesCodec;
struct BytesEncoder;
struct BytesDecoder;

impl tonic::codec::Codec for BytesCodec {
    type Encode = prost::bytes::Bytes;
    type Decode = prost::bytes::Bytes;
    type Encoder = BytesEncoder;
    type Decoder = BytesDecoder;

    fn encoder(&mut self) -> Self::Encoder {
        BytesEncoder
    }

    fn decoder(&mut self) -> Self::Decoder {
        BytesDecoder
    }
}

impl tonic::codec::Encoder for BytesEncoder {
    type Item = prost::bytes::Bytes;
    type Error = tonic::Status;

    fn encode(
        &mut self,
        item: prost::bytes::Bytes,
        dst: &mut tonic::codec::EncodeBuf<'_>,
    ) -> Result<(), tonic::Status> {
        use prost::bytes::BufMut as _;
        dst.put(item);
        Ok(())
    }
}

impl tonic::codec::Decoder for BytesDecoder {
    type Item = prost::bytes::Bytes;
    type Error = tonic::Status;

    fn decode(
        &mut self,
        src: &mut tonic::codec::DecodeBuf<'_>,
    ) -> Result<Option<prost::bytes::Bytes>, tonic::Status> {
        use prost::bytes::Buf as _;
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

// ---------------------------------------------------------------------------------------
// Inline volumes

/// kubelet: `makeVolumeHandle` — `csi-` and the hex SHA-256 of the pod UID followed by the
/// volume's name.
pub fn volume_handle(pod_uid: &str, volume: &str) -> String {
    let mut input = String::with_capacity(pod_uid.len() + volume.len());
    input.push_str(pod_uid);
    input.push_str(volume);
    format!("csi-{}", sha256::hex(&sha256::digest(input.as_bytes())))
}

/// `<root>/pods/<uid>/volumes/kubernetes.io~csi/<name>`.
pub(crate) fn volume_dir(root_dir: &Path, uid: &str, volume: &str) -> PathBuf {
    root_dir
        .join("pods")
        .join(uid)
        .join("volumes")
        .join(PLUGIN_DIR)
        .join(volume)
}

/// The target path of an inline volume: `<volume_dir>/mount` (kubelet: `getTargetPath`).
pub(crate) fn target_path(root_dir: &Path, uid: &str, volume: &str) -> PathBuf {
    volume_dir(root_dir, uid, volume).join("mount")
}

/// kubelet: `vol_data.json` next to the target path (its keys), written before the publish
/// so that an unpublish after a picolet restart knows the driver and the handle.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct VolData {
    #[serde(rename = "specVolID")]
    pub spec_vol_id: String,
    #[serde(rename = "volumeHandle")]
    pub volume_handle: String,
    #[serde(rename = "driverName")]
    pub driver_name: String,
    #[serde(rename = "volumeLifecycleMode")]
    pub volume_lifecycle_mode: String,
}

pub(crate) const VOL_DATA_FILE: &str = "vol_data.json";

/// The `NodePublishVolume` request for an inline volume (kubelet: `csiMountMgr.SetUpAt`):
/// access mode SINGLE_NODE_WRITER, a mount capability with the volume's `fsType` and no
/// flags, the ephemeral marker and the pod info in the volume context over the volume's
/// attributes.
pub(crate) fn publish_request(
    pod: &api::Pod,
    volume: &str,
    source: &api::CsiVolumeSource,
    target: &Path,
    secrets: BTreeMap<String, String>,
) -> proto::NodePublishVolumeRequest {
    use proto::volume_capability::{AccessMode, AccessType, MountVolume, access_mode::Mode};
    let mut context = source.volume_attributes.clone();
    // kubelet: podInfoOnMount's keys (always: no CSIDriver objects here), then the
    // ephemeral marker.
    context.insert(KEY_POD_NAME.into(), pod.metadata.name.clone());
    context.insert(KEY_POD_NAMESPACE.into(), pod.metadata.namespace.clone());
    context.insert(KEY_POD_UID.into(), pod.metadata.uid.clone());
    context.insert(
        KEY_SERVICE_ACCOUNT.into(),
        pod.spec.service_account_name.clone().unwrap_or_default(),
    );
    context.insert(KEY_EPHEMERAL.into(), "true".into());
    proto::NodePublishVolumeRequest {
        volume_id: volume_handle(&pod.metadata.uid, volume),
        publish_context: BTreeMap::new(),
        staging_target_path: String::new(),
        target_path: target.to_string_lossy().into_owned(),
        volume_capability: Some(proto::VolumeCapability {
            access_mode: Some(AccessMode {
                mode: Mode::SingleNodeWriter as i32,
            }),
            access_type: Some(AccessType::Mount(MountVolume {
                fs_type: source.fs_type.clone().unwrap_or_default(),
                mount_flags: Vec::new(),
            })),
        }),
        readonly: source.read_only.unwrap_or(false),
        secrets,
        volume_context: context,
    }
}

/// The `nodePublishSecretRef` Secret of the pod's namespace, as strings (kubelet:
/// `getCredentialsFromSecret`).
fn publish_secrets(
    pod: &api::Pod,
    source: &api::CsiVolumeSource,
    objects: &ConfigObjects,
) -> Result<BTreeMap<String, String>, CsiError> {
    let Some(reference) = &source.node_publish_secret_ref else {
        return Ok(BTreeMap::new());
    };
    let ns = &pod.metadata.namespace;
    let key = ObjectKey::new(Scope::of(pod), Kind::Secret, ns, &reference.name);
    let secret = objects
        .get(&key)
        .ok_or_else(|| CsiError::PublishSecretNotFound {
            namespace: ns.clone(),
            name: reference.name.clone(),
        })?;
    Ok(crate::sort::collect_map(secret.data.iter().map(
        |(k, v)| (k.clone(), String::from_utf8_lossy(v).into_owned()),
    )))
}

/// A volume that could not be published: its name and why.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PublishError {
    pub volume: String,
    pub message: String,
}

/// Publishes every inline CSI volume of `pod` not yet published since picolet started
/// (kubelet: the volume manager's `MountVolume` → `csiMountMgr.SetUpAt`). Stops at the
/// first failure.
pub(crate) async fn publish_pod_volumes(
    root_dir: &Path,
    pod: &api::Pod,
    registry: &Registry,
    objects: &ConfigObjects,
) -> Result<(), PublishError> {
    for volume in &pod.spec.volumes {
        let Some(source) = &volume.csi else {
            continue;
        };
        let fail = |message: String| PublishError {
            volume: volume.name.clone(),
            message,
        };
        let target = target_path(root_dir, &pod.metadata.uid, &volume.name);
        if registry.is_published(&target) {
            continue;
        }
        let driver = registry
            .get(&source.driver)
            .ok_or_else(|| fail(CsiError::NotRegistered(source.driver.clone()).to_string()))?;
        let secrets = publish_secrets(pod, source, objects).map_err(|e| fail(e.to_string()))?;
        // kubelet: the CO creates the parent; the driver creates the target itself.
        let dir = volume_dir(root_dir, &pod.metadata.uid, &volume.name);
        write_vol_data(
            &dir,
            &VolData {
                spec_vol_id: volume.name.clone(),
                volume_handle: volume_handle(&pod.metadata.uid, &volume.name),
                driver_name: source.driver.clone(),
                volume_lifecycle_mode: "Ephemeral".into(),
            },
        )
        .map_err(|e| fail(e.to_string()))?;
        let req = publish_request(pod, &volume.name, source, &target, secrets);
        call::<proto::NodePublishVolumeResponse>(
            &driver.endpoint,
            NODE_PUBLISH,
            &req,
            CALL_TIMEOUT,
        )
        .await
        .map_err(|e| fail(e.to_string()))?;
        log::info!(
            "pod {}: CSI volume {:?} published by {} at {}",
            pod.full_name(),
            volume.name,
            source.driver,
            target.display()
        );
        registry.set_published(&target, true);
    }
    Ok(())
}

fn write_vol_data(dir: &Path, data: &VolData) -> Result<(), CsiError> {
    if !dir.is_dir() {
        std::fs::create_dir_all(dir).map_err(io_err("create directory", dir))?;
        std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o750))
            .map_err(io_err("chmod", dir))?;
    }
    let path = dir.join(VOL_DATA_FILE);
    let json = serde_json::to_vec(data).map_err(|e| CsiError::Io {
        what: "encode",
        path: path.clone(),
        message: e.to_string(),
    })?;
    std::fs::write(&path, json).map_err(io_err("write", &path))
}

/// Unpublishes every CSI volume under the pod's directory (kubelet: `UnmountVolume` →
/// `csiMountMgr.TearDownAt`, then `removeMountDir`): `NodeUnpublishVolume` with the handle
/// and driver of its `vol_data.json`, then — only when nothing is mounted on the target any
/// more — the target, the file and the volume directory are removed. Every volume is
/// tried; the first failure is returned (the caller retries the whole, which the spec makes
/// idempotent).
pub(crate) async fn unpublish_pod_volumes(
    root_dir: &Path,
    uid: &str,
    registry: &Registry,
) -> Result<(), CsiError> {
    let dir = root_dir
        .join("pods")
        .join(uid)
        .join("volumes")
        .join(PLUGIN_DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err("read", &dir)(e)),
    };
    let mut first = None;
    for entry in entries.flatten() {
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if let Err(e) = unpublish_volume(root_dir, uid, &name, registry).await {
            log::warn!("pod {uid}: CSI volume {name:?}: {e}");
            first.get_or_insert(e);
        }
    }
    match first {
        Some(e) => Err(e),
        None => {
            // Empty now: nothing of a driver is left in it.
            let _ = std::fs::remove_dir(&dir);
            Ok(())
        }
    }
}

async fn unpublish_volume(
    root_dir: &Path,
    uid: &str,
    name: &str,
    registry: &Registry,
) -> Result<(), CsiError> {
    let dir = volume_dir(root_dir, uid, name);
    let target = dir.join("mount");
    let data_path = dir.join(VOL_DATA_FILE);
    match std::fs::read(&data_path) {
        Ok(bytes) => {
            let data: VolData = crate::api::from_json_slice(&bytes).map_err(|e| CsiError::Io {
                what: "decode",
                path: data_path.clone(),
                message: e.to_string(),
            })?;
            let driver = registry
                .get(&data.driver_name)
                .ok_or_else(|| CsiError::NotRegistered(data.driver_name.clone()))?;
            let req = proto::NodeUnpublishVolumeRequest {
                volume_id: data.volume_handle.clone(),
                target_path: target.to_string_lossy().into_owned(),
            };
            call::<proto::NodeUnpublishVolumeResponse>(
                &driver.endpoint,
                NODE_UNPUBLISH,
                &req,
                CALL_TIMEOUT,
            )
            .await?;
            log::info!(
                "pod {uid}: CSI volume {name:?} unpublished by {}",
                data.driver_name
            );
        }
        // A directory without the file was never handed to a driver (or its file is gone):
        // only the checks below.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err("read", &data_path)(e)),
    }
    registry.set_published(&target, false);
    // kubelet: removeMountDir — never remove what is still mounted.
    if is_mounted(&target) {
        return Err(CsiError::Refused(format!(
            "{} is still mounted after NodeUnpublishVolume",
            target.display()
        )));
    }
    match std::fs::remove_dir(&target) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err("remove", &target)(e)),
    }
    match std::fs::remove_file(&data_path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err("remove", &data_path)(e)),
    }
    std::fs::remove_dir(&dir).map_err(io_err("remove", &dir))
}

/// Something is mounted on `path`: a listed mount point in `/proc/self/mountinfo` (a bind
/// mount from the same filesystem keeps the device number), or a different device than
/// its parent.
pub fn is_mounted(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    if let (Ok(d), Some(Ok(p))) = (
        std::fs::metadata(path),
        path.parent().map(std::fs::metadata),
    ) && d.dev() != p.dev()
    {
        return true;
    }
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    info.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .any(|m| Path::new(&unescape_mountinfo(m)) == canonical)
}

/// `/proc/self/mountinfo` escapes space, tab, newline and backslash as `\ooo`.
fn unescape_mountinfo(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vol_data file through the value decoder: a value of the wrong type names the
    /// field (the caller names the file: `CsiError::Io { what: "decode", path, .. }`).
    #[test]
    fn malformed_vol_data_names_the_field() {
        let err = crate::api::from_json_slice::<VolData>(br#"{"specVolID": 1}"#).unwrap_err();
        assert_eq!(
            err.to_string(),
            "specVolID: invalid type: integer `1`, expected a string"
        );
        assert!(crate::api::from_json_slice::<VolData>(b"{nope").is_err());
    }

    fn pod() -> api::Pod {
        let mut pod = api::Pod::default();
        pod.metadata.name = "web-node1".into();
        pod.metadata.namespace = "default".into();
        pod.metadata.uid = "0b9c6f4e-1111-2222-3333-444455556666".into();
        pod.spec.service_account_name = Some("app".into());
        pod
    }

    #[test]
    fn volume_handle_is_the_kubelets() {
        // sha256("0b9c6f4e-1111-2222-3333-444455556666" + "certs"), as Go's
        // fmt.Sprintf("csi-%x", sha256.Sum256(...)) prints it.
        let want = format!(
            "csi-{}",
            sha256::hex(&sha256::digest(
                b"0b9c6f4e-1111-2222-3333-444455556666certs"
            ))
        );
        assert_eq!(
            volume_handle("0b9c6f4e-1111-2222-3333-444455556666", "certs"),
            want
        );
        assert_eq!(
            volume_handle("", ""),
            "csi-e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(volume_handle("ab", "c"), volume_handle("a", "bc"));
    }

    #[test]
    fn publish_request_fields() {
        use proto::volume_capability::{AccessType, access_mode::Mode};
        let source = api::CsiVolumeSource {
            driver: "certs.example.com".into(),
            read_only: Some(true),
            fs_type: Some("ext4".into()),
            volume_attributes: BTreeMap::from([
                ("issuer".to_string(), "ca".to_string()),
                // A pod cannot override the pod info.
                (KEY_POD_NAME.to_string(), "spoofed".to_string()),
            ]),
            node_publish_secret_ref: None,
        };
        let target = Path::new("/var/lib/picolet/pods/u/volumes/kubernetes.io~csi/certs/mount");
        let secrets = BTreeMap::from([("token".to_string(), "t".to_string())]);
        let req = publish_request(&pod(), "certs", &source, target, secrets.clone());
        assert_eq!(
            req.volume_id,
            volume_handle("0b9c6f4e-1111-2222-3333-444455556666", "certs")
        );
        assert_eq!(req.target_path, target.to_str().unwrap());
        assert!(req.readonly);
        assert!(req.staging_target_path.is_empty());
        assert_eq!(req.secrets, secrets);
        let cap = req.volume_capability.unwrap();
        assert_eq!(cap.access_mode.unwrap().mode, Mode::SingleNodeWriter as i32);
        match cap.access_type {
            Some(AccessType::Mount(m)) => {
                assert_eq!(m.fs_type, "ext4");
                assert!(m.mount_flags.is_empty());
            }
            other => panic!("access type {other:?}"),
        }
        let want: BTreeMap<String, String> = [
            ("issuer", "ca"),
            (KEY_POD_NAME, "web-node1"),
            (KEY_POD_NAMESPACE, "default"),
            (KEY_POD_UID, "0b9c6f4e-1111-2222-3333-444455556666"),
            (KEY_SERVICE_ACCOUNT, "app"),
            (KEY_EPHEMERAL, "true"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(req.volume_context, want);
    }

    #[test]
    fn mountinfo_escapes() {
        assert_eq!(unescape_mountinfo(r"/a\040b\134c"), r"/a b\c");
        assert_eq!(unescape_mountinfo(r"/plain\04"), r"/plain\04");
    }

    #[test]
    fn registry_unregisters_by_socket() {
        let r = Registry::default();
        r.insert(Driver {
            name: "d".into(),
            endpoint: "/p/csi.sock".into(),
            registration_socket: "/reg/d.sock".into(),
            node_id: "n".into(),
            capabilities: vec![],
        });
        assert_eq!(r.remove_socket(Path::new("/reg/other.sock")), None);
        assert_eq!(
            r.remove_socket(Path::new("/reg/d.sock")).as_deref(),
            Some("d")
        );
        assert!(r.get("d").is_none());
    }
}
