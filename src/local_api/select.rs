//! `labelSelector` and `fieldSelector` of list and watch requests, as the apiserver parses
//! them (apimachinery `labels.Parse`, `fields.ParseSelector`), matched against the served
//! JSON objects.
//!
//! Pure. Label selectors: `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`.
//! Field selectors: `f=v`, `f==v`, `f!=v` on the fields the apiserver supports for the kind
//! (others are refused with its message, `field label not supported: f`).

use serde_json::Value;

use super::printers::Kind;

#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelReq {
    Eq(String, String),
    Ne(String, String),
    Exists(String),
    NotExists(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Selector {
    labels: Vec<LabelReq>,
    /// (JSON path, value, equal?)
    fields: Vec<(Vec<&'static str>, String, bool)>,
}

/// Why a selector was refused: the apiserver's 400 messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SelectError {
    /// A label requirement that does not parse (the term).
    Requirement(String),
    /// A field term with no operator (the term).
    Term(String),
    /// A field the apiserver does not select on for the kind.
    FieldNotSupported(String),
}

impl std::fmt::Display for SelectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SelectError::Requirement(term) => write!(f, "unable to parse requirement: {term:?}"),
            SelectError::Term(term) => {
                write!(f, "invalid selector: '{term}'; can't understand '{term}'")
            }
            SelectError::FieldNotSupported(field) => {
                write!(f, "field label not supported: {field}")
            }
        }
    }
}

impl std::error::Error for SelectError {}

/// Splits at commas outside parentheses.
fn split_terms(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out.into_iter()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect()
}

fn set_values(rest: &str) -> Option<Vec<String>> {
    let inner = rest.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(
        inner
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect(),
    )
}

fn parse_label(term: &str) -> Result<LabelReq, SelectError> {
    let bad = || SelectError::Requirement(term.to_string());
    if let Some(k) = term.strip_prefix('!') {
        return Ok(LabelReq::NotExists(k.trim().to_string()));
    }
    if let Some((k, v)) = term.split_once("!=") {
        return Ok(LabelReq::Ne(k.trim().into(), v.trim().into()));
    }
    if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
        return Ok(LabelReq::Eq(k.trim().into(), v.trim().into()));
    }
    let words: Vec<&str> = term.splitn(2, char::is_whitespace).collect();
    if let [key, rest] = words[..] {
        let rest = rest.trim_start();
        if let Some(set) = rest.strip_prefix("notin") {
            return Ok(LabelReq::NotIn(
                key.into(),
                set_values(set).ok_or_else(bad)?,
            ));
        }
        if let Some(set) = rest.strip_prefix("in") {
            return Ok(LabelReq::In(key.into(), set_values(set).ok_or_else(bad)?));
        }
        return Err(bad());
    }
    if term.contains(['(', ')', ' ']) {
        return Err(bad());
    }
    Ok(LabelReq::Exists(term.to_string()))
}

/// The field selectors the apiserver supports for each kind, and where they are.
fn field_path(kind: Kind, field: &str) -> Option<Vec<&'static str>> {
    let common: &[(&str, &[&str])] = &[
        ("metadata.name", &["metadata", "name"]),
        ("metadata.namespace", &["metadata", "namespace"]),
    ];
    let per_kind: &[(&str, &[&str])] = match kind {
        Kind::Pod => &[
            ("spec.nodeName", &["spec", "nodeName"]),
            ("spec.restartPolicy", &["spec", "restartPolicy"]),
            ("spec.schedulerName", &["spec", "schedulerName"]),
            ("spec.serviceAccountName", &["spec", "serviceAccountName"]),
            ("spec.hostNetwork", &["spec", "hostNetwork"]),
            ("status.phase", &["status", "phase"]),
            ("status.podIP", &["status", "podIP"]),
            ("status.nominatedNodeName", &["status", "nominatedNodeName"]),
        ],
        Kind::Node => &[("spec.unschedulable", &["spec", "unschedulable"])],
        Kind::Event => &[
            ("involvedObject.kind", &["involvedObject", "kind"]),
            ("involvedObject.namespace", &["involvedObject", "namespace"]),
            ("involvedObject.name", &["involvedObject", "name"]),
            ("involvedObject.uid", &["involvedObject", "uid"]),
            (
                "involvedObject.apiVersion",
                &["involvedObject", "apiVersion"],
            ),
            (
                "involvedObject.resourceVersion",
                &["involvedObject", "resourceVersion"],
            ),
            ("involvedObject.fieldPath", &["involvedObject", "fieldPath"]),
            ("reason", &["reason"]),
            ("reportingComponent", &["reportingComponent"]),
            ("source", &["source", "component"]),
            ("type", &["type"]),
        ],
    };
    common
        .iter()
        .chain(per_kind)
        .find(|(name, _)| *name == field)
        .map(|(_, path)| path.to_vec())
}

impl Selector {
    /// From the raw (decoded) query values; errors are the apiserver's 400 messages.
    pub(crate) fn parse(
        kind: Kind,
        labels: Option<&str>,
        fields: Option<&str>,
    ) -> Result<Self, SelectError> {
        let mut sel = Selector::default();
        for term in split_terms(labels.unwrap_or("")) {
            sel.labels.push(parse_label(term)?);
        }
        for term in split_terms(fields.unwrap_or("")) {
            let (field, value, eq) = if let Some((f, v)) = term.split_once("!=") {
                (f, v, false)
            } else if let Some((f, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (f, v, true)
            } else {
                return Err(SelectError::Term(term.to_string()));
            };
            let field = field.trim();
            let path = field_path(kind, field)
                .ok_or_else(|| SelectError::FieldNotSupported(field.to_string()))?;
            sel.fields.push((path, value.trim().to_string(), eq));
        }
        Ok(sel)
    }

    pub(crate) fn matches(&self, object: &Value) -> bool {
        let labels = object["metadata"].get("labels");
        let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        let labels_ok = self.labels.iter().all(|r| match r {
            LabelReq::Eq(k, v) => label(k) == Some(v.as_str()),
            LabelReq::Ne(k, v) => label(k) != Some(v.as_str()),
            LabelReq::Exists(k) => label(k).is_some(),
            LabelReq::NotExists(k) => label(k).is_none(),
            LabelReq::In(k, set) => label(k).is_some_and(|v| set.iter().any(|s| s == v)),
            LabelReq::NotIn(k, set) => label(k).is_none_or(|v| !set.iter().any(|s| s == v)),
        });
        labels_ok
            && self.fields.iter().all(|(path, want, eq)| {
                let mut cur = object;
                for p in path {
                    cur = &cur[*p];
                }
                let got = match cur {
                    Value::String(s) => s.clone(),
                    Value::Bool(b) => b.to_string(),
                    Value::Number(n) => n.to_string(),
                    _ => String::new(),
                };
                (got == *want) == *eq
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_and_field_selectors() {
        let pod = json!({"metadata": {"name": "web", "namespace": "default",
            "labels": {"app": "web", "tier": "front"}},
            "spec": {"nodeName": "n1", "hostNetwork": true}, "status": {"phase": "Running"}});
        let m = |l: &str, f: &str| {
            Selector::parse(Kind::Pod, Some(l), Some(f))
                .unwrap()
                .matches(&pod)
        };
        assert!(m("", ""));
        assert!(m("app=web", ""));
        assert!(m("app==web,tier", ""));
        assert!(!m("app!=web", ""));
        assert!(m("!missing", ""));
        assert!(!m("missing", ""));
        assert!(m("tier in (back, front)", ""));
        assert!(!m("tier notin (back,front)", ""));
        assert!(m("missing notin (x)", ""));
        assert!(m("", "metadata.name=web,status.phase=Running"));
        assert!(m("", "spec.nodeName==n1,metadata.namespace!=kube-system"));
        assert!(m("", "spec.hostNetwork=true"));
        assert!(!m("", "status.phase=Pending"));
        assert_eq!(
            Selector::parse(Kind::Pod, None, Some("spec.containers=x"))
                .unwrap_err()
                .to_string(),
            "field label not supported: spec.containers"
        );
        assert!(Selector::parse(Kind::Pod, Some("a in b"), None).is_err());
        let ev = json!({"involvedObject": {"name": "web", "namespace": "default", "uid": "u1"}});
        let s = Selector::parse(
            Kind::Event,
            None,
            Some("involvedObject.name=web,involvedObject.namespace=default,involvedObject.uid=u1"),
        )
        .unwrap();
        assert!(s.matches(&ev));
    }
}
