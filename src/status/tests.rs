//! Table tests: every phase rule, condition transition, container-state mapping, the
//! status manager, and "nothing is logged at idle".

use super::testutil::*;
use super::*;
use crate::api::{
    ContainerStateTerminated, ContainerStatus, PodCondition, PodPhase, RestartPolicy,
};
use crate::cri::ContainerState as Cri;

const HOST: &str = "192.168.1.10";

fn compute(
    pod: &Pod,
    obs: &PodRuntimeStatus,
    reasons: &WaitingReasons,
    previous: Option<&PodStatus>,
    now: UnixNanos,
) -> PodStatus {
    compute_pod_status(pod, obs, reasons, previous, now, Some(HOST))
}

fn cs<'a>(s: &'a PodStatus, name: &str) -> &'a ContainerStatus {
    s.container_statuses
        .iter()
        .chain(&s.init_container_statuses)
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no status for {name}"))
}

fn cond<'a>(s: &'a PodStatus, type_: &str) -> &'a PodCondition {
    s.conditions
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no condition {type_}"))
}

/// `Waiting:<reason>`, `Running`, `Terminated:<reason>:<code>`, or `-`.
fn state_str(st: &api::ContainerState) -> String {
    if let Some(w) = &st.waiting {
        match &w.reason {
            Some(r) => format!("Waiting:{r}"),
            None => "Waiting".to_string(),
        }
    } else if st.running.is_some() {
        "Running".to_string()
    } else if let Some(t) = &st.terminated {
        format!(
            "Terminated:{}:{}",
            t.reason.as_deref().unwrap_or(""),
            t.exit_code
        )
    } else {
        "-".to_string()
    }
}

fn phase_of(s: &PodStatus) -> PodPhase {
    s.phase.unwrap_or(PodPhase::Unknown)
}

// ---------------------------------------------------------------------------------------
// Phase (kubelet: getPhase), on container statuses directly.

#[derive(Clone, Copy)]
enum S {
    /// Running and started.
    Run,
    /// Running, startup not yet confirmed.
    RunUnstarted,
    Term(i32),
    /// Waiting, never terminated before.
    Wait,
    /// Waiting to restart after exiting with this code.
    WaitAfter(i32),
}

fn status_of(name: &str, s: S) -> ContainerStatus {
    let mut c = ContainerStatus {
        name: name.to_string(),
        ..ContainerStatus::default()
    };
    let term = |code| ContainerStateTerminated {
        exit_code: code,
        ..ContainerStateTerminated::default()
    };
    match s {
        S::Run => {
            c.state.running = Some(Default::default());
            c.started = Some(true);
        }
        S::RunUnstarted => {
            c.state.running = Some(Default::default());
            c.started = Some(false);
        }
        S::Term(code) => c.state.terminated = Some(term(code)),
        S::Wait => c.state.waiting = Some(Default::default()),
        S::WaitAfter(code) => {
            c.state.waiting = Some(Default::default());
            c.last_state.terminated = Some(term(code));
        }
    }
    c
}

struct PhaseCase {
    name: &'static str,
    init: Vec<api::Container>,
    regular: &'static [&'static str],
    policy: RestartPolicy,
    statuses: Vec<(&'static str, S)>,
    terminal: bool,
    static_pod: bool,
    initialized: bool,
    want: PodPhase,
}

fn pc(
    name: &'static str,
    regular: &'static [&'static str],
    policy: RestartPolicy,
    statuses: Vec<(&'static str, S)>,
    want: PodPhase,
) -> PhaseCase {
    PhaseCase {
        name,
        init: vec![],
        regular,
        policy,
        statuses,
        terminal: false,
        static_pod: true,
        initialized: false,
        want,
    }
}

#[test]
fn phase_table() {
    use PodPhase::*;
    use RestartPolicy::*;
    use S::*;
    let init = |n: &str| vec![container(n)];
    let side = |n: &str| vec![sidecar(n)];
    let cases = vec![
        pc("nothing known", &["a"], Always, vec![], Pending),
        pc("never ran", &["a"], Always, vec![("a", Wait)], Pending),
        pc(
            "all running",
            &["a", "b"],
            Always,
            vec![("a", Run), ("b", Run)],
            Running,
        ),
        pc(
            "one running, one never ran",
            &["a", "b"],
            Always,
            vec![("a", Run), ("b", Wait)],
            Pending,
        ),
        pc(
            "one running, one crash-looping",
            &["a", "b"],
            Always,
            vec![("a", Run), ("b", WaitAfter(1))],
            Running,
        ),
        pc(
            "one running, one status missing",
            &["a", "b"],
            Always,
            vec![("a", Run)],
            Pending,
        ),
        pc(
            "Always, all exited 0",
            &["a"],
            Always,
            vec![("a", Term(0))],
            Running,
        ),
        pc(
            "OnFailure, all exited 0",
            &["a"],
            OnFailure,
            vec![("a", Term(0))],
            Succeeded,
        ),
        pc(
            "Never, all exited 0",
            &["a", "b"],
            Never,
            vec![("a", Term(0)), ("b", Term(0))],
            Succeeded,
        ),
        pc(
            "Never, one failed",
            &["a", "b"],
            Never,
            vec![("a", Term(0)), ("b", Term(1))],
            Failed,
        ),
        pc(
            "OnFailure, one failed",
            &["a", "b"],
            OnFailure,
            vec![("a", Term(0)), ("b", Term(1))],
            Running,
        ),
        pc(
            "Always, one failed",
            &["a", "b"],
            Always,
            vec![("a", Term(0)), ("b", Term(1))],
            Running,
        ),
        pc(
            "Never, waiting after failure",
            &["a"],
            Never,
            vec![("a", WaitAfter(1))],
            Failed,
        ),
        pc(
            "OnFailure, waiting after failure",
            &["a"],
            OnFailure,
            vec![("a", WaitAfter(2))],
            Running,
        ),
        pc(
            "one running, one exited 0, Never",
            &["a", "b"],
            Never,
            vec![("a", Run), ("b", Term(0))],
            Running,
        ),
        PhaseCase {
            init: init("i"),
            ..pc(
                "init running",
                &["a"],
                Always,
                vec![("i", Run), ("a", Wait)],
                Pending,
            )
        },
        PhaseCase {
            init: init("i"),
            ..pc(
                "init not started",
                &["a"],
                Always,
                vec![("i", Wait), ("a", Wait)],
                Pending,
            )
        },
        PhaseCase {
            init: init("i"),
            ..pc(
                "init status missing",
                &["a"],
                Always,
                vec![("a", Wait)],
                Pending,
            )
        },
        PhaseCase {
            init: init("i"),
            ..pc(
                "init failed, Never",
                &["a"],
                Never,
                vec![("i", Term(1)), ("a", Wait)],
                Failed,
            )
        },
        PhaseCase {
            init: init("i"),
            ..pc(
                "init waiting after failure, Never",
                &["a"],
                Never,
                vec![("i", WaitAfter(1)), ("a", Wait)],
                Failed,
            )
        },
        PhaseCase {
            init: init("i"),
            ..pc(
                "init failed, OnFailure",
                &["a"],
                OnFailure,
                vec![("i", Term(1)), ("a", Wait)],
                Pending,
            )
        },
        PhaseCase {
            init: init("i"),
            ..pc(
                "init crash-looping, Always",
                &["a"],
                Always,
                vec![("i", WaitAfter(1)), ("a", Wait)],
                Pending,
            )
        },
        PhaseCase {
            init: init("i"),
            ..pc(
                "init done, app running",
                &["a"],
                Always,
                vec![("i", Term(0)), ("a", Run)],
                Running,
            )
        },
        PhaseCase {
            init: init("i"),
            ..pc(
                "init done, app not yet",
                &["a"],
                Always,
                vec![("i", Term(0)), ("a", Wait)],
                Pending,
            )
        },
        PhaseCase {
            init: side("s"),
            ..pc(
                "sidecar not started, not initialized",
                &["a"],
                Always,
                vec![("s", RunUnstarted), ("a", Wait)],
                Pending,
            )
        },
        PhaseCase {
            init: side("s"),
            ..pc(
                "sidecar not started, app ran in an older sandbox",
                &["a"],
                Always,
                vec![("s", RunUnstarted), ("a", Run)],
                Pending,
            )
        },
        PhaseCase {
            init: side("s"),
            initialized: true,
            ..pc(
                "sidecar not started, pod initialized",
                &["a"],
                Always,
                vec![("s", RunUnstarted), ("a", Run)],
                Running,
            )
        },
        PhaseCase {
            init: side("s"),
            ..pc(
                "sidecar and app running",
                &["a"],
                Always,
                vec![("s", Run), ("a", Run)],
                Running,
            )
        },
        PhaseCase {
            init: side("s"),
            ..pc(
                "sidecar restarting, app running",
                &["a"],
                Always,
                vec![("s", WaitAfter(1)), ("a", Run)],
                Running,
            )
        },
        PhaseCase {
            init: side("s"),
            ..pc(
                "sidecar never ran",
                &["a"],
                Always,
                vec![("s", Wait), ("a", Run)],
                Pending,
            )
        },
        PhaseCase {
            init: side("s"),
            ..pc(
                "stopped sidecar does not count, Never",
                &["a"],
                Never,
                vec![("s", Term(137)), ("a", Term(0))],
                Succeeded,
            )
        },
        PhaseCase {
            init: side("s"),
            ..pc(
                "sidecar status missing",
                &["a"],
                Always,
                vec![("a", Run)],
                Pending,
            )
        },
        PhaseCase {
            terminal: true,
            static_pod: false,
            ..pc(
                "terminal api pod, Always, failure",
                &["a", "b"],
                Always,
                vec![("a", Term(0)), ("b", Term(1))],
                Failed,
            )
        },
        PhaseCase {
            terminal: true,
            static_pod: false,
            ..pc(
                "terminal api pod, Always, all 0",
                &["a"],
                Always,
                vec![("a", Term(0))],
                Succeeded,
            )
        },
        PhaseCase {
            terminal: true,
            ..pc(
                "terminal static pod keeps the policy rule",
                &["a"],
                Always,
                vec![("a", Term(1))],
                Running,
            )
        },
        PhaseCase {
            terminal: true,
            static_pod: false,
            ..pc(
                "terminal but still running",
                &["a"],
                Always,
                vec![("a", Run)],
                Running,
            )
        },
    ];
    for case in cases {
        let mut p = with_init(
            with_policy(pod(case.regular), case.policy),
            case.init.clone(),
        );
        if !case.static_pod {
            p.metadata.annotations.clear();
        }
        let (init, regular): (Vec<_>, Vec<_>) = case
            .statuses
            .iter()
            .map(|(n, s)| status_of(n, *s))
            .partition(|s| case.init.iter().any(|c| c.name == s.name));
        let got = phase::get_phase(&p, &init, &regular, case.terminal, case.initialized);
        assert_eq!(got, case.want, "{}", case.name);
    }
}

/// kubelet (ContainerRestartRules): stopped containers count as restarting by their own
/// decision (rules, own policy, the pod's), so a pod's Never with a container's Always is
/// Running, and a failed init container whose rule restarts it does not fail the pod.
#[test]
fn phase_follows_container_restart_policy_and_rules() {
    use PodPhase::*;
    use RestartPolicy::*;
    let rule = |codes: &[i32]| api::ContainerRestartRule {
        action: "Restart".into(),
        exit_codes: Some(api::ContainerRestartRuleOnExitCodes {
            operator: "In".into(),
            values: codes.to_vec(),
        }),
    };
    // (pod policy, container policy, rules, status, phase)
    let cases = [
        (Never, Some(Never), vec![rule(&[42])], S::Term(42), Running),
        (
            Never,
            Some(Never),
            vec![rule(&[42])],
            S::WaitAfter(42),
            Running,
        ),
        (Never, Some(Never), vec![rule(&[42])], S::Term(1), Failed),
        (Always, Some(Never), vec![], S::Term(1), Failed),
        (Always, Some(Never), vec![], S::Term(0), Succeeded),
        (Never, Some(Always), vec![], S::Term(1), Running),
        (Never, Some(OnFailure), vec![], S::Term(0), Succeeded),
        (Never, Some(OnFailure), vec![], S::WaitAfter(3), Running),
        (OnFailure, None, vec![], S::Term(0), Succeeded),
        (OnFailure, None, vec![], S::Term(1), Running),
    ];
    for (i, (pod_policy, own, rules, st, want)) in cases.into_iter().enumerate() {
        let mut p = with_policy(pod(&["a"]), pod_policy);
        p.spec.containers[0].restart_policy = own;
        p.spec.containers[0].restart_policy_rules = rules;
        let got = phase::get_phase(&p, &[], &[status_of("a", st)], false, false);
        assert_eq!(got, want, "case {i}");
    }

    // A failed init container: Failed only when it will not restart.
    for (exit, want) in [(42, Pending), (1, Failed)] {
        let mut init = container("i0");
        init.restart_policy = Some(Never);
        init.restart_policy_rules = vec![rule(&[42])];
        let p = with_init(with_policy(pod(&["a"]), Never), vec![init]);
        let got = phase::get_phase(
            &p,
            &[status_of("i0", S::Term(exit))],
            &[status_of("a", S::Wait)],
            false,
            false,
        );
        assert_eq!(got, want, "init exit {exit}");
    }
}

#[test]
fn default_restart_policy_is_always() {
    let p = pod(&["a"]);
    let got = phase::get_phase(&p, &[], &[status_of("a", S::Term(0))], false, false);
    assert_eq!(got, PodPhase::Running);
}

// ---------------------------------------------------------------------------------------
// Container states (kubelet: convertToAPIContainerStatuses + reasonCache).

struct StateCase {
    name: &'static str,
    pod: Pod,
    instances: Vec<crate::cri::ContainerInfo>,
    reasons: Vec<(&'static str, &'static str, &'static str)>,
    state: &'static str,
    last: &'static str,
    restarts: i32,
    ready: bool,
}

#[test]
fn container_state_table() {
    use RestartPolicy::*;
    let app = || pod(&["app"]);
    let mut deleting = app();
    deleting.metadata.deletion_timestamp = Some("2023-11-14T22:13:20Z".to_string());
    let cases = vec![
        StateCase {
            name: "never seen",
            pod: app(),
            instances: vec![],
            reasons: vec![],
            state: "Waiting:ContainerCreating",
            last: "-",
            restarts: 0,
            ready: false,
        },
        StateCase {
            name: "never seen, pull failed",
            pod: app(),
            instances: vec![],
            reasons: vec![("app", "ErrImagePull", "pull access denied")],
            state: "Waiting:ErrImagePull",
            last: "-",
            restarts: 0,
            ready: false,
        },
        StateCase {
            name: "never seen, pod has init containers",
            pod: with_init(app(), vec![container("setup")]),
            instances: vec![],
            reasons: vec![],
            state: "Waiting:PodInitializing",
            last: "-",
            restarts: 0,
            ready: false,
        },
        StateCase {
            name: "never seen, pod deleting: reasons no longer apply",
            pod: deleting.clone(),
            instances: vec![],
            reasons: vec![("app", "ImagePullBackOff", "")],
            state: "Waiting:ContainerCreating",
            last: "-",
            restarts: 0,
            ready: false,
        },
        StateCase {
            name: "created, not started",
            pod: app(),
            instances: vec![instance("app", 0, 0, Cri::Created)],
            reasons: vec![],
            state: "Waiting",
            last: "-",
            restarts: 0,
            ready: false,
        },
        StateCase {
            name: "created, start failed",
            pod: app(),
            instances: vec![instance("app", 0, 0, Cri::Created)],
            reasons: vec![("app", "RunContainerError", "exec format error")],
            state: "Waiting:RunContainerError",
            last: "-",
            restarts: 0,
            ready: false,
        },
        StateCase {
            name: "running",
            pod: app(),
            instances: vec![running("app", 0, 0)],
            reasons: vec![],
            state: "Running",
            last: "-",
            restarts: 0,
            ready: true,
        },
        StateCase {
            name: "running ignores a stale reason",
            pod: app(),
            instances: vec![running("app", 0, 0)],
            reasons: vec![("app", "CrashLoopBackOff", "")],
            state: "Running",
            last: "-",
            restarts: 0,
            ready: true,
        },
        StateCase {
            name: "exited 0, runtime gave no reason",
            pod: with_policy(app(), Never),
            instances: vec![exited("app", 0, 0, 0, "")],
            reasons: vec![],
            state: "Terminated:Completed:0",
            last: "-",
            restarts: 0,
            ready: false,
        },
        StateCase {
            name: "exited 1, runtime gave no reason",
            pod: with_policy(app(), Never),
            instances: vec![exited("app", 0, 0, 1, "")],
            reasons: vec![],
            state: "Terminated:Error:1",
            last: "-",
            restarts: 0,
            ready: false,
        },
        StateCase {
            name: "OOM killed",
            pod: with_policy(app(), Never),
            instances: vec![exited("app", 0, 0, 137, "OOMKilled")],
            reasons: vec![],
            state: "Terminated:OOMKilled:137",
            last: "-",
            restarts: 0,
            ready: false,
        },
        StateCase {
            name: "runtime's own reason",
            pod: with_policy(app(), Never),
            instances: vec![exited("app", 0, 0, 0, "Completed")],
            reasons: vec![],
            state: "Terminated:Completed:0",
            last: "-",
            restarts: 0,
            ready: false,
        },
        StateCase {
            name: "crash loop: waiting, last state the exit",
            pod: app(),
            instances: vec![
                exited("app", 3, 30, 1, "Error"),
                exited("app", 2, 20, 2, "Error"),
            ],
            reasons: vec![(
                "app",
                "CrashLoopBackOff",
                "back-off 40s restarting failed container",
            )],
            state: "Waiting:CrashLoopBackOff",
            last: "Terminated:Error:1",
            restarts: 3,
            ready: false,
        },
        StateCase {
            name: "exited under Always, no reason yet: terminated until the next sync",
            pod: app(),
            instances: vec![exited("app", 1, 10, 1, ""), exited("app", 0, 0, 2, "")],
            reasons: vec![],
            state: "Terminated:Error:1",
            last: "Terminated:Error:2",
            restarts: 1,
            ready: false,
        },
        StateCase {
            name: "Never: a reason does not apply to an exited container",
            pod: with_policy(app(), Never),
            instances: vec![exited("app", 0, 0, 0, "")],
            reasons: vec![("app", "CrashLoopBackOff", "")],
            state: "Terminated:Completed:0",
            last: "-",
            restarts: 0,
            ready: false,
        },
        StateCase {
            name: "OnFailure: exit 0 is final",
            pod: with_policy(app(), OnFailure),
            instances: vec![exited("app", 0, 0, 0, "")],
            reasons: vec![("app", "CrashLoopBackOff", "")],
            state: "Terminated:Completed:0",
            last: "-",
            restarts: 0,
            ready: false,
        },
        StateCase {
            name: "OnFailure: a failure restarts",
            pod: with_policy(app(), OnFailure),
            instances: vec![exited("app", 0, 0, 1, "")],
            reasons: vec![("app", "CrashLoopBackOff", "")],
            state: "Waiting:CrashLoopBackOff",
            last: "Terminated:Error:1",
            restarts: 0,
            ready: false,
        },
        StateCase {
            name: "restarted: last state from the previous instance",
            pod: app(),
            instances: vec![running("app", 1, 10), exited("app", 0, 0, 1, "Error")],
            reasons: vec![],
            state: "Running",
            last: "Terminated:Error:1",
            restarts: 1,
            ready: true,
        },
        StateCase {
            name: "only the two newest instances count, in creation order",
            pod: app(),
            // Given oldest first on purpose: the status sorts by creation time.
            instances: vec![
                exited("app", 0, 0, 3, ""),
                exited("app", 1, 10, 2, ""),
                running("app", 2, 20),
            ],
            reasons: vec![],
            state: "Running",
            last: "Terminated:Error:2",
            restarts: 2,
            ready: true,
        },
        StateCase {
            name: "unknown to the runtime, never seen running",
            pod: app(),
            instances: vec![instance("app", 0, 0, Cri::Unknown)],
            reasons: vec![],
            state: "Waiting",
            last: "-",
            restarts: 0,
            ready: false,
        },
    ];
    for case in cases {
        let obs = observed(case.instances);
        let st = compute(&case.pod, &obs, &reasons(&case.reasons), None, T0);
        let c = cs(&st, "app");
        assert_eq!(state_str(&c.state), case.state, "{}: state", case.name);
        assert_eq!(
            state_str(&c.last_state),
            case.last,
            "{}: lastState",
            case.name
        );
        assert_eq!(
            c.restart_count, case.restarts,
            "{}: restartCount",
            case.name
        );
        assert_eq!(c.ready, case.ready, "{}: ready", case.name);
        assert_eq!(
            c.started,
            Some(case.state == "Running"),
            "{}: started",
            case.name
        );
    }
}

/// Conformance: "InitContainer should not start app containers and fail the pod if init
/// containers fail on a RestartNever pod" — a volume wait (picolet's ContainerCreating with
/// the FailedMount message) shows the default reason, PodInitializing, in a pod with init
/// containers, as the kubelet's does.
#[test]
fn a_volume_wait_has_the_default_reason() {
    let p = with_init(pod(&["app"]), vec![container("init1")]);
    let why = "MountVolume.SetUp failed for volume \"token\" : not issued yet";
    let r = reasons(&[("init1", "ContainerCreating", why)]);
    let st = compute(&p, &observed(vec![]), &r, None, T0);
    let w = cs(&st, "init1").state.waiting.clone().unwrap_or_default();
    assert_eq!(w.reason.as_deref(), Some("PodInitializing"));
    assert_eq!(w.message.as_deref(), Some(why));
    assert_eq!(state_str(&cs(&st, "app").state), "Waiting:PodInitializing");
    // Without init containers the default is ContainerCreating.
    let r = reasons(&[("app", "ContainerCreating", why)]);
    let st = compute(&pod(&["app"]), &observed(vec![]), &r, None, T0);
    assert_eq!(
        state_str(&cs(&st, "app").state),
        "Waiting:ContainerCreating"
    );
}

#[test]
fn waiting_reason_carries_its_message() {
    let st = compute(
        &pod(&["app"]),
        &observed(vec![]),
        &reasons(&[(
            "app",
            "ImagePullBackOff",
            "Back-off pulling image \"app:1\"",
        )]),
        None,
        T0,
    );
    let w = cs(&st, "app").state.waiting.clone().unwrap_or_default();
    assert_eq!(w.reason.as_deref(), Some("ImagePullBackOff"));
    assert_eq!(
        w.message.as_deref(),
        Some("Back-off pulling image \"app:1\"")
    );
}

#[test]
fn container_fields() {
    let mut a = exited("app", 2, 0, 1, "Error");
    a.message = "boom".to_string();
    let mut b = running("web", 0, 0);
    b.image = "sha256:0123".to_string(); // only an image ID: show the spec's image
    let p = with_policy(pod(&["app", "web"]), RestartPolicy::Never);
    let st = compute(&p, &observed(vec![a, b]), &WaitingReasons::new(), None, T0);

    let app = cs(&st, "app");
    assert_eq!(app.container_id.as_deref(), Some("containerd://app-2"));
    assert_eq!(app.image, "docker.io/library/app:1");
    assert_eq!(app.image_id, "docker.io/library/app@sha256:abcd");
    let t = app.state.terminated.clone().unwrap_or_default();
    assert_eq!(t.message.as_deref(), Some("boom"));
    assert_eq!(t.started_at.as_deref(), Some("2023-11-14T22:13:21Z"));
    assert_eq!(t.finished_at.as_deref(), Some("2023-11-14T22:13:25Z"));
    assert_eq!(t.container_id.as_deref(), Some("containerd://app-2"));

    let web = cs(&st, "web");
    assert_eq!(web.image, "docker.io/library/web:1");
    let r = web.state.running.clone().unwrap_or_default();
    assert_eq!(r.started_at.as_deref(), Some("2023-11-14T22:13:21Z"));

    let opts = StatusOptions {
        runtime_name: "cri-o",
        ..StatusOptions::default()
    };
    let st = compute_pod_status_with(
        &p,
        &observed(vec![running("app", 0, 0)]),
        &WaitingReasons::new(),
        None,
        T0,
        None,
        &opts,
    );
    assert_eq!(
        cs(&st, "app").container_id.as_deref(),
        Some("cri-o://app-0")
    );
}

#[test]
fn statuses_regular_by_name_init_in_spec_order() {
    let p = with_init(pod(&["web", "app"]), vec![container("z"), container("a")]);
    let st = compute(&p, &observed(vec![]), &WaitingReasons::new(), None, T0);
    let names = |v: &[ContainerStatus]| v.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&st.container_statuses), ["app", "web"]);
    assert_eq!(names(&st.init_container_statuses), ["z", "a"]);
}

#[test]
fn init_container_states() {
    let p = with_init(
        pod(&["app"]),
        vec![container("setup"), container("migrate")],
    );
    // setup done (a stale reason must not hide that), migrate crash-looping.
    let obs = observed(vec![
        exited("setup", 0, 0, 0, ""),
        exited("migrate", 2, 10, 1, "Error"),
    ]);
    let r = reasons(&[
        ("setup", "CrashLoopBackOff", ""),
        ("migrate", "CrashLoopBackOff", ""),
    ]);
    let st = compute(&p, &obs, &r, None, T0);
    let setup = cs(&st, "setup");
    assert_eq!(state_str(&setup.state), "Terminated:Completed:0");
    assert!(setup.ready);
    assert_eq!(setup.started, Some(false));
    let migrate = cs(&st, "migrate");
    assert_eq!(state_str(&migrate.state), "Waiting:CrashLoopBackOff");
    assert_eq!(state_str(&migrate.last_state), "Terminated:Error:1");
    assert!(!migrate.ready);
    assert_eq!(state_str(&cs(&st, "app").state), "Waiting:PodInitializing");
    assert_eq!(phase_of(&st), PodPhase::Pending);
    let init = cond(&st, "Initialized");
    assert_eq!(init.status, "False");
    assert_eq!(init.reason.as_deref(), Some("ContainersNotInitialized"));
    assert_eq!(
        init.message.as_deref(),
        Some("containers with incomplete status: [migrate]")
    );
}

#[test]
fn unknown_after_running_is_a_termination() {
    let p = pod(&["app"]);
    let prev = compute(
        &p,
        &observed(vec![running("app", 4, 0)]),
        &WaitingReasons::new(),
        None,
        T0,
    );
    let now = observed(vec![instance("app", 4, 0, Cri::Unknown)]);
    let st = compute(&p, &now, &WaitingReasons::new(), Some(&prev), T0 + 10 * SEC);
    let c = cs(&st, "app");
    assert_eq!(state_str(&c.state), "Terminated:ContainerStatusUnknown:137");
    assert_eq!(c.restart_count, 5);
}

#[test]
fn vanished_while_running() {
    let p = pod(&["app"]);
    let prev = compute(
        &p,
        &observed(vec![running("app", 2, 0)]),
        &WaitingReasons::new(),
        None,
        T0,
    );
    let st = compute(
        &p,
        &observed(vec![]),
        &WaitingReasons::new(),
        Some(&prev),
        T0 + SEC,
    );
    let c = cs(&st, "app");
    assert_eq!(state_str(&c.state), "Waiting:ContainerCreating");
    assert_eq!(
        state_str(&c.last_state),
        "Terminated:ContainerStatusUnknown:137"
    );
    assert_eq!(c.restart_count, 3);
    // A stopped container, not a never-run one: the pod does not fall back to Pending.
    assert_eq!(phase_of(&st), PodPhase::Running);

    let mut deleting = p.clone();
    deleting.metadata.deletion_timestamp = Some("2023-11-14T22:13:20Z".to_string());
    let st = compute(
        &deleting,
        &observed(vec![]),
        &WaitingReasons::new(),
        Some(&prev),
        T0 + SEC,
    );
    assert_eq!(cs(&st, "app").restart_count, 2);
}

#[test]
fn terminated_status_survives_garbage_collection() {
    let p = with_policy(pod(&["app"]), RestartPolicy::Never);
    let prev = compute(
        &p,
        &observed(vec![exited("app", 0, 0, 0, "")]),
        &WaitingReasons::new(),
        None,
        T0,
    );
    assert_eq!(phase_of(&prev), PodPhase::Succeeded);
    let mut gone = observed(vec![]);
    gone.sandboxes.clear();
    let st = compute(
        &p,
        &gone,
        &WaitingReasons::new(),
        Some(&prev),
        T0 + 60 * SEC,
    );
    assert_eq!(state_str(&cs(&st, "app").state), "Terminated:Completed:0");
    assert_eq!(phase_of(&st), PodPhase::Succeeded);
    assert_eq!(
        st.pod_ip.as_deref(),
        Some("10.88.0.5"),
        "IP kept once the sandbox is gone"
    );
}

/// kubelet: the DisruptionTarget condition set when the kubelet killed the pod (node
/// shutdown, eviction) is carried over by every later status, beside its own five.
#[test]
fn the_disruption_target_condition_is_carried_over() {
    let p = pod(&["app"]);
    let mut prev = compute(
        &p,
        &observed(vec![running("app", 0, 0)]),
        &WaitingReasons::new(),
        None,
        T0,
    );
    set_disruption_target(
        &mut prev,
        "Pod was terminated in response to imminent node shutdown.",
        T0,
    );
    prev.phase = Some(PodPhase::Failed);
    let st = compute(
        &p,
        &observed(vec![exited("app", 0, 143, 0, "Error")]),
        &WaitingReasons::new(),
        Some(&prev),
        T0 + 30 * SEC,
    );
    let d = cond(&st, DISRUPTION_TARGET);
    assert_eq!(
        (d.status.as_ref(), d.reason.as_deref(), d.message.as_deref()),
        (
            "True",
            Some("TerminationByKubelet"),
            Some("Pod was terminated in response to imminent node shutdown.")
        )
    );
    assert_eq!(d.last_transition_time, clock::rfc3339(T0));
    assert_eq!(st.conditions.len(), 6, "{:?}", st.conditions);
    assert_eq!(phase_of(&st), PodPhase::Failed);
    // Set once more (a second kill): replaced, not doubled.
    let mut again = st.clone();
    set_disruption_target(&mut again, "another", T0 + 40 * SEC);
    assert_eq!(
        again
            .conditions
            .iter()
            .filter(|c| c.type_ == DISRUPTION_TARGET)
            .count(),
        1
    );
}

// ---------------------------------------------------------------------------------------
// Probes (started / ready).

#[test]
fn probes_decide_started_and_ready() {
    let probe: Option<crate::api::Probe> =
        Some(serde_json::from_value(serde_json::json!({"exec": {"command": ["true"]}})).unwrap());
    let mut p = pod(&["app"]);
    let obs = observed(vec![running("app", 0, 0)]);
    let none = WaitingReasons::new();
    let with = |p: &Pod, probes: &ProbeResults| {
        let opts = StatusOptions {
            probes: Some(probes),
            ..StatusOptions::default()
        };
        let st = compute_pod_status_with(p, &obs, &none, None, T0, None, &opts);
        let c = cs(&st, "app").clone();
        (c.started, c.ready, cond(&st, "Ready").status.clone())
    };
    let results = |startup: Option<bool>, readiness: Option<bool>| {
        let mut r = ProbeResults::default();
        if let Some(v) = startup {
            r.startup.insert("app-0".to_string(), v);
        }
        if let Some(v) = readiness {
            r.readiness.insert("app-0".to_string(), v);
        }
        r
    };
    let t: std::borrow::Cow<'static, str> = "True".into();
    let f: std::borrow::Cow<'static, str> = "False".into();

    assert_eq!(
        with(&p, &results(None, None)),
        (Some(true), true, t.clone()),
        "no probes"
    );

    p.spec.containers[0].readiness_probe = probe.clone().map(Box::new);
    assert_eq!(
        with(&p, &results(None, None)),
        (Some(true), false, f.clone()),
        "readiness: no result yet"
    );
    assert_eq!(
        with(&p, &results(None, Some(false))),
        (Some(true), false, f.clone()),
        "readiness failed"
    );
    assert_eq!(
        with(&p, &results(None, Some(true))),
        (Some(true), true, t.clone()),
        "readiness ok"
    );
    let mut stale = ProbeResults::default();
    stale.readiness.insert("app-old".to_string(), true);
    assert_eq!(
        with(&p, &stale),
        (Some(true), false, f.clone()),
        "result of another instance"
    );

    p.spec.containers[0].readiness_probe = None;
    p.spec.containers[0].startup_probe = probe.map(Box::new);
    assert_eq!(
        with(&p, &results(None, None)),
        (Some(false), false, f.clone()),
        "startup pending"
    );
    assert_eq!(
        with(&p, &results(Some(false), None)),
        (Some(false), false, f),
        "startup failed"
    );
    assert_eq!(
        with(&p, &results(Some(true), None)),
        (Some(true), true, t),
        "startup ok"
    );
}

#[test]
fn sidecar_startup_gates_initialized() {
    let probe: Option<crate::api::Probe> =
        Some(serde_json::from_value(serde_json::json!({"exec": {"command": ["true"]}})).unwrap());
    let mut side = sidecar("proxy");
    side.startup_probe = probe.map(Box::new);
    let p = with_init(pod(&["app"]), vec![side]);
    let obs = observed(vec![running("proxy", 0, 0)]);
    let st = compute(&p, &obs, &WaitingReasons::new(), None, T0);
    assert_eq!(cond(&st, "Initialized").status, "False");
    assert_eq!(phase_of(&st), PodPhase::Pending);

    let mut probes = ProbeResults::default();
    probes.startup.insert("proxy-0".to_string(), true);
    let opts = StatusOptions {
        probes: Some(&probes),
        ..StatusOptions::default()
    };
    let st = compute_pod_status_with(&p, &obs, &WaitingReasons::new(), None, T0, None, &opts);
    assert_eq!(cond(&st, "Initialized").status, "True");
    assert!(cs(&st, "proxy").ready);
    // The app has not run yet: still Pending, and it is not ready.
    assert_eq!(phase_of(&st), PodPhase::Pending);
    assert_eq!(
        cond(&st, "ContainersReady").message.as_deref(),
        Some("containers with unready status: [app]")
    );
}

// ---------------------------------------------------------------------------------------
// Phase end to end, terminal stickiness, reason preservation.

#[test]
fn terminal_phase_is_never_left() {
    let p = pod(&["app"]);
    let none = WaitingReasons::new();
    let run = observed(vec![running("app", 1, 10)]);
    for terminal in [PodPhase::Succeeded, PodPhase::Failed] {
        let prev = PodStatus {
            phase: Some(terminal),
            ..PodStatus::default()
        };
        let st = compute(&p, &run, &none, Some(&prev), T0);
        assert_eq!(phase_of(&st), terminal, "from previous {terminal:?}");
        let st = compute(&p, &observed(vec![]), &none, Some(&prev), T0);
        assert_eq!(
            phase_of(&st),
            terminal,
            "from previous {terminal:?}, nothing running"
        );

        // The pod's own (API) status counts as well.
        let mut api_pod = p.clone();
        api_pod.status = Some(prev.clone());
        let st = compute(&api_pod, &run, &none, None, T0);
        assert_eq!(phase_of(&st), terminal, "from API status {terminal:?}");
    }
    // Succeeded before, a failure now (e.g. a container re-run by hand): still Succeeded.
    let never = with_policy(pod(&["app"]), RestartPolicy::Never);
    let done = PodStatus {
        phase: Some(PodPhase::Succeeded),
        ..PodStatus::default()
    };
    let failed_now = observed(vec![exited("app", 1, 10, 1, "")]);
    let st = compute(&never, &failed_now, &none, Some(&done), T0);
    assert_eq!(phase_of(&st), PodPhase::Succeeded);

    // Failed in the API, Succeeded computed: the API's terminal phase wins.
    let mut api_pod = with_policy(p, RestartPolicy::Never);
    api_pod.status = Some(PodStatus {
        phase: Some(PodPhase::Failed),
        ..PodStatus::default()
    });
    let st = compute(
        &api_pod,
        &observed(vec![exited("app", 0, 0, 0, "")]),
        &none,
        None,
        T0,
    );
    assert_eq!(phase_of(&st), PodPhase::Failed);
}

#[test]
fn pod_is_terminal_option() {
    let mut p = pod(&["app"]);
    p.metadata.annotations.clear(); // an apiserver pod
    let obs = observed(vec![exited("app", 0, 0, 1, "")]);
    let opts = StatusOptions {
        pod_is_terminal: true,
        ..StatusOptions::default()
    };
    let st = compute_pod_status_with(&p, &obs, &WaitingReasons::new(), None, T0, None, &opts);
    assert_eq!(phase_of(&st), PodPhase::Failed);
    let st = compute(&p, &obs, &WaitingReasons::new(), None, T0);
    assert_eq!(phase_of(&st), PodPhase::Running);
}

#[test]
fn phase_reason_is_kept_while_the_phase_holds() {
    let p = pod(&["app"]);
    let none = WaitingReasons::new();
    let prev = PodStatus {
        phase: Some(PodPhase::Running),
        reason: Some("SomeReason".to_string()),
        message: Some("some message".to_string()),
        ..PodStatus::default()
    };
    let st = compute(
        &p,
        &observed(vec![running("app", 0, 0)]),
        &none,
        Some(&prev),
        T0,
    );
    assert_eq!(st.reason.as_deref(), Some("SomeReason"));
    assert_eq!(st.message.as_deref(), Some("some message"));
    let st = compute(&p, &observed(vec![]), &none, Some(&prev), T0);
    assert_eq!(phase_of(&st), PodPhase::Pending);
    assert_eq!(st.reason, None);
    assert_eq!(st.message, None);
}

#[test]
fn phase_end_to_end() {
    use RestartPolicy::*;
    let none = WaitingReasons::new();
    let cases: Vec<(&str, Pod, Vec<crate::cri::ContainerInfo>, PodPhase)> = vec![
        ("fresh pod", pod(&["app"]), vec![], PodPhase::Pending),
        (
            "running",
            pod(&["app"]),
            vec![running("app", 0, 0)],
            PodPhase::Running,
        ),
        (
            "job done",
            with_policy(pod(&["app"]), OnFailure),
            vec![exited("app", 0, 0, 0, "")],
            PodPhase::Succeeded,
        ),
        (
            "job failed",
            with_policy(pod(&["app"]), Never),
            vec![exited("app", 0, 0, 2, "")],
            PodPhase::Failed,
        ),
        (
            "init failed, Never",
            with_policy(with_init(pod(&["app"]), vec![container("setup")]), Never),
            vec![exited("setup", 0, 0, 1, "")],
            PodPhase::Failed,
        ),
        (
            "init done, app running",
            with_init(pod(&["app"]), vec![container("setup")]),
            vec![exited("setup", 0, 0, 0, ""), running("app", 0, 10)],
            PodPhase::Running,
        ),
    ];
    for (name, p, instances, want) in cases {
        let st = compute(&p, &observed(instances), &none, None, T0);
        assert_eq!(phase_of(&st), want, "{name}");
    }
}

// ---------------------------------------------------------------------------------------
// Conditions.

type Want = (
    &'static str,
    &'static str,
    Option<&'static str>,
    Option<&'static str>,
);

#[test]
fn condition_table() {
    use RestartPolicy::*;
    let app = || pod(&["app"]);
    let mut host_net = app();
    host_net.spec.host_network = true;
    let mut no_ip = observed(vec![running("app", 0, 0)]);
    no_ip.sandboxes[0].ip = None;
    let mut host_no_ip = no_ip.clone();
    host_no_ip.sandboxes[0].network = Some(NamespaceMode::Node);
    let mut not_ready = observed(vec![]);
    not_ready.sandboxes[0].state = SandboxState::NotReady;
    let mut two_ready = observed(vec![running("app", 0, 0)]);
    two_ready
        .sandboxes
        .push(sandbox("sb0", T0 - SEC, true, Some("10.88.0.4")));
    let mut host_mode = observed(vec![running("app", 0, 0)]);
    host_mode.sandboxes[0].network = Some(NamespaceMode::Node);
    let mut no_sandbox = observed(vec![]);
    no_sandbox.sandboxes.clear();

    let cases: Vec<(&str, Pod, PodRuntimeStatus, Vec<Want>)> = vec![
        (
            "nothing yet",
            app(),
            no_sandbox,
            vec![
                ("PodReadyToStartContainers", "False", None, None),
                ("Initialized", "True", None, None),
                (
                    "Ready",
                    "False",
                    Some("ContainersNotReady"),
                    Some("containers with unready status: [app]"),
                ),
                (
                    "ContainersReady",
                    "False",
                    Some("ContainersNotReady"),
                    Some("containers with unready status: [app]"),
                ),
                ("PodScheduled", "True", None, None),
            ],
        ),
        (
            "running",
            app(),
            observed(vec![running("app", 0, 0)]),
            vec![
                ("PodReadyToStartContainers", "True", None, None),
                ("Initialized", "True", None, None),
                ("Ready", "True", None, None),
                ("ContainersReady", "True", None, None),
                ("PodScheduled", "True", None, None),
            ],
        ),
        (
            "init container running",
            with_init(app(), vec![container("setup")]),
            observed(vec![running("setup", 0, 0)]),
            vec![
                ("PodReadyToStartContainers", "True", None, None),
                (
                    "Initialized",
                    "False",
                    Some("ContainersNotInitialized"),
                    Some("containers with incomplete status: [setup]"),
                ),
                (
                    "Ready",
                    "False",
                    Some("ContainersNotReady"),
                    Some("containers with unready status: [app]"),
                ),
                (
                    "ContainersReady",
                    "False",
                    Some("ContainersNotReady"),
                    Some("containers with unready status: [app]"),
                ),
                ("PodScheduled", "True", None, None),
            ],
        ),
        (
            "succeeded",
            with_policy(app(), Never),
            observed(vec![exited("app", 0, 0, 0, "")]),
            vec![
                ("Initialized", "True", Some("PodCompleted"), None),
                ("Ready", "False", Some("PodCompleted"), None),
                ("ContainersReady", "False", Some("PodCompleted"), None),
            ],
        ),
        (
            "failed",
            with_policy(app(), Never),
            observed(vec![exited("app", 0, 0, 1, "")]),
            vec![
                ("Initialized", "True", None, None),
                ("Ready", "False", Some("PodFailed"), None),
                ("ContainersReady", "False", Some("PodFailed"), None),
            ],
        ),
        (
            "two unready",
            pod(&["b", "a"]),
            observed(vec![]),
            vec![(
                "ContainersReady",
                "False",
                Some("ContainersNotReady"),
                Some("containers with unready status: [b a]"),
            )],
        ),
        (
            "sidecar unready first",
            with_init(pod(&["app"]), vec![sidecar("proxy")]),
            observed(vec![running("app", 0, 0)]),
            vec![
                ("Initialized", "True", None, None),
                (
                    "ContainersReady",
                    "False",
                    Some("ContainersNotReady"),
                    Some("containers with unready status: [proxy]"),
                ),
            ],
        ),
        (
            "sandbox not ready",
            app(),
            not_ready,
            vec![("PodReadyToStartContainers", "False", None, None)],
        ),
        (
            "sandbox without IP",
            app(),
            no_ip,
            vec![("PodReadyToStartContainers", "False", None, None)],
        ),
        (
            "host network needs no IP",
            host_net.clone(),
            host_no_ip,
            vec![("PodReadyToStartContainers", "True", None, None)],
        ),
        (
            "two ready sandboxes",
            app(),
            two_ready,
            vec![("PodReadyToStartContainers", "False", None, None)],
        ),
        (
            "network namespace mode changed",
            app(),
            host_mode,
            vec![("PodReadyToStartContainers", "False", None, None)],
        ),
    ];
    for (name, p, obs, wants) in cases {
        let st = compute(&p, &obs, &WaitingReasons::new(), None, T0);
        for (type_, status, reason, message) in wants {
            let c = cond(&st, type_);
            assert_eq!(c.status, status, "{name}: {type_} status");
            assert_eq!(c.reason.as_deref(), reason, "{name}: {type_} reason");
            assert_eq!(c.message.as_deref(), message, "{name}: {type_} message");
        }
    }
}

#[test]
fn conditions_in_upstream_order_after_foreign_ones() {
    let mut p = pod(&["app"]);
    p.status = Some(PodStatus {
        conditions: vec![
            PodCondition {
                type_: "example.com/gate".into(),
                status: "True".into(),
                ..PodCondition::default()
            },
            PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..PodCondition::default()
            },
        ],
        ..PodStatus::default()
    });
    let st = compute(&p, &observed(vec![]), &WaitingReasons::new(), None, T0);
    let types: Vec<&str> = st.conditions.iter().map(|c| c.type_.as_ref()).collect();
    assert_eq!(
        types,
        [
            "example.com/gate",
            "PodReadyToStartContainers",
            "Initialized",
            "Ready",
            "ContainersReady",
            "PodScheduled"
        ]
    );
}

/// kubelet: `ephemeralContainerStatuses` come from the same conversion; they take no part
/// in the phase, the conditions or the regular statuses.
#[test]
fn ephemeral_container_statuses() {
    let mut p = pod(&["app"]);
    p.spec.ephemeral_containers = vec![container("dbg"), container("later")];
    let none = WaitingReasons::new();
    let obs = observed(vec![running("app", 0, 0), exited("dbg", 0, 1, 3, "Error")]);
    let st = compute(&p, &obs, &none, None, T0);
    let names = |v: &[ContainerStatus]| v.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&st.container_statuses), ["app"]);
    assert_eq!(names(&st.ephemeral_container_statuses), ["dbg", "later"]);
    let dbg = &st.ephemeral_container_statuses[0];
    assert_eq!(dbg.state.terminated.as_ref().map(|t| t.exit_code), Some(3));
    assert_eq!(
        state_str(&st.ephemeral_container_statuses[1].state),
        "Waiting:ContainerCreating"
    );
    assert_eq!(phase_of(&st), PodPhase::Running);
    assert_eq!(cond(&st, "Ready").status, "True");
}

/// kubelet: `GeneratePodReadyCondition` with readiness gates, and `NeedToReconcilePodReadiness`
/// on the apiserver's copy after someone else set a gate's condition.
#[test]
fn readiness_gates_hold_ready_until_every_condition_is_true() {
    let gate = |t: &str, s: &str| PodCondition {
        type_: t.to_string().into(),
        status: s.to_string().into(),
        ..PodCondition::default()
    };
    let mut p = pod(&["app"]);
    p.spec.readiness_gates = ["k8s.io/c1", "k8s.io/c2"]
        .iter()
        .map(|t| api::PodReadinessGate {
            condition_type: t.to_string(),
        })
        .collect();
    let up = observed(vec![running("app", 0, 0)]);
    let none = WaitingReasons::new();
    let msg1 = "corresponding condition of pod readiness gate \"k8s.io/c1\" does not exist.";
    let msg2 = "corresponding condition of pod readiness gate \"k8s.io/c2\" does not exist.";
    let false1 = "the status of pod readiness gate \"k8s.io/c1\" is not \"True\", but False";
    type Case<'a> = (
        &'a str,
        Vec<PodCondition>,
        &'a str,
        Option<&'a str>,
        Option<String>,
    );
    let cases: Vec<Case> = vec![
        (
            "no conditions",
            vec![],
            "False",
            Some("ReadinessGatesNotReady"),
            Some(format!("{msg1}, {msg2}")),
        ),
        (
            "one True",
            vec![gate("k8s.io/c1", "True")],
            "False",
            Some("ReadinessGatesNotReady"),
            Some(msg2.to_string()),
        ),
        (
            "both True",
            vec![gate("k8s.io/c1", "True"), gate("k8s.io/c2", "True")],
            "True",
            None,
            None,
        ),
        (
            "one back to False",
            vec![gate("k8s.io/c1", "False"), gate("k8s.io/c2", "True")],
            "False",
            Some("ReadinessGatesNotReady"),
            Some(false1.to_string()),
        ),
    ];
    for (name, conditions, status, reason, message) in cases {
        p.status = Some(PodStatus {
            conditions: conditions.clone(),
            ..PodStatus::default()
        });
        let st = compute(&p, &up, &none, None, T0);
        let r = cond(&st, "Ready");
        assert_eq!(r.status, status, "{name}");
        assert_eq!(r.reason.as_deref(), reason, "{name}");
        assert_eq!(r.message, message, "{name}");
        assert_eq!(cond(&st, "ContainersReady").status, "True", "{name}");
        // The gates' conditions are kept as the apiserver has them.
        for c in &conditions {
            assert_eq!(cond(&st, &c.type_).status, c.status, "{name}");
        }
        // Our own status, once the apiserver holds it, needs no reconcile; the same with a
        // gate's condition flipped by someone else does (kubelet: HandlePodReconcile).
        p.status = Some(st.clone());
        assert!(!need_to_reconcile_readiness(&p), "{name}");
        let flip = st.conditions.iter().position(|c| c.type_ == "k8s.io/c2");
        let mut api = st.clone();
        match flip {
            Some(i) => api.conditions[i].status = "False".into(),
            None => api.conditions.insert(0, gate("k8s.io/c2", "True")),
        }
        p.status = Some(api);
        assert!(need_to_reconcile_readiness(&p), "{name}: flipped");
    }
    // Containers not ready: Ready says what ContainersReady says, gates or not.
    p.status = None;
    let st = compute(&p, &observed(vec![]), &none, None, T0);
    assert_eq!(
        cond(&st, "Ready").reason.as_deref(),
        Some("ContainersNotReady")
    );
    // No gates: nothing to reconcile.
    let mut plain = pod(&["app"]);
    plain.status = Some(PodStatus {
        conditions: vec![gate("Ready", "True")],
        ..PodStatus::default()
    });
    assert!(!need_to_reconcile_readiness(&plain));
}

#[test]
fn last_transition_time_moves_only_on_change() {
    let p = pod(&["app"]);
    let none = WaitingReasons::new();
    let t = |secs: i64| clock::rfc3339(T0 + secs * SEC);
    let times = |st: &PodStatus| {
        st.conditions
            .iter()
            .map(|c| (c.type_.to_string(), c.last_transition_time.clone()))
            .collect::<Vec<_>>()
    };
    let expect = |pairs: [(&str, i64); 5]| {
        pairs
            .iter()
            .map(|(ty, s)| (ty.to_string(), t(*s)))
            .collect::<Vec<_>>()
    };

    let mut empty = observed(vec![]);
    empty.sandboxes.clear();
    let s0 = compute(&p, &empty, &none, None, T0);
    let all_t0 = [
        ("PodReadyToStartContainers", 0),
        ("Initialized", 0),
        ("Ready", 0),
        ("ContainersReady", 0),
        ("PodScheduled", 0),
    ];
    assert_eq!(times(&s0), expect(all_t0));

    // Nothing changed: no time moves.
    let s1 = compute(&p, &empty, &none, Some(&s0), T0 + 10 * SEC);
    assert_eq!(times(&s1), expect(all_t0));

    // A sandbox appears: only PodReadyToStartContainers moves.
    let s2 = compute(&p, &observed(vec![]), &none, Some(&s1), T0 + 20 * SEC);
    assert_eq!(
        times(&s2),
        expect([
            ("PodReadyToStartContainers", 20),
            ("Initialized", 0),
            ("Ready", 0),
            ("ContainersReady", 0),
            ("PodScheduled", 0),
        ])
    );

    // The container runs: Ready and ContainersReady move.
    let run = observed(vec![running("app", 0, 25)]);
    let s3 = compute(&p, &run, &none, Some(&s2), T0 + 30 * SEC);
    let after_ready = [
        ("PodReadyToStartContainers", 20),
        ("Initialized", 0),
        ("Ready", 30),
        ("ContainersReady", 30),
        ("PodScheduled", 0),
    ];
    assert_eq!(times(&s3), expect(after_ready));

    // Idle again: nothing moves, the status is identical.
    let s4 = compute(&p, &run, &none, Some(&s3), T0 + 40 * SEC);
    assert_eq!(times(&s4), expect(after_ready));
    assert_eq!(s4, s3, "idle: the status is identical");

    // It crashes: back to False at 50.
    let crashed = observed(vec![exited("app", 0, 25, 1, "Error")]);
    let s5 = compute(
        &p,
        &crashed,
        &reasons(&[("app", "CrashLoopBackOff", "")]),
        Some(&s4),
        T0 + 50 * SEC,
    );
    assert_eq!(cond(&s5, "Ready").last_transition_time, t(50));
    assert_eq!(cond(&s5, "Initialized").last_transition_time, t(0));
}

// ---------------------------------------------------------------------------------------
// IPs, host IP, start time, QoS.

/// kubelet (PodObservedGenerationTracking, GA in 1.35): the status and the kubelet's own
/// conditions carry the pod's generation; never lower than one already reported.
#[test]
fn observed_generation_follows_the_pod() {
    let mut p = pod(&["app"]);
    p.metadata.generation = 2;
    let none = WaitingReasons::new();
    let obs = observed(vec![running("app", 0, 0)]);
    let st = compute(&p, &obs, &none, None, T0);
    assert_eq!(st.observed_generation, 2);
    for c in &st.conditions {
        assert_eq!(c.observed_generation, 2, "{}", c.type_);
    }
    let json = serde_json::to_value(&st).unwrap();
    assert_eq!(json["observedGeneration"], 2);
    p.metadata.generation = 3;
    assert_eq!(
        compute(&p, &obs, &none, Some(&st), T0).observed_generation,
        3
    );
    p.metadata.generation = 1;
    assert_eq!(
        compute(&p, &obs, &none, Some(&st), T0).observed_generation,
        2
    );
}

#[test]
fn addresses_start_time_and_qos() {
    let p = pod(&["app"]);
    let none = WaitingReasons::new();
    let st = compute(
        &p,
        &observed(vec![running("app", 0, 0)]),
        &none,
        None,
        T0 + 5 * SEC,
    );
    assert_eq!(st.pod_ip.as_deref(), Some("10.88.0.5"));
    assert_eq!(
        st.pod_ips,
        vec![PodIp {
            ip: "10.88.0.5".to_string()
        }]
    );
    assert_eq!(st.host_ip.as_deref(), Some(HOST));
    assert_eq!(st.start_time, clock::rfc3339(T0 + 5 * SEC));
    assert_eq!(st.qos_class.as_deref(), Some("BestEffort"));

    // Start time and host IP are kept.
    let later = compute_pod_status(&p, &observed(vec![]), &none, Some(&st), T0 + 99 * SEC, None);
    assert_eq!(later.start_time, st.start_time);
    assert_eq!(later.host_ip.as_deref(), Some(HOST));

    // The newest sandbox is not ready but an older one is: no IP (it is being replaced).
    let mut replacing = observed(vec![]);
    replacing.sandboxes = vec![
        sandbox("sb2", T0 + 10 * SEC, false, None),
        sandbox("sb1", T0, true, Some("10.88.0.5")),
    ];
    let s = compute(&p, &replacing, &none, Some(&st), T0 + 10 * SEC);
    assert_eq!(s.pod_ip, None);

    // Every sandbox stopped: the last known IP stays (the pod is ending).
    let mut stopped = observed(vec![]);
    stopped.sandboxes[0].state = SandboxState::NotReady;
    stopped.sandboxes[0].ip = None;
    let s = compute(&p, &stopped, &none, Some(&st), T0 + 10 * SEC);
    assert_eq!(s.pod_ip.as_deref(), Some("10.88.0.5"));
    assert_eq!(s.pod_ips.len(), 1);

    // Host network: the pod IP is the node's.
    let mut hn = p.clone();
    hn.spec.host_network = true;
    let mut obs = observed(vec![running("app", 0, 0)]);
    obs.sandboxes[0].ip = None;
    obs.sandboxes[0].network = Some(NamespaceMode::Node);
    let s = compute(&hn, &obs, &none, None, T0);
    assert_eq!(s.pod_ip.as_deref(), Some(HOST));
    assert_eq!(
        s.pod_ips,
        vec![PodIp {
            ip: HOST.to_string()
        }]
    );
}

// ---------------------------------------------------------------------------------------
// Summary.

#[test]
fn summary_lines() {
    let none = WaitingReasons::new();
    let p = pod(&["app", "side"]);
    let obs = observed(vec![
        running("app", 0, 0),
        exited("side", 3, 30, 1, "Error"),
    ]);
    let st = compute(
        &p,
        &obs,
        &reasons(&[("side", "CrashLoopBackOff", "back-off")]),
        None,
        T0,
    );
    assert_eq!(
        summary(&p, &st),
        "default/web-node1 Running 1/2 ready: app Running (restarts 0), side Waiting CrashLoopBackOff (restarts 3)"
    );

    let p = with_init(
        pod(&["app"]),
        vec![container("setup"), container("migrate")],
    );
    let obs = observed(vec![
        exited("setup", 0, 0, 0, ""),
        running("migrate", 0, 10),
    ]);
    let st = compute(&p, &obs, &none, None, T0);
    assert_eq!(
        summary(&p, &st),
        "default/web-node1 Pending 0/1 ready: init:migrate Running (restarts 0), app Waiting PodInitializing (restarts 0)"
    );

    let mut p = with_policy(pod(&["app"]), RestartPolicy::Never);
    p.spec.containers[0].readiness_probe = Some(Box::default());
    let st = compute(&p, &observed(vec![running("app", 0, 0)]), &none, None, T0);
    assert_eq!(
        summary(&p, &st),
        "default/web-node1 Running 0/1 ready: app Running unready (restarts 0)"
    );
    let st = compute(
        &p,
        &observed(vec![exited("app", 0, 0, 137, "OOMKilled")]),
        &none,
        None,
        T0,
    );
    assert_eq!(
        summary(&p, &st),
        "default/web-node1 Failed 0/1 ready: app Terminated OOMKilled exit 137 (restarts 0)"
    );
    let st = PodStatus {
        phase: Some(PodPhase::Failed),
        reason: Some("Evicted".to_string()),
        ..PodStatus::default()
    };
    assert_eq!(
        summary(&p, &st),
        "default/web-node1 Failed (Evicted) 0/0 ready"
    );
}

// ---------------------------------------------------------------------------------------
// StatusManager and the "no log at idle" property.

#[test]
fn manager_set_get_remove_iter() {
    let p = pod(&["app"]);
    let none = WaitingReasons::new();
    let mut m = StatusManager::new();
    assert!(m.is_empty());
    let s0 = compute(&p, &observed(vec![]), &none, None, T0);
    assert!(
        m.set("uid-1", "default/web-node1", s0.clone()),
        "first status is a change"
    );
    assert!(
        !m.set("uid-1", "default/web-node1", s0.clone()),
        "same status"
    );
    assert_eq!(m.get("uid-1"), Some(&s0));

    let s1 = compute(
        &p,
        &observed(vec![running("app", 0, 0)]),
        &none,
        m.get("uid-1"),
        T0 + SEC,
    );
    assert!(
        m.set("uid-1", "default/web-node1", s1.clone()),
        "container started"
    );
    assert!(m.set("uid-2", "default/other-node1", s0.clone()));
    assert_eq!(m.len(), 2);
    let listed: Vec<(&str, &str)> = m.iter().map(|(u, n, _)| (u, n)).collect();
    assert_eq!(
        listed,
        [
            ("uid-1", "default/web-node1"),
            ("uid-2", "default/other-node1")
        ]
    );
    assert_eq!(m.remove("uid-1"), Some(s1));
    assert_eq!(m.get("uid-1"), None);
    assert_eq!(m.remove("uid-1"), None);
}

#[test]
fn manager_ignores_timestamp_only_changes() {
    let p = pod(&["app"]);
    let none = WaitingReasons::new();
    let mut m = StatusManager::new();
    let obs = observed(vec![running("app", 0, 0)]);
    let s0 = compute(&p, &obs, &none, None, T0);
    assert!(m.set("uid-1", "default/web-node1", s0.clone()));
    // Computed without a previous status: every time stamp differs, nothing else.
    let s1 = compute(&p, &obs, &none, None, T0 + 60 * SEC);
    assert_ne!(s0, s1);
    assert!(!m.set("uid-1", "default/web-node1", s1.clone()));
    assert_eq!(m.get("uid-1"), Some(&s1), "stored silently");
    // A container time alone (same instance, same state) is not a change either.
    let mut s2 = s1.clone();
    s2.container_statuses[0].state.running = Some(api::ContainerStateRunning {
        started_at: clock::rfc3339(T0 + 3 * SEC),
    });
    assert!(!m.set("uid-1", "default/web-node1", s2));
    // A new container instance is.
    let s3 = compute(
        &p,
        &observed(vec![running("app", 1, 5)]),
        &none,
        m.get("uid-1"),
        T0 + 61 * SEC,
    );
    assert!(m.set("uid-1", "default/web-node1", s3));
}

#[test]
fn manager_keeps_the_stored_status_when_the_same_one_comes_again() {
    let p = pod(&["app"]);
    let none = WaitingReasons::new();
    let mut m = StatusManager::new();
    let obs = observed(vec![running("app", 0, 0)]);
    let s0 = compute(&p, &obs, &none, None, T0);
    assert!(m.set("uid-1", "default/web-node1", s0.clone()));
    let handed_out = m.get_shared("uid-1").expect("stored");
    // A steady pod's resync: the same status; the copy handed out stays the stored one.
    assert!(!m.set("uid-1", "default/web-node1", s0.clone()));
    let stored = m.get_shared("uid-1").expect("stored");
    assert!(std::sync::Arc::ptr_eq(&handed_out, &stored));
    // A timestamp-only difference is stored (silently), as before.
    let s1 = compute(&p, &obs, &none, None, T0 + 60 * SEC);
    assert!(!m.set("uid-1", "default/web-node1", s1.clone()));
    assert_eq!(m.get("uid-1"), Some(&s1));
}

#[test]
fn manager_keeps_terminal_phase() {
    let mut m = StatusManager::new();
    let done = PodStatus {
        phase: Some(PodPhase::Succeeded),
        ..PodStatus::default()
    };
    assert!(m.set("uid-1", "default/job-node1", done));
    let running = PodStatus {
        phase: Some(PodPhase::Running),
        ..PodStatus::default()
    };
    assert!(!m.set("uid-1", "default/job-node1", running));
    assert_eq!(
        m.get("uid-1").and_then(|s| s.phase),
        Some(PodPhase::Succeeded)
    );
}

/// The one definition of "pod status changed": every arrow of what counts and what not.
#[test]
fn equal_apart_from_timestamps_table() {
    let p = with_init(pod(&["app"]), vec![container("setup")]);
    let obs = observed(vec![
        exited("setup", 0, 0, 0, ""),
        exited("app", 0, 1, 1, "Error"),
        running("app", 1, 5),
    ]);
    let base = compute(&p, &obs, &WaitingReasons::new(), None, T0);
    assert!(base.container_statuses[0].last_state.terminated.is_some());
    let at = |secs: i64| clock::rfc3339(T0 + secs * SEC);
    let cond_at = |i: usize| move |s: &mut PodStatus| s.conditions[i].last_transition_time = at(99);
    type Edit = Box<dyn Fn(&mut PodStatus)>;
    let cases: Vec<(&str, Edit, bool)> = vec![
        ("nothing", Box::new(|_| {}), true),
        ("startTime", Box::new(move |s| s.start_time = at(99)), true),
        (
            "a condition's lastTransitionTime",
            Box::new(cond_at(0)),
            true,
        ),
        (
            "every condition's lastTransitionTime",
            Box::new(move |s| {
                for c in &mut s.conditions {
                    c.last_transition_time = at(99);
                }
            }),
            true,
        ),
        (
            "running startedAt",
            Box::new(move |s| {
                s.container_statuses[0].state.running =
                    Some(api::ContainerStateRunning { started_at: at(99) });
            }),
            true,
        ),
        (
            "last state startedAt and finishedAt",
            Box::new(move |s| {
                let t = s.container_statuses[0]
                    .last_state
                    .terminated
                    .as_mut()
                    .unwrap();
                t.started_at = at(98);
                t.finished_at = at(99);
            }),
            true,
        ),
        (
            "init container finishedAt",
            Box::new(move |s| {
                let t = s.init_container_statuses[0]
                    .state
                    .terminated
                    .as_mut()
                    .unwrap();
                t.finished_at = at(99);
            }),
            true,
        ),
        (
            "phase",
            Box::new(|s| s.phase = Some(PodPhase::Failed)),
            false,
        ),
        (
            "reason",
            Box::new(|s| s.reason = Some("Evicted".into())),
            false,
        ),
        (
            "podIP",
            Box::new(|s| s.pod_ip = Some("10.0.0.99".into())),
            false,
        ),
        (
            "a condition's status",
            Box::new(|s| s.conditions[0].status = "Unknown".into()),
            false,
        ),
        (
            "a condition's reason",
            Box::new(|s| s.conditions[0].reason = Some("X".into())),
            false,
        ),
        // Stricter than upstream, on purpose (see the function's doc).
        (
            "conditions in another order",
            Box::new(|s| s.conditions.reverse()),
            false,
        ),
        (
            "a condition of another writer",
            Box::new(|s| {
                s.conditions.insert(
                    0,
                    PodCondition {
                        type_: "DisruptionTarget".into(),
                        status: "True".into(),
                        ..PodCondition::default()
                    },
                );
            }),
            false,
        ),
        (
            "restartCount",
            Box::new(|s| s.container_statuses[0].restart_count += 1),
            false,
        ),
        (
            "ready",
            Box::new(|s| s.container_statuses[0].ready ^= true),
            false,
        ),
        (
            "containerID",
            Box::new(|s| s.container_statuses[0].container_id = Some("containerd://x".into())),
            false,
        ),
        (
            "last state exit code",
            Box::new(|s| {
                s.container_statuses[0]
                    .last_state
                    .terminated
                    .as_mut()
                    .unwrap()
                    .exit_code = 2;
            }),
            false,
        ),
        (
            "running -> waiting",
            Box::new(|s| {
                s.container_statuses[0].state = api::ContainerState {
                    waiting: Some(api::ContainerStateWaiting {
                        reason: Some("CrashLoopBackOff".into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                };
            }),
            false,
        ),
    ];
    for (what, edit, want) in cases {
        let mut other = base.clone();
        edit(&mut other);
        assert!(
            what == "nothing" || other != base,
            "{what}: the edit changed nothing"
        );
        assert_eq!(equal_apart_from_timestamps(&base, &other), want, "{what}");
        assert_eq!(
            equal_apart_from_timestamps(&other, &base),
            want,
            "{what}, swapped"
        );
    }
}

#[test]
fn idle_sync_loop_reports_no_change() {
    let p = with_init(pod(&["app", "side"]), vec![container("setup")]);
    let obs = observed(vec![
        exited("setup", 0, 0, 0, ""),
        running("app", 0, 10),
        exited("side", 3, 30, 1, "Error"),
    ]);
    let r = reasons(&[("side", "CrashLoopBackOff", "back-off 40s")]);
    let mut m = StatusManager::new();
    let mut changes = 0;
    for i in 0..20 {
        let st = compute(&p, &obs, &r, m.get("uid-1"), T0 + i * 10 * SEC);
        if m.set("uid-1", "default/web-node1", st) {
            changes += 1;
        }
    }
    assert_eq!(changes, 1, "only the first sync is a change");
}

/// Captures this thread's log records, when this test gets to install the logger.
mod capture {
    use std::cell::RefCell;

    thread_local! {
        pub static LINES: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    }

    pub(super) struct Capture;
    impl log::Log for Capture {
        fn enabled(&self, _: &log::Metadata<'_>) -> bool {
            true
        }
        fn log(&self, record: &log::Record<'_>) {
            LINES.with(|l| {
                l.borrow_mut()
                    .push(format!("{} {}", record.level(), record.args()))
            });
        }
        fn flush(&self) {}
    }
    pub(super) static LOGGER: Capture = Capture;

    pub(super) fn install() -> bool {
        let ok = log::set_logger(&LOGGER).is_ok();
        if ok {
            log::set_max_level(log::LevelFilter::Info);
        }
        ok
    }

    pub(super) fn take() -> Vec<String> {
        LINES.with(|l| std::mem::take(&mut *l.borrow_mut()))
    }
}

#[test]
fn logs_once_per_change_and_never_at_idle() {
    if !capture::install() {
        eprintln!("another logger is installed; the return value is checked elsewhere");
        return;
    }
    let p = pod(&["app"]);
    let none = WaitingReasons::new();
    let mut m = StatusManager::new();
    let obs = observed(vec![running("app", 0, 0)]);
    capture::take();
    for i in 0..10 {
        let st = compute(&p, &obs, &none, m.get("uid-1"), T0 + i * SEC);
        m.set("uid-1", "default/web-node1", st);
    }
    assert_eq!(
        capture::take(),
        ["INFO pod status: default/web-node1 Running 1/1 ready: app Running (restarts 0)"]
    );
    let st = compute(
        &p,
        &observed(vec![running("app", 1, 20)]),
        &none,
        m.get("uid-1"),
        T0 + 30 * SEC,
    );
    m.set("uid-1", "default/web-node1", st);
    assert_eq!(
        capture::take(),
        ["INFO pod status: default/web-node1 Running 1/1 ready: app Running (restarts 1)"]
    );
}

// ---------------------------------------------------------------------------------------
// In-place resize: the allocated and actual resources, the resize conditions.

#[cfg(feature = "in-place-resize")]
#[test]
fn resize_shows_allocated_and_actual_resources_and_its_conditions() {
    let q = |v: &str| api::Quantity::Str(v.into());
    let mut p = pod(&["web", "idle"]);
    // An apiserver pod (static pods show no resources: see containers.rs).
    p.metadata
        .annotations
        .insert(api::ANNOTATION_CONFIG_SOURCE.into(), "api".into());
    p.spec.containers[0].resources = Some(api::ResourceRequirements {
        requests: [("cpu".to_string(), q("200m"))].into(),
        limits: [("memory".to_string(), q("128Mi"))].into(),
        claims: None,
    });
    let actual = vec![(
        "web".to_string(),
        api::ResourceRequirements {
            requests: [("cpu".to_string(), q("100m"))].into(),
            limits: [("memory".to_string(), q("64Mi"))].into(),
            claims: None,
        },
    )];
    let mut resize = crate::allocation::ResizeState {
        actual: actual.clone(),
        ..Default::default()
    };
    resize.set_in_progress("", "", 7, Some("t".into()));
    let opts = StatusOptions {
        resize: Some(&resize),
        ..StatusOptions::default()
    };
    let obs = observed(vec![running("web", 0, 0), running("idle", 0, 0)]);
    let st = compute_pod_status_with(&p, &obs, &WaitingReasons::new(), None, T0, None, &opts);
    let web = cs(&st, "web");
    assert_eq!(web.allocated_resources["cpu"], q("200m"));
    // Running: what it was last given, not yet the allocation.
    let r = web.resources.clone().unwrap();
    assert_eq!(
        (&r.requests["cpu"], &r.limits["memory"]),
        (&q("100m"), &q("64Mi"))
    );
    // A container with no resources shows `{}` (the apiserver refuses a resize of a pod
    // whose running container shows nothing: a node without resize).
    assert_eq!(
        cs(&st, "idle").resources,
        Some(api::ResourceRequirements::default())
    );
    assert!(cs(&st, "idle").allocated_resources.is_empty());
    let c = cond(&st, "PodResizeInProgress");
    assert_eq!((c.status.as_ref(), c.observed_generation), ("True", 7));
    assert!(owned_by_kubelet("PodResizeInProgress") && owned_by_kubelet("PodResizePending"));

    // Not running: the allocation; the condition gone with the manager's.
    let st = compute_pod_status_with(
        &p,
        &observed(vec![]),
        &WaitingReasons::new(),
        Some(&st),
        T0,
        None,
        &StatusOptions {
            resize: Some(&crate::allocation::ResizeState {
                actual,
                ..Default::default()
            }),
            ..StatusOptions::default()
        },
    );
    assert_eq!(
        cs(&st, "web").resources.clone().unwrap().limits["memory"],
        q("128Mi")
    );
    assert!(
        !st.conditions
            .iter()
            .any(|c| c.type_ == "PodResizeInProgress")
    );
}
