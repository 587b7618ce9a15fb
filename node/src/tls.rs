//! TLS for the mail listeners (STARTTLS and implicit TLS).
//!
//! Production configs name a certificate and key (PEM). Without them the
//! node makes a self-signed certificate for its hostname once and keeps it
//! under `<data_dir>/tls/`, so the dev default offers STARTTLS with no setup
//! (clients must be told to accept it, as with any self-signed cert).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use rustls::ServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

pub fn acceptor(
    cert: Option<&Path>,
    key: Option<&Path>,
    data_dir: &Path,
    hostname: &str,
) -> anyhow::Result<TlsAcceptor> {
    let (cert_path, key_path) = match (cert, key) {
        (Some(c), Some(k)) => (c.to_path_buf(), k.to_path_buf()),
        (None, None) => self_signed(data_dir, hostname)?,
        _ => anyhow::bail!("[tls] needs both cert and key"),
    };
    let certs: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut std::io::BufReader::new(
        std::fs::File::open(&cert_path).with_context(|| format!("opening {}", cert_path.display()))?,
    ))
    .collect::<Result<_, _>>()
    .with_context(|| format!("reading certificates from {}", cert_path.display()))?;
    let key: PrivateKeyDer<'static> = rustls_pemfile::private_key(&mut std::io::BufReader::new(
        std::fs::File::open(&key_path).with_context(|| format!("opening {}", key_path.display()))?,
    ))?
    .with_context(|| format!("no private key in {}", key_path.display()))?;
    // Explicit provider and versions: TLS 1.2 and 1.3 with ring, whatever
    // the defaults of the day are.
    let config = ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("building the TLS server config")?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

fn self_signed(data_dir: &Path, hostname: &str) -> anyhow::Result<(PathBuf, PathBuf)> {
    let dir = data_dir.join("tls");
    let (cert_path, key_path) = (dir.join("self-signed.pem"), dir.join("self-signed.key"));
    if cert_path.exists() && key_path.exists() {
        return Ok((cert_path, key_path));
    }
    std::fs::create_dir_all(&dir)?;
    let names = vec![hostname.to_string(), "localhost".to_string()];
    let generated = rcgen::generate_simple_self_signed(names).context("generating a self-signed certificate")?;
    std::fs::write(&cert_path, generated.cert.pem())?;
    std::fs::write(&key_path, generated.signing_key.serialize_pem())?;
    std::fs::set_permissions(&key_path, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    tracing::info!(cert = %cert_path.display(), "generated a self-signed TLS certificate for the dev default");
    Ok((cert_path, key_path))
}
