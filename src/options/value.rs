//! Reading one value of the table ([`flags`](super::flags)): from the command line's text
//! and from the config file's YAML, into its field of `Options`; and why a value is refused.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::{KUBELET_LABEL_NAMESPACES, KUBELET_LABELS, Options};

/// Why a value is refused. The caller names the flag (`flag --x: …`) or the config file's
/// key (`config file F: key: …`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ValueError {
    /// Not a Go-style duration.
    Duration(String),
    /// `"v" is not <what>` (`true or false`, `an IP address`, `cgroupfs or systemd`, …).
    NotA { value: String, what: &'static str },
    /// A resource of `--system-reserved`/`--kube-reserved` that is not a quantity.
    Quantity { resource: String, value: String },
    /// An `--enforce-node-allocatable` value picolet does not support.
    UnsupportedEnforce(String),
    /// `--node-labels` a node may not set on itself.
    ForbiddenLabels(Vec<String>),
    /// `memorySwap.swapBehavior` none of the kubelet's values.
    SwapBehavior(String),
    /// A nested config key (`authentication.…`) that is not a string.
    NotAString,
    /// A nested config key that is not a boolean.
    NotABool,
    /// A config file's value of the wrong type (serde's message, with the path inside it).
    Decode(crate::api::DecodeError),
    /// A reader elsewhere refused it (eviction thresholds, the image GC policy).
    Invalid(String),
}

impl fmt::Display for ValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueError::Duration(v) => {
                write!(f, "invalid duration {v:?} (use e.g. 20s, 1m, 1m30s, 500ms)")
            }
            ValueError::NotA { value, what } => write!(f, "{value:?} is not {what}"),
            ValueError::Quantity { resource, value } => {
                write!(f, "{resource}: {value:?} is not a quantity")
            }
            ValueError::UnsupportedEnforce(v) => write!(
                f,
                "{v:?} is not supported by picolet (it manages no system or kube cgroup); use pods or none"
            ),
            ValueError::ForbiddenLabels(bad) => write!(
                f,
                "unknown 'kubernetes.io' or 'k8s.io' labels {bad:?}: a node may set on itself only {} \
                 and labels under {} (NodeRestriction refuses others; set them with `kubectl label \
                 node` instead)",
                KUBELET_LABELS.join(", "),
                KUBELET_LABEL_NAMESPACES.join(", ")
            ),
            ValueError::SwapBehavior(v) => write!(
                f,
                "{v:?} must be one of: \"\", \"LimitedSwap\" or \"NoSwap\""
            ),
            ValueError::NotAString => f.write_str("not a string"),
            ValueError::NotABool => f.write_str("not true or false"),
            ValueError::Decode(e) => e.fmt(f),
            ValueError::Invalid(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for ValueError {}

impl ValueError {
    fn not_a(value: &str, what: &'static str) -> Self {
        ValueError::NotA {
            value: value.to_string(),
            what,
        }
    }

    /// The message of the config file's `key`: `key: …`, or with the path inside the value
    /// of a type error (`staticPodURLHeader.X-A[1]: invalid type: …`).
    pub(crate) fn in_key(&self, key: &str) -> String {
        let ValueError::Decode(e) = self else {
            return format!("{key}: {self}");
        };
        let field = e.field();
        let sep = match field.as_str() {
            "." => return format!("{key}: {}", e.message()),
            f if f.starts_with('[') => "",
            _ => ".",
        };
        format!("{key}{sep}{field}: {}", e.message())
    }
}

/// How a value is read, and into which field of `Options`. The same text is read from the
/// command line and from the config file's strings; the config file's numbers, booleans,
/// lists and maps are typed YAML.
pub(super) enum Kind {
    /// `--config FILE`: read before the other flags (`parse`).
    Config,
    Str(fn(&mut Options) -> &mut String),
    OptStr(fn(&mut Options) -> &mut Option<String>),
    Path(fn(&mut Options) -> &mut PathBuf),
    /// `Some` of the value, even an empty one.
    OptPath(fn(&mut Options) -> &mut Option<PathBuf>),
    /// A Go-style duration (`20s`, `1m30s`).
    Duration(fn(&mut Options) -> &mut Duration),
    /// `--flag`, `--flag=true|false`.
    Bool(fn(&mut Options) -> &mut bool),
    U8(fn(&mut Options) -> &mut u8),
    U16(fn(&mut Options) -> &mut u16),
    U32(fn(&mut Options) -> &mut u32),
    Usize(fn(&mut Options) -> &mut usize),
    /// A byte size as a quantity (`10Mi`).
    Size(fn(&mut Options) -> &mut u64),
    Ip(fn(&mut Options) -> &mut IpAddr),
    OptIp(fn(&mut Options) -> &mut Option<IpAddr>),
    /// `a,b` on the command line, a YAML list in the file.
    List(fn(&mut Options) -> &mut Vec<String>),
    /// A string read by its own function (a choice of words, a value that is checked).
    Text(fn(&mut Options, &str) -> Result<(), ValueError>),
    /// As `List`, read by its own function; a bare flag is the empty list.
    ListWith(fn(&mut Options, Vec<String>) -> Result<(), ValueError>),
    /// `k=v,…` on the command line, a YAML map in the file, read by its own function.
    Map(fn(&mut Options, BTreeMap<String, String>) -> Result<(), ValueError>),
    /// `--eviction-hard`: `SIGNAL<Q,…` on the command line, the kubelet's map
    /// (`{memory.available: 100Mi}`) in the file.
    EvictionHard,
    /// `--manifest-url-header 'A:1,B:2'` (repeatable) on the command line, the kubelet's
    /// `map[string][]string` in the file.
    UrlHeaders,
}

impl Kind {
    /// Reads `v` as written on the command line (a default, a config file's string) into
    /// its field.
    pub(super) fn set_text(&self, o: &mut Options, v: &str) -> Result<(), ValueError> {
        match self {
            Kind::Config => {}
            Kind::Str(field) => *field(o) = v.to_string(),
            Kind::OptStr(field) => *field(o) = Some(v.to_string()),
            Kind::Path(field) => *field(o) = PathBuf::from(v),
            Kind::OptPath(field) => *field(o) = Some(PathBuf::from(v)),
            Kind::Duration(field) => {
                *field(o) = parse_duration(v).ok_or_else(|| ValueError::Duration(v.to_string()))?
            }
            Kind::Bool(field) => *field(o) = parse_bool(v)?,
            Kind::U8(field) => *field(o) = number(v)?,
            Kind::U16(field) => *field(o) = number(v)?,
            Kind::U32(field) => *field(o) = number(v)?,
            Kind::Usize(field) => *field(o) = number(v)?,
            Kind::Size(field) => *field(o) = size_value(v)?,
            Kind::Ip(field) => *field(o) = ip(v)?,
            Kind::OptIp(field) => *field(o) = Some(ip(v)?),
            Kind::List(field) => *field(o) = split_list(v),
            Kind::ListWith(set) => set(o, split_list(v))?,
            Kind::Text(set) => set(o, v)?,
            Kind::Map(set) => set(o, parse_labels(v)?)?,
            Kind::EvictionHard => {
                o.eviction_hard = crate::eviction::parse_thresholds(v)
                    .and_then(|t| crate::eviction::check_unique(&t).map(|()| t))
                    .map_err(|e| ValueError::Invalid(e.to_string()))?
            }
            Kind::UrlHeaders => {
                // kubelet: 'a:hello,b:again' — several headers in one flag value, and the
                // flag may be repeated.
                for part in v.split(',').filter(|p| !p.trim().is_empty()) {
                    let (k, v) = part
                        .split_once(':')
                        .ok_or_else(|| ValueError::not_a(part, "Name:Value"))?;
                    o.manifest_url_headers
                        .push((k.trim().to_string(), v.trim().to_string()));
                }
            }
        }
        Ok(())
    }

    /// Reads the config file's value of `key` into its field. Numbers, booleans, lists and
    /// maps are typed YAML; the rest are strings read as on the command line (a number or
    /// a boolean where a string is wanted is its text). The nested keys of the
    /// `authentication:`/`authorization:` blocks take strings and booleans only.
    pub(super) fn set_yaml(&self, o: &mut Options, key: &str, v: &Value) -> Result<(), ValueError> {
        let nested = key.contains('.');
        match self {
            Kind::Bool(field) if nested => *field(o) = v.as_bool().ok_or(ValueError::NotABool)?,
            Kind::Bool(field) => *field(o) = decode(v)?,
            Kind::U8(field) => *field(o) = decode(v)?,
            Kind::U16(field) => *field(o) = decode(v)?,
            Kind::U32(field) => *field(o) = decode(v)?,
            Kind::Usize(field) => *field(o) = decode(v)?,
            Kind::List(field) => *field(o) = decode(v)?,
            Kind::ListWith(set) => set(o, decode(v)?)?,
            Kind::Map(set) => set(o, decode(v)?)?,
            Kind::EvictionHard => {
                let map: BTreeMap<String, String> = decode(v)?;
                o.eviction_hard = crate::eviction::thresholds_from_map(&map)
                    .map_err(|e| ValueError::Invalid(e.to_string()))?;
            }
            Kind::UrlHeaders => {
                let headers: BTreeMap<String, Vec<String>> = decode(v)?;
                for (k, values) in headers {
                    for v in values {
                        o.manifest_url_headers.push((k.clone(), v));
                    }
                }
            }
            _ if nested => self.set_text(o, v.as_str().ok_or(ValueError::NotAString)?)?,
            _ => self.set_text(o, &decode::<String>(v)?)?,
        }
        Ok(())
    }
}

fn decode<'a, T: serde::Deserialize<'a>>(v: &'a Value) -> Result<T, ValueError> {
    crate::api::from_yaml_value(v).map_err(ValueError::Decode)
}

/// `a, b,,c`: the non-empty items, trimmed.
fn split_list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// `true` or `false` (a bare flag is `true`: `parse`).
fn parse_bool(v: &str) -> Result<bool, ValueError> {
    match v {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(ValueError::not_a(v, "true or false")),
    }
}

fn number<T: std::str::FromStr>(v: &str) -> Result<T, ValueError> {
    v.parse()
        .map_err(|_| ValueError::not_a(v, "a valid number here"))
}

fn ip(v: &str) -> Result<IpAddr, ValueError> {
    v.parse().map_err(|_| ValueError::not_a(v, "an IP address"))
}

/// A byte size as a Kubernetes quantity (`10Mi`, `500Ki`, `1G`).
fn size_value(v: &str) -> Result<u64, ValueError> {
    crate::api::parse_quantity(v, 0)
        .and_then(|n| u64::try_from(n).ok())
        .ok_or_else(|| ValueError::not_a(v, "a size (use e.g. 10Mi, 500Ki)"))
}

/// `--watchdog-device`: empty is none.
pub(super) fn set_watchdog_device(o: &mut Options, v: &str) -> Result<(), ValueError> {
    o.watchdog_device = (!v.is_empty()).then(|| PathBuf::from(v));
    Ok(())
}

/// `--cgroup-parent`: the deprecated spelling of `--cgroup-root`.
pub(super) fn set_cgroup_parent(o: &mut Options, v: &str) -> Result<(), ValueError> {
    log::warn!("--cgroup-parent is deprecated: use --cgroup-root (the kubelet's name)");
    o.cgroup_root = v.to_string();
    Ok(())
}

pub(super) fn set_cgroup_driver(o: &mut Options, v: &str) -> Result<(), ValueError> {
    o.cgroup_driver = crate::cm::CgroupDriver::parse(v)
        .ok_or_else(|| ValueError::not_a(v, "cgroupfs or systemd"))?;
    Ok(())
}

/// `--maximum-dead-containers-per-container`: a negative number is no limit.
pub(super) fn set_maximum_dead_containers(o: &mut Options, v: &str) -> Result<(), ValueError> {
    let n: i64 = v
        .parse()
        .map_err(|_| ValueError::not_a(v, "a number (-1: no limit)"))?;
    o.maximum_dead_containers_per_container = usize::try_from(n).ok();
    Ok(())
}

/// `--authorization-mode`: `Webhook` or `AlwaysAllow`.
pub(super) fn set_authorization_mode(o: &mut Options, v: &str) -> Result<(), ValueError> {
    o.authorization_webhook = match v {
        "Webhook" => true,
        "AlwaysAllow" => false,
        _ => return Err(ValueError::not_a(v, "AlwaysAllow or Webhook")),
    };
    Ok(())
}

/// kubelet `memorySwap.swapBehavior`: `NoSwap` (or empty) or `LimitedSwap`.
pub(super) fn set_swap_behavior(o: &mut Options, v: &str) -> Result<(), ValueError> {
    o.swap_behavior = match v {
        "" | "NoSwap" => crate::qos::SwapBehavior::NoSwap,
        "LimitedSwap" => crate::qos::SwapBehavior::LimitedSwap,
        _ => return Err(ValueError::SwapBehavior(v.to_string())),
    };
    Ok(())
}

/// kubelet `--system-reserved`/`--kube-reserved`: `cpu` and `memory` quantities
/// (`ephemeral-storage` and `pid` are accepted and not used: picolet reserves no disk or
/// pids).
pub(crate) fn parse_reserved(
    m: &BTreeMap<String, String>,
) -> Result<crate::cm::Reserved, ValueError> {
    let mut r = crate::cm::Reserved::default();
    for (k, v) in m {
        let (scale, slot) = match k.as_str() {
            "cpu" => (3, &mut r.cpu_milli),
            "memory" => (0, &mut r.memory_bytes),
            "ephemeral-storage" | "pid" => continue,
            other => {
                return Err(ValueError::not_a(
                    other,
                    "a reservable resource (cpu, memory, ephemeral-storage, pid)",
                ));
            }
        };
        *slot = crate::api::parse_quantity(v, scale).ok_or_else(|| ValueError::Quantity {
            resource: k.clone(),
            value: v.clone(),
        })?;
    }
    Ok(r)
}

/// kubelet `--enforce-node-allocatable`: `pods`, or `none`/empty. `system-reserved` and
/// `kube-reserved` need their cgroups (`--system-reserved-cgroup`), which picolet does not
/// manage: refused.
pub(super) fn parse_enforce(list: &[String]) -> Result<bool, ValueError> {
    let mut pods = false;
    for v in list.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        match v {
            "pods" => pods = true,
            "none" => {}
            "system-reserved"
            | "kube-reserved"
            | "system-reserved-compressible"
            | "kube-reserved-compressible" => {
                return Err(ValueError::UnsupportedEnforce(v.to_string()));
            }
            other => return Err(ValueError::not_a(other, "pods or none")),
        }
    }
    Ok(pods)
}

/// `k=v,k2=v2` (kubelet `--node-labels`).
pub(crate) fn parse_labels(s: &str) -> Result<BTreeMap<String, String>, ValueError> {
    let mut out = BTreeMap::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| ValueError::not_a(part, "key=value"))?;
        let k = k.trim();
        if k.is_empty() || k.len() > 316 || k.contains(char::is_whitespace) {
            return Err(ValueError::not_a(k, "a valid label key"));
        }
        out.insert(k.to_string(), v.trim().to_string());
    }
    Ok(out)
}

/// Go-style durations as the kubelet takes them: `20s`, `1m30s`, `500ms`, `2h`.
pub(super) fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    if s == "0" {
        return Some(Duration::ZERO);
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return None;
        }
        let n: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += n * unit;
    }
    Some(Duration::from_secs_f64(total))
}
