//! Services for the containers' environment (kubelet: the service informer behind
//! `getServiceEnvVarMap`, and `envvars.FromServices`).
//!
//! Owns: [`Services`], a handle on what picolet keeps of every Service of the cluster — its
//! namespace, name, cluster IP and ports, nothing else (a few hundred bytes each; the kubelet
//! keeps whole objects) — and, in cluster mode, the one task that fills it: a list of
//! `/api/v1/services` (all namespaces, as the kubelet's informer), then a watch from its
//! resourceVersion, resumed after its timeout, relisted on `410 Gone` or an `ERROR` event,
//! back-off 1 s → 30 s on failures. That task is the handle's one writer; syncs read it.
//!
//! The environment (kubelet: `makeEnvironmentVariables`): an API pod gets the variables of
//! `default/kubernetes` always and, with `enableServiceLinks` (default true), those of every
//! Service of its own namespace with a cluster IP; until the first list answered its
//! containers wait (`services have not yet been read at least once`). Deliberate
//! differences, for a node that must run offline: a first list that *failed* lets them start
//! without the variables (the kubelet waits for a successful one: after a restart during an
//! outage no API pod's container could start again), and static pods get none (their
//! environment does not depend on the apiserver; the kubelet in cluster mode gives them the
//! variables it has).
//!
//! Must never: drop what it holds because of an error (only a successful list or a
//! `DELETED` event removes a Service).

use std::sync::{Arc, PoisonError, RwLock};

/// What a container's environment needs of one Service.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Service {
    pub cluster_ip: String,
    pub ports: Vec<ServicePort>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServicePort {
    pub name: String,
    pub port: i32,
    pub protocol: String,
}

/// (namespace, name, Service), in the order seen: a plain list (a map's code per key type
/// costs binary size; a watch event's linear search is cheap beside its JSON).
pub(crate) type ServiceMap = Vec<(String, String, Service)>;

/// The kubelet's message while the Services were never listed.
pub(crate) const NOT_SYNCED: &str =
    "services have not yet been read at least once, cannot construct envvars";

/// A handle: clones share the store. `Default` is a node without an apiserver (no Service,
/// nothing to wait for); [`Services::followed`] one whose store a reflector fills.
#[derive(Debug, Clone, Default)]
pub struct Services {
    inner: Option<Arc<RwLock<Option<ServiceMap>>>>,
}

impl Services {
    pub fn followed() -> Self {
        Services {
            inner: Some(Arc::default()),
        }
    }

    /// kubelet: `getServiceEnvVarMap` + `envvars.FromServices`, sorted by name. `Err` until
    /// the first list (kubelet: `serviceHasSynced`).
    pub fn env_vars(&self, namespace: &str, links: bool) -> Result<Vec<(String, String)>, ()> {
        let Some(inner) = &self.inner else {
            return Ok(Vec::new());
        };
        let held = inner.read().unwrap_or_else(PoisonError::into_inner);
        let map = held.as_ref().ok_or(())?;
        Ok(env_vars(map, namespace, links))
    }

    /// Everything a list answered (the reflector; tests).
    pub fn replace(&self, map: ServiceMap) {
        self.write(|m| *m = Some(map));
    }

    /// Sets (`Some`) or removes one Service, once listed.
    #[cfg_attr(not(feature = "apiserver"), allow(dead_code))]
    fn set(&self, namespace: String, name: String, service: Option<Service>) {
        self.write(|m| {
            let Some(m) = m else { return };
            let at = m.iter().position(|(a, b, _)| *a == namespace && *b == name);
            match (at, service) {
                (Some(i), Some(s)) => m[i].2 = s,
                (None, Some(s)) => m.push((namespace, name, s)),
                (Some(i), None) => {
                    m.swap_remove(i);
                }
                (None, None) => {}
            }
        });
    }

    fn write(&self, f: impl FnOnce(&mut Option<ServiceMap>)) {
        if let Some(inner) = &self.inner {
            f(&mut inner.write().unwrap_or_else(PoisonError::into_inner));
        }
    }
}

/// The variables of the Services a pod of `namespace` sees (see the module doc).
pub(crate) fn env_vars(map: &ServiceMap, namespace: &str, links: bool) -> Vec<(String, String)> {
    // kubelet: one per name; the pod's own namespace wins over default/kubernetes.
    let mut seen: Vec<(&str, &Service)> = Vec::new();
    for (ns, name, s) in map {
        // kubelet: IsServiceIPSet.
        if s.cluster_ip.is_empty() || s.cluster_ip == "None" || s.ports.is_empty() {
            continue;
        }
        let own = links && ns == namespace;
        let master = ns == "default" && name == "kubernetes";
        if !(own || master) {
            continue;
        }
        match seen.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) if own => slot.1 = s,
            Some(_) => {}
            None => seen.push((name, s)),
        }
    }
    let mut out = Vec::new();
    for (name, s) in seen {
        from_service(name, s, &mut out);
    }
    crate::sort::sort_by(&mut out, |a, b| a.0.cmp(&b.0));
    out
}

/// kubelet: `envvars.FromServices` for one Service, with its Docker link variables.
fn from_service(name: &str, s: &Service, out: &mut Vec<(String, String)>) {
    // Service and port names are DNS labels, protocols TCP/UDP/SCTP: ASCII case is Go's
    // strings.ToUpper/ToLower here (and keeps the Unicode case tables out of the binary).
    let var = |n: &str| n.replace('-', "_").to_ascii_uppercase();
    let prefix = var(name);
    let ip = &s.cluster_ip;
    out.push((format!("{prefix}_SERVICE_HOST"), ip.clone()));
    let port_var = format!("{prefix}_SERVICE_PORT");
    out.push((port_var.clone(), s.ports[0].port.to_string()));
    for p in s.ports.iter().filter(|p| !p.name.is_empty()) {
        out.push((format!("{port_var}_{}", var(&p.name)), p.port.to_string()));
    }
    // kubelet: net.JoinHostPort — an IPv6 address in brackets.
    let host = if ip.contains(':') {
        format!("[{ip}]")
    } else {
        ip.clone()
    };
    for (i, p) in s.ports.iter().enumerate() {
        let proto = if p.protocol.is_empty() {
            "TCP"
        } else {
            &p.protocol
        };
        let lower = proto.to_ascii_lowercase();
        let url = format!("{lower}://{host}:{}", p.port);
        if i == 0 {
            out.push((format!("{prefix}_PORT"), url.clone()));
        }
        let pp = format!("{prefix}_PORT_{}_{}", p.port, proto.to_ascii_uppercase());
        out.push((format!("{pp}_PROTO"), lower));
        out.push((format!("{pp}_PORT"), p.port.to_string()));
        out.push((format!("{pp}_ADDR"), ip.clone()));
        out.push((pp, url));
    }
}

#[cfg(feature = "apiserver")]
pub(crate) use reflector::follow;

#[cfg(feature = "apiserver")]
mod reflector {
    use std::time::Duration;

    use serde_json::Value;
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::api::cluster::{ObjectList, WatchEvent};
    use crate::kube::{ApiError, Backoff, Client, query};

    const PATH: &str = "/api/v1/services";

    /// Namespace, name, the Service, its resourceVersion — read by hand from the JSON (a
    /// serde decoder for it brought serde_json's owned-Value deserializer in).
    fn decode(v: &Value) -> (String, String, Service, String) {
        let text = |v: &Value, p: &str| {
            let s = v.pointer(p).and_then(Value::as_str);
            s.unwrap_or_default().to_string()
        };
        let ports = v.pointer("/spec/ports").and_then(Value::as_array);
        let ports = ports.into_iter().flatten().map(|p| ServicePort {
            name: text(p, "/name"),
            port: p.get("port").and_then(Value::as_i64).unwrap_or(0) as i32,
            protocol: text(p, "/protocol"),
        });
        let service = Service {
            cluster_ip: text(v, "/spec/clusterIP"),
            ports: ports.collect(),
        };
        let (ns, name) = (text(v, "/metadata/namespace"), text(v, "/metadata/name"));
        (ns, name, service, text(v, "/metadata/resourceVersion"))
    }

    /// The reflector: runs until `shutdown`, the one writer of `services`.
    pub(crate) async fn follow(client: Client, services: Services, shutdown: CancellationToken) {
        // One select for the whole loop (each await's own select cost binary size).
        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = reflect(&client, &services) => {}
        }
    }

    async fn reflect(client: &Client, services: &Services) {
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30), PATH);
        let watch_timeout = Duration::from_secs(300);
        let mut rv: Option<String> = None;
        let mut failing = false;
        loop {
            let from = match rv.take() {
                Some(from) => from,
                None => match client.get::<ObjectList>(PATH).await {
                    Ok(list) => {
                        if failing {
                            log::info!("services: listed again");
                            failing = false;
                        }
                        backoff.reset();
                        let map: ServiceMap = (list.items.iter().map(decode))
                            .map(|(ns, name, service, _)| (ns, name, service))
                            .collect();
                        log::debug!("services: {} listed", map.len());
                        services.replace(map);
                        list.metadata.resource_version
                    }
                    Err(e) => {
                        if !failing {
                            log::warn!("services: cannot list {PATH}: {e}; retrying");
                            failing = true;
                        }
                        // Offline autonomy: a first list that failed lets containers start
                        // without Service variables rather than wait for the apiserver.
                        services.write(|m| {
                            m.get_or_insert_with(ServiceMap::new);
                        });
                        tokio::time::sleep(backoff.next_delay()).await;
                        continue;
                    }
                },
            };
            let timeout = watch_timeout.as_secs().to_string();
            let path = format!(
                "{PATH}{}",
                query(&[
                    ("allowWatchBookmarks", "true"),
                    ("resourceVersion", &from),
                    ("timeoutSeconds", &timeout),
                    ("watch", "true"),
                ])
            );
            let mut stream = match client.watch(&path).await {
                Ok(s) => s,
                Err(e) => {
                    log::debug!("services: cannot watch: {e}");
                    if !e.is_gone() {
                        tokio::time::sleep(backoff.next_delay()).await;
                    }
                    continue;
                }
            };
            // Resumed from the last resourceVersion when the watch ends at its timeout or
            // goes silent past it; relisted when it breaks or says ERROR (410 Gone).
            let deadline = tokio::time::Instant::now() + watch_timeout + Duration::from_secs(30);
            let mut last = Some(from);
            while let Ok(next) = tokio::time::timeout_at(deadline, stream.next()).await {
                let ev: WatchEvent = match next {
                    Some(Ok(ev)) => ev,
                    Some(Err(ApiError::Decode { .. })) => continue,
                    Some(Err(_)) => {
                        last = None;
                        break;
                    }
                    None => break,
                };
                if ev.type_ == "ERROR" {
                    last = None;
                    break;
                }
                let (ns, name, service, object_rv) = decode(&ev.object);
                if !object_rv.is_empty() {
                    last = Some(object_rv);
                }
                match ev.type_.as_str() {
                    "ADDED" | "MODIFIED" => services.set(ns, name, Some(service)),
                    "DELETED" => services.set(ns, name, None),
                    _ => {}
                }
            }
            rv = last;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(ip: &str, ports: &[(&str, i32, &str)]) -> Service {
        Service {
            cluster_ip: ip.into(),
            ports: ports
                .iter()
                .map(|(n, p, proto)| ServicePort {
                    name: n.to_string(),
                    port: *p,
                    protocol: proto.to_string(),
                })
                .collect(),
        }
    }

    /// kubelet: `envvars.FromServices` and `getServiceEnvVarMap`'s choice of Services.
    #[test]
    fn service_environment_table() {
        let mut map = ServiceMap::new();
        let mut add = |ns: &str, name: &str, s: Service| map.push((ns.into(), name.into(), s));
        add(
            "default",
            "kubernetes",
            svc("10.0.0.1", &[("https", 443, "TCP")]),
        );
        add(
            "web",
            "foo-svc",
            svc("10.0.0.7", &[("", 8765, ""), ("dns", 53, "UDP")]),
        );
        add("web", "headless", svc("None", &[("", 80, "")]));
        add("other", "elsewhere", svc("10.0.0.9", &[("", 80, "")]));
        add("web6", "v6", svc("fd00::5", &[("", 80, "TCP")]));
        let got = env_vars(&map, "web", true);
        let want: Vec<(String, String)> = [
            ("FOO_SVC_PORT", "tcp://10.0.0.7:8765"),
            ("FOO_SVC_PORT_53_UDP", "udp://10.0.0.7:53"),
            ("FOO_SVC_PORT_53_UDP_ADDR", "10.0.0.7"),
            ("FOO_SVC_PORT_53_UDP_PORT", "53"),
            ("FOO_SVC_PORT_53_UDP_PROTO", "udp"),
            ("FOO_SVC_PORT_8765_TCP", "tcp://10.0.0.7:8765"),
            ("FOO_SVC_PORT_8765_TCP_ADDR", "10.0.0.7"),
            ("FOO_SVC_PORT_8765_TCP_PORT", "8765"),
            ("FOO_SVC_PORT_8765_TCP_PROTO", "tcp"),
            ("FOO_SVC_SERVICE_HOST", "10.0.0.7"),
            ("FOO_SVC_SERVICE_PORT", "8765"),
            ("FOO_SVC_SERVICE_PORT_DNS", "53"),
            ("KUBERNETES_PORT", "tcp://10.0.0.1:443"),
            ("KUBERNETES_PORT_443_TCP", "tcp://10.0.0.1:443"),
            ("KUBERNETES_PORT_443_TCP_ADDR", "10.0.0.1"),
            ("KUBERNETES_PORT_443_TCP_PORT", "443"),
            ("KUBERNETES_PORT_443_TCP_PROTO", "tcp"),
            ("KUBERNETES_SERVICE_HOST", "10.0.0.1"),
            ("KUBERNETES_SERVICE_PORT", "443"),
            ("KUBERNETES_SERVICE_PORT_HTTPS", "443"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(got, want);
        // enableServiceLinks false: the master Service only.
        let names: Vec<String> = env_vars(&map, "web", false)
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert!(
            names.iter().all(|n| n.starts_with("KUBERNETES_")),
            "{names:?}"
        );
        assert_eq!(names.len(), 8);
        // IPv6: the address in brackets in the URLs.
        let v6 = env_vars(&map, "web6", true);
        assert!(v6.contains(&("V6_PORT".into(), "tcp://[fd00::5]:80".into())));
        assert!(v6.contains(&("V6_SERVICE_HOST".into(), "fd00::5".into())));
        // No apiserver: nothing, nothing to wait for; followed but never listed: wait.
        assert_eq!(Services::default().env_vars("web", true), Ok(vec![]));
        let followed = Services::followed();
        assert_eq!(followed.env_vars("web", true), Err(()));
        followed.replace(map.clone());
        assert_eq!(followed.env_vars("web", true).map(|v| v.len()), Ok(20));
        // A watch's events: set, replace, remove.
        followed.set("web".into(), "foo-svc".into(), None);
        followed.set(
            "web".into(),
            "bar".into(),
            Some(svc("10.0.0.8", &[("", 1, "")])),
        );
        followed.set(
            "web".into(),
            "bar".into(),
            Some(svc("10.0.0.9", &[("", 1, "")])),
        );
        let got = followed.env_vars("web", true).unwrap();
        assert!(got.contains(&("BAR_SERVICE_HOST".into(), "10.0.0.9".into())));
        assert!(!got.iter().any(|(k, _)| k.starts_with("FOO_SVC")));
        // The pod's own namespace wins over default/kubernetes.
        followed.set(
            "web".into(),
            "kubernetes".into(),
            Some(svc("10.9.9.9", &[("", 1, "")])),
        );
        let got = followed.env_vars("web", true).unwrap();
        assert!(got.contains(&("KUBERNETES_SERVICE_HOST".into(), "10.9.9.9".into())));
    }
}
