//! The cluster CA and node certificates.
//!
//! One private CA per cluster signs one certificate per node; the node id is
//! the certificate's only DNS SAN and its CN. Mutual TLS against that CA is
//! what admits a node to the mesh, so the CA key is the cluster's secret:
//! it is written 0600 and never overwritten (a new CA would lock every
//! existing node out).

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::{MeshError, Result};
use crate::identity::NodeId;

pub const CA_CERT_FILE: &str = "ca.pem";
pub const CA_KEY_FILE: &str = "ca.key";

/// Years a CA certificate is valid; node certificates get fewer so that a
/// leaked node key expires long before the CA does.
const CA_YEARS: i32 = 20;
const NODE_YEARS: i32 = 5;

/// A loaded cluster CA, able to issue node certificates.
pub struct ClusterCa {
    dir: PathBuf,
    cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

/// Where `issue_node_cert` wrote a node's files.
#[derive(Debug, Clone)]
pub struct NodeCertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl ClusterCa {
    /// Creates a new CA in `dir` (created if missing). Refuses when either
    /// CA file already exists.
    pub fn init(dir: &Path) -> Result<ClusterCa> {
        std::fs::create_dir_all(dir).map_err(MeshError::io(dir))?;
        let (cert_path, key_path) = (dir.join(CA_CERT_FILE), dir.join(CA_KEY_FILE));
        if cert_path.exists() || key_path.exists() {
            return Err(MeshError::CaExists(dir.to_path_buf()));
        }
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name = distinguished_name("meshmail cluster CA");
        // Path length 0: the CA signs node certificates only, never another CA.
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        set_validity(&mut params, CA_YEARS);
        let cert = params.self_signed(&key)?;
        // create_new on both files: two concurrent `init`s cannot both win.
        write_new(&key_path, key.serialize_pem().as_bytes(), 0o600)?;
        write_new(&cert_path, cert.pem().as_bytes(), 0o644)?;
        Ok(ClusterCa {
            dir: dir.to_path_buf(),
            cert_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        })
    }

    /// Loads the CA that `init` wrote in `dir`.
    pub fn load(dir: &Path) -> Result<ClusterCa> {
        let (cert_path, key_path) = (dir.join(CA_CERT_FILE), dir.join(CA_KEY_FILE));
        let cert_pem = std::fs::read_to_string(&cert_path).map_err(MeshError::io(&cert_path))?;
        let key_pem = std::fs::read_to_string(&key_path).map_err(MeshError::io(&key_path))?;
        let key = KeyPair::from_pem(&key_pem).map_err(|e| MeshError::BadPem {
            path: key_path.clone(),
            what: e.to_string(),
        })?;
        let issuer = Issuer::from_ca_cert_pem(&cert_pem, key).map_err(|e| MeshError::BadPem {
            path: cert_path.clone(),
            what: e.to_string(),
        })?;
        Ok(ClusterCa {
            dir: dir.to_path_buf(),
            cert_pem,
            issuer,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// Issues a certificate for `node_id` (SAN and CN = the id) and writes
    /// `<node_id>.pem` and `<node_id>.key` (0600) into `dir`, replacing an
    /// older pair for that node (re-issuing is how a node key is rotated).
    pub fn issue_node_cert(&self, node_id: &NodeId, dir: &Path) -> Result<NodeCertFiles> {
        std::fs::create_dir_all(dir).map_err(MeshError::io(dir))?;
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(vec![node_id.as_str().to_string()])?;
        params.distinguished_name = distinguished_name(node_id.as_str());
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        // Every node is both a QUIC server (accepting) and a client (dialing).
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        params.use_authority_key_identifier_extension = true;
        set_validity(&mut params, NODE_YEARS);
        let cert = params.signed_by(&key, &self.issuer)?;
        let files = NodeCertFiles {
            cert: dir.join(format!("{node_id}.pem")),
            key: dir.join(format!("{node_id}.key")),
        };
        write_replacing(&files.key, key.serialize_pem().as_bytes(), 0o600)?;
        write_replacing(&files.cert, cert.pem().as_bytes(), 0o644)?;
        Ok(files)
    }
}

/// What a node needs to join the mesh: the CA to trust, its own chain and key.
/// The node id is read from the certificate, like a peer's would be.
#[derive(Debug)]
pub struct NodeCredentials {
    pub node_id: NodeId,
    pub ca: CertificateDer<'static>,
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

impl NodeCredentials {
    /// Loads `ca.pem`, `<node_id>.pem` and `<node_id>.key` from `dir`.
    pub fn load(dir: &Path, node_id: &NodeId) -> Result<NodeCredentials> {
        let creds = NodeCredentials::from_files(
            &dir.join(CA_CERT_FILE),
            &dir.join(format!("{node_id}.pem")),
            &dir.join(format!("{node_id}.key")),
        )?;
        if &creds.node_id != node_id {
            return Err(MeshError::BadPeerCert(format!(
                "{node_id}.pem is a certificate for {}",
                creds.node_id
            )));
        }
        Ok(creds)
    }

    /// Loads the three files from anywhere (the trusted CA may differ from the
    /// one that signed the certificate: the mesh will then refuse the node).
    pub fn from_files(ca: &Path, cert: &Path, key: &Path) -> Result<NodeCredentials> {
        let ca = read_certs(ca)?
            .into_iter()
            .next()
            .ok_or_else(|| bad_pem(ca, "no certificate"))?;
        let chain = read_certs(cert)?;
        let leaf = chain.first().ok_or_else(|| bad_pem(cert, "no certificate"))?;
        let node_id = crate::tls::node_id_of(leaf)?;
        let key = {
            let bytes = std::fs::read(key).map_err(MeshError::io(key))?;
            rustls_pemfile::private_key(&mut bytes.as_slice())
                .map_err(|e| bad_pem(key, &e.to_string()))?
                .ok_or_else(|| bad_pem(key, "no private key"))?
        };
        Ok(NodeCredentials {
            node_id,
            ca,
            chain,
            key,
        })
    }
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let bytes = std::fs::read(path).map_err(MeshError::io(path))?;
    rustls_pemfile::certs(&mut bytes.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad_pem(path, &e.to_string()))
}

fn bad_pem(path: &Path, what: &str) -> MeshError {
    MeshError::BadPem {
        path: path.to_path_buf(),
        what: what.to_string(),
    }
}

fn distinguished_name(cn: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    dn
}

/// From January 1st of last year (tolerates clocks a little behind) to
/// `years` from now. Rotation is not automated yet: the horizon is long.
fn set_validity(params: &mut CertificateParams, years: i32) {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    // Average Gregorian year, minus one for safety: a not_before a year early
    // is harmless, one a day late would reject a fresh certificate.
    let year = 1970 + (secs / 31_556_952) as i32 - 1;
    params.not_before = rcgen::date_time_ymd(year, 1, 1);
    params.not_after = rcgen::date_time_ymd(year + 1 + years, 1, 1);
}

fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => MeshError::CaExists(path.parent().unwrap_or(path).to_path_buf()),
            _ => MeshError::Io {
                path: path.to_path_buf(),
                error: e,
            },
        })?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(MeshError::io(path))
}

/// Writes a sibling temp file with `mode` from the start (a key is never
/// readable by others, not even briefly) and renames it over `path`.
fn write_replacing(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .map_err(MeshError::io(&tmp))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(MeshError::io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(MeshError::io(path))
}
