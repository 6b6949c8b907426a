//! From a probe's or hook's `httpGet` / `tcpSocket` to a target (kubelet:
//! `NewRequestForHTTPGetAction`, `resolveContainerPort`).

use crate::api::{Container, HttpGetAction, HttpHeader, IntOrString};

use super::HttpTarget;

/// Why a probe's or hook's port or `httpGet` has no target (the probe's error, in the pod's
/// events).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TargetError {
    /// A named port the container does not declare: `(port, container)`.
    PortNotFound(String, String),
    /// Not within 1..=65535.
    InvalidPort(i64),
    /// No `host`, and the pod has no IP yet.
    NoHost,
    /// A scheme other than HTTP or HTTPS.
    Scheme(String),
}

impl std::fmt::Display for TargetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TargetError::PortNotFound(port, container) => {
                write!(f, "couldn't find port {port:?} in container {container:?}")
            }
            TargetError::InvalidPort(number) => write!(f, "invalid port number: {number}"),
            TargetError::NoHost => f.write_str("no host to probe: the pod has no IP yet"),
            TargetError::Scheme(s) => write!(f, "unsupported scheme {s:?} (HTTP or HTTPS)"),
        }
    }
}

impl std::error::Error for TargetError {}

/// kubelet: `resolveContainerPort` — a number, a numeric string, or the name of one of the
/// container's ports.
pub(crate) fn resolve_port(port: &IntOrString, container: &Container) -> Result<u16, TargetError> {
    let number = match port {
        IntOrString::Int(n) => *n,
        IntOrString::String(s) => match s.parse::<i64>() {
            Ok(n) => n,
            Err(_) => container
                .ports
                .iter()
                .find(|p| p.name.as_deref() == Some(s.as_str()))
                .map(|p| i64::from(p.container_port))
                .ok_or_else(|| TargetError::PortNotFound(s.clone(), container.name.clone()))?,
        },
    };
    match u16::try_from(number) {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(TargetError::InvalidPort(number)),
    }
}

/// `httpHeaders` as name/value pairs.
pub(crate) fn headers(list: &[HttpHeader]) -> Vec<(String, String)> {
    list.iter()
        .map(|h| (h.name.clone(), h.value.clone()))
        .collect()
}

/// The target of an `httpGet`: the host defaults to `default_host` (the pod IP), the port
/// may be named, the scheme is HTTP unless `HTTPS`.
pub(crate) fn http_target<'a>(
    h: &'a HttpGetAction,
    container: &Container,
    default_host: &'a str,
    headers: &'a [(String, String)],
) -> Result<HttpTarget<'a>, TargetError> {
    let port = resolve_port(&h.port, container)?;
    let host = h
        .host
        .as_deref()
        .filter(|h| !h.is_empty())
        .unwrap_or(default_host);
    if host.is_empty() {
        return Err(TargetError::NoHost);
    }
    let https = match h.scheme.as_deref() {
        None | Some("") => false,
        Some(s) if s.eq_ignore_ascii_case("http") => false,
        Some(s) if s.eq_ignore_ascii_case("https") => true,
        Some(s) => return Err(TargetError::Scheme(s.to_string())),
    };
    Ok(HttpTarget {
        https,
        host,
        port,
        path: h.path.as_deref().unwrap_or_default(),
        headers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ContainerPort;

    fn container() -> Container {
        Container {
            name: "web".into(),
            ports: vec![ContainerPort {
                name: Some("http".into()),
                container_port: 8080,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn ports() {
        let c = container();
        let rows: Vec<(IntOrString, Result<u16, &str>)> = vec![
            (IntOrString::Int(80), Ok(80)),
            (IntOrString::String("81".into()), Ok(81)),
            (IntOrString::String("http".into()), Ok(8080)),
            (
                IntOrString::String("metrics".into()),
                Err("couldn't find port \"metrics\" in container \"web\""),
            ),
            (IntOrString::Int(0), Err("invalid port number: 0")),
            (IntOrString::Int(70000), Err("invalid port number: 70000")),
        ];
        for (port, want) in rows {
            let got = resolve_port(&port, &c).map_err(|e| e.to_string());
            assert_eq!(got, want.map_err(str::to_string), "{port:?}");
        }
    }

    #[test]
    fn targets() {
        let c = container();
        let mut h = HttpGetAction {
            path: Some("healthz".into()),
            port: IntOrString::String("http".into()),
            ..Default::default()
        };
        let t = http_target(&h, &c, "10.88.0.7", &[]).unwrap();
        assert_eq!(
            (t.https, t.host, t.port, t.path),
            (false, "10.88.0.7", 8080, "healthz")
        );
        h.scheme = Some("HTTPS".into());
        h.host = Some("example.org".into());
        let t = http_target(&h, &c, "10.88.0.7", &[]).unwrap();
        assert_eq!((t.https, t.host), (true, "example.org"));
        h.scheme = Some("ftp".into());
        assert!(http_target(&h, &c, "10.88.0.7", &[]).is_err());
        h.scheme = None;
        h.host = None;
        assert!(http_target(&h, &c, "", &[]).is_err());
    }
}
