//! The state of one probe worker (kubelet: `prober/worker.go`, `doProbe`), as a pure step
//! function: what the worker sees of its container goes in, what to publish and whether to
//! probe comes out. No I/O, no clock: `now` is an argument. Every arrow has a table test.
//!
//! Per tick ([`WorkerState::before`]):
//! - pod terminal → stop; no container ID yet → wait;
//! - a new container ID → forget the old ID's result, publish the initial result
//!   (readiness Failure, liveness Success, startup Unknown), leave the hold;
//! - on hold (after a liveness/startup failure, until a new ID) → wait;
//! - container not running → readiness/liveness/startup Failure for the old instance, and
//!   stop if it will never run again (restartPolicy Never and terminated);
//! - pod terminating → liveness and startup publish Success and stop (kubelet: graceful
//!   shutdown must not be cut short by a probe);
//! - before `initialDelaySeconds` after the container's start → wait;
//! - startup probe once started → wait for good; other probes before started → wait;
//! - otherwise → probe.
//!
//! After a probe ([`WorkerState::after`]): an error is thrown away; a result is published
//! only after `failureThreshold` / `successThreshold` consecutive equal results; a published
//! liveness/startup Failure puts the worker on hold.

use crate::clock::UnixNanos;

use super::{Kind, ProbeResult};

const NANOS_PER_SECOND: i64 = 1_000_000_000;

/// The probe's numbers with the API defaults applied (kubelet: `SetDefaults_Probe`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Params {
    pub initial_delay_seconds: i64,
    pub period_seconds: i64,
    pub timeout_seconds: i64,
    pub success_threshold: u32,
    pub failure_threshold: u32,
}

impl Params {
    /// Defaults: period 10 s, timeout 1 s, success 1, failure 3, initial delay 0. Liveness
    /// and startup probes always have a success threshold of 1 (API validation).
    pub(crate) fn of(p: &crate::api::Probe, kind: Kind) -> Params {
        let positive = |v: Option<i32>, default: i64| match v {
            Some(v) if v > 0 => i64::from(v),
            _ => default,
        };
        let success = match kind {
            Kind::Readiness => positive(p.success_threshold, 1),
            Kind::Liveness | Kind::Startup => 1,
        };
        Params {
            initial_delay_seconds: p.initial_delay_seconds.map_or(0, |v| i64::from(v.max(0))),
            period_seconds: positive(p.period_seconds, 10),
            timeout_seconds: positive(p.timeout_seconds, 1),
            success_threshold: u32::try_from(success).unwrap_or(1),
            failure_threshold: u32::try_from(positive(p.failure_threshold, 3)).unwrap_or(3),
        }
    }
}

/// What the worker sees of its container at a tick (from the last recorded pod status).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Observation<'a> {
    /// The pod's phase is Succeeded or Failed.
    pub pod_terminal: bool,
    /// The pod is being terminated.
    pub terminating: bool,
    /// The newest instance's runtime ID ("" before the first start).
    pub container_id: &'a str,
    /// When the instance started, while it runs.
    pub running_since: Option<UnixNanos>,
    /// The instance has terminated.
    pub terminated: bool,
    /// The terminated instance will not be started again (kubelet: not
    /// `ContainerShouldRestart` for its exit code).
    pub restart_never: bool,
    /// The container's startup probe succeeded, or it has none.
    pub started: bool,
}

/// What a tick asks of the worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// Nothing to probe now.
    Wait,
    /// Run the probe now, then call [`WorkerState::after`].
    Probe,
    /// The worker ends (its results stay until the pod is removed).
    Stop,
}

/// A change of the published results.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Publish {
    /// Forget the result of a previous instance.
    Remove(String),
    /// The result for this instance.
    Set(String, ProbeResult),
}

/// One probe run's outcome, as the state machine needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunOutcome {
    Success,
    Failure,
    /// The probe could not be made (after its retries): thrown away.
    Error,
}

/// kubelet: `worker` fields `containerID`, `lastResult`, `resultRun`, `onHold`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WorkerState {
    pub kind: Kind,
    pub params: Params,
    container_id: String,
    last_result: Option<ProbeResult>,
    result_run: u32,
    on_hold: bool,
    /// The clock went back below the instance's start: when that was seen (the initial
    /// delay runs from then; picolet's, see `before`).
    clock_back: Option<UnixNanos>,
}

impl WorkerState {
    pub(crate) fn new(kind: Kind, params: Params) -> Self {
        WorkerState {
            kind,
            params,
            container_id: String::new(),
            last_result: None,
            result_run: 0,
            on_hold: false,
            clock_back: None,
        }
    }

    /// The instance this worker probes ("" before the first).
    pub(crate) fn container_id(&self) -> &str {
        &self.container_id
    }

    fn initial(&self) -> ProbeResult {
        match self.kind {
            Kind::Readiness => ProbeResult::Failure,
            Kind::Liveness => ProbeResult::Success,
            Kind::Startup => ProbeResult::Unknown,
        }
    }

    /// The start of a tick (kubelet: the first half of `doProbe`).
    pub(crate) fn before(
        &mut self,
        obs: &Observation<'_>,
        now: UnixNanos,
        publish: &mut Vec<Publish>,
    ) -> Step {
        // kubelet: a terminal pod is not probed any more.
        if obs.pod_terminal {
            return Step::Stop;
        }
        if obs.container_id.is_empty() {
            return Step::Wait;
        }
        if self.container_id != obs.container_id {
            // new instance --> initial result, hold released
            if !self.container_id.is_empty() {
                publish.push(Publish::Remove(std::mem::take(&mut self.container_id)));
            }
            self.container_id = obs.container_id.to_string();
            publish.push(Publish::Set(self.container_id.clone(), self.initial()));
            self.on_hold = false;
            self.last_result = None;
            self.result_run = 0;
            self.clock_back = None;
        }
        if self.on_hold {
            return Step::Wait;
        }
        let Some(since) = obs.running_since else {
            // not running --> Failure for the instance; stop if it never runs again
            publish.push(Publish::Set(
                self.container_id.clone(),
                ProbeResult::Failure,
            ));
            return if obs.terminated && obs.restart_never {
                Step::Stop
            } else {
                Step::Wait
            };
        };
        // kubelet: graceful shutdown — liveness and startup must not kill it meanwhile.
        if obs.terminating && matches!(self.kind, Kind::Liveness | Kind::Startup) {
            publish.push(Publish::Set(
                self.container_id.clone(),
                ProbeResult::Success,
            ));
            return Step::Stop;
        }
        // The initial delay counts from the start (kubelet: `time.Since(startedAt)`). If the
        // wall clock went back below it (no RTC, NTP's first step back), from when that was
        // seen: the kubelet would wait out the jump, a readiness probe holding the pod
        // unready for as long as a day's jump.
        let from = match self.clock_back {
            Some(seen) if seen <= now => seen,
            _ if now < since => *self.clock_back.insert(now),
            _ => since,
        };
        if now.saturating_sub(from) < self.params.initial_delay_seconds * NANOS_PER_SECOND {
            return Step::Wait;
        }
        match (self.kind, obs.started) {
            // The startup probe is done once the container started; the others wait for it.
            (Kind::Startup, true) | (Kind::Liveness | Kind::Readiness, false) => Step::Wait,
            _ => Step::Probe,
        }
    }

    /// After a probe ran (kubelet: the second half of `doProbe`). Returns the result to
    /// publish, if the threshold is reached.
    pub(crate) fn after(&mut self, outcome: RunOutcome) -> Option<ProbeResult> {
        let result = match outcome {
            // kubelet: a prober error throws the result away.
            RunOutcome::Error => return None,
            RunOutcome::Success => ProbeResult::Success,
            RunOutcome::Failure => ProbeResult::Failure,
        };
        if self.last_result == Some(result) {
            self.result_run = self.result_run.saturating_add(1);
        } else {
            self.last_result = Some(result);
            self.result_run = 1;
        }
        let threshold = match result {
            ProbeResult::Failure => self.params.failure_threshold,
            _ => self.params.success_threshold,
        };
        if self.result_run < threshold {
            return None;
        }
        if result == ProbeResult::Failure && matches!(self.kind, Kind::Liveness | Kind::Startup) {
            // kubelet: stop probing until a new container ID (the kill is coming).
            self.on_hold = true;
            self.result_run = 0;
        }
        Some(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = NANOS_PER_SECOND;

    fn params(delay: i64, success: u32, failure: u32) -> Params {
        Params {
            initial_delay_seconds: delay,
            period_seconds: 10,
            timeout_seconds: 1,
            success_threshold: success,
            failure_threshold: failure,
        }
    }

    fn running(id: &str, since: i64) -> Observation<'_> {
        Observation {
            container_id: id,
            running_since: Some(since),
            started: true,
            ..Observation::default()
        }
    }

    fn tick(w: &mut WorkerState, obs: Observation<'_>, now: i64) -> (Step, Vec<Publish>) {
        let mut p = Vec::new();
        let step = w.before(&obs, now, &mut p);
        (step, p)
    }

    fn set(id: &str, r: ProbeResult) -> Publish {
        Publish::Set(id.into(), r)
    }

    #[test]
    fn defaults() {
        let p = Params::of(&crate::api::Probe::default(), Kind::Readiness);
        assert_eq!(p, params(0, 1, 3));
        let custom = crate::api::Probe {
            initial_delay_seconds: Some(5),
            period_seconds: Some(2),
            timeout_seconds: Some(0),
            success_threshold: Some(2),
            failure_threshold: Some(1),
            ..Default::default()
        };
        let p = Params::of(&custom, Kind::Readiness);
        assert_eq!((p.initial_delay_seconds, p.period_seconds), (5, 2));
        assert_eq!(
            (p.timeout_seconds, p.success_threshold, p.failure_threshold),
            (1, 2, 1)
        );
        // liveness and startup: success threshold is always 1
        assert_eq!(Params::of(&custom, Kind::Liveness).success_threshold, 1);
    }

    #[test]
    fn initial_results_per_kind() {
        for (kind, initial) in [
            (Kind::Readiness, ProbeResult::Failure),
            (Kind::Liveness, ProbeResult::Success),
            (Kind::Startup, ProbeResult::Unknown),
        ] {
            let mut w = WorkerState::new(kind, params(0, 1, 3));
            let mut obs = running("c1", 0);
            obs.started = kind != Kind::Startup;
            let (step, p) = tick(&mut w, obs, 0);
            assert_eq!(p, vec![set("c1", initial)], "{kind:?}");
            assert_eq!(step, Step::Probe, "{kind:?}");
        }
    }

    #[test]
    fn table_of_ticks() {
        // (name, kind, observation, expected step)
        let none = Observation::default();
        let rows: Vec<(&str, Kind, Observation<'_>, Step)> = vec![
            ("no container yet", Kind::Readiness, none, Step::Wait),
            (
                "terminal pod",
                Kind::Readiness,
                Observation {
                    pod_terminal: true,
                    ..running("c1", 0)
                },
                Step::Stop,
            ),
            (
                "not running, will restart",
                Kind::Liveness,
                Observation {
                    running_since: None,
                    terminated: true,
                    ..running("c1", 0)
                },
                Step::Wait,
            ),
            (
                "terminated under Never",
                Kind::Readiness,
                Observation {
                    running_since: None,
                    terminated: true,
                    restart_never: true,
                    ..running("c1", 0)
                },
                Step::Stop,
            ),
            (
                "liveness while terminating",
                Kind::Liveness,
                Observation {
                    terminating: true,
                    ..running("c1", 0)
                },
                Step::Stop,
            ),
            (
                "readiness while terminating",
                Kind::Readiness,
                Observation {
                    terminating: true,
                    ..running("c1", 0)
                },
                Step::Probe,
            ),
            (
                "liveness before started",
                Kind::Liveness,
                Observation {
                    started: false,
                    ..running("c1", 0)
                },
                Step::Wait,
            ),
            (
                "readiness before started",
                Kind::Readiness,
                Observation {
                    started: false,
                    ..running("c1", 0)
                },
                Step::Wait,
            ),
            (
                "startup before started",
                Kind::Startup,
                Observation {
                    started: false,
                    ..running("c1", 0)
                },
                Step::Probe,
            ),
            (
                "startup after started",
                Kind::Startup,
                running("c1", 0),
                Step::Wait,
            ),
        ];
        for (name, kind, obs, want) in rows {
            let mut w = WorkerState::new(kind, params(0, 1, 3));
            let (step, _) = tick(&mut w, obs, 100 * S);
            assert_eq!(step, want, "{name}");
        }
    }

    #[test]
    fn not_running_publishes_failure() {
        let mut w = WorkerState::new(Kind::Liveness, params(0, 1, 3));
        let obs = Observation {
            running_since: None,
            terminated: true,
            ..running("c1", 0)
        };
        let (_, p) = tick(&mut w, obs, 0);
        assert_eq!(
            p,
            vec![
                set("c1", ProbeResult::Success),
                set("c1", ProbeResult::Failure)
            ]
        );
    }

    #[test]
    fn terminating_sets_liveness_success() {
        let mut w = WorkerState::new(Kind::Startup, params(0, 1, 3));
        tick(&mut w, running("c1", 0), 0);
        let (step, p) = tick(
            &mut w,
            Observation {
                terminating: true,
                ..running("c1", 0)
            },
            S,
        );
        assert_eq!(
            (step, p),
            (Step::Stop, vec![set("c1", ProbeResult::Success)])
        );
    }

    #[test]
    fn initial_delay_counts_from_the_start() {
        let mut w = WorkerState::new(Kind::Readiness, params(5, 1, 3));
        let started = 1_000 * S;
        assert_eq!(
            tick(&mut w, running("c1", started), started + 4 * S).0,
            Step::Wait
        );
        assert_eq!(
            tick(&mut w, running("c1", started), started + 5 * S).0,
            Step::Probe
        );
    }

    #[test]
    fn a_clock_gone_back_delays_probes_by_the_initial_delay_at_most() {
        const DAY: i64 = 86_400 * S;
        let mut w = WorkerState::new(Kind::Readiness, params(5, 1, 3));
        let started = 1_000 * DAY;
        assert_eq!(
            tick(&mut w, running("c1", started), started + 2 * S).0,
            Step::Wait
        );
        // Back a day, 3 s after the start: 5 s more from the sighting, not a day.
        let back = started + 3 * S - DAY;
        assert_eq!(tick(&mut w, running("c1", started), back).0, Step::Wait);
        assert_eq!(
            tick(&mut w, running("c1", started), back + 4 * S).0,
            Step::Wait
        );
        assert_eq!(
            tick(&mut w, running("c1", started), back + 5 * S).0,
            Step::Probe
        );
        // A new instance starts clean; forward a day: the delay is over.
        assert_eq!(
            tick(&mut w, running("c2", back + 10 * S), back + 11 * S).0,
            Step::Wait
        );
        assert_eq!(
            tick(&mut w, running("c2", back + 10 * S), back + 11 * S + DAY).0,
            Step::Probe
        );
    }

    #[test]
    fn thresholds() {
        use RunOutcome::{Error, Failure, Success};
        // (name, success threshold, failure threshold, outcomes, published after each)
        let f = Some(ProbeResult::Failure);
        let s = Some(ProbeResult::Success);
        type Row = (
            &'static str,
            u32,
            u32,
            Vec<RunOutcome>,
            Vec<Option<ProbeResult>>,
        );
        let rows: Vec<Row> = vec![
            ("one success", 1, 3, vec![Success], vec![s]),
            (
                "failures below the threshold",
                1,
                3,
                vec![Failure, Failure, Success, Failure, Failure, Failure],
                vec![None, None, s, None, None, f],
            ),
            (
                "errors are thrown away, not counted",
                1,
                2,
                vec![Failure, Error, Failure],
                vec![None, None, f],
            ),
            (
                "success threshold 2",
                2,
                1,
                vec![Success, Failure, Success, Success, Success],
                vec![None, f, None, s, s],
            ),
        ];
        for (name, st, ft, outcomes, want) in rows {
            let mut w = WorkerState::new(Kind::Readiness, params(0, st, ft));
            tick(&mut w, running("c1", 0), 0);
            let got: Vec<Option<ProbeResult>> = outcomes.iter().map(|o| w.after(*o)).collect();
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn liveness_failure_holds_until_a_new_container() {
        let mut w = WorkerState::new(Kind::Liveness, params(0, 1, 2));
        assert_eq!(tick(&mut w, running("c1", 0), 0).0, Step::Probe);
        assert_eq!(w.after(RunOutcome::Failure), None);
        assert_eq!(tick(&mut w, running("c1", 0), 10 * S).0, Step::Probe);
        assert_eq!(w.after(RunOutcome::Failure), Some(ProbeResult::Failure));
        // on hold: the same instance is not probed again
        let (step, p) = tick(&mut w, running("c1", 0), 20 * S);
        assert_eq!((step, p), (Step::Wait, vec![]));
        // a new instance: the old result goes, the initial one comes, probing resumes
        let (step, p) = tick(&mut w, running("c2", 25 * S), 30 * S);
        assert_eq!(step, Step::Probe);
        assert_eq!(
            p,
            vec![
                Publish::Remove("c1".into()),
                set("c2", ProbeResult::Success)
            ]
        );
        // the run count starts over for the new instance
        assert_eq!(w.after(RunOutcome::Failure), None);
    }

    #[test]
    fn readiness_failure_does_not_hold() {
        let mut w = WorkerState::new(Kind::Readiness, params(0, 1, 1));
        tick(&mut w, running("c1", 0), 0);
        assert_eq!(w.after(RunOutcome::Failure), Some(ProbeResult::Failure));
        assert_eq!(tick(&mut w, running("c1", 0), 10 * S).0, Step::Probe);
        assert_eq!(w.after(RunOutcome::Success), Some(ProbeResult::Success));
    }
}
