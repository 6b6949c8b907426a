//! Table tests of the device manager's state machine, its admission check and the merge of
//! plugins' answers.

use super::*;
use crate::api::{Container, Quantity, ResourceRequirements};

const R: &str = "example.com/dev";

fn ids(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn devices(list: &[(&str, bool)]) -> Vec<(String, bool)> {
    list.iter().map(|(id, h)| (id.to_string(), *h)).collect()
}

fn counts(s: &DeviceState) -> (i64, i64) {
    let all = s.counts();
    let c = all
        .iter()
        .find(|(n, _)| n == R)
        .map(|(_, c)| *c)
        .unwrap_or_default();
    (c.capacity, c.allocatable)
}

/// Every arrow of the resource lifecycle, with the counts after it.
#[test]
fn resource_lifecycle() {
    let t0 = Instant::now();
    let mut s = DeviceState::default();
    // unknown --list--> unknown: a list before any registration is ignored.
    assert!(!s.set_devices(R, 1, devices(&[("a", true)])));
    assert!(!s.is_device_resource(R));
    // unknown --Register--> registered(1): known, no device yet.
    s.register(R, 1);
    assert!(s.is_device_resource(R));
    assert_eq!(counts(&s), (0, 0));
    // registered(1) --list--> registered(1).
    assert!(s.set_devices(R, 1, devices(&[("a", true), ("b", true), ("c", false)])));
    assert_eq!(counts(&s), (3, 2));
    // The same list again changes nothing.
    assert!(!s.set_devices(R, 1, devices(&[("a", true), ("b", true), ("c", false)])));
    // A device turns unhealthy: it leaves allocatable, stays in capacity.
    assert!(s.set_devices(R, 1, devices(&[("a", true), ("b", false), ("c", false)])));
    assert_eq!(counts(&s), (3, 1));
    // registered(1) --Register again--> registered(2): the old stream's news are ignored.
    s.register(R, 2);
    assert!(!s.set_devices(R, 1, devices(&[])));
    assert!(!s.stopped(R, 1, t0));
    assert_eq!(counts(&s), (3, 1));
    assert!(s.set_devices(R, 2, devices(&[("a", true), ("b", true)])));
    assert_eq!(counts(&s), (2, 2));
    // registered(2) --stream ends--> stopped: every device unhealthy.
    assert!(s.stopped(R, 2, t0));
    assert_eq!(counts(&s), (2, 0));
    assert_eq!(s.endpoint(R), None);
    assert_eq!(s.next_expiry(), Some(t0 + ENDPOINT_STOP_GRACE));
    // stopped --before the grace period--> stopped.
    assert!(!s.expire(t0 + ENDPOINT_STOP_GRACE - Duration::from_secs(1)));
    // stopped --grace period--> capacity 0, still known.
    assert!(s.expire(t0 + ENDPOINT_STOP_GRACE));
    assert_eq!(counts(&s), (0, 0));
    assert!(s.is_device_resource(R));
    assert_eq!(s.next_expiry(), None);
    // stopped --Register--> registered(3) before the grace period: no expiry pending.
    s.register(R, 3);
    assert!(s.set_devices(R, 3, devices(&[("a", true)])));
    assert!(s.stopped(R, 3, t0));
    s.register(R, 4);
    assert_eq!(s.next_expiry(), None);
    assert!(!s.expire(t0 + ENDPOINT_STOP_GRACE * 2));
    assert_eq!(counts(&s), (1, 0));
}

fn alloc(uid: &str, container: &str, list: &[&str]) -> PodDevicesEntry {
    PodDevicesEntry {
        pod_uid: uid.into(),
        container_name: container.into(),
        resource_name: R.into(),
        device_ids: ids(list),
        alloc_resp: ContainerDevices::default(),
    }
}

#[test]
fn allocation_table() {
    let mut s = DeviceState::default();
    // (what, needed, expected)
    assert_eq!(
        s.available(R, 1),
        Err(DeviceError::Unregistered(R.to_string()))
    );
    s.register(R, 1);
    assert_eq!(
        s.available(R, 1),
        Err(DeviceError::NoHealthy(R.to_string()))
    );
    s.set_devices(R, 1, devices(&[("a", true), ("b", true), ("c", false)]));
    assert_eq!(s.available(R, 2), Ok(ids(&["a", "b"])));
    assert_eq!(
        s.available(R, 3),
        Err(DeviceError::Unavailable {
            resource: R.to_string(),
            requested: 3,
            available: 2
        })
    );
    s.record(alloc("p1", "c1", &["a"]));
    assert_eq!(s.available(R, 1), Ok(ids(&["b"])));
    assert_eq!(
        s.available(R, 2).unwrap_err().to_string(),
        "requested number of devices unavailable for example.com/dev. Requested: 2, Available: 1"
    );
    assert_eq!(
        s.allocation("p1", "c1", R),
        Some(&alloc("p1", "c1", &["a"]))
    );
    // Recorded again (never twice).
    s.record(alloc("p1", "c1", &["a"]));
    assert_eq!(s.checkpoint().pod_device_entries.len(), 1);
    // A pod no longer active frees its devices.
    let active: BTreeSet<String> = ["p2".to_string()].into();
    assert!(s.prune(&active));
    assert!(!s.prune(&active));
    assert_eq!(s.available(R, 2), Ok(ids(&["a", "b"])));
}

#[test]
fn pick_prefers_the_plugin_then_order() {
    let available = ids(&["a", "b", "c", "d"]);
    // (preferred, needed, expected)
    let cases: [(&[&str], usize, &[&str]); 5] = [
        (&[], 2, &["a", "b"]),
        (&["c"], 2, &["c", "a"]),
        (&["d", "c"], 2, &["d", "c"]),
        // Not available, or repeated: skipped.
        (&["x", "d", "d"], 2, &["d", "a"]),
        (&["b", "c", "d"], 1, &["b"]),
    ];
    for (preferred, needed, want) in cases {
        assert_eq!(
            pick(&available, &ids(preferred), needed),
            ids(want),
            "{preferred:?}"
        );
    }
}

#[test]
fn checkpoint_restores_assignments_with_no_device() {
    let mut s = DeviceState::default();
    s.register(R, 1);
    s.set_devices(R, 1, devices(&[("a", true), ("b", true)]));
    s.record(alloc("p1", "c1", &["b"]));
    let cp = s.checkpoint();
    assert_eq!(cp.registered_devices[0].resource, R);
    assert_eq!(cp.registered_devices[0].device_ids, ids(&["a", "b"]));
    assert_eq!(cp.pod_device_entries.len(), 1);
    let json = serde_json::to_value(&cp).unwrap();
    assert_eq!(json["PodDeviceEntries"][0]["DeviceIDs"][0], "b");
    let mut restored = DeviceState::from_checkpoint(&cp);
    // Known with no device until the plugin registers again (kubelet: readCheckpoint).
    assert_eq!(counts(&restored), (0, 0));
    assert_eq!(
        restored.available(R, 1),
        Err(DeviceError::NoHealthy(R.into()))
    );
    restored.register(R, 7);
    restored.set_devices(R, 7, devices(&[("a", true), ("b", true)]));
    // "b" is still held.
    assert_eq!(restored.available(R, 1), Ok(ids(&["a"])));
    assert_eq!(
        restored.allocation("p1", "c1", R),
        Some(&alloc("p1", "c1", &["b"]))
    );
}

#[test]
fn registration_checks() {
    let ok = Registration {
        version: "v1beta1".into(),
        endpoint: "dp.sock".into(),
        resource: R.into(),
        options: PluginOptions::default(),
    };
    assert!(validate(&ok).is_ok());
    // (change, message start)
    let cases: Vec<(Registration, &str)> = vec![
        (
            Registration {
                version: "v1alpha".into(),
                ..ok.clone()
            },
            "requested API version \"v1alpha\" is not supported by kubelet",
        ),
        (
            Registration {
                resource: "gpu".into(),
                ..ok.clone()
            },
            "the ResourceName \"gpu\" is invalid",
        ),
        (
            Registration {
                resource: "kubernetes.io/gpu".into(),
                ..ok.clone()
            },
            "the ResourceName",
        ),
        (
            Registration {
                endpoint: "../x.sock".into(),
                ..ok.clone()
            },
            "invalid endpoint",
        ),
        (
            Registration {
                endpoint: KUBELET_SOCKET.into(),
                ..ok.clone()
            },
            "invalid endpoint",
        ),
    ];
    for (r, want) in cases {
        let got = validate(&r).unwrap_err().to_string();
        assert!(got.starts_with(want), "{got}");
    }
    for (name, valid) in [
        ("example.com/dev", true),
        ("nvidia.com/gpu", true),
        ("smarter-devices/ttyUSB0", true),
        ("cpu", false),
        ("requests.example.com/x", false),
        ("example.com/", false),
        ("a/b/c", false),
        ("kubernetes.io/x", false),
        ("node.kubernetes.io/x", false),
    ] {
        assert_eq!(is_extended_resource_name(name), valid, "{name}");
    }
}

fn container(name: &str, limits: &[(&str, &str)]) -> Container {
    Container {
        name: name.into(),
        resources: Some(ResourceRequirements {
            limits: limits
                .iter()
                .map(|(k, v)| (k.to_string(), Quantity::Str(v.to_string())))
                .collect(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn pod(uid: &str, containers: Vec<Container>, init: Vec<Container>) -> Pod {
    let mut p = Pod::default();
    p.metadata.uid = uid.into();
    p.metadata.name = uid.into();
    p.spec.containers = containers;
    p.spec.init_containers = init;
    p
}

#[test]
fn requests_of_containers_and_pods() {
    let c = container("a", &[("cpu", "1"), (R, "2"), ("other.io/x", "0")]);
    assert_eq!(container_requests(&c), vec![(R.to_string(), 2)]);
    let p = pod(
        "u",
        vec![container("a", &[(R, "1")]), container("b", &[(R, "2")])],
        vec![container("i", &[(R, "4")])],
    );
    // max(sum of the app containers, largest init container)
    assert_eq!(pod_request(&p, R), 4);
    assert_eq!(pod_request(&p, "example.com/none"), 0);
}

#[test]
fn admission_table() {
    let resources: Resources = vec![
        (
            "example.com/dead".into(),
            ResourceCount {
                capacity: 1,
                allocatable: 0,
            },
        ),
        (
            R.into(),
            ResourceCount {
                capacity: 3,
                allocatable: 2,
            },
        ),
    ];
    let one = pod("one", vec![container("a", &[(R, "1")])], vec![]);
    let two = pod("two", vec![container("a", &[(R, "2")])], vec![]);
    let dead = pod(
        "dead",
        vec![container("a", &[("example.com/dead", "1")])],
        vec![],
    );
    let unknown = pod(
        "unknown",
        vec![container("a", &[("vendor.io/x", "1")])],
        vec![],
    );
    let plain = pod("plain", vec![container("a", &[("cpu", "1")])], vec![]);
    // (pod, others, expected: the resources nobody registered, or the error)
    type Case<'a> = (&'a Pod, Vec<&'a Pod>, Result<Vec<String>, String>);
    let cases: Vec<Case> = vec![
        (&plain, vec![], Ok(vec![])),
        (&one, vec![], Ok(vec![])),
        (&two, vec![], Ok(vec![])),
        (&one, vec![&one], Ok(vec![])),
        (
            &two,
            vec![&one],
            Err("requested number of devices unavailable for example.com/dev. Requested: 2, Available: 1".into()),
        ),
        (
            &dead,
            vec![],
            Err("no healthy devices present; cannot allocate unhealthy devices example.com/dead".into()),
        ),
        // A resource the node does not know: admitted, named for the warning.
        (&unknown, vec![], Ok(vec!["vendor.io/x".to_string()])),
    ];
    for (p, others, want) in cases {
        let got = admit(p, &resources, &others).map_err(|e| e.to_string());
        assert_eq!(got, want, "{}", p.metadata.name);
    }
}

#[test]
fn merge_of_answers() {
    let a = ContainerDevices {
        envs: [("A".to_string(), "1".to_string())].into(),
        mounts: vec![DeviceMount {
            container_path: "/m".into(),
            host_path: "/h1".into(),
            read_only: true,
        }],
        devices: vec![DeviceSpec {
            container_path: "/dev/x".into(),
            host_path: "/dev/x".into(),
            permissions: "rw".into(),
        }],
        annotations: [("k".to_string(), "v".to_string())].into(),
        cdi_devices: vec!["v.com/c=a".into()],
    };
    let b = ContainerDevices {
        envs: [("B".to_string(), "2".to_string())].into(),
        mounts: vec![DeviceMount {
            container_path: "/m".into(),
            host_path: "/h2".into(),
            read_only: false,
        }],
        devices: vec![DeviceSpec {
            container_path: "/dev/y".into(),
            host_path: "/dev/y".into(),
            permissions: "r".into(),
        }],
        annotations: Default::default(),
        cdi_devices: vec!["v.com/c=a".into(), "v.com/c=b".into()],
    };
    let mut m = ContainerDevices::default();
    assert!(m.is_empty());
    m.merge(&a);
    m.merge(&b);
    assert_eq!(m.envs.len(), 2);
    // The first mount of a container path wins.
    assert_eq!(m.mounts.len(), 1);
    assert_eq!(m.mounts[0].host_path, "/h1");
    assert_eq!(m.devices.len(), 2);
    assert_eq!(
        m.cdi_devices,
        vec!["v.com/c=a".to_string(), "v.com/c=b".to_string()]
    );
    assert_eq!(m.annotations["k"], "v");
}
