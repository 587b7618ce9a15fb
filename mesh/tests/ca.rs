//! The cluster CA on disk: files, modes, refusal to overwrite, node ids in
//! certificates.

use std::os::unix::fs::PermissionsExt;

use meshmail_mesh::ca::{CA_CERT_FILE, CA_KEY_FILE};
use meshmail_mesh::{ClusterCa, MeshError, NodeCredentials, NodeId};

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn init_writes_a_private_key_and_never_overwrites() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cluster");
    let ca = ClusterCa::init(&dir).unwrap();
    assert_eq!(mode(&dir.join(CA_KEY_FILE)), 0o600);
    let pem = std::fs::read_to_string(dir.join(CA_CERT_FILE)).unwrap();
    assert_eq!(pem, ca.cert_pem());
    let key_before = std::fs::read(dir.join(CA_KEY_FILE)).unwrap();

    assert!(matches!(ClusterCa::init(&dir), Err(MeshError::CaExists(_))));
    // Even a lone key (half-written CA, or the cert moved away) is not overwritten.
    std::fs::remove_file(dir.join(CA_CERT_FILE)).unwrap();
    assert!(matches!(ClusterCa::init(&dir), Err(MeshError::CaExists(_))));
    assert_eq!(std::fs::read(dir.join(CA_KEY_FILE)).unwrap(), key_before);
}

#[test]
fn loaded_ca_issues_certificates_named_by_node_id() {
    let tmp = tempfile::tempdir().unwrap();
    ClusterCa::init(tmp.path()).unwrap();
    let ca = ClusterCa::load(tmp.path()).unwrap();
    let id = NodeId::new("node-7").unwrap();
    let files = ca.issue_node_cert(&id, tmp.path()).unwrap();
    assert_eq!(files.cert, tmp.path().join("node-7.pem"));
    assert_eq!(mode(&files.key), 0o600);

    let creds = NodeCredentials::load(tmp.path(), &id).unwrap();
    assert_eq!(creds.node_id, id);
    // SAN (what the mesh trusts) and CN both carry the id.
    let (_, cert) = x509_parser::parse_x509_certificate(creds.chain[0].as_ref()).unwrap();
    let cn = cert.subject().iter_common_name().next().unwrap().as_str().unwrap();
    assert_eq!(cn, "node-7");
    assert_eq!(meshmail_mesh::tls::node_id_of(&creds.chain[0]).unwrap(), id);
    // Issued by the CA on disk.
    let (_, ca_cert) = x509_parser::parse_x509_certificate(creds.ca.as_ref()).unwrap();
    assert_eq!(cert.issuer(), ca_cert.subject());
    assert!(ca_cert.is_ca());

    // Re-issuing rotates the key and keeps it private.
    let old_key = std::fs::read(&files.key).unwrap();
    ca.issue_node_cert(&id, tmp.path()).unwrap();
    assert_ne!(std::fs::read(&files.key).unwrap(), old_key);
    assert_eq!(mode(&files.key), 0o600);
}

#[test]
fn credentials_must_name_the_requested_node() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = ClusterCa::init(tmp.path()).unwrap();
    let b = NodeId::new("b").unwrap();
    ca.issue_node_cert(&b, tmp.path()).unwrap();
    std::fs::copy(tmp.path().join("b.pem"), tmp.path().join("c.pem")).unwrap();
    std::fs::copy(tmp.path().join("b.key"), tmp.path().join("c.key")).unwrap();
    let err = NodeCredentials::load(tmp.path(), &NodeId::new("c").unwrap()).unwrap_err();
    assert!(err.to_string().contains("certificate for b"), "{err}");
}

#[test]
fn load_without_a_ca_says_where_it_looked() {
    let tmp = tempfile::tempdir().unwrap();
    let err = ClusterCa::load(tmp.path()).err().unwrap();
    assert!(err.to_string().contains(CA_CERT_FILE), "{err}");
}
