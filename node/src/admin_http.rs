//! A minimal HTTP/1.1 client for admin commands that talk to a running
//! node's HTTP listener (one request per connection, `Connection: close`):
//! enough for the node's own admin routes, whose answers always carry a
//! length, without pulling an HTTP client library into the binary.

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Why a request to the node failed before an answer came.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error(
        "connecting to the node's HTTP listener at {addr}: {source} (is `meshmail serve` running there? see --node)"
    )]
    Connect {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("talking to the node at {addr}: {source}")]
    Io {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the node at {addr} sent no HTTP answer")]
    Malformed { addr: String },
}

/// An answer: the status code and the body.
pub struct Answer {
    pub code: u16,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).trim_end().to_string()
    }
}

/// Sends one request; `body` with its content type, if any.
pub async fn request(method: &str, addr: &str, path: &str, body: Option<(&str, &[u8])>) -> Result<Answer, HttpError> {
    let io = |source| HttpError::Io {
        addr: addr.to_string(),
        source,
    };
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|source| HttpError::Connect {
            addr: addr.to_string(),
            source,
        })?;
    let (content_type, bytes) = body.unwrap_or(("application/octet-stream", &[]));
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        bytes.len()
    );
    s.write_all(head.as_bytes()).await.map_err(io)?;
    // A refusal may come before the body is all sent (413): read it anyway.
    let sent = s.write_all(bytes).await;
    let mut out = Vec::new();
    let read = s.read_to_end(&mut out).await;
    if out.is_empty() {
        sent.map_err(io)?;
        read.map_err(io)?;
    }
    parse(&out).ok_or_else(|| HttpError::Malformed { addr: addr.to_string() })
}

fn parse(raw: &[u8]) -> Option<Answer> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..split]).ok()?;
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    Some(Answer {
        code,
        body: raw[split + 4..].to_vec(),
    })
}

/// `s` percent-encoded for a URL path segment or query value: everything
/// but RFC 3986's unreserved characters.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_all_but_unreserved() {
        assert_eq!(encode("a b/ü\\Seen$x"), "a%20b%2F%C3%BC%5CSeen%24x");
    }

    #[test]
    fn parses_an_answer() {
        let a = parse(b"HTTP/1.1 413 Payload Too Large\r\ncontent-length: 3\r\n\r\nbig").unwrap();
        assert_eq!((a.code, a.text().as_str()), (413, "big"));
        assert!(parse(b"garbage").is_none());
    }
}
