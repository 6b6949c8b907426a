//! Config data: the ConfigMaps and Secrets pods reference (kubelet: `pkg/kubelet/configmap`,
//! `pkg/kubelet/secret`, their object caches).
//!
//! Owns: the decoded objects ([`Object`]: key → bytes), the store the agent fills
//! ([`ConfigObjects`]; one writer, the agent loop; syncs read it), and what a pod references
//! ([`references`]). Two scopes never mix: static pods (file and http sources) see only the
//! local objects of the static pod directory; API pods see only the apiserver's.
//!
//! Must never: log or format a value (a Secret's bytes never reach a log line, a status or
//! an event: [`Object`]'s `Debug` shows the keys only), do I/O (`volume::atomic_writer` is the one
//! writer of files, called by the runtime's volume setup).
//!
//! Deliberate difference from upstream: the kubelet does not let static pods use ConfigMaps
//! or Secrets at all; picolet gives them local objects, YAML documents in the manifest
//! directory (`source::file`), in the same shape a Kubernetes user already writes.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};

use crate::api;

#[cfg(feature = "apiserver")]
pub(crate) mod objects;
pub(crate) mod services;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    ConfigMap,
    Secret,
    /// A service account token issued for one pod (cluster mode: TokenRequest); the key's
    /// name is [`token_name`], the object's one key `token`.
    Token,
}

impl Kind {
    /// As upstream's not-found errors spell the resource: `configmap "x" not found`.
    pub fn resource(self) -> &'static str {
        match self {
            Kind::ConfigMap => "configmap",
            Kind::Secret => "secret",
            Kind::Token => "serviceaccount token",
        }
    }
    /// As the API spells the kind: `couldn't find key k in ConfigMap ns/x`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::ConfigMap => "ConfigMap",
            Kind::Secret => "Secret",
            Kind::Token => "ServiceAccountToken",
        }
    }
}

/// The API default of `serviceAccountToken.expirationSeconds`.
pub(crate) const DEFAULT_TOKEN_EXPIRATION_SECONDS: i64 = 3600;

/// What a token is requested for: the `name` of its [`ObjectKey`] spells all of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TokenSpec {
    pub service_account: String,
    pub pod_name: String,
    pub pod_uid: String,
    pub expiration_seconds: i64,
    /// "" for the apiserver's own audiences.
    pub audience: String,
}

/// `<serviceAccount>/<pod>/<uid>/<expirationSeconds>/<audience>` (the audience last: it
/// may hold slashes).
pub(crate) fn token_name(t: &TokenSpec) -> String {
    format!(
        "{}/{}/{}/{}/{}",
        t.service_account, t.pod_name, t.pod_uid, t.expiration_seconds, t.audience
    )
}

pub(crate) fn parse_token_name(name: &str) -> Option<TokenSpec> {
    let mut it = name.splitn(5, '/');
    Some(TokenSpec {
        service_account: it.next()?.to_string(),
        pod_name: it.next()?.to_string(),
        pod_uid: it.next()?.to_string(),
        expiration_seconds: it.next()?.parse().ok()?,
        audience: it.next()?.to_string(),
    })
}

/// The token key of a projected `serviceAccountToken` source of `pod`.
pub(crate) fn token_key(pod: &api::Pod, p: &api::ServiceAccountTokenProjection) -> ObjectKey {
    let spec = TokenSpec {
        service_account: pod
            .spec
            .service_account_name
            .clone()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "default".to_string()),
        pod_name: pod.metadata.name.clone(),
        pod_uid: pod.metadata.uid.clone(),
        expiration_seconds: p
            .expiration_seconds
            .unwrap_or(DEFAULT_TOKEN_EXPIRATION_SECONDS),
        audience: p.audience.clone(),
    };
    ObjectKey::new(
        Scope::of(pod),
        Kind::Token,
        &pod.metadata.namespace,
        &token_name(&spec),
    )
}

/// Which pods may see an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    /// Local files, for static pods.
    Local,
    /// The apiserver's, for API pods.
    Api,
}

impl Scope {
    pub fn of(pod: &api::Pod) -> Scope {
        if pod.is_static() {
            Scope::Local
        } else {
            Scope::Api
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub scope: Scope,
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
}

impl ObjectKey {
    pub fn new(scope: Scope, kind: Kind, namespace: &str, name: &str) -> Self {
        ObjectKey {
            scope,
            kind,
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind.as_str(), self.namespace, self.name)
    }
}

/// A ConfigMap or Secret with its values decoded (base64 undone, `stringData` merged).
#[derive(Clone, PartialEq, Eq)]
pub struct Object {
    pub key: ObjectKey,
    pub data: BTreeMap<String, Vec<u8>>,
    /// Where it came from, for log lines: a file path (with the document index) or "apiserver".
    pub origin: String,
}

impl fmt::Debug for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Object")
            .field("key", &self.key)
            .field("keys", &self.data.keys().collect::<Vec<_>>())
            .field("origin", &self.origin)
            .finish()
    }
}

/// A problem with one object; `field` is a path like `data.app.conf`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ObjectError {
    pub field: String,
    pub message: String,
}

impl fmt::Display for ObjectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// upstream `IsConfigMapKey`: at most 253 characters of `[-._a-zA-Z0-9]`, not `.` or `..`,
/// not starting with `..`.
pub(crate) fn is_valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 253
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
        && key != "."
        && !key.starts_with("..")
}

fn check_key(field: &str, key: &str, errs: &mut Vec<ObjectError>) {
    if !is_valid_key(key) {
        errs.push(ObjectError {
            field: format!("{field}[{key:?}]"),
            message: "a valid key must consist of alphanumeric characters, '-', '_' or '.' (at most 253, not starting with '..')".into(),
        });
    }
}

/// The name's format is the caller's to check (`manifest` for local files; the apiserver's
/// objects are valid): only its presence is checked here.
fn check_meta(meta: &api::ObjectMeta, errs: &mut Vec<ObjectError>) {
    if meta.name.is_empty() {
        errs.push(ObjectError {
            field: "metadata.name".into(),
            message: "required".into(),
        });
    }
}

fn namespace_of(meta: &api::ObjectMeta) -> &str {
    if meta.namespace.is_empty() {
        "default"
    } else {
        &meta.namespace
    }
}

/// upstream `ValidateConfigMap` (keys, a key in both `data` and `binaryData`, 1 MiB in total)
/// and the decoding of `binaryData`.
pub(crate) fn from_config_map(
    cm: &api::ConfigMap,
    scope: Scope,
    origin: &str,
) -> Result<Object, Vec<ObjectError>> {
    let mut errs = Vec::new();
    check_meta(&cm.metadata, &mut errs);
    let mut data = BTreeMap::new();
    for (k, v) in &cm.data {
        check_key("data", k, &mut errs);
        data.insert(k.clone(), v.clone().into_bytes());
    }
    for (k, v) in &cm.binary_data {
        check_key("binaryData", k, &mut errs);
        if cm.data.contains_key(k) {
            errs.push(ObjectError {
                field: format!("binaryData[{k:?}]"),
                message: "duplicate of a key in data".into(),
            });
        }
        match api::decode_base64(v) {
            Some(bytes) => {
                data.insert(k.clone(), bytes);
            }
            None => errs.push(ObjectError {
                field: format!("binaryData[{k:?}]"),
                message: "not valid base64".into(),
            }),
        }
    }
    check_size(&data, &mut errs);
    finish(errs, Kind::ConfigMap, scope, &cm.metadata, data, origin)
}

/// upstream `ValidateSecret` plus the apiserver's `stringData` merge (a key in both: the
/// `stringData` value wins).
pub(crate) fn from_secret(
    s: &api::Secret,
    scope: Scope,
    origin: &str,
) -> Result<Object, Vec<ObjectError>> {
    let mut errs = Vec::new();
    check_meta(&s.metadata, &mut errs);
    let mut data = BTreeMap::new();
    for (k, v) in &s.data {
        check_key("data", k, &mut errs);
        match api::decode_base64(v) {
            Some(bytes) => {
                data.insert(k.clone(), bytes);
            }
            // Never echo the value: it is a secret.
            None => errs.push(ObjectError {
                field: format!("data[{k:?}]"),
                message: "not valid base64 (use stringData for plain text)".into(),
            }),
        }
    }
    for (k, v) in &s.string_data {
        check_key("stringData", k, &mut errs);
        data.insert(k.clone(), v.clone().into_bytes());
    }
    check_size(&data, &mut errs);
    finish(errs, Kind::Secret, scope, &s.metadata, data, origin)
}

/// upstream: a ConfigMap or Secret holds at most 1 MiB (`MaxSecretSize`).
const MAX_OBJECT_BYTES: usize = 1024 * 1024;

fn check_size(data: &BTreeMap<String, Vec<u8>>, errs: &mut Vec<ObjectError>) {
    let total: usize = data.iter().map(|(k, v)| k.len() + v.len()).sum();
    if total > MAX_OBJECT_BYTES {
        errs.push(ObjectError {
            field: "data".into(),
            message: format!("{total} bytes in total, more than the limit of {MAX_OBJECT_BYTES}"),
        });
    }
}

fn finish(
    errs: Vec<ObjectError>,
    kind: Kind,
    scope: Scope,
    meta: &api::ObjectMeta,
    data: BTreeMap<String, Vec<u8>>,
    origin: &str,
) -> Result<Object, Vec<ObjectError>> {
    if !errs.is_empty() {
        return Err(errs);
    }
    Ok(Object {
        key: ObjectKey::new(scope, kind, namespace_of(meta), &meta.name),
        data,
        origin: origin.to_string(),
    })
}

/// The objects picolet knows, by key: the agent loop writes (one writer), syncs read. A
/// handle: clones share the store. The Services ride along (their own writer: the services
/// reflector, `services.rs`).
#[derive(Clone, Default)]
pub struct ConfigObjects {
    inner: Arc<RwLock<HashMap<ObjectKey, Arc<Object>>>>,
    services: services::Services,
}

impl fmt::Debug for ConfigObjects {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfigObjects")
            .field("len", &self.read().len())
            .finish()
    }
}

impl ConfigObjects {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<ObjectKey, Arc<Object>>> {
        self.inner.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn get(&self, key: &ObjectKey) -> Option<Arc<Object>> {
        self.read().get(key).cloned()
    }

    /// Replaces every object of `scope` with `objects`; returns the keys whose object was
    /// added, changed or removed.
    pub fn replace_scope(&self, scope: Scope, objects: Vec<Object>) -> BTreeSet<ObjectKey> {
        let mut map = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        let mut changed = BTreeSet::new();
        let mut new: HashMap<ObjectKey, Object> = HashMap::new();
        for o in objects.into_iter().filter(|o| o.key.scope == scope) {
            new.insert(o.key.clone(), o);
        }
        map.retain(|k, v| {
            if k.scope != scope {
                return true;
            }
            match new.get(k) {
                Some(n) if n.data == v.data => {
                    new.remove(k);
                    true
                }
                _ => {
                    changed.insert(k.clone());
                    false
                }
            }
        });
        for (k, o) in new {
            changed.insert(k.clone());
            map.insert(k, Arc::new(o));
        }
        changed
    }

    /// Sets or (`None`) removes one object; true if that changed anything.
    pub fn set(&self, key: &ObjectKey, object: Option<Object>) -> bool {
        let mut map = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        match object {
            Some(o) => {
                if map.get(key).is_some_and(|old| old.data == o.data) {
                    return false;
                }
                map.insert(key.clone(), Arc::new(o));
                true
            }
            None => map.remove(key).is_some(),
        }
    }

    pub fn with_services(mut self, services: services::Services) -> Self {
        self.services = services;
        self
    }

    pub fn services(&self) -> &services::Services {
        &self.services
    }

    pub fn len(&self) -> usize {
        self.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }
}

/// Every object `pod` references: volumes (configMap, secret, projected sources), env
/// `valueFrom` refs and `envFrom`, in the pod's scope and namespace.
pub(crate) fn references(pod: &api::Pod) -> BTreeSet<ObjectKey> {
    let mut out = BTreeSet::new();
    each_reference(pod, |key, _| {
        out.insert(key);
    });
    out
}

/// The objects a container waits for (kubelet: a missing ConfigMap or Secret that is not
/// `optional` keeps it in ContainerCreating or CreateContainerConfigError): the references
/// but the optional ones and `imagePullSecrets` (a missing one is a warning).
pub(crate) fn required_references(pod: &api::Pod) -> BTreeSet<ObjectKey> {
    let mut out = BTreeSet::new();
    each_reference(pod, |key, required| {
        if required {
            out.insert(key);
        }
    });
    out
}

/// Calls `f(key, required)` for each reference of `pod` (see [`required_references`]).
fn each_reference(pod: &api::Pod, mut f: impl FnMut(ObjectKey, bool)) {
    let scope = Scope::of(pod);
    let ns = pod.metadata.namespace.as_str();
    let key = |kind, name: &str| ObjectKey::new(scope, kind, ns, name);
    let required = |optional: Option<bool>| optional != Some(true);
    for s in &pod.spec.image_pull_secrets {
        f(key(Kind::Secret, &s.name), false);
    }
    for v in &pod.spec.volumes {
        if let Some(cm) = &v.config_map {
            f(key(Kind::ConfigMap, &cm.name), required(cm.optional));
        }
        if let Some(s) = &v.secret {
            f(key(Kind::Secret, &s.secret_name), required(s.optional));
        }
        if let Some(p) = &v.projected {
            for src in &p.sources {
                if let Some(cm) = &src.config_map {
                    f(key(Kind::ConfigMap, &cm.name), required(cm.optional));
                }
                if let Some(s) = &src.secret {
                    f(key(Kind::Secret, &s.name), required(s.optional));
                }
                if let Some(t) = &src.service_account_token {
                    f(token_key(pod, t), true);
                }
            }
        }
    }
    for c in pod.spec.init_containers.iter().chain(&pod.spec.containers) {
        for e in &c.env_from {
            if let Some(r) = &e.config_map_ref {
                f(key(Kind::ConfigMap, &r.name), required(r.optional));
            }
            if let Some(r) = &e.secret_ref {
                f(key(Kind::Secret, &r.name), required(r.optional));
            }
        }
        for e in &c.env {
            if let Some((kind, sel)) = env_key_ref(e) {
                f(key(kind, &sel.name), required(sel.optional));
            }
        }
    }
}

/// An env var's `valueFrom.configMapKeyRef` / `secretKeyRef`, if it has one.
pub(crate) fn env_key_ref(e: &api::EnvVar) -> Option<(Kind, api::KeySelector)> {
    let from = e.value_from.as_ref()?.as_object()?;
    let (kind, v) = if let Some(v) = from.get("configMapKeyRef") {
        (Kind::ConfigMap, v)
    } else if let Some(v) = from.get("secretKeyRef") {
        (Kind::Secret, v)
    } else {
        return None;
    };
    crate::api::from_value(v).ok().map(|sel| (kind, sel))
}

/// Cluster mode: the full set of API objects (ConfigMaps, Secrets, tokens) the object
/// manager holds for the keys the agent wants.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectsUpdate {
    pub objects: Vec<Object>,
}

/// Cluster mode: the agent says which API objects its pods reference (`wanted`), the object
/// manager answers with them (`updates`).
#[derive(Debug)]
pub struct ObjectChannels {
    pub wanted: tokio::sync::watch::Sender<std::collections::BTreeSet<ObjectKey>>,
    pub updates: tokio::sync::mpsc::Receiver<ObjectsUpdate>,
    /// The Services the reflector follows (kubelet: the service lister).
    pub services: services::Services,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm(name: &str, data: &[(&str, &str)]) -> api::ConfigMap {
        api::ConfigMap {
            metadata: api::ObjectMeta {
                name: name.into(),
                ..Default::default()
            },
            data: data
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn keys_are_validated_as_upstream() {
        for ok in ["a", "app.conf", "A-b_c.1", ".hidden", &"k".repeat(253)] {
            assert!(is_valid_key(ok), "{ok}");
        }
        for bad in ["", ".", "..", "..x", "a/b", "a b", "ü", &"k".repeat(254)] {
            assert!(!is_valid_key(bad), "{bad}");
        }
    }

    #[test]
    fn config_maps_decode_binary_data_and_default_the_namespace() {
        let mut c = cm("web", &[("index.html", "<h1>hi</h1>")]);
        c.binary_data.insert("logo".into(), "AAEC".into());
        let o = from_config_map(&c, Scope::Local, "f.yaml").unwrap();
        assert_eq!(
            o.key,
            ObjectKey::new(Scope::Local, Kind::ConfigMap, "default", "web")
        );
        assert_eq!(o.data["index.html"], b"<h1>hi</h1>");
        assert_eq!(o.data["logo"], vec![0, 1, 2]);

        let mut bad = cm("", &[("a/b", "x")]);
        bad.binary_data.insert("a/b".into(), "!!".into());
        let errs = from_config_map(&bad, Scope::Local, "f").unwrap_err();
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "metadata.name",
                "data[\"a/b\"]",
                "binaryData[\"a/b\"]",
                "binaryData[\"a/b\"]",
                "binaryData[\"a/b\"]"
            ]
        );
    }

    #[test]
    fn secrets_merge_string_data_and_never_show_values() {
        let s = api::Secret {
            metadata: api::ObjectMeta {
                name: "db".into(),
                namespace: "apps".into(),
                ..Default::default()
            },
            data: [("password".to_string(), "czNjcmV0".to_string())].into(),
            string_data: [("user".to_string(), "admin".to_string())].into(),
            ..Default::default()
        };
        let o = from_secret(&s, Scope::Api, "apiserver").unwrap();
        assert_eq!(o.data["password"], b"s3cret");
        assert_eq!(o.data["user"], b"admin");
        let shown = format!("{o:?}");
        assert!(
            !shown.contains("s3cret") && !shown.contains("admin"),
            "{shown}"
        );

        let mut bad = s.clone();
        bad.data.insert("k".into(), "not base64 s3cret!".into());
        let errs = from_secret(&bad, Scope::Api, "x").unwrap_err();
        assert!(errs.iter().all(|e| !e.to_string().contains("s3cret")));
    }

    #[test]
    fn the_store_reports_what_changed_per_scope() {
        let store = ConfigObjects::default();
        let a = from_config_map(&cm("a", &[("k", "1")]), Scope::Local, "f").unwrap();
        let b = from_config_map(&cm("b", &[("k", "1")]), Scope::Local, "f").unwrap();
        let api_a = from_config_map(&cm("a", &[("k", "1")]), Scope::Api, "apiserver").unwrap();
        assert!(store.set(&api_a.key.clone(), Some(api_a.clone())));
        let changed = store.replace_scope(Scope::Local, vec![a.clone(), b.clone()]);
        assert_eq!(changed, [a.key.clone(), b.key.clone()].into());
        // Same again: nothing changed; the API object is untouched.
        assert!(
            store
                .replace_scope(Scope::Local, vec![a.clone(), b.clone()])
                .is_empty()
        );
        let a2 = from_config_map(&cm("a", &[("k", "2")]), Scope::Local, "f").unwrap();
        assert_eq!(
            store.replace_scope(Scope::Local, vec![a2]),
            [a.key.clone(), b.key.clone()].into()
        );
        assert_eq!(store.get(&a.key).unwrap().data["k"], b"2");
        assert!(store.get(&b.key).is_none());
        assert!(store.get(&api_a.key).is_some());
        assert!(!store.set(&api_a.key.clone(), Some(api_a.clone())));
        assert!(store.set(&api_a.key, None));
    }

    #[test]
    fn references_cover_volumes_projections_and_env() {
        let pod: api::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns",
                         "annotations": {"kubernetes.io/config.source": "file"}},
            "spec": {
                "volumes": [
                    {"name": "a", "configMap": {"name": "cm1"}},
                    {"name": "b", "secret": {"secretName": "s1"}},
                    {"name": "c", "projected": {"sources": [
                        {"configMap": {"name": "cm2"}}, {"secret": {"name": "s2"}},
                        {"downwardAPI": {"items": []}}]}}
                ],
                "initContainers": [{"name": "i", "image": "x",
                    "envFrom": [{"configMapRef": {"name": "cm3"}}]}],
                "containers": [{"name": "c", "image": "x",
                    "envFrom": [{"secretRef": {"name": "s3"}, "prefix": "P_"}],
                    "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cm4", "key": "k"}}},
                            {"name": "B", "valueFrom": {"secretKeyRef": {"name": "s4", "key": "k"}}},
                            {"name": "C", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}]
            }
        }))
        .unwrap();
        let got: Vec<String> = references(&pod).iter().map(ToString::to_string).collect();
        assert_eq!(
            got,
            [
                "ConfigMap ns/cm1",
                "ConfigMap ns/cm2",
                "ConfigMap ns/cm3",
                "ConfigMap ns/cm4",
                "Secret ns/s1",
                "Secret ns/s2",
                "Secret ns/s3",
                "Secret ns/s4"
            ]
        );
        assert!(references(&pod).iter().all(|k| k.scope == Scope::Local));
    }
}
