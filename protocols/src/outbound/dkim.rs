//! DKIM signing of outbound mail (RFC 6376; ed25519-sha256 RFC 8463) with
//! `mail-auth`, and key generation for `meshmail dkim generate`. Keys live
//! in the store (`model::dkim`) so every node signs the same way; a node
//! caches them for [`KEY_CACHE_TTL`] so a signature costs no store read.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine;
use mail_auth::common::crypto::{Ed25519Key, RsaKey, Sha256};
use mail_auth::common::headers::HeaderWriter;
use mail_auth::dkim::DkimSigner;
use meshmail_storage::model::dkim::{self, DkimAlgorithm, DkimKey};
use meshmail_storage::model::now_ms;
use meshmail_storage::{Database, StorageError};

/// How long a node trusts its cached copy of a domain's key (a rotation
/// reaches every node within this).
pub const KEY_CACHE_TTL: Duration = Duration::from_secs(60);

/// The header fields signed (RFC 6376 §5.4.1's recommendations); a field
/// listed but absent is signed as absent, so it cannot be added later.
const SIGNED_HEADERS: &[&str] = &[
    "From",
    "Reply-To",
    "Subject",
    "Date",
    "To",
    "Cc",
    "Message-ID",
    "In-Reply-To",
    "References",
    "MIME-Version",
    "Content-Type",
    "Content-Transfer-Encoding",
];

#[derive(Debug, thiserror::Error)]
pub enum DkimError {
    #[error("key generation failed: {0}")]
    Generate(String),
    #[error("stored key for {domain} is unusable: {detail}")]
    BadKey { domain: String, detail: String },
    #[error("signing failed: {0}")]
    Sign(String),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// Makes a new key for `domain` (not stored: the caller stores it).
pub fn generate(domain: &str, selector: &str, algorithm: DkimAlgorithm) -> Result<DkimKey, DkimError> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let (private, public) = match algorithm {
        DkimAlgorithm::Ed25519 => {
            let pkcs8 = Ed25519Key::generate_pkcs8().map_err(|e| DkimError::Generate(e.to_string()))?;
            let key = Ed25519Key::from_pkcs8_der(&pkcs8).map_err(|e| DkimError::Generate(e.to_string()))?;
            (pkcs8, key.public_key())
        }
        DkimAlgorithm::Rsa => {
            use aws_lc_rs::encoding::AsDer;
            use aws_lc_rs::signature::KeyPair;
            let pair = aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048)
                .map_err(|e| DkimError::Generate(e.to_string()))?;
            let pkcs8: aws_lc_rs::encoding::Pkcs8V1Der =
                pair.as_der().map_err(|e| DkimError::Generate(e.to_string()))?;
            // p= is the SubjectPublicKeyInfo, what `openssl rsa -pubout` gives.
            let spki: aws_lc_rs::encoding::PublicKeyX509Der = pair
                .public_key()
                .as_der()
                .map_err(|e| DkimError::Generate(e.to_string()))?;
            (pkcs8.as_ref().to_vec(), spki.as_ref().to_vec())
        }
    };
    Ok(DkimKey {
        domain: domain.to_ascii_lowercase(),
        selector: selector.to_string(),
        algorithm,
        private_pkcs8_b64: b64.encode(private),
        public_b64: b64.encode(public),
        created_ms: now_ms(),
    })
}

/// Signs `message` with `key`; returns the `DKIM-Signature:` header line(s)
/// to prepend (CRLF-terminated).
pub fn sign(key: &DkimKey, message: &[u8]) -> Result<String, DkimError> {
    let bad = |detail: String| DkimError::BadKey {
        domain: key.domain.clone(),
        detail,
    };
    let der = base64::engine::general_purpose::STANDARD
        .decode(&key.private_pkcs8_b64)
        .map_err(|e| bad(e.to_string()))?;
    let sig = match key.algorithm {
        DkimAlgorithm::Ed25519 => {
            let k = Ed25519Key::from_pkcs8_der(&der).map_err(|e| bad(e.to_string()))?;
            DkimSigner::from_key(k)
                .domain(key.domain.clone())
                .selector(key.selector.clone())
                .headers(SIGNED_HEADERS.iter().copied())
                .sign(message)
        }
        DkimAlgorithm::Rsa => {
            let pk = rustls::pki_types::PrivateKeyDer::Pkcs8(rustls::pki_types::PrivatePkcs8KeyDer::from(der));
            let k = RsaKey::<Sha256>::from_key_der(pk).map_err(|e| bad(e.to_string()))?;
            DkimSigner::from_key(k)
                .domain(key.domain.clone())
                .selector(key.selector.clone())
                .headers(SIGNED_HEADERS.iter().copied())
                .sign(message)
        }
    }
    .map_err(|e| DkimError::Sign(e.to_string()))?;
    Ok(sig.to_header())
}

/// The node's view of the stored keys, refreshed every [`KEY_CACHE_TTL`].
#[derive(Default)]
pub struct KeyCache {
    entries: Mutex<HashMap<String, (Instant, Option<DkimKey>)>>,
}

impl KeyCache {
    pub async fn key(&self, db: &Database, domain: &str) -> Result<Option<DkimKey>, StorageError> {
        let domain = domain.to_ascii_lowercase();
        if let Some((at, k)) = self.entries.lock().expect("dkim cache").get(&domain)
            && at.elapsed() < KEY_CACHE_TTL
        {
            return Ok(k.clone());
        }
        let d = domain.clone();
        let key = db
            .read("dkim_key", move |txn| {
                let d = d.clone();
                async move { dkim::get(&txn, &d).await }
            })
            .await?;
        let mut entries = self.entries.lock().expect("dkim cache");
        // Bounded: one entry per local domain that sends; cleared if it
        // ever grows past what any deployment has.
        if entries.len() > 10_000 {
            entries.clear();
        }
        entries.insert(domain, (Instant::now(), key.clone()));
        Ok(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_sign() {
        let msg = b"From: a@example.test\r\nTo: b@remote.test\r\nSubject: hi\r\n\r\nbody\r\n";
        for alg in [DkimAlgorithm::Ed25519, DkimAlgorithm::Rsa] {
            let key = generate("Example.Test", "s1", alg).unwrap();
            assert_eq!(key.domain, "example.test");
            assert!(key.dns_txt().starts_with(&format!("v=DKIM1; k={}; p=", alg.key_type())));
            let header = sign(&key, msg).unwrap();
            assert!(header.starts_with("DKIM-Signature:"), "{header}");
            assert!(header.contains("d=example.test") && header.contains("s=s1"), "{header}");
        }
    }
}
