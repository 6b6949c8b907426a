//! The reader behind `kubectl logs` (`pods/log`): a container's CRI log files turned
//! into the plain text stream the API answers with (kubelet: `kuberuntime/logs/logs.go`,
//! `ReadLogs`).
//!
//! Owns: the `pods/log` query ([`LogOptions::from_query`]), which files hold an instance's log
//! ([`log_files`]: `<pod-log-dir>/<ns>_<name>_<uid>/<container>/<restartCount>.log`, rotated
//! `<N>.log.<timestamp>` files of the same instance before it), the CRI line format
//! ([`parse_cri_line`]), the one-shot read ([`read_logs`]) and the follow ([`follow`]).
//!
//! The stream: each CRI line `2016-10-06T00:17:09.669794202Z stdout F content` gives its
//! content; a `P` (partial) line's content is written without a newline, so the fragments
//! containerd split a long line into are joined again. stdout and stderr go to the one stream,
//! as the kubelet's `pods/log` does. Options apply in the kubelet's order: `tailLines` picks
//! where reading starts, `sinceTime` skips older lines, `timestamps` prefixes each line,
//! `limitBytes` cuts the output.
//!
//! Memory is bounded whatever the file size: `tailLines` seeks from the end in blocks (kubelet:
//! `tail.FindTailLineStartIndex`), files are read in 64 KiB chunks, and a record longer than
//! [`MAX_RECORD`] without a newline is skipped as malformed rather than buffered.
//!
//! Must never: panic on what is in a file (a malformed line is skipped and counted), block the
//! async runtime for long (the existing content is read on the blocking pool; a follow then
//! makes bounded small reads), or open anything outside the container's log directory (the
//! container name is checked before it becomes a path component).
//!
//! Not supported: the Docker JSON log format (no CRI runtime writes it), gzipped rotated files
//! (`*.gz`: no decompressor in the binary; they are skipped).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, watch};

use crate::clock::{UnixNanos, parse_rfc3339};

/// Block size of the backward scan for `tailLines` (kubelet: `tail.blockSize`, 1 KiB there).
const TAIL_BLOCK: usize = 8 * 1024;
/// Size of each read of a log file.
const READ_CHUNK: usize = 64 * 1024;
/// The longest record kept in memory; a longer one is skipped and counted as malformed.
/// containerd splits lines at 16 KiB (`max_container_log_line_size`), CRI-O at 8 KiB.
pub(crate) const MAX_RECORD: usize = 256 * 1024;
/// Output is sent in chunks of about this size while the existing content is read.
const SEND_CHUNK: usize = 32 * 1024;
/// How often a follow looks at the file for new lines. Polling, not inotify: a timer per
/// active follow only (nothing runs when nobody follows), a file descriptor less, and the same
/// code sees rotation (a new inode at the path) and truncation. kubelet: fsnotify plus a
/// re-check every `logForceCheckPeriod` (1 s).
pub(crate) const FOLLOW_POLL: Duration = Duration::from_millis(250);

#[derive(Debug, thiserror::Error)]
pub(crate) enum LogError {
    /// A query parameter that does not parse (the apiserver's decode step: 400).
    #[error("{param}: Invalid value: {value:?}: {reason}")]
    BadParameter {
        param: String,
        value: String,
        reason: &'static str,
    },
    /// A parsed option out of range (kubelet: `ValidatePodLogOptions`: 422 Invalid).
    #[error("{field}: Invalid value: {value}: {reason}")]
    Invalid {
        field: &'static str,
        value: i64,
        reason: &'static str,
    },
    /// kubelet: `ValidatePodLogOptions` (422 Invalid).
    #[error("at most one of `sinceTime` or `sinceSeconds` may be specified")]
    SinceConflict,
    /// No log file of the container (it never ran, or the name is not a container's)
    /// (kubelet: `validateContainerLogStatus`, 400).
    #[error("container {container:?} in pod {pod:?} is not available")]
    NotAvailable { pod: String, container: String },
    /// `previous=true` with no earlier instance (kubelet: `validateContainerLogStatus`, 400).
    #[error("previous terminated container {container:?} in pod {pod:?} not found")]
    NoPrevious { pod: String, container: String },
    /// A container name the pod does not have (the apiserver's validation, 400).
    #[error("container {container} is not valid for pod {pod}")]
    ContainerNotValid { pod: String, container: String },
    /// No container named, and the pod has more than one (the apiserver's rule, 400).
    #[error("a container name must be specified for pod {pod}, choose one of: [{choices}]")]
    ContainerNotChosen { pod: String, choices: String },
    #[error("failed to read log file {}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    /// The output side failed (the client went away mid-write).
    #[error("failed to write the log stream: {0}")]
    Write(io::Error),
}

impl LogError {
    /// The HTTP status the API answers with.
    pub(crate) fn status_code(&self) -> u16 {
        match self {
            LogError::BadParameter { .. } => 400,
            LogError::Invalid { .. } | LogError::SinceConflict => 422,
            // kubelet: `getContainerLogs` answers 400 for every `GetKubeletContainerLogs` error.
            LogError::NotAvailable { .. } | LogError::NoPrevious { .. } => 400,
            LogError::ContainerNotValid { .. } | LogError::ContainerNotChosen { .. } => 400,
            LogError::Io { .. } | LogError::Write(_) => 500,
        }
    }

    /// The `metav1.Status` reason that goes with [`LogError::status_code`].
    pub(crate) fn reason(&self) -> &'static str {
        match self.status_code() {
            400 => "BadRequest",
            422 => "Invalid",
            _ => "InternalError",
        }
    }

    fn io(path: &Path, source: io::Error) -> LogError {
        LogError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// The options of one `pods/log` request (kubelet: `v1.PodLogOptions` → `logs.LogOptions`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LogOptions {
    /// `container`; `None` when absent or empty (the caller picks the default container).
    pub container: Option<String>,
    pub follow: bool,
    pub previous: bool,
    pub timestamps: bool,
    /// `tailLines`: the last N lines of the file (each `P` fragment is a line, as the kubelet
    /// counts); `None` reads all.
    pub tail_lines: Option<u64>,
    /// `limitBytes`: stop after this many bytes of output.
    pub limit_bytes: Option<u64>,
    /// Lines stamped before this are skipped: `sinceTime`, or `now - sinceSeconds`.
    pub since: Option<UnixNanos>,
}

impl LogOptions {
    /// Parse a `pods/log` query from its decoded `key=value` pairs (the server's
    /// [`super::server::query_pairs`]). Unknown parameters are ignored (kubectl sends
    /// `pretty`, `insecureSkipTLSVerifyBackend`); a repeated one takes its first value.
    /// Booleans follow the apiserver's query conversion: absent, `false` or `0` (any case) is
    /// false, anything else — `follow`, `follow=`, `follow=yes` — is true (apimachinery:
    /// `Convert_Slice_string_To_bool`).
    pub(crate) fn from_pairs(
        pairs: &[(String, String)],
        now: UnixNanos,
    ) -> Result<LogOptions, LogError> {
        let mut params: BTreeMap<&str, &str> = BTreeMap::new();
        for (key, value) in pairs {
            if KNOWN.contains(&key.as_str()) && !params.contains_key(key.as_str()) {
                params.insert(key, value);
            }
        }

        let mut opts = LogOptions {
            container: params
                .get("container")
                .filter(|c| !c.is_empty())
                .map(|c| c.to_string()),
            follow: params.get("follow").is_some_and(|v| query_bool(v)),
            previous: params.get("previous").is_some_and(|v| query_bool(v)),
            timestamps: params.get("timestamps").is_some_and(|v| query_bool(v)),
            ..LogOptions::default()
        };
        // kubelet (server.go `getContainerLogs`): the legacy `tail` replaces `tailLines`, and
        // `tail=all` means no tail.
        let tail = match params.get("tail").copied() {
            Some("all") => None,
            Some(t) => Some(("tail", t)),
            None => params.get("tailLines").map(|t| ("tailLines", *t)),
        };
        let tail_lines = tail.map(|(p, v)| query_int(p, v)).transpose()?;
        let limit_bytes = params
            .get("limitBytes")
            .map(|v| query_int("limitBytes", v))
            .transpose()?;
        let since_seconds = params
            .get("sinceSeconds")
            .map(|v| query_int("sinceSeconds", v))
            .transpose()?;
        let since_time = match params.get("sinceTime").copied() {
            None | Some("") => None,
            Some(v) => Some(parse_timestamp(v).ok_or_else(|| LogError::BadParameter {
                param: "sinceTime".to_string(),
                value: v.to_string(),
                reason: "must be an RFC 3339 time",
            })?),
        };

        // kubelet: `ValidatePodLogOptions`, in its order.
        if let Some(t) = tail_lines {
            opts.tail_lines = Some(u64::try_from(t).map_err(|_| LogError::Invalid {
                field: "tailLines",
                value: t,
                reason: "must be greater than or equal to 0",
            })?);
        }
        if let Some(l) = limit_bytes {
            if l < 1 {
                return Err(LogError::Invalid {
                    field: "limitBytes",
                    value: l,
                    reason: "must be greater than 0",
                });
            }
            opts.limit_bytes = u64::try_from(l).ok();
        }
        opts.since = match (since_seconds, since_time) {
            (Some(_), Some(_)) => return Err(LogError::SinceConflict),
            (Some(s), None) if s < 1 => {
                return Err(LogError::Invalid {
                    field: "sinceSeconds",
                    value: s,
                    reason: "must be greater than 0",
                });
            }
            // kubelet: `NewLogOptions`, since = now - sinceSeconds.
            (Some(s), None) => Some(now.saturating_sub(s.saturating_mul(1_000_000_000))),
            (None, t) => t,
        };
        Ok(opts)
    }
}

const KNOWN: &[&str] = &[
    "container",
    "follow",
    "previous",
    "timestamps",
    "tail",
    "tailLines",
    "limitBytes",
    "sinceSeconds",
    "sinceTime",
];

fn query_bool(v: &str) -> bool {
    !(v == "0" || v.eq_ignore_ascii_case("false"))
}

fn query_int(param: &str, v: &str) -> Result<i64, LogError> {
    v.parse::<i64>().map_err(|_| LogError::BadParameter {
        param: param.to_string(),
        value: v.to_string(),
        reason: "must be an integer",
    })
}

/// One instance of a container: its log files, oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ContainerLog {
    /// The `N` of `<N>.log`: the restart count the instance was created with.
    pub restart_count: u32,
    /// Rotated files `<N>.log.<timestamp>`, oldest first (uncompressed ones only).
    pub rotated: Vec<PathBuf>,
    /// `<N>.log`; it may be missing for a moment while the log is rotated.
    pub live: PathBuf,
}

impl ContainerLog {
    /// Every file of the instance in reading order: rotated (oldest first), then the live one.
    pub(crate) fn files(&self) -> Vec<PathBuf> {
        let mut files = self.rotated.clone();
        files.push(self.live.clone());
        files
    }
}

/// A container's instances found in its log directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LogFiles {
    pub pod: String,
    pub container: String,
    /// By restart count, ascending.
    pub instances: Vec<ContainerLog>,
}

impl LogFiles {
    /// The newest instance: the highest `N`.
    pub(crate) fn current(&self) -> Option<&ContainerLog> {
        self.instances.last()
    }

    /// The instance before the newest one.
    pub(crate) fn previous(&self) -> Option<&ContainerLog> {
        self.instances.iter().rev().nth(1)
    }

    /// The instance a request reads (`previous` from [`LogOptions`]), or the error the kubelet
    /// gives when there is none.
    pub(crate) fn select(&self, previous: bool) -> Result<&ContainerLog, LogError> {
        let found = if previous {
            self.previous()
        } else {
            self.current()
        };
        found.ok_or_else(|| {
            let (pod, container) = (self.pod.clone(), self.container.clone());
            if previous {
                LogError::NoPrevious { pod, container }
            } else {
                LogError::NotAvailable { pod, container }
            }
        })
    }
}

/// The instances of `container` under a pod's log directory (`<pod-log-dir>/<ns>_<name>_<uid>`,
/// [`crate::kuberuntime::cri_config::pod_log_directory`]): the files `<container>/<N>.log` and
/// their rotated `<N>.log.<timestamp>` (kubelet: `buildContainerLogsPath`; rotated names from
/// `logs.ContainerLogManager`). `.gz` and `.tmp` files are skipped. A missing directory is no
/// instance, not an error; a container name that is not a single path component is
/// [`LogError::NotAvailable`].
pub(crate) fn log_files(pod_log_dir_for_pod: &Path, container: &str) -> Result<LogFiles, LogError> {
    // The directory is `<ns>_<name>_<uid>`; none of the three may contain `_`.
    let pod = pod_log_dir_for_pod
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.split('_').nth(1))
        .unwrap_or_default()
        .to_string();
    let mut files = LogFiles {
        pod,
        container: container.to_string(),
        instances: Vec::new(),
    };
    if container.is_empty()
        || container == "."
        || container == ".."
        || container.contains(['/', '\0'])
    {
        return Err(LogError::NotAvailable {
            pod: files.pod,
            container: files.container,
        });
    }
    let dir = pod_log_dir_for_pod.join(container);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(files),
        Err(e) => return Err(LogError::io(&dir, e)),
    };
    // N → (live seen, rotated names)
    let mut found: BTreeMap<u32, (bool, Vec<String>)> = BTreeMap::new();
    for entry in entries {
        let entry = entry.map_err(|e| LogError::io(&dir, e))?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        let Some((n, rest)) = name.split_once(".log") else {
            continue;
        };
        let Ok(n) = n.parse::<u32>() else {
            continue;
        };
        let slot = found.entry(n).or_default();
        if rest.is_empty() {
            slot.0 = true;
        } else if rest
            .strip_prefix('.')
            .is_some_and(|s| !s.is_empty() && !s.ends_with(".gz") && !s.ends_with(".tmp"))
        {
            slot.1.push(name);
        }
    }
    for (n, (live, mut rotated)) in found {
        if !live && rotated.is_empty() {
            continue;
        }
        // `YYYYMMDD-hhmmss` sorts by time.
        crate::sort::sort(&mut rotated);
        files.instances.push(ContainerLog {
            restart_count: n,
            rotated: rotated.into_iter().map(|r| dir.join(r)).collect(),
            live: dir.join(format!("{n}.log")),
        });
    }
    Ok(files)
}

/// The stream a CRI log line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
    Stdout,
    Stderr,
}

/// One parsed CRI log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CriLine<'a> {
    /// The timestamp as written (RFC 3339 with nanoseconds, any offset).
    pub timestamp: &'a str,
    pub time: UnixNanos,
    pub stream: Stream,
    /// Tag `P`: a fragment the next line continues.
    pub partial: bool,
    /// The content, without the line's newline.
    pub content: &'a [u8],
    /// Whether the output carries a newline after the content: a full line that had one.
    pub newline: bool,
}

/// Parse one record `<time> <stream> <tag> <content>\n` (kubelet: `parseCRILog`). The tag is
/// `P` or `F`, possibly with `:`-separated extensions (only the first counts, as upstream). A
/// record without a trailing newline (the last, incomplete one of a file) parses too. `None`
/// for a malformed record.
pub(crate) fn parse_cri_line(raw: &[u8]) -> Option<CriLine<'_>> {
    let (body, had_newline) = match raw.strip_suffix(b"\n") {
        Some(b) => (b, true),
        None => (raw, false),
    };
    let sp = body.iter().position(|&b| b == b' ')?;
    let timestamp = std::str::from_utf8(&body[..sp]).ok()?;
    let time = parse_timestamp(timestamp)?;
    let rest = &body[sp + 1..];
    let sp = rest.iter().position(|&b| b == b' ')?;
    let stream = match &rest[..sp] {
        b"stdout" => Stream::Stdout,
        b"stderr" => Stream::Stderr,
        _ => return None,
    };
    let rest = &rest[sp + 1..];
    // An empty content may come without the space after the tag.
    let (tag, content) = match rest.iter().position(|&b| b == b' ') {
        Some(sp) => (&rest[..sp], &rest[sp + 1..]),
        None => (rest, &b""[..]),
    };
    let partial = tag.split(|&b| b == b':').next() == Some(b"P");
    Some(CriLine {
        timestamp,
        time,
        stream,
        partial,
        content,
        newline: had_newline && !partial,
    })
}

/// An RFC 3339 time with any offset (`Z`, `+02:00`) → nanoseconds (kubelet:
/// `RFC3339NanoLenient`). The shape is checked so [`fixed_timestamp`] can rely on it.
fn parse_timestamp(s: &str) -> Option<UnixNanos> {
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't')
        || b[13] != b':'
        || b[16] != b':'
        || !b[..19]
            .iter()
            .enumerate()
            .all(|(i, c)| matches!(i, 4 | 7 | 10 | 13 | 16) || c.is_ascii_digit())
    {
        return None;
    }
    let s = if b[10] == b't' {
        format!("{}T{}", &s[..10], &s[11..])
    } else {
        s.to_string()
    };
    if s.ends_with(['Z', 'z']) {
        return parse_rfc3339(&format!("{}Z", &s[..s.len() - 1]));
    }
    // `±hh:mm`
    let at = s.len().checked_sub(6)?;
    if !s.is_char_boundary(at) {
        return None;
    }
    let (local, offset) = s.split_at(at);
    let ob = offset.as_bytes();
    let sign = match ob[0] {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    if ob[3] != b':' {
        return None;
    }
    let hh: i64 = offset.get(1..3)?.parse().ok()?;
    let mm: i64 = offset.get(4..6)?.parse().ok()?;
    if hh > 23 || mm > 59 {
        return None;
    }
    let t = parse_rfc3339(&format!("{local}Z"))?;
    t.checked_sub(sign * (hh * 3600 + mm * 60) * 1_000_000_000)
}

/// The timestamp as the kubelet prints it with `timestamps=true`: the line's own time with
/// exactly nine fraction digits, in its own offset (kubelet: `RFC3339NanoFixed`). `s` has
/// passed [`parse_timestamp`].
fn fixed_timestamp(s: &str, out: &mut Vec<u8>) {
    let (head, tail) = s.split_at(19);
    let (digits, zone) = match tail.strip_prefix('.') {
        Some(t) => t.split_at(t.bytes().take_while(u8::is_ascii_digit).count()),
        None => ("", tail),
    };
    out.extend_from_slice(head.as_bytes());
    out.push(b'.');
    let digits = &digits.as_bytes()[..digits.len().min(9)];
    out.extend_from_slice(digits);
    out.extend(std::iter::repeat_n(b'0', 9 - digits.len()));
    out.extend_from_slice(zone.as_bytes());
}

/// What one read did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ReadSummary {
    /// Bytes of output written.
    pub bytes: u64,
    /// Records skipped because they did not parse (or were longer than [`MAX_RECORD`]).
    pub malformed: u64,
    /// `limitBytes` was reached.
    pub limit_reached: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Continue,
    Stop,
}

/// Turns records into output: since, timestamps, limit.
#[derive(Debug)]
struct Sink {
    since: Option<UnixNanos>,
    timestamps: bool,
    remaining: Option<u64>,
    /// Nothing written yet, or the last thing written ended a line: a timestamp goes here.
    line_start: bool,
    summary: ReadSummary,
    scratch: Vec<u8>,
}

impl Sink {
    fn new(opts: &LogOptions) -> Sink {
        Sink {
            since: opts.since,
            timestamps: opts.timestamps,
            remaining: opts.limit_bytes,
            line_start: true,
            summary: ReadSummary::default(),
            scratch: Vec::new(),
        }
    }

    fn record<W: Write + ?Sized>(&mut self, raw: Option<&[u8]>, out: &mut W) -> io::Result<Flow> {
        let Some(line) = raw.and_then(parse_cri_line) else {
            // kubelet: "Failed when parsing line in log file" — skipped, reading goes on.
            self.summary.malformed += 1;
            return Ok(Flow::Continue);
        };
        if self.since.is_some_and(|s| line.time < s) {
            return Ok(Flow::Continue);
        }
        self.scratch.clear();
        // The kubelet prefixes every fragment, which puts timestamps in the middle of a
        // joined line; here only the line's first fragment carries one.
        if self.timestamps && self.line_start {
            fixed_timestamp(line.timestamp, &mut self.scratch);
            self.scratch.push(b' ');
        }
        self.scratch.extend_from_slice(line.content);
        if line.newline {
            self.scratch.push(b'\n');
        }
        self.line_start = !line.partial;
        let mut n = self.scratch.len();
        if let Some(r) = self.remaining {
            // kubelet: `logWriter.write` cuts the line at the remaining bytes.
            n = n.min(usize::try_from(r).unwrap_or(usize::MAX));
        }
        out.write_all(&self.scratch[..n])?;
        self.summary.bytes += n as u64;
        if let Some(r) = &mut self.remaining {
            *r -= n as u64;
            if *r == 0 {
                self.summary.limit_reached = true;
                return Ok(Flow::Stop);
            }
        }
        Ok(Flow::Continue)
    }
}

/// Splits a byte stream into newline-terminated records, keeping at most [`MAX_RECORD`] of an
/// unfinished one.
#[derive(Debug, Default)]
struct Records {
    pending: Vec<u8>,
    /// The current record outgrew [`MAX_RECORD`]: drop bytes up to its newline.
    oversized: bool,
}

impl Records {
    /// Calls `f` with each record completed by `chunk` (`None`: one too long to keep).
    fn feed(
        &mut self,
        mut chunk: &[u8],
        mut f: impl FnMut(Option<&[u8]>) -> io::Result<Flow>,
    ) -> io::Result<Flow> {
        while let Some(i) = chunk.iter().position(|&b| b == b'\n') {
            let (rec, rest) = chunk.split_at(i + 1);
            chunk = rest;
            let flow = if self.oversized {
                self.oversized = false;
                f(None)?
            } else if self.pending.is_empty() {
                f(Some(rec))?
            } else if self.pending.len() + rec.len() > MAX_RECORD {
                self.pending.clear();
                f(None)?
            } else {
                let mut whole = std::mem::take(&mut self.pending);
                whole.extend_from_slice(rec);
                let flow = f(Some(&whole));
                whole.clear();
                self.pending = whole;
                flow?
            };
            if flow == Flow::Stop {
                return Ok(Flow::Stop);
            }
        }
        if !self.oversized && !chunk.is_empty() {
            if self.pending.len() + chunk.len() > MAX_RECORD {
                self.pending = Vec::new();
                self.oversized = true;
            } else {
                self.pending.extend_from_slice(chunk);
            }
        }
        Ok(Flow::Continue)
    }

    /// The end of a file: an unfinished record is a record (kubelet: "Incomplete line in log
    /// file" is still written).
    fn finish(&mut self, mut f: impl FnMut(Option<&[u8]>) -> io::Result<Flow>) -> io::Result<Flow> {
        if std::mem::take(&mut self.oversized) {
            return f(None);
        }
        if self.pending.is_empty() {
            return Ok(Flow::Continue);
        }
        let whole = std::mem::take(&mut self.pending);
        f(Some(&whole))
    }

    fn reset(&mut self) {
        self.pending.clear();
        self.oversized = false;
    }
}

/// Records → sink: the state a read carries from chunk to chunk (and from the existing content
/// into a follow).
#[derive(Debug)]
struct Pipeline {
    records: Records,
    sink: Sink,
}

impl Pipeline {
    fn new(opts: &LogOptions) -> Pipeline {
        Pipeline {
            records: Records::default(),
            sink: Sink::new(opts),
        }
    }

    fn feed<W: Write + ?Sized>(&mut self, chunk: &[u8], out: &mut W) -> io::Result<Flow> {
        let sink = &mut self.sink;
        self.records.feed(chunk, |r| sink.record(r, out))
    }

    fn finish<W: Write + ?Sized>(&mut self, out: &mut W) -> io::Result<Flow> {
        let sink = &mut self.sink;
        self.records.finish(|r| sink.record(r, out))
    }
}

struct Opened {
    path: PathBuf,
    file: File,
    /// The size when opened: a one-shot read stops here even if the file grows.
    size: u64,
}

/// Open the files that exist (one rotated away between listing and opening is skipped).
fn open_all(files: &[PathBuf]) -> Result<Vec<Opened>, LogError> {
    let mut opened = Vec::with_capacity(files.len());
    for path in files {
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(LogError::io(path, e)),
        };
        let size = file.metadata().map_err(|e| LogError::io(path, e))?.len();
        opened.push(Opened {
            path: path.clone(),
            file,
            size,
        });
    }
    Ok(opened)
}

/// The offset where the last `n` records of `f[..end]` start, or how many records there are
/// when fewer (kubelet: `tail.FindTailLineStartIndex`, blocks read backwards from the end).
/// A last record without a newline counts as one.
fn tail_start_in(f: &File, end: u64, n: u64) -> io::Result<Result<u64, u64>> {
    if n == 0 {
        return Ok(Ok(end));
    }
    if end == 0 {
        return Ok(Err(0));
    }
    let mut buf = vec![0u8; TAIL_BLOCK];
    let mut starts = 0u64;
    let mut pos = end;
    let mut last_block = true;
    while pos > 0 {
        let left = pos.saturating_sub(TAIL_BLOCK as u64);
        let len = (pos - left) as usize;
        f.read_exact_at(&mut buf[..len], left)?;
        let mut block = &buf[..len];
        if std::mem::take(&mut last_block) && block.last() == Some(&b'\n') {
            // The last record's own newline.
            block = &block[..len - 1];
        }
        for (i, &b) in block.iter().enumerate().rev() {
            if b == b'\n' {
                starts += 1;
                if starts == n {
                    return Ok(Ok(left + i as u64 + 1));
                }
            }
        }
        pos = left;
    }
    // The first record starts at 0.
    starts += 1;
    Ok(if starts == n { Ok(0) } else { Err(starts) })
}

/// The end of the last complete (newline-terminated) record of `f[..size]`.
fn complete_end(f: &File, size: u64) -> io::Result<u64> {
    let mut buf = vec![0u8; TAIL_BLOCK];
    let mut pos = size;
    while pos > 0 {
        let left = pos.saturating_sub(TAIL_BLOCK as u64);
        let len = (pos - left) as usize;
        f.read_exact_at(&mut buf[..len], left)?;
        if let Some(i) = buf[..len].iter().rposition(|&b| b == b'\n') {
            return Ok(left + i as u64 + 1);
        }
        pos = left;
    }
    Ok(0)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// A one-shot read: up to the sizes seen at open.
    Snapshot,
    /// The existing content of a follow: the live file's unfinished record stays pending.
    Follow,
}

/// Read the existing content of `opened` (oldest first, the live file last) through `pipe`.
fn read_existing<W: Write + ?Sized>(
    opened: &[Opened],
    opts: &LogOptions,
    mode: Mode,
    pipe: &mut Pipeline,
    out: &mut W,
) -> Result<Flow, LogError> {
    let Some(last) = opened.len().checked_sub(1) else {
        return Ok(Flow::Continue);
    };
    // The live file counts complete lines only (kubelet: "if the last line is incomplete
    // (no end-of-line), it will not be counted as one line").
    let last_end = {
        let o = &opened[last];
        complete_end(&o.file, o.size).map_err(|e| LogError::io(&o.path, e))?
    };
    let (first, mut offset) = match opts.tail_lines {
        None => (0, 0),
        Some(0) if mode == Mode::Snapshot => return Ok(Flow::Continue),
        Some(n) => {
            let mut need = n;
            let mut start = (0, 0);
            for (i, o) in opened.iter().enumerate().rev() {
                let end = if i == last { last_end } else { o.size };
                match tail_start_in(&o.file, end, need).map_err(|e| LogError::io(&o.path, e))? {
                    Ok(at) => {
                        start = (i, at);
                        break;
                    }
                    Err(count) => need -= count,
                }
            }
            start
        }
    };
    let mut buf = vec![0u8; READ_CHUNK];
    for (i, o) in opened.iter().enumerate().skip(first) {
        // A one-shot tail stops at the last complete line, as the kubelet's `limitedNum` does.
        let end = if i == last && mode == Mode::Snapshot && opts.tail_lines.is_some() {
            last_end
        } else {
            o.size
        };
        while offset < end {
            let want = usize::try_from(end - offset).map_or(READ_CHUNK, |w| w.min(READ_CHUNK));
            let n = o
                .file
                .read_at(&mut buf[..want], offset)
                .map_err(|e| LogError::io(&o.path, e))?;
            if n == 0 {
                break;
            }
            offset += n as u64;
            if pipe.feed(&buf[..n], out).map_err(LogError::Write)? == Flow::Stop {
                return Ok(Flow::Stop);
            }
        }
        offset = 0;
        let keep_pending = i == last && (mode == Mode::Follow || opts.tail_lines.is_some());
        if !keep_pending && pipe.finish(out).map_err(LogError::Write)? == Flow::Stop {
            return Ok(Flow::Stop);
        }
    }
    Ok(Flow::Continue)
}

/// Write the log of one instance (its [`ContainerLog::files`], oldest first) as `pods/log`
/// answers it without `follow` (kubelet: `ReadLogs`). Files are read up to their size when
/// opened, in bounded chunks; missing files are skipped. Blocking file I/O: call it from
/// `spawn_blocking`, or use [`follow`] with `follow: false`.
#[cfg(test)]
pub(crate) fn read_logs(
    files: &[PathBuf],
    opts: &LogOptions,
    out: &mut impl Write,
) -> Result<ReadSummary, LogError> {
    let opened = open_all(files)?;
    let mut pipe = Pipeline::new(opts);
    read_existing(&opened, opts, Mode::Snapshot, &mut pipe, out)?;
    out.flush().map_err(LogError::Write)?;
    warn_malformed(files, &pipe.sink.summary);
    Ok(pipe.sink.summary)
}

fn warn_malformed(files: &[PathBuf], summary: &ReadSummary) {
    match files.last() {
        Some(live) if summary.malformed > 0 => log::warn!(
            "{}: skipped {} malformed log lines",
            live.display(),
            summary.malformed
        ),
        _ => {}
    }
}

/// A `Write` into the response channel, for the blocking pool.
struct ChannelWriter {
    tx: mpsc::Sender<Bytes>,
    buf: Vec<u8>,
}

impl ChannelWriter {
    fn send(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::take(&mut self.buf));
        self.tx
            .blocking_send(chunk)
            .map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))
    }
}

impl Write for ChannelWriter {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(b);
        if self.buf.len() >= SEND_CHUNK {
            self.send()?;
        }
        Ok(b.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send()
    }
}

/// The live file a follow reads.
struct Tracked {
    file: File,
    pos: u64,
    dev: u64,
    ino: u64,
}

impl Tracked {
    fn new(file: File, pos: u64, path: &Path) -> Result<Tracked, LogError> {
        let m = file.metadata().map_err(|e| LogError::io(path, e))?;
        Ok(Tracked {
            file,
            pos,
            dev: m.dev(),
            ino: m.ino(),
        })
    }
}

enum LiveFile {
    Same,
    /// A new file at the path (rotation: the old one was renamed, the runtime reopened).
    Replaced,
    /// The same file, shorter than what was read (truncated in place).
    Truncated,
}

fn check_live(path: &Path, t: &Tracked) -> Result<LiveFile, LogError> {
    match std::fs::metadata(path) {
        Ok(m) if m.dev() != t.dev || m.ino() != t.ino => Ok(LiveFile::Replaced),
        Ok(m) if m.len() < t.pos => Ok(LiveFile::Truncated),
        Ok(_) => Ok(LiveFile::Same),
        // Renamed away and not yet reopened: keep reading the old one.
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(LiveFile::Same),
        Err(e) => Err(LogError::io(path, e)),
    }
}

fn open_live(path: &Path) -> Result<Option<Tracked>, LogError> {
    match File::open(path) {
        Ok(f) => Tracked::new(f, 0, path).map(Some),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(LogError::io(path, e)),
    }
}

/// Stream the log of one instance into `tx` (kubelet: `ReadLogs` with `follow`): the existing
/// content (read on the blocking pool), then, when `opts.follow`, every line appended to the
/// live file, polled every [`FOLLOW_POLL`] with bounded small reads. A rotation (a new file at
/// the live path) is followed: the old file is read to its end, then the new one from its
/// start; a truncation starts over at 0.
///
/// `stopped` says the container is no longer running (`true`); dropping its sender counts as
/// stopped. The follow ends once the container is stopped and the file has been read to its
/// end after that (kubelet: `waitLogs` → `isContainerRunning`), when `limitBytes` is reached,
/// or when the receiver is dropped (the client went away) — that is `Ok` too. Without
/// `opts.follow` it ends after the existing content, whatever `stopped` says.
///
/// Errors are file errors; the caller has already answered 200 by then and can only end the
/// stream. The future is `Send`: spawn it, and stream the receiver as the response body.
pub(crate) async fn follow(
    log: ContainerLog,
    opts: LogOptions,
    stopped: watch::Receiver<bool>,
    tx: mpsc::Sender<Bytes>,
) -> Result<ReadSummary, LogError> {
    let live_path = log.live.clone();
    let files = log.files();
    let mode = if opts.follow {
        Mode::Follow
    } else {
        Mode::Snapshot
    };
    // Step 1: what the files hold now, on the blocking pool.
    let existing = {
        let (opts, tx, live_path) = (opts.clone(), tx.clone(), live_path.clone());
        tokio::task::spawn_blocking(move || existing_content(&files, &opts, mode, tx, &live_path))
            .await
    };
    let (mut pipe, live, flow) =
        existing.map_err(|e| LogError::io(&live_path, io::Error::other(e.to_string())))??;
    // Step 2: what is appended to the live file, until the container stops.
    if mode == Mode::Follow && flow != Flow::Stop && !tx.is_closed() {
        follow_live(&live_path, live, &mut pipe, stopped, &tx).await?;
    }
    warn_malformed(&[live_path], &pipe.sink.summary);
    Ok(pipe.sink.summary)
}

/// Step 1 of [`follow`] (blocking): the instance's files as they are, through the pipeline
/// into `tx`; the pipeline, the live file where the read stopped (when it is the last file)
/// and whether to go on. A client gone away is [`Flow::Stop`], not an error.
fn existing_content(
    files: &[PathBuf],
    opts: &LogOptions,
    mode: Mode,
    tx: mpsc::Sender<Bytes>,
    live_path: &Path,
) -> Result<(Pipeline, Option<Tracked>, Flow), LogError> {
    let opened = open_all(files)?;
    let mut pipe = Pipeline::new(opts);
    let mut out = ChannelWriter {
        tx,
        buf: Vec::new(),
    };
    let live_is_last = opened.last().is_some_and(|o| o.path == live_path);
    let flow = match read_existing(&opened, opts, mode, &mut pipe, &mut out)
        .and_then(|flow| match flow {
            // The live file is not there yet: what the last rotated file left
            // unfinished is not continued by it.
            Flow::Continue if !live_is_last => pipe.finish(&mut out).map_err(LogError::Write),
            flow => Ok(flow),
        })
        .and_then(|flow| out.flush().map(|()| flow).map_err(LogError::Write))
    {
        Ok(flow) => flow,
        // The client went away.
        Err(LogError::Write(_)) => Flow::Stop,
        Err(e) => return Err(e),
    };
    let live = match opened.into_iter().last() {
        Some(o) if live_is_last => Some(Tracked::new(o.file, o.size, &o.path)?),
        _ => None,
    };
    Ok((pipe, live, flow))
}

/// Sends what the pipeline wrote, if anything; `false` when the client went away.
async fn send_out(tx: &mpsc::Sender<Bytes>, out: &mut Vec<u8>) -> bool {
    out.is_empty() || tx.send(Bytes::from(std::mem::take(out))).await.is_ok()
}

/// The next bytes of the live file (none while there is no live file), from where the
/// last read ended.
fn read_more(live: Option<&mut Tracked>, buf: &mut [u8], path: &Path) -> Result<usize, LogError> {
    let Some(t) = live else {
        return Ok(0);
    };
    let n = t
        .file
        .read_at(buf, t.pos)
        .map_err(|e| LogError::io(path, e))?;
    t.pos += n as u64;
    Ok(n)
}

/// Step 2 of [`follow`]: reads what is appended to the live file in bounded chunks, follows
/// a rotation (the old file to its end, then the new one) and a truncation (from 0), and
/// once `stopped` says so reads to the end once more and returns.
async fn follow_live(
    live_path: &Path,
    mut live: Option<Tracked>,
    pipe: &mut Pipeline,
    mut stopped: watch::Receiver<bool>,
    tx: &mpsc::Sender<Bytes>,
) -> Result<(), LogError> {
    let mut buf = vec![0u8; READ_CHUNK];
    let mut out = Vec::new();
    // Stopped was seen: one more read to the end, then done.
    let mut draining = false;
    // A new file is at the live path: read the old one to its end, then switch.
    let mut replaced = false;
    loop {
        let n = read_more(live.as_mut(), &mut buf, live_path)?;
        if n > 0 {
            let flow = pipe.feed(&buf[..n], &mut out).map_err(LogError::Write)?;
            if !send_out(tx, &mut out).await || flow == Flow::Stop {
                return Ok(());
            }
            // Bounded reads: let the other tasks run between chunks.
            tokio::task::yield_now().await;
            continue;
        }
        // At the end of what is there.
        match &live {
            None => {
                live = open_live(live_path)?;
                if live.is_some() {
                    continue;
                }
            }
            Some(_) if replaced => {
                replaced = false;
                let flow = pipe.finish(&mut out).map_err(LogError::Write)?;
                if !send_out(tx, &mut out).await || flow == Flow::Stop {
                    return Ok(());
                }
                live = open_live(live_path)?;
                continue;
            }
            Some(t) => match check_live(live_path, t)? {
                LiveFile::Replaced => {
                    replaced = true;
                    continue;
                }
                LiveFile::Truncated => {
                    if let Some(t) = &mut live {
                        t.pos = 0;
                    }
                    pipe.records.reset();
                    continue;
                }
                LiveFile::Same => {}
            },
        }
        if draining {
            return Ok(());
        }
        // Container stopped --(read to the end once more)--> done.
        if *stopped.borrow_and_update() {
            draining = true;
            continue;
        }
        tokio::select! {
            () = tokio::time::sleep(FOLLOW_POLL) => {}
            changed = stopped.changed() => {
                if changed.is_err() {
                    // Nobody can say any more whether it runs.
                    draining = true;
                }
            }
            () = tx.closed() => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: &str = "2016-10-06T00:17:09.669794202Z";

    fn opts() -> LogOptions {
        LogOptions::default()
    }

    fn read(files: &[PathBuf], o: &LogOptions) -> (String, ReadSummary) {
        let mut out = Vec::new();
        let s = read_logs(files, o, &mut out).unwrap();
        (String::from_utf8(out).unwrap(), s)
    }

    fn write_file(path: &Path, content: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    fn append(path: &Path, content: &str) {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .unwrap();
        f.write_all(content.as_bytes()).unwrap();
    }

    /// `n` full lines `line <i>` one second apart from T0's second.
    fn lines(from: usize, n: usize) -> String {
        (from..from + n)
            .map(|i| format!("2016-10-06T00:17:{:02}.5Z stdout F line {i}\n", i % 60))
            .collect()
    }

    /// An owned view of a parsed line: (stream, partial, newline, content).
    fn p(line: &str) -> Option<(Stream, bool, bool, String)> {
        let l = parse_cri_line(line.as_bytes())?;
        let content = String::from_utf8(l.content.to_vec()).unwrap();
        Some((l.stream, l.partial, l.newline, content))
    }

    #[test]
    fn parses_cri_lines() {
        let raw = format!("{T0} stdout F hello world\n");
        let l = parse_cri_line(raw.as_bytes()).unwrap();
        assert_eq!(l.timestamp, T0);
        assert_eq!(l.time, parse_rfc3339(T0).unwrap());
        let yes = |s: &str| (Stream::Stdout, false, true, s.to_string());
        assert_eq!(p(&raw), Some(yes("hello world")));
        assert_eq!(
            p(&format!("{T0} stderr P part\n")),
            Some((Stream::Stderr, true, false, "part".into()))
        );
        // Extended tags, empty content with and without the space, no trailing newline.
        assert_eq!(p(&format!("{T0} stdout F:x y\n")), Some(yes("y")));
        assert!(p(&format!("{T0} stdout P:x y\n")).unwrap().1);
        assert_eq!(p(&format!("{T0} stdout F \n")), Some(yes("")));
        assert_eq!(p(&format!("{T0} stdout F\n")), Some(yes("")));
        assert_eq!(
            p(&format!("{T0} stdout F tail")),
            Some((Stream::Stdout, false, false, "tail".into()))
        );
        // Content keeps its own spaces.
        assert_eq!(
            p(&format!("{T0} stdout F  two  spaces \n")),
            Some(yes(" two  spaces "))
        );

        // Offsets.
        let l = parse_cri_line(b"2016-10-06T02:17:09.669794202+02:00 stdout F x\n").unwrap();
        assert_eq!(l.time, parse_rfc3339(T0).unwrap());

        for bad in [
            "".to_string(),
            "\n".to_string(),
            "garbage\n".to_string(),
            format!("{T0}\n"),
            format!("{T0} stdin F x\n"),
            format!("{T0} stdout\n"),
            "2016-10-06 00:17:09Z stdout F x\n".to_string(),
            "2016-13-06T00:17:09Z stdout F x\n".to_string(),
            "2016-10-06T00:17:09+2:00 stdout F x\n".to_string(),
            "\u{e9}\u{e9}\u{e9}\u{e9}-10-06T00:17:09Z stdout F x\n".to_string(),
        ] {
            assert_eq!(parse_cri_line(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(parse_cri_line(b"\xff\xfe stdout F x\n"), None);
    }

    #[test]
    fn fixed_timestamps_have_nine_digits_and_keep_the_offset() {
        let f = |s: &str| {
            let mut v = Vec::new();
            fixed_timestamp(s, &mut v);
            String::from_utf8(v).unwrap()
        };
        assert_eq!(f(T0), T0);
        assert_eq!(
            f("2016-10-06T00:17:09.5Z"),
            "2016-10-06T00:17:09.500000000Z"
        );
        assert_eq!(f("2016-10-06T00:17:09Z"), "2016-10-06T00:17:09.000000000Z");
        assert_eq!(
            f("2016-10-06T02:17:09.1+02:00"),
            "2016-10-06T02:17:09.100000000+02:00"
        );
    }

    #[test]
    fn query_parsing() {
        let now = 1_000_000_000_000_000_000;
        let from_query = |q: &str, now: UnixNanos| {
            LogOptions::from_pairs(&crate::local_api::server::query_pairs(q), now)
        };
        let o = from_query(
            "container=web&follow=true&previous=1&timestamps&tailLines=10&limitBytes=500\
             &pretty=true&insecureSkipTLSVerifyBackend=true&sinceSeconds=60",
            now,
        )
        .unwrap();
        assert_eq!(
            o,
            LogOptions {
                container: Some("web".into()),
                follow: true,
                previous: true,
                timestamps: true,
                tail_lines: Some(10),
                limit_bytes: Some(500),
                since: Some(now - 60_000_000_000),
            }
        );
        assert_eq!(from_query("", now).unwrap(), LogOptions::default());
        // Booleans as the apiserver converts them; first value wins.
        let o = from_query("follow=FALSE&previous=0&timestamps=no", now).unwrap();
        assert!(!o.follow && !o.previous && o.timestamps);
        let o = from_query("follow=false&follow=true&container=", now).unwrap();
        assert!(!o.follow && o.container.is_none());
        // Percent-decoding.
        let o = from_query("sinceTime=2016-10-06T00%3A17%3A09Z&contai%6Eer=a+b", now).unwrap();
        assert_eq!(o.since, parse_rfc3339("2016-10-06T00:17:09Z"));
        assert_eq!(o.container.as_deref(), Some("a b"));
        let o = from_query("sinceTime=2016-10-06T02:17:09%2B02:00", now).unwrap();
        assert_eq!(o.since, parse_rfc3339("2016-10-06T00:17:09Z"));
        // Legacy `tail`.
        assert_eq!(
            from_query("tailLines=3&tail=5", now).unwrap().tail_lines,
            Some(5)
        );
        assert_eq!(
            from_query("tailLines=3&tail=all", now).unwrap().tail_lines,
            None
        );
        // Unknown parameters, even undecodable ones, are ignored.
        assert!(from_query("%zz=1&x=%zz", now).is_ok());

        let err = |q: &str| from_query(q, now).unwrap_err();
        let e = err("tailLines=-1");
        assert_eq!(
            e.to_string(),
            "tailLines: Invalid value: -1: must be greater than or equal to 0"
        );
        assert_eq!((e.status_code(), e.reason()), (422, "Invalid"));
        let e = err("sinceSeconds=10&sinceTime=2016-10-06T00:17:09Z");
        assert_eq!(
            e.to_string(),
            "at most one of `sinceTime` or `sinceSeconds` may be specified"
        );
        assert_eq!(e.status_code(), 422);
        assert_eq!(
            err("limitBytes=0").to_string(),
            "limitBytes: Invalid value: 0: must be greater than 0"
        );
        assert_eq!(
            err("sinceSeconds=0").to_string(),
            "sinceSeconds: Invalid value: 0: must be greater than 0"
        );
        let e = err("tailLines=ten");
        assert_eq!(
            e.to_string(),
            r#"tailLines: Invalid value: "ten": must be an integer"#
        );
        assert_eq!((e.status_code(), e.reason()), (400, "BadRequest"));
        assert!(
            err("sinceTime=yesterday")
                .to_string()
                .starts_with("sinceTime:")
        );
        // A bad escape is kept as written (the server's lenient decoding): no such
        // container then, or no such time.
        let o = from_query("container=%zz", now).unwrap();
        assert_eq!(o.container.as_deref(), Some("%zz"));
        assert_eq!(err("sinceTime=%E9").status_code(), 400);
    }

    #[test]
    fn finds_instances_and_previous() {
        let dir = tempfile::tempdir().unwrap();
        let pod = dir.path().join("default_x_0123abcd");
        let c = pod.join("web");
        for name in [
            "0.log",
            "1.log",
            "1.log.20261201-100000",
            "1.log.20261201-090000",
            "1.log.20261201-080000.gz",
            "1.log.20261201-110000.tmp",
            "2.log.20261201-120000",
            "notes.txt",
            "x.log",
        ] {
            write_file(&c.join(name), "");
        }
        let files = log_files(&pod, "web").unwrap();
        assert_eq!(files.pod, "x");
        let ns: Vec<u32> = files.instances.iter().map(|i| i.restart_count).collect();
        assert_eq!(ns, [0, 1, 2]);
        // 2 has only a rotated file (rotation in progress): still the current instance.
        let cur = files.select(false).unwrap();
        assert_eq!(cur.restart_count, 2);
        assert_eq!(cur.live, c.join("2.log"));
        let prev = files.select(true).unwrap();
        assert_eq!(
            prev.files(),
            [
                c.join("1.log.20261201-090000"),
                c.join("1.log.20261201-100000"),
                c.join("1.log")
            ]
        );

        // One instance: no previous.
        write_file(&pod.join("db/0.log"), "");
        let files = log_files(&pod, "db").unwrap();
        assert_eq!(files.select(false).unwrap().restart_count, 0);
        let e = files.select(true).unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"previous terminated container "db" in pod "x" not found"#
        );
        assert_eq!(e.status_code(), 400);

        // No directory: no instance.
        let files = log_files(&pod, "never").unwrap();
        assert!(files.instances.is_empty());
        assert_eq!(
            files.select(false).unwrap_err().to_string(),
            r#"container "never" in pod "x" is not available"#
        );
        for bad in ["", ".", "..", "../x", "a/b"] {
            assert!(matches!(
                log_files(&pod, bad),
                Err(LogError::NotAvailable { .. })
            ));
        }
    }

    #[test]
    fn joins_partial_lines_and_skips_malformed() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("0.log");
        write_file(
            &f,
            &format!(
                "{T0} stdout P hel\n{T0} stdout P lo \ngarbage\n{T0} stdout F world\n\
                 {T0} stderr F err\n{T0} bogus F x\n{T0} stdout F last-incomplete"
            ),
        );
        let (out, s) = read(std::slice::from_ref(&f), &opts());
        assert_eq!(out, "hello world\nerr\nlast-incomplete");
        assert_eq!(s.malformed, 2);
        assert_eq!(s.bytes, out.len() as u64);

        // Timestamps: once per joined line, nine digits.
        let o = LogOptions {
            timestamps: true,
            ..opts()
        };
        let (out, _) = read(&[f], &o);
        assert_eq!(
            out,
            format!("{T0} hello world\n{T0} err\n{T0} last-incomplete")
        );
    }

    #[test]
    fn garbage_never_panics() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("0.log");
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut junk = Vec::new();
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            match x % 7 {
                0 => junk.push(b'\n'),
                1 => junk.extend_from_slice(format!("{T0} stdout P ").as_bytes()),
                2 => junk.extend_from_slice(format!("{T0} stderr F ").as_bytes()),
                3 => junk.push(b' '),
                _ => junk.push((x >> 32) as u8),
            }
        }
        std::fs::write(&f, &junk).unwrap();
        for o in [
            opts(),
            LogOptions {
                tail_lines: Some(50),
                timestamps: true,
                ..opts()
            },
            LogOptions {
                limit_bytes: Some(1000),
                since: Some(1),
                ..opts()
            },
        ] {
            let mut out = Vec::new();
            let s = read_logs(std::slice::from_ref(&f), &o, &mut out).unwrap();
            assert_eq!(s.bytes, out.len() as u64);
        }
    }

    #[test]
    fn oversized_records_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("0.log");
        let big = "x".repeat(MAX_RECORD + 10);
        write_file(
            &f,
            &format!("{T0} stdout F a\n{T0} stdout F {big}\n{T0} stdout F b\n"),
        );
        let (out, s) = read(&[f], &opts());
        assert_eq!(out, "a\nb\n");
        assert_eq!(s.malformed, 1);
    }

    #[test]
    fn tail_across_blocks_of_a_big_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("0.log");
        write_file(&f, &lines(0, 100_000));
        let files = [f.clone()];
        let tail = |n| LogOptions {
            tail_lines: Some(n),
            ..opts()
        };
        assert_eq!(read(&files, &tail(2)).0, "line 99998\nline 99999\n");
        assert_eq!(read(&files, &tail(0)).0, "");
        // A count whose start falls in an earlier block.
        let out = read(&files, &tail(1000)).0;
        assert_eq!(out.lines().count(), 1000);
        assert!(out.starts_with("line 99000\n"));

        // More lines than the file has; an incomplete last line is not counted nor written.
        let g = dir.path().join("1.log");
        write_file(&g, &format!("{}{T0} stdout F half", lines(0, 3)));
        assert_eq!(
            read(std::slice::from_ref(&g), &tail(10)).0,
            "line 0\nline 1\nline 2\n"
        );
        assert_eq!(read(std::slice::from_ref(&g), &tail(1)).0, "line 2\n");
        // Without tail the incomplete line is written.
        assert!(read(&[g], &opts()).0.ends_with("line 2\nhalf"));
        // Empty and missing files.
        let e = dir.path().join("2.log");
        write_file(&e, "");
        assert_eq!(read(&[e, dir.path().join("none.log")], &tail(3)).0, "");
    }

    #[test]
    fn tail_counts_fragments_as_lines() {
        // kubelet: each `P` record is a line of the file.
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("0.log");
        write_file(
            &f,
            &format!("{T0} stdout F one\n{T0} stdout P tw\n{T0} stdout F o\n"),
        );
        let tail = |n| LogOptions {
            tail_lines: Some(n),
            ..opts()
        };
        assert_eq!(read(std::slice::from_ref(&f), &tail(2)).0, "two\n");
        assert_eq!(read(&[f], &tail(1)).0, "o\n");
    }

    #[test]
    fn rotated_files_are_read_oldest_first_and_tail_spans_them() {
        let dir = tempfile::tempdir().unwrap();
        let r1 = dir.path().join("0.log.20261201-090000");
        let r2 = dir.path().join("0.log.20261201-100000");
        let live = dir.path().join("0.log");
        write_file(&r1, &lines(0, 3));
        write_file(&r2, &lines(3, 3));
        write_file(&live, &lines(6, 2));
        let files = [r1, r2, live];
        let (out, _) = read(&files, &opts());
        assert_eq!(out.lines().count(), 8);
        assert!(out.starts_with("line 0\n") && out.ends_with("line 7\n"));
        let o = LogOptions {
            tail_lines: Some(4),
            ..opts()
        };
        assert_eq!(read(&files, &o).0, "line 4\nline 5\nline 6\nline 7\n");
    }

    #[test]
    fn since_time_and_limit_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("0.log");
        write_file(&f, &lines(0, 10));
        let since = parse_rfc3339("2016-10-06T00:17:07Z");
        let o = LogOptions { since, ..opts() };
        assert_eq!(
            read(std::slice::from_ref(&f), &o).0,
            "line 7\nline 8\nline 9\n"
        );
        // tail first, then since (kubelet order).
        let o = LogOptions {
            since,
            tail_lines: Some(5),
            ..opts()
        };
        assert_eq!(
            read(std::slice::from_ref(&f), &o).0,
            "line 7\nline 8\nline 9\n"
        );

        let o = LogOptions {
            limit_bytes: Some(10),
            ..opts()
        };
        let (out, s) = read(std::slice::from_ref(&f), &o);
        assert_eq!(out, "line 0\nlin");
        assert!(s.limit_reached);
        // The prefix counts.
        let o = LogOptions {
            limit_bytes: Some(35),
            timestamps: true,
            ..opts()
        };
        assert_eq!(read(&[f], &o).0, "2016-10-06T00:17:00.500000000Z line");
    }

    /// The next chunk, or `None` at the end; a follow that hangs fails the test after a
    /// minute of virtual time instead of hanging it.
    async fn next(rx: &mut mpsc::Receiver<Bytes>) -> Option<String> {
        let chunk = tokio::time::timeout(Duration::from_secs(60), rx.recv())
            .await
            .expect("no chunk and no end within 60 s");
        chunk.map(|c| String::from_utf8(c.to_vec()).unwrap())
    }

    async fn recv_until(rx: &mut mpsc::Receiver<Bytes>, acc: &mut String, want: &str) {
        while !acc.contains(want) {
            let chunk = next(rx)
                .await
                .expect("stream ended before the line arrived");
            acc.push_str(&chunk);
        }
    }

    async fn recv_all(rx: &mut mpsc::Receiver<Bytes>, acc: &mut String) {
        while let Some(chunk) = next(rx).await {
            acc.push_str(&chunk);
        }
    }

    fn instance(dir: &Path) -> ContainerLog {
        log_files(dir, "web")
            .unwrap()
            .select(false)
            .unwrap()
            .clone()
    }

    #[tokio::test(start_paused = true)]
    async fn follow_streams_appended_lines_until_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let pod = dir.path().join("default_x_uid");
        let live = pod.join("web/0.log");
        write_file(&live, &format!("{}{T0} stdout F par", lines(0, 2)));
        let (stop_tx, stop_rx) = watch::channel(false);
        let (tx, mut rx) = mpsc::channel(4);
        let o = LogOptions {
            follow: true,
            ..opts()
        };
        let task = tokio::spawn(follow(instance(&pod), o, stop_rx, tx));

        let mut acc = String::new();
        recv_until(&mut rx, &mut acc, "line 1\n").await;
        assert_eq!(acc, "line 0\nline 1\n");
        // The incomplete line waits for its end.
        append(&live, "tial\n");
        recv_until(&mut rx, &mut acc, "partial\n").await;
        append(&live, &lines(2, 1));
        recv_until(&mut rx, &mut acc, "line 2\n").await;
        // Written before the stop: still delivered; then the stream ends.
        append(&live, &lines(3, 1));
        stop_tx.send(true).unwrap();
        recv_all(&mut rx, &mut acc).await;
        assert_eq!(acc, "line 0\nline 1\npartial\nline 2\nline 3\n");
        let summary = task.await.unwrap().unwrap();
        assert_eq!(summary.bytes, acc.len() as u64);
    }

    #[tokio::test(start_paused = true)]
    async fn follow_with_tail_zero_sees_only_new_lines_and_follows_rotation() {
        let dir = tempfile::tempdir().unwrap();
        let pod = dir.path().join("default_x_uid");
        let live = pod.join("web/0.log");
        write_file(&live, &lines(0, 5));
        let (stop_tx, stop_rx) = watch::channel(false);
        let (tx, mut rx) = mpsc::channel(4);
        let o = LogOptions {
            follow: true,
            tail_lines: Some(0),
            ..opts()
        };
        let task = tokio::spawn(follow(instance(&pod), o, stop_rx, tx));
        let mut acc = String::new();
        // Let the follow read what is there (virtual time does not move while the blocking
        // pool reads), so the next line is new to it.
        tokio::time::sleep(FOLLOW_POLL).await;
        append(&live, &lines(5, 1));
        recv_until(&mut rx, &mut acc, "line 5\n").await;
        assert_eq!(acc, "line 5\n");
        // Rotation: rename, a last write to the old file, then the runtime reopens.
        std::fs::rename(&live, pod.join("web/0.log.20261201-100000")).unwrap();
        append(&pod.join("web/0.log.20261201-100000"), &lines(6, 1));
        write_file(&live, &lines(7, 1));
        recv_until(&mut rx, &mut acc, "line 7\n").await;
        assert_eq!(acc, "line 5\nline 6\nline 7\n");
        drop(stop_tx); // the sender gone counts as stopped
        assert!(next(&mut rx).await.is_none());
        task.await.unwrap().unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn follow_ends_when_the_client_goes_away_or_the_limit_is_reached() {
        let dir = tempfile::tempdir().unwrap();
        let pod = dir.path().join("default_x_uid");
        write_file(&pod.join("web/0.log"), &lines(0, 3));
        let (_stop_tx, stop_rx) = watch::channel(false);
        let (tx, mut rx) = mpsc::channel(4);
        let o = LogOptions {
            follow: true,
            ..opts()
        };
        let task = tokio::spawn(follow(instance(&pod), o.clone(), stop_rx.clone(), tx));
        let mut acc = String::new();
        recv_until(&mut rx, &mut acc, "line 2\n").await;
        drop(rx);
        task.await.unwrap().unwrap();

        let (tx, mut rx) = mpsc::channel(4);
        let o = LogOptions {
            limit_bytes: Some(9),
            ..o
        };
        let task = tokio::spawn(follow(instance(&pod), o, stop_rx.clone(), tx));
        let mut acc = String::new();
        recv_all(&mut rx, &mut acc).await;
        assert_eq!(acc, "line 0\nli");
        assert!(task.await.unwrap().unwrap().limit_reached);

        // Without follow: the existing content, then the end, though still running.
        let (tx, mut rx) = mpsc::channel(4);
        let task = tokio::spawn(follow(instance(&pod), opts(), stop_rx, tx));
        let mut acc = String::new();
        recv_all(&mut rx, &mut acc).await;
        assert_eq!(acc, "line 0\nline 1\nline 2\n");
        task.await.unwrap().unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn follow_waits_for_a_live_file_that_is_not_there_yet() {
        let dir = tempfile::tempdir().unwrap();
        let pod = dir.path().join("default_x_uid");
        // Only a rotated file: the live one is being reopened.
        write_file(&pod.join("web/0.log.20261201-100000"), &lines(0, 1));
        let (stop_tx, stop_rx) = watch::channel(false);
        let (tx, mut rx) = mpsc::channel(4);
        let o = LogOptions {
            follow: true,
            ..opts()
        };
        let task = tokio::spawn(follow(instance(&pod), o, stop_rx, tx));
        let mut acc = String::new();
        recv_until(&mut rx, &mut acc, "line 0\n").await;
        tokio::time::sleep(FOLLOW_POLL * 3).await;
        write_file(&pod.join("web/0.log"), &lines(1, 1));
        recv_until(&mut rx, &mut acc, "line 1\n").await;
        stop_tx.send(true).unwrap();
        assert!(next(&mut rx).await.is_none());
        task.await.unwrap().unwrap();
    }
}
