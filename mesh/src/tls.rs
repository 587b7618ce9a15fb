//! rustls configurations for mesh links: TLS 1.3 only, ring only, mutual
//! authentication against the cluster CA, ALPN `meshmail/1`.
//!
//! The provider is passed explicitly to every builder: the process may hold
//! two providers (ractor_cluster brings aws-lc-rs through tokio-rustls) and a
//! process-wide default would make the choice depend on link order.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::CertificateDer;
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use x509_parser::extensions::GeneralName;

use crate::ca::NodeCredentials;
use crate::error::{MeshError, Result};
use crate::identity::NodeId;

/// The ALPN protocol of the mesh; a peer offering anything else is refused
/// during the handshake.
pub const ALPN: &[u8] = b"meshmail/1";

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn roots(creds: &NodeCredentials) -> Result<Arc<RootCertStore>> {
    let mut roots = RootCertStore::empty();
    roots.add(creds.ca.clone())?;
    Ok(Arc::new(roots))
}

/// The accepting side: our certificate, and a client certificate chained to
/// the cluster CA is mandatory (no anonymous clients).
pub fn server_config(creds: &NodeCredentials) -> Result<ServerConfig> {
    let verifier = WebPkiClientVerifier::builder_with_provider(roots(creds)?, provider()).build()?;
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_client_cert_verifier(verifier)
        .with_single_cert(creds.chain.clone(), creds.key.clone_key())?;
    config.alpn_protocols = vec![ALPN.to_vec()];
    Ok(config)
}

/// The dialing side: the cluster CA is the only root, so a server is only
/// accepted with a certificate the CA issued for the name we dial (the
/// expected node id, passed as the server name by the transport).
pub fn client_config(creds: &NodeCredentials) -> Result<ClientConfig> {
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_root_certificates(roots(creds)?)
        .with_client_auth_cert(creds.chain.clone(), creds.key.clone_key())?;
    config.alpn_protocols = vec![ALPN.to_vec()];
    Ok(config)
}

/// The node id a certificate names: its single DNS SAN, which must be a
/// valid node id. The CN is ignored (names are checked against SANs only).
pub fn node_id_of(cert: &CertificateDer<'_>) -> Result<NodeId> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref())
        .map_err(|e| MeshError::BadPeerCert(format!("unparsable certificate: {e}")))?;
    let san = parsed
        .subject_alternative_name()
        .map_err(|e| MeshError::BadPeerCert(format!("bad SAN extension: {e}")))?
        .ok_or_else(|| MeshError::BadPeerCert("no SAN extension".into()))?;
    let mut dns = san.value.general_names.iter().filter_map(|name| match name {
        GeneralName::DNSName(dns) => Some(*dns),
        _ => None,
    });
    // Exactly one name: a certificate valid for several ids would let one
    // node speak for another.
    match (dns.next(), dns.next()) {
        (Some(name), None) => {
            NodeId::new(name).map_err(|_| MeshError::BadPeerCert(format!("SAN {name:?} is not a valid node id")))
        }
        (None, _) => Err(MeshError::BadPeerCert("no DNS name in the SAN".into())),
        (Some(_), Some(_)) => Err(MeshError::BadPeerCert("more than one DNS name in the SAN".into())),
    }
}

/// The node id of the peer of an established QUIC connection, from the leaf
/// of the certificate chain it presented (and rustls verified).
pub fn peer_node_id(conn: &quinn::Connection) -> Result<NodeId> {
    let identity = conn
        .peer_identity()
        .ok_or_else(|| MeshError::BadPeerCert("the peer presented no certificate".into()))?;
    let chain = identity
        .downcast::<Vec<CertificateDer<'static>>>()
        .map_err(|_| MeshError::BadPeerCert("peer identity is not a certificate chain".into()))?;
    let leaf = chain
        .first()
        .ok_or_else(|| MeshError::BadPeerCert("empty certificate chain".into()))?;
    node_id_of(leaf)
}
