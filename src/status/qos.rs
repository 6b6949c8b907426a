//! QoS class of a pod (kubelet: `pkg/apis/core/v1/helper/qos` `ComputePodQOS`).
//!
//! Over all containers, init containers included, only `cpu` and `memory` count and only
//! positive quantities: nothing requested or limited → BestEffort; every container limits
//! both cpu and memory and the summed requests equal the summed limits → Guaranteed; else
//! Burstable. A request left out defaults to the limit, as API defaulting does for manifests
//! (`SetDefaults_Pod`), so limits alone give Guaranteed.

use std::collections::BTreeMap;

use crate::api::{Pod, Quantity};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QosClass {
    Guaranteed,
    Burstable,
    BestEffort,
}

impl QosClass {
    /// The API spelling (`status.qosClass`).
    pub fn as_str(self) -> &'static str {
        match self {
            QosClass::Guaranteed => "Guaranteed",
            QosClass::Burstable => "Burstable",
            QosClass::BestEffort => "BestEffort",
        }
    }
}

const QOS_RESOURCES: [&str; 2] = ["cpu", "memory"];

/// The pod's QoS class.
pub fn pod_qos(pod: &Pod) -> QosClass {
    let mut requests: BTreeMap<&str, i128> = BTreeMap::new();
    let mut limits: BTreeMap<&str, i128> = BTreeMap::new();
    let mut guaranteed = true;
    for c in pod.spec.containers.iter().chain(&pod.spec.init_containers) {
        let res = c.resources.as_ref();
        let mut limited = 0;
        for name in QOS_RESOURCES {
            let limit = res.and_then(|r| r.limits.get(name)).and_then(nanos);
            let request = res
                .and_then(|r| r.requests.get(name))
                .map(nanos)
                .unwrap_or(limit);
            if let Some(v) = request.filter(|v| *v > 0) {
                *requests.entry(name).or_default() += v;
            }
            if let Some(v) = limit.filter(|v| *v > 0) {
                *limits.entry(name).or_default() += v;
                limited += 1;
            }
        }
        if limited < QOS_RESOURCES.len() {
            guaranteed = false;
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return QosClass::BestEffort;
    }
    if guaranteed
        && requests.len() == limits.len()
        && requests.iter().all(|(k, v)| limits.get(k) == Some(v))
    {
        return QosClass::Guaranteed;
    }
    QosClass::Burstable
}

/// A quantity in units of 10⁻⁹ (exact for every suffix down to `n`), rounded up below that
/// as Kubernetes does. `None` for something that is not a quantity (validation's business).
fn nanos(q: &Quantity) -> Option<i128> {
    match q {
        Quantity::Int(i) => i128::from(*i).checked_mul(1_000_000_000),
        Quantity::Float(f) => parse(&f.to_string()),
        Quantity::Str(s) => parse(s.trim()),
    }
}

fn parse(s: &str) -> Option<i128> {
    let (negative, s) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let num_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(num_end);
    let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    let digits = format!("{int_part}{frac_part}");
    let mantissa: i128 = digits.parse().ok()?;
    let frac_len = i32::try_from(frac_part.len()).ok()?;

    // value = mantissa × 10^(dec_exp − frac_len) × 2^bin_exp, in units of 10⁻⁹.
    let (dec_exp, bin_exp): (i32, u32) = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        other => {
            let exp = other.strip_prefix(['e', 'E'])?;
            (exp.parse().ok()?, 0)
        }
    };
    let scaled = mantissa.checked_mul(1i128.checked_shl(bin_exp)?)?;
    let exp10 = dec_exp.checked_add(9)?.checked_sub(frac_len)?;
    let value = if exp10 >= 0 {
        scaled.checked_mul(10i128.checked_pow(u32::try_from(exp10).ok()?)?)?
    } else {
        let div = 10i128.checked_pow(u32::try_from(-exp10).ok()?)?;
        (scaled + div - 1) / div
    };
    Some(if negative { -value } else { value })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{Container, ResourceRequirements};

    fn q(s: &str) -> Quantity {
        Quantity::Str(s.to_string())
    }

    #[test]
    fn parses_quantities() {
        let cases: &[(Quantity, Option<i128>)] = &[
            (q("1"), Some(1_000_000_000)),
            (q("100m"), Some(100_000_000)),
            (q("0.5"), Some(500_000_000)),
            (q("1.5k"), Some(1_500_000_000_000)),
            (q("64Mi"), Some(64 * 1024 * 1024 * 1_000_000_000)),
            (q("1Gi"), Some((1i128 << 30) * 1_000_000_000)),
            (q("1e3"), Some(1_000_000_000_000)),
            (q("1E"), Some(10i128.pow(27))),
            (q("250n"), Some(250)),
            (q("0.1n"), Some(1)), // rounded up
            (q("-2"), Some(-2_000_000_000)),
            (Quantity::Int(2), Some(2_000_000_000)),
            (Quantity::Float(0.25), Some(250_000_000)),
            (q("abc"), None),
            (q("1Xi"), None),
            (q(""), None),
        ];
        for (input, want) in cases {
            assert_eq!(nanos(input), *want, "{input:?}");
        }
        assert_eq!(nanos(&q("1000m")), nanos(&q("1")));
        assert_eq!(nanos(&q("67108864")), nanos(&q("64Mi")));
    }

    fn res(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> Option<ResourceRequirements> {
        let m = |kv: &[(&str, &str)]| kv.iter().map(|(k, v)| (k.to_string(), q(v))).collect();
        Some(ResourceRequirements {
            requests: m(requests),
            limits: m(limits),
        })
    }

    fn pod_with(
        resources: Vec<Option<ResourceRequirements>>,
        init: Vec<Option<ResourceRequirements>>,
    ) -> Pod {
        let mk = |rs: Vec<Option<ResourceRequirements>>| {
            rs.into_iter()
                .enumerate()
                .map(|(i, r)| Container {
                    name: format!("c{i}"),
                    resources: r,
                    ..Container::default()
                })
                .collect()
        };
        let mut pod = Pod::default();
        pod.spec.containers = mk(resources);
        pod.spec.init_containers = mk(init);
        pod
    }

    #[test]
    fn qos_table() {
        let both = &[("cpu", "500m"), ("memory", "64Mi")];
        let cases: Vec<(&str, Pod, QosClass)> = vec![
            (
                "nothing",
                pod_with(vec![None, None], vec![]),
                QosClass::BestEffort,
            ),
            (
                "zero requests do not count",
                pod_with(vec![res(&[("cpu", "0")], &[])], vec![]),
                QosClass::BestEffort,
            ),
            (
                "only other resources",
                pod_with(vec![res(&[("ephemeral-storage", "1Gi")], &[])], vec![]),
                QosClass::BestEffort,
            ),
            (
                "requests = limits",
                pod_with(vec![res(both, both)], vec![]),
                QosClass::Guaranteed,
            ),
            (
                "limits only (requests default to limits)",
                pod_with(vec![res(&[], both), res(&[], both)], vec![]),
                QosClass::Guaranteed,
            ),
            (
                "equal in other spellings",
                pod_with(
                    vec![res(
                        &[("cpu", "0.5"), ("memory", "67108864")],
                        &[("cpu", "500m"), ("memory", "64Mi")],
                    )],
                    vec![],
                ),
                QosClass::Guaranteed,
            ),
            (
                "requests below limits",
                pod_with(
                    vec![res(&[("cpu", "100m"), ("memory", "64Mi")], both)],
                    vec![],
                ),
                QosClass::Burstable,
            ),
            (
                "requests only",
                pod_with(vec![res(both, &[])], vec![]),
                QosClass::Burstable,
            ),
            (
                "memory limit missing",
                pod_with(vec![res(&[], &[("cpu", "1")])], vec![]),
                QosClass::Burstable,
            ),
            (
                "one container without limits",
                pod_with(vec![res(both, both), None], vec![]),
                QosClass::Burstable,
            ),
            (
                "init container without limits",
                pod_with(vec![res(both, both)], vec![None]),
                QosClass::Burstable,
            ),
            (
                "init container limited too",
                pod_with(vec![res(both, both)], vec![res(&[], both)]),
                QosClass::Guaranteed,
            ),
        ];
        for (name, pod, want) in cases {
            assert_eq!(pod_qos(&pod), want, "{name}");
        }
        assert_eq!(QosClass::Burstable.as_str(), "Burstable");
    }
}
