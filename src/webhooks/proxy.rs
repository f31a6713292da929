//! The egress proxy (`webhooks.proxy_url`, `webhooks.no_proxy`; CONTRACT
//! §10): every attempt, the Test's included, reaches its endpoint through
//! a tunnel the proxy opens with `CONNECT host:port` (for `https://`, TLS
//! then runs end to end inside it; for `http://`, the request does), unless
//! the host is one `no_proxy` names.
//!
//! The URL policy still judges the endpoint's host before anything is
//! sent: address literals always; a name, on the addresses it resolves to
//! here when it resolves. A name that does not resolve here (a network
//! that reaches out only through the proxy) is left to the proxy. The
//! proxy's own address is the operator's choice and is not judged. Its
//! credentials are sent as `Proxy-Authorization: Basic` and never logged.

use std::net::IpAddr;
use std::rc::Rc;
use std::task::{Context, Poll};

use actix_tls::connect::{ConnectError, ConnectInfo, Connection};
use actix_web::dev::Service;
use actix_web::http::Uri;
use base64::Engine as _;
use futures_util::future::LocalBoxFuture;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::secrets::Secret;
use crate::webhooks::url::{literal_address, proxied_host_allowed};

/// Longest proxy answer to `CONNECT` read (status line and headers).
const ANSWER_MAX: usize = 8 * 1024;

/// What `webhooks.proxy_url` and `webhooks.no_proxy` say.
#[derive(Clone)]
pub struct ProxySettings {
    /// `host:port` of the proxy.
    address: String,
    /// `Basic …` for `Proxy-Authorization`, when the URL had credentials.
    authorization: Option<Secret>,
    /// Hosts and domains reached directly.
    no_proxy: Vec<String>,
}

impl std::fmt::Debug for ProxySettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxySettings")
            .field("address", &self.address)
            .field("credentials", &self.authorization.is_some())
            .field("no_proxy", &self.no_proxy)
            .finish()
    }
}

/// Why `webhooks.proxy_url` cannot be used (it never quotes the URL: it
/// may hold a password).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("webhooks.proxy_url: {0}")]
pub struct ProxyUrlError(&'static str);

impl ProxySettings {
    /// Parses `http://[user:pass@]host[:port]` (port 80 when left out;
    /// user and password percent-decoded); `None` for an empty URL.
    pub fn parse(url: &str, no_proxy: &[String]) -> Result<Option<Self>, ProxyUrlError> {
        let url = url.trim();
        if url.is_empty() {
            return Ok(None);
        }
        let rest = url
            .strip_prefix("http://")
            .ok_or(ProxyUrlError("must start with http:// (the proxy is spoken to in plain HTTP; https:// endpoints are tunnelled through it)"))?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains(['/', '?', '#']) {
            return Err(ProxyUrlError(
                "must be http://[user:pass@]host:port, with no path",
            ));
        }
        let (credentials, host_port) = match rest.rsplit_once('@') {
            Some((credentials, host_port)) => (Some(credentials), host_port),
            None => (None, rest),
        };
        let address = host_and_port(host_port)?;
        let authorization = match credentials {
            None => None,
            Some(credentials) => {
                let (user, password) = credentials.split_once(':').unwrap_or((credentials, ""));
                let plain = format!("{}:{}", percent_decoded(user)?, percent_decoded(password)?);
                let encoded = base64::engine::general_purpose::STANDARD.encode(plain);
                Some(Secret::new(format!("Basic {encoded}")))
            }
        };
        let no_proxy = no_proxy
            .iter()
            .map(|entry| entry.trim().trim_start_matches('.').to_ascii_lowercase())
            .filter(|entry| !entry.is_empty())
            .collect();
        Ok(Some(ProxySettings {
            address,
            authorization,
            no_proxy,
        }))
    }

    /// Whether `host` is reached directly: `no_proxy` names it, or a domain
    /// it is in (`example.com` and `.example.com` both cover
    /// `api.example.com`), or is `*`.
    pub fn bypasses(&self, host: &str) -> bool {
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .trim_end_matches('.')
            .to_ascii_lowercase();
        self.no_proxy.iter().any(|entry| {
            entry == "*"
                || *entry == host
                || host
                    .strip_suffix(entry.as_str())
                    .is_some_and(|head| head.ends_with('.'))
        })
    }
}

/// `host:port` of the proxy URL's authority (port 80 when left out).
fn host_and_port(authority: &str) -> Result<String, ProxyUrlError> {
    let bad = ProxyUrlError("must name a host and a port: http://[user:pass@]host:port");
    let (host, port) = match authority.rsplit_once(':') {
        // An IPv6 literal's colons are inside its brackets.
        Some((host, port)) if !port.contains(']') => (host, port),
        _ => (authority, "80"),
    };
    let port: u16 = port.parse().map_err(|_| bad)?;
    // An IPv6 literal must be in brackets, so that its port can be told.
    let bracketed = host.starts_with('[') && host.ends_with(']');
    if host.is_empty() || port == 0 || (host.contains(':') && !bracketed) {
        return Err(bad);
    }
    Ok(format!("{host}:{port}"))
}

/// `text` with its `%XX` escapes decoded.
fn percent_decoded(text: &str) -> Result<String, ProxyUrlError> {
    let bad = ProxyUrlError("the user or password has a malformed %-escape");
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3).ok_or(bad)?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| bad)?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| bad)
}

/// The connector attempts use when a proxy is configured: a tunnel through
/// it, or `direct` for the hosts `no_proxy` names.
#[derive(Clone)]
pub struct ProxyConnector<D> {
    proxy: Rc<ProxySettings>,
    allow_private_networks: bool,
    direct: D,
}

impl<D> ProxyConnector<D> {
    /// Tunnels through `proxy`; `direct` connects the hosts it bypasses.
    pub fn new(proxy: ProxySettings, allow_private_networks: bool, direct: D) -> Self {
        ProxyConnector {
            proxy: Rc::new(proxy),
            allow_private_networks,
            direct,
        }
    }
}

impl<D> Service<ConnectInfo<Uri>> for ProxyConnector<D>
where
    D: Service<ConnectInfo<Uri>, Response = Connection<Uri, TcpStream>, Error = ConnectError>
        + Clone
        + 'static,
{
    type Response = Connection<Uri, TcpStream>;
    type Error = ConnectError;
    type Future = LocalBoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.direct.poll_ready(cx)
    }

    fn call(&self, req: ConnectInfo<Uri>) -> Self::Future {
        if self.proxy.bypasses(req.hostname()) {
            return Box::pin(self.direct.call(req));
        }
        let (proxy, allow_private_networks) = (self.proxy.clone(), self.allow_private_networks);
        Box::pin(async move {
            let (host, port) = (req.hostname().to_owned(), req.port());
            judge(&host, port, allow_private_networks).await?;
            let stream = tunnel(&proxy, &host, port).await?;
            Ok(Connection::new(req.request().clone(), stream))
        })
    }
}

/// [`proxied_host_allowed`], for the connector.
async fn judge(host: &str, port: u16, allow_private_networks: bool) -> Result<(), ConnectError> {
    proxied_host_allowed(host, port, allow_private_networks)
        .await
        .map_err(|unusable| {
            ConnectError::Resolver(
                unusable
                    .reported("a delivery attempt through the proxy")
                    .into(),
            )
        })
}

/// Whether an attempt's error is a failure of the proxy's own hop (not of
/// the endpoint), in the words [`tunnel`] uses: it says nothing of the
/// endpoint's health.
pub fn hop_failed(error: &str) -> bool {
    error.contains("the proxy ")
        && (error.contains(UNREACHABLE)
            || error.contains(DROPPED)
            || error.contains(NO_ANSWER)
            || error.contains(": HTTP/1.1 407")
            || error.contains(": HTTP/1.0 407"))
}

const UNREACHABLE: &str = "could not be reached";
const DROPPED: &str = "dropped the CONNECT";
const NO_ANSWER: &str = "did not answer the CONNECT";

/// A stream to `host:port` through the proxy's `CONNECT` tunnel.
async fn tunnel(proxy: &ProxySettings, host: &str, port: u16) -> Result<TcpStream, ConnectError> {
    let failed = |what: String| ConnectError::Io(std::io::Error::other(what));
    let mut stream = TcpStream::connect(proxy.address.as_str())
        .await
        .map_err(|err| failed(format!("the proxy {} {UNREACHABLE}: {err}", proxy.address)))?;
    let target = connect_target(host, port);
    let mut request = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n");
    if let Some(authorization) = &proxy.authorization {
        request.push_str(&format!(
            "Proxy-Authorization: {}\r\n",
            authorization.expose()
        ));
    }
    request.push_str("\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|err| failed(format!("the proxy {} {DROPPED}: {err}", proxy.address)))?;
    let answer = read_answer(&mut stream)
        .await
        .map_err(|err| failed(format!("the proxy {} {NO_ANSWER}: {err}", proxy.address)))?;
    let status_line = answer.lines().next().unwrap_or_default().trim().to_owned();
    match status_of(&status_line) {
        Some(200..=299) => Ok(stream),
        _ => Err(failed(format!(
            "the proxy {} refused the tunnel to {target}: {status_line}",
            proxy.address
        ))),
    }
}

/// What `CONNECT` names: a literal as the address it was judged to be, in
/// its usual spelling, not as typed (`0127.0.0.1` is 87.0.0.1, whatever
/// reads it).
fn connect_target(host: &str, port: u16) -> String {
    match literal_address(host) {
        Some(IpAddr::V6(ip)) => format!("[{ip}]:{port}"),
        Some(ip) => format!("{ip}:{port}"),
        None => format!("{host}:{port}"),
    }
}

/// The proxy's answer to `CONNECT`, up to its blank line, read a byte at a
/// time so that nothing after it (the tunnel's first bytes) is consumed.
async fn read_answer(stream: &mut TcpStream) -> std::io::Result<String> {
    let mut answer = Vec::with_capacity(256);
    while !answer.ends_with(b"\r\n\r\n") {
        if answer.len() >= ANSWER_MAX {
            return Err(std::io::Error::other("its answer's headers are too long"));
        }
        match stream.read_u8().await {
            Ok(byte) => answer.push(byte),
            Err(err) if err.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Err(std::io::Error::other("it closed the connection"))
            }
            Err(err) => return Err(err),
        }
    }
    Ok(String::from_utf8_lossy(&answer).into_owned())
}

/// The status code of an HTTP/1.x status line.
fn status_of(line: &str) -> Option<u16> {
    let mut parts = line.split_whitespace();
    let version = parts.next()?;
    if !version.starts_with("HTTP/1.") {
        return None;
    }
    parts.next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(url: &str) -> ProxySettings {
        match ProxySettings::parse(
            url,
            &["internal.example".into(), ".corp".into(), "10.1.2.3".into()],
        ) {
            Ok(Some(settings)) => settings,
            other => panic!("{url}: {other:?}"),
        }
    }

    #[test]
    fn proxy_urls_parse_with_and_without_credentials() {
        let plain = parsed("http://proxy.internal:3128");
        assert_eq!(plain.address, "proxy.internal:3128");
        assert!(plain.authorization.is_none());
        let with = parsed("http://al%40ice:p%3Ass@10.0.0.1:8080/");
        assert_eq!(with.address, "10.0.0.1:8080");
        let expected = base64::engine::general_purpose::STANDARD.encode("al@ice:p:ss");
        assert_eq!(
            with.authorization.as_ref().map(|a| a.expose().to_owned()),
            Some(format!("Basic {expected}"))
        );
        assert_eq!(parsed("http://proxy").address, "proxy:80");
        assert_eq!(parsed("http://[::1]:3128").address, "[::1]:3128");
        assert!(matches!(ProxySettings::parse("", &[]), Ok(None)));
    }

    #[test]
    fn bad_proxy_urls_are_refused_without_quoting_them() {
        for bad in [
            "https://proxy:3128",
            "socks5://proxy:1080",
            "http://u:secret@proxy:notaport",
            "http://u:secret@:3128",
            "http://proxy:3128/path",
            "http://u:%zz@proxy:3128",
            "http://::1:3128",
        ] {
            let err = ProxySettings::parse(bad, &[]).err();
            let said = err.map(|e| e.to_string()).unwrap_or_default();
            assert!(said.starts_with("webhooks.proxy_url: "), "{bad}: {said}");
            assert!(!said.contains("secret"), "{said}");
        }
    }

    #[test]
    fn no_proxy_names_hosts_and_the_domains_they_are_in() {
        let proxy = parsed("http://proxy:3128");
        for direct in [
            "internal.example",
            "api.internal.example",
            "INTERNAL.example.",
            "x.corp",
            "corp",
            "10.1.2.3",
        ] {
            assert!(proxy.bypasses(direct), "{direct}");
        }
        for tunnelled in [
            "example.com",
            "notinternal.example",
            "notcorp",
            "10.1.2.30",
            "hooks.example.org",
        ] {
            assert!(!proxy.bypasses(tunnelled), "{tunnelled}");
        }
        let all = ProxySettings::parse("http://proxy:3128", &["*".into()])
            .ok()
            .flatten();
        assert!(all.is_some_and(|p| p.bypasses("anything.example")));
    }

    #[test]
    fn debug_output_never_shows_the_credentials() {
        let with = parsed("http://user:hunter2@proxy:3128");
        let shown = format!("{with:?}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("Basic"),
            "{shown}"
        );
    }

    #[test]
    fn literals_are_named_as_judged_and_names_as_given() {
        assert_eq!(connect_target("0127.0.0.1", 443), "87.0.0.1:443");
        assert_eq!(connect_target("0x7f.1", 80), "127.0.0.1:80");
        assert_eq!(
            connect_target("[::ffff:1.2.3.4]", 443),
            "[::ffff:1.2.3.4]:443"
        );
        assert_eq!(
            connect_target("hooks.example.com", 8443),
            "hooks.example.com:8443"
        );
    }

    #[test]
    fn only_the_proxys_own_hop_failing_spares_the_endpoint() {
        for hop in [
            "request failed: Failed to connect to host: the proxy 10.0.0.5:3128 could not be reached: Connection refused (os error 111)",
            "request failed: Failed to connect to host: the proxy 10.0.0.5:3128 refused the tunnel to a.example:443: HTTP/1.1 407 Proxy Authentication Required",
            "request failed: Failed to connect to host: the proxy 10.0.0.5:3128 did not answer the CONNECT: it closed the connection",
        ] {
            assert!(hop_failed(hop), "{hop}");
        }
        for endpoint in [
            "request failed: Failed to connect to host: the proxy 10.0.0.5:3128 refused the tunnel to a.example:443: HTTP/1.1 502 Bad Gateway",
            "the endpoint answered 503",
            "timed out after 8000 ms",
        ] {
            assert!(!hop_failed(endpoint), "{endpoint}");
        }
    }

    #[test]
    fn localhost_names_are_refused_through_the_proxy_whether_they_resolve_or_not() {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            panic!("no runtime")
        };
        for name in ["localhost", "hooks.localhost", "LOCALHOST."] {
            let judged = runtime.block_on(proxied_host_allowed(name, 443, false));
            assert!(judged.is_err(), "{name}");
            let open = runtime.block_on(proxied_host_allowed(name, 443, true));
            assert!(open.is_ok(), "{name} with private networks allowed");
        }
    }

    #[test]
    fn status_lines_are_read() {
        assert_eq!(status_of("HTTP/1.1 200 Connection established"), Some(200));
        assert_eq!(
            status_of("HTTP/1.0 407 Proxy Authentication Required"),
            Some(407)
        );
        assert_eq!(status_of("SSH-2.0-OpenSSH"), None);
    }
}
