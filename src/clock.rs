//! Injected wall-clock time.
//!
//! Owns: the `Clock` boundary, RFC 3339 formatting and Go's duration formatting. Logic never calls
//! `SystemTime::now()` directly; timers use `tokio::time` (paused in tests) and wall-clock
//! stamps (status times, crash-loop back-off measured against the runtime's `finishedAt`)
//! come through a `Clock`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Nanoseconds since the Unix epoch: the unit CRI uses for every timestamp.
pub(crate) type UnixNanos = i64;

pub trait Clock: Clone + 'static {
    fn now(&self) -> UnixNanos;
}

/// The real wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> UnixNanos {
        match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
            Err(_) => 0,
        }
    }
}

/// A wall clock that follows tokio's (pausable) clock from a fixed start: with
/// `start_paused = true`, `tokio::time::advance` moves both timers and stamps.
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    base: UnixNanos,
    start: tokio::time::Instant,
}

impl TokioClock {
    pub fn new(base: UnixNanos) -> Self {
        TokioClock {
            base,
            start: tokio::time::Instant::now(),
        }
    }
}

impl Clock for TokioClock {
    fn now(&self) -> UnixNanos {
        let elapsed = tokio::time::Instant::now().duration_since(self.start);
        self.base
            .saturating_add(i64::try_from(elapsed.as_nanos()).unwrap_or(i64::MAX))
    }
}

/// 2026-12-01T00:00:00Z, in seconds: no true clock reads earlier than this release of
/// picolet. A board without a real-time clock boots in 1970 (or at the stamp systemd or
/// fake-hwclock keep) until NTP sets it; what must stay valid across that jump (the node
/// API's self-signed certificate) is made valid on both sides of this floor, and a clock
/// below it is named in the log.
pub(crate) const FLOOR_SECS: i64 = 1_796_083_200;

/// Whether `now` is below [`FLOOR_SECS`]: a clock not set yet.
pub(crate) fn before_floor(now: UnixNanos) -> bool {
    now / 1_000_000_000 < FLOOR_SECS
}

/// A [`TokioClock`] whose wall time a test can set back or forward, as NTP's first step or
/// an operator's `date` moves a board's clock without a real-time clock (timers, on
/// tokio's monotonic clock, do not move).
#[cfg(any(test, feature = "fakes"))]
#[derive(Debug, Clone)]
pub struct JumpClock {
    inner: TokioClock,
    offset: std::sync::Arc<std::sync::atomic::AtomicI64>,
}

#[cfg(any(test, feature = "fakes"))]
impl JumpClock {
    pub fn new(base: UnixNanos) -> Self {
        JumpClock {
            inner: TokioClock::new(base),
            offset: Default::default(),
        }
    }

    /// Moves the wall clock by `by` nanoseconds (negative: back).
    pub fn jump(&self, by: i64) {
        self.offset
            .fetch_add(by, std::sync::atomic::Ordering::Relaxed);
    }
}

#[cfg(any(test, feature = "fakes"))]
impl Clock for JumpClock {
    fn now(&self) -> UnixNanos {
        self.inner
            .now()
            .saturating_add(self.offset.load(std::sync::atomic::Ordering::Relaxed))
    }
}

pub(crate) fn nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// A duration as Go's `time.Duration.String()` prints it (and `metav1.Duration` serializes
/// it): `0s`, `7ns`, `1.5µs`, `500ms`, `1.5s`, `2m40s`, `1m0.25s`, `1h0m0s`. The kubelet's
/// messages print durations this way (`%v`): back-off, the image Pulled event, the stats
/// window.
pub(crate) fn go_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".into();
    }
    let frac = |value: u128, unit: u128| -> String {
        let whole = value / unit;
        let rest = value % unit;
        if rest == 0 {
            return whole.to_string();
        }
        let width = unit.ilog10() as usize;
        let digits = format!("{rest:0width$}");
        format!("{whole}.{}", digits.trim_end_matches('0'))
    };
    if nanos < 1_000 {
        return format!("{nanos}ns");
    }
    if nanos < 1_000_000 {
        return format!("{}µs", frac(nanos, 1_000));
    }
    if nanos < 1_000_000_000 {
        return format!("{}ms", frac(nanos, 1_000_000));
    }
    let secs = nanos / 1_000_000_000;
    let sub = nanos % 1_000_000_000;
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    let s = frac(s * 1_000_000_000 + sub, 1_000_000_000);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, m) => format!("{m}m{s}s"),
        (h, m) => format!("{h}h{m}m{s}s"),
    }
}

/// Go's `d.Truncate(time.Millisecond)`: whole milliseconds, rounded down.
pub(crate) fn truncate_millis(d: Duration) -> Duration {
    d - Duration::from_nanos(u64::from(d.subsec_nanos() % 1_000_000))
}

/// RFC 3339 in UTC with second precision, as Kubernetes `metav1.Time` serialises
/// (`2026-11-30T05:09:28Z`). A non-positive stamp means "unknown" and gives `None`.
pub fn rfc3339(t: UnixNanos) -> Option<String> {
    if t <= 0 {
        return None;
    }
    let secs = t / 1_000_000_000;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    Some(format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    ))
}

/// RFC 3339 with nanoseconds, as CRI log lines carry (`2026-11-30T05:09:28.123456789Z`).
pub fn rfc3339_nanos(t: UnixNanos) -> String {
    let base = rfc3339(t.max(1)).unwrap_or_default();
    let frac = t.rem_euclid(1_000_000_000);
    format!("{}.{frac:09}Z", base.trim_end_matches('Z'))
}

/// The inverse of [`rfc3339`]: `2026-11-30T05:09:28Z` (fractions and a `Z` or `+00:00`
/// suffix accepted; other offsets are not: Kubernetes writes UTC) → nanoseconds.
pub fn parse_rfc3339(s: &str) -> Option<UnixNanos> {
    let (date, time) = s.split_once('T')?;
    let mut d = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let time = time
        .strip_suffix('Z')
        .or_else(|| time.strip_suffix("+00:00"))?;
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let mut t = hms.splitn(3, ':').map(|p| p.parse::<i64>().ok());
    let (hh, mm, ss) = (t.next()??, t.next()??, t.next()??);
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    let nanos_frac = if frac.is_empty() {
        0
    } else {
        let digits: String = frac.chars().take(9).collect();
        if !digits.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        format!("{digits:0<9}").parse::<i64>().ok()?
    };
    let days = days_from_civil(y, m as u32, day as u32);
    let secs = days * 86_400 + hh * 3600 + mm * 60 + ss;
    secs.checked_mul(1_000_000_000)?.checked_add(nanos_frac)
}

/// (year, month, day) → days since 1970-01-01 (Howard Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod parse_tests {
    use super::*;

    #[test]
    fn rfc3339_round_trips() {
        for t in [
            1,
            951_782_400_000_000_000,
            1_800_000_000_123_456_789,
            4_102_444_800_000_000_000,
        ] {
            let s = rfc3339(t).unwrap();
            assert_eq!(parse_rfc3339(&s), Some(t - t % 1_000_000_000), "{s}");
            assert_eq!(parse_rfc3339(&rfc3339_nanos(t)), Some(t), "{s}");
        }
        assert_eq!(
            parse_rfc3339("1970-01-01T00:00:01+00:00"),
            Some(1_000_000_000)
        );
        for bad in [
            "",
            "2026-11-30",
            "2026-13-01T00:00:00Z",
            "2026-11-30T05:09:28+01:00",
            "x-y-zT1:2:3Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339(0), None);
        assert_eq!(
            rfc3339(1_000_000_000).as_deref(),
            Some("1970-01-01T00:00:01Z")
        );
        // 2000-02-29T12:34:56Z (leap day)
        assert_eq!(
            rfc3339(951_827_696 * 1_000_000_000).as_deref(),
            Some("2000-02-29T12:34:56Z")
        );
        assert_eq!(
            rfc3339_nanos(1_796_000_000_123_456_789),
            "2026-11-30T00:53:20.123456789Z"
        );
    }

    /// The cases of the four copies this one replaced (probe, stats, back-off, image pull).
    #[test]
    fn go_durations() {
        let ms = Duration::from_millis;
        let cases = [
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(7), "7ns"),
            (Duration::from_nanos(1_500), "1.5µs"),
            (ms(7), "7ms"),
            (ms(200), "200ms"),
            (ms(500), "500ms"),
            (ms(999), "999ms"),
            (ms(1000), "1s"),
            (ms(1200), "1.2s"),
            (ms(1234), "1.234s"),
            (ms(1500), "1.5s"),
            (Duration::from_secs(10), "10s"),
            (ms(60_250), "1m0.25s"),
            (ms(61_050), "1m1.05s"),
            (Duration::from_secs(80), "1m20s"),
            (Duration::from_secs(300), "5m0s"),
            (Duration::from_secs(3600), "1h0m0s"),
            (Duration::from_nanos(12_037_028_765), "12.037028765s"),
        ];
        for (d, want) in cases {
            assert_eq!(go_duration(d), want, "{d:?}");
        }
        assert_eq!(
            go_duration(truncate_millis(Duration::from_nanos(12_037_028_765))),
            "12.037s"
        );
        assert_eq!(
            go_duration(truncate_millis(Duration::from_nanos(999_999))),
            "0s"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn tokio_clock_follows_paused_time() {
        let c = TokioClock::new(1_000);
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(c.now(), 1_000 + 2_000_000_000);
    }
}
