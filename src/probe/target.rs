//! From a probe's or hook's `httpGet` / `tcpSocket` to a target (kubelet:
//! `NewRequestForHTTPGetAction`, `resolveContainerPort`).

use crate::api::{Container, HttpGetAction, HttpHeader, IntOrString};

use super::HttpTarget;

/// kubelet: `resolveContainerPort` — a number, a numeric string, or the name of one of the
/// container's ports.
pub fn resolve_port(port: &IntOrString, container: &Container) -> Result<u16, String> {
    let number = match port {
        IntOrString::Int(n) => *n,
        IntOrString::String(s) => match s.parse::<i64>() {
            Ok(n) => n,
            Err(_) => container
                .ports
                .iter()
                .find(|p| p.name.as_deref() == Some(s.as_str()))
                .map(|p| i64::from(p.container_port))
                .ok_or_else(|| {
                    format!("couldn't find port {s:?} in container {:?}", container.name)
                })?,
        },
    };
    match u16::try_from(number) {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("invalid port number: {number}")),
    }
}

/// `httpHeaders` as name/value pairs.
pub fn headers(list: &[HttpHeader]) -> Vec<(String, String)> {
    list.iter()
        .map(|h| (h.name.clone(), h.value.clone()))
        .collect()
}

/// The target of an `httpGet`: the host defaults to `default_host` (the pod IP), the port
/// may be named, the scheme is HTTP unless `HTTPS`.
pub fn http_target<'a>(
    h: &'a HttpGetAction,
    container: &Container,
    default_host: &'a str,
    headers: &'a [(String, String)],
) -> Result<HttpTarget<'a>, String> {
    let port = resolve_port(&h.port, container)?;
    let host = h
        .host
        .as_deref()
        .filter(|h| !h.is_empty())
        .unwrap_or(default_host);
    if host.is_empty() {
        return Err("no host to probe: the pod has no IP yet".into());
    }
    let https = match h.scheme.as_deref() {
        None | Some("") => false,
        Some(s) if s.eq_ignore_ascii_case("http") => false,
        Some(s) if s.eq_ignore_ascii_case("https") => true,
        Some(s) => return Err(format!("unsupported scheme {s:?} (HTTP or HTTPS)")),
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
        let rows: Vec<(IntOrString, Result<u16, String>)> = vec![
            (IntOrString::Int(80), Ok(80)),
            (IntOrString::String("81".into()), Ok(81)),
            (IntOrString::String("http".into()), Ok(8080)),
            (
                IntOrString::String("metrics".into()),
                Err("couldn't find port \"metrics\" in container \"web\"".into()),
            ),
            (IntOrString::Int(0), Err("invalid port number: 0".into())),
            (
                IntOrString::Int(70000),
                Err("invalid port number: 70000".into()),
            ),
        ];
        for (port, want) in rows {
            assert_eq!(resolve_port(&port, &c), want, "{port:?}");
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
