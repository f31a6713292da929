//! A test certificate authority (rcgen): an on-prem CA and the leaf
//! certificates it signs for `localhost` and `127.0.0.1`.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, PublicKeyData,
};
use sha2::{Digest, Sha256};

/// A CA that signs server certificates.
pub struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    /// The CA certificate, PEM (what a client or `webhooks.ca_file` trusts).
    pub pem: String,
}

/// A server certificate and its private key.
pub struct Leaf {
    pub der: Vec<u8>,
    pub pem: String,
    /// PKCS#8.
    pub key_der: Vec<u8>,
    pub key_pem: String,
    /// The SHA-256 of its SubjectPublicKeyInfo, base64 (what Chromium's
    /// `--ignore-certificate-errors-spki-list` pins).
    pub spki_sha256: String,
}

impl TestCa {
    pub fn new(name: &str) -> TestCa {
        let key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        params.distinguished_name.push(DnType::CommonName, name);
        let pem = params.self_signed(&key).expect("CA certificate").pem();
        TestCa {
            issuer: Issuer::new(params, key),
            pem,
        }
    }

    /// A new key and a certificate for `localhost` and `127.0.0.1`, with
    /// `common_name` as its subject.
    pub fn issue(&self, common_name: &str) -> Leaf {
        let key = KeyPair::generate().expect("leaf key");
        let mut params =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
                .expect("leaf params");
        params.is_ca = IsCa::NoCa;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let leaf = params
            .signed_by(&key, &self.issuer)
            .expect("leaf certificate");
        Leaf {
            der: leaf.der().to_vec(),
            pem: leaf.pem(),
            key_der: key.serialize_der(),
            key_pem: key.serialize_pem(),
            spki_sha256: STANDARD.encode(Sha256::digest(key.subject_public_key_info())),
        }
    }
}
