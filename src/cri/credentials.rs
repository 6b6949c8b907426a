//! Registry credentials for image pulls (kubelet: `credentialprovider` — the docker config
//! keyring read from `<root-dir>/config.json` and `~/.docker/config.json`).
//!
//! Owns: parsing the docker config format (`{"auths": {"<registry>": {"auth": …}}}`, also
//! `username`/`password` and `identitytoken`), and choosing the entry for an image: the
//! longest key that matches the image's `registry[/path]` (kubelet: `DockerKeyring.Lookup`;
//! `https://index.docker.io/v1/` and `docker.io` both mean Docker Hub).
//!
//! Must never: log or print a credential. [`AuthConfig`]'s `Debug` hides every secret.
//!
//! Deliberately different: picolet does not read `imagePullSecrets` yet (that needs the
//! Secrets of the config-data work); the node-wide files are the way to pull from a private
//! registry, as the kubelet's own fallback.

use std::fmt;
use std::path::{Path, PathBuf};

/// CRI `AuthConfig` for one pull.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct AuthConfig {
    pub username: String,
    pub password: String,
    /// `base64(username:password)` as written in the file, when the user/password pair is
    /// not given separately.
    pub auth: String,
    pub server_address: String,
    pub identity_token: String,
}

impl fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthConfig")
            .field("server_address", &self.server_address)
            .field("username", &(!self.username.is_empty()).then_some("<set>"))
            .field("secrets", &"<hidden>")
            .finish()
    }
}

/// One `auths` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    /// `registry[/path]`, normalized (no scheme, no trailing `/`, Docker Hub as `docker.io`).
    key: String,
    auth: AuthConfig,
}

/// The credentials of every file read, first file first (kubelet: the first match wins in
/// the order the files are searched).
#[derive(Debug, Clone, Default)]
pub(crate) struct Keyring {
    entries: Vec<Entry>,
}

/// Why a credentials file is not used (logged once per read, naming the file, never a
/// value).
#[derive(Debug, thiserror::Error)]
pub(crate) enum CredentialsError {
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a docker config file: {error}")]
    Parse { path: PathBuf, error: ParseError },
}

/// Why bytes are not a docker config file.
#[derive(Debug)]
pub(crate) enum ParseError {
    Json(serde_json::Error),
    /// `auths` (or the legacy file itself) is not a map of registries.
    AuthsNotObject,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::Json(e) => write!(f, "invalid JSON ({e})"),
            ParseError::AuthsNotObject => f.write_str("\"auths\" is not an object"),
        }
    }
}

impl std::error::Error for ParseError {}

/// The files searched, in order (kubelet: `rootDirPath/config.json`, then the home
/// directory's `.docker/config.json`).
pub(crate) fn default_paths(root_dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![root_dir.join("config.json")];
    if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        out.push(Path::new(&home).join(".docker").join("config.json"));
    }
    out
}

impl Keyring {
    /// Reads every file of `paths` that exists; unreadable or malformed ones are reported
    /// and skipped.
    pub(crate) fn load(paths: &[PathBuf]) -> (Keyring, Vec<CredentialsError>) {
        let mut ring = Keyring::default();
        let mut errors = Vec::new();
        for path in paths {
            match std::fs::read(path) {
                Ok(bytes) => match Keyring::parse(&bytes) {
                    Ok(r) => ring.entries.extend(r.entries),
                    Err(error) => errors.push(CredentialsError::Parse {
                        path: path.clone(),
                        error,
                    }),
                },
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => errors.push(CredentialsError::Read {
                    path: path.clone(),
                    source,
                }),
            }
        }
        (ring, errors)
    }

    /// Parses one docker config file (`auths`; the legacy `.dockercfg` form, a bare map of
    /// registries, too).
    pub(crate) fn parse(bytes: &[u8]) -> Result<Keyring, ParseError> {
        let doc: serde_json::Value = serde_json::from_slice(bytes).map_err(ParseError::Json)?;
        let auths = match doc.get("auths") {
            Some(a) => a,
            None => &doc,
        };
        let Some(map) = auths.as_object() else {
            return Err(ParseError::AuthsNotObject);
        };
        let mut entries = Vec::new();
        for (key, v) in map {
            let s = |name: &str| {
                v.get(name)
                    .and_then(|x| x.as_str())
                    .unwrap_or("")
                    .to_string()
            };
            let mut auth = AuthConfig {
                username: s("username"),
                password: s("password"),
                auth: s("auth"),
                server_address: key.clone(),
                identity_token: s("identitytoken"),
            };
            // kubelet: `auth` is base64(user:pass); split it so the runtime gets both forms.
            if auth.username.is_empty()
                && let Some((user, pass)) = crate::api::decode_base64(&auth.auth)
                    .and_then(|raw| String::from_utf8(raw).ok())
                    .and_then(|t| {
                        t.split_once(':')
                            .map(|(u, p)| (u.to_string(), p.to_string()))
                    })
            {
                auth.username = user;
                auth.password = pass;
            }
            entries.push(Entry {
                key: normalize_key(key),
                auth,
            });
        }
        Ok(Keyring { entries })
    }

    /// Appends `other`'s entries (they lose ties to this keyring's).
    pub(crate) fn extend(&mut self, other: Keyring) {
        self.entries.extend(other.entries);
    }

    /// The credentials for `image` (a normalized reference such as
    /// `registry.local:5000/app:1` or `docker.io/library/nginx:1.25`): the entry with the
    /// longest matching `registry[/path]` prefix, the first file winning a tie.
    pub(crate) fn lookup(&self, image: &str) -> Option<&AuthConfig> {
        let target = image_location(image);
        let mut best: Option<&Entry> = None;
        for e in &self.entries {
            let matches = target == e.key
                || target
                    .strip_prefix(e.key.as_str())
                    .is_some_and(|rest| rest.starts_with('/'));
            if matches && best.is_none_or(|b| e.key.len() > b.key.len()) {
                best = Some(e);
            }
        }
        best.map(|e| &e.auth)
    }
}

/// `https://index.docker.io/v1/` → `docker.io`; `http://reg:5000/` → `reg:5000`.
fn normalize_key(key: &str) -> String {
    let k = key
        .trim()
        .trim_start_matches("https://")
        .trim_start_matches("http://")
        .trim_end_matches('/');
    let k = k
        .strip_suffix("/v1")
        .or_else(|| k.strip_suffix("/v2"))
        .unwrap_or(k);
    match k {
        "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com" => {
            "docker.io".to_string()
        }
        _ => match k.split_once('/') {
            Some(("index.docker.io", rest)) => format!("docker.io/{rest}"),
            _ => k.to_string(),
        },
    }
}

/// `registry/path` of an image without its tag or digest; a name without a registry is
/// Docker Hub's (`nginx` → `docker.io/library/nginx`).
pub(crate) fn image_location(image: &str) -> String {
    let no_digest = image.split('@').next().unwrap_or(image);
    // a ':' after the last '/' is the tag
    let name = match no_digest.rfind(':') {
        Some(i) if !no_digest[i..].contains('/') => &no_digest[..i],
        _ => no_digest,
    };
    let first = name.split('/').next().unwrap_or("");
    let has_registry =
        name.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    if has_registry {
        normalize_key(name)
    } else if name.contains('/') {
        format!("docker.io/{name}")
    } else {
        format!("docker.io/library/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::decode_base64;

    const CONFIG: &str = r#"{
      "auths": {
        "https://index.docker.io/v1/": {"auth": "aHViOmh1YnBhc3M="},
        "registry.local:5000": {"username": "pi", "password": "s3cret"},
        "ghcr.io/acme": {"auth": "YWNtZTp0b2tlbg=="},
        "ghcr.io": {"auth": "Z2g6Z2hwYXNz"}
      }
    }"#;

    #[test]
    fn base64() {
        assert_eq!(decode_base64("aHViOmh1YnBhc3M=").unwrap(), b"hub:hubpass");
        assert_eq!(decode_base64("YQ").unwrap(), b"a");
        assert_eq!(decode_base64(""), Some(vec![]));
        assert_eq!(decode_base64("a*b"), None);
    }

    #[test]
    fn image_locations() {
        for (image, want) in [
            ("nginx", "docker.io/library/nginx"),
            ("nginx:1.25", "docker.io/library/nginx"),
            ("grafana/grafana:10", "docker.io/grafana/grafana"),
            ("docker.io/library/nginx:1.25", "docker.io/library/nginx"),
            ("registry.local:5000/app:1", "registry.local:5000/app"),
            ("localhost/busybox:edge", "localhost/busybox"),
            ("ghcr.io/acme/sensor@sha256:abc", "ghcr.io/acme/sensor"),
        ] {
            assert_eq!(image_location(image), want, "{image}");
        }
    }

    #[test]
    fn lookup_takes_the_longest_matching_key() {
        let ring = Keyring::parse(CONFIG.as_bytes()).unwrap();
        let user = |image: &str| ring.lookup(image).map(|a| a.username.as_str());
        assert_eq!(user("docker.io/library/nginx:1"), Some("hub"));
        assert_eq!(user("nginx"), Some("hub"));
        assert_eq!(user("registry.local:5000/app:1"), Some("pi"));
        assert_eq!(user("ghcr.io/acme/sensor:2"), Some("acme"));
        assert_eq!(user("ghcr.io/other/x:1"), Some("gh"));
        assert_eq!(
            user("ghcr.io/acmex/x:1"),
            Some("gh"),
            "a key is a path prefix, not a string prefix"
        );
        assert_eq!(user("quay.io/x/y:1"), None);
        let pi = ring.lookup("registry.local:5000/app:1").unwrap();
        assert_eq!(pi.password, "s3cret");
        assert_eq!(pi.server_address, "registry.local:5000");
    }

    #[test]
    fn debug_never_shows_a_secret() {
        let ring = Keyring::parse(CONFIG.as_bytes()).unwrap();
        let text = format!("{ring:?}");
        for secret in ["s3cret", "hubpass", "aHViOmh1YnBhc3M", "token", "ghpass"] {
            assert!(!text.contains(secret), "{text}");
        }
    }

    #[test]
    fn files_load_in_order_and_bad_ones_are_named() {
        let tmp = tempfile::tempdir().unwrap();
        let a = tmp.path().join("a.json");
        let b = tmp.path().join("b.json");
        std::fs::write(
            &a,
            r#"{"auths": {"reg.io": {"username": "first", "password": "x"}}}"#,
        )
        .unwrap();
        std::fs::write(&b, "{not json").unwrap();
        let missing = tmp.path().join("missing.json");
        let (ring, errors) = Keyring::load(&[a, b.clone(), missing]);
        assert_eq!(ring.lookup("reg.io/x:1").unwrap().username, "first");
        assert_eq!(errors.len(), 1);
        assert!(errors[0].to_string().starts_with(&b.display().to_string()));
    }
}
