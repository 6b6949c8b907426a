use super::*;

const MI: u64 = 1 << 20;

#[test]
fn parse_thresholds_table() {
    let defaults = parse_thresholds(DEFAULT_EVICTION_HARD).unwrap();
    assert_eq!(
        defaults,
        vec![
            Threshold {
                signal: Signal::MemoryAvailable,
                value: Value::Quantity(100 * MI)
            },
            Threshold {
                signal: Signal::NodeFsAvailable,
                value: Value::Percent(10.0)
            },
            Threshold {
                signal: Signal::NodeFsInodesFree,
                value: Value::Percent(5.0)
            },
            Threshold {
                signal: Signal::ImageFsAvailable,
                value: Value::Percent(15.0)
            },
        ]
    );
    assert_eq!(parse_thresholds("").unwrap(), vec![]);
    assert_eq!(
        parse_thresholds(" pid.available < 1k ").unwrap(),
        vec![Threshold {
            signal: Signal::PidAvailable,
            value: Value::Quantity(1000)
        }]
    );
    let bad = [
        ("memory.available>1Gi", "expected SIGNAL<QUANTITY"),
        ("memory.free<1Gi", "unknown signal"),
        ("nodefs.available<101%", "within 0% and 100%"),
        ("nodefs.available<x%", "not a percentage"),
        ("memory.available<lots", "not a quantity"),
        ("memory.available<-1Mi", "not a quantity"),
    ];
    for (input, want) in bad {
        let e = parse_thresholds(input).unwrap_err().to_string();
        assert!(e.contains(want), "{input}: {e}");
        assert!(e.contains(input), "{input}: the error names the item: {e}");
    }
    let twice = parse_thresholds("memory.available<1Mi,memory.available<2Mi").unwrap();
    assert!(check_unique(&twice).is_err());
    let map: BTreeMap<String, String> =
        [("imagefs.inodesFree".to_string(), "3%".to_string())].into();
    assert_eq!(
        thresholds_from_map(&map).unwrap(),
        vec![Threshold {
            signal: Signal::ImageFsInodesFree,
            value: Value::Percent(3.0)
        }]
    );
}

#[test]
fn thresholds_met() {
    let o = Observation {
        available: 99,
        capacity: 1000,
    };
    let t = |value| Threshold {
        signal: Signal::NodeFsAvailable,
        value,
    };
    let table = [
        (Value::Percent(10.0), true),
        (Value::Percent(9.9), false),
        (Value::Quantity(100), true),
        (Value::Quantity(99), false),
        (Value::Percent(0.0), false),
        (Value::Quantity(0), false),
    ];
    for (v, met) in table {
        assert_eq!(t(v).met(&o), met, "{v:?}");
    }
}

fn obs(pairs: &[(Signal, u64, u64)]) -> Observations {
    pairs
        .iter()
        .map(|(s, a, c)| {
            (
                *s,
                Observation {
                    available: *a,
                    capacity: *c,
                },
            )
        })
        .collect()
}

#[test]
fn step_reclaims_then_evicts_and_keeps_conditions_for_the_transition_period() {
    let thresholds = parse_thresholds("memory.available<100Mi,nodefs.available<10%").unwrap();
    let mut m = Manager::new(thresholds, Duration::from_secs(300));
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    let fine = obs(&[
        (Signal::MemoryAvailable, 500 * MI, 1000 * MI),
        (Signal::NodeFsAvailable, 500, 1000),
    ]);
    let disk_low = obs(&[
        (Signal::MemoryAvailable, 500 * MI, 1000 * MI),
        (Signal::NodeFsAvailable, 50, 1000),
    ]);
    let both_low = obs(&[
        (Signal::MemoryAvailable, 50 * MI, 1000 * MI),
        (Signal::NodeFsAvailable, 50, 1000),
    ]);
    let none = Conditions::default();
    let disk = Conditions {
        disk_pressure: true,
        ..none
    };
    let both = Conditions {
        memory_pressure: true,
        ..disk
    };

    // Nothing met: nothing to do.
    let d = m.step(&fine, at(0), false);
    assert_eq!((d.conditions, &d.action), (none, &Action::None));

    // Disk low: DiskPressure, reclaim first (dead containers and images on one fs)…
    let d = m.step(&disk_low, at(10), false);
    assert_eq!(d.conditions, disk);
    let Action::Reclaim {
        threshold, steps, ..
    } = d.action
    else {
        panic!("{d:?}")
    };
    assert_eq!(threshold.signal, Signal::NodeFsAvailable);
    assert_eq!(steps, reclaim_steps(Signal::NodeFsAvailable, false));
    // …still low at the next cycle: evict.
    let d = m.step(&disk_low, at(20), false);
    assert!(
        matches!(d.action, Action::Evict { threshold, .. } if threshold.signal == Signal::NodeFsAvailable),
        "{d:?}"
    );
    // The evicted pod still terminating: wait, conditions still reported.
    let d = m.step(&disk_low, at(30), true);
    assert_eq!((d.conditions, &d.action), (disk, &Action::None));
    // Cleaned up, still low: reclaim again before the next eviction.
    let d = m.step(&disk_low, at(40), false);
    assert!(matches!(d.action, Action::Reclaim { .. }), "{d:?}");

    // Memory and disk low: memory first, evicted at once (nothing to reclaim).
    let d = m.step(&both_low, at(50), false);
    assert_eq!(d.conditions, both);
    assert!(
        matches!(d.action, Action::Evict { threshold, .. } if threshold.signal == Signal::MemoryAvailable),
        "{d:?}"
    );

    // Fine again: the conditions stay for the transition period after the last
    // observation (kubelet: evictionPressureTransitionPeriod), then go.
    let d = m.step(&fine, at(60), false);
    assert_eq!((d.conditions, &d.action), (both, &Action::None));
    let d = m.step(&fine, at(350), false);
    assert_eq!(d.conditions, both);
    let d = m.step(&fine, at(351), false);
    assert_eq!(d.conditions, none);

    // A signal that cannot be measured meets nothing.
    let d = m.step(&Observations::new(), at(400), false);
    assert_eq!((d.conditions, &d.action), (none, &Action::None));
}

#[test]
fn reclaim_steps_table() {
    use ReclaimStep::*;
    let table: [(Signal, bool, &[ReclaimStep]); 6] = [
        (Signal::MemoryAvailable, false, &[]),
        (Signal::PidAvailable, true, &[]),
        (
            Signal::NodeFsAvailable,
            false,
            &[DeadContainers, UnusedImages],
        ),
        (Signal::NodeFsInodesFree, true, &[DeadContainers]),
        (
            Signal::ImageFsAvailable,
            true,
            &[DeadContainers, UnusedImages],
        ),
        (
            Signal::ImageFsInodesFree,
            false,
            &[DeadContainers, UnusedImages],
        ),
    ];
    for (s, dedicated, want) in table {
        assert_eq!(
            reclaim_steps(s, dedicated),
            want,
            "{s} dedicated={dedicated}"
        );
    }
}

fn cand(uid: &str, priority: i32, request: u64, usage: Option<u64>) -> Candidate {
    Candidate {
        uid: uid.into(),
        name: format!("ns/{uid}"),
        priority,
        memory_request: request,
        memory_usage: usage,
        disk_request: request,
        disk_usage: usage,
        critical: false,
    }
}

fn ranked(mut c: Vec<Candidate>, condition: Condition) -> Vec<String> {
    rank(&mut c, condition);
    c.into_iter().map(|c| c.uid).collect()
}

#[test]
fn ranking_table() {
    // (name, pods, expected order)
    let table: Vec<(&str, Vec<Candidate>, Vec<&str>)> = vec![
        (
            "pods above their requests first, whatever their priority",
            vec![
                cand("guaranteed-low", -10, 100, Some(50)),
                cand("besteffort-high", 1000, 0, Some(10)),
            ],
            vec!["besteffort-high", "guaranteed-low"],
        ),
        (
            "then the lower priority",
            vec![cand("high", 100, 0, Some(500)), cand("low", 0, 0, Some(10))],
            vec!["low", "high"],
        ),
        (
            "then the larger usage above the request",
            vec![
                cand("small", 0, 0, Some(10)),
                cand("over-by-200", 0, 100, Some(300)),
                cand("big", 0, 0, Some(100)),
            ],
            vec!["over-by-200", "big", "small"],
        ),
        (
            "under their requests: priority, then usage above request (least below first)",
            vec![
                cand("far-below", 0, 1000, Some(100)),
                cand("near", 0, 1000, Some(900)),
            ],
            vec!["near", "far-below"],
        ),
        (
            "a pod without stats first",
            vec![
                cand("measured", 0, 0, Some(10)),
                cand("unknown", 0, 0, None),
            ],
            vec!["unknown", "measured"],
        ),
        (
            "equal pods keep their order",
            vec![cand("a", 0, 0, Some(1)), cand("b", 0, 0, Some(1))],
            vec!["a", "b"],
        ),
    ];
    for (name, pods, want) in table {
        assert_eq!(
            ranked(pods.clone(), Condition::Memory),
            want,
            "memory: {name}"
        );
        assert_eq!(ranked(pods, Condition::Disk), want, "disk: {name}");
    }
    // PID pressure: priority only.
    let pods = vec![
        cand("high", 10, 0, Some(1000)),
        cand("low", 1, 0, Some(1)),
        cand("low2", 1, 0, Some(5)),
    ];
    assert_eq!(ranked(pods, Condition::Pid), vec!["low", "low2", "high"]);
}

#[test]
fn messages() {
    let t = Threshold {
        signal: Signal::MemoryAvailable,
        value: Value::Quantity(100 * MI),
    };
    let o = Observation {
        available: 50 * MI,
        capacity: 1000 * MI,
    };
    let mut pod = cand("p", 0, 10 * MI, Some(30 * MI));
    pod.name = "default/p".into();
    assert_eq!(
        eviction_message(&t, &o, &pod),
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. Pod default/p was using 30Mi, request is 10Mi. "
    );
    let t = Threshold {
        signal: Signal::NodeFsInodesFree,
        value: Value::Percent(5.0),
    };
    let o = Observation {
        available: 10,
        capacity: 1000,
    };
    assert_eq!(
        eviction_message(&t, &o, &pod),
        "The node was low on resource: inodes. Threshold quantity: 50, available: 10. "
    );
    assert_eq!(format_bytes(1536), "1536");
    assert_eq!(format_bytes(3072), "3Ki");
    assert_eq!(format_bytes(100_000 << 30), "100000Gi");
    assert_eq!(format_bytes(1 << 20), "1Mi");
    assert_eq!(format_bytes(0), "0");
}

#[test]
fn admission_under_pressure() {
    use crate::api::{Container, Pod, Quantity, ResourceRequirements};
    let mut best_effort = Pod::default();
    best_effort.metadata.name = "be".into();
    best_effort.spec.containers.push(Container::default());
    let mut burstable = best_effort.clone();
    burstable.spec.containers[0].resources = Some(ResourceRequirements {
        requests: [("memory".to_string(), Quantity::Str("10Mi".into()))].into(),
        ..Default::default()
    });
    let mut critical = best_effort.clone();
    critical.spec.priority = Some(crate::qos::SYSTEM_CRITICAL_PRIORITY);
    let none = Conditions::default();
    let memory = Conditions {
        memory_pressure: true,
        ..none
    };
    let disk = Conditions {
        disk_pressure: true,
        ..none
    };
    let both = Conditions {
        memory_pressure: true,
        disk_pressure: true,
        ..none
    };
    let table = [
        (&best_effort, none, None),
        (
            &best_effort,
            memory,
            Some("The node had condition: [MemoryPressure]. "),
        ),
        (&burstable, memory, None),
        (&critical, memory, None),
        (
            &burstable,
            disk,
            Some("The node had condition: [DiskPressure]. "),
        ),
        (
            &burstable,
            both,
            Some("The node had condition: [MemoryPressure DiskPressure]. "),
        ),
        (&critical, both, None),
    ];
    for (i, (pod, c, want)) in table.into_iter().enumerate() {
        assert_eq!(admit(pod, &c).as_deref(), want, "row {i}");
    }
}
