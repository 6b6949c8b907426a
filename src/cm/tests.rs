use super::manager::{apply, remove_dirs, remove_orphans, v1_hierarchies};
use super::*;
use crate::api::Pod;

fn pod(containers: &[(&str, &str, &str, &str)]) -> Pod {
    // (cpu request, cpu limit, memory request, memory limit); "" = unset.
    let mut cs = Vec::new();
    for (i, (rc, lc, rm, lm)) in containers.iter().enumerate() {
        let mut req = serde_json::Map::new();
        let mut lim = serde_json::Map::new();
        for (is_limit, k, v) in [
            (false, "cpu", rc),
            (true, "cpu", lc),
            (false, "memory", rm),
            (true, "memory", lm),
        ] {
            if !v.is_empty() {
                let m = if is_limit { &mut lim } else { &mut req };
                m.insert(k.into(), serde_json::json!(v));
            }
        }
        cs.push(serde_json::json!({
            "name": format!("c{i}"), "image": "i",
            "resources": {"requests": req, "limits": lim},
        }));
    }
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p", "namespace": "ns", "uid": "1234-abcd"},
        "spec": {"containers": cs},
    }))
    .unwrap()
}

fn layout(version: CgroupVersion, driver: CgroupDriver, root: &str) -> Layout {
    Layout {
        version,
        driver,
        root: split_root(root),
        v1_controllers: V1_CONTROLLERS.to_vec(),
    }
}

#[test]
fn names_for_each_driver_and_root() {
    use CgroupDriver::*;
    use QosClass::*;
    let cases = [
        (Cgroupfs, "/", Guaranteed, "/kubepods/pod1234-abcd"),
        (Cgroupfs, "/", Burstable, "/kubepods/burstable/pod1234-abcd"),
        (
            Cgroupfs,
            "",
            BestEffort,
            "/kubepods/besteffort/pod1234-abcd",
        ),
        (
            Cgroupfs,
            "/edge/pods",
            Burstable,
            "/edge/pods/kubepods/burstable/pod1234-abcd",
        ),
        (
            Systemd,
            "/",
            Guaranteed,
            "/kubepods.slice/kubepods-pod1234_abcd.slice",
        ),
        (
            Systemd,
            "/",
            Burstable,
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_abcd.slice",
        ),
        (
            Systemd,
            "/",
            BestEffort,
            "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1234_abcd.slice",
        ),
    ];
    for (driver, root, class, want) in cases {
        for version in [CgroupVersion::V1, CgroupVersion::V2] {
            let l = layout(version, driver, root);
            assert_eq!(
                l.path(&l.pod_cgroup(class, "1234-abcd")),
                want,
                "{driver:?} {root:?} {class:?}"
            );
        }
    }
}

#[test]
fn pod_resources_follow_the_kubelet() {
    let mi = 1i64 << 20;
    // (containers, qos, shares, quota, memory)
    type Case = (
        Vec<(&'static str, &'static str, &'static str, &'static str)>,
        QosClass,
        Resources,
    );
    let cases: Vec<Case> = vec![
        (
            vec![("", "", "", "")],
            QosClass::BestEffort,
            Resources {
                cpu_shares: Some(2),
                ..Resources::default()
            },
        ),
        (
            // Guaranteed: limits alone; two containers summed.
            vec![("", "250m", "", "64Mi"), ("", "250m", "", "64Mi")],
            QosClass::Guaranteed,
            Resources {
                cpu_shares: Some(512),
                cpu_quota: Some(50_000),
                memory_limit: Some(128 * mi),
            },
        ),
        (
            // Burstable, one container without a memory limit: no pod memory limit.
            vec![("100m", "200m", "32Mi", "64Mi"), ("100m", "", "", "")],
            QosClass::Burstable,
            Resources {
                cpu_shares: Some(204),
                cpu_quota: None,
                memory_limit: None,
            },
        ),
        (
            // Burstable, every container limits memory, none cpu.
            vec![("100m", "", "32Mi", "64Mi")],
            QosClass::Burstable,
            Resources {
                cpu_shares: Some(102),
                cpu_quota: None,
                memory_limit: Some(64 * mi),
            },
        ),
        (
            // A tiny cpu limit: the quota's 1 ms floor; a 1m request: the 2-share floor.
            vec![("1m", "5m", "", "")],
            QosClass::Burstable,
            Resources {
                cpu_shares: Some(2),
                cpu_quota: Some(1000),
                memory_limit: None,
            },
        ),
    ];
    for (containers, class, want) in cases {
        let p = pod(&containers);
        assert_eq!(crate::qos::pod_qos(&p), class, "{containers:?}");
        assert_eq!(pod_resources(&p), want, "{containers:?}");
    }
}

/// kubelet: ResourceConfigForPod with pod-level resources — the pod-level request gives
/// the shares, a pod-level limit is declared whatever the containers set.
#[test]
fn pod_level_resources_set_the_pod_cgroup() {
    let mi = 1i64 << 20;
    let with = |containers: &[(&'static str, &'static str, &'static str, &'static str)],
                pod_level: serde_json::Value| {
        let mut p = pod(containers);
        p.spec.resources = Some(serde_json::from_value(pod_level).unwrap());
        p
    };
    // Burstable at pod level: requests 500m/64Mi, limits 1 cpu/128Mi; containers set nothing.
    let p = with(
        &[("", "", "", ""), ("", "", "", "")],
        serde_json::json!({"requests": {"cpu": "500m", "memory": "64Mi"},
                           "limits": {"cpu": "1", "memory": "128Mi"}}),
    );
    assert_eq!(crate::qos::pod_qos(&p), QosClass::Burstable);
    assert_eq!(
        pod_resources(&p),
        Resources {
            cpu_shares: Some(512),
            cpu_quota: Some(100_000),
            memory_limit: Some(128 * mi),
        }
    );
    assert_eq!(pod_cpu_request(&p), 500);
    // Guaranteed at pod level over a container with its own smaller limits.
    let p = with(
        &[("100m", "200m", "", "32Mi")],
        serde_json::json!({"requests": {"cpu": "2", "memory": "256Mi"},
                           "limits": {"cpu": "2", "memory": "256Mi"}}),
    );
    assert_eq!(crate::qos::pod_qos(&p), QosClass::Guaranteed);
    assert_eq!(
        pod_resources(&p),
        Resources {
            cpu_shares: Some(2048),
            cpu_quota: Some(200_000),
            memory_limit: Some(256 * mi),
        }
    );
    // A pod-level memory limit only: cpu from the containers (no cpu limit declared).
    let p = with(
        &[("100m", "", "", "")],
        serde_json::json!({"limits": {"memory": "96Mi"}, "requests": {"memory": "96Mi"}}),
    );
    assert_eq!(
        pod_resources(&p),
        Resources {
            cpu_shares: Some(102),
            cpu_quota: None,
            memory_limit: Some(96 * mi),
        }
    );
}

#[test]
fn init_containers_count_when_larger() {
    let mut p = pod(&[("100m", "100m", "", "64Mi")]);
    let init: crate::api::Container = serde_json::from_value(serde_json::json!({
        "name": "init", "image": "i",
        "resources": {"limits": {"cpu": "500m", "memory": "32Mi"}},
    }))
    .unwrap();
    p.spec.init_containers.push(init);
    let r = pod_resources(&p);
    assert_eq!(r.cpu_quota, Some(50_000));
    assert_eq!(r.memory_limit, Some(64 << 20));
    assert_eq!(pod_cpu_request(&p), 500);
}

#[test]
fn conversions() {
    assert_eq!(milli_cpu_to_shares(0), 2);
    assert_eq!(milli_cpu_to_shares(1000), 1024);
    assert_eq!(milli_cpu_to_shares(1_000_000), MAX_SHARES);
    assert_eq!(milli_cpu_to_quota(1500), 150_000);
    assert_eq!(shares_to_weight(2), 1);
    assert_eq!(shares_to_weight(1024), 39);
    assert_eq!(shares_to_weight(262_144), 10_000);
}

#[test]
fn allocatable_and_enforced() {
    let a = NodeAllocatable {
        reserved: Reserved {
            cpu_milli: 500,
            memory_bytes: 256 << 20,
        },
        eviction_hard_memory: DEFAULT_EVICTION_HARD_MEMORY,
    };
    assert_eq!(
        a.allocatable(4000, 1 << 30),
        (3500, (1 << 30) - (356 << 20))
    );
    assert_eq!(a.enforced(4000, 1 << 30), (3500, (1 << 30) - (256 << 20)));
    assert_eq!(a.allocatable(100, 1 << 20), (0, 0));
}

fn write_ops(ops: &[Op]) -> Vec<(String, String)> {
    ops.iter()
        .filter_map(|o| match o {
            Op::Write { file, value } => Some((file.clone(), value.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn ensure_ops_v1_and_v2() {
    let p = pod(&[("250m", "500m", "64Mi", "128Mi")]);
    let res = pod_resources(&p);
    let l1 = layout(CgroupVersion::V1, CgroupDriver::Cgroupfs, "/");
    let ops = ensure_ops(&l1, &l1.pod_cgroup(QosClass::Burstable, "u"), &res);
    assert!(ops.contains(&Op::Mkdir("memory/kubepods/burstable/podu".into())));
    assert_eq!(
        write_ops(&ops),
        [
            ("cpu/kubepods/burstable/podu/cpu.shares", "256"),
            ("cpu/kubepods/burstable/podu/cpu.cfs_period_us", "100000"),
            ("cpu/kubepods/burstable/podu/cpu.cfs_quota_us", "50000"),
            (
                "memory/kubepods/burstable/podu/memory.limit_in_bytes",
                "134217728"
            ),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    let l2 = layout(CgroupVersion::V2, CgroupDriver::Cgroupfs, "/");
    let ops = ensure_ops(&l2, &l2.pod_cgroup(QosClass::Burstable, "u"), &res);
    assert_eq!(
        ops[..4],
        [
            Op::EnableControllers("".into()),
            Op::EnableControllers("kubepods".into()),
            Op::EnableControllers("kubepods/burstable".into()),
            Op::Mkdir("kubepods/burstable/podu".into()),
        ]
    );
    assert_eq!(
        write_ops(&ops),
        [
            ("kubepods/burstable/podu/cpu.weight", "10"),
            ("kubepods/burstable/podu/cpu.max", "50000 100000"),
            ("kubepods/burstable/podu/memory.max", "134217728"),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    for v in [CgroupVersion::V1, CgroupVersion::V2] {
        let ls = layout(v, CgroupDriver::Systemd, "/");
        assert!(ensure_ops(&ls, &ls.pod_cgroup(QosClass::Burstable, "u"), &res).is_empty());
    }
}

#[test]
fn node_ops_set_kubepods_and_qos_shares() {
    let l = layout(CgroupVersion::V1, CgroupDriver::Cgroupfs, "/");
    let ops = node_ops(&l, &kubepods_resources(3500, 1 << 30), 1500);
    let writes = write_ops(&ops);
    for (f, v) in [
        ("cpu/kubepods/cpu.shares", "3584"),
        ("memory/kubepods/memory.limit_in_bytes", "1073741824"),
        ("cpu/kubepods/burstable/cpu.shares", "1536"),
        ("cpu/kubepods/besteffort/cpu.shares", "2"),
    ] {
        assert!(
            writes.contains(&(f.to_string(), v.to_string())),
            "{f}={v} in {writes:?}"
        );
    }
    // No memory limit on the QoS cgroups (kubelet without QOSReserved).
    assert!(!writes.iter().any(|(f, _)| f.contains("burstable/memory.")));
}

#[test]
fn apply_and_remove_under_an_injected_root_v1() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let l = layout(CgroupVersion::V1, CgroupDriver::Cgroupfs, "/");
    let p = pod(&[("", "250m", "", "64Mi")]);
    let name = l.pod_cgroup(QosClass::Guaranteed, "u1");
    apply(root, &ensure_ops(&l, &name, &pod_resources(&p))).unwrap();
    let read = |f: &str| std::fs::read_to_string(root.join(f)).unwrap();
    assert_eq!(read("cpu/kubepods/podu1/cpu.shares"), "256");
    assert_eq!(
        read("memory/kubepods/podu1/memory.limit_in_bytes"),
        "67108864"
    );
    // Removal: the pod directory in every hierarchy (here: empty ones, as cgroupfs shows
    // them to rmdir), a hierarchy made by the runtime included.
    std::fs::create_dir_all(root.join("freezer/kubepods/podu1/ctr")).unwrap();
    for f in [
        "cpu/kubepods/podu1/cpu.shares",
        "cpu/kubepods/podu1/cpu.cfs_quota_us",
        "cpu/kubepods/podu1/cpu.cfs_period_us",
        "memory/kubepods/podu1/memory.limit_in_bytes",
    ] {
        std::fs::remove_file(root.join(f)).unwrap();
    }
    let h = v1_hierarchies(root);
    assert_eq!(h, ["cpu", "freezer", "memory", "pids"]);
    remove_dirs(root, &pod_dirs(&l, QosClass::Guaranteed, "u1", &h)).unwrap();
    for c in ["cpu", "freezer", "memory", "pids"] {
        assert!(!root.join(c).join("kubepods/podu1").exists(), "{c}");
        assert!(root.join(c).join("kubepods").exists(), "{c}");
    }
}

#[test]
fn apply_v2_enables_controllers() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(root.join("cgroup.controllers"), "cpuset cpu io memory pids").unwrap();
    std::fs::write(root.join("cgroup.subtree_control"), "cpu").unwrap();
    let l = layout(CgroupVersion::V2, CgroupDriver::Cgroupfs, "/");
    // kubepods first (the daemon's start), with its own controllers file as the kernel
    // would show it.
    apply(
        root,
        &ensure_ops(&l, &l.kubepods(), &kubepods_resources(2000, 1 << 30)),
    )
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(root.join("cgroup.subtree_control")).unwrap(),
        "+memory +pids"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("kubepods/memory.max")).unwrap(),
        "1073741824"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("kubepods/cpu.weight")).unwrap(),
        "79"
    );
    // A missing cgroup.controllers (no such cgroup) is a clear error naming the file.
    let err = apply(
        root,
        &ensure_ops(
            &l,
            &l.pod_cgroup(QosClass::Guaranteed, "u"),
            &Resources::default(),
        ),
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("kubepods/cgroup.controllers"),
        "{err}"
    );
}

#[test]
fn orphaned_pod_cgroups_are_removed_and_kept_ones_stay() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for d in [
        "cpu/kubepods/burstable/podgone",
        "memory/kubepods/burstable/podgone",
        "blkio/kubepods/burstable/podgone",
        "cpu/kubepods/podwanted",
        "cpu/kubepods/besteffort/podgone2",
    ] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let l = layout(CgroupVersion::V1, CgroupDriver::Cgroupfs, "/");
    let keep = ["wanted".to_string()].into_iter().collect();
    remove_orphans(&l, root, &keep);
    for gone in [
        "cpu/kubepods/burstable/podgone",
        "memory/kubepods/burstable/podgone",
        "blkio/kubepods/burstable/podgone",
        "cpu/kubepods/besteffort/podgone2",
    ] {
        assert!(!root.join(gone).exists(), "{gone}");
    }
    assert!(root.join("cpu/kubepods/podwanted").exists());
    assert!(root.join("cpu/kubepods/burstable").exists());
}
