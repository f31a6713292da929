//! HTTPS served by rolecall itself (`server.tls_cert_file` and
//! `server.tls_key_file`), so an on-prem operator without a reverse proxy
//! never sends a bearer token in clear. TLS 1.2 and 1.3 through rustls.
//!
//! rustls asks [`ServerCertificate`] for the certificate at every handshake,
//! so [`ServerCertificate::reload`] (on SIGHUP) swaps it for new handshakes
//! while the open connections carry on with the old one: a renewal needs
//! neither a restart nor a dropped connection.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};

use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{Error as RustlsError, InconsistentKeys, ServerConfig};
use rustls_pki_types::pem::{Error as PemError, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Why a certificate or key file cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum TlsFileError {
    /// Only one of the two settings is set.
    #[error(transparent)]
    HalfConfigured(#[from] crate::config::HalfConfiguredTls),
    /// The file is missing, unreadable or not PEM.
    #[error("{setting} {}: {source}", .path.display())]
    Unreadable {
        setting: &'static str,
        path: PathBuf,
        #[source]
        source: PemError,
    },
    /// The certificate file holds no certificate.
    #[error("server.tls_cert_file {}: no certificate found", .0.display())]
    NoCertificate(PathBuf),
    /// The key does not belong to the certificate.
    #[error(
        "server.tls_key_file {} is not the key of the certificate in server.tls_cert_file {}",
        .key.display(),
        .cert.display()
    )]
    Mismatch { cert: PathBuf, key: PathBuf },
    /// rustls refuses the pair (an unsupported key type, a malformed certificate).
    #[error("server.tls_cert_file {} with server.tls_key_file {}: {source}", .cert.display(), .key.display())]
    Unusable {
        cert: PathBuf,
        key: PathBuf,
        #[source]
        source: RustlsError,
    },
}

/// The certificate the server presents, reloadable from its two files.
#[derive(Debug)]
pub struct ServerCertificate {
    cert_file: PathBuf,
    key_file: PathBuf,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<CertifiedKey>>,
}

impl ServerCertificate {
    /// Reads and checks both files (PEM: the chain, leaf first; the key in
    /// PKCS#8, PKCS#1 or SEC1). A missing file or a key that does not match
    /// the certificate is an error here, so start-up stops with its reason.
    pub fn load(cert_file: &Path, key_file: &Path) -> Result<Arc<Self>, TlsFileError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let current = read_pair(cert_file, key_file, &provider)?;
        Ok(Arc::new(ServerCertificate {
            cert_file: cert_file.to_owned(),
            key_file: key_file.to_owned(),
            provider,
            current: RwLock::new(Arc::new(current)),
        }))
    }

    /// Reads the files again and serves them from the next handshake on.
    /// On an error the certificate in use stays, so a renewal half written
    /// (a new certificate, the old key) never takes HTTPS down.
    pub fn reload(&self) -> Result<String, TlsFileError> {
        let next = read_pair(&self.cert_file, &self.key_file, &self.provider)?;
        let fingerprint = fingerprint(&next);
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(next);
        Ok(fingerprint)
    }

    /// The SHA-256 fingerprint of the leaf certificate in use (hex, as
    /// `openssl x509 -fingerprint -sha256` shows it, without the colons).
    pub fn fingerprint(&self) -> String {
        fingerprint(&self.in_use())
    }

    /// A rustls configuration (TLS 1.2 and 1.3, no client certificates)
    /// that asks this certificate at each handshake.
    pub fn server_config(self: &Arc<Self>) -> Result<ServerConfig, RustlsError> {
        Ok(ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(self.clone()))
    }

    fn in_use(&self) -> Arc<CertifiedKey> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl ResolvesServerCert for ServerCertificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.in_use())
    }
}

fn read_pair(
    cert_file: &Path,
    key_file: &Path,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, TlsFileError> {
    let unreadable = |setting, path: &Path| {
        let path = path.to_owned();
        move |source| TlsFileError::Unreadable {
            setting,
            path,
            source,
        }
    };
    let chain = CertificateDer::pem_file_iter(cert_file)
        .map_err(unreadable("server.tls_cert_file", cert_file))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(unreadable("server.tls_cert_file", cert_file))?;
    if chain.is_empty() {
        return Err(TlsFileError::NoCertificate(cert_file.to_owned()));
    }
    let key = PrivateKeyDer::from_pem_file(key_file)
        .map_err(unreadable("server.tls_key_file", key_file))?;
    CertifiedKey::from_der(chain, key, provider).map_err(|source| match source {
        RustlsError::InconsistentKeys(InconsistentKeys::KeyMismatch) => TlsFileError::Mismatch {
            cert: cert_file.to_owned(),
            key: key_file.to_owned(),
        },
        source => TlsFileError::Unusable {
            cert: cert_file.to_owned(),
            key: key_file.to_owned(),
            source,
        },
    })
}

fn fingerprint(key: &CertifiedKey) -> String {
    let leaf = key.cert.first().map(|c| c.as_ref()).unwrap_or_default();
    crate::secrets::sha256(leaf)
        .iter()
        .fold(String::with_capacity(64), |mut hex, byte| {
            let _ = write!(hex, "{byte:02x}");
            hex
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
        let Ok(key) = rcgen::KeyPair::generate() else {
            panic!("key pair");
        };
        let Ok(cert) = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
            .and_then(|params| params.self_signed(&key))
        else {
            panic!("certificate");
        };
        let (cert_file, key_file) = (
            dir.join(format!("{name}.crt")),
            dir.join(format!("{name}.key")),
        );
        let written = std::fs::write(&cert_file, cert.pem())
            .and_then(|()| std::fs::write(&key_file, key.serialize_pem()));
        assert!(written.is_ok());
        (cert_file, key_file)
    }

    #[test]
    fn a_pair_loads_and_a_bad_reload_keeps_the_certificate_in_use() {
        let Ok(dir) = tempfile::tempdir() else {
            panic!("temp dir");
        };
        let (cert, key) = pair(dir.path(), "a");
        let (other_cert, other_key) = pair(dir.path(), "b");
        let Ok(served) = ServerCertificate::load(&cert, &key) else {
            panic!("the pair loads");
        };
        let before = served.fingerprint();
        assert_eq!(before.len(), 64);

        // A new certificate with the old key: refused, the old one stays.
        assert!(std::fs::copy(&other_cert, &cert).is_ok());
        assert!(matches!(
            served.reload(),
            Err(TlsFileError::Mismatch { .. })
        ));
        assert_eq!(served.fingerprint(), before);

        // Its key too: served from now on.
        assert!(std::fs::copy(&other_key, &key).is_ok());
        let Ok(after) = served.reload() else {
            panic!("the renewed pair loads");
        };
        assert_ne!(after, before);
        assert_eq!(served.fingerprint(), after);
    }

    #[test]
    fn missing_empty_and_mismatched_files_say_which_file() {
        let Ok(dir) = tempfile::tempdir() else {
            panic!("temp dir");
        };
        let (cert, key) = pair(dir.path(), "a");
        let (_, other_key) = pair(dir.path(), "b");
        let missing = dir.path().join("missing.pem");
        let empty = dir.path().join("empty.pem");
        assert!(std::fs::write(&empty, "").is_ok());

        let message = |cert: &Path, key: &Path| match ServerCertificate::load(cert, key) {
            Ok(_) => panic!("{} with {} must be refused", cert.display(), key.display()),
            Err(err) => err.to_string(),
        };
        let no_cert = message(&missing, &key);
        assert!(
            no_cert.starts_with(&format!("server.tls_cert_file {}: ", missing.display())),
            "{no_cert}"
        );
        let no_key = message(&cert, &missing);
        assert!(
            no_key.starts_with(&format!("server.tls_key_file {}: ", missing.display())),
            "{no_key}"
        );
        assert_eq!(
            message(&empty, &key),
            format!(
                "server.tls_cert_file {}: no certificate found",
                empty.display()
            )
        );
        assert!(message(&cert, &empty).starts_with("server.tls_key_file"));
        assert_eq!(
            message(&cert, &other_key),
            format!(
                "server.tls_key_file {} is not the key of the certificate in server.tls_cert_file {}",
                other_key.display(),
                cert.display()
            )
        );
    }
}
