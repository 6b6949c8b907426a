//! `picolet get`, `describe pod`, `logs`: kubectl's output for the few reads a person at a
//! board's console needs, as a client of picolet's own node API (`local_api`).
//!
//! `get` asks for the server-side `Table` (`as=Table`, what kubectl asks for) and prints it
//! as kubectl's table printer does (upper-cased headers, `NAMESPACE` first with `-A`,
//! priority columns with `-o wide`, Go `tabwriter` min width 6 and padding 3). `describe
//! pod` mirrors kubectl's `describePod` over the served JSON. `logs` streams `pods/log`.
//!
//! Deliberately different from kubectl: times in `describe` are printed in UTC (kubectl
//! uses the local zone; a board's is usually UTC), `-o yaml` is a plain YAML emitter
//! (keys sorted like kubectl, but long strings are not folded), and only pods, nodes and
//! events are known.

use std::fmt::Write as _;
use std::io::Write as _;

use serde_json::Value;

use super::tabwriter::align;
use crate::clock::{self, UnixNanos};
use crate::kube::{ApiError, Client};
use crate::local_api::printers::age;

/// What kubectl's `get` sends: a `Table`, else plain JSON.
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

/// A resource kubectl knows under several names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resource {
    Pods,
    Nodes,
    Events,
}

impl Resource {
    pub(crate) fn parse(s: &str) -> Option<Resource> {
        match s {
            "pods" | "pod" | "po" => Some(Resource::Pods),
            "nodes" | "node" | "no" => Some(Resource::Nodes),
            "events" | "event" | "ev" => Some(Resource::Events),
            _ => None,
        }
    }

    fn plural(self) -> &'static str {
        match self {
            Resource::Pods => "pods",
            Resource::Nodes => "nodes",
            Resource::Events => "events",
        }
    }
}

/// The flags of `get`, `describe` and `logs` (kubectl's names).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Request {
    pub namespace: String,
    pub all_namespaces: bool,
    /// `-o`: empty, `wide`, `json`, `yaml`, `name`.
    pub output: String,
    pub container: Option<String>,
    pub follow: bool,
    pub tail: Option<i64>,
    pub previous: bool,
    pub timestamps: bool,
}

fn collection(r: Resource, req: &Request, name: Option<&str>) -> String {
    let mut path = String::from("/api/v1/");
    if r != Resource::Nodes && !(req.all_namespaces && name.is_none()) {
        let _ = write!(path, "namespaces/{}/", req.namespace);
    }
    path.push_str(r.plural());
    if let Some(n) = name {
        path.push('/');
        path.push_str(n);
    }
    path
}

/// `picolet get RESOURCE [NAME]`: the text to print on stdout, or the line for stderr
/// (`No resources found …`) as `Err`.
pub(crate) async fn get(
    client: &Client,
    r: Resource,
    name: Option<&str>,
    req: &Request,
) -> Result<String, KubectlError> {
    let path = collection(r, req, name);
    match req.output.as_str() {
        "" | "wide" => {
            let body = client
                .get_as(&path, TABLE)
                .await
                .map_err(KubectlError::Api)?;
            let table: Value = serde_json::from_slice(&body).map_err(KubectlError::Decode)?;
            let with_ns = req.all_namespaces && r != Resource::Nodes && name.is_none();
            if table["rows"].as_array().is_none_or(Vec::is_empty) {
                let one_namespace = !(with_ns || r == Resource::Nodes);
                return Err(KubectlError::NoResources {
                    namespace: one_namespace.then(|| req.namespace.clone()),
                });
            }
            Ok(print_table(&table, req.output == "wide", with_ns))
        }
        "json" | "yaml" | "name" => {
            let body = client
                .get_as(&path, "application/json")
                .await
                .map_err(KubectlError::Api)?;
            let mut v: Value = serde_json::from_slice(&body).map_err(KubectlError::Decode)?;
            let kind = match r {
                Resource::Pods => "Pod",
                Resource::Nodes => "Node",
                Resource::Events => "Event",
            };
            if name.is_none() {
                // kubectl prints a list as a `List` of typed items.
                let mut items = v["items"].take();
                for item in items.as_array_mut().into_iter().flatten() {
                    if let Some(o) = item.as_object_mut() {
                        o.entry("apiVersion").or_insert("v1".into());
                        o.entry("kind").or_insert(kind.into());
                    }
                }
                v = serde_json::json!({"apiVersion": "v1", "items": items, "kind": "List",
                    "metadata": {"resourceVersion": ""}});
            }
            let mut out = String::new();
            match req.output.as_str() {
                "json" => {
                    json(&v, 0, &mut out);
                    out.push('\n');
                }
                "yaml" => yaml(&v, 0, &mut out),
                _ => {
                    let items = match v["items"].as_array() {
                        Some(items) => items.iter().collect(),
                        None => vec![&v],
                    };
                    for i in items {
                        let n = i["metadata"]["name"].as_str().unwrap_or("");
                        let _ = writeln!(out, "{}/{n}", kind.to_ascii_lowercase());
                    }
                }
            }
            Ok(out)
        }
        other => Err(KubectlError::Output(other.to_string())),
    }
}

/// Why a command printed nothing on stdout; the text is the line for stderr, in kubectl's
/// words where kubectl has them.
#[derive(Debug)]
pub(crate) enum KubectlError {
    /// Nothing to list (kubectl says so on stderr and exits 0): `No resources found`, or
    /// `… in NS namespace.` when one namespace was asked about.
    NoResources { namespace: Option<String> },
    /// The node API's answer, or no answer (see the `Display`).
    Api(ApiError),
    /// `logs` without `-c`: the pod itself could not be read (kubectl finds the pod first,
    /// and says so in its own words).
    PodLookup { error: ApiError, namespace: String },
    /// An answer that is not the JSON asked for.
    Decode(serde_json::Error),
    /// `logs` of a pod without containers (the pod's name).
    NoContainers(String),
    /// An `-o` kubectl does not know.
    Output(String),
    /// A resource picolet does not serve.
    UnknownResource(String),
    /// `node-shutdown` failed.
    Shutdown(ApiError),
    /// A verb with the wrong arguments: its usage line.
    Usage(&'static str),
}

impl std::fmt::Display for KubectlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KubectlError::NoResources { namespace: None } => f.write_str("No resources found"),
            KubectlError::NoResources {
                namespace: Some(ns),
            } => write!(f, "No resources found in {ns} namespace."),
            KubectlError::Api(e) => api_error(e, f),
            KubectlError::PodLookup { error, namespace } => {
                let e = ApiText(error).to_string();
                match e.strip_prefix("Error") {
                    Some(rest) => write!(f, "error: error{rest} in namespace {namespace:?}"),
                    None => f.write_str(&e),
                }
            }
            KubectlError::Decode(e) => e.fmt(f),
            KubectlError::NoContainers(name) => write!(f, "pod {name} has no containers"),
            KubectlError::Output(other) => write!(
                f,
                "unable to match a printer suitable for the output format {other:?}, allowed formats are: json,name,wide,yaml"
            ),
            KubectlError::UnknownResource(resource) => write!(
                f,
                "the server doesn't have a resource type {resource:?} (picolet knows pods, nodes, events)"
            ),
            KubectlError::Shutdown(e) => write!(f, "picolet node-shutdown: {e}"),
            KubectlError::Usage(line) => write!(f, "usage: {line}"),
        }
    }
}

impl std::error::Error for KubectlError {}

/// [`api_error`]'s text, for the lines that edit it.
struct ApiText<'a>(&'a ApiError);

impl std::fmt::Display for ApiText<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        api_error(self.0, f)
    }
}

/// kubectl: `Error from server (NotFound): pods "x" not found`.
fn api_error(e: &ApiError, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    match e {
        ApiError::Status {
            reason, message, ..
        } if !message.is_empty() => match reason.as_str() {
            "" => write!(f, "Error from server: {message}"),
            r => write!(f, "Error from server ({r}): {message}"),
        },
        // Nothing (of picolet's) answers: say where to look, not only what failed.
        ApiError::Connect { .. } | ApiError::Timeout { .. } => write!(
            f,
            "{e}\npicolet's node API does not answer there: is `picolet run` running with this --root-dir? Its log says \"node API: serving …\" once it listens, or \"cannot listen on …\" and who holds the port"
        ),
        ApiError::Status { code: 401, .. } => write!(
            f,
            "{e}\nthe server refused this kubeconfig's token: another program may hold the node API's port (its log names it), or the kubeconfig is an old one"
        ),
        e => std::fmt::Display::fmt(e, f),
    }
}

/// kubectl's table printer over a server-side `Table`.
pub(crate) fn print_table(table: &Value, wide: bool, with_ns: bool) -> String {
    let none = Vec::new();
    let cols = table["columnDefinitions"].as_array().unwrap_or(&none);
    let shown: Vec<bool> = cols
        .iter()
        .map(|c| wide || c["priority"].as_i64().unwrap_or(0) == 0)
        .collect();
    let mut text = String::new();
    let mut row = Vec::new();
    if with_ns {
        row.push("NAMESPACE".to_string());
    }
    for (c, _) in cols.iter().zip(&shown).filter(|(_, s)| **s) {
        row.push(c["name"].as_str().unwrap_or("").to_ascii_uppercase());
    }
    text.push_str(&row.join("\t"));
    text.push('\n');
    for r in table["rows"].as_array().unwrap_or(&none) {
        row.clear();
        if with_ns {
            let ns = &r["object"]["metadata"]["namespace"];
            row.push(ns.as_str().unwrap_or("").to_string());
        }
        let cells = r["cells"].as_array().unwrap_or(&none);
        for (cell, _) in cells.iter().zip(&shown).filter(|(_, s)| **s) {
            row.push(cell_text(cell));
        }
        text.push_str(&row.join("\t"));
        text.push('\n');
    }
    align(&text, 6, 3)
}

/// kubectl: a string cell up to its first line break (`...` after), others as `%v`.
fn cell_text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => match s.find(['\n', '\r', '\x0c']) {
            Some(i) => format!("{}...", &s[..i]),
            None => s.clone(),
        },
        other => other.to_string(),
    }
}

/// `picolet logs NAME`: streams the log to stdout. Without `-c`, the pod's default
/// container (kubectl: the `kubectl.kubernetes.io/default-container` annotation, else the
/// first; a note on stderr when the pod has several).
pub(crate) async fn logs(client: &Client, name: &str, req: &Request) -> Result<(), KubectlError> {
    let container = match &req.container {
        Some(c) => c.clone(),
        None => {
            let body = client
                .get_as(
                    &collection(Resource::Pods, req, Some(name)),
                    "application/json",
                )
                .await
                .map_err(|error| KubectlError::PodLookup {
                    error,
                    namespace: req.namespace.clone(),
                })?;
            let pod: Value = serde_json::from_slice(&body).map_err(KubectlError::Decode)?;
            let names: Vec<&str> = pod["spec"]["containers"]
                .as_array()
                .map(|cs| cs.iter().filter_map(|c| c["name"].as_str()).collect())
                .unwrap_or_default();
            let annotated =
                pod["metadata"]["annotations"]["kubectl.kubernetes.io/default-container"].as_str();
            let chosen = annotated
                .filter(|a| names.contains(a))
                .or(names.first().copied())
                .ok_or_else(|| KubectlError::NoContainers(name.to_string()))?;
            if names.len() > 1 && annotated.is_none() {
                eprintln!(
                    "Defaulted container {chosen:?} out of: {}",
                    names.join(", ")
                );
            }
            chosen.to_string()
        }
    };
    let mut path = collection(Resource::Pods, req, Some(name));
    let _ = write!(path, "/log?container={container}");
    for (flag, key) in [
        (req.follow, "follow"),
        (req.previous, "previous"),
        (req.timestamps, "timestamps"),
    ] {
        if flag {
            let _ = write!(path, "&{key}=true");
        }
    }
    if let Some(n) = req.tail {
        let _ = write!(path, "&tailLines={n}");
    }
    let mut stdout = std::io::stdout();
    client
        .stream(&path, &mut |chunk: &[u8]| {
            stdout
                .write_all(chunk)
                .and_then(|()| stdout.flush())
                .is_ok()
        })
        .await
        .map_err(KubectlError::Api)
}

/// `picolet describe pod NAME`: kubectl's `describePod`, its events included.
pub(crate) async fn describe_pod(
    client: &Client,
    name: &str,
    req: &Request,
    now: UnixNanos,
) -> Result<String, KubectlError> {
    let body = client
        .get_as(
            &collection(Resource::Pods, req, Some(name)),
            "application/json",
        )
        .await
        .map_err(KubectlError::Api)?;
    let pod: Value = serde_json::from_slice(&body).map_err(KubectlError::Decode)?;
    let meta = &pod["metadata"];
    // kubectl: events of this object (a mirror pod's by the static pod's UID).
    let uid = meta["annotations"]["kubernetes.io/config.mirror"]
        .as_str()
        .or(meta["uid"].as_str())
        .unwrap_or("");
    let selector = format!(
        "involvedObject.name={},involvedObject.namespace={},involvedObject.uid={uid}",
        s(meta, "name"),
        s(meta, "namespace")
    );
    let path = format!(
        "{}{}",
        collection(Resource::Events, req, None),
        crate::kube::query(&[("fieldSelector", &selector)])
    );
    let events = match client.get_as(&path, "application/json").await {
        Ok(b) => serde_json::from_slice::<Value>(&b).ok(),
        Err(_) => None,
    };
    Ok(describe(&pod, events.as_ref(), now))
}

/// A stable insertion sort by a string field: the few items describe sorts need no
/// generic sort of their own.
fn sort_by_field(items: &mut [&Value], key: &str) {
    for i in 1..items.len() {
        let mut j = i;
        while j > 0 && s(items[j - 1], key) > s(items[j], key) {
            items.swap(j - 1, j);
            j -= 1;
        }
    }
}

fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or("")
}

fn arr<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v[key].as_array().map_or(&[], Vec::as_slice)
}

/// kubectl's `printLabelsMultiline` / `printAnnotationsMultiline`.
fn multiline(out: &mut String, title: &str, map: &Value, annotations: bool) {
    let _ = write!(out, "{title}:\t");
    let mut keys: Vec<(&String, &Value)> = map
        .as_object()
        .map(|m| m.iter().collect())
        .unwrap_or_default();
    keys.retain(|(k, _)| *k != "kubectl.kubernetes.io/last-applied-configuration");
    if keys.is_empty() {
        out.push_str("<none>\n");
    }
    for (i, (k, v)) in keys.into_iter().enumerate() {
        if i != 0 {
            out.push('\t');
        }
        let v = v.as_str().unwrap_or("");
        if !annotations {
            let _ = writeln!(out, "{k}={v}");
            continue;
        }
        let v = v.strip_suffix('\n').unwrap_or(v);
        // kubectl: maxAnnotationLen 140; longer or multi-line values go below the key.
        if v.len() + k.len() + 2 > 140 || v.contains('\n') {
            let _ = writeln!(out, "{k}:");
            for line in v.split('\n') {
                let cut = if line.len() > 138 {
                    let mut at = 138;
                    while !line.is_char_boundary(at) {
                        at -= 1;
                    }
                    format!("{}...", &line[..at])
                } else {
                    line.to_string()
                };
                let _ = writeln!(out, "\t  {cut}");
            }
        } else {
            let _ = writeln!(out, "{k}: {v}");
        }
    }
}

/// Go's `time.RFC1123Z` in UTC: `Mon, 02 Jan 2006 15:04:05 +0000`.
pub(crate) fn rfc1123z(ts: &str) -> String {
    let Some(t) = clock::parse_rfc3339(ts) else {
        return ts.to_string();
    };
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let day = (t / 1_000_000_000).div_euclid(86_400).rem_euclid(7) as usize;
    let month: usize = ts.get(5..7).and_then(|m| m.parse().ok()).unwrap_or(1);
    format!(
        "{}, {} {} {} {} +0000",
        DAYS[day],
        ts.get(8..10).unwrap_or(""),
        MONTHS[month.clamp(1, 12) - 1],
        ts.get(0..4).unwrap_or(""),
        ts.get(11..19).unwrap_or("")
    )
}

/// kubectl's `describePod` over the served pod and its events (kubectl `describe.go`).
pub(crate) fn describe(pod: &Value, events: Option<&Value>, now: UnixNanos) -> String {
    let (meta, spec, status) = (&pod["metadata"], &pod["spec"], &pod["status"]);
    let mut o = String::new();
    let _ = writeln!(o, "Name:\t{}", s(meta, "name"));
    let _ = writeln!(o, "Namespace:\t{}", s(meta, "namespace"));
    if let Some(p) = spec["priority"].as_i64() {
        let _ = writeln!(o, "Priority:\t{p}");
    }
    for (key, title) in [
        ("priorityClassName", "Priority Class Name"),
        ("runtimeClassName", "Runtime Class Name"),
        ("serviceAccountName", "Service Account"),
    ] {
        if !s(spec, key).is_empty() {
            let _ = writeln!(o, "{title}:\t{}", s(spec, key));
        }
    }
    match s(spec, "nodeName") {
        "" => o.push_str("Node:\t<none>\n"),
        n => {
            let _ = writeln!(o, "Node:\t{n}/{}", s(status, "hostIP"));
        }
    }
    if let Some(t) = status["startTime"].as_str() {
        let _ = writeln!(o, "Start Time:\t{}", rfc1123z(t));
    }
    multiline(&mut o, "Labels", &meta["labels"], false);
    multiline(&mut o, "Annotations", &meta["annotations"], true);
    let phase = s(status, "phase");
    match meta["deletionTimestamp"].as_str() {
        Some(t) if phase != "Failed" && phase != "Succeeded" => {
            let _ = writeln!(o, "Status:\tTerminating (lasts {})", age(t, now));
            let grace = meta["deletionGracePeriodSeconds"].as_i64().unwrap_or(0);
            let _ = writeln!(o, "Termination Grace Period:\t{grace}s");
        }
        _ => {
            let _ = writeln!(o, "Status:\t{phase}");
        }
    }
    for (key, title) in [("reason", "Reason"), ("message", "Message")] {
        if !s(status, key).is_empty() {
            let _ = writeln!(o, "{title}:\t{}", s(status, key));
        }
    }
    let seccomp = &spec["securityContext"]["seccompProfile"];
    if seccomp.is_object() {
        let _ = writeln!(o, "SeccompProfile:\t{}", s(seccomp, "type"));
        if s(seccomp, "type") == "Localhost" {
            let _ = writeln!(o, "LocalhostProfile:\t{}", s(seccomp, "localhostProfile"));
        }
    }
    let _ = writeln!(o, "IP:\t{}", s(status, "podIP"));
    let ips = arr(status, "podIPs");
    if ips.is_empty() {
        o.push_str("IPs:\t<none>\n");
    } else {
        o.push_str("IPs:\n");
        for ip in ips {
            let _ = writeln!(o, "  IP:\t{}", s(ip, "ip"));
        }
    }
    if let Some(c) = arr(meta, "ownerReferences")
        .iter()
        .find(|r| r["controller"] == true)
    {
        let _ = writeln!(o, "Controlled By:\t{}/{}", s(c, "kind"), s(c, "name"));
    }
    if !s(status, "nominatedNodeName").is_empty() {
        let _ = writeln!(o, "NominatedNodeName:\t{}", s(status, "nominatedNodeName"));
    }
    if !arr(spec, "initContainers").is_empty() {
        containers(
            &mut o,
            "Init Containers",
            pod,
            "initContainers",
            "initContainerStatuses",
        );
    }
    containers(&mut o, "Containers", pod, "containers", "containerStatuses");
    let gates = arr(spec, "readinessGates");
    let conds = arr(status, "conditions");
    if !gates.is_empty() {
        o.push_str("Readiness Gates:\n  Type\tStatus\n");
        for g in gates {
            let t = s(g, "conditionType");
            let st = conds
                .iter()
                .find(|c| s(c, "type") == t)
                .map_or("<none>", |c| s(c, "status"));
            let _ = writeln!(o, "  {t} \t{st} ");
        }
    }
    if !conds.is_empty() {
        o.push_str("Conditions:\n  Type\tStatus\n");
        for c in conds {
            let _ = writeln!(o, "  {} \t{} ", s(c, "type"), s(c, "status"));
        }
    }
    volumes(&mut o, arr(spec, "volumes"));
    let _ = writeln!(o, "QoS Class:\t{}", s(status, "qosClass"));
    multiline(&mut o, "Node-Selectors", &spec["nodeSelector"], false);
    tolerations(&mut o, arr(spec, "tolerations"));
    let items = events.map_or(&[][..], |e| arr(e, "items"));
    if events.is_some() && items.is_empty() {
        // kubectl: in the same aligned block as the lines above.
        o.push_str("Events:\t<none>\n");
    }
    let mut out = align(&o, 0, 2);
    if !items.is_empty() {
        // kubectl flushes its tabwriter first: the events align on their own.
        out.push_str(&describe_events(items, now));
    }
    out
}

fn tolerations(o: &mut String, tols: &[Value]) {
    o.push_str("Tolerations:\t");
    if tols.is_empty() {
        o.push_str("<none>\n");
    }
    let mut tols: Vec<&Value> = tols.iter().collect();
    sort_by_field(&mut tols, "key");
    for (i, t) in tols.into_iter().enumerate() {
        if i != 0 {
            o.push('\t');
        }
        o.push_str(s(t, "key"));
        if !s(t, "value").is_empty() {
            let _ = write!(o, "={}", s(t, "value"));
        }
        if !s(t, "effect").is_empty() {
            let _ = write!(o, ":{}", s(t, "effect"));
        }
        if s(t, "operator") == "Exists" && s(t, "value").is_empty() {
            let alone = s(t, "key").is_empty() && s(t, "effect").is_empty();
            o.push_str(if alone { "op=Exists" } else { " op=Exists" });
        }
        if let Some(secs) = t["tolerationSeconds"].as_i64() {
            let _ = write!(o, " for {secs}s");
        }
        o.push('\n');
    }
}

/// kubectl `describeContainers`: one section per container of `key` (`containers`,
/// `initContainers`), with its status from `statuses`.
fn containers(o: &mut String, label: &str, pod: &Value, key: &str, statuses: &str) {
    let list = arr(&pod["spec"], key);
    let none = if list.is_empty() { " <none>" } else { "" };
    let _ = writeln!(o, "{label}:{none}");
    for c in list {
        let name = s(c, "name");
        let st = arr(&pod["status"], statuses)
            .iter()
            .find(|st| s(st, "name") == name);
        let _ = writeln!(o, "  {name}:");
        if let Some(st) = st {
            let _ = writeln!(o, "    Container ID:\t{}", s(st, "containerID"));
        }
        let _ = writeln!(o, "    Image:\t{}", s(c, "image"));
        if let Some(st) = st {
            let _ = writeln!(o, "    Image ID:\t{}", s(st, "imageID"));
        }
        container_ports(o, c);
        container_seccomp(o, c);
        command_and_args(o, c);
        if let Some(st) = st {
            container_status(o, st);
        }
        container_resources(o, c);
        for (title, field) in [
            ("Liveness", "livenessProbe"),
            ("Readiness", "readinessProbe"),
            ("Startup", "startupProbe"),
        ] {
            if c[field].is_object() {
                let _ = writeln!(o, "    {title}:\t{}", probe(&c[field]));
            }
        }
        env_from(o, c);
        env(o, pod, c);
        container_mounts(o, c);
    }
}

/// kubectl: `Port:`/`Host Port:` lines (plural with several).
fn container_ports(o: &mut String, c: &Value) {
    let ports = arr(c, "ports");
    for (title, field) in [("Port", "containerPort"), ("Host Port", "hostPort")] {
        let list: Vec<String> = ports
            .iter()
            .map(|p| format!("{}/{}", p[field].as_i64().unwrap_or(0), s(p, "protocol")))
            .collect();
        match list.len() {
            0 => {
                let _ = writeln!(o, "    {title}:\t<none>");
            }
            1 => {
                let _ = writeln!(o, "    {title}:\t{}", list[0]);
            }
            _ => {
                let _ = writeln!(o, "    {title}s:\t{}", list.join(", "));
            }
        }
    }
}

/// kubectl: the container's `SeccompProfile` (and its `LocalhostProfile`), when set.
fn container_seccomp(o: &mut String, c: &Value) {
    let seccomp = &c["securityContext"]["seccompProfile"];
    if seccomp.is_object() {
        let _ = writeln!(o, "    SeccompProfile:\t{}", s(seccomp, "type"));
        if s(seccomp, "type") == "Localhost" {
            let _ = writeln!(
                o,
                "      LocalhostProfile:\t{}",
                s(seccomp, "localhostProfile")
            );
        }
    }
}

/// kubectl: `Command:` and `Args:`, one line each (multi-line items split).
fn command_and_args(o: &mut String, c: &Value) {
    for (title, field) in [("Command", "command"), ("Args", "args")] {
        let items = arr(c, field);
        if !items.is_empty() {
            let _ = writeln!(o, "    {title}:");
            for item in items {
                for line in item.as_str().unwrap_or("").split('\n') {
                    let _ = writeln!(o, "      {line}");
                }
            }
        }
    }
}

/// kubectl: `State`, `Last State` (when it terminated), `Ready`, `Restart Count`.
fn container_status(o: &mut String, st: &Value) {
    state(o, "State", &st["state"]);
    if st["lastState"]["terminated"].is_object() {
        state(o, "Last State", &st["lastState"]);
    }
    let ready = if st["ready"] == true { "True" } else { "False" };
    let _ = writeln!(o, "    Ready:\t{ready}");
    let restarts = st["restartCount"].as_i64().unwrap_or(0);
    let _ = writeln!(o, "    Restart Count:\t{restarts}");
}

/// kubectl: `Limits:` and `Requests:`, when any.
fn container_resources(o: &mut String, c: &Value) {
    for (title, field) in [("Limits", "limits"), ("Requests", "requests")] {
        if let Some(m) = c["resources"][field].as_object().filter(|m| !m.is_empty()) {
            let _ = writeln!(o, "    {title}:");
            for (k, v) in m {
                let v = v.as_str().map_or_else(|| v.to_string(), str::to_string);
                let _ = writeln!(o, "      {k}:\t{v}");
            }
        }
    }
}

/// kubectl: `Environment Variables from:` — each ConfigMap or Secret, its prefix.
fn env_from(o: &mut String, c: &Value) {
    let env_from = arr(c, "envFrom");
    if env_from.is_empty() {
        return;
    }
    o.push_str("    Environment Variables from:\n");
    for e in env_from {
        let (from, r) = if e["configMapRef"].is_object() {
            ("ConfigMap", &e["configMapRef"])
        } else {
            ("Secret", &e["secretRef"])
        };
        let optional = r["optional"] == true;
        match s(e, "prefix") {
            "" => {
                let _ = writeln!(o, "      {}\t{from}\tOptional: {optional}", s(r, "name"));
            }
            p => {
                let _ = writeln!(
                    o,
                    "      {}\t{from} with prefix '{p}'\tOptional: {optional}",
                    s(r, "name")
                );
            }
        }
    }
}

/// kubectl: `Mounts:`, sorted by path, with `ro`/`rw` and the sub-path.
fn container_mounts(o: &mut String, c: &Value) {
    let mut mounts: Vec<&Value> = arr(c, "volumeMounts").iter().collect();
    let none = if mounts.is_empty() { "\t<none>" } else { "" };
    let _ = writeln!(o, "    Mounts:{none}");
    sort_by_field(&mut mounts, "mountPath");
    for m in mounts {
        let mut flags = vec![if m["readOnly"] == true { "ro" } else { "rw" }.to_string()];
        if !s(m, "subPath").is_empty() {
            flags.push(format!("path={:?}", s(m, "subPath")));
        }
        let _ = writeln!(
            o,
            "      {} from {} ({})",
            s(m, "mountPath"),
            s(m, "name"),
            flags.join(",")
        );
    }
}

fn env(o: &mut String, pod: &Value, c: &Value) {
    let vars = arr(c, "env");
    let none = if vars.is_empty() { "\t<none>" } else { "" };
    let _ = writeln!(o, "    Environment:{none}");
    for e in vars {
        let name = s(e, "name");
        let from = &e["valueFrom"];
        if !from.is_object() {
            for (i, line) in s(e, "value").split('\n').enumerate() {
                if i == 0 {
                    let _ = writeln!(o, "      {name}:\t{line}");
                } else {
                    let _ = writeln!(o, "      \t{line}");
                }
            }
        } else if from["fieldRef"].is_object() {
            let r = &from["fieldRef"];
            let value = field_value(pod, s(r, "fieldPath"));
            let _ = writeln!(
                o,
                "      {name}:\t{value} ({}:{})",
                s(r, "apiVersion"),
                s(r, "fieldPath")
            );
        } else if from["resourceFieldRef"].is_object() {
            let r = &from["resourceFieldRef"];
            let res = s(r, "resource");
            let (kind, what) = res.split_once('.').unwrap_or(("", res));
            let v = &c["resources"][kind][what];
            let value = match v.as_str() {
                Some(v) => v.to_string(),
                None if kind == "limits" => "node allocatable".to_string(),
                None => "0".to_string(),
            };
            let _ = writeln!(o, "      {name}:\t{value} ({res})");
        } else {
            let (r, what) = if from["secretKeyRef"].is_object() {
                (&from["secretKeyRef"], "in secret")
            } else {
                (&from["configMapKeyRef"], "of config map")
            };
            let _ = writeln!(
                o,
                "      {name}:\t<set to the key '{}' {what} '{}'>\tOptional: {}",
                s(r, "key"),
                s(r, "name"),
                r["optional"] == true
            );
        }
    }
}

/// kubectl: `fieldpath.ExtractFieldPathAsString` for the paths a static pod uses.
fn field_value(pod: &Value, path: &str) -> String {
    if let Some(rest) = path.strip_prefix("metadata.labels['") {
        let key = rest.strip_suffix("']").unwrap_or(rest);
        return s(&pod["metadata"]["labels"], key).to_string();
    }
    if let Some(rest) = path.strip_prefix("metadata.annotations['") {
        let key = rest.strip_suffix("']").unwrap_or(rest);
        return s(&pod["metadata"]["annotations"], key).to_string();
    }
    let mut v = pod;
    for part in path.split('.') {
        v = &v[part];
    }
    v.as_str().map_or_else(String::new, str::to_string)
}

fn probe(p: &Value) -> String {
    let n = |k: &str| p[k].as_i64().unwrap_or(0);
    let attrs = format!(
        "delay={}s timeout={}s period={}s #success={} #failure={}",
        n("initialDelaySeconds"),
        n("timeoutSeconds"),
        n("periodSeconds"),
        n("successThreshold"),
        n("failureThreshold")
    );
    let port = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_string);
    if p["exec"].is_object() {
        let cmd: Vec<&str> = arr(&p["exec"], "command")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        format!("exec [{}] {attrs}", cmd.join(" "))
    } else if p["httpGet"].is_object() {
        let h = &p["httpGet"];
        let host = s(h, "host");
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host.to_string()
        };
        format!(
            "http-get {}://{host}:{}{} {attrs}",
            s(h, "scheme").to_ascii_lowercase(),
            port(&h["port"]),
            s(h, "path")
        )
    } else if p["tcpSocket"].is_object() {
        let t = &p["tcpSocket"];
        format!("tcp-socket {}:{} {attrs}", s(t, "host"), port(&t["port"]))
    } else if p["grpc"].is_object() {
        let g = &p["grpc"];
        format!(
            "grpc <pod>:{} {} {attrs}",
            port(&g["port"]),
            s(g, "service")
        )
    } else {
        format!("unknown {attrs}")
    }
}

fn state(o: &mut String, title: &str, st: &Value) {
    if st["running"].is_object() {
        let _ = writeln!(o, "    {title}:\tRunning");
        let t = s(&st["running"], "startedAt");
        let _ = writeln!(o, "      Started:\t{}", rfc1123z(t));
    } else if st["terminated"].is_object() {
        let t = &st["terminated"];
        let _ = writeln!(o, "    {title}:\tTerminated");
        for (key, name) in [("reason", "Reason"), ("message", "Message")] {
            if !s(t, key).is_empty() {
                let _ = writeln!(o, "      {name}:\t{}", s(t, key));
            }
        }
        let _ = writeln!(
            o,
            "      Exit Code:\t{}",
            t["exitCode"].as_i64().unwrap_or(0)
        );
        if let Some(sig) = t["signal"].as_i64().filter(|s| *s > 0) {
            let _ = writeln!(o, "      Signal:\t{sig}");
        }
        let _ = writeln!(o, "      Started:\t{}", go_time(s(t, "startedAt")));
        let _ = writeln!(o, "      Finished:\t{}", go_time(s(t, "finishedAt")));
    } else {
        let _ = writeln!(o, "    {title}:\tWaiting");
        if let Some(r) = st["waiting"]["reason"].as_str().filter(|r| !r.is_empty()) {
            let _ = writeln!(o, "      Reason:\t{r}");
        }
    }
}

/// A zero Go time prints as `Mon, 01 Jan 0001 00:00:00 +0000`.
fn go_time(ts: &str) -> String {
    if ts.is_empty() {
        "Mon, 01 Jan 0001 00:00:00 +0000".to_string()
    } else {
        rfc1123z(ts)
    }
}

fn volumes(o: &mut String, vols: &[Value]) {
    if vols.is_empty() {
        o.push_str("Volumes:\t<none>\n");
        return;
    }
    o.push_str("Volumes:\n");
    for v in vols {
        let _ = writeln!(o, "  {}:", s(v, "name"));
        let optional = |r: &Value| r["optional"] == true;
        if let Some(h) = v.get("hostPath") {
            let t = h["type"].as_str().unwrap_or("<none>");
            let _ = write!(
                o,
                "    Type:\tHostPath (bare host directory volume)\n    Path:\t{}\n    HostPathType:\t{t}\n",
                s(h, "path")
            );
        } else if let Some(e) = v.get("emptyDir") {
            let limit = match e["sizeLimit"].as_str() {
                Some(l) if l != "0" => l,
                _ => "<unset>",
            };
            let _ = write!(
                o,
                "    Type:\tEmptyDir (a temporary directory that shares a pod's lifetime)\n    Medium:\t{}\n    SizeLimit:\t{limit}\n",
                s(e, "medium")
            );
        } else if let Some(sec) = v.get("secret") {
            let _ = write!(
                o,
                "    Type:\tSecret (a volume populated by a Secret)\n    SecretName:\t{}\n    Optional:\t{}\n",
                s(sec, "secretName"),
                optional(sec)
            );
        } else if let Some(cm) = v.get("configMap") {
            let _ = write!(
                o,
                "    Type:\tConfigMap (a volume populated by a ConfigMap)\n    Name:\t{}\n    Optional:\t{}\n",
                s(cm, "name"),
                optional(cm)
            );
        } else if let Some(p) = v.get("projected") {
            o.push_str(
                "    Type:\tProjected (a volume that contains injected data from multiple sources)\n",
            );
            for src in arr(p, "sources") {
                if let Some(r) = src.get("secret") {
                    let _ = write!(
                        o,
                        "    SecretName:\t{}\n    Optional:\t{}\n",
                        s(r, "name"),
                        optional(r)
                    );
                } else if src.get("downwardAPI").is_some() {
                    o.push_str("    DownwardAPI:\ttrue\n");
                } else if let Some(r) = src.get("configMap") {
                    let _ = write!(
                        o,
                        "    ConfigMapName:\t{}\n    Optional:\t{}\n",
                        s(r, "name"),
                        optional(r)
                    );
                } else if let Some(t) = src.get("serviceAccountToken") {
                    let secs = t["expirationSeconds"].as_i64().unwrap_or(0);
                    let _ = writeln!(o, "    TokenExpirationSeconds:\t{secs}");
                }
            }
        } else if let Some(d) = v.get("downwardAPI") {
            o.push_str("    Type:\tDownwardAPI (a volume populated by information about the pod)\n    Items:\n");
            for item in arr(d, "items") {
                if let Some(f) = item.get("fieldRef") {
                    let _ = writeln!(o, "      {} -> {}", s(f, "fieldPath"), s(item, "path"));
                } else if let Some(r) = item.get("resourceFieldRef") {
                    let _ = writeln!(o, "      {} -> {}", s(r, "resource"), s(item, "path"));
                }
            }
        } else {
            o.push_str("  <unknown>\n");
        }
    }
}

/// kubectl's `DescribeEvents`: its own aligned block, oldest last-seen first.
fn describe_events(items: &[Value], now: UnixNanos) -> String {
    let mut items: Vec<&Value> = items.iter().collect();
    // RFC 3339 in UTC sorts as text.
    sort_by_field(&mut items, "lastTimestamp");
    let mut o = String::from(
        "Events:\n  Type\tReason\tAge\tFrom\tMessage\n  ----\t------\t----\t----\t-------\n",
    );
    for e in items {
        let first = match e["eventTime"].as_str() {
            Some(t) => age(t, now),
            None => age(s(e, "firstTimestamp"), now),
        };
        let count = e["count"].as_i64().unwrap_or(0);
        let interval = if let Some(series) = e["series"].as_object() {
            let last = series
                .get("lastObservedTime")
                .and_then(Value::as_str)
                .unwrap_or("");
            let n = series.get("count").and_then(Value::as_i64).unwrap_or(0);
            format!("{} (x{n} over {first})", age(last, now))
        } else if count > 1 {
            format!(
                "{} (x{count} over {first})",
                age(s(e, "lastTimestamp"), now)
            )
        } else {
            first
        };
        let source = match s(&e["source"], "component") {
            "" => s(e, "reportingComponent"),
            c => c,
        };
        let _ = writeln!(
            o,
            "  {}\t{}\t{interval}\t{source}\t{}",
            s(e, "type"),
            s(e, "reason"),
            s(e, "message").trim()
        );
    }
    align(&o, 0, 2)
}

/// JSON as kubectl prints it: sorted keys, four-space indent.
pub(crate) fn json(v: &Value, indent: usize, out: &mut String) {
    let pad = |n: usize, out: &mut String| out.extend(std::iter::repeat_n(' ', n));
    match v {
        Value::Object(m) if !m.is_empty() => {
            out.push_str("{\n");
            for (i, (k, val)) in m.iter().enumerate() {
                pad(indent + 4, out);
                out.push_str(&Value::from(k.as_str()).to_string());
                out.push_str(": ");
                json(val, indent + 4, out);
                out.push_str(if i + 1 < m.len() { ",\n" } else { "\n" });
            }
            pad(indent, out);
            out.push('}');
        }
        Value::Array(a) if !a.is_empty() => {
            out.push_str("[\n");
            for (i, val) in a.iter().enumerate() {
                pad(indent + 4, out);
                json(val, indent + 4, out);
                out.push_str(if i + 1 < a.len() { ",\n" } else { "\n" });
            }
            pad(indent, out);
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// YAML as kubectl prints it (go-yaml from JSON): sorted keys, two-space indent, list
/// items at their key's indent.
pub(crate) fn yaml(v: &Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(m) => {
            for (k, val) in m {
                out.push_str(&pad);
                out.push_str(&scalar_str(k, indent));
                out.push(':');
                value_after_key(val, indent, out);
            }
        }
        Value::Array(a) => {
            for val in a {
                out.push_str(&pad);
                out.push('-');
                match val {
                    Value::Object(m) if !m.is_empty() => {
                        // The first key on the dash's line, the others below it.
                        let mut first = String::new();
                        yaml(val, indent + 2, &mut first);
                        out.push(' ');
                        out.push_str(&first[indent + 2..]);
                    }
                    Value::Array(a) if !a.is_empty() => {
                        out.push('\n');
                        yaml(val, indent + 2, out);
                    }
                    other => {
                        out.push(' ');
                        out.push_str(&scalar(other, indent + 2));
                        out.push('\n');
                    }
                }
            }
        }
        other => {
            out.push_str(&scalar(other, indent));
            out.push('\n');
        }
    }
}

fn value_after_key(val: &Value, indent: usize, out: &mut String) {
    match val {
        Value::Object(m) if !m.is_empty() => {
            out.push('\n');
            yaml(val, indent + 2, out);
        }
        Value::Array(a) if !a.is_empty() => {
            out.push('\n');
            yaml(val, indent, out);
        }
        other => {
            out.push(' ');
            out.push_str(&scalar(other, indent + 2));
            out.push('\n');
        }
    }
}

fn scalar(v: &Value, indent: usize) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Object(_) => "{}".into(),
        Value::Array(_) => "[]".into(),
        Value::String(s) => scalar_str(s, indent),
        other => other.to_string(),
    }
}

fn scalar_str(s: &str, indent: usize) -> String {
    if s.contains('\n') {
        // A literal block; `|-` when there is no final line break.
        let body = s.strip_suffix('\n').unwrap_or(s);
        let mut out = String::from(if s.ends_with('\n') { "|" } else { "|-" });
        for line in body.split('\n') {
            out.push('\n');
            if !line.is_empty() {
                out.extend(std::iter::repeat_n(' ', indent));
                out.push_str(line);
            }
        }
        return out;
    }
    // go-yaml: a string that would read back as another type is double-quoted; one that
    // cannot be plain (indicators, `: `, ` #`, edge spaces) single-quoted.
    let lower = s.to_ascii_lowercase();
    let bytes = s.as_bytes();
    let ambiguous = s.is_empty()
        || matches!(
            lower.as_str(),
            "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "~" | "y" | "n"
        )
        || (s.parse::<f64>().is_ok() && !lower.contains("inf") && !lower.contains("nan"))
        || (bytes.len() >= 10 && bytes[..4].iter().all(u8::is_ascii_digit) && bytes[4] == b'-');
    let indicator = |c: char| "-?:".contains(c);
    let mut chars = s.chars();
    let first = chars.next().unwrap_or(' ');
    let second = chars.next().unwrap_or(' ');
    let plain = !((indicator(first) && second == ' ')
        || s.starts_with(|c: char| ",[]{}#&*!|>'\"%@` ".contains(c))
        || s.ends_with([' ', ':'])
        || s.contains(": ")
        || s.contains(" #"));
    if ambiguous || s.chars().any(char::is_control) {
        Value::from(s).to_string()
    } else if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tables_print_like_kubectl() {
        let table = json!({
            "columnDefinitions": [
                {"name": "Name", "priority": 0}, {"name": "Ready", "priority": 0},
                {"name": "IP", "priority": 1}],
            "rows": [{"cells": ["web-board", "1/1", "10.0.0.2"],
                      "object": {"metadata": {"namespace": "default"}}}]});
        assert_eq!(
            print_table(&table, false, false),
            "NAME        READY\nweb-board   1/1\n"
        );
        assert_eq!(
            print_table(&table, true, true),
            "NAMESPACE   NAME        READY   IP\ndefault     web-board   1/1     10.0.0.2\n"
        );
    }

    #[test]
    fn rfc1123z_is_go_s() {
        assert_eq!(
            rfc1123z("2026-12-02T02:14:39Z"),
            "Wed, 02 Dec 2026 02:14:39 +0000"
        );
        assert_eq!(
            rfc1123z("1970-01-01T00:00:00Z"),
            "Thu, 01 Jan 1970 00:00:00 +0000"
        );
    }

    #[test]
    fn yaml_and_json_print_sorted_and_indented() {
        let v = json!({"b": [{"x": 1, "y": "on"}, "s"], "a": {"k": ""}, "c": "l1\nl2\n"});
        let mut y = String::new();
        yaml(&v, 0, &mut y);
        assert_eq!(
            y,
            "a:\n  k: \"\"\nb:\n- x: 1\n  \"y\": \"on\"\n- s\nc: |\n  l1\n  l2\n"
        );
        let mut j = String::new();
        json(&json!({"a": [1], "b": {}}), 0, &mut j);
        assert_eq!(j, "{\n    \"a\": [\n        1\n    ],\n    \"b\": {}\n}");
    }

    #[test]
    fn describe_prints_kubectl_s_layout() {
        let pod = json!({
            "metadata": {"name": "web-board", "namespace": "default", "uid": "u",
                         "labels": {"app": "web"}, "annotations": {"a": "b"}},
            "spec": {"nodeName": "board", "priority": 0,
                     "containers": [{"name": "c", "image": "busybox",
                                     "command": ["sh", "-c", "echo"],
                                     "ports": [{"containerPort": 80, "protocol": "TCP"}]}]},
            "status": {"phase": "Running", "hostIP": "10.0.0.1", "podIP": "10.0.0.2",
                       "podIPs": [{"ip": "10.0.0.2"}], "qosClass": "BestEffort",
                       "startTime": "2026-12-02T02:14:39Z",
                       "conditions": [{"type": "Ready", "status": "True"}],
                       "containerStatuses": [{"name": "c", "containerID": "containerd://x",
                           "imageID": "sha256:y", "ready": true, "restartCount": 0,
                           "state": {"running": {"startedAt": "2026-12-02T02:14:40Z"}}}]}});
        let out = describe(&pod, Some(&json!({"items": []})), 0);
        let want = "\
Name:         web-board
Namespace:    default
Priority:     0
Node:         board/10.0.0.1
Start Time:   Wed, 02 Dec 2026 02:14:39 +0000
Labels:       app=web
Annotations:  a: b
Status:       Running
IP:           10.0.0.2
IPs:
  IP:  10.0.0.2
Containers:
  c:
    Container ID:  containerd://x
    Image:         busybox
    Image ID:      sha256:y
    Port:          80/TCP
    Host Port:     0/TCP
    Command:
      sh
      -c
      echo
    State:          Running
      Started:      Wed, 02 Dec 2026 02:14:40 +0000
    Ready:          True
    Restart Count:  0
    Environment:    <none>
    Mounts:         <none>
Conditions:
  Type           Status
  Ready          True 
Volumes:         <none>
QoS Class:       BestEffort
Node-Selectors:  <none>
Tolerations:     <none>
Events:          <none>
";
        assert_eq!(out, want);
    }
}
