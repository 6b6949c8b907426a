//! `picolet validate FILE…`: what picolet would do with manifests, without running it.
//!
//! Each file goes through what the file source does with it ([`manifest::load_documents`]:
//! the pre-scan's limits, the defaults, the static pod name and UID), then each pod through
//! the field policy of [`crate::manifest::fields`] and the admission checks that depend only
//! on the pod and the node's name and labels ([`crate::admission::admit`] without resources
//! or other pods). The report lists, per pod, every field refused, warned about or ignored,
//! with its path; per ConfigMap or Secret, the pods that reference it.
//!
//! Pure: bytes in, a [`Report`] out; `cli` reads the files and prints.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::admission::{self, NodeInfo};
use crate::clock::UnixNanos;
use crate::config_data::{self, ObjectKey};
use crate::manifest::fields::{self, Policy, Unknown};
use crate::manifest::{self, Document};

/// One line of the report: a pod, a ConfigMap/Secret, or a file or document refused whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The file, with ` (document N)` when it holds several.
    pub file: String,
    /// `Pod`, `ConfigMap`, `Secret`; empty when the document could not be read.
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// `ok`, `warned`, `refused` (the pod would not start) or `rejected` (not loaded at all).
    pub verdict: &'static str,
    pub fields: Vec<Field>,
    /// Why a document was rejected, or why admission refuses the pod.
    pub error: String,
    /// ConfigMap/Secret: the pods (namespace/name) among the files that reference it.
    pub used_by: Option<Vec<String>>,
    /// Pod: the ConfigMaps and Secrets it cannot start without that none of the files
    /// provides (`ConfigMap default/app`): it would wait for them.
    pub waits_for: Vec<String>,
}

/// A field picolet does not simply run with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Field {
    pub path: String,
    /// `refused`, `warned`, `ignored`, or `unknown` (not a field of v1.Pod: a typo?).
    pub policy: &'static str,
    pub why: String,
    /// The volume's name for a field of one (`spec.volumes[0].nfs`).
    pub volume: Option<String>,
}

/// The report for a set of files.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Report {
    pub entries: Vec<Entry>,
}

impl Report {
    /// Whether a pod would be refused or a file or document rejected.
    pub(crate) fn failed(&self) -> bool {
        self.entries
            .iter()
            .any(|e| matches!(e.verdict, "refused" | "rejected"))
    }

    /// A file that cannot be read at all (`error`: the reason).
    pub(crate) fn rejected(&mut self, file: &str, error: String) {
        self.entries.push(Entry {
            file: file.to_string(),
            kind: String::new(),
            namespace: String::new(),
            name: String::new(),
            uid: String::new(),
            verdict: "rejected",
            fields: Vec::new(),
            error,
            used_by: None,
            waits_for: Vec::new(),
        });
    }

    /// Adds the documents of one file. `shown`: the name printed; `source_path`: the path
    /// the file source would hash into the UID (`<pod-manifest-path>/<file name>`).
    pub(crate) fn add_file(
        &mut self,
        shown: &str,
        source_path: &str,
        bytes: &[u8],
        node: &NodeInfo,
        now: UnixNanos,
    ) -> Vec<(ObjectKey, String)> {
        let mut refs = Vec::new();
        let docs = match manifest::load_documents(
            source_path,
            bytes,
            &node.node_name,
            manifest::SOURCE_FILE,
            now,
        ) {
            Ok(d) => d,
            Err(e) => {
                let (file, text) = split_error(&e, source_path, shown);
                self.rejected(&file, text);
                return refs;
            }
        };
        let several = docs.len() > 1;
        for (i, doc) in docs.into_iter().enumerate() {
            let file = if several {
                format!("{shown} (document {})", i + 1)
            } else {
                shown.to_string()
            };
            match doc {
                Err(e) => {
                    let (file, text) = split_error(&e, source_path, shown);
                    self.rejected(&file, text)
                }
                Ok(Document::Object(o)) => self.entries.push(Entry {
                    file,
                    kind: o.key.kind.as_str().to_string(),
                    namespace: o.key.namespace.clone(),
                    name: o.key.name.clone(),
                    uid: String::new(),
                    verdict: "ok",
                    fields: Vec::new(),
                    error: String::new(),
                    used_by: Some(Vec::new()),
                    waits_for: Vec::new(),
                }),
                Ok(Document::Pod(loaded)) => self.add_pod(file, &loaded, node, &mut refs),
            }
        }
        refs
    }

    /// One pod document: its references (into `refs`, for [`Report::link`]), what it waits
    /// for, the admission verdict and its fields' findings.
    fn add_pod(
        &mut self,
        file: String,
        loaded: &manifest::Loaded,
        node: &NodeInfo,
        refs: &mut Vec<(ObjectKey, String)>,
    ) {
        let pod = &loaded.pod;
        let who = format!("{}/{}", pod.metadata.namespace, pod.metadata.name);
        for key in config_data::references(pod) {
            refs.push((key, who.clone()));
        }
        // What it cannot start without; `link` keeps those no file provides.
        let waits_for = config_data::required_references(pod)
            .into_iter()
            .filter(|k| matches!(k.kind.as_str(), "ConfigMap" | "Secret"))
            .map(|k| format!("{} {}/{}", k.kind.as_str(), k.namespace, k.name))
            .collect();
        let verdict = admission::admit(pod, node, &[]);
        let out = pod_fields(loaded);
        let (verdict, error) = match verdict.rejection {
            // The refused fields are listed below: no need to say them twice.
            Some(r) if r.reason == admission::REASON_UNSUPPORTED => ("refused", String::new()),
            Some(r) => ("refused", format!("{}: {}", r.reason, r.message)),
            None if out.iter().any(|f| f.policy != "ignored") => ("warned", String::new()),
            None => ("ok", String::new()),
        };
        self.entries.push(Entry {
            file,
            kind: "Pod".into(),
            namespace: pod.metadata.namespace.clone(),
            name: pod.metadata.name.clone(),
            uid: pod.metadata.uid.clone(),
            verdict,
            fields: out,
            error,
            used_by: None,
            waits_for,
        });
    }

    /// Fills in `usedBy` of the ConfigMaps and Secrets from every pod's references, and
    /// `waitsFor` of the pods from what no file provides.
    pub(crate) fn link(&mut self, refs: &[(ObjectKey, String)]) {
        let provided: BTreeSet<String> = self
            .entries
            .iter()
            .filter(|e| e.used_by.is_some())
            .map(|e| format!("{} {}/{}", e.kind, e.namespace, e.name))
            .collect();
        for e in &mut self.entries {
            e.waits_for.retain(|w| !provided.contains(w));
            if !e.waits_for.is_empty() && e.verdict == "ok" {
                e.verdict = "warned";
            }
            if let Some(used) = &mut e.used_by {
                let users: BTreeSet<&String> = crate::sort::collect_set(
                    refs.iter()
                        .filter(|(k, _)| {
                            k.kind.as_str() == e.kind
                                && k.namespace == e.namespace
                                && k.name == e.name
                        })
                        .map(|(_, who)| who),
                );
                *used = users.into_iter().cloned().collect();
            }
        }
    }

    /// The report for scripts (`-o json`): an array of entries, empty fields left out.
    pub(crate) fn json(&self) -> Value {
        let text = |s: &str| Value::String(s.to_string());
        let entries = self.entries.iter().map(|e| {
            let mut o = Map::new();
            for (key, value) in [
                ("file", &e.file),
                ("kind", &e.kind),
                ("namespace", &e.namespace),
                ("name", &e.name),
                ("uid", &e.uid),
                ("error", &e.error),
            ] {
                if !value.is_empty() || matches!(key, "file" | "kind") {
                    o.insert(key.into(), text(value));
                }
            }
            o.insert("verdict".into(), text(e.verdict));
            if !e.fields.is_empty() {
                let fields = e.fields.iter().map(|f| {
                    let mut m = Map::new();
                    m.insert("path".into(), text(&f.path));
                    m.insert("policy".into(), text(f.policy));
                    m.insert("why".into(), text(&f.why));
                    if let Some(v) = &f.volume {
                        m.insert("volume".into(), text(v));
                    }
                    Value::Object(m)
                });
                o.insert("fields".into(), fields.collect());
            }
            if let Some(users) = &e.used_by {
                o.insert("usedBy".into(), users.iter().map(|u| text(u)).collect());
            }
            if !e.waits_for.is_empty() {
                o.insert(
                    "waitsFor".into(),
                    e.waits_for.iter().map(|u| text(u)).collect(),
                );
            }
            Value::Object(o)
        });
        entries.collect()
    }

    /// The human report: one line per entry, one indented line per field.
    pub(crate) fn text(&self) -> String {
        let mut out = String::new();
        for e in &self.entries {
            out.push_str(&e.file);
            out.push_str(": ");
            if !e.kind.is_empty() {
                out.push_str(&format!("{} {}/{}", e.kind, e.namespace, e.name));
                if !e.uid.is_empty() {
                    out.push_str(&format!(" (uid {})", e.uid));
                }
                out.push_str(": ");
            }
            match &e.used_by {
                Some(users) if users.is_empty() => out.push_str("referenced by no pod here"),
                Some(users) => out.push_str(&format!("used by {}", users.join(", "))),
                None if e.error.is_empty() => out.push_str(&e.verdict.to_ascii_uppercase()),
                None => {
                    let verdict = e.verdict.to_ascii_uppercase();
                    out.push_str(&format!("{verdict}: {}", e.error));
                }
            }
            out.push('\n');
            for f in &e.fields {
                match &f.volume {
                    Some(v) => out.push_str(&format!(
                        "  {:<8} {} of volume {v:?} ({})\n",
                        f.policy, f.path, f.why
                    )),
                    None => out.push_str(&format!("  {:<8} {} ({})\n", f.policy, f.path, f.why)),
                }
            }
            for w in &e.waits_for {
                out.push_str(&format!(
                    "  waits    for {w}: in none of these files (the pod would not start until it appears)\n"
                ));
            }
        }
        out
    }
}

/// `<source path> (document 2): problem` → (`<shown> (document 2)`, `problem`).
fn split_error(e: &manifest::ManifestError, source_path: &str, shown: &str) -> (String, String) {
    let text = e.to_string();
    match e {
        manifest::ManifestError::InFile { file, .. } => (
            file.replacen(source_path, shown, 1),
            text.strip_prefix(file.as_str())
                .and_then(|t| t.strip_prefix(": "))
                .unwrap_or(&text)
                .to_string(),
        ),
        _ => (shown.to_string(), text),
    }
}

/// A pod's fields worth a line: the field policy's findings on the pod, then the fields the
/// parser did not know (ignored on purpose, or not a field of v1.Pod at all); refused,
/// warned, unknown, ignored first.
fn pod_fields(loaded: &manifest::Loaded) -> Vec<Field> {
    let mut out = Vec::new();
    let findings = match serde_json::to_value(&loaded.pod) {
        Ok(json) => fields::findings(&json),
        Err(_) => Vec::new(),
    };
    for f in findings {
        out.push(Field {
            path: f.path,
            policy: f.policy.as_str(),
            why: f.why.to_string(),
            volume: f.volume,
        });
    }
    for u in fields::classify_unknown(&loaded.unknown_fields) {
        let (path, policy, why) = match u {
            Unknown::Ignored(p) => {
                let why = fields::rule_for(&fields::normalize(&p)).map_or("", |r| r.why);
                (p, Policy::Ignored.as_str(), why.to_string())
            }
            Unknown::NotUpstream(p) => (p, "unknown", "not a field of v1.Pod: a typo?".to_string()),
        };
        out.push(Field {
            path,
            policy,
            why,
            volume: None,
        });
    }
    // refused, warned, unknown, ignored: a stable order without a sort.
    ["refused", "warned", "unknown", "ignored"]
        .iter()
        .flat_map(|p| out.iter().filter(move |f| f.policy == *p))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> NodeInfo {
        NodeInfo {
            node_name: "board".into(),
            labels: crate::node::node_labels("board", &Default::default()),
            ..Default::default()
        }
    }

    fn report(files: &[(&str, &str)]) -> Report {
        let mut r = Report::default();
        let mut refs = Vec::new();
        for (name, text) in files {
            let path = format!("/etc/kubernetes/manifests/{name}");
            refs.extend(r.add_file(name, &path, text.as_bytes(), &node(), 0));
        }
        r.link(&refs);
        r
    }

    #[test]
    fn a_plain_pod_is_ok_with_its_static_name_and_uid() {
        let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers: [{name: c, image: busybox}]\n";
        let r = report(&[("web.yaml", text)]);
        let e = &r.entries[0];
        assert_eq!((e.kind.as_str(), e.name.as_str()), ("Pod", "web-board"));
        let loaded = manifest::load(
            "/etc/kubernetes/manifests/web.yaml",
            text.as_bytes(),
            "board",
            manifest::SOURCE_FILE,
            0,
        )
        .unwrap();
        assert_eq!(e.uid, loaded.pod.metadata.uid);
        assert_eq!(e.verdict, "ok");
        assert!(!r.failed());
        assert!(
            r.text()
                .starts_with("web.yaml: Pod default/web-board (uid ")
        );
    }

    #[test]
    fn fields_are_listed_with_their_paths_and_a_refusal_fails() {
        let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  tolerations: [{key: a, operator: Exists}]\n  containers:\n  - name: c\n    image: busybox\n    imag: typo\n    resizePolicy: [{resourceName: cpu, restartPolicy: RestartContainer}]\n";
        let r = report(&[("web.yaml", text)]);
        let e = &r.entries[0];
        let paths: Vec<(&str, &str)> = e
            .fields
            .iter()
            .map(|f| (f.policy, f.path.as_str()))
            .collect();
        assert!(
            paths.contains(&("ignored", "spec.tolerations")),
            "{paths:?}"
        );
        assert!(
            paths.contains(&("unknown", "spec.containers[0].imag")),
            "{paths:?}"
        );
        println!("{}", r.text());
    }

    #[test]
    fn broken_documents_are_rejected_and_objects_list_their_users() {
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {a: b}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: app}\nspec:\n  containers: [{name: c, image: busybox, envFrom: [{configMapRef: {name: cfg}}]}]\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: bad}\nspec: {containers: []}\n";
        let r = report(&[("app.yaml", text), ("empty.yaml", "")]);
        assert_eq!(r.entries.len(), 4, "{r:?}");
        assert_eq!(
            r.entries[0].used_by,
            Some(vec!["default/app-board".to_string()])
        );
        assert_eq!(r.entries[0].file, "app.yaml (document 1)");
        assert_eq!(r.entries[2].verdict, "rejected");
        assert!(
            r.entries[2].error.contains("spec.containers"),
            "{:?}",
            r.entries[2]
        );
        assert_eq!(r.entries[3].verdict, "rejected");
        assert!(r.failed());
        let text = r.text();
        assert!(
            text.contains(
                "app.yaml (document 1): ConfigMap default/cfg: used by default/app-board"
            ),
            "{text}"
        );
    }
}
