//! Cluster mode's secret, configMap and token managers (kubelet: `pkg/kubelet/configmap`,
//! `pkg/kubelet/secret` with the default `Watch` strategy, `pkg/kubelet/token`).
//!
//! Owns: one task per API object the agent's pods reference (the agent publishes the set,
//! [`ObjectChannels::wanted`](super::ObjectChannels::wanted)):
//! - a ConfigMap or Secret: list `…/configmaps?fieldSelector=metadata.name=<name>`, then
//!   watch from that resourceVersion (a single-object watch: the NodeRestriction admission
//!   lets a node read only what its pods reference); resumed after its timeout, relisted on
//!   410, back-off 1 s → 30 s on failures;
//! - a service account token: `POST …/serviceaccounts/<sa>/token` bound to the pod (name and
//!   UID), refreshed when it is older than 80 % of its lifetime or 24 h (kubelet:
//!   `requiresRefresh`), retried with back-off;
//!
//! and the full set it holds, sent to the agent on every change ([`ObjectsUpdate`]), plus
//! the offline checkpoint of that set (`<root-dir>/checkpoints/objects.json`, mode 0600): a
//! picolet restarted while the apiserver is away starts with the objects its pods had.
//!
//! Must never: log a value (a Secret's or a token's bytes), drop an object because of an
//! error (only a successful list without it, a `DELETED` event, or no pod referencing it
//! any more removes it), or start a watch for an object no pod references.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::api;
use crate::api::cluster::{ObjectList, WatchEvent};
use crate::clock::{self, Clock, UnixNanos};
use crate::config_data::ObjectsUpdate;
use crate::config_data::{self, Kind, Object, ObjectKey, Scope};
use crate::kube::{ApiError, Backoff, Client, query};

/// kubelet token manager: refresh a token older than 80 % of its lifetime, or 24 h.
pub(crate) fn refresh_at(issued: UnixNanos, expires: UnixNanos) -> UnixNanos {
    let ttl = (expires - issued).max(0);
    let by_ratio = issued + ttl / 10 * 8;
    let by_age = issued + clock::nanos(Duration::from_secs(24 * 3600));
    by_ratio.min(by_age)
}

/// One object's news.
enum News {
    Set(Box<Object>),
    Gone(ObjectKey),
}

pub(crate) struct ObjectManager<C: Clock> {
    client: Client,
    clock: C,
    checkpoint: Option<PathBuf>,
    backoff_initial: Duration,
    backoff_max: Duration,
    watch_timeout: Duration,
}

impl<C: Clock> ObjectManager<C> {
    pub(crate) fn new(client: Client, clock: C, root_dir: Option<&Path>) -> Self {
        ObjectManager {
            client,
            clock,
            checkpoint: root_dir.map(|r| r.join("checkpoints").join("objects.json")),
            backoff_initial: Duration::from_secs(1),
            backoff_max: Duration::from_secs(30),
            watch_timeout: Duration::from_secs(300),
        }
    }

    /// Runs until `shutdown`: follows `wanted`, sends the held set on `tx`.
    pub(crate) async fn run(
        self,
        mut wanted: watch::Receiver<BTreeSet<ObjectKey>>,
        tx: mpsc::Sender<ObjectsUpdate>,
        shutdown: CancellationToken,
    ) {
        let (news_tx, mut news_rx) = mpsc::channel::<News>(64);
        let mut tasks: HashMap<ObjectKey, CancellationToken> = HashMap::new();
        let mut held: BTreeMap<ObjectKey, Object> = BTreeMap::new();
        // The checkpoint first: what pods had before a restart, until the apiserver answers.
        if let Some(path) = &self.checkpoint {
            held = read_checkpoint(path);
            if !held.is_empty() {
                log::info!(
                    "api objects: {} ConfigMaps, Secrets and tokens from the checkpoint",
                    held.len()
                );
                let update = ObjectsUpdate {
                    objects: held.values().cloned().collect(),
                };
                if tx.send(update).await.is_err() {
                    return;
                }
            }
        }
        let mut want_dirty = true;
        // Until the agent first says what it wants, the checkpoint's objects stay.
        let mut wanted_seen = false;
        let mut last_write: Option<tokio::task::JoinHandle<()>> = None;
        loop {
            let mut changed = false;
            if want_dirty {
                want_dirty = false;
                let want = wanted.borrow_and_update().clone();
                tasks.retain(|k, token| {
                    if want.contains(k) {
                        return true;
                    }
                    token.cancel();
                    false
                });
                if wanted_seen {
                    let before = held.len();
                    held.retain(|k, _| want.contains(k));
                    changed |= held.len() != before;
                }
                for key in want {
                    if tasks.contains_key(&key) || key.scope != Scope::Api {
                        continue;
                    }
                    let token = shutdown.child_token();
                    tasks.insert(key.clone(), token.clone());
                    self.spawn(key, news_tx.clone(), token);
                }
            } else {
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    r = wanted.changed() => {
                        if r.is_err() {
                            break;
                        }
                        want_dirty = true;
                        wanted_seen = true;
                        continue;
                    }
                    Some(news) = news_rx.recv() => match news {
                        News::Set(o) => {
                            if tasks.contains_key(&o.key) && held.get(&o.key) != Some(&o) {
                                held.insert(o.key.clone(), *o);
                                changed = true;
                            }
                        }
                        News::Gone(key) => changed = held.remove(&key).is_some(),
                    },
                }
            }
            if changed {
                if let Some(path) = &self.checkpoint {
                    // fsync and rename off the one thread (an SD card is slow).
                    // One write at a time: they share the temporary file.
                    if let Some(previous) = last_write.take() {
                        let _ = previous.await;
                    }
                    let (path, held) = (path.clone(), held.clone());
                    last_write = Some(tokio::task::spawn_blocking(move || {
                        write_checkpoint(&path, &held)
                    }));
                }
                let update = ObjectsUpdate {
                    objects: held.values().cloned().collect(),
                };
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    sent = tx.send(update) => if sent.is_err() { break },
                }
            }
        }
        for token in tasks.values() {
            token.cancel();
        }
    }

    fn spawn(&self, key: ObjectKey, news: mpsc::Sender<News>, stop: CancellationToken) {
        let worker = KeyWorker {
            client: self.client.clone(),
            clock: self.clock.clone(),
            backoff: Backoff::new(self.backoff_initial, self.backoff_max, &key.name),
            watch_timeout: self.watch_timeout,
            key,
            news,
            stop,
        };
        crate::local_tasks::spawn_local(worker.run());
    }
}

/// Why an apiserver answer is not used (logged; the object read before is kept).
#[derive(Debug)]
enum AnswerError {
    /// Not a ConfigMap or Secret (a Secret's error redacted: its values are never logged).
    Decode(api::DecodeError),
    /// A Secret refused: the fields at fault, not their values.
    Secret(Vec<config_data::ObjectError>),
    ConfigMap(Vec<config_data::ObjectError>),
    /// Another object than the one followed.
    WrongObject {
        got: ObjectKey,
        want: ObjectKey,
    },
}

impl std::fmt::Display for AnswerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AnswerError::Decode(e) => write!(f, "{e}"),
            AnswerError::Secret(errors) => {
                for (i, e) in errors.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    f.write_str(&e.field)?;
                }
                Ok(())
            }
            AnswerError::ConfigMap(errors) => {
                for (i, e) in errors.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    write!(f, "{e}")?;
                }
                Ok(())
            }
            AnswerError::WrongObject { got, want } => write!(f, "the answer is {got}, not {want}"),
        }
    }
}

impl std::error::Error for AnswerError {}

struct KeyWorker<C: Clock> {
    client: Client,
    clock: C,
    backoff: Backoff,
    watch_timeout: Duration,
    key: ObjectKey,
    news: mpsc::Sender<News>,
    stop: CancellationToken,
}

impl<C: Clock> KeyWorker<C> {
    async fn run(mut self) {
        let result = match self.key.kind {
            Kind::Token => self.tokens().await,
            Kind::ConfigMap | Kind::Secret => self.follow().await,
        };
        if let Err(()) = result {
            log::debug!("api objects: {} no longer followed", self.key);
        }
    }

    async fn sleep(&mut self, d: Duration) -> Result<(), ()> {
        tokio::select! {
            _ = self.stop.cancelled() => Err(()),
            _ = tokio::time::sleep(d) => Ok(()),
        }
    }

    async fn send(&self, news: News) -> Result<(), ()> {
        tokio::select! {
            _ = self.stop.cancelled() => Err(()),
            r = self.news.send(news) => r.map_err(|_| ()),
        }
    }

    fn collection(&self) -> String {
        let plural = match self.key.kind {
            Kind::Secret => "secrets",
            _ => "configmaps",
        };
        format!("/api/v1/namespaces/{}/{plural}", self.key.namespace)
    }

    fn decode(&self, v: &Value) -> Result<Object, AnswerError> {
        let origin = "apiserver";
        let parsed = match self.key.kind {
            // Redacted: the error is logged, and a Secret's values never are.
            Kind::Secret => api::from_value::<api::Secret>(v)
                .map_err(|e| AnswerError::Decode(e.redacted()))
                .and_then(|s| {
                    config_data::from_secret(&s, Scope::Api, origin).map_err(AnswerError::Secret)
                }),
            _ => api::from_value::<api::ConfigMap>(v)
                .map_err(AnswerError::Decode)
                .and_then(|c| {
                    config_data::from_config_map(&c, Scope::Api, origin)
                        .map_err(AnswerError::ConfigMap)
                }),
        }?;
        if parsed.key != self.key {
            return Err(AnswerError::WrongObject {
                got: parsed.key,
                want: self.key.clone(),
            });
        }
        Ok(parsed)
    }

    /// List + watch of one ConfigMap or Secret.
    async fn follow(&mut self) -> Result<(), ()> {
        let selector = format!("metadata.name={}", self.key.name);
        let mut rv: Option<String> = None;
        let mut failing = false;
        loop {
            if rv.is_none() {
                let path = format!(
                    "{}{}",
                    self.collection(),
                    query(&[("fieldSelector", &selector)])
                );
                let listed = tokio::select! {
                    _ = self.stop.cancelled() => return Err(()),
                    r = self.client.get::<ObjectList>(&path) => r,
                };
                match listed {
                    Ok(list) => {
                        if failing {
                            log::info!("api objects: {} can be read again", self.key);
                            failing = false;
                        }
                        self.backoff.reset();
                        match list.items.first().map(|v| self.decode(v)) {
                            Some(Ok(o)) => self.send(News::Set(Box::new(o))).await?,
                            Some(Err(e)) => log::warn!(
                                "api objects: {}: {e}; keeping what was read before",
                                self.key
                            ),
                            None => self.send(News::Gone(self.key.clone())).await?,
                        }
                        rv = Some(list.metadata.resource_version);
                    }
                    Err(e) => {
                        if !failing {
                            log::warn!("api objects: cannot read {}: {e}; retrying", self.key);
                            failing = true;
                        }
                        let d = self.backoff.next_delay();
                        self.sleep(d).await?;
                        continue;
                    }
                }
            }
            let Some(from) = rv.clone() else { continue };
            let timeout = self.watch_timeout.as_secs().max(1).to_string();
            let path = format!(
                "{}{}",
                self.collection(),
                query(&[
                    ("fieldSelector", &selector),
                    ("resourceVersion", &from),
                    ("timeoutSeconds", &timeout),
                    ("watch", "true"),
                ])
            );
            let opened = tokio::select! {
                _ = self.stop.cancelled() => return Err(()),
                r = self.client.watch(&path) => r,
            };
            let mut stream = match opened {
                Ok(s) => s,
                Err(e) if e.is_gone() => {
                    rv = None;
                    continue;
                }
                Err(e) => {
                    log::debug!("api objects: cannot watch {}: {e}", self.key);
                    rv = None;
                    let d = self.backoff.next_delay();
                    self.sleep(d).await?;
                    continue;
                }
            };
            let deadline =
                tokio::time::Instant::now() + self.watch_timeout + Duration::from_secs(30);
            loop {
                let next = tokio::select! {
                    _ = self.stop.cancelled() => return Err(()),
                    r = tokio::time::timeout_at(deadline, stream.next()) => r,
                };
                let ev: WatchEvent = match next {
                    Ok(Some(Ok(ev))) => ev,
                    Ok(Some(Err(ApiError::Decode { .. }))) => continue,
                    // Timed out, ended, broken: resume (or relist on a broken one).
                    Ok(None) => break,
                    Err(_) | Ok(Some(Err(_))) => {
                        rv = None;
                        break;
                    }
                };
                let object_rv = ev
                    .object
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                match ev.type_.as_str() {
                    "ADDED" | "MODIFIED" => match self.decode(&ev.object) {
                        Ok(o) => self.send(News::Set(Box::new(o))).await?,
                        Err(e) => log::warn!(
                            "api objects: {}: {e}; keeping what was read before",
                            self.key
                        ),
                    },
                    "DELETED" => self.send(News::Gone(self.key.clone())).await?,
                    "ERROR" => {
                        rv = None;
                        break;
                    }
                    _ => {}
                }
                if let Some(r) = object_rv {
                    rv = Some(r);
                }
            }
        }
    }

    /// TokenRequest, then refresh before it ages.
    async fn tokens(&mut self) -> Result<(), ()> {
        let Some(spec) = config_data::parse_token_name(&self.key.name) else {
            return Err(());
        };
        let path = format!(
            "/api/v1/namespaces/{}/serviceaccounts/{}/token",
            self.key.namespace, spec.service_account
        );
        let mut body = json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "expirationSeconds": spec.expiration_seconds,
                "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": spec.pod_name, "uid": spec.pod_uid},
            }
        });
        if !spec.audience.is_empty() {
            body["spec"]["audiences"] = json!([spec.audience]);
        }
        loop {
            let answer = tokio::select! {
                _ = self.stop.cancelled() => return Err(()),
                r = self.client.create::<Value, Value>(&path, &body) => r,
            };
            let issued = self.clock.now();
            let token = answer.as_ref().ok().and_then(|v| {
                let t = v.pointer("/status/token")?.as_str()?.to_string();
                let exp = v
                    .pointer("/status/expirationTimestamp")
                    .and_then(Value::as_str)
                    .and_then(clock::parse_rfc3339);
                Some((t, exp))
            });
            match (answer, token) {
                (_, Some((token, exp))) => {
                    self.backoff.reset();
                    let expires = exp.unwrap_or(
                        issued
                            + clock::nanos(Duration::from_secs(
                                spec.expiration_seconds.max(1) as u64
                            )),
                    );
                    let object = Object {
                        key: self.key.clone(),
                        data: [("token".to_string(), token.into_bytes())].into(),
                        origin: "apiserver".into(),
                    };
                    self.send(News::Set(Box::new(object))).await?;
                    let wait = (refresh_at(issued, expires) - issued).max(0);
                    log::info!(
                        "api objects: token of service account {}/{} for pod {} issued; refreshed in {} s",
                        self.key.namespace,
                        spec.service_account,
                        spec.pod_name,
                        wait / 1_000_000_000
                    );
                    self.sleep(Duration::from_nanos(wait as u64).max(Duration::from_secs(1)))
                        .await?;
                }
                (Err(e), _) => {
                    log::warn!(
                        "api objects: TokenRequest for service account {}/{} (pod {}): {e}; retrying",
                        self.key.namespace,
                        spec.service_account,
                        spec.pod_name
                    );
                    let d = self.backoff.next_delay();
                    self.sleep(d).await?;
                }
                (Ok(_), None) => {
                    log::warn!("api objects: a TokenRequest answer without status.token; retrying");
                    let d = self.backoff.next_delay();
                    self.sleep(d).await?;
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// The checkpoint

fn read_checkpoint(path: &Path) -> BTreeMap<ObjectKey, Object> {
    let Ok(text) = std::fs::read(path) else {
        return BTreeMap::new();
    };
    let Ok(Value::Array(items)) = serde_json::from_slice::<Value>(&text) else {
        log::warn!("{}: not a checkpoint of objects; ignored", path.display());
        return BTreeMap::new();
    };
    let mut out = BTreeMap::new();
    for item in items {
        let kind = match item.get("kind").and_then(Value::as_str) {
            Some("ConfigMap") => Kind::ConfigMap,
            Some("Secret") => Kind::Secret,
            Some("ServiceAccountToken") => Kind::Token,
            _ => continue,
        };
        let s = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or_default();
        let key = ObjectKey::new(Scope::Api, kind, s("namespace"), s("name"));
        let mut data = BTreeMap::new();
        if let Some(Value::Object(d)) = item.get("data") {
            for (k, v) in d {
                if let Some(bytes) = v.as_str().and_then(api::decode_base64) {
                    data.insert(k.clone(), bytes);
                }
            }
        }
        out.insert(
            key.clone(),
            Object {
                key,
                data,
                origin: "checkpoint".into(),
            },
        );
    }
    out
}

fn write_checkpoint(path: &Path, held: &BTreeMap<ObjectKey, Object>) {
    let items: Vec<Value> = held
        .values()
        .map(|o| {
            let mut data = serde_json::Map::new();
            for (k, v) in &o.data {
                data.insert(k.clone(), Value::String(api::encode_base64(v)));
            }
            json!({"kind": o.key.kind.as_str(), "namespace": o.key.namespace, "name": o.key.name, "data": data})
        })
        .collect();
    let bytes = match serde_json::to_vec(&items) {
        Ok(b) => b,
        Err(_) => return,
    };
    if let Err(e) = crate::checkpoint::write_private(path, &bytes) {
        log::warn!(
            "{}: cannot write the objects checkpoint: {e}",
            path.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_refresh_at_80_percent_or_a_day() {
        let s = 1_000_000_000i64;
        let h = 3600 * s;
        // (issued, expires, refresh at)
        let cases = [
            (0, 3607 * s, 3607 * s / 10 * 8),
            (10 * s, 10 * s + h, 10 * s + h / 10 * 8),
            (0, 48 * h, 24 * h),
            (5 * s, 5 * s, 5 * s),
            (5 * s, 0, 5 * s),
        ];
        for (issued, expires, want) in cases {
            assert_eq!(refresh_at(issued, expires), want, "{issued} {expires}");
        }
    }

    #[test]
    fn base64_round_trips() {
        for data in [
            &b""[..],
            b"a",
            b"ab",
            b"abc",
            b"abcd",
            &[0u8, 255, 128, 7, 9],
        ] {
            let enc = api::encode_base64(data);
            assert_eq!(api::decode_base64(&enc).as_deref(), Some(data), "{enc}");
        }
        assert_eq!(api::encode_base64(b"s3cret"), "czNjcmV0");
    }

    #[test]
    fn the_checkpoint_round_trips_and_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("checkpoints/objects.json");
        let key = ObjectKey::new(Scope::Api, Kind::Secret, "ns", "db");
        let o = Object {
            key: key.clone(),
            data: [("password".to_string(), b"s3cret".to_vec())].into(),
            origin: "apiserver".into(),
        };
        let held: BTreeMap<ObjectKey, Object> = [(key.clone(), o)].into();
        write_checkpoint(&path, &held);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let back = read_checkpoint(&path);
        assert_eq!(back[&key].data["password"], b"s3cret");
    }
}
