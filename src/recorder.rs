//! The kubelet's event recorder (kubelet: `record.EventRecorder` with client-go's
//! `EventCorrelator`): what picolet did to a pod — pulled an image, started a container,
//! killed it for a failed probe — as Kubernetes `v1.Event`s.
//!
//! Owns: a bounded ring of recorded events, in memory only (never on disk: an edge node's
//! flash does not need a write per container start), oldest dropped first, and the
//! aggregation of identical events. It is a leaf: it imports only `api` and `clock`, so the
//! runtime sync, the prober and the agent record into it, and the readers — the apiserver's
//! event sink, the node's own API — read from it, without knowing each other.
//!
//! Aggregation (kubelet: client-go `eventLogger.eventObserve`): an event with the same
//! involved object (UID and field path), type, reason and message as one in the ring bumps
//! that one's `count` and `last_timestamp` and moves it to the newest end, keeping its name
//! and first timestamp. Every insert and every bump gets the next `resource_version`, so a
//! reader that remembers the last one it saw gets exactly what changed since
//! ([`Recorder::since`]).
//!
//! Cost: one `Rc` per event; recording is a hash lookup and a B-tree insert; nothing at
//! idle (nothing is recorded when nothing happens).
//!
//! Deliberate difference: upstream's correlator also folds *similar* events (same reason,
//! different message) into "(combined from similar events)" and rate-limits per object
//! (a spam filter); picolet keeps only the identical-event aggregation, the ring bounds the
//! memory and the sink has the `eventRecordQPS` limit.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use serde_json::Value;
use tokio::sync::Notify;

use crate::api;
use crate::clock::{self, Clock, UnixNanos};
use crate::json::object;

/// The ring's default size (events; at ~0.5 KiB each, about half a MiB when full).
pub const DEFAULT_CAPACITY: usize = 1000;
/// The longest message kept, in bytes (kubelet: the events API's 1 KiB note limit); longer
/// ones are cut at a char boundary.
pub const MAX_MESSAGE_BYTES: usize = 1024;
/// `source.component` and `reportingComponent` of every event.
pub const COMPONENT: &str = "kubelet";

// kubelet: pkg/kubelet/events/event.go — the reasons picolet records.
pub const PULLING_IMAGE: &str = "Pulling";
pub const PULLED_IMAGE: &str = "Pulled";
pub const FAILED: &str = "Failed";
pub const INSPECT_FAILED: &str = "InspectFailed";
pub const ERR_IMAGE_NEVER_PULL: &str = "ErrImageNeverPull";
pub const BACK_OFF: &str = "BackOff";
pub const CREATED_CONTAINER: &str = "Created";
pub const STARTED_CONTAINER: &str = "Started";
pub const KILLING_CONTAINER: &str = "Killing";
pub const UNHEALTHY: &str = "Unhealthy";
pub const PROBE_WARNING: &str = "ProbeWarning";
pub const FAILED_MOUNT: &str = "FailedMount";
pub const FAILED_CREATE_POD_SANDBOX: &str = "FailedCreatePodSandBox";
pub const SANDBOX_CHANGED: &str = "SandboxChanged";
pub const FAILED_POST_START_HOOK: &str = "FailedPostStartHook";
pub const FAILED_PRE_STOP_HOOK: &str = "FailedPreStopHook";
pub const EXCEEDED_GRACE_PERIOD: &str = "ExceededGracePeriod";

/// `type` of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// `involvedObject`: the pod (and, with `field_path`, its container).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct InvolvedObject {
    /// Always `"Pod"`.
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// Always `"v1"`.
    pub api_version: &'static str,
    /// `spec.containers{web}`, `spec.initContainers{setup}`; `None` for the pod itself.
    pub field_path: Option<String>,
}

/// One event as the ring holds it (immutable: a bump replaces it with a new `Rc`).
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedEvent {
    /// The recorder's counter at the last insert or bump of this event.
    pub resource_version: u64,
    /// kubelet naming: `<pod name>.<hex nanoseconds of the first timestamp>`.
    pub name: String,
    pub namespace: String,
    pub involved: InvolvedObject,
    pub type_: EventType,
    pub reason: String,
    pub message: String,
    pub count: u32,
    pub first_timestamp: UnixNanos,
    pub last_timestamp: UnixNanos,
    /// `source.host`: the node name.
    pub source_host: String,
}

impl RecordedEvent {
    /// The `v1.Event` object as the apiserver would serve it.
    pub fn to_json(&self) -> Value {
        let mut involved = object(&mut [
            ("kind", self.involved.kind.into()),
            ("namespace", self.involved.namespace.as_str().into()),
            ("name", self.involved.name.as_str().into()),
            ("uid", self.involved.uid.as_str().into()),
            ("apiVersion", self.involved.api_version.into()),
        ]);
        if let Some(fp) = &self.involved.field_path {
            involved["fieldPath"] = fp.as_str().into();
        }
        object(&mut [
            ("apiVersion", "v1".into()),
            ("kind", "Event".into()),
            (
                "metadata",
                object(&mut [
                    ("name", self.name.as_str().into()),
                    ("namespace", self.namespace.as_str().into()),
                    ("resourceVersion", self.resource_version.to_string().into()),
                    (
                        "creationTimestamp",
                        clock::rfc3339(self.first_timestamp).into(),
                    ),
                ]),
            ),
            ("involvedObject", involved),
            ("reason", self.reason.as_str().into()),
            ("message", self.message.as_str().into()),
            (
                "source",
                object(&mut [
                    ("component", COMPONENT.into()),
                    ("host", self.source_host.as_str().into()),
                ]),
            ),
            (
                "firstTimestamp",
                clock::rfc3339(self.first_timestamp).into(),
            ),
            ("lastTimestamp", clock::rfc3339(self.last_timestamp).into()),
            ("count", self.count.into()),
            ("type", self.type_.as_str().into()),
            ("eventTime", Value::Null),
            ("reportingComponent", COMPONENT.into()),
            ("reportingInstance", self.source_host.as_str().into()),
        ])
    }
}

/// The field path of a container of the pod (kubelet: `GenerateContainerRef`):
/// `spec.initContainers{name}` for an init container (sidecars too), else
/// `spec.containers{name}`.
pub fn container_field_path(pod: &api::Pod, container: &str) -> String {
    if pod.spec.init_containers.iter().any(|c| c.name == container) {
        format!("spec.initContainers{{{container}}}")
    } else {
        format!("spec.containers{{{container}}}")
    }
}

/// An event as the aggregation index holds it: hashed and compared by what makes two
/// events the same (kubelet: client-go `getEventKey`; source and kind are the same for
/// every event of this recorder). The ring's own `Rc`, not a copy of its strings.
#[derive(Debug, Clone)]
struct Key(Rc<RecordedEvent>);

type KeyParts<'a> = (
    &'a str,
    &'a str,
    &'a str,
    Option<&'a str>,
    EventType,
    &'a str,
    &'a str,
);

impl Key {
    fn parts(&self) -> KeyParts<'_> {
        let e = &*self.0;
        (
            &e.involved.uid,
            &e.involved.namespace,
            &e.involved.name,
            e.involved.field_path.as_deref(),
            e.type_,
            &e.reason,
            &e.message,
        )
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for Key {}

impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.parts().hash(state);
    }
}

struct Ring {
    /// The last resource version handed out.
    rv: u64,
    /// The ring, oldest first: the key is each event's resource version.
    by_rv: BTreeMap<u64, Rc<RecordedEvent>>,
    /// Each event's current resource version.
    by_key: HashMap<Key, u64>,
    /// Events evicted from the full ring.
    dropped: u64,
    /// The stamp behind the newest event name (names stay unique within a nanosecond).
    last_name_nanos: UnixNanos,
}

struct Inner {
    node_name: String,
    capacity: usize,
    now: RefCell<Rc<dyn Fn() -> UnixNanos>>,
    ring: RefCell<Ring>,
    notify: Notify,
}

/// A cheap-clone handle on the one ring of the node (single thread: the agent's
/// `LocalSet`). Every borrow is short and never held across an `.await`.
#[derive(Clone)]
pub struct Recorder(Rc<Inner>);

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ring = self.0.ring.borrow();
        write!(
            f,
            "Recorder({} events, rv {}, {} dropped)",
            ring.by_rv.len(),
            ring.rv,
            ring.dropped
        )
    }
}

impl Recorder {
    /// A recorder for `node_name` holding at most `capacity` events (at least 1), stamping
    /// them with the system clock (see [`Recorder::with_clock`]).
    pub fn new(node_name: &str, capacity: usize) -> Self {
        Recorder(Rc::new(Inner {
            node_name: node_name.to_string(),
            capacity: capacity.max(1),
            now: RefCell::new(Rc::new(|| clock::SystemClock.now())),
            ring: RefCell::new(Ring {
                rv: 0,
                by_rv: BTreeMap::new(),
                by_key: HashMap::new(),
                dropped: 0,
                last_name_nanos: 0,
            }),
            notify: Notify::new(),
        }))
    }

    /// Stamps come from `clock` from now on (tests: a `TokioClock` under paused time).
    pub fn with_clock<C: Clock>(self, clock: C) -> Self {
        *self.0.now.borrow_mut() = Rc::new(move || clock.now());
        self
    }

    pub fn node_name(&self) -> &str {
        &self.0.node_name
    }

    pub fn capacity(&self) -> usize {
        self.0.capacity
    }

    /// A `Normal` event about `pod` (or its container at `field_path`).
    pub fn normal(
        &self,
        pod: &api::Pod,
        field_path: Option<&str>,
        reason: &str,
        message: impl Into<String>,
    ) {
        self.record(pod, field_path, EventType::Normal, reason, message.into());
    }

    /// A `Warning` event about `pod` (or its container at `field_path`).
    pub fn warning(
        &self,
        pod: &api::Pod,
        field_path: Option<&str>,
        reason: &str,
        message: impl Into<String>,
    ) {
        self.record(pod, field_path, EventType::Warning, reason, message.into());
    }

    /// Record (or aggregate) one event; watchers awaiting [`Recorder::changed`] wake.
    pub fn record(
        &self,
        pod: &api::Pod,
        field_path: Option<&str>,
        type_: EventType,
        reason: &str,
        mut message: String,
    ) {
        truncate(&mut message, MAX_MESSAGE_BYTES);
        let now = (self.0.now.borrow())();
        // The new event, unnamed yet; it is also the key an older copy is looked up by.
        let key = Key(Rc::new(RecordedEvent {
            resource_version: 0,
            name: String::new(),
            namespace: pod.metadata.namespace.clone(),
            involved: InvolvedObject {
                kind: "Pod",
                namespace: pod.metadata.namespace.clone(),
                name: pod.metadata.name.clone(),
                uid: pod.metadata.uid.clone(),
                api_version: "v1",
                field_path: field_path.map(str::to_string),
            },
            type_,
            reason: reason.to_string(),
            message,
            count: 1,
            first_timestamp: now,
            last_timestamp: now,
            source_host: self.0.node_name.clone(),
        }));
        {
            let mut ring = self.0.ring.borrow_mut();
            ring.rv += 1;
            let rv = ring.rv;
            let old = ring.by_key.remove(&key);
            let event = match old.and_then(|old_rv| ring.by_rv.remove(&old_rv)) {
                // kubelet: eventLogger — the same event again: count + 1, the newest stamp.
                Some(prev) => RecordedEvent {
                    resource_version: rv,
                    count: prev.count.saturating_add(1),
                    last_timestamp: now,
                    ..(*prev).clone()
                },
                None => {
                    let name_nanos = now.max(ring.last_name_nanos.saturating_add(1));
                    ring.last_name_nanos = name_nanos;
                    let mut event = Rc::unwrap_or_clone(key.0);
                    event.resource_version = rv;
                    // kubelet: makeEvent — fmt.Sprintf("%v.%x", ref.Name, t.UnixNano()).
                    event.name = format!("{}.{:x}", event.involved.name, name_nanos);
                    event
                }
            };
            let event = Rc::new(event);
            ring.by_rv.insert(rv, Rc::clone(&event));
            ring.by_key.insert(Key(event), rv);
            while ring.by_rv.len() > self.0.capacity {
                let Some((_, oldest)) = ring.by_rv.pop_first() else {
                    break;
                };
                ring.by_key.remove(&Key(oldest));
                ring.dropped += 1;
            }
        }
        self.0.notify.notify_waiters();
    }

    /// Every event in the ring, oldest first.
    pub fn list(&self) -> Vec<Rc<RecordedEvent>> {
        self.0.ring.borrow().by_rv.values().cloned().collect()
    }

    /// The events inserted or bumped after `resource_version`, oldest first.
    pub fn since(&self, resource_version: u64) -> Vec<Rc<RecordedEvent>> {
        use std::ops::Bound;
        self.0
            .ring
            .borrow()
            .by_rv
            .range((Bound::Excluded(resource_version), Bound::Unbounded))
            .map(|(_, e)| Rc::clone(e))
            .collect()
    }

    /// The last resource version handed out (0: nothing recorded yet).
    pub fn resource_version(&self) -> u64 {
        self.0.ring.borrow().rv
    }

    /// How many events the full ring evicted.
    pub fn dropped(&self) -> u64 {
        self.0.ring.borrow().dropped
    }

    /// Completes at the next record after the first poll. A watcher reads
    /// [`Recorder::since`] and, finding nothing new, awaits this without awaiting anything
    /// in between (one thread: nothing can be recorded between the two).
    pub async fn changed(&self) {
        self.0.notify.notified().await;
    }
}

/// Cut `s` to at most `max` bytes, on a char boundary.
fn truncate(s: &mut String, max: usize) {
    if s.len() <= max {
        return;
    }
    let mut cut = max;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    s.truncate(cut);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::cell::Cell;

    const T0: UnixNanos = 1_796_000_000_000_000_000;

    /// A clock the test moves by hand.
    #[derive(Clone)]
    struct ManualClock(Rc<Cell<UnixNanos>>);

    impl Clock for ManualClock {
        fn now(&self) -> UnixNanos {
            self.0.get()
        }
    }

    fn recorder(capacity: usize) -> (Recorder, Rc<Cell<UnixNanos>>) {
        let t = Rc::new(Cell::new(T0));
        let r = Recorder::new("pi-1", capacity).with_clock(ManualClock(t.clone()));
        (r, t)
    }

    fn pod(name: &str, uid: &str) -> api::Pod {
        let mut p = api::Pod::default();
        p.metadata.name = name.into();
        p.metadata.namespace = "default".into();
        p.metadata.uid = uid.into();
        p.spec.containers.push(api::Container {
            name: "web".into(),
            ..Default::default()
        });
        p.spec.init_containers.push(api::Container {
            name: "setup".into(),
            ..Default::default()
        });
        p
    }

    fn summary(r: &Recorder) -> Vec<(u64, String, u32)> {
        r.list()
            .iter()
            .map(|e| (e.resource_version, e.reason.clone(), e.count))
            .collect()
    }

    #[test]
    fn aggregation_table() {
        let a = pod("web", "uid-a");
        let b = pod("web", "uid-b");
        // (pod, field path, type, reason, message) recorded in order → the ring after it.
        type Step<'a> = (&'a api::Pod, Option<&'a str>, EventType, &'a str, &'a str);
        // (resource version, reason, count), oldest first.
        type Want<'a> = Vec<(u64, &'a str, u32)>;
        let cases: Vec<(&str, Vec<Step>, Want)> = vec![
            (
                "identical events aggregate",
                vec![
                    (&a, None, EventType::Normal, "Pulling", "x"),
                    (&a, None, EventType::Normal, "Pulling", "x"),
                ],
                vec![(2, "Pulling", 2)],
            ),
            (
                "another message is another event",
                vec![
                    (&a, None, EventType::Normal, "Pulling", "x"),
                    (&a, None, EventType::Normal, "Pulling", "y"),
                ],
                vec![(1, "Pulling", 1), (2, "Pulling", 1)],
            ),
            (
                "another type, object, container or reason is another event",
                vec![
                    (&a, None, EventType::Normal, "R", "m"),
                    (&a, None, EventType::Warning, "R", "m"),
                    (&b, None, EventType::Normal, "R", "m"),
                    (
                        &a,
                        Some("spec.containers{web}"),
                        EventType::Normal,
                        "R",
                        "m",
                    ),
                    (&a, None, EventType::Normal, "S", "m"),
                ],
                vec![
                    (1, "R", 1),
                    (2, "R", 1),
                    (3, "R", 1),
                    (4, "R", 1),
                    (5, "S", 1),
                ],
            ),
            (
                "a bump moves the event to the newest end",
                vec![
                    (&a, None, EventType::Normal, "A", "m"),
                    (&a, None, EventType::Normal, "B", "m"),
                    (&a, None, EventType::Normal, "A", "m"),
                    (&a, None, EventType::Normal, "A", "m"),
                ],
                vec![(2, "B", 1), (4, "A", 3)],
            ),
        ];
        for (what, steps, want) in cases {
            let (r, t) = recorder(10);
            for (p, fp, ty, reason, msg) in steps {
                t.set(t.get() + 1_000_000_000);
                r.record(p, fp, ty, reason, msg.to_string());
            }
            let want: Vec<(u64, String, u32)> = want
                .into_iter()
                .map(|(rv, reason, n)| (rv, reason.to_string(), n))
                .collect();
            assert_eq!(summary(&r), want, "{what}");
        }
    }

    #[test]
    fn a_bump_keeps_name_and_first_stamp() {
        let (r, t) = recorder(10);
        let p = pod("web", "u1");
        r.warning(&p, Some("spec.containers{web}"), BACK_OFF, "crash");
        let first = r.list()[0].clone();
        assert_eq!(first.name, format!("web.{:x}", T0));
        assert_eq!(first.name.len(), "web.".len() + 16);
        t.set(T0 + 5_000_000_000);
        r.warning(&p, Some("spec.containers{web}"), BACK_OFF, "crash");
        let list = r.list();
        assert_eq!(list.len(), 1);
        let e = &list[0];
        assert_eq!(
            (
                e.name.as_str(),
                e.count,
                e.first_timestamp,
                e.last_timestamp
            ),
            (first.name.as_str(), 2, T0, T0 + 5_000_000_000)
        );
        assert_eq!(e.resource_version, 2);
    }

    #[test]
    fn names_are_unique_within_one_nanosecond() {
        let (r, _) = recorder(10);
        let p = pod("web", "u1");
        r.normal(&p, None, "A", "1");
        r.normal(&p, None, "B", "2");
        let names: Vec<String> = r.list().iter().map(|e| e.name.clone()).collect();
        assert_eq!(
            names,
            [format!("web.{:x}", T0), format!("web.{:x}", T0 + 1)]
        );
    }

    #[test]
    fn the_ring_evicts_the_oldest_and_counts() {
        let (r, _) = recorder(3);
        let p = pod("web", "u1");
        for m in ["a", "b", "c"] {
            r.normal(&p, None, "R", m);
        }
        // Bumping "a" makes it the newest: "b" is the oldest now.
        r.normal(&p, None, "R", "a");
        r.normal(&p, None, "R", "d");
        r.normal(&p, None, "R", "e");
        let msgs: Vec<(String, u32)> = r
            .list()
            .iter()
            .map(|e| (e.message.clone(), e.count))
            .collect();
        assert_eq!(
            msgs,
            [("a".into(), 2), ("d".into(), 1), ("e".into(), 1)],
            "oldest first"
        );
        assert_eq!(r.dropped(), 2);
        // An evicted event recorded again is new (count 1), not a bump.
        r.normal(&p, None, "R", "b");
        let last = r.list().last().cloned().unwrap();
        assert_eq!((last.message.as_str(), last.count), ("b", 1));
        assert_eq!(r.dropped(), 3);
    }

    #[test]
    fn since_and_resource_versions() {
        let (r, _) = recorder(10);
        let p = pod("web", "u1");
        assert_eq!(r.resource_version(), 0);
        assert!(r.since(0).is_empty());
        r.normal(&p, None, "A", "m");
        r.normal(&p, None, "B", "m");
        r.normal(&p, None, "C", "m");
        assert_eq!(r.resource_version(), 3);
        let rvs = |v: Vec<Rc<RecordedEvent>>| -> Vec<(u64, String)> {
            v.iter()
                .map(|e| (e.resource_version, e.reason.clone()))
                .collect()
        };
        assert_eq!(rvs(r.since(1)), [(2, "B".into()), (3, "C".into())]);
        assert!(r.since(3).is_empty());
        // A bump of A shows up after 3, with its new version.
        r.normal(&p, None, "A", "m");
        assert_eq!(rvs(r.since(3)), [(4, "A".into())]);
        assert_eq!(
            rvs(r.since(0)),
            [(2, "B".into()), (3, "C".into()), (4, "A".into())]
        );
        assert_eq!(r.resource_version(), 4);
    }

    #[test]
    fn long_messages_are_cut_on_a_char_boundary() {
        let (r, _) = recorder(10);
        let p = pod("web", "u1");
        // 1023 ASCII bytes, then a 2-byte char that would straddle the limit.
        let msg = format!("{}é tail", "x".repeat(1023));
        r.normal(&p, None, "R", msg);
        let e = &r.list()[0];
        assert_eq!(e.message.len(), 1023);
        assert!(e.message.chars().all(|c| c == 'x'));
    }

    #[test]
    fn field_paths() {
        let p = pod("web", "u1");
        assert_eq!(container_field_path(&p, "web"), "spec.containers{web}");
        assert_eq!(
            container_field_path(&p, "setup"),
            "spec.initContainers{setup}"
        );
    }

    #[test]
    fn json_is_a_v1_event() {
        let (r, t) = recorder(10);
        let p = pod("web-pi-1", "u1");
        r.warning(
            &p,
            Some("spec.containers{web}"),
            BACK_OFF,
            "Back-off restarting failed container web",
        );
        t.set(T0 + 61_000_000_000);
        r.warning(
            &p,
            Some("spec.containers{web}"),
            BACK_OFF,
            "Back-off restarting failed container web",
        );
        r.normal(&p, None, SANDBOX_CHANGED, "s");
        let e = &r.list()[0];
        let name = format!("web-pi-1.{:x}", T0);
        assert_eq!(
            e.to_json(),
            json!({
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {
                    "name": name,
                    "namespace": "default",
                    "resourceVersion": "2",
                    "creationTimestamp": "2026-11-30T00:53:20Z",
                },
                "involvedObject": {
                    "kind": "Pod",
                    "namespace": "default",
                    "name": "web-pi-1",
                    "uid": "u1",
                    "apiVersion": "v1",
                    "fieldPath": "spec.containers{web}",
                },
                "reason": "BackOff",
                "message": "Back-off restarting failed container web",
                "source": {"component": "kubelet", "host": "pi-1"},
                "firstTimestamp": "2026-11-30T00:53:20Z",
                "lastTimestamp": "2026-11-30T00:54:21Z",
                "count": 2,
                "type": "Warning",
                "eventTime": null,
                "reportingComponent": "kubelet",
                "reportingInstance": "pi-1",
            })
        );
        // A pod-level event has no fieldPath.
        let pod_level = r.list()[1].to_json();
        assert!(pod_level["involvedObject"].get("fieldPath").is_none());
        assert_eq!(pod_level["type"], "Normal");
    }

    #[tokio::test]
    async fn changed_wakes_a_waiting_watcher() {
        let (r, _) = recorder(10);
        let p = pod("web", "u1");
        let w = r.clone();
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async move {
                let waiter = tokio::task::spawn_local(async move {
                    w.changed().await;
                    w.resource_version()
                });
                tokio::task::yield_now().await;
                r.normal(&p, None, "A", "m");
                assert_eq!(waiter.await.unwrap(), 1);
            })
            .await;
    }
}
