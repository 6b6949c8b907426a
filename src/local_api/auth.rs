//! Who is calling the node API, and may they: the kubelet's authentication and
//! authorization of its own API (kubelet: `pkg/kubelet/server/auth.go`,
//! `cmd/kubelet/app/auth.go`, `InstallAuthFilter` in `server.go`).
//!
//! Authentication, in the kubelet's order: a client certificate `--client-ca-file` signed
//! (rustls verified it; user = CN, groups = O), else a bearer token — picolet's own local
//! token (the board's kubeconfig) or, with `--authentication-token-webhook`, any token the
//! apiserver's TokenReview accepts — else, with `--anonymous-auth`, `system:anonymous`
//! (group `system:unauthenticated`). A token that is present but refused is 401 even with
//! anonymous auth on (kubelet: `unionauth.NewFailOnError`). Authenticated users get group
//! `system:authenticated`.
//!
//! Authorization: `AlwaysAllow`, or `Webhook` = one SubjectAccessReview per request
//! attribute set ([`attributes`]: verb from the method, resource `nodes`, the subresource
//! from the path, name = the node's name), the first allowed subresource wins (kubelet:
//! `KubeletFineGrainedAuthz`, on by default since 1.33: `pods` then `proxy`, …).
//!
//! Caches as the kubelet's (`--authentication-token-webhook-cache-ttl` 2m for both
//! answers, `--authorization-webhook-cache-authorized-ttl` 5m, `-unauthorized-ttl` 30s);
//! errors are never cached. Tokens are cached by their SHA-256, never kept or logged.
//!
//! Deliberate difference: picolet's local token (`<root-dir>/kubeconfig`) stays a local
//! admin — authenticated and allowed without asking the apiserver — so the board's
//! `kubectl`/`picolet get` work offline, as in standalone mode.
//!
//! Owns: the pure mapping, the user of a certificate, the TTL caches, the two webhook calls.
//! Must never: log or return a token, or cache an error.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::Value;

use crate::json::object;
use tokio::time::Instant;

/// `--authorization-mode` (kubelet: `authorization.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    AlwaysAllow,
    Webhook,
}

impl Mode {
    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "AlwaysAllow" => Some(Mode::AlwaysAllow),
            "Webhook" => Some(Mode::Webhook),
            _ => None,
        }
    }
}

/// The `authentication:` / `authorization:` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthConfig {
    /// `--anonymous-auth`. picolet's default is off (the kubelet's flag default is on, its
    /// config file's off): a board's API is not open to its LAN unless asked.
    pub anonymous: bool,
    /// `--authentication-token-webhook`.
    pub token_webhook: bool,
    /// `--authentication-token-webhook-cache-ttl` (2m).
    pub token_ttl: Duration,
    /// `--authorization-mode` (AlwaysAllow).
    pub mode: Mode,
    /// `--authorization-webhook-cache-authorized-ttl` (5m).
    pub authorized_ttl: Duration,
    /// `--authorization-webhook-cache-unauthorized-ttl` (30s).
    pub unauthorized_ttl: Duration,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            anonymous: false,
            token_webhook: false,
            token_ttl: Duration::from_secs(120),
            mode: Mode::AlwaysAllow,
            authorized_ttl: Duration::from_secs(300),
            unauthorized_ttl: Duration::from_secs(30),
        }
    }
}

impl AuthConfig {
    /// Needs the apiserver (a webhook is on).
    pub fn uses_apiserver(&self) -> bool {
        self.token_webhook || self.mode == Mode::Webhook
    }
}

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
}

pub(crate) const ANONYMOUS: &str = "system:anonymous";
pub(crate) const UNAUTHENTICATED: &str = "system:unauthenticated";
pub(crate) const AUTHENTICATED: &str = "system:authenticated";

impl User {
    pub fn anonymous() -> User {
        User {
            name: ANONYMOUS.into(),
            uid: String::new(),
            groups: vec![UNAUTHENTICATED.into()],
        }
    }

    /// kubelet: `group.NewAuthenticatedGroupAdder` — every authenticated user is in
    /// `system:authenticated`.
    fn authenticated(mut self) -> User {
        if !self.groups.iter().any(|g| g == AUTHENTICATED) {
            self.groups.push(AUTHENTICATED.into());
        }
        self
    }
}

/// The request's authorizer attributes (resource `nodes`, name = the node): the verb and
/// the subresources to try in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Attributes {
    pub verb: &'static str,
    pub subresources: &'static [&'static str],
}

/// kubelet: `isSubpath` — `path` itself or below it.
fn is_subpath(path: &str, base: &str) -> bool {
    let base = base.trim_end_matches('/');
    path == base || path.strip_prefix(base).is_some_and(|r| r.starts_with('/'))
}

/// kubelet: `GetRequestAttributes` with `KubeletFineGrainedAuthz` (beta, on).
pub(crate) fn attributes(method: &str, path: &str) -> Attributes {
    let verb = match method {
        "POST" => "create",
        "GET" => "get",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        // kubelet: any other method (HEAD, OPTIONS) has an empty verb.
        _ => "",
    };
    let subresources: &'static [&'static str] = if is_subpath(path, "/stats") {
        &["stats"]
    } else if is_subpath(path, "/metrics") {
        &["metrics"]
    } else if is_subpath(path, "/logs") {
        &["log"]
    } else if is_subpath(path, "/checkpoint") {
        &["checkpoint"]
    } else if is_subpath(path, "/pods") || is_subpath(path, "/runningpods") {
        &["pods", "proxy"]
    } else if is_subpath(path, "/healthz") {
        &["healthz", "proxy"]
    } else if is_subpath(path, "/configz") {
        &["configz", "proxy"]
    } else if is_subpath(path, "/statusz") {
        &["statusz", "proxy"]
    } else {
        &["proxy"]
    };
    Attributes { verb, subresources }
}

/// The user of a verified client certificate (DER): CN = name, each O = a group
/// (kubelet: `x509.CommonNameUserConversion`). `None` if the subject cannot be read or has
/// no CN.
pub(crate) fn cert_user(der: &[u8]) -> Option<User> {
    // Certificate ::= SEQ { tbsCertificate SEQ { [0] version?, serial, sigAlg, issuer,
    // validity, subject, … } … }
    let tlv = crate::x509::read_tlv;
    let (_, cert, _) = tlv(der)?;
    let (_, mut tbs, _) = tlv(cert)?;
    let mut fields = Vec::with_capacity(6);
    while fields.len() < 6 && !tbs.is_empty() {
        let (tag, content, rest) = tlv(tbs)?;
        if !(fields.is_empty() && tag == 0xa0) {
            fields.push(content);
        }
        tbs = rest;
    }
    // serial, signature, issuer, validity, subject
    let mut subject = *fields.get(4)?;
    let (mut name, mut groups) = (None, Vec::new());
    while !subject.is_empty() {
        let (_, mut rdn, rest) = tlv(subject)?; // SET
        subject = rest;
        while !rdn.is_empty() {
            let (_, atv, r) = tlv(rdn)?; // SEQ { OID, value }
            rdn = r;
            let (tag, oid, v) = tlv(atv)?;
            let (_, value, _) = tlv(v)?;
            let value = std::str::from_utf8(value).ok()?.to_string();
            match (tag, oid) {
                (0x06, [0x55, 0x04, 0x03]) => name = Some(value),
                (0x06, [0x55, 0x04, 0x0a]) => groups.push(value),
                _ => {}
            }
        }
    }
    Some(User {
        name: name.filter(|n| !n.is_empty())?,
        uid: String::new(),
        groups,
    })
}

/// A cache of answers with a time to live each, bounded (kubelet: the webhooks' LRU
/// caches). Time is given by the caller.
#[derive(Debug)]
pub(crate) struct TtlCache<V> {
    entries: HashMap<String, (V, Instant)>,
}

/// Entries kept at most (the kubelet's caches are bounded LRUs too).
const CACHE_MAX: usize = 1024;

impl<V: Clone> Default for TtlCache<V> {
    fn default() -> Self {
        TtlCache {
            entries: HashMap::new(),
        }
    }
}

impl<V: Clone> TtlCache<V> {
    pub(crate) fn get(&self, key: &str, now: Instant) -> Option<V> {
        self.entries
            .get(key)
            .filter(|(_, until)| now < *until)
            .map(|(v, _)| v.clone())
    }

    pub(crate) fn put(&mut self, key: String, value: V, ttl: Duration, now: Instant) {
        if ttl.is_zero() {
            return;
        }
        if self.entries.len() >= CACHE_MAX {
            self.entries.retain(|_, (_, until)| now < *until);
            if self.entries.len() >= CACHE_MAX {
                self.entries.clear();
            }
        }
        self.entries.insert(key, (value, now + ttl));
    }
}

/// The cache key of a token: its SHA-256 (the token itself is never kept).
pub(crate) fn token_key(token: &str) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    // A letter per half byte (a..p): a key, not for display.
    let mut key = String::with_capacity(64);
    for b in d.as_ref() {
        key.push(char::from(b'a' + (b >> 4)));
        key.push(char::from(b'a' + (b & 15)));
    }
    key
}

/// The cache key of a decision: who, verb, subresource.
pub(crate) fn decision_key(user: &User, verb: &str, subresource: &str) -> String {
    format!(
        "{}\u{0}{}\u{0}{}\u{0}{verb}\u{0}{subresource}",
        user.name,
        user.uid,
        user.groups.join(",")
    )
}

/// The TokenReview to POST (authentication.k8s.io/v1).
pub(crate) fn token_review(token: &str) -> Value {
    object(&mut [
        ("apiVersion", "authentication.k8s.io/v1".into()),
        ("kind", "TokenReview".into()),
        ("spec", object(&mut [("token", token.into())])),
    ])
}

/// The user a TokenReview's answer names, `None` if it was not authenticated.
pub(crate) fn token_review_user(answer: &Value) -> Option<User> {
    let status = answer.get("status")?;
    if status.get("authenticated").and_then(Value::as_bool) != Some(true) {
        return None;
    }
    let user = status.get("user")?;
    let name = user.get("username")?.as_str()?.to_string();
    if name.is_empty() {
        return None;
    }
    let groups = user
        .get("groups")
        .and_then(Value::as_array)
        .map(|g| {
            g.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let uid = user
        .get("uid")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    Some(User { name, uid, groups })
}

/// The SubjectAccessReview to POST (authorization.k8s.io/v1) for one subresource.
pub(crate) fn access_review(user: &User, verb: &str, subresource: &str, node: &str) -> Value {
    let attributes = object(&mut [
        ("verb", verb.into()),
        ("group", "".into()),
        ("version", "v1".into()),
        ("resource", "nodes".into()),
        ("subresource", subresource.into()),
        ("name", node.into()),
    ]);
    let groups = user
        .groups
        .iter()
        .map(|g| Value::from(g.as_str()))
        .collect();
    let mut spec = object(&mut [
        ("user", user.name.as_str().into()),
        ("groups", Value::Array(groups)),
        ("resourceAttributes", attributes),
    ]);
    if !user.uid.is_empty() {
        spec["uid"] = user.uid.as_str().into();
    }
    object(&mut [
        ("apiVersion", "authorization.k8s.io/v1".into()),
        ("kind", "SubjectAccessReview".into()),
        ("spec", spec),
    ])
}

/// A SubjectAccessReview's answer: allowed (`status.allowed` and not `denied`).
pub(crate) fn access_allowed(answer: &Value) -> bool {
    let s = &answer["status"];
    s["allowed"].as_bool() == Some(true) && s["denied"].as_bool() != Some(true)
}

/// The outcome of checking one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    /// 401 `Unauthorized`.
    Unauthenticated,
    /// 403, kubelet's message: `Forbidden (user=…, verb=…, resource=nodes, subresource=…)`.
    Forbidden(String),
    /// 500, kubelet's `Authorization error (…)`: the webhook could not answer.
    Error(String),
}

/// The authenticator and authorizer of one node API: the settings, the webhook client and
/// the caches. Single-threaded (the API runs on the `LocalSet`).
pub struct Auth {
    pub config: AuthConfig,
    pub node_name: String,
    client: Option<crate::kube::Client>,
    tokens: std::cell::RefCell<TtlCache<Option<User>>>,
    decisions: std::cell::RefCell<TtlCache<bool>>,
}

const TOKEN_REVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews";
const ACCESS_REVIEWS: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";

impl Auth {
    /// `client`: the node's apiserver client (needed by the webhooks; without one they
    /// answer errors).
    pub fn new(config: AuthConfig, node_name: String, client: Option<crate::kube::Client>) -> Auth {
        Auth {
            config,
            node_name,
            client,
            tokens: Default::default(),
            decisions: Default::default(),
        }
    }

    /// Authenticates and authorizes one request. `cert_user`: the verified client
    /// certificate's user; `local_token`: the request carries picolet's own token.
    pub async fn check(
        &self,
        method: &str,
        path: &str,
        cert_user: Option<User>,
        bearer: Option<&str>,
        local_token: bool,
    ) -> Verdict {
        let user = if let Some(u) = cert_user {
            u.authenticated()
        } else if local_token {
            return Verdict::Allowed;
        } else if let Some(token) = bearer {
            match self.review_token(token).await {
                Ok(Some(u)) => u.authenticated(),
                // kubelet: a refused token is 401, even with anonymous auth on.
                Ok(None) => return Verdict::Unauthenticated,
                Err(e) => {
                    log::warn!("node API: TokenReview failed: {e}");
                    return Verdict::Unauthenticated;
                }
            }
        } else if self.config.anonymous {
            User::anonymous()
        } else {
            return Verdict::Unauthenticated;
        };
        if self.config.mode == Mode::AlwaysAllow {
            return Verdict::Allowed;
        }
        let attrs = attributes(method, path);
        let mut last = "";
        for sub in attrs.subresources {
            last = sub;
            match self.review_access(&user, attrs.verb, sub).await {
                Ok(true) => return Verdict::Allowed,
                Ok(false) => {}
                Err(e) => {
                    log::warn!("node API: SubjectAccessReview failed: {e}");
                    return Verdict::Error(format!(
                        "Authorization error (user={}, verb={}, resource=nodes, subresource={sub})",
                        user.name, attrs.verb
                    ));
                }
            }
        }
        Verdict::Forbidden(format!(
            "Forbidden (user={}, verb={}, resource=nodes, subresource={last})",
            user.name, attrs.verb
        ))
    }

    async fn review_token(&self, token: &str) -> Result<Option<User>, ReviewError> {
        if !self.config.token_webhook {
            return Ok(None);
        }
        let key = token_key(token);
        if let Some(hit) = self.tokens.borrow().get(&key, Instant::now()) {
            return Ok(hit);
        }
        let client = self.client.as_ref().ok_or(ReviewError::NoClient)?;
        let answer: Value = client
            .create(TOKEN_REVIEWS, &token_review(token))
            .await
            .map_err(ReviewError::Api)?;
        let user = token_review_user(&answer);
        // kubelet: success and failure are both cached for the one TTL.
        self.tokens
            .borrow_mut()
            .put(key, user.clone(), self.config.token_ttl, Instant::now());
        Ok(user)
    }

    async fn review_access(&self, user: &User, verb: &str, sub: &str) -> Result<bool, ReviewError> {
        let key = decision_key(user, verb, sub);
        if let Some(hit) = self.decisions.borrow().get(&key, Instant::now()) {
            return Ok(hit);
        }
        let client = self.client.as_ref().ok_or(ReviewError::NoClient)?;
        let answer: Value = client
            .create(
                ACCESS_REVIEWS,
                &access_review(user, verb, sub, &self.node_name),
            )
            .await
            .map_err(ReviewError::Api)?;
        let allowed = access_allowed(&answer);
        let ttl = if allowed {
            self.config.authorized_ttl
        } else {
            self.config.unauthorized_ttl
        };
        self.decisions
            .borrow_mut()
            .put(key, allowed, ttl, Instant::now());
        Ok(allowed)
    }
}

/// Why a TokenReview or SubjectAccessReview got no answer (logged; the request is refused).
#[derive(Debug)]
pub(crate) enum ReviewError {
    /// The webhook is on but picolet has no apiserver client to ask.
    NoClient,
    /// The apiserver's call failed.
    Api(crate::kube::ApiError),
}

impl std::fmt::Display for ReviewError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReviewError::NoClient => f.write_str("no apiserver client"),
            ReviewError::Api(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ReviewError {}

#[cfg(test)]
#[path = "auth_tests.rs"]
mod tests;
