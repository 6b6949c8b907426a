//! configMap, secret, downwardAPI and projected volumes (kubelet: the `configmap`, `secret`,
//! `downwardapi` and `projected` volume plugins' `SetUpAt` and `MakePayload`).
//!
//! Owns: the payload of each such volume (from the pod and [`ConfigObjects`]), its
//! directory `<root>/pods/<uid>/volumes/kubernetes.io~<plugin>/<name>`, and keeping it up to
//! date: [`setup`] runs at every sync of the pod, so an edited ConfigMap reaches a running
//! container as soon as the agent resyncs the pods that reference it. Secret and projected
//! volumes live on a tmpfs (a secret never touches the SD card), as upstream.
//!
//! Must never: log a value, write a version whose content did not change (the atomic
//! writer compares first), or let a static pod read an API object or the reverse (the
//! lookup is scoped by [`Scope::of`]).

use std::path::Path;

use crate::api;
use crate::config_data::{self, ConfigObjects, Kind, Object, ObjectKey, Scope};
use crate::fieldpath::NodeParams;
use crate::volume::atomic_writer::{self, FileProjection, Payload};
use crate::volume::mounts::{self, Tmpfs};

/// upstream: `ConfigMapVolumeSourceDefaultMode`, `SecretVolumeSourceDefaultMode`, … (0644).
pub(crate) const DEFAULT_MODE: i32 = 0o644;

/// kubelet reports a volume that cannot be set up as `FailedMount`; the pod's containers
/// wait as `ContainerCreating` with this message.
#[derive(Debug, thiserror::Error)]
#[error("MountVolume.SetUp failed for volume {volume:?} : {message}")]
pub(crate) struct VolumeError {
    pub volume: String,
    pub message: String,
}

pub(crate) use crate::volume::mounts::{plugin_dir, volume_dir};

/// The name of a new volume version (kubelet: `..2006_01_02_15_04_05.<random>`), from the
/// wall clock: `2026_12_01_19_30_00.123456789`.
pub(crate) fn version_stamp(now: crate::clock::UnixNanos) -> String {
    crate::clock::rfc3339_nanos(now)
        .trim_end_matches('Z')
        .replace(['-', 'T', ':'], "_")
}

/// Sets up (or brings up to date) every data volume of `pod`. `stamp` names new versions.
/// Returns the names of the volumes whose content changed after their first setup.
pub(crate) fn setup(
    root_dir: &Path,
    pod: &api::Pod,
    objects: &ConfigObjects,
    tmpfs: &dyn Tmpfs,
    node: NodeParams<'_>,
    stamp: &str,
) -> Result<Vec<String>, VolumeError> {
    let mut updated = Vec::new();
    // kubelet: makePodDataDirs, once per sync of a pod with data volumes.
    let mut dirs_made = false;
    for volume in &pod.spec.volumes {
        let Some(dir) = volume_dir(root_dir, &pod.metadata.uid, volume) else {
            continue;
        };
        let fail = |message: String| VolumeError {
            volume: volume.name.clone(),
            message,
        };
        let payload = payload(pod, volume, objects, node).map_err(|e| fail(e.to_string()))?;
        if !dirs_made {
            mounts::make_pod_data_dirs(root_dir, &pod.metadata.uid)
                .map_err(|e| fail(e.to_string()))?;
            dirs_made = true;
        }
        mounts::ensure_dir(&dir, 0o755).map_err(|e| fail(e.to_string()))?;
        let fs_group = pod
            .spec
            .security_context
            .as_ref()
            .and_then(|sc| sc.fs_group)
            .and_then(|g| u32::try_from(g).ok());
        let on_tmpfs = plugin_dir(volume).is_some_and(|(_, t)| t);
        if on_tmpfs && !mounts::is_mount_point(&dir) {
            // kubelet: secret volumes wrap a Memory emptyDir; sized like one. Its root is
            // not world-writable (an emptyDir's is): 0755, or 2750 for the fsGroup.
            let size = mounts::memory_medium_size(pod, None, node.memory_capacity);
            let access = mounts::TmpfsAccess::Private { fs_group };
            tmpfs
                .mount(&dir, size, access)
                .map_err(|e| fail(format!("mount tmpfs on {}: {e}", dir.display())))?;
        }
        let first = std::fs::symlink_metadata(dir.join("..data")).is_err();
        let changed = atomic_writer::write(&dir, &payload, stamp, fs_group)
            .map_err(|e| fail(e.to_string()))?;
        if changed && !first {
            updated.push(volume.name.clone());
        }
    }
    Ok(updated)
}

fn lookup(
    pod: &api::Pod,
    objects: &ConfigObjects,
    kind: Kind,
    name: &str,
) -> Option<std::sync::Arc<Object>> {
    objects.get(&ObjectKey::new(
        Scope::of(pod),
        kind,
        &pod.metadata.namespace,
        name,
    ))
}

/// Why a data volume's files cannot be made (the `FailedMount` message after the volume's
/// name).
#[derive(Debug)]
pub(crate) enum PayloadError {
    /// A static pod asks for a service account token.
    StaticPodToken,
    /// The token of the service account is not issued yet.
    TokenNotIssued(String),
    /// A projected source other than configMap, secret, downwardAPI, serviceAccountToken.
    ProjectedSourceUnsupported,
    /// The ConfigMap or Secret `name` is not known (and not optional).
    NotFound(Kind, String),
    /// An item names a key the ConfigMap or Secret does not have.
    MissingKey(Kind, String),
    /// A downwardAPI `resourceFieldRef` in a pod without containers.
    NoContainers,
    /// A `resourceFieldRef` that cannot be read back as JSON.
    Json(serde_json::Error),
    /// A downwardAPI item's `resourceFieldRef` has no value: `(item path, why)`.
    ResourceField(String, crate::fieldpath::ResourceFieldError),
    /// A downwardAPI item without a source.
    NoFieldRef(String),
    /// A `fieldRef` path the volume does not support.
    UnsupportedFieldPath(String),
}

impl std::fmt::Display for PayloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PayloadError::StaticPodToken => f.write_str(
                "a static pod has no service account token (it needs the apiserver's TokenRequest API)",
            ),
            PayloadError::TokenNotIssued(sa) => write!(
                f,
                "failed to fetch token: the token of service account {sa:?} is not issued yet"
            ),
            PayloadError::ProjectedSourceUnsupported => {
                f.write_str("projected source not supported by picolet")
            }
            PayloadError::NotFound(kind, name) => write!(f, "{} {name:?} not found", kind.resource()),
            PayloadError::MissingKey(kind, key) => write!(
                f,
                "{} references non-existent {}key: {key}",
                kind.resource(),
                if *kind == Kind::Secret {
                    "secret "
                } else {
                    "config "
                },
            ),
            PayloadError::NoContainers => f.write_str("the pod has no containers"),
            PayloadError::Json(e) => write!(f, "{e}"),
            // (the message the container config's error gave before, item named)
            PayloadError::ResourceField(path, m) => write!(f, "env {path:?}: resourceFieldRef: {m}"),
            PayloadError::NoFieldRef(path) => {
                write!(f, "item {path:?}: no fieldRef or resourceFieldRef")
            }
            PayloadError::UnsupportedFieldPath(path) => write!(f, "unsupported fieldPath {path:?}"),
        }
    }
}

impl std::error::Error for PayloadError {}

/// The files of one data volume (empty for other kinds).
pub(crate) fn payload(
    pod: &api::Pod,
    volume: &api::Volume,
    objects: &ConfigObjects,
    node: NodeParams<'_>,
) -> Result<Payload, PayloadError> {
    let mut out = Payload::new();
    let source = |kind, name, items, optional| Source {
        kind,
        name,
        items,
        optional,
    };
    if let Some(cm) = &volume.config_map {
        let mode = cm.default_mode.unwrap_or(DEFAULT_MODE);
        let src = source(Kind::ConfigMap, &cm.name, &cm.items, cm.optional);
        project(&mut out, pod, objects, src, mode)?;
    }
    if let Some(s) = &volume.secret {
        let mode = s.default_mode.unwrap_or(DEFAULT_MODE);
        let src = source(Kind::Secret, &s.secret_name, &s.items, s.optional);
        project(&mut out, pod, objects, src, mode)?;
    }
    if let Some(d) = &volume.downward_api {
        let mode = d.default_mode.unwrap_or(DEFAULT_MODE);
        downward(&mut out, pod, &d.items, mode, node)?;
    }
    if let Some(p) = &volume.projected {
        let mode = p.default_mode.unwrap_or(DEFAULT_MODE);
        for src in &p.sources {
            if let Some(cm) = &src.config_map {
                let s = source(Kind::ConfigMap, &cm.name, &cm.items, cm.optional);
                project(&mut out, pod, objects, s, mode)?;
            } else if let Some(sec) = &src.secret {
                let s = source(Kind::Secret, &sec.name, &sec.items, sec.optional);
                project(&mut out, pod, objects, s, mode)?;
            } else if let Some(d) = &src.downward_api {
                downward(&mut out, pod, &d.items, mode, node)?;
            } else if let Some(t) = &src.service_account_token {
                // kubelet: the token manager's TokenRequest, bound to this pod.
                if Scope::of(pod) == Scope::Local {
                    return Err(PayloadError::StaticPodToken);
                }
                let key = config_data::token_key(pod, t);
                let token = objects
                    .get(&key)
                    .and_then(|o| o.data.get("token").cloned())
                    .ok_or_else(|| {
                        PayloadError::TokenNotIssued(
                            config_data::parse_token_name(&key.name)
                                .map(|t| t.service_account)
                                .unwrap_or_default(),
                        )
                    })?;
                out.insert(
                    t.path.clone(),
                    FileProjection {
                        data: token,
                        mode: mode as u32 & 0o777,
                    },
                );
            } else {
                // The field policy refuses the other sources before a pod gets here.
                return Err(PayloadError::ProjectedSourceUnsupported);
            }
        }
    }
    Ok(out)
}

/// What a configMap or secret source asks for.
struct Source<'a> {
    kind: Kind,
    name: &'a str,
    items: &'a [api::KeyToPath],
    optional: Option<bool>,
}

/// kubelet: configmap/secret `MakePayload`.
fn project(
    out: &mut Payload,
    pod: &api::Pod,
    objects: &ConfigObjects,
    src: Source<'_>,
    default_mode: i32,
) -> Result<(), PayloadError> {
    let Source {
        kind,
        name,
        items,
        optional,
    } = src;
    let optional = optional.unwrap_or(false);
    let obj = lookup(pod, objects, kind, name);
    let Some(obj) = obj.as_deref() else {
        if optional {
            return Ok(());
        }
        return Err(PayloadError::NotFound(kind, name.to_string()));
    };
    let file = |data: &[u8], mode: Option<i32>| FileProjection {
        data: data.to_vec(),
        mode: mode.unwrap_or(default_mode) as u32 & 0o777,
    };
    if items.is_empty() {
        for (k, v) in &obj.data {
            out.insert(k.clone(), file(v, None));
        }
        return Ok(());
    }
    for item in items {
        match obj.data.get(&item.key) {
            Some(v) => {
                out.insert(item.path.clone(), file(v, item.mode));
            }
            None if optional => {}
            None => {
                return Err(PayloadError::MissingKey(kind, item.key.clone()));
            }
        }
    }
    Ok(())
}

/// kubelet: downwardapi `CollectData`.
fn downward(
    out: &mut Payload,
    pod: &api::Pod,
    items: &[api::DownwardApiVolumeFile],
    default_mode: i32,
    node: NodeParams<'_>,
) -> Result<(), PayloadError> {
    for item in items {
        let value = if let Some(f) = &item.field_ref {
            field_value(pod, &f.field_path)?
        } else if let Some(r) = &item.resource_field_ref {
            let container = pod
                .spec
                .containers
                .first()
                .ok_or(PayloadError::NoContainers)?;
            let rf = serde_json::to_value(r).map_err(PayloadError::Json)?;
            crate::fieldpath::resource_field_value(pod, container, &rf, node)
                .map_err(|m| PayloadError::ResourceField(item.path.clone(), m))?
        } else {
            return Err(PayloadError::NoFieldRef(item.path.clone()));
        };
        out.insert(
            item.path.clone(),
            FileProjection {
                data: value.into_bytes(),
                mode: item.mode.unwrap_or(default_mode) as u32 & 0o777,
            },
        );
    }
    Ok(())
}

/// The downward API fields of a volume (upstream `ExtractFieldPathAsString`).
fn field_value(pod: &api::Pod, path: &str) -> Result<String, PayloadError> {
    let m = &pod.metadata;
    Ok(match path {
        "metadata.name" => m.name.clone(),
        "metadata.namespace" => m.namespace.clone(),
        "metadata.uid" => m.uid.clone(),
        "metadata.labels" => format_map(&m.labels),
        "metadata.annotations" => format_map(&m.annotations),
        _ => crate::fieldpath::metadata_subscript(pod, path)
            .ok_or_else(|| PayloadError::UnsupportedFieldPath(path.to_string()))?,
    })
}

/// upstream `fieldpath.FormatMap`: `key="value"` lines, sorted, values quoted as Go's `%q`.
pub(crate) fn format_map(map: &std::collections::BTreeMap<String, String>) -> String {
    let mut out = String::new();
    for (k, v) in map {
        out.push_str(k);
        out.push('=');
        go_quote(v, &mut out);
        out.push('\n');
    }
    out.pop();
    out
}

/// Go's `strconv.Quote` for the characters labels and annotations hold.
fn go_quote(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '\x0b' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\x7f' => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config_data::{from_config_map, from_secret};

    fn node() -> NodeParams<'static> {
        NodeParams {
            seccomp_root: Path::new("/nonexistent"),
            seccomp_default: false,
            memory_capacity: 1 << 30,
            cpu_capacity_milli: 4000,
            swap: Default::default(),
            host_ip: "10.0.0.2",
            objects: None,
        }
    }

    fn pod(volumes: serde_json::Value) -> api::Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "default", "uid": "u1",
                         "labels": {"app": "web", "tier": "a\"b"},
                         "annotations": {"kubernetes.io/config.source": "file"}},
            "spec": {"volumes": volumes,
                     "containers": [{"name": "c", "image": "x",
                                     "resources": {"limits": {"memory": "64Mi"}}}]}
        }))
        .unwrap()
    }

    fn store() -> ConfigObjects {
        let s = ConfigObjects::default();
        let cm: api::ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "cfg"}, "data": {"app.conf": "a=1", "other": "o"}
        }))
        .unwrap();
        let sec: api::Secret = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "db"}, "stringData": {"password": "s3cret"}
        }))
        .unwrap();
        s.replace_scope(
            Scope::Local,
            vec![
                from_config_map(&cm, Scope::Local, "f").unwrap(),
                from_secret(&sec, Scope::Local, "f").unwrap(),
            ],
        );
        s
    }

    fn files(p: &Payload) -> Vec<(String, String, u32)> {
        p.iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    String::from_utf8_lossy(&v.data).into_owned(),
                    v.mode,
                )
            })
            .collect()
    }

    #[test]
    fn payloads_follow_items_modes_and_optional() {
        let objects = store();
        let p = pod(serde_json::json!([]));
        type Want = Result<Vec<(&'static str, &'static str, u32)>, &'static str>;
        let cases: Vec<(serde_json::Value, Want)> = vec![
            (
                serde_json::json!({"name": "v", "configMap": {"name": "cfg"}}),
                Ok(vec![("app.conf", "a=1", 0o644), ("other", "o", 0o644)]),
            ),
            (
                serde_json::json!({"name": "v", "configMap": {"name": "cfg", "defaultMode": 0o600,
                    "items": [{"key": "app.conf", "path": "conf/app.conf", "mode": 0o400}, {"key": "other", "path": "o"}]}}),
                Ok(vec![("conf/app.conf", "a=1", 0o400), ("o", "o", 0o600)]),
            ),
            (
                serde_json::json!({"name": "v", "configMap": {"name": "nope"}}),
                Err("configmap \"nope\" not found"),
            ),
            (
                serde_json::json!({"name": "v", "configMap": {"name": "nope", "optional": true}}),
                Ok(vec![]),
            ),
            (
                serde_json::json!({"name": "v", "configMap": {"name": "cfg", "items": [{"key": "x", "path": "x"}]}}),
                Err("configmap references non-existent config key: x"),
            ),
            (
                serde_json::json!({"name": "v", "configMap": {"name": "cfg", "optional": true, "items": [{"key": "x", "path": "x"}]}}),
                Ok(vec![]),
            ),
            (
                serde_json::json!({"name": "v", "secret": {"secretName": "db", "defaultMode": 0o400}}),
                Ok(vec![("password", "s3cret", 0o400)]),
            ),
            (
                serde_json::json!({"name": "v", "secret": {"secretName": "db", "items": [{"key": "user", "path": "u"}]}}),
                Err("secret references non-existent secret key: user"),
            ),
            (
                serde_json::json!({"name": "v", "downwardAPI": {"items": [
                    {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                    {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
                    {"path": "app", "fieldRef": {"fieldPath": "metadata.labels['app']"}},
                    {"path": "mem", "resourceFieldRef": {"containerName": "c", "resource": "limits.memory", "divisor": "1Mi"}}]}}),
                Ok(vec![
                    ("app", "web", 0o644),
                    ("labels", "app=\"web\"\ntier=\"a\\\"b\"", 0o644),
                    ("mem", "64", 0o644),
                    ("name", "web", 0o644),
                ]),
            ),
            (
                serde_json::json!({"name": "v", "projected": {"defaultMode": 0o440, "sources": [
                    {"configMap": {"name": "cfg", "items": [{"key": "app.conf", "path": "app.conf"}]}},
                    {"secret": {"name": "db"}},
                    {"downwardAPI": {"items": [{"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}}]}}]}}),
                Ok(vec![
                    ("app.conf", "a=1", 0o440),
                    ("ns", "default", 0o440),
                    ("password", "s3cret", 0o440),
                ]),
            ),
        ];
        for (volume, want) in cases {
            let v: api::Volume = serde_json::from_value(volume.clone()).unwrap();
            let got = payload(&p, &v, &objects, node());
            match want {
                Ok(want) => {
                    let want: Vec<(String, String, u32)> = want
                        .into_iter()
                        .map(|(a, b, c)| (a.to_string(), b.to_string(), c))
                        .collect();
                    assert_eq!(files(&got.unwrap()), want, "{volume}");
                }
                Err(want) => assert_eq!(got.unwrap_err().to_string(), want, "{volume}"),
            }
        }
    }

    #[test]
    fn api_pods_never_see_local_objects() {
        let objects = store();
        let mut p = pod(serde_json::json!([]));
        p.metadata
            .annotations
            .insert(api::ANNOTATION_CONFIG_SOURCE.into(), "api".into());
        let v: api::Volume =
            serde_json::from_value(serde_json::json!({"name": "v", "configMap": {"name": "cfg"}}))
                .unwrap();
        assert_eq!(
            payload(&p, &v, &objects, node()).unwrap_err().to_string(),
            "configmap \"cfg\" not found"
        );
    }

    #[test]
    fn setup_writes_secrets_on_a_tmpfs_and_reports_updates() {
        let root = tempfile::tempdir().unwrap();
        let objects = store();
        let p = pod(serde_json::json!([
            {"name": "cfg", "configMap": {"name": "cfg"}},
            {"name": "db", "secret": {"secretName": "db"}}
        ]));
        let tmpfs = mounts::FakeTmpfs::default();
        let updated = setup(root.path(), &p, &objects, &tmpfs, node(), "s1").unwrap();
        assert!(updated.is_empty());
        let cfg_dir = root
            .path()
            .join("pods/u1/volumes/kubernetes.io~configmap/cfg");
        let db_dir = root.path().join("pods/u1/volumes/kubernetes.io~secret/db");
        assert_eq!(
            std::fs::read_to_string(cfg_dir.join("app.conf")).unwrap(),
            "a=1"
        );
        assert_eq!(
            std::fs::read_to_string(db_dir.join("password")).unwrap(),
            "s3cret"
        );
        let mounted: Vec<std::path::PathBuf> = tmpfs
            .mounted
            .lock()
            .unwrap()
            .iter()
            .map(|m| m.0.clone())
            .collect();
        assert_eq!(mounted, std::slice::from_ref(&db_dir));
        // The Secret's tmpfs is private (no fsGroup: 0755 root's), the pod's directories
        // 0750 (kubelet: makePodDataDirs).
        assert_eq!(
            *tmpfs.access.lock().unwrap(),
            [mounts::TmpfsAccess::Private { fs_group: None }]
        );
        let mode = |p: &Path| {
            std::os::unix::fs::MetadataExt::mode(&std::fs::metadata(p).unwrap()) & 0o7777
        };
        for d in ["pods/u1", "pods/u1/volumes", "pods/u1/plugins"] {
            assert_eq!(mode(&root.path().join(d)), 0o750, "{d}");
        }
        // Nothing changed: nothing reported.
        assert!(
            setup(root.path(), &p, &objects, &tmpfs, node(), "s2")
                .unwrap()
                .is_empty()
        );
        // The ConfigMap changes: its volume is updated, the secret's is not.
        let cm: api::ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "cfg"}, "data": {"app.conf": "a=2"}
        }))
        .unwrap();
        let sec_key = ObjectKey::new(Scope::Local, Kind::Secret, "default", "db");
        let keep = objects.get(&sec_key).unwrap().as_ref().clone();
        objects.replace_scope(
            Scope::Local,
            vec![from_config_map(&cm, Scope::Local, "f").unwrap(), keep],
        );
        let updated = setup(root.path(), &p, &objects, &tmpfs, node(), "s3").unwrap();
        assert_eq!(updated, ["cfg"]);
        assert_eq!(
            std::fs::read_to_string(cfg_dir.join("app.conf")).unwrap(),
            "a=2"
        );
        // A missing object fails with the volume named, as kubelet's FailedMount.
        objects.replace_scope(Scope::Local, vec![]);
        let err = setup(root.path(), &p, &objects, &tmpfs, node(), "s4").unwrap_err();
        assert_eq!(
            err.to_string(),
            "MountVolume.SetUp failed for volume \"cfg\" : configmap \"cfg\" not found"
        );
    }
}
