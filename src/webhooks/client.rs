//! The outbound HTTP client and one delivery attempt.
//!
//! The client resolves names itself and drops every address the policy
//! refuses, so a host name that resolves to 127.0.0.1 is never connected to;
//! redirects are never followed; TLS trusts the system roots plus
//! `webhooks.ca_file`. One attempt is bounded end to end (connect, send,
//! headers and at most 4096 body bytes) by the attempt timeout.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_tls::connect::{Connector as TcpConnector, Resolve, Resolver};
use actix_web::web::Bytes;
use futures_util::future::LocalBoxFuture;
use futures_util::StreamExt;
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;

use crate::domain::delivery::{Answer, AttemptOutcome, LOGGED_BODY_MAX};
use crate::secrets::Secret;
use crate::time::Timestamp;
use crate::webhooks::headers;
use crate::webhooks::proxy::{ProxyConnector, ProxySettings};
use crate::webhooks::signing::{service_signature, standard_signature};
use crate::webhooks::url::{allowed_addresses, parse_url, UrlPolicy};

/// What the operator configured for outbound requests.
#[derive(Clone)]
pub struct ClientSettings {
    /// Whole-attempt timeout.
    pub timeout: Duration,
    /// Which URLs and addresses are allowed.
    pub policy: UrlPolicy,
    /// TLS configuration (roots), shared by every client.
    pub tls: Arc<rustls::ClientConfig>,
    /// The egress proxy attempts go through, if any.
    pub proxy: Option<ProxySettings>,
}

/// Builds the TLS configuration: system roots plus the PEM roots in `ca_file`
/// (`setting` names where the file came from, for the error message).
pub fn tls_config(ca_file: &str, setting: &str) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(native.certs);
    if !ca_file.is_empty() {
        let certs = CertificateDer::pem_file_iter(ca_file)
            .map_err(|err| format!("{setting} {ca_file}: {err}"))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|err| format!("{setting} {ca_file}: {err}"))?;
        if certs.is_empty() {
            return Err(format!("{setting} {ca_file}: no certificates found"));
        }
        for cert in certs {
            roots
                .add(cert)
                .map_err(|err| format!("{setting} {ca_file}: {err}"))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| err.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A resolver that drops addresses the policy refuses.
struct PolicyResolver {
    allow_private_networks: bool,
}

impl Resolve for PolicyResolver {
    fn lookup<'a>(
        &'a self,
        host: &'a str,
        port: u16,
    ) -> LocalBoxFuture<'a, Result<Vec<SocketAddr>, Box<dyn std::error::Error>>> {
        Box::pin(async move {
            allowed_addresses(host, port, self.allow_private_networks)
                .await
                .map_err(|unusable| unusable.reported("a delivery attempt").into())
        })
    }
}

/// A client for one arbiter (awc clients are not `Send`), with keep-alive.
///
/// Its connection pool has no limit of its own: the dispatcher already
/// bounds attempts in flight, per organization and in total. awc's default
/// of 100 connections was a second, hidden queue where healthy attempts
/// waited for slow endpoints' connections to time out (p90 of healthy
/// deliveries 619 ms in the isolation scenario).
pub fn build_client(settings: &ClientSettings) -> awc::Client {
    let allow_private_networks = settings.policy.allow_private_networks;
    let direct = TcpConnector::new(Resolver::custom(PolicyResolver {
        allow_private_networks,
    }))
    .service();
    let client = awc::Client::builder()
        .disable_redirects()
        .timeout(settings.timeout)
        .no_default_headers();
    // The connect timeout covers the proxy's hop and its CONNECT answer.
    let connector = awc::Connector::new()
        .rustls_0_23(settings.tls.clone())
        .timeout(settings.timeout)
        .limit(0)
        .conn_keep_alive(Duration::from_secs(30));
    match &settings.proxy {
        Some(proxy) => client
            .connector(connector.connector(ProxyConnector::new(
                proxy.clone(),
                allow_private_networks,
                direct,
            )))
            .finish(),
        None => client.connector(connector.connector(direct)).finish(),
    }
}

/// One attempt to make.
pub struct AttemptRequest<'a> {
    /// Where to POST.
    pub url: &'a str,
    /// The secret current when the attempt starts.
    pub secret: &'a Secret,
    /// The event id.
    pub event: &'a str,
    /// The delivery id.
    pub delivery_id: &'a str,
    /// 1 or 2.
    pub attempt: u8,
    /// The envelope bytes.
    pub body: Bytes,
}

/// Makes one attempt, bounded by `settings.timeout` from start to finish.
pub async fn attempt(
    client: &awc::Client,
    settings: &ClientSettings,
    req: AttemptRequest<'_>,
) -> AttemptOutcome {
    let started_at = Timestamp::now();
    let clock = Instant::now();
    let result = match parse_url(req.url, settings.policy) {
        Err(refused) => Err(refused.0),
        Ok(_) => {
            match actix_web::rt::time::timeout(settings.timeout, send(client, &req, started_at))
                .await
            {
                Ok(result) => result,
                Err(_) => Err(format!(
                    "timed out after {} ms",
                    settings.timeout.as_millis()
                )),
            }
        }
    };
    let latency_ms = clock.elapsed().as_millis() as u64;
    match result {
        Ok((status, body)) => AttemptOutcome::Answered(Answer {
            status,
            body,
            latency_ms,
            started_at,
        }),
        Err(error) => AttemptOutcome::Unanswered {
            error,
            latency_ms,
            started_at,
        },
    }
}

async fn send(
    client: &awc::Client,
    req: &AttemptRequest<'_>,
    started_at: Timestamp,
) -> Result<(u16, String), String> {
    let timestamp = started_at.millis().div_euclid(1000);
    let mut response = client
        .post(req.url)
        .insert_header((headers::CONTENT_TYPE, "application/json"))
        .insert_header((headers::USER_AGENT, headers::USER_AGENT_VALUE))
        .insert_header((headers::X_SERVICE_EVENT, req.event))
        .insert_header((
            headers::X_SERVICE_SIGNATURE,
            service_signature(req.secret, &req.body),
        ))
        .insert_header((headers::X_SERVICE_ATTEMPT, req.attempt.to_string()))
        .insert_header((headers::X_SERVICE_DELIVERY, req.delivery_id))
        .insert_header((headers::WEBHOOK_ID, req.delivery_id))
        .insert_header((headers::WEBHOOK_TIMESTAMP, timestamp.to_string()))
        .insert_header((
            headers::WEBHOOK_SIGNATURE,
            standard_signature(req.secret, req.delivery_id, timestamp, &req.body),
        ))
        .send_body(req.body.clone())
        .await
        .map_err(|err| format!("request failed: {err}"))?;
    let status = response.status().as_u16();
    let mut kept = Vec::new();
    while kept.len() < LOGGED_BODY_MAX {
        match response.next().await {
            Some(Ok(chunk)) => kept.extend_from_slice(&chunk),
            Some(Err(err)) => return Err(format!("reading the response failed: {err}")),
            None => break,
        }
    }
    Ok((status, truncate_body(&kept)))
}

/// At most 4096 bytes of `bytes` as text, cut at a character boundary.
pub fn truncate_body(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(LOGGED_BODY_MAX)]);
    let mut end = text.len().min(LOGGED_BODY_MAX);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::webhooks::url::NO_USABLE_ADDRESS;

    /// The connect-time check, which defeats DNS rebinding: a name is judged
    /// on the addresses it resolves to when the attempt connects.
    #[test]
    fn the_resolver_refuses_names_resolving_only_to_refused_addresses() {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            panic!("no runtime")
        };
        let strict = PolicyResolver {
            allow_private_networks: false,
        };
        let refused = runtime.block_on(strict.lookup("localhost", 9));
        let error = refused.err().map(|e| e.to_string()).unwrap_or_default();
        assert_eq!(error, NO_USABLE_ADDRESS);
        let open = PolicyResolver {
            allow_private_networks: true,
        };
        let allowed = runtime.block_on(open.lookup("localhost", 9));
        assert!(allowed.is_ok_and(|addrs| addrs.iter().all(|a| a.ip().is_loopback())));
    }

    #[test]
    fn bodies_are_cut_to_4096_bytes_on_a_character_boundary() {
        assert_eq!(truncate_body(b"ok"), "ok");
        assert_eq!(truncate_body(&[b'a'; 10_000]).len(), 4096);
        let mut mixed = vec![b'a'; 4095];
        mixed.extend_from_slice("é".as_bytes());
        let cut = truncate_body(&mixed);
        assert!(cut.len() <= 4096 && cut.chars().all(|c| c == 'a'));
    }
}
