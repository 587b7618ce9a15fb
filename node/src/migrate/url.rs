//! The source of `meshmail migrate`: `imap://USER@HOST[:PORT]` (STARTTLS,
//! port 143), `imaps://USER@HOST[:PORT]` (TLS from the start, port 993;
//! also `imap://` on port 993). TLS is the default; plaintext only with
//! `--plaintext-on-loopback` and only to a loopback address, checked on the
//! address the name resolves to (a name may point anywhere).

use std::net::SocketAddr;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Security {
    Implicit,
    StartTls,
    Plaintext,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceUrl {
    pub user: String,
    pub host: String,
    pub port: u16,
    pub security: Security,
}

#[derive(Debug, thiserror::Error)]
pub enum UrlError {
    #[error("{0:?} is not imap://USER@HOST[:PORT] or imaps://USER@HOST[:PORT]")]
    Form(String),
    #[error("{0:?} has no user: write imap://USER@HOST:PORT")]
    NoUser(String),
    #[error("bad port in {0:?}")]
    Port(String),
    #[error("resolving {host}: {source}")]
    Resolve {
        host: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0} resolves to no address")]
    NoAddress(String),
    #[error(
        "plaintext IMAP is refused for {host} ({addr} is not a loopback address): the password and mail \
         would cross the network in clear. Drop --plaintext-on-loopback to use TLS"
    )]
    PlaintextNotLoopback { host: String, addr: SocketAddr },
    #[error("--plaintext-on-loopback does not go with imaps:// or port 993 (TLS from the start)")]
    PlaintextOnImaps,
}

/// `%XX` escapes of a URL's user part (RFC 5092 allows `%40` for `@`).
fn unescape(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

impl SourceUrl {
    pub fn parse(raw: &str, plaintext_on_loopback: bool) -> Result<SourceUrl, UrlError> {
        let form = || UrlError::Form(raw.to_string());
        let (scheme, rest) = raw.split_once("://").ok_or_else(form)?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let implicit = match scheme.to_ascii_lowercase().as_str() {
            "imap" => false,
            "imaps" => true,
            _ => return Err(form()),
        };
        let (user, hostport) = rest.rsplit_once('@').ok_or_else(|| UrlError::NoUser(raw.to_string()))?;
        let user = unescape(user)
            .filter(|u| !u.is_empty())
            .ok_or_else(|| UrlError::NoUser(raw.to_string()))?;
        if hostport.contains('/') || hostport.is_empty() {
            return Err(form());
        }
        // `[::1]:143` or `host:143` or `host`.
        let (host, port) = match hostport.strip_prefix('[') {
            Some(v6) => {
                let (h, after) = v6.split_once(']').ok_or_else(form)?;
                (h.to_string(), after.strip_prefix(':'))
            }
            None => match hostport.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), Some(p)),
                None => (hostport.to_string(), None),
            },
        };
        let port = match port {
            Some(p) => p.parse().map_err(|_| UrlError::Port(raw.to_string()))?,
            None if implicit => 993,
            None => 143,
        };
        let security = if implicit || port == 993 {
            if plaintext_on_loopback {
                return Err(UrlError::PlaintextOnImaps);
            }
            Security::Implicit
        } else if plaintext_on_loopback {
            Security::Plaintext
        } else {
            Security::StartTls
        };
        Ok(SourceUrl {
            user,
            host,
            port,
            security,
        })
    }

    /// The checkpoints' key for this source: the URL without its scheme
    /// details, so `imap://` and `imaps://` to one server share progress.
    pub fn key(&self) -> String {
        format!("imap://{}@{}:{}", self.user, self.host, self.port)
    }

    /// The address to connect to; for plaintext, refused unless every
    /// address the name resolves to is loopback.
    pub async fn resolve(&self) -> Result<SocketAddr, UrlError> {
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host((self.host.as_str(), self.port))
            .await
            .map_err(|source| UrlError::Resolve {
                host: self.host.clone(),
                source,
            })?
            .collect();
        let first = *addrs.first().ok_or_else(|| UrlError::NoAddress(self.host.clone()))?;
        if self.security == Security::Plaintext
            && let Some(bad) = addrs.iter().find(|a| !a.ip().is_loopback())
        {
            return Err(UrlError::PlaintextNotLoopback {
                host: self.host.clone(),
                addr: *bad,
            });
        }
        Ok(first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_ports_and_security() {
        let u = SourceUrl::parse("imap://alice@mail.example.org", false).unwrap();
        assert_eq!(
            (u.user.as_str(), u.host.as_str(), u.port, u.security),
            ("alice", "mail.example.org", 143, Security::StartTls)
        );
        let u = SourceUrl::parse("imaps://a%40b.org@mail.example.org", false).unwrap();
        assert_eq!(
            (u.user.as_str(), u.port, u.security),
            ("a@b.org", 993, Security::Implicit)
        );
        let u = SourceUrl::parse("imap://u@b.org@127.0.0.1:1143", true).unwrap();
        assert_eq!(
            (u.user.as_str(), u.port, u.security),
            ("u@b.org", 1143, Security::Plaintext)
        );
        let u = SourceUrl::parse("imap://u@[::1]:993", false).unwrap();
        assert_eq!((u.host.as_str(), u.security), ("::1", Security::Implicit));
        assert_eq!(u.key(), "imap://u@::1:993");
        for bad in [
            "mail.example.org",
            "pop3://u@h",
            "imap://h:143",
            "imap://u@h:x",
            "imap://u@h/INBOX",
        ] {
            assert!(SourceUrl::parse(bad, false).is_err(), "{bad}");
        }
        assert!(matches!(
            SourceUrl::parse("imaps://u@127.0.0.1", true),
            Err(UrlError::PlaintextOnImaps)
        ));
    }

    #[tokio::test]
    async fn plaintext_only_to_loopback() {
        let u = SourceUrl::parse("imap://u@127.0.0.1:1143", true).unwrap();
        assert_eq!(u.resolve().await.unwrap().to_string(), "127.0.0.1:1143");
        let u = SourceUrl::parse("imap://u@192.0.2.7:143", true).unwrap();
        let e = u.resolve().await.unwrap_err().to_string();
        assert!(e.contains("plaintext IMAP is refused for 192.0.2.7"), "{e}");
        // With TLS, any address is fine.
        let u = SourceUrl::parse("imap://u@192.0.2.7:143", false).unwrap();
        assert!(u.resolve().await.is_ok());
    }
}
