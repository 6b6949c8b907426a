//! Where the apiserver is and who picolet is to it: `--kubeconfig FILE` (the
//! `current-context`), or in-cluster style files (a service-account token and CA).
//!
//! Supported in a kubeconfig: cluster `server`, `certificate-authority`,
//! `certificate-authority-data`, `insecure-skip-tls-verify` (honoured only when set to
//! true), `tls-server-name`; user `token`, `tokenFile`, `client-certificate(-data)`,
//! `client-key(-data)`. Relative file paths are relative to the kubeconfig's directory, as
//! with client-go. `exec`, `auth-provider` and basic auth are refused with a clear error:
//! picolet runs no helper programs.
//!
//! Must never: log a token or a key.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::ApiError;
use super::tls::{self, TlsSettings};

/// Default deadline of one API request (not of a watch).
pub(crate) const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Everything [`super::Client::new`] needs.
#[derive(Clone)]
pub struct ClientConfig {
    /// `https://host:port` (or `http://` for tests), without a trailing slash.
    pub server: String,
    pub tls: TlsSettings,
    /// Verify the server certificate against this name instead of the URL's host.
    pub tls_server_name: Option<String>,
    pub credentials: Credentials,
    /// Deadline of one request (watches have their own).
    pub timeout: Duration,
}

impl std::fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientConfig")
            .field("server", &self.server)
            .field("credentials", &self.credentials)
            .field("insecure_skip_verify", &self.tls.insecure_skip_verify)
            .field("client_cert", &self.tls.client_cert_pem.is_some())
            .finish_non_exhaustive()
    }
}

/// How requests authenticate (besides a TLS client certificate).
#[derive(Clone, PartialEq, Eq)]
pub enum Credentials {
    None,
    /// A bearer token.
    Token(String),
    /// A bearer token read from this file (re-read now and then: projected service-account
    /// tokens rotate).
    TokenFile(PathBuf),
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credentials::None => write!(f, "None"),
            Credentials::Token(_) => write!(f, "Token(<redacted>)"),
            Credentials::TokenFile(p) => write!(f, "TokenFile({})", p.display()),
        }
    }
}

impl ClientConfig {
    /// A plain configuration for `server` (tests, or a caller that fills in the rest).
    pub fn new(server: impl Into<String>) -> Self {
        ClientConfig {
            server: server.into().trim_end_matches('/').to_string(),
            tls: TlsSettings::default(),
            tls_server_name: None,
            credentials: Credentials::None,
            timeout: DEFAULT_REQUEST_TIMEOUT,
        }
    }

    /// Reads a kubeconfig file and resolves its current context.
    pub fn from_kubeconfig(path: &Path) -> Result<Self, ApiError> {
        let text = std::fs::read_to_string(path).map_err(|source| ApiError::KubeconfigRead {
            path: path.to_path_buf(),
            source,
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        Self::from_kubeconfig_str(&text, path, base)
    }

    /// Parses kubeconfig `text`; `path` names it in errors, `base` resolves relative paths.
    pub fn from_kubeconfig_str(text: &str, path: &Path, base: &Path) -> Result<Self, ApiError> {
        // One decoder for every typed input (api::decode): Kubeconfig's Deserialize exists
        // once, for the value decoder, not again for serde_yaml_ng.
        let kc: Kubeconfig =
            crate::api::from_yaml(text).map_err(|source| ApiError::KubeconfigParse {
                path: path.to_path_buf(),
                source,
            })?;
        let (context, cluster, user) = kc.current(path)?;
        let empty = User::default();
        let user = user.unwrap_or(&empty);
        check_supported(context, cluster, user, path)?;
        let tls = tls_settings(cluster, user, path, base)?;
        let credentials = match (&user.token, &user.token_file) {
            (Some(t), _) if !t.is_empty() => Credentials::Token(t.trim().to_string()),
            (_, Some(f)) if !f.is_empty() => Credentials::TokenFile(resolve(base, f)),
            _ => Credentials::None,
        };
        Ok(ClientConfig {
            server: cluster.server.trim_end_matches('/').to_string(),
            tls,
            tls_server_name: cluster.tls_server_name.clone().filter(|s| !s.is_empty()),
            credentials,
            timeout: DEFAULT_REQUEST_TIMEOUT,
        })
    }

    /// In-cluster style: `server`, a token file and a CA file (client-go `InClusterConfig`
    /// reads `/var/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt}` and
    /// `KUBERNETES_SERVICE_HOST/PORT`).
    pub fn from_token_files(
        server: impl Into<String>,
        token_file: &Path,
        ca_file: &Path,
    ) -> Result<Self, ApiError> {
        let mut cfg = ClientConfig::new(server);
        cfg.tls.ca_pem = Some(tls::read_file(ca_file)?);
        // Fail early if the token cannot be read at all.
        tls::read_file(token_file)?;
        cfg.credentials = Credentials::TokenFile(token_file.to_path_buf());
        Ok(cfg)
    }
}

// ---------------------------------------------------------------------------------------
// The file format (client-go `clientcmd/api/v1`), only what picolet reads.

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Kubeconfig {
    #[serde(default)]
    current_context: Option<String>,
    #[serde(default)]
    clusters: Vec<NamedCluster>,
    #[serde(default)]
    contexts: Vec<NamedContext>,
    #[serde(default)]
    users: Vec<NamedUser>,
}

#[derive(Debug, Deserialize)]
struct NamedCluster {
    name: String,
    cluster: Cluster,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Cluster {
    #[serde(default)]
    server: String,
    #[serde(default)]
    certificate_authority: Option<String>,
    #[serde(default)]
    certificate_authority_data: Option<String>,
    #[serde(default)]
    insecure_skip_tls_verify: Option<bool>,
    #[serde(default)]
    tls_server_name: Option<String>,
}

#[derive(Debug, Deserialize)]
struct NamedContext {
    name: String,
    context: Context,
}

#[derive(Debug, Default, Deserialize)]
struct Context {
    #[serde(default)]
    cluster: String,
    #[serde(default)]
    user: Option<String>,
}

#[derive(Debug, Deserialize)]
struct NamedUser {
    name: String,
    #[serde(default)]
    user: User,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct User {
    #[serde(default)]
    token: Option<String>,
    #[serde(default, rename = "tokenFile")]
    token_file: Option<String>,
    #[serde(default)]
    client_certificate: Option<String>,
    #[serde(default)]
    client_certificate_data: Option<String>,
    #[serde(default)]
    client_key: Option<String>,
    #[serde(default)]
    client_key_data: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    /// Only whether it is there: picolet refuses plugins.
    #[serde(default)]
    exec: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    auth_provider: Option<serde::de::IgnoredAny>,
}

/// A kubeconfig that picolet cannot use, naming the file.
fn invalid(path: &Path, what: String) -> ApiError {
    ApiError::KubeconfigInvalid {
        path: path.to_path_buf(),
        what,
    }
}

/// A path of the kubeconfig: absolute, or relative to its directory `base`.
fn resolve(base: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

/// A server that picolet can reach with what it supports: a server address, and no
/// exec or auth-provider plugin or basic authentication for the user.
fn check_supported(
    context: &Context,
    cluster: &Cluster,
    user: &User,
    path: &Path,
) -> Result<(), ApiError> {
    if cluster.server.is_empty() {
        return Err(invalid(
            path,
            format!("cluster {:?} has no server", context.cluster),
        ));
    }
    if user.exec.is_some() || user.auth_provider.is_some() {
        return Err(invalid(
            path,
            "user: exec and auth-provider plugins are not supported; use a token, a token \
             file or a client certificate"
                .into(),
        ));
    }
    if user.username.is_some() || user.password.is_some() {
        return Err(invalid(
            path,
            "user: basic authentication is not supported; use a token, a token file or a \
             client certificate"
                .into(),
        ));
    }
    Ok(())
}

/// The `<field>-data` (base64) if set, else the `<field>` file's contents, else nothing.
fn data_or_file(
    data: &Option<String>,
    file: &Option<String>,
    field: &str,
    path: &Path,
    base: &Path,
) -> Result<Option<Vec<u8>>, ApiError> {
    if let Some(d) = data.as_deref().filter(|d| !d.is_empty()) {
        let bytes = tls::decode_base64(d).ok_or_else(|| ApiError::Pem {
            what: format!("kubeconfig {}: {field}-data", path.display()),
            reason: "invalid base64".into(),
        })?;
        return Ok(Some(bytes));
    }
    match file.as_deref().filter(|f| !f.is_empty()) {
        Some(f) => tls::read_file(&resolve(base, f)).map(Some),
        None => Ok(None),
    }
}

/// The TLS settings: the certificate authority (or `insecure-skip-tls-verify`, never
/// both) and the user's client certificate and key.
fn tls_settings(
    cluster: &Cluster,
    user: &User,
    path: &Path,
    base: &Path,
) -> Result<TlsSettings, ApiError> {
    let insecure = cluster.insecure_skip_tls_verify.unwrap_or(false);
    let ca_pem = data_or_file(
        &cluster.certificate_authority_data,
        &cluster.certificate_authority,
        "certificate-authority",
        path,
        base,
    )?;
    if insecure && ca_pem.is_some() {
        // client-go refuses this combination too.
        return Err(invalid(
            path,
            "insecure-skip-tls-verify and a certificate authority are both set".into(),
        ));
    }
    Ok(TlsSettings {
        ca_pem,
        insecure_skip_verify: insecure,
        client_cert_pem: data_or_file(
            &user.client_certificate_data,
            &user.client_certificate,
            "client-certificate",
            path,
            base,
        )?,
        client_key_pem: data_or_file(
            &user.client_key_data,
            &user.client_key,
            "client-key",
            path,
            base,
        )?,
        client_cert_slot: None,
    })
}

impl Kubeconfig {
    /// The current context (a single context needs no `current-context`) with its
    /// cluster and its user (`None`: no user named).
    fn current(&self, path: &Path) -> Result<(&Context, &Cluster, Option<&User>), ApiError> {
        let context_name = match self.current_context.as_deref() {
            Some(c) if !c.is_empty() => c.to_string(),
            // A single context needs no current-context.
            _ if self.contexts.len() == 1 => self.contexts[0].name.clone(),
            _ => return Err(invalid(path, "no current-context".into())),
        };
        let context = self
            .contexts
            .iter()
            .find(|c| c.name == context_name)
            .map(|c| &c.context)
            .ok_or_else(|| invalid(path, format!("context {context_name:?} not found")))?;
        let cluster = self
            .clusters
            .iter()
            .find(|c| c.name == context.cluster)
            .map(|c| &c.cluster)
            .ok_or_else(|| invalid(path, format!("cluster {:?} not found", context.cluster)))?;
        let user = match &context.user {
            None => None,
            Some(name) if name.is_empty() => None,
            Some(name) => Some(
                self.users
                    .iter()
                    .find(|u| &u.name == name)
                    .map(|u| &u.user)
                    .ok_or_else(|| invalid(path, format!("user {name:?} not found")))?,
            ),
        };
        Ok((context, cluster, user))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ClientConfig, ApiError> {
        ClientConfig::from_kubeconfig_str(text, Path::new("/k/config"), Path::new("/k"))
    }

    const TOKEN: &str = "
apiVersion: v1
kind: Config
current-context: edge
clusters:
- name: other
  cluster: {server: 'https://other:6443'}
- name: c1
  cluster:
    server: https://10.0.0.1:6443/
    insecure-skip-tls-verify: true
    tls-server-name: kubernetes
contexts:
- name: other
  context: {cluster: other, user: nobody}
- name: edge
  context: {cluster: c1, user: pi}
users:
- name: pi
  user: {token: ' abc.def '}
";

    #[test]
    fn token_and_insecure() {
        let c = parse(TOKEN).unwrap();
        assert_eq!(c.server, "https://10.0.0.1:6443");
        assert!(c.tls.insecure_skip_verify);
        assert!(c.tls.ca_pem.is_none());
        assert_eq!(c.tls_server_name.as_deref(), Some("kubernetes"));
        assert_eq!(c.credentials, Credentials::Token("abc.def".into()));
        let dbg = format!("{c:?}");
        assert!(!dbg.contains("abc.def"), "{dbg}");
    }

    #[test]
    fn data_fields_files_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ca.crt"), "CA").unwrap();
        std::fs::write(dir.path().join("key.pem"), "KEY").unwrap();
        let text = "
current-context: x
clusters:
- name: c
  cluster: {server: 'https://h', certificate-authority: ca.crt}
contexts:
- name: x
  context: {cluster: c, user: u}
users:
- name: u
  user:
    client-certificate-data: Q0VSVA==
    client-key: key.pem
    tokenFile: /run/token
";
        let c =
            ClientConfig::from_kubeconfig_str(text, &dir.path().join("kc"), dir.path()).unwrap();
        assert_eq!(c.tls.ca_pem.as_deref(), Some(&b"CA"[..]));
        assert_eq!(c.tls.client_cert_pem.as_deref(), Some(&b"CERT"[..]));
        assert_eq!(c.tls.client_key_pem.as_deref(), Some(&b"KEY"[..]));
        assert!(!c.tls.insecure_skip_verify);
        assert_eq!(
            c.credentials,
            Credentials::TokenFile(PathBuf::from("/run/token"))
        );

        for (text, want) in [
            ("clusters: []\n", "no current-context"),
            (
                "current-context: a\ncontexts: [{name: a, context: {cluster: c}}]\n",
                "cluster \"c\" not found",
            ),
            (
                "current-context: a\ncontexts: [{name: b, context: {cluster: c}}]\n",
                "context \"a\" not found",
            ),
            (
                "contexts: [{name: a, context: {cluster: c, user: u}}]\nclusters: [{name: c, cluster: {server: 'https://h'}}]\n",
                "user \"u\" not found",
            ),
            (
                "contexts: [{name: a, context: {cluster: c, user: u}}]\nclusters: [{name: c, cluster: {server: 'https://h'}}]\nusers: [{name: u, user: {exec: {command: x}}}]\n",
                "exec",
            ),
            (
                "contexts: [{name: a, context: {cluster: c}}]\nclusters: [{name: c, cluster: {}}]\n",
                "has no server",
            ),
            (
                "contexts: [{name: a, context: {cluster: c}}]\nclusters: [{name: c, cluster: {server: 'https://h', certificate-authority-data: '!!'}}]\n",
                "invalid base64",
            ),
            (
                "contexts: [{name: a, context: {cluster: c}}]\nclusters: [{name: c, cluster: {server: 'https://h', certificate-authority: /nonexistent/ca}}]\n",
                "/nonexistent/ca",
            ),
            ("clusters: 3\n", "clusters"),
        ] {
            let err = parse(text).unwrap_err().to_string();
            assert!(err.contains(want), "{text}: {err}");
        }
    }

    #[test]
    fn insecure_false_is_not_honoured_as_true() {
        let c = parse(
            "contexts: [{name: a, context: {cluster: c}}]\nclusters: [{name: c, cluster: {server: 'https://h', insecure-skip-tls-verify: false, certificate-authority-data: Q0E=}}]\n",
        )
        .unwrap();
        assert!(!c.tls.insecure_skip_verify);
        assert_eq!(c.credentials, Credentials::None);
    }

    /// A value of the wrong type: the error names the file and the field path.
    #[test]
    fn malformed_kubeconfig_names_the_file_and_the_field() {
        let text = "contexts: [{name: a, context: {cluster: c}}]\nclusters:\n- name: c\n  cluster: {server: 'https://h', insecure-skip-tls-verify: maybe}\n";
        let e = parse(text).unwrap_err().to_string();
        assert_eq!(
            e,
            "kubeconfig /k/config: clusters[0].cluster.insecure-skip-tls-verify: invalid type: string \"maybe\", expected a boolean"
        );
        let e = parse("clusters: [{cluster: {server: x}}]\n")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "kubeconfig /k/config: clusters[0]: missing field `name`");
        let e = parse("clusters: [\n").unwrap_err().to_string();
        assert!(
            e.starts_with("kubeconfig /k/config: ") && e.contains("line"),
            "{e}"
        );
    }

    /// The value decoder reads a kubeconfig as serde_yaml_ng's typed decoding did: names
    /// and tokens that YAML reads as numbers are their text, tags are dropped.
    #[test]
    fn kubeconfig_reads_as_serde_yaml_ng_did() {
        let texts = [
            TOKEN,
            "current-context: 1\ncontexts: [{name: 1, context: {cluster: 2, user: 3}}]\nclusters: [{name: 2, cluster: {server: 'https://h', insecure-skip-tls-verify: true}}]\nusers: [{name: 3, user: {token: 12345}}]\n",
            "contexts: [{name: a, context: {cluster: c}}]\nclusters: [{name: c, cluster: {server: !foo 'https://h', tls-server-name: ~}}]\nextra: {x: .nan}\n",
            "# comments only\n",
        ];
        for text in texts {
            let old: Result<Kubeconfig, _> = serde_yaml_ng::from_str(text);
            let new: Result<Kubeconfig, _> = crate::api::from_yaml(text);
            assert_eq!(format!("{old:?}"), format!("{new:?}"), "{text}");
        }
        let c = parse(texts[1]).unwrap();
        assert_eq!(c.credentials, Credentials::Token("12345".into()));
    }
}
