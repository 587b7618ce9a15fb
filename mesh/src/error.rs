//! The mesh's error type.

use std::path::PathBuf;

use crate::identity::CloseCode;

#[derive(Debug, thiserror::Error)]
pub enum MeshError {
    #[error("invalid node id {0:?}: use 1 to 63 characters of a-z, 0-9 and '-'")]
    InvalidNodeId(String),
    #[error("a cluster CA already exists in {0} (refusing to overwrite it)")]
    CaExists(PathBuf),
    // The io error is in the message, not a `source`: a chain printer would
    // show it twice.
    #[error("{path}: {error}")]
    Io { path: PathBuf, error: std::io::Error },
    #[error("{path}: {what}")]
    BadPem { path: PathBuf, what: String },
    #[error("certificate generation failed: {0}")]
    Rcgen(#[from] rcgen::Error),
    #[error("TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
    #[error("client certificate verifier: {0}")]
    Verifier(#[from] rustls::server::VerifierBuilderError),
    #[error("QUIC crypto configuration: {0}")]
    QuicCrypto(String),
    #[error("binding the QUIC endpoint: {0}")]
    Bind(#[source] std::io::Error),
    #[error("idle timeout out of range: {0}")]
    IdleTimeout(String),
    #[error("connecting: {0}")]
    Connect(#[from] quinn::ConnectError),
    #[error("connection failed: {0}")]
    Connection(#[from] quinn::ConnectionError),
    #[error("peer certificate carries no usable node id: {0}")]
    BadPeerCert(String),
    /// The hello exchange failed before either side refused (malformed frame, stream error, timeout).
    #[error("hello exchange failed: {0}")]
    Hello(String),
    /// This side refused the peer (and closed the connection with `code`).
    #[error("refused peer: {code:?}: {reason}")]
    Refused { code: CloseCode, reason: String },
    /// The peer refused us: it closed the connection with one of our refusal codes.
    #[error("refused by peer: {code:?}: {reason}")]
    RefusedByPeer { code: CloseCode, reason: String },
    #[error("the endpoint is closed")]
    EndpointClosed,
    #[error("this node is partitioned from the mesh (fault injection)")]
    Partitioned,
    #[error("remote messaging: {0}")]
    Cluster(String),
}

pub type Result<T, E = MeshError> = std::result::Result<T, E>;

impl MeshError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> MeshError {
        let path = path.into();
        move |error| MeshError::Io { path, error }
    }
}
