//! Field fidelity: picolet's model against the upstream v1 Pod schema (a fixture generated
//! from upstream's types, see its generator), and the field policy table
//! (`picolet::manifest_fields`) for every upstream field picolet does not implement.
//!
//! The README's policy section is generated from the table: after changing the table, run
//! `PICOLET_BLESS=1 cargo test --test field_fidelity` and commit the README.

#[path = "common/model_fields.rs"]
mod model_fields;
#[path = "common/readme.rs"]
mod readme;

use std::collections::BTreeSet;

use model_fields::{Trace, model_paths, upstream_paths};
use picolet::{
    api::{EmptyDirVolumeSource, HostPathVolumeSource, Pod},
    manifest_fields::{self, Policy, RULES, normalize, rule_for},
};

const UPSTREAM: &str = include_str!("fixtures/upstream/pod-fields-v1.34.txt");

/// Every JSON path picolet's model reads (the flattened `Volume` traced part by part).
fn model() -> Trace {
    let mut t = model_paths::<Pod>("").expect("trace the model");
    for p in [
        "spec.volumes[].name",
        "spec.volumes[].hostPath",
        "spec.volumes[].emptyDir",
    ] {
        t.paths.insert(p.to_string());
    }
    t.extend(model_paths::<HostPathVolumeSource>("spec.volumes[].hostPath").unwrap());
    t.extend(model_paths::<EmptyDirVolumeSource>("spec.volumes[].emptyDir").unwrap());
    t
}

fn upstream() -> BTreeSet<String> {
    upstream_paths(UPSTREAM)
}

fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    std::iter::successors(Some(path), |p| {
        let cut = p.rfind('.')?;
        Some(p[..cut].strip_suffix("[]").unwrap_or(&p[..cut]))
    })
}

#[test]
fn every_field_name_the_model_reads_exists_upstream() {
    let model = model();
    let upstream = upstream();
    // One model for containers of every kind (kubelet casts `EphemeralContainerCommon` to
    // `v1.Container`): the ephemeral-only field reads as absent in the others.
    let wrong: Vec<_> = model
        .paths
        .difference(&upstream)
        .filter(|p| {
            !(p.starts_with("spec.containers[].") || p.starts_with("spec.initContainers[]."))
                || !p.ends_with("[].targetContainerName")
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "picolet's model reads JSON names upstream v1.Pod does not have (a serde rename \
         missing?): {wrong:#?}"
    );
}

#[test]
fn every_upstream_field_the_model_does_not_read_has_a_policy() {
    let model = model();
    let missing: Vec<_> = upstream()
        .difference(&model.paths)
        .filter(|p| rule_for(&normalize(p)).is_none())
        .filter(|p| !ancestors(p).any(|a| model.opaque.contains(a) && rule_for(a).is_some()))
        .cloned()
        .collect();
    assert!(
        missing.is_empty(),
        "upstream v1.Pod fields that picolet neither reads nor lists in \
         manifest_fields::RULES (add a row: ignored, warned or refused): {missing:#?}"
    );
}

#[test]
fn every_rule_names_an_upstream_field() {
    let upstream = upstream();
    let stale: Vec<_> = RULES
        .iter()
        .map(|r| r.path)
        .filter(|p| !upstream.contains(*p))
        .collect();
    assert!(
        stale.is_empty(),
        "rules for paths upstream does not have: {stale:?}"
    );
}

#[test]
fn every_warned_or_refused_field_is_carried_by_the_model() {
    // The admission check reads the pod, not the manifest: a field the model dropped could
    // not be warned about or refused after a checkpoint, a mirror pod or a restart.
    let model = model();
    let lost: Vec<_> = RULES
        .iter()
        .filter(|r| matches!(r.policy, Policy::Warned | Policy::Refused))
        .map(|r| r.path)
        .filter(|p| {
            let volume_kind = p.starts_with("spec.volumes[].");
            !volume_kind
                && !model.paths.contains(*p)
                && !ancestors(p).skip(1).any(|a| model.opaque.contains(a))
        })
        .collect();
    assert!(
        lost.is_empty(),
        "warned/refused fields the model drops: {lost:?}"
    );
}

#[test]
fn every_warned_or_refused_field_is_found_in_a_pod_that_sets_it() {
    // For each rule, a pod that sets the field (to a value the rule does not allow) through
    // the real decoder: the finding names the field.
    for r in RULES
        .iter()
        .filter(|r| matches!(r.policy, Policy::Warned | Policy::Refused))
    {
        let mut doc = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}
        });
        set(&mut doc, r.path, sample_value(r.path));
        let pod: Pod = serde_json::from_value(doc.clone())
            .unwrap_or_else(|e| panic!("{}: {e}: {doc}", r.path));
        let json = serde_json::to_value(&pod).unwrap();
        let found = manifest_fields::findings(&json);
        assert!(
            found
                .iter()
                .any(|f| normalize(&f.path) == r.path && f.policy == r.policy),
            "{}: not found in {found:?} (pod {json})",
            r.path
        );
    }
}

/// A value of the right JSON type for the field, that no rule allows.
fn sample_value(path: &str) -> serde_json::Value {
    use serde_json::json;
    match path.rsplit('.').next().unwrap() {
        "hostUsers" | "setHostnameAsFQDN" => json!(false).max_bool(path),
        "subdomain"
        | "hostnameOverride"
        | "runtimeClassName"
        | "terminationMessagePath"
        | "terminationMessagePolicy"
        | "procMount"
        | "subPathExpr"
        | "recursiveReadOnly"
        | "action"
        | "supplementalGroupsPolicy"
        | "name" => json!("Unusual"),
        "hostAliases"
        | "imagePullSecrets"
        | "readinessGates"
        | "ephemeralContainers"
        | "resourceClaims"
        | "envFrom"
        | "restartPolicyRules"
        | "volumeDevices"
        | "claims" => {
            json!([{"name": "x"}])
        }
        _ => json!({"x": "y"}),
    }
}

trait MaxBool {
    fn max_bool(self, path: &str) -> serde_json::Value;
}
impl MaxBool for serde_json::Value {
    /// hostUsers is refused unless true; setHostnameAsFQDN warned unless false.
    fn max_bool(self, path: &str) -> serde_json::Value {
        serde_json::Value::Bool(path.ends_with("setHostnameAsFQDN"))
    }
}

/// Sets `path` (with `[]` meaning the first element, created if missing) in `doc`.
fn set(doc: &mut serde_json::Value, path: &str, value: serde_json::Value) {
    let mut v = doc;
    let segments: Vec<&str> = path.split('.').collect();
    for (i, seg) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        let (key, list) = match seg.strip_suffix("[]") {
            Some(k) => (k, true),
            None => (*seg, false),
        };
        let obj = v.as_object_mut().expect("an object on the way");
        if last {
            obj.insert(key.to_string(), value);
            return;
        }
        let child = obj.entry(key.to_string()).or_insert_with(|| {
            if list {
                serde_json::json!([{"name": "x", "mountPath": "/x"}])
            } else {
                serde_json::json!({})
            }
        });
        v = if list {
            child.as_array_mut().unwrap().first_mut().unwrap()
        } else {
            child
        };
    }
}

#[test]
fn readme_policy_section_is_generated_from_the_table() {
    readme::check_generated_section(
        "field-policy",
        &manifest_fields::markdown_table(),
        "field_fidelity",
    );
}

#[test]
fn policy_counts() {
    let mut counts = std::collections::BTreeMap::new();
    for r in RULES {
        *counts.entry(r.policy.as_str()).or_insert(0) += 1;
    }
    println!("field policy: {counts:?}");
}

/// `null` at a path of `base` (segments `a`, `b[]`: an existing list's first element, or a
/// new list of one empty object).
fn null_at(base: &serde_json::Value, path: &str) -> serde_json::Value {
    use serde_json::{Value, json};
    let mut doc = base.clone();
    let segs: Vec<&str> = path.split('.').collect();
    let mut at = &mut doc;
    for (i, seg) in segs.iter().enumerate() {
        let last = i + 1 == segs.len();
        let (name, list) = match seg.strip_suffix("[]") {
            Some(n) => (n, true),
            None => (*seg, false),
        };
        let obj = at.as_object_mut().expect("an object on the way");
        if last && !list {
            obj.insert(name.to_string(), Value::Null);
            break;
        }
        if list {
            let entry = obj.entry(name).or_insert_with(|| json!([{}]));
            if entry.as_array().is_none_or(|a| a.is_empty()) {
                *entry = json!([{}]);
            }
            if last {
                entry.as_array_mut().unwrap()[0] = Value::Null;
                break;
            }
            at = &mut entry.as_array_mut().unwrap()[0];
        } else {
            let entry = obj.entry(name).or_insert_with(|| json!({}));
            if !entry.is_object() {
                *entry = json!({});
            }
            at = entry;
        }
    }
    doc
}

/// Upstream's decoder reads `null` as the zero value of every field (`helm template` leaves
/// bare `envFrom:`, `labels:` …): every field of the upstream v1 Pod, set to `null` in a
/// valid pod, in JSON and in YAML (a bare `key:`), decodes — no type error; what remains is
/// validation (a list element that is null lacks its required name, say).
#[test]
fn null_reads_as_empty_at_every_upstream_field() {
    use picolet::{ManifestError, SOURCE_FILE, load_manifest};
    let base = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}
    });
    let mut type_errors = Vec::new();
    let mut checked = 0;
    for path in upstream() {
        if path.starts_with("status") || path == "apiVersion" || path == "kind" {
            continue;
        }
        let doc = null_at(&base, &path);
        let json = serde_json::to_vec(&doc).unwrap();
        let yaml = serde_yaml_ng::to_string(&doc).unwrap();
        for (form, bytes) in [("json", json), ("yaml", yaml.into_bytes())] {
            checked += 1;
            // A type error at the null itself (one at its parent, a list element made up
            // here that lacks a required field, is not about null).
            let at = path.replace("[]", "[0]");
            if let Err(ManifestError::InFile { error, .. }) =
                load_manifest("/m/p.yaml", &bytes, "n", SOURCE_FILE, 0)
                && let ManifestError::Type { field, .. } = &*error
                && *field == at
            {
                type_errors.push(format!("{path} ({form}): {error}"));
            }
        }
    }
    assert!(checked > 500, "only {checked} checks");
    assert!(
        type_errors.is_empty(),
        "null is not read as empty: {type_errors:#?}"
    );
}
