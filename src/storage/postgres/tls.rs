//! TLS for PostgreSQL connections: rustls, verifying the server's name
//! against the system's roots and `sslrootcert`. A Unix socket has no name
//! to verify, and PostgreSQL never offers TLS on one: tokio-postgres still
//! asks for a connector first, with an empty name, which rustls refuses
//! outright. So an empty name gets a connector that is used only if TLS is
//! demanded there, and then fails saying why.

use std::sync::Arc;

use futures_util::future::{self, Either, ErrInto, Ready, TryFutureExt};
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::error::SettingsError;

/// An error of a TLS connection, as tokio-postgres takes them.
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What connections are secured with (see the module's doc).
#[derive(Clone)]
pub struct Tls(MakeRustlsConnect);

impl Tls {
    /// rustls with the system's roots, and the CAs of `root_cert` (a PEM
    /// file) when given.
    pub fn new(root_cert: Option<&str>) -> Result<Self, SettingsError> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_native_certs::load_native_certs().certs {
            // A system root rustls cannot parse is skipped, as browsers do.
            let _ = roots.add(cert);
        }
        if let Some(path) = root_cert {
            use rustls_pki_types::pem::PemObject;
            let refused = |reason: String| SettingsError::RootCert {
                path: path.to_owned(),
                reason,
            };
            let certs = rustls_pki_types::CertificateDer::pem_file_iter(path)
                .map_err(|err| refused(err.to_string()))?;
            for cert in certs {
                roots
                    .add(cert.map_err(|err| refused(err.to_string()))?)
                    .map_err(|err| refused(err.to_string()))?;
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|err| SettingsError::Url(err.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Tls(MakeRustlsConnect::new(config)))
    }
}

impl<S> MakeTlsConnect<S> for Tls
where
    MakeRustlsConnect: MakeTlsConnect<S>,
{
    type Stream = <MakeRustlsConnect as MakeTlsConnect<S>>::Stream;
    type TlsConnect = ForHost<<MakeRustlsConnect as MakeTlsConnect<S>>::TlsConnect>;
    type Error = <MakeRustlsConnect as MakeTlsConnect<S>>::Error;

    fn make_tls_connect(&mut self, host: &str) -> Result<Self::TlsConnect, Self::Error> {
        if host.is_empty() {
            return Ok(ForHost::Unnamed);
        }
        self.0.make_tls_connect(host).map(ForHost::Named)
    }
}

/// The connector of one connection.
pub enum ForHost<C> {
    /// rustls, for a server reached by name.
    Named(C),
    /// A Unix socket (or an address without a name): nothing to verify.
    Unnamed,
}

impl<S, C> TlsConnect<S> for ForHost<C>
where
    C: TlsConnect<S>,
{
    type Stream = C::Stream;
    type Error = BoxError;
    type Future = Either<ErrInto<C::Future, BoxError>, Ready<Result<C::Stream, BoxError>>>;

    fn connect(self, stream: S) -> Self::Future {
        match self {
            ForHost::Named(connector) => Either::Left(connector.connect(stream).err_into()),
            ForHost::Unnamed => Either::Right(future::ready(Err(UNNAMED.into()))),
        }
    }
}

/// Why TLS was refused where the server has no name.
const UNNAMED: &str = "TLS needs a host name to verify the server's certificate; \
     a Unix socket has none (use sslmode=disable there, or name the host)";

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `tls` gives `host` a connector that verifies a name.
    fn named(tls: &mut Tls, host: &str) -> Option<bool> {
        match MakeTlsConnect::<tokio_postgres::Socket>::make_tls_connect(tls, host) {
            Ok(ForHost::Named(_)) => Some(true),
            Ok(ForHost::Unnamed) => Some(false),
            Err(_) => None,
        }
    }

    #[test]
    fn a_unix_socket_gets_a_connector_and_a_named_host_gets_rustls() {
        let Ok(mut tls) = Tls::new(None) else {
            panic!("rustls with the system's roots");
        };
        assert_eq!(named(&mut tls, ""), Some(false));
        assert_eq!(named(&mut tls, "db.internal"), Some(true));
        assert_eq!(named(&mut tls, "127.0.0.1"), Some(true));
    }
}
