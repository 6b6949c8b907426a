//! Static pod manifests: bytes → a defaulted, validated `v1/Pod` with its static identity.
//!
//! Owns: parsing one manifest (YAML or JSON), the apiVersion/kind check, unknown-field
//! detection, the apiserver/kubelet defaults picolet relies on, validation with messages that
//! name the field path, and static pod identity (name suffix, UID hash, config annotations).
//!
//! Must never: do I/O, read the clock (the caller passes the "seen" stamp) or log — callers
//! decide what to log; every function here is pure and table-tested.
//!
//! Pipeline of [`load`] (kubelet: `config/common.go` `tryDecodeSinglePod`):
//! bytes → [`prescan`] (nesting and size limits, linear) → `serde_json::Value` → apiVersion/kind check → typed [`Pod`] (through
//! `api::decode_pod`, so a type error names its path) → [`make_static`] →
//! [`apply_defaults`] → [`validate`].
//!
//! Format notes:
//! - JSON when the first non-space byte is `{`, else YAML. YAML goes through
//!   `serde_yaml_ng::Value` so merge keys (`<<: *anchor`) work as they do upstream.
//! - [`load`] (the http source): one pod per manifest. Empty YAML documents (`---` with
//!   nothing after it, comment-only documents) are ignored; two non-empty documents are an
//!   error. (Upstream silently reads only the first document; we would rather say so.)
//! - [`load_documents`] (the static pod directory): any number of `---`-separated documents,
//!   each a Pod, a ConfigMap or a Secret, each handled as if it were its own file.
//! - serde_yaml_ng implements YAML 1.2: `yes`/`no`/`on`/`off` are *strings*, not booleans as
//!   in the YAML 1.1 parser upstream uses, and `0755` is the string `"0755"`. A boolean field
//!   written `yes` is therefore a type error; its message says to write `true`/`false`.
//!   Numbers for quantities (`cpu: 1`, `cpu: 0.5`) are fine ([`api::Quantity`] is untagged).
//! - Unknown fields do not fail a pod (real manifests carry fields picolet does not model);
//!   they are returned so the caller can log them at debug level. Detection compares the
//!   input document with the re-serialised typed pod; an unknown field whose value is empty
//!   (`null`, `false`, `""`, `[]`, `{}`) is indistinguishable from a skipped default and is
//!   not reported.
//!
//! Static pod UID: unless the manifest sets `metadata.uid`, a 128-bit FNV-1a hash (32 hex
//! digits) over a canonical encoding of the *user's document* (object keys sorted, numbers
//! by value), the source, the node name and the source path. Hashing the document rather
//! than our typed model keeps UIDs — and so running pods — stable when picolet's model
//! grows fields (upstream bug k8s#67537); the hash is fixed here, not std's `DefaultHasher`,
//! so it is the same on every platform and picolet version. Changing it restarts every
//! static pod on upgrade: don't.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use serde::Deserialize;
use serde_json::Value;

use crate::api::{self, Container, EmptyDirVolumeSource, Pod, PodPhase, PodStatus, RestartPolicy};
use crate::clock::{self, UnixNanos};
use crate::config_data;

pub(crate) mod fields;
pub(crate) mod prescan;

/// kubelet: `DefaultTerminationGracePeriodSeconds`.
pub(crate) const DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS: i64 = 30;
/// kubelet: `TerminationMessagePathDefault`.
pub(crate) const DEFAULT_TERMINATION_MESSAGE_PATH: &str = "/dev/termination-log";
/// The source names of the `kubernetes.io/config.source` annotation.
pub const SOURCE_FILE: &str = "file";
pub(crate) const SOURCE_HTTP: &str = "http";

/// One problem with one field; `field` is a path like `spec.containers[0].image`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("the file is empty (expected one v1 Pod in YAML or JSON)")]
    Empty,
    /// Refused before parsing: the document is far deeper or larger than any Pod.
    #[error("{0}")]
    TooComplex(prescan::Limit),
    #[error("invalid JSON: {0}")]
    Json(#[source] serde_json::Error),
    #[error("invalid YAML: {0}")]
    Yaml(#[source] serde_yaml_ng::Error),
    #[error("the YAML cannot be read as JSON: {0}")]
    YamlNotJson(#[source] serde_json::Error),
    #[error("found {documents} YAML documents: picolet reads exactly one pod per file")]
    MultipleDocuments { documents: usize },
    #[error("expected a v1 Pod object at the top level, found {found}")]
    NotAnObject { found: &'static str },
    #[error("apiVersion: {}", expected("\"v1\"", found))]
    ApiVersion { found: Option<String> },
    #[error("kind: {}; picolet runs static pods only", expected("\"Pod\"", found))]
    Kind { found: Option<String> },
    /// A document of the static pod directory that is not a Pod, ConfigMap or Secret.
    #[error(
        "kind: {}; the static pod directory holds Pods, ConfigMaps and Secrets",
        expected("\"Pod\", \"ConfigMap\" or \"Secret\"", found)
    )]
    DocumentKind { found: Option<String> },
    /// A field has the wrong type or shape (from serde), e.g.
    /// `spec.containers[0].ports[0].containerPort: invalid type: string "http", expected i32`.
    #[error("{field}: {message}")]
    Type { field: String, message: String },
    /// Validation failed; every problem names its field.
    #[error("{}", join_errors(.0))]
    Invalid(Vec<FieldError>),
    /// Any of the above, in a file (or at a URL): `<file>: <problem>`. When the pod parsed
    /// but is invalid, fields picolet does not know are listed too: they are often the typo
    /// behind the problem (`imag:` → `image: required`).
    #[error("{file}: {error}{}", unknown_hint(unknown_fields))]
    InFile {
        file: String,
        error: Box<ManifestError>,
        unknown_fields: Vec<String>,
    },
}

impl ManifestError {
    /// The error without its file context.
    pub fn inner(&self) -> &ManifestError {
        match self {
            ManifestError::InFile { error, .. } => error.inner(),
            other => other,
        }
    }

    /// The field paths this error names (empty for syntax errors).
    pub fn fields(&self) -> Vec<&str> {
        match self.inner() {
            ManifestError::Type { field, .. } => vec![field.as_str()],
            ManifestError::Invalid(errs) => errs.iter().map(|e| e.field.as_str()).collect(),
            ManifestError::ApiVersion { .. } => vec!["apiVersion"],
            ManifestError::Kind { .. } | ManifestError::DocumentKind { .. } => vec!["kind"],
            _ => Vec::new(),
        }
    }
}

fn expected(want: &str, found: &Option<String>) -> String {
    match found {
        None => format!("required (must be {want})"),
        Some(found) => format!("must be {want}, found {found}"),
    }
}

fn unknown_hint(fields: &[String]) -> String {
    if fields.is_empty() {
        String::new()
    } else {
        format!(" (fields picolet does not know: {})", fields.join(", "))
    }
}

fn join_errors(errs: &[FieldError]) -> String {
    let parts: Vec<String> = errs.iter().map(FieldError::to_string).collect();
    parts.join("; ")
}

/// A parsed (not yet defaulted or validated) manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    pub pod: Pod,
    /// The user's document, as read: the input of the static pod UID hash.
    pub raw: Value,
    /// Paths of fields picolet does not model, e.g. `spec.tolerations`.
    pub unknown_fields: Vec<String>,
}

/// A manifest turned into a static pod, ready for a source snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    pub pod: Pod,
    pub unknown_fields: Vec<String>,
}

/// Parses one manifest into a [`Pod`] (no defaults, no validation).
pub fn parse(bytes: &[u8]) -> Result<Pod, ManifestError> {
    parse_document(bytes).map(|p| p.pod)
}

/// Parses one manifest, keeping the raw document and the unknown fields.
pub fn parse_document(bytes: &[u8]) -> Result<Parsed, ManifestError> {
    parse_value(to_value(bytes)?)
}

fn parse_value(raw: Value) -> Result<Parsed, ManifestError> {
    check_type_meta(&raw)?;
    let pod: Pod = api::decode_pod(&raw).map_err(type_error)?;
    let unknown_fields = unknown_fields(&raw, &pod);
    Ok(Parsed {
        pod,
        raw,
        unknown_fields,
    })
}

/// Parse → static identity → defaults → validation; errors carry `path` as their file.
/// `path` is also the source path hashed into the UID.
pub fn load(
    path: &str,
    bytes: &[u8],
    node_name: &str,
    source: &str,
    seen: UnixNanos,
) -> Result<Loaded, ManifestError> {
    load_inner(path, bytes, node_name, source, seen).map_err(|(error, unknown_fields)| {
        ManifestError::InFile {
            file: path.to_string(),
            error: Box::new(error),
            unknown_fields,
        }
    })
}

fn load_inner(
    path: &str,
    bytes: &[u8],
    node_name: &str,
    source: &str,
    seen: UnixNanos,
) -> Result<Loaded, (ManifestError, Vec<String>)> {
    let raw = to_value(bytes).map_err(|e| (e, Vec::new()))?;
    load_value(path, path, raw, node_name, source, seen)
}

/// `path`: the source path hashed into the UID; `origin`: the file or URL it came from.
fn load_value(
    path: &str,
    origin: &str,
    raw: Value,
    node_name: &str,
    source: &str,
    seen: UnixNanos,
) -> Result<Loaded, (ManifestError, Vec<String>)> {
    let Parsed {
        pod,
        raw,
        unknown_fields,
    } = parse_value(raw).map_err(|e| (e, Vec::new()))?;
    // kubelet: static pods need a name ("name is required" before generatePodName).
    if pod.metadata.name.is_empty() {
        let message = if pod.metadata.generate_name.is_empty() {
            "required"
        } else {
            "required (static pods cannot use metadata.generateName)"
        };
        let error = ManifestError::Invalid(vec![FieldError::new("metadata.name", message)]);
        return Err((error, unknown_fields));
    }
    let mut pod = make_static(pod, &raw, node_name, source, path, seen);
    pod.origin = Some(origin.to_string());
    apply_defaults(&mut pod);
    if let Err(error) = validate(&pod) {
        return Err((error, unknown_fields));
    }
    Ok(Loaded {
        pod,
        unknown_fields,
    })
}

/// One document of a static pod file: a pod, or a local ConfigMap or Secret.
#[derive(Debug, Clone, PartialEq)]
pub enum Document {
    Pod(Box<Loaded>),
    Object(config_data::Object),
}

/// The documents of a file in the static pod directory (`---`-separated YAML, or one JSON
/// object): each is a Pod, a ConfigMap or a Secret, and each is handled as if it were a file
/// of its own — a broken one is named with its index (`<file> (document 2): …`) and does not
/// hide the others. The outer error is for the file as a whole (empty, too complex, not
/// JSON). A pod's static UID hashes `path` for the file's first pod and `path#<n>` for the
/// n-th further one, so adding a ConfigMap to a pod's file does not restart the pod.
pub fn load_documents(
    path: &str,
    bytes: &[u8],
    node_name: &str,
    source: &str,
    seen: UnixNanos,
) -> Result<Vec<Result<Document, ManifestError>>, ManifestError> {
    let in_file = |file: String, error, unknown_fields| ManifestError::InFile {
        file,
        error: Box::new(error),
        unknown_fields,
    };
    let values = documents(bytes).map_err(|e| in_file(path.to_string(), e, Vec::new()))?;
    let several = values.len() > 1;
    let mut out = Vec::new();
    let mut pods = 0;
    for (index, value) in values {
        let file = if several {
            format!("{path} (document {index})")
        } else {
            path.to_string()
        };
        let value = match value {
            Ok(v) => v,
            Err(e) => {
                out.push(Err(in_file(file, e, Vec::new())));
                continue;
            }
        };
        if value.get("apiVersion").and_then(Value::as_str) != Some("v1") {
            let error = ManifestError::ApiVersion {
                found: value.get("apiVersion").map(Value::to_string),
            };
            out.push(Err(in_file(file, error, Vec::new())));
            continue;
        }
        let doc = match value.get("kind").and_then(Value::as_str) {
            Some("ConfigMap" | "Secret") => load_object(&file, value)
                .map(Document::Object)
                .map_err(|e| in_file(file.clone(), e, Vec::new())),
            Some("Pod") => {
                let source_path = if pods == 0 {
                    path.to_string()
                } else {
                    format!("{path}#{pods}")
                };
                pods += 1;
                load_value(&source_path, path, value, node_name, source, seen)
                    .map(|l| Document::Pod(Box::new(l)))
                    .map_err(|(e, unknown)| in_file(file.clone(), e, unknown))
            }
            _ => Err(in_file(
                file.clone(),
                ManifestError::DocumentKind {
                    found: value.get("kind").map(Value::to_string),
                },
                Vec::new(),
            )),
        };
        out.push(doc);
    }
    Ok(out)
}

/// A local ConfigMap or Secret document: `apiVersion: v1`, a valid name and namespace
/// (`default` when unset), valid keys and base64.
fn load_object(origin: &str, raw: Value) -> Result<config_data::Object, ManifestError> {
    if raw.get("apiVersion").and_then(Value::as_str) != Some("v1") {
        return Err(ManifestError::ApiVersion {
            found: raw.get("apiVersion").map(Value::to_string),
        });
    }
    let kind = raw
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let scope = config_data::Scope::Local;
    let (meta, result) = if kind == "Secret" {
        // A Secret's values never reach a message: its decode errors name the key and the
        // expected type only (they are logged, printed by `validate`, served as events).
        let s: api::Secret = api::from_value(&raw).map_err(|e| type_error(e.redacted()))?;
        (
            s.metadata.clone(),
            config_data::from_secret(&s, scope, origin),
        )
    } else {
        let c: api::ConfigMap = api::from_value(&raw).map_err(type_error)?;
        (
            c.metadata.clone(),
            config_data::from_config_map(&c, scope, origin),
        )
    };
    let mut errs = Vec::new();
    if !meta.name.is_empty() && !is_dns1123_subdomain(&meta.name) {
        errs.push(FieldError::new(
            "metadata.name",
            format!(
                "{:?} must be a DNS-1123 subdomain (lower case letters, digits, '-', '.')",
                meta.name
            ),
        ));
    }
    if !meta.namespace.is_empty() && !is_dns1123_label(&meta.namespace) {
        errs.push(FieldError::new(
            "metadata.namespace",
            format!("{:?} must be a DNS-1123 label", meta.namespace),
        ));
    }
    match result {
        Ok(o) if errs.is_empty() => Ok(o),
        Ok(_) => Err(ManifestError::Invalid(errs)),
        Err(object_errs) => {
            errs.extend(
                object_errs
                    .into_iter()
                    .map(|e| FieldError::new(e.field, e.message)),
            );
            Err(ManifestError::Invalid(errs))
        }
    }
}

// ---------------------------------------------------------------------------------------
// Parsing

/// The documents of a file, numbered from 1 (empty ones are skipped but counted). A YAML
/// syntax error ends the stream: the documents before it are kept.
/// Numbered documents, each parsed or not.
type Documents = Vec<(usize, Result<Value, ManifestError>)>;

fn documents(bytes: &[u8]) -> Result<Documents, ManifestError> {
    let Some(first) = bytes.iter().find(|b| !b.is_ascii_whitespace()) else {
        return Err(ManifestError::Empty);
    };
    prescan::check(bytes).map_err(ManifestError::TooComplex)?;
    if *first == b'{' {
        let value = serde_json::from_slice::<Value>(bytes).map_err(ManifestError::Json)?;
        return Ok(vec![(1, Ok(value))]);
    }
    let mut out = Vec::new();
    for (i, document) in serde_yaml_ng::Deserializer::from_slice(bytes).enumerate() {
        let index = i + 1;
        let mut value = match serde_yaml_ng::Value::deserialize(document) {
            Ok(v) => v,
            Err(e) => {
                out.push((index, Err(ManifestError::Yaml(e))));
                break;
            }
        };
        if value.is_null() {
            continue;
        }
        let converted = value
            .apply_merge()
            .map_err(ManifestError::Yaml)
            .and_then(|()| serde_json::to_value(value).map_err(ManifestError::YamlNotJson))
            .and_then(|v| {
                if v.is_object() {
                    Ok(v)
                } else {
                    Err(ManifestError::NotAnObject {
                        found: type_name(&v),
                    })
                }
            });
        out.push((index, converted));
    }
    if out.is_empty() {
        return Err(ManifestError::Empty);
    }
    Ok(out)
}

fn to_value(bytes: &[u8]) -> Result<Value, ManifestError> {
    let Some(first) = bytes.iter().find(|b| !b.is_ascii_whitespace()) else {
        return Err(ManifestError::Empty);
    };
    // Bounded cost whatever the bytes: the parsers are not linear in nesting (see prescan).
    prescan::check(bytes).map_err(ManifestError::TooComplex)?;
    let value = if *first == b'{' {
        serde_json::from_slice::<Value>(bytes).map_err(ManifestError::Json)?
    } else {
        let mut docs = Vec::new();
        for document in serde_yaml_ng::Deserializer::from_slice(bytes) {
            let value = serde_yaml_ng::Value::deserialize(document).map_err(ManifestError::Yaml)?;
            if !value.is_null() {
                docs.push(value);
            }
        }
        let mut doc = match docs.len() {
            0 => return Err(ManifestError::Empty),
            1 => docs.remove(0),
            documents => return Err(ManifestError::MultipleDocuments { documents }),
        };
        doc.apply_merge().map_err(ManifestError::Yaml)?;
        serde_json::to_value(doc).map_err(ManifestError::YamlNotJson)?
    };
    if !value.is_object() {
        return Err(ManifestError::NotAnObject {
            found: type_name(&value),
        });
    }
    Ok(value)
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn check_type_meta(raw: &Value) -> Result<(), ManifestError> {
    let found = |key: &str| raw.get(key).map(Value::to_string);
    if raw.get("apiVersion").and_then(Value::as_str) != Some("v1") {
        return Err(ManifestError::ApiVersion {
            found: found("apiVersion"),
        });
    }
    if raw.get("kind").and_then(Value::as_str) != Some("Pod") {
        return Err(ManifestError::Kind {
            found: found("kind"),
        });
    }
    Ok(())
}

fn type_error(err: api::DecodeError) -> ManifestError {
    let field = err.field();
    let mut message = err.message().to_string();
    if message.contains("untagged enum Quantity") {
        message = "expected a quantity such as 500m, 1, 0.5 or 64Mi".to_string();
    } else if message.ends_with("expected a boolean") && yaml11_bool(&message) {
        message.push_str(" (YAML 1.2: yes/no/on/off are strings; write true or false)");
    }
    ManifestError::Type { field, message }
}

/// `invalid type: string "yes", expected a boolean` with a YAML 1.1 boolean word.
fn yaml11_bool(message: &str) -> bool {
    const WORDS: [&str; 8] = ["y", "yes", "n", "no", "on", "off", "true", "false"];
    message
        .strip_prefix("invalid type: string \"")
        .and_then(|rest| rest.split_once('"'))
        .is_some_and(|(word, _)| WORDS.contains(&word.to_ascii_lowercase().as_str()))
}

fn unknown_fields(raw: &Value, pod: &Pod) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(model) = serde_json::to_value(pod) {
        walk_unknown(raw, &model, "", &mut out);
    }
    affinity_not_read(pod, &mut out);
    out
}

/// `spec.affinity` is kept whole (a JSON value) but only its required node affinity is read:
/// the rest — pod (anti-)affinity, preferred terms — is reported as the other fields picolet
/// does not read (ignored on purpose, `validate` lists it), not silently kept.
fn affinity_not_read(pod: &Pod, out: &mut Vec<String>) {
    const READ: &str = "requiredDuringSchedulingIgnoredDuringExecution";
    let Some(Value::Object(affinity)) = &pod.spec.affinity else {
        return;
    };
    for (key, value) in affinity {
        match (key.as_str(), value) {
            (_, v) if is_empty_value(v) => {}
            ("nodeAffinity", Value::Object(node)) => out.extend(
                node.iter()
                    .filter(|(k, v)| *k != READ && !is_empty_value(v))
                    .map(|(k, _)| format!("spec.affinity.nodeAffinity.{k}")),
            ),
            _ => out.push(format!("spec.affinity.{key}")),
        }
    }
}

fn walk_unknown(input: &Value, model: &Value, path: &str, out: &mut Vec<String>) {
    match (input, model) {
        (Value::Object(input), Value::Object(model)) => {
            for (key, value) in input {
                let field = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match model.get(key) {
                    Some(m) => walk_unknown(value, m, &field, out),
                    None if is_empty_value(value) => {}
                    None => out.push(field),
                }
            }
        }
        (Value::Array(input), Value::Array(model)) => {
            for (i, (a, b)) in input.iter().zip(model).enumerate() {
                walk_unknown(a, b, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

fn is_empty_value(v: &Value) -> bool {
    match v {
        Value::Null | Value::Bool(false) => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

// ---------------------------------------------------------------------------------------
// Defaults

/// The defaults the apiserver and kubelet apply to a pod (kubelet-behaviour §1, §7;
/// upstream `pkg/apis/core/v1/defaults.go`). Idempotent.
pub fn apply_defaults(pod: &mut Pod) {
    if pod.metadata.namespace.is_empty() {
        pod.metadata.namespace = "default".to_string();
    }
    let spec = &mut pod.spec;
    spec.restart_policy.get_or_insert(RestartPolicy::Always);
    spec.termination_grace_period_seconds
        .get_or_insert(DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS);
    spec.dns_policy
        .get_or_insert_with(|| "ClusterFirst".to_string());
    let host_network = spec.host_network;
    for c in spec
        .init_containers
        .iter_mut()
        .chain(spec.containers.iter_mut())
    {
        default_container(c, host_network);
    }
    default_pod_requests(pod);
    let spec = &mut pod.spec;
    for v in &mut spec.volumes {
        if let Some(hp) = &mut v.host_path {
            // defaults: SetDefaults_HostPathVolumeSource (HostPathUnset)
            hp.type_.get_or_insert_with(String::new);
        }
        // defaults: SetDefaults_ImageVolumeSource — as a container's imagePullPolicy.
        if let Some(iv) = &mut v.image
            && iv.pull_policy.is_none()
            && !iv.reference.is_empty()
        {
            iv.pull_policy = Some(default_pull_policy(&iv.reference));
        }
        // defaults: SetDefaults_Volume — a volume with no source is an emptyDir.
        if v.host_path.is_none()
            && v.empty_dir.is_none()
            && v.config_map.is_none()
            && v.secret.is_none()
            && v.downward_api.is_none()
            && v.projected.is_none()
            && v.csi.is_none()
            && v.image.is_none()
            && v.other.is_empty()
        {
            v.empty_dir = Some(EmptyDirVolumeSource::default());
        }
    }
}

/// defaults: `defaultPodRequests` — with pod-level limits, a pod-level request of cpu or
/// memory left out is the containers' aggregated request of it when they make one, else the
/// pod-level limit. Nothing without pod-level limits.
fn default_pod_requests(pod: &mut Pod) {
    let Some(r) = &pod.spec.resources else {
        return;
    };
    if r.limits.is_empty() {
        return;
    }
    let mut add: Vec<(String, crate::api::Quantity)> = Vec::new();
    for name in crate::qos::POD_LEVEL_RESOURCES {
        if r.requests.contains_key(name) {
            continue;
        }
        let aggregated = crate::qos::container_requests(pod, name);
        let q = if aggregated > 0 {
            crate::api::Quantity::Str(if name == "cpu" {
                format!("{aggregated}m")
            } else {
                aggregated.to_string()
            })
        } else if let Some(limit) = r.limits.get(name) {
            limit.clone()
        } else {
            continue;
        };
        add.push((name.to_string(), q));
    }
    if let Some(r) = &mut pod.spec.resources {
        r.requests.extend(add);
    }
}

fn default_container(c: &mut Container, host_network: bool) {
    if c.image_pull_policy.is_none() && !c.image.is_empty() {
        c.image_pull_policy = Some(default_pull_policy(&c.image));
    }
    for p in &mut c.ports {
        p.protocol.get_or_insert_with(|| "TCP".to_string());
        // defaults: defaultHostNetworkPorts
        if host_network && p.host_port.unwrap_or(0) == 0 {
            p.host_port = Some(p.container_port);
        }
    }
    c.termination_message_path
        .get_or_insert_with(|| DEFAULT_TERMINATION_MESSAGE_PATH.to_string());
    c.termination_message_policy
        .get_or_insert_with(|| "File".to_string());
}

pub use crate::api::{default_pull_policy, image_tag_and_digest};

// ---------------------------------------------------------------------------------------
// Validation

/// Checks a (defaulted) pod; returns every problem found, each naming its field path
/// (upstream: `validation.ValidatePod`, restricted to what picolet acts on).
pub fn validate(pod: &Pod) -> Result<(), ManifestError> {
    let mut errs = Vec::new();
    validate_into(pod, &mut errs);
    if errs.is_empty() {
        Ok(())
    } else {
        Err(ManifestError::Invalid(errs))
    }
}

const SUBDOMAIN_RULE: &str = "must be a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters)";
const LABEL_RULE: &str = "must be a DNS-1123 label (lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters)";

fn validate_into(pod: &Pod, errs: &mut Vec<FieldError>) {
    validate_pod_metadata(&pod.metadata, errs);
    validate_pod_spec_fields(&pod.spec, errs);
    let volumes = validate_volumes(pod, errs);
    validate_pod_resources(pod, errs);
    validate_host_users(&pod.spec, errs);
    validate_containers(&pod.spec, &volumes, errs);
}

/// validation: `ValidateObjectMeta` — the name a DNS-1123 subdomain, the namespace (when
/// given) a DNS-1123 label.
fn validate_pod_metadata(meta: &api::ObjectMeta, errs: &mut Vec<FieldError>) {
    if meta.name.is_empty() {
        errs.push(FieldError::new("metadata.name", "required"));
    } else if !is_dns1123_subdomain(&meta.name) {
        errs.push(FieldError::new(
            "metadata.name",
            format!("{:?} {SUBDOMAIN_RULE}", meta.name),
        ));
    }
    if !meta.namespace.is_empty() && !is_dns1123_label(&meta.namespace) {
        errs.push(FieldError::new(
            "metadata.namespace",
            format!("{:?} {LABEL_RULE}", meta.namespace),
        ));
    }
}

/// The spec's own scalar fields: at least one container, the grace period and active
/// deadline in range, a known `dnsPolicy` (and `dnsConfig` with `None`).
fn validate_pod_spec_fields(spec: &api::PodSpec, errs: &mut Vec<FieldError>) {
    if spec.containers.is_empty() {
        errs.push(FieldError::new(
            "spec.containers",
            "at least one container is required",
        ));
    }
    if let Some(t) = spec.termination_grace_period_seconds
        && t < 0
    {
        errs.push(FieldError::new(
            "spec.terminationGracePeriodSeconds",
            format!("must be >= 0, found {t}"),
        ));
    }
    if let Some(t) = spec.active_deadline_seconds
        && t <= 0
    {
        errs.push(FieldError::new(
            "spec.activeDeadlineSeconds",
            format!("must be > 0, found {t}"),
        ));
    }
    if let Some(dns) = &spec.dns_policy {
        match dns.as_str() {
            "ClusterFirst" | "ClusterFirstWithHostNet" | "Default" => {}
            "None" if spec.dns_config.is_none() => errs.push(FieldError::new(
                "spec.dnsConfig",
                "required when dnsPolicy is None",
            )),
            "None" => {}
            other => errs.push(FieldError::new(
                "spec.dnsPolicy",
                format!(
                    "unsupported value {other:?} (supported: ClusterFirst, ClusterFirstWithHostNet, Default, None)"
                ),
            )),
        }
    }
}

/// validation: `validateHostUsers` — a pod user namespace with none of the host's others.
fn validate_host_users(spec: &api::PodSpec, errs: &mut Vec<FieldError>) {
    if spec.host_users == Some(false) {
        for (set, field) in [
            (spec.host_network, "spec.hostNetwork"),
            (spec.host_pid, "spec.hostPID"),
            (spec.host_ipc, "spec.hostIPC"),
        ] {
            if set {
                errs.push(FieldError::new(
                    field,
                    "forbidden when spec.hostUsers is false",
                ));
            }
        }
    }
}

/// validation: `validateInitContainers` and `validateContainers` — each container in
/// turn (init containers first), container names unique across both lists.
fn validate_containers(
    spec: &api::PodSpec,
    volumes: &HashMap<&str, usize>,
    errs: &mut Vec<FieldError>,
) {
    let mut names: HashMap<&str, String> = HashMap::new();
    let all = spec
        .init_containers
        .iter()
        .enumerate()
        .map(|(i, c)| (format!("spec.initContainers[{i}]"), c))
        .chain(
            spec.containers
                .iter()
                .enumerate()
                .map(|(i, c)| (format!("spec.containers[{i}]"), c)),
        );
    for (path, c) in all {
        if !c.name.is_empty() && is_dns1123_label(&c.name) {
            if let Some(first) = names.get(c.name.as_str()) {
                errs.push(FieldError::new(
                    format!("{path}.name"),
                    format!("duplicate container name {:?} (also {first})", c.name),
                ));
            } else {
                names.insert(&c.name, path.clone());
            }
        }
        validate_container(&path, c, spec.host_network, volumes, errs);
    }
}

/// validation: `validatePodResources` and `validatePodResourceConsistency` — pod-level
/// resources name only cpu and memory, with valid quantities, requests at most the limits;
/// the pod-level request at least the containers' aggregated request, and no container
/// limit above the pod-level limit.
fn validate_pod_resources(pod: &Pod, errs: &mut Vec<FieldError>) {
    let Some(r) = &pod.spec.resources else {
        return;
    };
    let bad = validate_pod_resource_values(r, errs);
    if r.claims.is_some() {
        errs.push(FieldError::new(
            "spec.resources.claims",
            "claims are not supported in pod-level resources",
        ));
    }
    if bad {
        return;
    }
    for name in crate::qos::POD_LEVEL_RESOURCES {
        validate_pod_resource_consistency(pod, name, errs);
    }
}

/// validation: `validatePodResources` — every pod-level limit and request names cpu or
/// memory and holds a non-negative quantity; true when one does not (then the consistency
/// checks are skipped).
fn validate_pod_resource_values(r: &api::ResourceRequirements, errs: &mut Vec<FieldError>) -> bool {
    let supported = crate::qos::POD_LEVEL_RESOURCES;
    let mut bad = false;
    for (which, map) in [("limits", &r.limits), ("requests", &r.requests)] {
        for (name, q) in map {
            let field = format!("spec.resources.{which}.{name}");
            if !supported.contains(&name.as_str()) {
                errs.push(FieldError::new(
                    field,
                    format!("unsupported resource {name:?} (pod-level resources: cpu, memory)"),
                ));
                bad = true;
            } else if q.scaled(crate::qos::scale_of(name)).is_none_or(|v| v < 0) {
                errs.push(FieldError::new(
                    field,
                    format!(
                        "{:?}: expected a quantity such as 500m, 1, 0.5 or 64Mi, not negative",
                        q.as_string()
                    ),
                ));
                bad = true;
            }
        }
    }
    bad
}

/// A pod-level quantity as the messages show it: cpu in millicores, memory in bytes.
fn show_quantity(name: &str, v: i64) -> String {
    if name == "cpu" {
        format!("{v}m")
    } else {
        v.to_string()
    }
}

/// validation: `validatePodResourceConsistency` for one resource — the pod-level request
/// at most its limit and at least the containers' aggregated request, and no container
/// limit above the pod-level limit.
fn validate_pod_resource_consistency(pod: &Pod, name: &str, errs: &mut Vec<FieldError>) {
    let show = show_quantity;
    let request = crate::qos::pod_level(pod, false, name);
    let limit = crate::qos::pod_level(pod, true, name);
    if let (Some(req), Some(lim)) = (request, limit)
        && req > lim
    {
        errs.push(FieldError::new(
            format!("spec.resources.requests.{name}"),
            format!(
                "{} must be less than or equal to the {name} limit of {}",
                show(name, req),
                show(name, lim)
            ),
        ));
    }
    let aggregated = crate::qos::container_requests(pod, name);
    if let Some(req) = request
        && aggregated > req
    {
        errs.push(FieldError::new(
            format!("spec.resources.requests.{name}"),
            format!(
                "{} must be greater than or equal to the containers' aggregated requests of {}",
                show(name, req),
                show(name, aggregated)
            ),
        ));
    }
    let Some(lim) = limit else {
        return;
    };
    for (path, c) in pod
        .spec
        .init_containers
        .iter()
        .enumerate()
        .map(|(i, c)| (format!("spec.initContainers[{i}]"), c))
        .chain(
            pod.spec
                .containers
                .iter()
                .enumerate()
                .map(|(i, c)| (format!("spec.containers[{i}]"), c)),
        )
    {
        let c_lim = c
            .resources
            .as_ref()
            .and_then(|r| r.limits.get(name))
            .and_then(|q| q.scaled(crate::qos::scale_of(name)));
        if let Some(c_lim) = c_lim
            && c_lim > lim
        {
            errs.push(FieldError::new(
                format!("{path}.resources.limits.{name}"),
                format!(
                    "{} must be less than or equal to the pod-level {name} limit of {}",
                    show(name, c_lim),
                    show(name, lim)
                ),
            ));
        }
    }
}

/// Validates `spec.volumes` (validation: `ValidateVolumes`); returns the declared names.
fn validate_volumes<'a>(pod: &'a Pod, errs: &mut Vec<FieldError>) -> HashMap<&'a str, usize> {
    let mut names = HashMap::new();
    for (i, v) in pod.spec.volumes.iter().enumerate() {
        let path = format!("spec.volumes[{i}]");
        validate_volume_name(v, i, &path, &mut names, errs);
        validate_volume_source(v, &path, errs);
    }
    names
}

/// A volume's name: required, a DNS-1123 label, unique in the pod (recorded in `names`
/// with its index; a duplicate keeps the first).
fn validate_volume_name<'a>(
    v: &'a api::Volume,
    i: usize,
    path: &str,
    names: &mut HashMap<&'a str, usize>,
    errs: &mut Vec<FieldError>,
) {
    if v.name.is_empty() {
        errs.push(FieldError::new(format!("{path}.name"), "required"));
    } else if !is_dns1123_label(&v.name) {
        errs.push(FieldError::new(
            format!("{path}.name"),
            format!("{:?} {LABEL_RULE}", v.name),
        ));
    } else if let Some(first) = names.insert(v.name.as_str(), i) {
        names.insert(v.name.as_str(), first);
        errs.push(FieldError::new(
            format!("{path}.name"),
            format!(
                "duplicate volume name {:?} (also spec.volumes[{first}])",
                v.name
            ),
        ));
    }
}

/// The volume types a volume sets, in the order the messages list them; keys of
/// upstream's other volume types last.
fn volume_kinds(v: &api::Volume) -> Vec<&str> {
    let mut kinds: Vec<&str> = Vec::new();
    if v.host_path.is_some() {
        kinds.push("hostPath");
    }
    if v.empty_dir.is_some() {
        kinds.push("emptyDir");
    }
    if v.config_map.is_some() {
        kinds.push("configMap");
    }
    if v.secret.is_some() {
        kinds.push("secret");
    }
    if v.downward_api.is_some() {
        kinds.push("downwardAPI");
    }
    if v.projected.is_some() {
        kinds.push("projected");
    }
    if v.csi.is_some() {
        kinds.push("csi");
    }
    if v.image.is_some() {
        kinds.push("image");
    }
    kinds.extend(v.other.keys().map(String::as_str));
    kinds
}

/// validation: `validateVolumeSource` — at most one volume type, a known one, then the
/// checks of its type.
fn validate_volume_source(v: &api::Volume, path: &str, errs: &mut Vec<FieldError>) {
    let kinds = volume_kinds(v);
    let named = format!("{path} ({})", v.name);
    if kinds.len() > 1 {
        errs.push(FieldError::new(
            named,
            format!(
                "may not specify more than one volume type (found {})",
                kinds.join(", ")
            ),
        ));
        return;
    }
    // One policy for a volume kind picolet does not implement: a kind of upstream's with
    // a rule in the field table (persistentVolumeClaim, nfs, image …) decodes, and
    // admission refuses the pod (Failed, UnsupportedField, naming the volume and its
    // kind) as it refuses every other refused field; only a key that is no volume kind
    // of upstream's (a typo) is an error of the file.
    if let Some(kind) = v.other.keys().next() {
        let path = format!("spec.volumes[].{kind}");
        if !fields::RULES.iter().any(|r| r.path == path) {
            errs.push(FieldError::new(
                named,
                format!(
                    "{kind:?} is not a volume type (supported: hostPath, emptyDir, configMap, secret, downwardAPI, projected, csi, image)"
                ),
            ));
        }
        return;
    }
    validate_data_volume(v, path, errs);
    if let Some(csi) = &v.csi {
        validate_csi_volume(csi, &format!("{path}.csi"), errs);
    }
    if let Some(iv) = &v.image {
        validate_image_volume(iv, path, errs);
    }
    if let Some(hp) = &v.host_path {
        validate_host_path_volume(hp, path, errs);
    }
    if let Some(ed) = &v.empty_dir {
        let medium = ed.medium.as_deref().unwrap_or("");
        if !matches!(medium, "" | "Memory") {
            errs.push(FieldError::new(
                format!("{path}.emptyDir.medium"),
                format!("unsupported value {medium:?} (supported: \"\", Memory)"),
            ));
        }
    }
}

/// validation: `validateImageVolumeSource` — a reference is required (the pull policy's
/// values are the decoder's).
fn validate_image_volume(iv: &api::ImageVolumeSource, path: &str, errs: &mut Vec<FieldError>) {
    if iv.reference.trim().is_empty() {
        errs.push(FieldError::new(
            format!("{path}.image.reference"),
            "required",
        ));
    } else if iv.reference.trim() != iv.reference {
        errs.push(FieldError::new(
            format!("{path}.image.reference"),
            format!(
                "{:?} must not have leading or trailing whitespace",
                iv.reference
            ),
        ));
    }
}

/// validation: `validateHostPathVolumeSource` — an absolute path without `..`, and a known
/// `type`.
fn validate_host_path_volume(
    hp: &api::HostPathVolumeSource,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    let p = format!("{path}.hostPath.path");
    if hp.path.is_empty() {
        errs.push(FieldError::new(p, "required"));
    } else if !hp.path.starts_with('/') {
        errs.push(FieldError::new(
            p,
            format!("{:?} must be an absolute path", hp.path),
        ));
    } else if has_backsteps(&hp.path) {
        errs.push(FieldError::new(
            p,
            format!("{:?} must not contain '..'", hp.path),
        ));
    }
    let t = hp.type_.as_deref().unwrap_or("");
    const TYPES: [&str; 8] = [
        "",
        "DirectoryOrCreate",
        "Directory",
        "FileOrCreate",
        "File",
        "Socket",
        "CharDevice",
        "BlockDevice",
    ];
    if !TYPES.contains(&t) {
        errs.push(FieldError::new(
            format!("{path}.hostPath.type"),
            format!(
                "unsupported value {t:?} (supported: \"\", {})",
                TYPES[1..].join(", ")
            ),
        ));
    }
}

/// A container's own `restartPolicy` and its `restartPolicyRules` (apiserver:
/// `validateContainerRestartPolicy`, ContainerRestartRules on): any policy on any container
/// (`Always` on an init container makes it a sidecar); rules need a policy, at most 20, each
/// with an action and exit codes (`In`/`NotIn`, at most 255 values).
fn validate_restart_rules(c: &Container, path: &str, errs: &mut Vec<FieldError>) {
    let rules = &c.restart_policy_rules;
    if c.restart_policy.is_none() && !rules.is_empty() {
        errs.push(FieldError::new(
            format!("{path}.restartPolicy"),
            "must specify restartPolicy when restart rules are used",
        ));
    }
    if rules.len() > 20 {
        errs.push(FieldError::new(
            format!("{path}.restartPolicyRules"),
            format!("must have at most 20 items, found {}", rules.len()),
        ));
    }
    for (i, r) in rules.iter().enumerate() {
        let rp = format!("{path}.restartPolicyRules[{i}]");
        if !matches!(r.action.as_str(), "Restart" | "RestartAllContainers") {
            errs.push(FieldError::new(
                format!("{rp}.action"),
                format!("unsupported value {:?} (supported: Restart)", r.action),
            ));
        }
        match &r.exit_codes {
            None => errs.push(FieldError::new(format!("{rp}.exitCodes"), "required")),
            Some(e) => {
                if !matches!(e.operator.as_str(), "In" | "NotIn") {
                    errs.push(FieldError::new(
                        format!("{rp}.exitCodes.operator"),
                        format!("unsupported value {:?} (supported: In, NotIn)", e.operator),
                    ));
                }
                if e.values.len() > 255 {
                    errs.push(FieldError::new(
                        format!("{rp}.exitCodes.values"),
                        format!("must have at most 255 items, found {}", e.values.len()),
                    ));
                }
            }
        }
    }
}

/// validation: `validateContainerCommon` for one container — name and image, restart
/// policy and rules, termination message policy, then ports, environment and volume
/// mounts.
fn validate_container(
    path: &str,
    c: &Container,
    host_network: bool,
    volumes: &HashMap<&str, usize>,
    errs: &mut Vec<FieldError>,
) {
    validate_container_name_and_image(path, c, errs);
    validate_restart_rules(c, path, errs);
    if let Some(p) = c.termination_message_policy.as_deref()
        && !matches!(p, "File" | "FallbackToLogsOnError")
    {
        errs.push(FieldError::new(
            format!("{path}.terminationMessagePolicy"),
            format!("unsupported value {p:?} (supported: File, FallbackToLogsOnError)"),
        ));
    }
    validate_container_ports(path, &c.ports, host_network, errs);
    validate_env(path, c, errs);
    validate_volume_mounts(path, &c.volume_mounts, volumes, errs);
}

/// A container's name (required, a DNS-1123 label) and image (required, no surrounding
/// whitespace).
fn validate_container_name_and_image(path: &str, c: &Container, errs: &mut Vec<FieldError>) {
    if c.name.is_empty() {
        errs.push(FieldError::new(format!("{path}.name"), "required"));
    } else if !is_dns1123_label(&c.name) {
        errs.push(FieldError::new(
            format!("{path}.name"),
            format!("{:?} {LABEL_RULE}", c.name),
        ));
    }
    if c.image.is_empty() {
        errs.push(FieldError::new(format!("{path}.image"), "required"));
    } else if c.image.trim() != c.image {
        errs.push(FieldError::new(
            format!("{path}.image"),
            format!("{:?} must not have leading or trailing whitespace", c.image),
        ));
    }
}

/// validation: `validateContainerPorts` — ports in range, a host port equal to the
/// container port on the host network, a known protocol, names IANA service names and
/// unique in the container.
fn validate_container_ports(
    path: &str,
    ports: &[api::ContainerPort],
    host_network: bool,
    errs: &mut Vec<FieldError>,
) {
    let mut port_names: HashMap<&str, usize> = HashMap::new();
    for (i, p) in ports.iter().enumerate() {
        let pp = format!("{path}.ports[{i}]");
        if !(1..=65535).contains(&p.container_port) {
            errs.push(FieldError::new(
                format!("{pp}.containerPort"),
                format!("must be between 1 and 65535, found {}", p.container_port),
            ));
        }
        if let Some(hp) = p.host_port {
            if !(0..=65535).contains(&hp) {
                errs.push(FieldError::new(
                    format!("{pp}.hostPort"),
                    format!("must be between 1 and 65535, found {hp}"),
                ));
            } else if host_network && hp != 0 && hp != p.container_port {
                // validation: validateHostNetwork
                errs.push(FieldError::new(
                    format!("{pp}.hostPort"),
                    format!(
                        "must equal containerPort ({}) when hostNetwork is true, found {hp}",
                        p.container_port
                    ),
                ));
            }
        }
        if let Some(proto) = p.protocol.as_deref()
            && !matches!(proto, "TCP" | "UDP" | "SCTP")
        {
            errs.push(FieldError::new(
                format!("{pp}.protocol"),
                format!("unsupported value {proto:?} (supported: TCP, UDP, SCTP)"),
            ));
        }
        if let Some(name) = p.name.as_deref() {
            if !is_port_name(name) {
                errs.push(FieldError::new(
                    format!("{pp}.name"),
                    format!("{name:?} must be an IANA service name (at most 15 lowercase letters, digits and '-', with at least one letter, no leading, trailing or double '-')"),
                ));
            } else if let Some(first) = port_names.get(name) {
                errs.push(FieldError::new(
                    format!("{pp}.name"),
                    format!("duplicate port name {name:?} (also {path}.ports[{first}])"),
                ));
            } else {
                port_names.insert(name, i);
            }
        }
    }
}

/// validation: `ValidateEnv` and `validateEnvFrom` — names (and prefixes, a name's start)
/// under the relaxed rule, `value` and `valueFrom` not both.
fn validate_env(path: &str, c: &Container, errs: &mut Vec<FieldError>) {
    for (i, e) in c.env.iter().enumerate() {
        let ep = format!("{path}.env[{i}]");
        if e.name.is_empty() {
            errs.push(FieldError::new(format!("{ep}.name"), "required"));
        } else if !crate::api::is_env_var_name(&e.name) {
            // validation: RelaxedEnvironmentVariableValidation (printable ASCII, no '=')
            errs.push(FieldError::new(
                format!("{ep}.name"),
                format!("{:?} must be printable ASCII without '='", e.name),
            ));
        }
        if e.value.as_deref().is_some_and(|v| !v.is_empty()) && e.value_from.is_some() {
            errs.push(FieldError::new(
                format!("{ep}.valueFrom"),
                "may not be set together with value",
            ));
        }
    }
    // validation: validateEnvFrom — a prefix is a name's start (the same relaxed rule).
    for (i, e) in c.env_from.iter().enumerate() {
        if !e.prefix.is_empty() && !crate::api::is_env_var_name(&e.prefix) {
            errs.push(FieldError::new(
                format!("{path}.envFrom[{i}].prefix"),
                format!("{:?} must be printable ASCII without '='", e.prefix),
            ));
        }
    }
}

/// validation: `ValidateVolumeMounts` — a declared volume, an absolute mount path mounted
/// once, a relative `subPath` without `..`, a known propagation mode.
fn validate_volume_mounts(
    path: &str,
    mounts: &[api::VolumeMount],
    volumes: &HashMap<&str, usize>,
    errs: &mut Vec<FieldError>,
) {
    let mut mount_paths: HashMap<&str, usize> = HashMap::new();
    for (i, m) in mounts.iter().enumerate() {
        let mp = format!("{path}.volumeMounts[{i}]");
        if m.name.is_empty() {
            errs.push(FieldError::new(format!("{mp}.name"), "required"));
        } else if !volumes.contains_key(m.name.as_str()) {
            errs.push(FieldError::new(
                format!("{mp}.name"),
                format!("volume {:?} is not declared in spec.volumes", m.name),
            ));
        }
        if m.mount_path.is_empty() {
            errs.push(FieldError::new(format!("{mp}.mountPath"), "required"));
        } else if !m.mount_path.starts_with('/') {
            errs.push(FieldError::new(
                format!("{mp}.mountPath"),
                format!("{:?} must be an absolute path", m.mount_path),
            ));
        } else if let Some(first) = mount_paths.insert(m.mount_path.as_str(), i) {
            mount_paths.insert(m.mount_path.as_str(), first);
            errs.push(FieldError::new(
                format!("{mp}.mountPath"),
                format!(
                    "{:?} is already mounted by {path}.volumeMounts[{first}]",
                    m.mount_path
                ),
            ));
        }
        if let Some(sub) = m.sub_path.as_deref()
            && (sub.starts_with('/') || has_backsteps(sub))
        {
            errs.push(FieldError::new(
                format!("{mp}.subPath"),
                format!("{sub:?} must be a relative path without '..'"),
            ));
        }
        if let Some(prop) = m.mount_propagation.as_deref()
            && !matches!(prop, "None" | "HostToContainer" | "Bidirectional")
        {
            errs.push(FieldError::new(
                format!("{mp}.mountPropagation"),
                format!(
                    "unsupported value {prop:?} (supported: None, HostToContainer, Bidirectional)"
                ),
            ));
        }
    }
}

fn has_backsteps(path: &str) -> bool {
    path.split('/').any(|part| part == "..")
}

fn is_label_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// DNS-1123 label: `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 characters.
/// An inline CSI volume (upstream `validateCSIVolumeSource`, `ValidateCSIDriverName`).
fn validate_csi_volume(csi: &api::CsiVolumeSource, path: &str, errs: &mut Vec<FieldError>) {
    let p = format!("{path}.driver");
    let d = csi.driver.as_bytes();
    if d.is_empty() {
        errs.push(FieldError::new(p, "required"));
    } else if d.len() > 63 {
        errs.push(FieldError::new(p, "must be no more than 63 characters"));
    } else if !d[0].is_ascii_alphanumeric()
        || !d[d.len() - 1].is_ascii_alphanumeric()
        || !d
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
    {
        errs.push(FieldError::new(
            p,
            format!(
                "{:?}: a CSI driver name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
                csi.driver
            ),
        ));
    }
    if let Some(r) = &csi.node_publish_secret_ref {
        validate_object_name(&r.name, &format!("{path}.nodePublishSecretRef.name"), errs);
    }
}

/// configMap, secret, downwardAPI and projected volumes (upstream `validateConfigMapVolumeSource`,
/// `validateSecretVolumeSource`, `validateDownwardAPIVolumeSource`, `validateProjectedVolumeSource`).
fn validate_data_volume(v: &api::Volume, path: &str, errs: &mut Vec<FieldError>) {
    if let Some(cm) = &v.config_map {
        let p = format!("{path}.configMap");
        validate_object_name(&cm.name, &format!("{p}.name"), errs);
        validate_mode(cm.default_mode, &format!("{p}.defaultMode"), errs);
        validate_items(&cm.items, &format!("{p}.items"), errs);
    }
    if let Some(sec) = &v.secret {
        let p = format!("{path}.secret");
        validate_object_name(&sec.secret_name, &format!("{p}.secretName"), errs);
        validate_mode(sec.default_mode, &format!("{p}.defaultMode"), errs);
        validate_items(&sec.items, &format!("{p}.items"), errs);
    }
    if let Some(d) = &v.downward_api {
        let p = format!("{path}.downwardAPI");
        validate_mode(d.default_mode, &format!("{p}.defaultMode"), errs);
        validate_downward_items(&d.items, &format!("{p}.items"), errs);
    }
    if let Some(pr) = &v.projected {
        validate_projected_volume(pr, path, errs);
    }
}

/// validation: `validateProjectedVolumeSource` — the default mode, exactly one source kind
/// per source, and no item path claimed by two sources.
fn validate_projected_volume(
    pr: &api::ProjectedVolumeSource,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    let p = format!("{path}.projected");
    validate_mode(pr.default_mode, &format!("{p}.defaultMode"), errs);
    let mut paths: BTreeMap<String, String> = BTreeMap::new();
    for (i, src) in pr.sources.iter().enumerate() {
        let sp = format!("{p}.sources[{i}]");
        let set = [
            src.config_map.is_some(),
            src.secret.is_some(),
            src.downward_api.is_some(),
            src.service_account_token.is_some(),
            src.cluster_trust_bundle.is_some(),
            src.pod_certificate.is_some(),
        ]
        .iter()
        .filter(|b| **b)
        .count();
        if set != 1 {
            errs.push(FieldError::new(
                &sp,
                "must specify exactly one of configMap, secret, downwardAPI, serviceAccountToken",
            ));
            continue;
        }
        let mut item_paths: Vec<(String, &str)> = Vec::new();
        if let Some(cm) = &src.config_map {
            validate_object_name(&cm.name, &format!("{sp}.configMap.name"), errs);
            validate_items(&cm.items, &format!("{sp}.configMap.items"), errs);
            item_paths.extend(
                cm.items
                    .iter()
                    .map(|k| (format!("{sp}.configMap.items"), k.path.as_str())),
            );
        }
        if let Some(sec) = &src.secret {
            validate_object_name(&sec.name, &format!("{sp}.secret.name"), errs);
            validate_items(&sec.items, &format!("{sp}.secret.items"), errs);
            item_paths.extend(
                sec.items
                    .iter()
                    .map(|k| (format!("{sp}.secret.items"), k.path.as_str())),
            );
        }
        if let Some(d) = &src.downward_api {
            validate_downward_items(&d.items, &format!("{sp}.downwardAPI.items"), errs);
            item_paths.extend(
                d.items
                    .iter()
                    .map(|k| (format!("{sp}.downwardAPI.items"), k.path.as_str())),
            );
        }
        // upstream: "conflicting duplicate paths" across the sources' items.
        for (at, item) in item_paths {
            if let Some(first) = paths.insert(item.to_string(), at.clone()) {
                if first != at {
                    errs.push(FieldError::new(
                        at,
                        format!("conflicting duplicate path {item:?} (also in {first})"),
                    ));
                }
            }
        }
    }
}

fn validate_object_name(name: &str, field: &str, errs: &mut Vec<FieldError>) {
    if name.is_empty() {
        errs.push(FieldError::new(field, "required"));
    } else if !is_dns1123_subdomain(name) {
        errs.push(FieldError::new(
            field,
            format!("{name:?} must be a DNS-1123 subdomain (lower case letters, digits, '-', '.')"),
        ));
    }
}

fn validate_mode(mode: Option<i32>, field: &str, errs: &mut Vec<FieldError>) {
    if let Some(m) = mode
        && !(0..=0o777).contains(&m)
    {
        errs.push(FieldError::new(
            field,
            format!("{m} must be a file mode between 0 and 0777 (511 in decimal)"),
        ));
    }
}

/// upstream `validateLocalNonReservedPath`: relative, no `..` element, not starting with `..`.
pub(crate) fn validate_item_path(p: &str) -> Result<(), &'static str> {
    if p.is_empty() {
        return Err("required");
    }
    if p.starts_with('/') {
        return Err("must be a relative path");
    }
    if p.split('/').any(|c| c == "..") {
        return Err("must not contain '..'");
    }
    if p.starts_with("..") {
        return Err("must not start with '..'");
    }
    Ok(())
}

fn validate_items(items: &[api::KeyToPath], field: &str, errs: &mut Vec<FieldError>) {
    for (i, item) in items.iter().enumerate() {
        let at = format!("{field}[{i}]");
        if item.key.is_empty() {
            errs.push(FieldError::new(format!("{at}.key"), "required"));
        }
        if let Err(why) = validate_item_path(&item.path) {
            errs.push(FieldError::new(
                format!("{at}.path"),
                format!("{:?} {why}", item.path),
            ));
        }
        validate_mode(item.mode, &format!("{at}.mode"), errs);
    }
}

/// Field paths a downwardAPI volume may project (upstream `validVolumeDownwardAPIFieldPathExpressions`).
pub(crate) const DOWNWARD_VOLUME_FIELDS: [&str; 5] = [
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "metadata.labels",
    "metadata.annotations",
];

fn validate_downward_items(
    items: &[api::DownwardApiVolumeFile],
    field: &str,
    errs: &mut Vec<FieldError>,
) {
    for (i, item) in items.iter().enumerate() {
        let at = format!("{field}[{i}]");
        if let Err(why) = validate_item_path(&item.path) {
            errs.push(FieldError::new(
                format!("{at}.path"),
                format!("{:?} {why}", item.path),
            ));
        }
        validate_mode(item.mode, &format!("{at}.mode"), errs);
        match (&item.field_ref, &item.resource_field_ref) {
            (Some(f), None) => {
                let fp = f.field_path.as_str();
                let subscripted = ["metadata.labels['", "metadata.annotations['"]
                    .iter()
                    .any(|p| fp.starts_with(p) && fp.ends_with("']"));
                if !DOWNWARD_VOLUME_FIELDS.contains(&fp) && !subscripted {
                    errs.push(FieldError::new(
                        format!("{at}.fieldRef.fieldPath"),
                        format!(
                            "{fp:?} is not supported in a volume (supported: {})",
                            DOWNWARD_VOLUME_FIELDS.join(", ")
                        ),
                    ));
                }
            }
            (None, Some(r)) => {
                if r.resource.is_empty() {
                    errs.push(FieldError::new(
                        format!("{at}.resourceFieldRef.resource"),
                        "required",
                    ));
                }
            }
            _ => errs.push(FieldError::new(
                at,
                "must specify exactly one of fieldRef and resourceFieldRef",
            )),
        }
    }
}

pub(crate) fn is_dns1123_label(s: &str) -> bool {
    s.len() <= 63 && is_label_part(s)
}

/// DNS-1123 subdomain: labels joined by `.`, at most 253 characters.
pub(crate) fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_label_part)
}

/// IANA_SVC_NAME: at most 15 of `[a-z0-9-]`, at least one letter, no `--`, no leading or
/// trailing `-`.
fn is_port_name(s: &str) -> bool {
    s.len() <= 15
        && is_label_part(s)
        && s.bytes().any(|c| c.is_ascii_lowercase())
        && !s.contains("--")
}

// ---------------------------------------------------------------------------------------
// Static pod identity

/// Makes a parsed manifest a static pod of this node (kubelet: `config/common.go`
/// `applyDefaults`): name `<name>-<lowercased node>`, namespace `default`, `spec.nodeName`,
/// UID (unless set) = [`static_pod_uid`], the config annotations, status phase Pending
/// (any status in the manifest is dropped: picolet computes it).
pub fn make_static(
    mut pod: Pod,
    raw: &Value,
    node_name: &str,
    source: &str,
    source_path: &str,
    seen: UnixNanos,
) -> Pod {
    if pod.metadata.uid.is_empty() {
        pod.metadata.uid = static_pod_uid(raw, node_name, source, source_path);
    }
    // kubelet: generatePodName
    pod.metadata.name = format!("{}-{}", pod.metadata.name, node_name.to_lowercase());
    if pod.metadata.namespace.is_empty() {
        pod.metadata.namespace = "default".to_string();
    }
    pod.spec.node_name = node_name.to_string();
    let annotations = &mut pod.metadata.annotations;
    annotations.insert(
        api::ANNOTATION_CONFIG_HASH.to_string(),
        pod.metadata.uid.clone(),
    );
    annotations.insert(
        api::ANNOTATION_CONFIG_SOURCE.to_string(),
        source.to_string(),
    );
    if let Some(seen) = clock::rfc3339(seen) {
        annotations.insert(api::ANNOTATION_CONFIG_SEEN.to_string(), seen);
    }
    pod.status = Some(PodStatus {
        phase: Some(PodPhase::Pending),
        ..PodStatus::default()
    });
    pod
}

/// The UID of a static pod without `metadata.uid`: 32 hex digits of FNV-1a-128 over a
/// canonical encoding of (version tag, source, node name, source path, document).
pub fn static_pod_uid(raw: &Value, node_name: &str, source: &str, source_path: &str) -> String {
    let mut h = Fnv1a128::new();
    h.write(b"picolet/static-pod-uid/v1\0");
    h.write_str(source);
    h.write_str(node_name);
    h.write_str(source_path);
    hash_value(&mut h, raw);
    format!("{:032x}", h.finish())
}

/// FNV-1a with the 128-bit parameters (offset basis and prime from the FNV reference).
struct Fnv1a128(u128);

impl Fnv1a128 {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;

    fn new() -> Self {
        Fnv1a128(Self::OFFSET)
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u128::from(*b);
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }
    fn write_len(&mut self, n: usize) {
        self.write(&(n as u64).to_le_bytes());
    }
    fn write_str(&mut self, s: &str) {
        self.write_len(s.len());
        self.write(s.as_bytes());
    }
    fn finish(&self) -> u128 {
        self.0
    }
}

/// Canonical, self-delimiting encoding: a type tag, lengths before contents, object keys
/// sorted bytewise, numbers by value (u64 / i64 / f64 bits, little-endian). Independent
/// of serde_json's map ordering features and float formatting.
fn hash_value(h: &mut Fnv1a128, v: &Value) {
    match v {
        Value::Null => h.write(b"n"),
        Value::Bool(b) => h.write(if *b { b"t" } else { b"f" }),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                h.write(b"u");
                h.write(&u.to_le_bytes());
            } else if let Some(i) = n.as_i64() {
                h.write(b"i");
                h.write(&i.to_le_bytes());
            } else {
                h.write(b"d");
                h.write(&n.as_f64().unwrap_or(0.0).to_bits().to_le_bytes());
            }
        }
        Value::String(s) => {
            h.write(b"s");
            h.write_str(s);
        }
        Value::Array(a) => {
            h.write(b"a");
            h.write_len(a.len());
            for item in a {
                hash_value(h, item);
            }
        }
        Value::Object(o) => {
            h.write(b"o");
            h.write_len(o.len());
            let sorted: BTreeMap<&str, &Value> =
                crate::sort::collect_map(o.iter().map(|(k, v)| (k.as_str(), v)));
            for (k, v) in sorted {
                h.write_str(k);
                hash_value(h, v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_names() {
        for (s, label, subdomain) in [
            ("web", true, true),
            ("web-1", true, true),
            ("1web", true, true),
            ("web.example", false, true),
            ("Web", false, false),
            ("-web", false, false),
            ("web-", false, false),
            ("web..x", false, false),
            ("web_x", false, false),
            ("", false, false),
        ] {
            assert_eq!(is_dns1123_label(s), label, "label {s:?}");
            assert_eq!(is_dns1123_subdomain(s), subdomain, "subdomain {s:?}");
        }
        assert!(is_dns1123_label(&"a".repeat(63)));
        assert!(!is_dns1123_label(&"a".repeat(64)));
        assert!(is_dns1123_subdomain(&"a".repeat(253)));
        assert!(!is_dns1123_subdomain(&"a".repeat(254)));
    }

    #[test]
    fn port_and_env_names() {
        for (s, ok) in [
            ("http", true),
            ("http-alt", true),
            ("h2c", true),
            ("8080", false),
            ("http--x", false),
            ("-http", false),
            ("HTTP", false),
            ("a-very-long-name", false), // 16
        ] {
            assert_eq!(is_port_name(s), ok, "{s:?}");
        }
        for (s, ok) in [
            ("PATH", true),
            ("my.var-1", true),
            ("1X", true),
            ("A=B", false),
            ("tab\t", false),
            ("", false),
        ] {
            assert_eq!(crate::api::is_env_var_name(s), ok, "{s:?}");
        }
    }

    #[test]
    fn fnv1a_128_reference_vectors() {
        // Published FNV-1a 128-bit test vectors.
        let hash = |s: &str| {
            let mut h = Fnv1a128::new();
            h.write(s.as_bytes());
            format!("{:032x}", h.finish())
        };
        assert_eq!(hash(""), "6c62272e07bb014262b821756295c58d");
        assert_eq!(hash("a"), "d228cb696f1a8caf78912b704e4a8964");
    }

    #[test]
    fn yaml11_boolean_hint() {
        assert!(yaml11_bool(
            "invalid type: string \"yes\", expected a boolean"
        ));
        assert!(yaml11_bool(
            "invalid type: string \"Off\", expected a boolean"
        ));
        assert!(!yaml11_bool(
            "invalid type: string \"maybe\", expected a boolean"
        ));
    }
}
