//! The HTTPS fetch of an MTA-STS policy (RFC 8461 §3.3): `GET
//! /.well-known/mta-sts.txt` from `mta-sts.<domain>` over TLS whose
//! certificate must verify for that name (no opportunistic fallback here),
//! HTTP/1.1 with `Connection: close`; only a 200 counts (redirects are not
//! followed, §3.3), the media type must be `text/plain`, and the body is
//! at most [`POLICY_BYTES_MAX`]. The whole fetch runs under one timeout.
//! A small hand-written client: one request, no keep-alive, no redirects,
//! which is all the RFC allows, over the same rustls (ring) stack and trust
//! anchors as the SMTP client.

use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::Outbound;
use super::mx;

/// RFC 8461 §3.3: senders may limit the policy body to 64 KiB.
pub const POLICY_BYTES_MAX: usize = 64 * 1024;
/// The status line and header fields of the answer, at most.
const HEAD_BYTES_MAX: usize = 16 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    #[error("resolving {host}: {detail}")]
    Resolve { host: String, detail: String },
    #[error("connecting to {host}: {detail}")]
    Connect { host: String, detail: String },
    #[error("TLS with {host}: {detail}")]
    Tls { host: String, detail: String },
    #[error("timed out after {0} s")]
    Timeout(u64),
    #[error("HTTP status {0} (only 200 counts; redirects are not followed)")]
    Status(u16),
    #[error("bad HTTP answer: {0}")]
    Http(String),
    #[error("media type {0:?} is not text/plain")]
    MediaType(String),
    #[error("policy larger than {POLICY_BYTES_MAX} bytes")]
    TooLarge,
}

impl FetchError {
    /// The `outcome` label of `meshmail_outbound_mta_sts_fetches_total`.
    pub fn outcome(&self) -> &'static str {
        match self {
            FetchError::Resolve { .. } => "dns_error",
            FetchError::Connect { .. } => "connect_error",
            FetchError::Tls { .. } => "tls_error",
            FetchError::Timeout(_) => "timeout",
            FetchError::Status(_) => "http_status",
            FetchError::Http(_) | FetchError::MediaType(_) => "http_error",
            FetchError::TooLarge => "too_large",
        }
    }
}

/// The policy text of `domain`.
pub async fn fetch(o: &Outbound, domain: &str) -> Result<String, FetchError> {
    let timeout = o.config.mta_sts.fetch_timeout;
    match tokio::time::timeout(timeout, fetch_inner(o, domain)).await {
        Ok(r) => r,
        Err(_) => Err(FetchError::Timeout(timeout.as_secs())),
    }
}

async fn fetch_inner(o: &Outbound, domain: &str) -> Result<String, FetchError> {
    let host = format!("mta-sts.{domain}");
    let addrs = mx::host_addrs(&o.dns, &host, o.config.mta_sts.port)
        .await
        .map_err(|e| FetchError::Resolve {
            host: host.clone(),
            detail: e.to_string(),
        })?;
    let Some(roots) = o.tls.as_ref() else {
        return Err(FetchError::Tls {
            host,
            detail: "no trust anchors configured".into(),
        });
    };
    let config = roots.verifying_config().map_err(|e| FetchError::Tls {
        host: host.clone(),
        detail: e.to_string(),
    })?;
    let mut last = FetchError::Resolve {
        host: host.clone(),
        detail: "no address".into(),
    };
    for addr in addrs {
        let tcp = match TcpStream::connect(addr).await {
            Ok(t) => t,
            Err(e) => {
                last = FetchError::Connect {
                    host: host.clone(),
                    detail: format!("{addr}: {e}"),
                };
                continue;
            }
        };
        let name = rustls::pki_types::ServerName::try_from(host.clone()).map_err(|e| FetchError::Tls {
            host: host.clone(),
            detail: e.to_string(),
        })?;
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config.clone()));
        let mut tls = connector.connect(name, tcp).await.map_err(|e| FetchError::Tls {
            host: host.clone(),
            detail: e.to_string(),
        })?;
        let request = format!(
            "GET /.well-known/mta-sts.txt HTTP/1.1\r\nHost: {host}\r\nUser-Agent: meshmail\r\nAccept: text/plain\r\nConnection: close\r\n\r\n"
        );
        tls.write_all(request.as_bytes())
            .await
            .map_err(|e| FetchError::Http(e.to_string()))?;
        let mut raw = Vec::with_capacity(4096);
        let mut chunk = [0u8; 8192];
        loop {
            let n = match tls.read(&mut chunk).await {
                Ok(n) => n,
                // A peer that closes without close_notify: what arrived counts
                // (the length is checked below).
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => 0,
                Err(e) => return Err(FetchError::Http(e.to_string())),
            };
            if n == 0 {
                break;
            }
            raw.extend_from_slice(&chunk[..n]);
            if raw.len() > HEAD_BYTES_MAX + POLICY_BYTES_MAX + 64 * 1024 {
                return Err(FetchError::TooLarge);
            }
        }
        return parse_response(&raw);
    }
    Err(last)
}

/// The body of an HTTP/1.1 answer: status 200, `text/plain`, framed by
/// Content-Length, chunked, or the end of the connection.
pub fn parse_response(raw: &[u8]) -> Result<String, FetchError> {
    let head_end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .filter(|&p| p <= HEAD_BYTES_MAX)
        .ok_or_else(|| FetchError::Http("no end of header within 16 KiB".into()))?;
    let head = std::str::from_utf8(&raw[..head_end]).map_err(|_| FetchError::Http("header is not text".into()))?;
    let body = &raw[head_end + 4..];
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or("");
    let mut parts = status.split_whitespace();
    let (Some(version), Some(code)) = (parts.next(), parts.next()) else {
        return Err(FetchError::Http(format!("bad status line {status:?}")));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(FetchError::Http(format!("bad status line {status:?}")));
    }
    let code: u16 = code
        .parse()
        .map_err(|_| FetchError::Http(format!("bad status line {status:?}")))?;
    if code != 200 {
        return Err(FetchError::Status(code));
    }
    let (mut length, mut chunked, mut media) = (None, false, None);
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => {
                length = Some(
                    value
                        .parse::<usize>()
                        .map_err(|_| FetchError::Http("bad Content-Length".into()))?,
                )
            }
            "transfer-encoding" => chunked = value.to_ascii_lowercase().contains("chunked"),
            "content-type" => media = Some(value.to_string()),
            _ => {}
        }
    }
    let media = media.unwrap_or_default();
    if !media
        .split(';')
        .next()
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("text/plain"))
    {
        return Err(FetchError::MediaType(media));
    }
    let body = if chunked {
        dechunk(body)?
    } else if let Some(n) = length {
        if n > POLICY_BYTES_MAX {
            return Err(FetchError::TooLarge);
        }
        body.get(..n)
            .ok_or_else(|| FetchError::Http("body shorter than Content-Length".into()))?
            .to_vec()
    } else {
        body.to_vec()
    };
    if body.len() > POLICY_BYTES_MAX {
        return Err(FetchError::TooLarge);
    }
    String::from_utf8(body).map_err(|_| FetchError::Http("policy is not UTF-8".into()))
}

/// `Transfer-Encoding: chunked` (RFC 9112 §7.1), bounded by
/// [`POLICY_BYTES_MAX`].
fn dechunk(mut b: &[u8]) -> Result<Vec<u8>, FetchError> {
    let mut out = Vec::new();
    loop {
        let eol = b
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or_else(|| FetchError::Http("truncated chunk size".into()))?;
        let size_text = std::str::from_utf8(&b[..eol]).map_err(|_| FetchError::Http("bad chunk size".into()))?;
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| FetchError::Http("bad chunk size".into()))?;
        b = &b[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if out.len() + size > POLICY_BYTES_MAX {
            return Err(FetchError::TooLarge);
        }
        let data = b
            .get(..size)
            .ok_or_else(|| FetchError::Http("truncated chunk".into()))?;
        out.extend_from_slice(data);
        if b.get(size..size + 2) != Some(b"\r\n") {
            return Err(FetchError::Http("chunk data not followed by CRLF".into()));
        }
        b = &b[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses() {
        let ok = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 5\r\n\r\nhello+extra";
        assert_eq!(parse_response(ok).unwrap(), "hello");
        let close = b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil close";
        assert_eq!(parse_response(close).unwrap(), "until close");
        let chunked =
            b"HTTP/1.1 200 OK\r\nContent-Type: TEXT/PLAIN\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nversi\r\n3;x=y\r\non:\r\n0\r\n\r\n";
        assert!(parse_response(chunked).is_err(), "chunk longer than its size");
        let chunked =
            b"HTTP/1.1 200 OK\r\nContent-Type: TEXT/PLAIN\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nversi\r\n3;x=y\r\non:\r\n0\r\n\r\n";
        assert_eq!(parse_response(chunked).unwrap(), "version:");
        let redirect = b"HTTP/1.1 301 Moved\r\nLocation: https://elsewhere/\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(parse_response(redirect), Err(FetchError::Status(301)));
        let html = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<p>";
        assert!(matches!(parse_response(html), Err(FetchError::MediaType(_))));
        let big = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n",
            POLICY_BYTES_MAX + 1
        );
        assert_eq!(parse_response(big.as_bytes()), Err(FetchError::TooLarge));
        assert!(parse_response(b"garbage").is_err());
        assert!(parse_response(b"SMTP 220 hi\r\n\r\n").is_err());
    }
}
