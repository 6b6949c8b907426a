//! Who may use the node's own API, and how a local `kubectl` finds it: a bearer token made
//! on first start and a kubeconfig for it (`<root-dir>/kubeconfig`, mode 0600: server, the
//! serving CA, the token), so `kubectl --kubeconfig /var/lib/picolet/kubeconfig get pods -A`
//! works on the board.
//!
//! Owns: the token's generation and its check (constant time), the kubeconfig's text.
//!
//! Must never: log the token, or write the kubeconfig readable by others.

use std::fmt::Write as _;

use ring::rand::{SecureRandom, SystemRandom};

/// A bearer token: 32 random bytes, hex.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<hidden>)")
    }
}

#[derive(Debug, thiserror::Error)]
#[error("cannot make a token: no random source")]
pub struct NoRandom;

impl Token {
    pub fn generate() -> Result<Token, NoRandom> {
        let mut b = [0u8; 32];
        SystemRandom::new().fill(&mut b).map_err(|_| NoRandom)?;
        let mut s = String::with_capacity(64);
        for x in b {
            let _ = write!(s, "{x:02x}");
        }
        Ok(Token(s))
    }

    /// A token read back from its file (whitespace trimmed); `None` if it is not one of ours.
    pub fn parse(text: &str) -> Option<Token> {
        let t = text.trim();
        (t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit())).then(|| Token(t.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The `Authorization` header value matches, compared in constant time.
    pub fn accepts(&self, authorization: Option<&str>) -> bool {
        // RFC 7235: the scheme is case-insensitive (`bearer`, `BEARER`).
        let given = authorization.and_then(|h| {
            let (scheme, rest) = h.split_at_checked(7)?;
            scheme.eq_ignore_ascii_case("bearer ").then_some(rest)
        });
        let Some(given) = given else {
            return false;
        };
        let (a, b) = (self.0.as_bytes(), given.trim().as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

/// The kubeconfig of the node API: one cluster, user and context named after the node.
pub(crate) fn kubeconfig(node_name: &str, server: &str, ca_pem: &str, token: &Token) -> String {
    let ca = crate::api::encode_base64(ca_pem.as_bytes());
    let name = format!("picolet-{node_name}");
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: {server}\n    \
         certificate-authority-data: {ca}\nusers:\n- name: {name}\n  user:\n    token: {token}\n\
         contexts:\n- name: {name}\n  context:\n    cluster: {name}\n    user: {name}\n\
         current-context: {name}\n",
        token = token.as_str()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_hidden_and_checked_exactly() {
        let t = Token::generate().unwrap();
        assert_eq!(t.as_str().len(), 64);
        assert_ne!(t, Token::generate().unwrap());
        assert!(!format!("{t:?}").contains(t.as_str()));
        let header = format!("Bearer {}", t.as_str());
        assert!(t.accepts(Some(&header)));
        // RFC 7235: the scheme in any case.
        for scheme in ["bearer", "BEARER", "bEaReR"] {
            assert!(
                t.accepts(Some(&format!("{scheme} {}", t.as_str()))),
                "{scheme}"
            );
        }
        for bad in [
            Some("Bé"),
            Some(&format!("Bearer\t{}", t.as_str())),
            None,
            Some(""),
            Some(t.as_str()),
            Some("Bearer "),
            Some(&header[..header.len() - 1]),
            Some(&format!("Bearer {}x", t.as_str())),
            Some(&format!("Basic {}", t.as_str())),
        ] {
            assert!(!t.accepts(bad), "{bad:?}");
        }
        assert_eq!(Token::parse(&format!("{}\n", t.as_str())), Some(t));
        assert_eq!(Token::parse("short"), None);
    }

    /// The kubeconfig is one picolet's own client reads the same way kubectl does.
    #[test]
    fn the_kubeconfig_parses_as_kubectl_reads_it() {
        let t = Token::generate().unwrap();
        let ca = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        let text = kubeconfig("pi-4", "https://127.0.0.1:10250", ca, &t);
        let path = std::path::Path::new("/var/lib/picolet/kubeconfig");
        let cfg = crate::kube::ClientConfig::from_kubeconfig_str(&text, path, path).unwrap();
        assert_eq!(cfg.server, "https://127.0.0.1:10250");
        assert_eq!(
            cfg.credentials,
            crate::kube::Credentials::Token(t.as_str().to_string())
        );
        assert_eq!(cfg.tls.ca_pem.as_deref(), Some(ca.as_bytes()));
    }
}
