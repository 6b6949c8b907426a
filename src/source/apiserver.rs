//! The API source: the pods the apiserver binds to this node (kubelet:
//! `config/apiserver.go`, a client-go reflector), as full snapshots (`source = "api"`).
//!
//! Owns: the list + watch of `/api/v1/pods?fieldSelector=spec.nodeName=<node>` (all
//! namespaces), the last resourceVersion, the current set of pods, and the offline
//! checkpoint of that set.
//!
//! Behaviour:
//! - List, then watch from the list's resourceVersion with bookmarks; a watch that ends
//!   (the server's `timeoutSeconds`, 5–10 min) is resumed from the last resourceVersion
//!   seen (event or bookmark) at once; `410 Gone` (as an answer or an `ERROR` event)
//!   relists. Failures reconnect with back-off 1 s → 30 s, jittered (deterministic, seeded
//!   by the node name). A watch silent for longer than its timeout plus 30 s is
//!   abandoned (a dead link that sent no RST).
//! - A snapshot is sent only when the set differs from the last one sent.
//! - **Offline autonomy**: if the first list fails (or takes longer than
//!   `initial_list_timeout`), the checkpoint — the last set seen, kept under `--root-dir` —
//!   is sent as the first snapshot, so a node restarted during an outage keeps its pods.
//!   Without a checkpoint nothing is sent: the API source stays "not seen", which keeps
//!   housekeeping from killing runtime pods on a guess (k8s#112814), while static pods
//!   start regardless (k3s#1686). The checkpoint is rewritten only when the set changes.
//! - Bad input never disturbs the rest: a watch line that does not parse, a pod that does
//!   not decode (its last good version is kept), a pod bound to another node, a list
//!   larger than the limit — each is one clear log line, and the source carries on.
//!
//! Must never: send a snapshot that lost pods because of an error (only a successful list
//! or a DELETED event removes a pod), or block on a full channel past shutdown.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::api::cluster::{ObjectList, Status, WatchEvent};
use crate::api::{ANNOTATION_CONFIG_SOURCE, Pod};
use crate::checkpoint::Checkpoint;
use crate::kube::{ApiError, Backoff, Client, query};
use crate::messages::SourceUpdate;

/// The `source` of this source's updates.
pub(crate) const SOURCE: &str = "api";

/// Timings and limits.
#[derive(Debug, Clone)]
pub struct ApiSourceOptions {
    /// Reconnect back-off (1 s → 30 s).
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    /// The watch's `timeoutSeconds`, jittered up to twice this (client-go: 5 min).
    pub watch_timeout: Duration,
    /// How long the first list may take before the checkpoint is delivered instead.
    pub initial_list_timeout: Duration,
    /// Largest list answer accepted.
    pub max_list_bytes: usize,
}

impl Default for ApiSourceOptions {
    fn default() -> Self {
        ApiSourceOptions {
            backoff_initial: Duration::from_secs(1),
            backoff_max: Duration::from_secs(30),
            watch_timeout: Duration::from_secs(300),
            initial_list_timeout: Duration::from_secs(5),
            max_list_bytes: crate::kube::MAX_RESPONSE_BYTES,
        }
    }
}

/// Pods by `namespace/name` (unique in the apiserver).
/// Shared with the snapshots this source sends (one copy per pod).
type PodSet = BTreeMap<(String, String), Arc<Pod>>;

/// What one watch event does to the set.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum EventOutcome {
    /// The set changed (or not: an identical MODIFIED); the new resourceVersion.
    Applied { resource_version: String },
    /// A bookmark: only the resourceVersion moves.
    Bookmark { resource_version: String },
    /// `410 Gone`: relist.
    Gone,
    /// An `ERROR` event other than 410: reconnect.
    Error(String),
    /// The event was ignored; the message says why (logged by the caller).
    Ignored(String),
}

/// Applies one watch event to `pods` (pure; kubelet: the reflector + `podStorage` feed).
pub(crate) fn apply_event(pods: &mut PodSet, node_name: &str, ev: WatchEvent) -> EventOutcome {
    let rv = ev
        .object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    match ev.type_.as_str() {
        "BOOKMARK" => EventOutcome::Bookmark {
            resource_version: rv,
        },
        "ERROR" => {
            // The one value decoder (api::decode), as every typed input: no second copy of
            // `Status`'s derived decoding for serde_json's own `Value` deserializer.
            let status: Status = crate::api::from_value(&ev.object).unwrap_or_default();
            if status.code == 410 || status.reason == "Expired" || status.reason == "Gone" {
                EventOutcome::Gone
            } else {
                EventOutcome::Error(format!(
                    "watch error {} {}: {}",
                    status.code, status.reason, status.message
                ))
            }
        }
        "ADDED" | "MODIFIED" | "DELETED" => {
            let ns = str_at(&ev.object, "/metadata/namespace").to_string();
            let name = str_at(&ev.object, "/metadata/name").to_string();
            let node = str_at(&ev.object, "/spec/nodeName").to_string();
            if name.is_empty() {
                return EventOutcome::Ignored(format!(
                    "a {} event without metadata.name",
                    ev.type_
                ));
            }
            let key = (ns.clone(), name.clone());
            if node != node_name {
                // The field selector should have kept it away; never run another node's pod.
                let was_ours = pods.remove(&key).is_some();
                let msg = format!(
                    "pod {ns}/{name} is bound to node {node:?}, not {node_name:?}: ignored"
                );
                return if was_ours {
                    EventOutcome::Applied {
                        resource_version: rv,
                    }
                } else {
                    EventOutcome::Ignored(msg)
                };
            }
            if ev.type_ == "DELETED" {
                pods.remove(&key);
                return EventOutcome::Applied {
                    resource_version: rv,
                };
            }
            match crate::api::decode_pod(&ev.object) {
                Ok(pod) => {
                    pods.insert(key, api_pod(pod));
                    EventOutcome::Applied {
                        resource_version: rv,
                    }
                }
                Err(e) => EventOutcome::Ignored(format!(
                    "pod {ns}/{name} does not decode ({e}); {}",
                    if pods.contains_key(&key) {
                        "keeping its last good version"
                    } else {
                        "ignored"
                    }
                )),
            }
        }
        other => EventOutcome::Ignored(format!("unknown watch event type {other:?}")),
    }
}

/// Decodes a list answer into the set, keeping the previous version of any pod that does
/// not decode; returns the set, the list's resourceVersion and one message per problem.
pub(crate) fn decode_list(
    body: &[u8],
    node_name: &str,
    previous: &PodSet,
) -> Result<(PodSet, String, Vec<String>), crate::api::JsonError> {
    let list: ObjectList = crate::api::from_json_slice(body)?;
    let mut pods = PodSet::new();
    let mut problems = Vec::new();
    for item in list.items {
        let ns = str_at(&item, "/metadata/namespace").to_string();
        let name = str_at(&item, "/metadata/name").to_string();
        let node = str_at(&item, "/spec/nodeName").to_string();
        if node != node_name {
            problems.push(format!(
                "pod {ns}/{name} is bound to node {node:?}, not {node_name:?}: ignored"
            ));
            continue;
        }
        let key = (ns.clone(), name.clone());
        match crate::api::decode_pod(&item) {
            Ok(pod) => {
                pods.insert(key, api_pod(pod));
            }
            Err(e) => match previous.get(&key) {
                Some(old) => {
                    problems.push(format!(
                        "pod {ns}/{name} does not decode ({e}); keeping its last good version"
                    ));
                    pods.insert(key, old.clone());
                }
                None => problems.push(format!("pod {ns}/{name} does not decode ({e}); ignored")),
            },
        }
    }
    Ok((pods, list.metadata.resource_version, problems))
}

/// A decoded API pod as this source holds and sends it: annotated with its source already
/// (the merge would otherwise copy it to add the annotation — kubelet: `updatePodsFunc`).
fn api_pod(mut pod: Pod) -> Arc<Pod> {
    pod.metadata
        .annotations
        .insert(ANNOTATION_CONFIG_SOURCE.to_string(), SOURCE.to_string());
    Arc::new(pod)
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// The API pod source.
pub struct ApiSource {
    client: Client,
    node_name: String,
    checkpoint: Option<Checkpoint>,
    options: ApiSourceOptions,
}

impl ApiSource {
    /// `checkpoint`: where the last-seen set is kept (`None`: no offline autonomy).
    pub fn new(client: Client, node_name: String, checkpoint: Option<Checkpoint>) -> Self {
        ApiSource {
            client,
            node_name,
            checkpoint,
            options: ApiSourceOptions::default(),
        }
    }

    pub fn with_options(mut self, options: ApiSourceOptions) -> Self {
        self.options = options;
        self
    }

    /// Sends full snapshots on `tx` until `shutdown` (or until `tx` is closed).
    pub async fn run(self, tx: mpsc::Sender<SourceUpdate>, shutdown: CancellationToken) {
        let ApiSource {
            client,
            node_name,
            mut checkpoint,
            options,
        } = self;
        let checkpointed = match checkpoint.as_mut().map(Checkpoint::load) {
            Some(Ok(pods)) => pods,
            Some(Err(e)) => {
                log::warn!("api source: {e}");
                None
            }
            None => None,
        };
        let mut r = Reflector {
            backoff: Backoff::new(options.backoff_initial, options.backoff_max, &node_name),
            watches: 0,
            client,
            node_name,
            checkpoint,
            checkpointed,
            options,
            tx,
            shutdown,
            pods: PodSet::new(),
            resource_version: None,
            last_sent: None,
            failing: false,
            told_offline: false,
            started: Instant::now(),
        };
        loop {
            let step = if r.resource_version.is_none() {
                r.relist().await
            } else {
                r.watch().await
            };
            match step {
                Step::Stop => return,
                Step::Again => {}
                Step::Backoff => {
                    let delay = r.backoff.next_delay();
                    tokio::select! {
                        _ = r.shutdown.cancelled() => return,
                        _ = tokio::time::sleep(delay) => {}
                    }
                }
            }
        }
    }
}

/// What the reflector does next.
enum Step {
    Stop,
    /// List or watch again at once.
    Again,
    /// List or watch again after a back-off.
    Backoff,
}

/// The running source: list/watch state plus the set and what was last sent.
struct Reflector {
    client: Client,
    node_name: String,
    checkpoint: Option<Checkpoint>,
    /// The checkpoint's pods, until delivered or superseded by a list.
    checkpointed: Option<Vec<Pod>>,
    options: ApiSourceOptions,
    tx: mpsc::Sender<SourceUpdate>,
    shutdown: CancellationToken,
    pods: PodSet,
    /// `None`: (re)list first.
    resource_version: Option<String>,
    last_sent: Option<Vec<Arc<Pod>>>,
    /// In a streak of failures (logged once per streak).
    failing: bool,
    told_offline: bool,
    backoff: Backoff,
    watches: u64,
    started: Instant,
}

impl Reflector {
    async fn relist(&mut self) -> Step {
        let path = format!(
            "/api/v1/pods{}",
            query(&[(
                "fieldSelector",
                &format!("spec.nodeName={}", self.node_name)
            )])
        );
        let get = self.client.get_bytes(&path, self.options.max_list_bytes);
        // The first list may not hold up the checkpoint for long.
        let deadline = if self.last_sent.is_none() && self.checkpointed.is_some() {
            self.started + self.options.initial_list_timeout
        } else {
            Instant::now() + Duration::from_secs(24 * 3600)
        };
        let answer = tokio::select! {
            _ = self.shutdown.cancelled() => return Step::Stop,
            r = tokio::time::timeout_at(deadline, get) => r,
        };
        let result = match answer {
            Ok(Ok(body)) => {
                decode_list(&body, &self.node_name, &self.pods).map_err(|source| ApiError::Decode {
                    what: format!("the pod list from {}", self.client.server()),
                    source,
                })
            }
            Ok(Err(e)) => Err(e),
            Err(_) => Err(ApiError::Timeout {
                method: "GET".into(),
                url: format!("{}{path}", self.client.server()),
                after: self.options.initial_list_timeout,
            }),
        };
        match result {
            Ok((set, rv, problems)) => {
                for p in problems {
                    log::warn!("api source: {p}");
                }
                self.recovered();
                self.checkpointed = None;
                log::info!(
                    "api source: {} pods bound to node {} (resourceVersion {rv})",
                    set.len(),
                    self.node_name
                );
                self.pods = set;
                self.resource_version = Some(rv);
                if self.send().await {
                    Step::Again
                } else {
                    Step::Stop
                }
            }
            Err(e) => {
                self.failed(&format!("cannot list pods: {e}"));
                if self.last_sent.is_none() {
                    match self.checkpointed.take() {
                        Some(cp) => {
                            log::warn!(
                                "api source: apiserver unreachable; running the {} pods of the checkpoint until it is back",
                                cp.len()
                            );
                            self.pods = crate::sort::collect_map(cp.into_iter().map(|p| {
                                let key = (p.metadata.namespace.clone(), p.metadata.name.clone());
                                (key, api_pod(p))
                            }));
                            if !self.send().await {
                                return Step::Stop;
                            }
                        }
                        None if !self.told_offline => {
                            self.told_offline = true;
                            log::warn!(
                                "api source: apiserver unreachable and no checkpoint: API pods wait for it \
                                 (static pods run; nothing is cleaned up until it answers)"
                            );
                        }
                        None => {}
                    }
                }
                Step::Backoff
            }
        }
    }

    async fn watch(&mut self) -> Step {
        let Some(rv) = self.resource_version.clone() else {
            return Step::Again;
        };
        self.watches += 1;
        // client-go: timeoutSeconds = minWatchTimeout × [1, 2).
        let timeout = self
            .options
            .watch_timeout
            .mul_f64(1.0 + jitter_fraction(&self.node_name, self.watches));
        let path = format!(
            "/api/v1/pods{}",
            query(&[
                (
                    "fieldSelector",
                    &format!("spec.nodeName={}", self.node_name)
                ),
                ("resourceVersion", &rv),
                ("allowWatchBookmarks", "true"),
                ("timeoutSeconds", &timeout.as_secs().max(1).to_string()),
                ("watch", "true"),
            ])
        );
        let opened = tokio::select! {
            _ = self.shutdown.cancelled() => return Step::Stop,
            r = self.client.watch(&path) => r,
        };
        let mut stream = match opened {
            Ok(s) => s,
            Err(e) if e.is_gone() => {
                log::info!("api source: resourceVersion {rv} expired; relisting");
                self.resource_version = None;
                return Step::Again;
            }
            Err(e) => {
                self.failed(&format!("cannot watch pods: {e}"));
                return Step::Backoff;
            }
        };
        self.recovered();
        // A watch silent for longer than its timeout is a dead link.
        let deadline = Instant::now() + timeout + Duration::from_secs(30);
        loop {
            let next = tokio::select! {
                _ = self.shutdown.cancelled() => return Step::Stop,
                r = tokio::time::timeout_at(deadline, stream.next()) => r,
            };
            let event = match next {
                Err(_) => {
                    log::info!("api source: the watch went silent; reconnecting");
                    return Step::Again;
                }
                Ok(None) => {
                    self.backoff.reset();
                    return Step::Again;
                }
                Ok(Some(Err(e @ ApiError::Decode { .. }))) => {
                    log::warn!("api source: unparsable watch event skipped: {e}");
                    continue;
                }
                Ok(Some(Err(e))) => {
                    self.failed(&format!("the watch broke: {e}"));
                    return Step::Backoff;
                }
                Ok(Some(Ok(ev))) => ev,
            };
            match apply_event(&mut self.pods, &self.node_name, event) {
                EventOutcome::Applied { resource_version } => {
                    if !resource_version.is_empty() {
                        self.resource_version = Some(resource_version);
                    }
                    if !self.send().await {
                        return Step::Stop;
                    }
                }
                EventOutcome::Bookmark { resource_version } => {
                    if !resource_version.is_empty() {
                        self.resource_version = Some(resource_version);
                    }
                }
                EventOutcome::Gone => {
                    log::info!("api source: resourceVersion expired; relisting");
                    self.resource_version = None;
                    return Step::Again;
                }
                EventOutcome::Error(msg) => {
                    self.failed(&msg);
                    return Step::Backoff;
                }
                EventOutcome::Ignored(msg) => log::warn!("api source: {msg}"),
            }
        }
    }

    /// Sends the set if it differs from the last snapshot sent, then checkpoints it.
    /// `false` when the agent is gone or shutting down.
    async fn send(&mut self) -> bool {
        let pods: Vec<Arc<Pod>> = self.pods.values().cloned().collect();
        if self.last_sent.as_ref() == Some(&pods) {
            return true;
        }
        // Checkpoint first (on the blocking pool: fsyncs on an SD card take a while), so a
        // snapshot the agent acts on is always one a restart can find again.
        if let Some(cp) = self.checkpoint.as_mut() {
            match cp.store_off_thread(&pods).await {
                Ok(true) => log::debug!("api source: checkpoint {} written", cp.path().display()),
                Ok(false) => {}
                Err(e) => log::warn!("api source: {e}"),
            }
        }
        let update = SourceUpdate {
            source: SOURCE,
            pods: pods.clone(),
            objects: None,
        };
        tokio::select! {
            sent = self.tx.send(update) => if sent.is_err() { return false },
            _ = self.shutdown.cancelled() => return false,
        }
        self.last_sent = Some(pods);
        true
    }

    fn failed(&mut self, what: &str) {
        if self.failing {
            log::debug!("api source: {what}");
        } else {
            log::warn!("api source: {what}; retrying with back-off");
        }
        self.failing = true;
    }

    fn recovered(&mut self) {
        if self.failing {
            log::info!(
                "api source: apiserver {} answers again",
                self.client.server()
            );
        }
        self.failing = false;
    }
}

/// A reproducible fraction in [0, 1) for `(seed, n)`.
fn jitter_fraction(seed: &str, n: u64) -> f64 {
    let mut b = Backoff::new(
        Duration::from_secs(4),
        Duration::from_secs(4),
        &format!("{seed}/{n}"),
    );
    // next_delay is in [3 s, 4 s]: map it to [0, 1).
    (b.next_delay().as_secs_f64() - 3.0).clamp(0.0, 0.999_999)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(type_: &str, object: Value) -> WatchEvent {
        WatchEvent {
            type_: type_.into(),
            object,
        }
    }

    fn pod(name: &str, node: &str, rv: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "default", "uid": format!("u-{name}"),
                            "resourceVersion": rv},
               "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]}})
    }

    fn names(pods: &PodSet) -> Vec<&str> {
        pods.keys().map(|(_, n)| n.as_str()).collect()
    }

    #[test]
    fn events_table() {
        let mut pods = PodSet::new();
        let applied = |rv: &str| EventOutcome::Applied {
            resource_version: rv.into(),
        };
        // (event, outcome, names after)
        let cases: Vec<(WatchEvent, EventOutcome, Vec<&str>)> = vec![
            (ev("ADDED", pod("a", "pi", "2")), applied("2"), vec!["a"]),
            (
                ev("ADDED", pod("b", "pi", "3")),
                applied("3"),
                vec!["a", "b"],
            ),
            (
                ev("MODIFIED", pod("a", "pi", "4")),
                applied("4"),
                vec!["a", "b"],
            ),
            (
                ev("BOOKMARK", json!({"metadata": {"resourceVersion": "9"}})),
                EventOutcome::Bookmark {
                    resource_version: "9".into(),
                },
                vec!["a", "b"],
            ),
            (
                ev("DELETED", pod("b", "pi", "10")),
                applied("10"),
                vec!["a"],
            ),
            (
                ev("ADDED", pod("x", "other", "11")),
                EventOutcome::Ignored(
                    "pod default/x is bound to node \"other\", not \"pi\": ignored".into(),
                ),
                vec!["a"],
            ),
            (
                ev(
                    "MODIFIED",
                    json!({"metadata": {"name": "a", "namespace": "default"},
                           "spec": {"nodeName": "pi", "containers": "not a list"}}),
                ),
                EventOutcome::Ignored(String::new()),
                vec!["a"],
            ),
            (
                ev(
                    "ERROR",
                    json!({"kind": "Status", "code": 410, "reason": "Expired"}),
                ),
                EventOutcome::Gone,
                vec!["a"],
            ),
            (
                ev(
                    "ERROR",
                    json!({"kind": "Status", "code": 500, "message": "boom"}),
                ),
                EventOutcome::Error("watch error 500 : boom".into()),
                vec!["a"],
            ),
            (
                ev("WHATEVER", json!({})),
                EventOutcome::Ignored("unknown watch event type \"WHATEVER\"".into()),
                vec!["a"],
            ),
        ];
        for (i, (event, want, after)) in cases.into_iter().enumerate() {
            let got = apply_event(&mut pods, "pi", event);
            match (&got, &want) {
                (EventOutcome::Ignored(m), EventOutcome::Ignored(w)) if w.is_empty() => {
                    assert!(m.contains("keeping its last good version"), "case {i}: {m}")
                }
                _ => assert_eq!(got, want, "case {i}"),
            }
            assert_eq!(names(&pods), after, "case {i}");
        }
        // The undecodable MODIFIED kept the good version.
        assert_eq!(
            pods[&("default".into(), "a".into())]
                .metadata
                .resource_version,
            "4"
        );
    }

    #[test]
    fn list_decoding_keeps_good_versions_and_skips_other_nodes() {
        let mut previous = PodSet::new();
        let (set, _, _) = decode_list(
            &serde_json::to_vec(&json!({"metadata": {"resourceVersion": "5"},
                "items": [pod("a", "pi", "1")]}))
            .unwrap(),
            "pi",
            &previous,
        )
        .unwrap();
        previous = set;
        let body = json!({"metadata": {"resourceVersion": "7"}, "items": [
            {"metadata": {"name": "a", "namespace": "default"}, "spec": {"nodeName": "pi", "containers": 1}},
            pod("b", "pi", "6"),
            pod("c", "elsewhere", "6"),
            {"metadata": {"name": "d", "namespace": "default"}, "spec": {"nodeName": "pi", "containers": 1}},
        ]});
        let (set, rv, problems) =
            decode_list(&serde_json::to_vec(&body).unwrap(), "pi", &previous).unwrap();
        assert_eq!(rv, "7");
        assert_eq!(names(&set), ["a", "b"]);
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(decode_list(b"{nope", "pi", &previous).is_err());
    }

    #[test]
    fn jitter_is_a_fraction() {
        for n in 0..50 {
            let f = jitter_fraction("pi", n);
            assert!((0.0..1.0).contains(&f), "{f}");
        }
        assert_eq!(jitter_fraction("pi", 3), jitter_fraction("pi", 3));
    }
}
