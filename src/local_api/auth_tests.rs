use super::*;
use serde_json::json;

/// kubelet: `GetRequestAttributes` (server/auth.go) with fine-grained authz on.
#[test]
fn attributes_follow_the_kubelets_mapping() {
    let table: &[(&str, &str, &str, &[&str])] = &[
        ("GET", "/stats/summary", "get", &["stats"]),
        ("GET", "/stats", "get", &["stats"]),
        ("GET", "/statsfoo", "get", &["proxy"]),
        ("GET", "/metrics", "get", &["metrics"]),
        ("GET", "/metrics/resource", "get", &["metrics"]),
        ("GET", "/metrics/cadvisor", "get", &["metrics"]),
        ("GET", "/logs/", "get", &["log"]),
        ("GET", "/logs/syslog", "get", &["log"]),
        ("POST", "/checkpoint/ns/p/c", "create", &["checkpoint"]),
        ("GET", "/pods", "get", &["pods", "proxy"]),
        ("GET", "/runningpods/", "get", &["pods", "proxy"]),
        ("GET", "/healthz", "get", &["healthz", "proxy"]),
        ("GET", "/healthz/ping", "get", &["healthz", "proxy"]),
        ("GET", "/configz", "get", &["configz", "proxy"]),
        ("GET", "/statusz", "get", &["statusz", "proxy"]),
        ("GET", "/spec/", "get", &["proxy"]),
        ("GET", "/containerLogs/ns/p/c", "get", &["proxy"]),
        ("POST", "/exec/ns/p/c", "create", &["proxy"]),
        ("GET", "/exec/ns/p/c", "get", &["proxy"]),
        ("POST", "/portForward/ns/p", "create", &["proxy"]),
        ("PUT", "/x", "update", &["proxy"]),
        ("PATCH", "/x", "patch", &["proxy"]),
        ("DELETE", "/x", "delete", &["proxy"]),
        ("HEAD", "/pods", "", &["pods", "proxy"]),
        ("GET", "/api/v1/pods", "get", &["proxy"]),
    ];
    for &(method, path, verb, subs) in table {
        let a = attributes(method, path);
        assert_eq!((a.verb, a.subresources), (verb, subs), "{method} {path}");
    }
}

fn der(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut v = vec![tag];
    if content.len() < 0x80 {
        v.push(content.len() as u8);
    } else {
        v.extend([0x82, (content.len() >> 8) as u8, content.len() as u8]);
    }
    v.extend_from_slice(content);
    v
}

fn attr(oid_last: u8, tag: u8, value: &str) -> Vec<u8> {
    let atv = [
        der(0x06, &[0x55, 0x04, oid_last]),
        der(tag, value.as_bytes()),
    ]
    .concat();
    der(0x31, &der(0x30, &atv))
}

/// A certificate's shape (what `cert_user` walks), with `subject` as its subject.
fn cert(subject: &[Vec<u8>], with_version: bool) -> Vec<u8> {
    let mut tbs = Vec::new();
    if with_version {
        tbs.extend(der(0xa0, &der(0x02, &[2])));
    }
    tbs.extend(der(0x02, &[1, 2, 3])); // serial
    tbs.extend(der(0x30, &der(0x06, &[0x2a, 0x86]))); // signature
    tbs.extend(der(0x30, &attr(0x03, 0x0c, "issuer-ca"))); // issuer
    tbs.extend(der(0x30, &[0u8; 200])); // validity (long form length)
    tbs.extend(der(0x30, &subject.concat()));
    tbs.extend(der(0x30, &[])); // spki
    der(
        0x30,
        &[der(0x30, &tbs), der(0x30, &[]), der(0x03, &[0])].concat(),
    )
}

#[test]
fn a_certificates_user_is_its_cn_and_groups_its_os() {
    let c = cert(
        &[
            attr(0x0a, 0x13, "system:nodes"),
            attr(0x0a, 0x0c, "ops"),
            attr(0x03, 0x0c, "system:node:authz-node"),
        ],
        true,
    );
    let u = cert_user(&c).unwrap();
    assert_eq!(u.name, "system:node:authz-node");
    assert_eq!(u.groups, ["system:nodes", "ops"]);
    // v1 certificate (no [0] version): the subject is still found.
    let c = cert(&[attr(0x03, 0x13, "kube-apiserver-kubelet-client")], false);
    assert_eq!(cert_user(&c).unwrap().name, "kube-apiserver-kubelet-client");
    // No CN, or garbage: no user.
    assert_eq!(cert_user(&cert(&[attr(0x0a, 0x13, "g")], true)), None);
    assert_eq!(cert_user(&[0x30, 0x05, 1]), None);
    assert_eq!(cert_user(&[]), None);
}

#[test]
fn the_serving_certificate_of_certs_rs_names_its_cn() {
    let now = crate::clock::Clock::now(&crate::clock::SystemClock);
    let subject = super::super::certs::Subject {
        node_name: "authz-node".into(),
        dns_names: vec![],
        ips: vec![],
    };
    let g = super::super::certs::generate(&subject, now).unwrap();
    let certs = crate::kube::tls::certificates(g.chain_pem.as_bytes(), "chain").unwrap();
    let u = cert_user(certs[0].as_ref()).unwrap();
    assert!(u.name.contains("authz-node"), "{}", u.name);
}

#[tokio::test(start_paused = true)]
async fn the_cache_keeps_an_answer_for_its_ttl_only() {
    let mut c = TtlCache::default();
    let t0 = Instant::now();
    c.put("a".into(), true, Duration::from_secs(30), t0);
    assert_eq!(c.get("a", t0 + Duration::from_secs(29)), Some(true));
    assert_eq!(c.get("a", t0 + Duration::from_secs(30)), None);
    assert_eq!(c.get("b", t0), None);
    c.put("z".into(), true, Duration::ZERO, t0);
    assert_eq!(c.get("z", t0), None);
    // Bounded: past the cap, the expired go first, then everything.
    for i in 0..CACHE_MAX + 10 {
        c.put(format!("k{i}"), false, Duration::from_secs(1), t0);
    }
    assert!(c.entries.len() <= CACHE_MAX);
}

#[test]
fn review_bodies_and_answers() {
    let u = User {
        name: "alice".into(),
        uid: "u1".into(),
        groups: vec!["dev".into()],
    };
    let sar = access_review(&u, "get", "proxy", "n1");
    assert_eq!(sar["spec"]["resourceAttributes"]["resource"], "nodes");
    assert_eq!(sar["spec"]["resourceAttributes"]["subresource"], "proxy");
    assert_eq!(sar["spec"]["resourceAttributes"]["name"], "n1");
    assert_eq!(sar["spec"]["uid"], "u1");
    assert!(access_allowed(&json!({"status": {"allowed": true}})));
    assert!(!access_allowed(
        &json!({"status": {"allowed": true, "denied": true}})
    ));
    assert!(!access_allowed(&json!({"status": {}})));
    let ans = json!({"status": {"authenticated": true,
        "user": {"username": "bob", "groups": ["g"]}}});
    assert_eq!(token_review_user(&ans).unwrap().groups, ["g"]);
    assert_eq!(
        token_review_user(&json!({"status": {"authenticated": false}})),
        None
    );
    assert_ne!(token_key("secret"), "secret");
    assert!(!format!("{:?}", token_review("t")).is_empty());
}

#[cfg(feature = "mock-apiserver")]
mod webhook {
    use super::*;
    use crate::kube::mock::MockApiServer;
    use crate::kube::{Client, ClientConfig};

    fn auth(mock: &MockApiServer, config: AuthConfig) -> Auth {
        let mut cfg = ClientConfig::new(mock.url());
        cfg.timeout = Duration::from_secs(5);
        Auth::new(config, "n1".into(), Some(Client::new(&cfg).unwrap()))
    }

    fn webhooks() -> AuthConfig {
        AuthConfig {
            token_webhook: true,
            mode: Mode::Webhook,
            ..AuthConfig::default()
        }
    }

    fn count(mock: &MockApiServer, what: &str) -> usize {
        mock.requests()
            .iter()
            .filter(|r| r.path.ends_with(what))
            .count()
    }

    #[tokio::test]
    async fn a_token_the_apiserver_knows_with_rights_is_allowed_once_asked() {
        let mock = MockApiServer::start_new().await.unwrap();
        mock.accept_token("tok-alice", "alice", &["dev"]);
        mock.allow("alice", "get", "stats");
        let a = auth(&mock, webhooks());
        for _ in 0..3 {
            let v = a
                .check("GET", "/stats/summary", None, Some("tok-alice"), false)
                .await;
            assert_eq!(v, Verdict::Allowed);
        }
        // Cache hits: one review of each kind for three requests.
        assert_eq!(count(&mock, "tokenreviews"), 1);
        assert_eq!(count(&mock, "subjectaccessreviews"), 1);
        let sar = mock
            .requests()
            .into_iter()
            .find(|r| r.path.ends_with("subjectaccessreviews"))
            .unwrap();
        let groups = &sar.body["spec"]["groups"];
        assert_eq!(groups, &json!(["dev", "system:authenticated"]));
        // No token in anything the mock recorded but the review's own body.
        let tr = mock
            .requests()
            .into_iter()
            .find(|r| r.path.ends_with("tokenreviews"))
            .unwrap();
        assert_eq!(tr.body["spec"]["token"], "tok-alice");
    }

    #[tokio::test]
    async fn a_user_without_rights_is_forbidden_and_the_denial_cached() {
        let mock = MockApiServer::start_new().await.unwrap();
        mock.accept_token("tok-eve", "eve", &[]);
        let a = auth(&mock, webhooks());
        for _ in 0..2 {
            let v = a
                .check("POST", "/exec/default/p/c", None, Some("tok-eve"), false)
                .await;
            assert_eq!(
                v,
                Verdict::Forbidden(
                    "Forbidden (user=eve, verb=create, resource=nodes, subresource=proxy)".into()
                )
            );
        }
        assert_eq!(count(&mock, "subjectaccessreviews"), 1);
        // Fine-grained: /pods asks `pods`, then `proxy`.
        mock.allow("eve", "get", "proxy");
        let v = a.check("GET", "/pods", None, Some("tok-eve"), false).await;
        assert_eq!(v, Verdict::Allowed);
        assert_eq!(count(&mock, "subjectaccessreviews"), 3);
    }

    #[tokio::test]
    async fn no_credentials_or_a_bad_token_is_401_anonymous_is_asked_about() {
        let mock = MockApiServer::start_new().await.unwrap();
        let a = auth(&mock, webhooks());
        let v = a.check("GET", "/pods", None, None, false).await;
        assert_eq!(v, Verdict::Unauthenticated);
        let v = a.check("GET", "/pods", None, Some("bad"), false).await;
        assert_eq!(v, Verdict::Unauthenticated);
        let _ = a.check("GET", "/pods", None, Some("bad"), false).await;
        assert_eq!(count(&mock, "tokenreviews"), 1, "the refusal is cached");
        let anon = auth(
            &mock,
            AuthConfig {
                anonymous: true,
                ..webhooks()
            },
        );
        // A bad token is 401 even with anonymous auth on.
        let v = anon.check("GET", "/pods", None, Some("bad"), false).await;
        assert_eq!(v, Verdict::Unauthenticated);
        mock.allow(ANONYMOUS, "get", "healthz");
        let v = anon.check("GET", "/healthz", None, None, false).await;
        assert_eq!(v, Verdict::Allowed);
        let v = anon.check("GET", "/pods", None, None, false).await;
        assert!(matches!(v, Verdict::Forbidden(m) if m.contains("user=system:anonymous")));
    }

    #[tokio::test]
    async fn certificates_and_the_local_token_need_no_token_review() {
        let mock = MockApiServer::start_new().await.unwrap();
        mock.allow("kube-apiserver-kubelet-client", "get", "proxy");
        let a = auth(&mock, webhooks());
        let u = User {
            name: "kube-apiserver-kubelet-client".into(),
            uid: String::new(),
            groups: vec![],
        };
        let v = a
            .check("GET", "/containerLogs/a/b/c", Some(u), None, false)
            .await;
        assert_eq!(v, Verdict::Allowed);
        let v = a.check("GET", "/pods", None, None, true).await;
        assert_eq!(v, Verdict::Allowed);
        assert_eq!(count(&mock, "tokenreviews"), 0);
        assert_eq!(count(&mock, "subjectaccessreviews"), 1);
    }

    #[tokio::test]
    async fn an_unreachable_apiserver_is_an_error_not_cached() {
        let mock = MockApiServer::start_new().await.unwrap();
        let a = auth(&mock, webhooks());
        mock.fail_next(1, 500);
        let u = User::anonymous();
        let v = a.check("GET", "/x", Some(u.clone()), None, false).await;
        assert!(matches!(v, Verdict::Error(m) if m.starts_with("Authorization error")));
        mock.allow(ANONYMOUS, "get", "proxy");
        let v = a.check("GET", "/x", Some(u), None, false).await;
        assert_eq!(v, Verdict::Allowed);
    }

    #[tokio::test]
    async fn always_allow_lets_any_authenticated_caller_in_without_asking() {
        let mock = MockApiServer::start_new().await.unwrap();
        let a = auth(&mock, AuthConfig::default());
        let u = User::anonymous();
        assert_eq!(
            a.check("DELETE", "/x", Some(u), None, false).await,
            Verdict::Allowed
        );
        assert_eq!(
            a.check("GET", "/x", None, Some("t"), false).await,
            Verdict::Unauthenticated
        );
        assert!(mock.requests().is_empty());
    }
}
