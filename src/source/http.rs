//! The HTTP source: `--manifest-url` (kubelet: `config/http.go`, `staticPodURL`).
//!
//! Owns: fetching the URL every 20 s (10 s deadline, `--manifest-url-header`s), turning a
//! Pod or a PodList into static pods (`manifest::load` with source `http`: the same
//! identity rules as the file source, the URL as the source path), and the last body.
//!
//! Behaviour (as upstream): a non-200 answer is an error (logged once per streak; no
//! snapshot, so the pods it served keep running); an empty body is an empty snapshot;
//! identical bytes are a no-op. A PodList item that does not load is logged and left out;
//! the other items are not disturbed.
//!
//! Must never: follow redirects, or send a snapshot equal to the last one.

use std::sync::Arc;
use std::time::Duration;

use http::Method;
use http::header::{HeaderName, HeaderValue};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::api::Pod;
use crate::clock::Clock;
use crate::kube::{ApiError, HttpClient};
use crate::manifest::{self, fields};
use crate::messages::SourceUpdate;

/// The `source` of this source's updates.
pub(crate) const SOURCE: &str = manifest::SOURCE_HTTP;

#[derive(Debug, Clone)]
pub struct HttpSourceOptions {
    /// kubelet: `httpCheckFrequency` (20 s).
    pub period: Duration,
    /// Deadline of one GET (10 s).
    pub timeout: Duration,
    /// Largest body accepted (10 MiB, as a manifest file).
    pub max_bytes: usize,
}

impl Default for HttpSourceOptions {
    fn default() -> Self {
        HttpSourceOptions {
            period: Duration::from_secs(20),
            timeout: Duration::from_secs(10),
            max_bytes: 10 * 1024 * 1024,
        }
    }
}

/// The manifest URL source.
pub struct HttpSource<C: Clock> {
    client: HttpClient,
    url: String,
    headers: Vec<(HeaderName, HeaderValue)>,
    node_name: String,
    clock: C,
    options: HttpSourceOptions,
}

/// Why a fetch produced no snapshot.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HttpSourceError {
    #[error(transparent)]
    Request(#[from] ApiError),
    #[error("{url}: HTTP {code}")]
    Status { url: String, code: u16 },
}

impl<C: Clock> HttpSource<C> {
    /// `headers`: `(name, value)` pairs from `--manifest-url-header`.
    pub fn new(
        client: HttpClient,
        url: String,
        headers: &[(String, String)],
        node_name: String,
        clock: C,
    ) -> Result<Self, ApiError> {
        let headers = headers
            .iter()
            .map(|(k, v)| {
                Ok((
                    HeaderName::try_from(k.as_str())
                        .map_err(|_| ApiError::BadHeader { name: k.clone() })?,
                    HeaderValue::try_from(v.as_str())
                        .map_err(|_| ApiError::BadHeader { name: k.clone() })?,
                ))
            })
            .collect::<Result<Vec<_>, ApiError>>()?;
        Ok(HttpSource {
            client,
            url,
            headers,
            node_name,
            clock,
            options: HttpSourceOptions::default(),
        })
    }

    pub fn with_options(mut self, options: HttpSourceOptions) -> Self {
        self.options = options;
        self
    }

    /// Sends full snapshots on `tx` until `shutdown` (or until `tx` is closed).
    pub async fn run(self, tx: mpsc::Sender<SourceUpdate>, shutdown: CancellationToken) {
        let mut tick = crate::local_tasks::interval(self.options.period);
        let mut last_body: Option<bytes::Bytes> = None;
        let mut last_sent: Option<Vec<Arc<Pod>>> = None;
        let mut failing = false;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            let fetched = tokio::select! {
                _ = shutdown.cancelled() => return,
                r = self.fetch() => r,
            };
            let body = match fetched {
                Ok(b) => {
                    if failing {
                        log::info!("http source: {} answers again", self.url);
                    }
                    failing = false;
                    b
                }
                Err(e) => {
                    if !failing {
                        log::warn!("http source: {e}; keeping the pods it served");
                    }
                    failing = true;
                    continue;
                }
            };
            // kubelet: identical bytes → nothing to do.
            if last_body.as_ref() == Some(&body) {
                continue;
            }
            let (pods, problems) = self.pods(&body);
            for p in problems {
                log::warn!("http source: {p}");
            }
            last_body = Some(body);
            let pods: Vec<Arc<Pod>> = pods.into_iter().map(Arc::new).collect();
            if last_sent.as_ref() == Some(&pods) {
                continue;
            }
            let update = SourceUpdate {
                source: SOURCE,
                pods: pods.clone(),
                objects: None,
            };
            tokio::select! {
                sent = tx.send(update) => if sent.is_err() { return },
                _ = shutdown.cancelled() => return,
            }
            last_sent = Some(pods);
        }
    }

    async fn fetch(&self) -> Result<bytes::Bytes, HttpSourceError> {
        let resp = self
            .client
            .request(
                Method::GET,
                &self.url,
                &self.headers,
                None,
                self.options.timeout,
                self.options.max_bytes,
            )
            .await?;
        if resp.status != 200 {
            return Err(HttpSourceError::Status {
                url: self.url.clone(),
                code: resp.status,
            });
        }
        Ok(resp.body)
    }

    /// The static pods of a body (Pod or PodList), and one message per item left out.
    fn pods(&self, body: &[u8]) -> (Vec<Pod>, Vec<String>) {
        pods_from_body(&self.url, body, &self.node_name, self.clock.now())
    }
}

/// A body → static pods (pure): empty → none; a `PodList` → each item; else one Pod.
pub(crate) fn pods_from_body(
    url: &str,
    body: &[u8],
    node_name: &str,
    seen: crate::clock::UnixNanos,
) -> (Vec<Pod>, Vec<String>) {
    if body.iter().all(u8::is_ascii_whitespace) {
        return (Vec::new(), Vec::new());
    }
    let doc: Option<Value> = if body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') {
        serde_json::from_slice(body).ok()
    } else {
        // YAML through the one conversion to a JSON value (api::yaml_value).
        std::str::from_utf8(body)
            .ok()
            .and_then(|text| crate::api::yaml_value(text).ok())
    };
    let is_list = doc
        .as_ref()
        .and_then(|d| d.get("kind"))
        .and_then(Value::as_str)
        == Some("PodList");
    if !is_list {
        return match manifest::load(url, body, node_name, SOURCE, seen) {
            Ok(l) => {
                let problems = fields::unknown_fields_warning(url, &l.unknown_fields);
                (vec![l.pod], problems.into_iter().collect())
            }
            Err(e) => (Vec::new(), vec![e.to_string()]),
        };
    }
    let items = doc
        .as_ref()
        .and_then(|d| d.get("items"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut pods: Vec<Pod> = Vec::new();
    let mut problems = Vec::new();
    for (i, mut item) in items.into_iter().enumerate() {
        // Items of a v1 PodList may leave out their own type meta.
        if let Some(obj) = item.as_object_mut() {
            obj.entry("apiVersion").or_insert_with(|| Value::from("v1"));
            obj.entry("kind").or_insert_with(|| Value::from("Pod"));
        }
        let bytes = serde_json::to_vec(&item).unwrap_or_default();
        match manifest::load(url, &bytes, node_name, SOURCE, seen) {
            Ok(l) => {
                let what = format!("{url}: items[{i}]");
                problems.extend(fields::unknown_fields_warning(&what, &l.unknown_fields));
                if pods.iter().any(|p| p.full_name() == l.pod.full_name()) {
                    problems.push(format!(
                        "{url}: items[{i}]: pod {} is listed twice; the first wins",
                        l.pod.full_name()
                    ));
                } else {
                    pods.push(l.pod);
                }
            }
            Err(e) => problems.push(format!("items[{i}]: {e}")),
        }
    }
    (pods, problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    const URL: &str = "http://config/pods";

    #[test]
    fn pod_podlist_empty_and_bad_items() {
        let pod = b"apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers: [{name: c, image: busybox}]\n";
        let (pods, problems) = pods_from_body(URL, pod, "pi", 1);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(pods.len(), 1);
        assert_eq!(pods[0].metadata.name, "web-pi");
        assert_eq!(
            pods[0].annotation("kubernetes.io/config.source"),
            Some("http")
        );

        let list = br#"{"kind": "PodList", "apiVersion": "v1", "items": [
            {"metadata": {"name": "a"}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
            {"metadata": {"name": "b"}, "spec": {"containers": "nope"}},
            {"metadata": {"name": "a"}, "spec": {"containers": [{"name": "c", "image": "j"}]}},
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "c"},
             "spec": {"containers": [{"name": "c", "image": "i"}]}}]}"#;
        let (pods, problems) = pods_from_body(URL, list, "pi", 1);
        let names: Vec<&str> = pods.iter().map(|p| p.metadata.name.as_str()).collect();
        assert_eq!(names, ["a-pi", "c-pi"]);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert_ne!(pods[0].uid(), pods[1].uid());

        assert_eq!(pods_from_body(URL, b"  \n", "pi", 1).0, vec![]);
        let (pods, problems) = pods_from_body(URL, b"{broken", "pi", 1);
        assert!(pods.is_empty());
        assert!(problems[0].contains(URL), "{problems:?}");
    }

    #[test]
    fn same_content_same_uid() {
        let pod = b"apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers: [{name: c, image: busybox}]\n";
        let a = pods_from_body(URL, pod, "pi", 1).0;
        let b = pods_from_body(URL, pod, "pi", 2).0;
        assert_eq!(a[0].uid(), b[0].uid());
        let c = pods_from_body("http://other/", pod, "pi", 1).0;
        assert_ne!(a[0].uid(), c[0].uid(), "the URL is part of the identity");
    }
}
