//! Server-side printing (`meta.k8s.io/v1` `Table`): the columns and cells the apiserver
//! gives kubectl for pods, nodes and events, so `kubectl get` on the board prints what it
//! prints against a cluster (kubernetes `pkg/printers/internalversion/printers.go`:
//! `printPod`, `printNode`, `printEvent`; ages by `duration.HumanDuration`).
//!
//! Pure: objects in (as JSON values, the form served), rows out; `now` injected.

use serde_json::{Map, Value, json};

use crate::clock::{self, UnixNanos};
use crate::json::object;

/// A column: name, type, priority (1: only with `-o wide`), description.
struct Column(&'static str, &'static str, u8, &'static str);

const POD_COLUMNS: &[Column] = &[
    Column("Name", "string", 0, "name"),
    Column(
        "Ready",
        "string",
        0,
        "The aggregate readiness state of this pod for accepting traffic.",
    ),
    Column(
        "Status",
        "string",
        0,
        "The aggregate status of the containers in this pod.",
    ),
    Column(
        "Restarts",
        "string",
        0,
        "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
    ),
    Column("Age", "string", 0, "creationTimestamp"),
    Column(
        "IP",
        "string",
        1,
        "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
    ),
    Column(
        "Node",
        "string",
        1,
        "NodeName is a request to schedule this pod onto a specific node.",
    ),
    Column(
        "Nominated Node",
        "string",
        1,
        "nominatedNodeName is set only when this pod preempts other pods on the node.",
    ),
    Column(
        "Readiness Gates",
        "string",
        1,
        "If specified, all readiness gates will be evaluated for pod readiness.",
    ),
];

const NODE_COLUMNS: &[Column] = &[
    Column("Name", "string", 0, "name"),
    Column("Status", "string", 0, "The status of the node"),
    Column("Roles", "string", 0, "The roles of the node"),
    Column("Age", "string", 0, "creationTimestamp"),
    Column(
        "Version",
        "string",
        0,
        "Kubelet Version reported by the node.",
    ),
    Column(
        "Internal-IP",
        "string",
        1,
        "List of addresses reachable to the node. Queried from cloud provider, if available.",
    ),
    Column(
        "External-IP",
        "string",
        1,
        "List of addresses reachable to the node. Queried from cloud provider, if available.",
    ),
    Column(
        "OS-Image",
        "string",
        1,
        "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
    ),
    Column(
        "Kernel-Version",
        "string",
        1,
        "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
    ),
    Column(
        "Container-Runtime",
        "string",
        1,
        "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
    ),
];

const EVENT_COLUMNS: &[Column] = &[
    Column(
        "Last Seen",
        "string",
        0,
        "The last time this event was seen",
    ),
    Column(
        "Type",
        "string",
        0,
        "Type of this event (Normal, Warning), new types could be added in the future.",
    ),
    Column(
        "Reason",
        "string",
        0,
        "This should be a short, machine understandable string that gives the reason for this event being generated.",
    ),
    Column("Object", "string", 0, "The object this Event is about."),
    Column(
        "Subobject",
        "string",
        1,
        "The subobject this Event is about.",
    ),
    Column("Source", "string", 1, "The component reporting this event."),
    Column(
        "Message",
        "string",
        0,
        "A human-readable description of the status of this operation.",
    ),
    Column(
        "First Seen",
        "string",
        1,
        "The first time this event was seen",
    ),
    Column(
        "Count",
        "integer",
        1,
        "The number of times this event has occurred.",
    ),
    Column("Name", "string", 1, "name"),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Pod,
    Node,
    Event,
}

/// A `Table` of `objects` (each a served JSON object), rows' `object` a
/// `PartialObjectMetadata` (kubectl's default `includeObject=Metadata`).
pub(crate) fn table(
    kind: Kind,
    objects: &[&Value],
    resource_version: u64,
    now: UnixNanos,
) -> Value {
    let columns = match kind {
        Kind::Pod => POD_COLUMNS,
        Kind::Node => NODE_COLUMNS,
        Kind::Event => EVENT_COLUMNS,
    };
    let defs: Vec<Value> = columns
        .iter()
        .map(|Column(name, type_, priority, description)| {
            let format = if *description == "name" { "name" } else { "" };
            object(&mut [
                ("name", (*name).into()),
                ("type", (*type_).into()),
                ("format", format.into()),
                ("description", (*description).into()),
                ("priority", (*priority).into()),
            ])
        })
        .collect();
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let (cells, conditions) = match kind {
                Kind::Pod => pod_row(o, now),
                Kind::Node => (node_row(o, now), None),
                Kind::Event => (event_row(o, now), None),
            };
            let mut row = Map::new();
            row.insert("cells".into(), Value::Array(cells));
            if let Some(c) = conditions {
                row.insert("conditions".into(), c);
            }
            row.insert("object".into(), partial_metadata(o));
            Value::Object(row)
        })
        .collect();
    object(&mut [
        ("kind", "Table".into()),
        ("apiVersion", "meta.k8s.io/v1".into()),
        (
            "metadata",
            object(&mut [("resourceVersion", resource_version.to_string().into())]),
        ),
        ("columnDefinitions", Value::Array(defs)),
        ("rows", Value::Array(rows)),
    ])
}

fn partial_metadata(o: &Value) -> Value {
    object(&mut [
        ("kind", "PartialObjectMetadata".into()),
        ("apiVersion", "meta.k8s.io/v1".into()),
        (
            "metadata",
            o.get("metadata")
                .cloned()
                .unwrap_or_else(|| Value::Object(Map::new())),
        ),
    ])
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    let mut cur = v;
    for p in path {
        match cur.get(p) {
            Some(n) => cur = n,
            None => return "",
        }
    }
    cur.as_str().unwrap_or("")
}

fn array_at<'a>(v: &'a Value, path: &[&str]) -> &'a [Value] {
    let mut cur = v;
    for p in path {
        match cur.get(p) {
            Some(n) => cur = n,
            None => return &[],
        }
    }
    cur.as_array().map(Vec::as_slice).unwrap_or(&[])
}

/// kubelet/kubectl: `translateTimestampSince` — `<unknown>` for no time.
pub(crate) fn age(timestamp: &str, now: UnixNanos) -> String {
    match clock::parse_rfc3339(timestamp) {
        Some(t) if !timestamp.is_empty() => human_duration((now - t) / 1_000_000_000),
        _ => "<unknown>".into(),
    }
}

/// `duration.HumanDuration`, from seconds.
pub(crate) fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

fn terminated_reason(t: &Value, prefix: &str) -> String {
    let reason = str_at(t, &["reason"]);
    if !reason.is_empty() {
        return format!("{prefix}{reason}");
    }
    match t.get("signal").and_then(Value::as_i64).filter(|&s| s != 0) {
        Some(s) => format!("{prefix}Signal:{s}"),
        None => format!(
            "{prefix}ExitCode:{}",
            t.get("exitCode").and_then(Value::as_i64).unwrap_or(0)
        ),
    }
}

fn condition_true(pod: &Value, type_: &str) -> bool {
    array_at(pod, &["status", "conditions"])
        .iter()
        .any(|c| str_at(c, &["type"]) == type_ && str_at(c, &["status"]) == "True")
}

/// kubectl: `printPod` — Name, Ready, Status, Restarts, Age, IP, Node, Nominated Node,
/// Readiness Gates; and the row's `Completed` condition for finished pods. In kubectl's
/// steps: the status reason, the init containers ([`init_containers`]), the regular ones
/// once initialized ([`regular_containers`]), `Terminating`, then the cells.
fn pod_row(pod: &Value, now: UnixNanos) -> (Vec<Value>, Option<Value>) {
    let phase = str_at(pod, &["status", "phase"]);
    let mut reason = match str_at(pod, &["status", "reason"]) {
        "" => phase.to_string(),
        r => r.to_string(),
    };
    let conditions = match phase {
        "Succeeded" => Some(json!([{"type": "Completed", "status": "True",
            "reason": "Succeeded", "message": "The pod has completed successfully."}])),
        "Failed" => Some(json!([{"type": "Completed", "status": "True",
            "reason": "Failed", "message": "The pod failed."}])),
        _ => None,
    };
    let spec_init = array_at(pod, &["spec", "initContainers"]);
    let total = array_at(pod, &["spec", "containers"]).len()
        + spec_init
            .iter()
            .filter(|c| str_at(c, &["restartPolicy"]) == "Always")
            .count();
    let init = init_containers(pod, &mut reason);
    let tally = if !init.initializing || condition_true(pod, "Initialized") {
        regular_containers(pod, init.sidecars, &mut reason)
    } else {
        Tally {
            ready: init.sidecars.ready,
            ..init.all
        }
    };
    let terminal = matches!(phase, "Succeeded" | "Failed");
    if pod["metadata"].get("deletionTimestamp").is_some() && !terminal {
        reason = "Terminating".into();
    }
    let or_none = |s: &str| {
        if s.is_empty() {
            "<none>".to_string()
        } else {
            s.to_string()
        }
    };
    let ip = array_at(pod, &["status", "podIPs"])
        .first()
        .map(|p| str_at(p, &["ip"]))
        .unwrap_or("");
    let cells = vec![
        Value::from(str_at(pod, &["metadata", "name"])),
        Value::from(format!("{}/{total}", tally.ready)),
        Value::from(reason),
        Value::from(restarts_text(tally.restarts, tally.last_restart, now)),
        Value::from(age(str_at(pod, &["metadata", "creationTimestamp"]), now)),
        Value::from(or_none(ip)),
        Value::from(or_none(str_at(pod, &["spec", "nodeName"]))),
        Value::from(or_none(str_at(pod, &["status", "nominatedNodeName"]))),
        Value::from(readiness_gates(pod)),
    ];
    (cells, conditions)
}

/// What a pod row counts over container statuses: the ready ones, the restarts and the
/// newest restart's time.
#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    ready: usize,
    restarts: i64,
    last_restart: Option<UnixNanos>,
}

impl Tally {
    /// Adds a status's `restartCount` and its last termination's time.
    fn restarted(&mut self, c: &Value) {
        self.restarts += c.get("restartCount").and_then(Value::as_i64).unwrap_or(0);
        let finished = clock::parse_rfc3339(str_at(c, &["lastState", "terminated", "finishedAt"]));
        if let Some(t) = finished {
            self.last_restart = self.last_restart.max(Some(t));
        }
    }
}

/// What the init containers' statuses say: every one's restarts, the sidecars' (restartable
/// init containers: their restarts and readiness also count once the pod is initialized),
/// and whether one is still initializing (`reason` is then `Init:…`).
struct InitPass {
    all: Tally,
    sidecars: Tally,
    initializing: bool,
}

/// kubectl `printPod`'s init container loop: stops at the first one that has not succeeded.
fn init_containers(pod: &Value, reason: &mut String) -> InitPass {
    let spec_init = array_at(pod, &["spec", "initContainers"]);
    let sidecar = |name: &str| {
        spec_init
            .iter()
            .any(|c| str_at(c, &["name"]) == name && str_at(c, &["restartPolicy"]) == "Always")
    };
    let mut pass = InitPass {
        all: Tally::default(),
        sidecars: Tally::default(),
        initializing: false,
    };
    let init_statuses = array_at(pod, &["status", "initContainerStatuses"]);
    for (i, c) in init_statuses.iter().enumerate() {
        pass.all.restarted(c);
        if sidecar(str_at(c, &["name"])) {
            pass.sidecars.restarted(c);
            if c.get("started").and_then(Value::as_bool) == Some(true)
                && c.get("ready").and_then(Value::as_bool) == Some(true)
            {
                pass.sidecars.ready += 1;
            }
            continue;
        }
        let state = c.get("state").cloned().unwrap_or_default();
        if let Some(t) = state.get("terminated") {
            if t.get("exitCode").and_then(Value::as_i64) == Some(0) {
                continue;
            }
            *reason = terminated_reason(t, "Init:");
        } else if let Some(w) = state.get("waiting")
            && !str_at(w, &["reason"]).is_empty()
            && str_at(w, &["reason"]) != "PodInitializing"
        {
            *reason = format!("Init:{}", str_at(w, &["reason"]));
        } else {
            *reason = format!("Init:{i}/{}", spec_init.len());
        }
        pass.initializing = true;
        break;
    }
    pass
}

/// kubectl `printPod`'s loop over the regular containers (last first), on top of the
/// sidecars' tally: the reason of a waiting or terminated one, the ready running ones; a
/// `Completed` pod with one still running is `Running` or `NotReady`.
fn regular_containers(pod: &Value, mut tally: Tally, reason: &mut String) -> Tally {
    let mut has_running = false;
    for c in array_at(pod, &["status", "containerStatuses"]).iter().rev() {
        tally.restarted(c);
        let state = c.get("state").cloned().unwrap_or_default();
        let waiting = state
            .get("waiting")
            .map(|w| str_at(w, &["reason"]))
            .unwrap_or("");
        if !waiting.is_empty() {
            *reason = waiting.to_string();
        } else if let Some(t) = state.get("terminated") {
            *reason = terminated_reason(t, "");
        } else if c.get("ready").and_then(Value::as_bool) == Some(true)
            && state.get("running").is_some()
        {
            has_running = true;
            tally.ready += 1;
        }
    }
    if reason == "Completed" && has_running {
        *reason = if condition_true(pod, "Ready") {
            "Running".into()
        } else {
            "NotReady".into()
        };
    }
    tally
}

/// kubectl: the Restarts cell, `N (AGE ago)` when the last restart's time is known.
fn restarts_text(restarts: i64, last_restart: Option<UnixNanos>, now: UnixNanos) -> String {
    match last_restart {
        Some(t) if restarts != 0 => {
            format!(
                "{restarts} ({} ago)",
                human_duration((now - t) / 1_000_000_000)
            )
        }
        _ => restarts.to_string(),
    }
}

/// kubectl: the Readiness Gates cell, `TRUE/ALL` or `<none>`.
fn readiness_gates(pod: &Value) -> String {
    let gates = array_at(pod, &["spec", "readinessGates"]);
    if gates.is_empty() {
        return "<none>".to_string();
    }
    let true_gates = gates
        .iter()
        .filter(|g| condition_true(pod, str_at(g, &["conditionType"])))
        .count();
    format!("{true_gates}/{}", gates.len())
}

/// kubectl: `printNode`.
fn node_row(node: &Value, now: UnixNanos) -> Vec<Value> {
    let ready = array_at(node, &["status", "conditions"])
        .iter()
        .find(|c| str_at(c, &["type"]) == "Ready")
        .map(|c| str_at(c, &["status"]));
    let mut status = vec![match ready {
        Some("True") => "Ready",
        Some(_) => "NotReady",
        None => "Unknown",
    }];
    if node["spec"].get("unschedulable").and_then(Value::as_bool) == Some(true) {
        status.push("SchedulingDisabled");
    }
    let mut roles: Vec<String> = node["metadata"]
        .get("labels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| {
                    if let Some(r) = k.strip_prefix("node-role.kubernetes.io/") {
                        (!r.is_empty()).then(|| r.to_string())
                    } else if k == "kubernetes.io/role" {
                        v.as_str().filter(|s| !s.is_empty()).map(str::to_string)
                    } else {
                        None
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    crate::sort::sort(&mut roles);
    roles.dedup();
    let roles = if roles.is_empty() {
        "<none>".to_string()
    } else {
        roles.join(",")
    };
    let address = |type_: &str| {
        array_at(node, &["status", "addresses"])
            .iter()
            .find(|a| str_at(a, &["type"]) == type_)
            .map(|a| str_at(a, &["address"]).to_string())
            .unwrap_or_else(|| "<none>".into())
    };
    let info = |key: &str| match str_at(node, &["status", "nodeInfo", key]) {
        "" => "<unknown>".to_string(),
        s => s.to_string(),
    };
    vec![
        Value::from(str_at(node, &["metadata", "name"])),
        Value::from(status.join(",")),
        Value::from(roles),
        Value::from(age(str_at(node, &["metadata", "creationTimestamp"]), now)),
        Value::from(str_at(node, &["status", "nodeInfo", "kubeletVersion"])),
        Value::from(address("InternalIP")),
        Value::from(address("ExternalIP")),
        Value::from(info("osImage")),
        Value::from(info("kernelVersion")),
        Value::from(info("containerRuntimeVersion")),
    ]
}

/// kubectl: `printEvent` (wide: every column; kubectl hides the priority-1 ones).
fn event_row(ev: &Value, now: UnixNanos) -> Vec<Value> {
    let first = age(str_at(ev, &["firstTimestamp"]), now);
    let last = match str_at(ev, &["lastTimestamp"]) {
        "" => first.clone(),
        t => age(t, now),
    };
    let kind = str_at(ev, &["involvedObject", "kind"]).to_lowercase();
    let target = match str_at(ev, &["involvedObject", "name"]) {
        "" => kind,
        name => format!("{kind}/{name}"),
    };
    let component = str_at(ev, &["source", "component"]);
    let host = str_at(ev, &["source", "host"]);
    let source = if host.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {host}")
    };
    vec![
        Value::from(last),
        Value::from(str_at(ev, &["type"])),
        Value::from(str_at(ev, &["reason"])),
        Value::from(target),
        Value::from(str_at(ev, &["involvedObject", "fieldPath"])),
        Value::from(source),
        Value::from(str_at(ev, &["message"]).trim()),
        Value::from(first),
        ev.get("count").cloned().unwrap_or(Value::from(1)),
        Value::from(str_at(ev, &["metadata", "name"])),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    #[test]
    fn human_durations_as_kubectl_prints_them() {
        for (secs, want) in [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (150, "2m30s"),
            (600, "10m"),
            (179 * 60, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 60, "3h1m"),
            (8 * 3600, "8h"),
            (47 * 3600, "47h"),
            (48 * 3600, "2d"),
            (49 * 3600, "2d1h"),
            (10 * 86400, "10d"),
            (800 * 86400, "2y70d"),
            (9 * 365 * 86400, "9y"),
        ] {
            assert_eq!(human_duration(secs), want, "{secs}s");
        }
    }

    fn pod(status: Value) -> Value {
        json!({"metadata": {"name": "web-node1", "namespace": "default",
                            "creationTimestamp": "1970-01-01T00:00:00Z"},
               "spec": {"nodeName": "node1", "containers": [{"name": "a"}, {"name": "b"}]},
               "status": status})
    }

    fn cells(p: &Value, now: i64) -> Vec<String> {
        pod_row(p, now)
            .0
            .iter()
            .map(|c| c.as_str().unwrap_or_default().to_string())
            .collect()
    }

    #[test]
    fn pod_rows_as_kubectl_prints_them() {
        let running = pod(json!({"phase": "Running", "podIPs": [{"ip": "10.0.0.5"}],
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 0, "state": {"running": {}}},
                {"name": "b", "ready": true, "restartCount": 2, "state": {"running": {}},
                 "lastState": {"terminated": {"exitCode": 1, "finishedAt": "1970-01-01T00:00:30Z"}}}]}));
        assert_eq!(
            cells(&running, 90 * S),
            [
                "web-node1",
                "2/2",
                "Running",
                "2 (60s ago)",
                "90s",
                "10.0.0.5",
                "node1",
                "<none>",
                "<none>"
            ]
        );
        let crashing = pod(json!({"phase": "Running", "containerStatuses": [
            {"name": "a", "ready": true, "restartCount": 0, "state": {"running": {}}},
            {"name": "b", "ready": false, "restartCount": 5,
             "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}));
        assert_eq!(cells(&crashing, 0)[1..4], ["1/2", "CrashLoopBackOff", "5"]);
        let completed = pod(json!({"phase": "Succeeded", "containerStatuses": [
            {"name": "a", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
            {"name": "b", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}));
        let (row, conditions) = pod_row(&completed, 0);
        assert_eq!(row[2], "Completed");
        assert_eq!(conditions.unwrap()[0]["reason"], "Succeeded");
        let signal = pod(json!({"phase": "Failed", "containerStatuses": [
            {"name": "a", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 137, "signal": 9}}}]}));
        assert_eq!(cells(&signal, 0)[2], "Signal:9");
        let mut init = pod(json!({"phase": "Pending", "initContainerStatuses": [
            {"name": "i1", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0}}},
            {"name": "i2", "ready": false, "restartCount": 0, "state": {"running": {}}}]}));
        init["spec"]["initContainers"] = json!([{"name": "i1"}, {"name": "i2"}]);
        assert_eq!(cells(&init, 0)[2], "Init:1/2");
        let mut deleting = running.clone();
        deleting["metadata"]["deletionTimestamp"] = json!("1970-01-01T00:00:10Z");
        assert_eq!(cells(&deleting, 0)[2], "Terminating");
        assert_eq!(cells(&pod(json!({})), 0)[1..5], ["0/2", "", "0", "0s"]);
    }

    #[test]
    fn node_and_event_rows() {
        let node = json!({"metadata": {"name": "node1", "creationTimestamp": "1970-01-01T00:00:00Z",
                "labels": {"node-role.kubernetes.io/edge": ""}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}],
                "addresses": [{"type": "InternalIP", "address": "10.0.0.2"}],
                "nodeInfo": {"kubeletVersion": "v0.1.0-picolet", "osImage": "Debian",
                             "kernelVersion": "6.1", "containerRuntimeVersion": "containerd://1.6.20"}}});
        let row = node_row(&node, 3600 * S);
        assert_eq!(
            row,
            [
                "node1",
                "Ready",
                "edge",
                "60m",
                "v0.1.0-picolet",
                "10.0.0.2",
                "<none>",
                "Debian",
                "6.1",
                "containerd://1.6.20"
            ]
        );
        let ev = json!({"metadata": {"name": "web.1"}, "type": "Normal", "reason": "Started",
            "message": "Started container web ", "count": 3,
            "involvedObject": {"kind": "Pod", "name": "web", "fieldPath": "spec.containers{web}"},
            "source": {"component": "kubelet", "host": "node1"},
            "firstTimestamp": "1970-01-01T00:00:00Z", "lastTimestamp": "1970-01-01T00:00:50Z"});
        let row = event_row(&ev, 60 * S);
        assert_eq!(row[..4], ["10s", "Normal", "Started", "pod/web"]);
        assert_eq!(
            row[5..],
            [
                json!("kubelet, node1"),
                json!("Started container web"),
                json!("60s"),
                json!(3),
                json!("web.1")
            ]
        );
        let t = table(Kind::Event, &[&ev], 7, 60 * S);
        assert_eq!(t["columnDefinitions"].as_array().unwrap().len(), row.len());
        assert_eq!(t["metadata"]["resourceVersion"], "7");
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    }
}
