//! Webhook endpoint URLs: absolute, https (unless allowed), no credentials,
//! and, when the host is an address literal in any spelling browsers and
//! `inet_aton` accept (`2130706433`, `0x7f.1`, `[::ffff:127.0.0.1]`), a
//! public one. Host names are judged on the addresses they resolve to when
//! a URL is tested or saved ([`check_resolution`]), and again on every
//! attempt at connect time (see `client`), which is what defeats DNS
//! rebinding.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use actix_web::http::Uri;

use crate::webhooks::address_policy::is_public;

/// Longest accepted URL.
pub const URL_MAX: usize = 2048;

/// What the operator allows.
#[derive(Clone, Copy, Debug)]
pub struct UrlPolicy {
    /// `http://` endpoints allowed.
    pub allow_http: bool,
    /// Loopback / private / link-local … targets allowed.
    pub allow_private_networks: bool,
}

/// Why a URL is refused (the text goes into a 400 INVALID_URL).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UrlRefused(pub String);

/// A URL that passed the policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookUrl {
    text: String,
    /// The host, when it is a name (not an address literal).
    name: Option<String>,
    /// The port, explicit or the scheme's.
    port: u16,
}

impl WebhookUrl {
    /// The host, when it is a name (not an address literal).
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The URL as given.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

fn refuse(why: &str) -> Result<WebhookUrl, UrlRefused> {
    Err(UrlRefused(why.to_owned()))
}

/// Validates `raw` under `policy`.
pub fn parse_url(raw: &str, policy: UrlPolicy) -> Result<WebhookUrl, UrlRefused> {
    if raw.len() > URL_MAX {
        return refuse("the URL is longer than 2048 characters");
    }
    let Ok(uri) = raw.parse::<Uri>() else {
        return refuse("not a valid absolute URL");
    };
    let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
        return refuse("the URL must be absolute, like https://example.com/hooks");
    };
    match scheme {
        "https" => {}
        "http" if policy.allow_http => {}
        "http" => return refuse("only https:// endpoints are allowed"),
        _ => return refuse("the URL scheme must be https"),
    }
    if authority.as_str().contains('@') {
        return refuse("credentials in the URL are not allowed");
    }
    let host = authority.host();
    if host.is_empty() {
        return refuse("the URL has no host");
    }
    // A host that is neither an address nor a DNS name can never be reached;
    // say so now instead of failing the test when it resolves.
    if literal_address(host).is_none() && !is_domain_name(host) {
        return refuse("the URL's host is neither a domain name nor an address");
    }
    // Names (localhost included) are judged on every address they resolve
    // to, at connect time; literals can be judged now.
    if !policy.allow_private_networks {
        if let Some(ip) = literal_address(host) {
            if !is_public(ip) {
                return refuse(
                    "the URL points to a loopback, private or otherwise non-public address",
                );
            }
        }
    }
    let port = uri
        .port_u16()
        .unwrap_or(if scheme == "https" { 443 } else { 80 });
    Ok(WebhookUrl {
        text: raw.to_owned(),
        name: literal_address(host).is_none().then(|| host.to_owned()),
        port,
    })
}

/// Why a host name has no address to connect to.
#[derive(Debug, thiserror::Error)]
pub enum Unresolvable {
    /// Resolution failed (no such name, no DNS).
    #[error("{host} could not be resolved: {source}")]
    Lookup {
        /// The name.
        host: String,
        /// Why.
        source: std::io::Error,
    },
    /// Every address it resolves to is one the policy refuses.
    #[error("{0} resolves only to refused (non-public) addresses")]
    Refused(String),
}

/// The addresses `host` resolves to that the policy allows: none is an error.
pub async fn allowed_addresses(
    host: &str,
    port: u16,
    allow_private_networks: bool,
) -> Result<Vec<SocketAddr>, Unresolvable> {
    let resolved = tokio::net::lookup_host((host, port))
        .await
        .map_err(|source| Unresolvable::Lookup {
            host: host.to_owned(),
            source,
        })?;
    let resolved: Vec<SocketAddr> = resolved.collect();
    if resolved.is_empty() {
        return Err(Unresolvable::Lookup {
            host: host.to_owned(),
            source: std::io::Error::other("no address"),
        });
    }
    let allowed: Vec<SocketAddr> = resolved
        .into_iter()
        .filter(|addr| allow_private_networks || is_public(addr.ip()))
        .collect();
    if allowed.is_empty() {
        return Err(Unresolvable::Refused(host.to_owned()));
    }
    Ok(allowed)
}

/// What a client is told of a host name that yields no address to deliver
/// to, whatever the reason: one wording for a name that does not resolve and
/// for one that resolves only to refused addresses, so that the answer does
/// not map the operator's internal names (CONTRACT §11). The precise reason
/// goes to the operator's log.
pub const NO_USABLE_ADDRESS: &str =
    "the URL's host does not resolve to an address that deliveries may use";

impl Unresolvable {
    /// Logs the precise reason for the operator; returns what the client
    /// is told ([`NO_USABLE_ADDRESS`]).
    pub fn reported(&self, during: &'static str) -> UrlRefused {
        tracing::info!(reason = %self, during, "webhook host refused");
        UrlRefused(NO_USABLE_ADDRESS.to_owned())
    }
}

/// Refuses a URL whose host name does not resolve, or resolves only to
/// addresses the policy refuses (CONTRACT §1 and §11: 400 INVALID_URL, one
/// wording for both). When the name is reached through an egress proxy
/// (`proxied`), see [`proxied_host_allowed`].
/// Attempts resolve the name again when they connect.
pub async fn check_resolution(
    url: &WebhookUrl,
    policy: UrlPolicy,
    proxied: bool,
) -> Result<(), UrlRefused> {
    let Some(name) = url.name.as_deref() else {
        return Ok(());
    };
    let allowed = if proxied {
        proxied_host_allowed(name, url.port, policy.allow_private_networks).await
    } else {
        allowed_addresses(name, url.port, policy.allow_private_networks)
            .await
            .map(drop)
    };
    allowed.map_err(|unusable| unusable.reported("a webhook URL check"))
}

/// The policy's word on `host` before anything is sent through the proxy.
/// The proxy resolves the name again and may pick any of its addresses, so
/// a name that resolves here is refused unless every address is one the
/// policy allows (without a proxy, the refused ones are only skipped). A
/// name that does not resolve here is the proxy's to resolve, except the
/// `localhost` names. (Address literals are judged with the URL.)
pub async fn proxied_host_allowed(
    host: &str,
    port: u16,
    allow_private_networks: bool,
) -> Result<(), Unresolvable> {
    if literal_address(host).is_some() || allow_private_networks {
        return Ok(());
    }
    match tokio::net::lookup_host((host, port)).await {
        Ok(addresses) => {
            let addresses: Vec<_> = addresses.collect();
            if !addresses.is_empty() && addresses.iter().all(|a| is_public(a.ip())) {
                Ok(())
            } else {
                Err(Unresolvable::Refused(host.to_owned()))
            }
        }
        Err(_) if !is_localhost_name(host) => Ok(()),
        Err(source) => Err(Unresolvable::Lookup {
            host: host.to_owned(),
            source,
        }),
    }
}

/// `localhost` and the names under it, which always mean this machine.
fn is_localhost_name(host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    host == "localhost" || host.ends_with(".localhost")
}

/// A DNS host name: dot-separated labels of 1..=63 letters, digits and
/// hyphens, none starting or ending with a hyphen, 253 characters at most
/// (one trailing dot allowed).
fn is_domain_name(host: &str) -> bool {
    let name = host.strip_suffix('.').unwrap_or(host);
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// The address a host denotes when it is an address literal.
pub fn literal_address(host: &str) -> Option<IpAddr> {
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return inner.parse::<Ipv6Addr>().ok().map(IpAddr::V6);
    }
    parse_ipv4_like(host).map(IpAddr::V4)
}

/// WHATWG URL / `inet_aton` IPv4 parsing: 1–4 dot-separated parts, each
/// decimal, `0x` hex or `0`-prefixed octal; the last part fills the rest.
fn parse_ipv4_like(host: &str) -> Option<Ipv4Addr> {
    let host = host.strip_suffix('.').unwrap_or(host);
    let parts: Vec<&str> = host.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let numbers: Vec<u64> = parts
        .iter()
        .map(|p| parse_number(p))
        .collect::<Option<_>>()?;
    let (last, init) = numbers.split_last()?;
    if init.iter().any(|n| *n > 255) || *last >= 1u64 << (8 * (5 - numbers.len())) {
        return None;
    }
    let mut value = *last;
    for (index, part) in init.iter().enumerate() {
        value += part << (8 * (3 - index));
    }
    u32::try_from(value).ok().map(Ipv4Addr::from)
}

fn parse_number(part: &str) -> Option<u64> {
    if part.is_empty() {
        return None;
    }
    let (digits, radix) =
        if let Some(hex) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
            (hex, 16)
        } else if part.len() > 1 && part.starts_with('0') {
            (&part[1..], 8)
        } else {
            (part, 10)
        };
    if digits.is_empty() {
        return if radix == 16 { Some(0) } else { None };
    }
    u64::from_str_radix(digits, radix).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names are judged on what they resolve to when tested or saved; only
    /// `localhost` is resolved here (tests never query other resolvers).
    #[test]
    fn names_resolving_only_to_refused_addresses_are_refused() {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            panic!("no runtime")
        };
        let strict = UrlPolicy {
            allow_http: true,
            allow_private_networks: false,
        };
        let open = UrlPolicy {
            allow_private_networks: true,
            ..strict
        };
        let check = |raw: &str, policy: UrlPolicy| {
            let url = parse_url(raw, policy).map_err(|e| e.0)?;
            runtime
                .block_on(check_resolution(&url, policy, false))
                .map_err(|e| e.0)
        };
        assert_eq!(
            check("http://localhost:8080/hook", strict),
            Err(NO_USABLE_ADDRESS.to_owned())
        );
        assert_eq!(check("http://localhost:8080/hook", open), Ok(()));
        // A public address literal needs no resolution.
        assert_eq!(check("http://93.184.215.14/hook", strict), Ok(()));
    }

    const STRICT: UrlPolicy = UrlPolicy {
        allow_http: false,
        allow_private_networks: false,
    };

    #[test]
    fn numeric_hosts_are_read_like_browsers_do() {
        let loopback = Some(Ipv4Addr::new(127, 0, 0, 1));
        assert_eq!(parse_ipv4_like("2130706433"), loopback);
        assert_eq!(parse_ipv4_like("0x7f000001"), loopback);
        assert_eq!(parse_ipv4_like("0177.0.0.1"), loopback);
        assert_eq!(parse_ipv4_like("127.1"), loopback);
        assert_eq!(parse_ipv4_like("127.0.1"), loopback);
        assert_eq!(parse_ipv4_like("127.0.0.1."), loopback);
        assert_eq!(parse_ipv4_like("example.com"), None);
        assert_eq!(parse_ipv4_like("1.2.3.4.5"), None);
        assert_eq!(parse_ipv4_like("256.1.1.1"), None);
        assert_eq!(parse_ipv4_like("08.1.1.1"), None);
    }

    #[test]
    fn hosts_are_names_or_addresses() {
        for name in [
            "example.com",
            "a.b-c.example.",
            "localhost",
            "xn--bcher-kva.example",
            "1b.example",
        ] {
            assert!(is_domain_name(name), "{name}");
        }
        let long = format!("{}.example", vec!["a".repeat(63); 4].join("."));
        for bad in [
            "0.A*",
            "exa_mple.com",
            "-a.example",
            "a-.example",
            "a..example",
            ".",
            "",
            &long,
        ] {
            assert!(!is_domain_name(bad), "{bad}");
        }
        let open = UrlPolicy {
            allow_http: false,
            allow_private_networks: false,
        };
        assert!(parse_url("https://0.A*", open).is_err());
        assert!(parse_url("https://8.8.8.8/hook", open).is_ok());
        assert!(parse_url("https://hooks.example.com:8443/a?b=c", open).is_ok());
    }

    #[test]
    fn policy_table() {
        let refused = [
            "http://example.com/",
            "ftp://example.com/",
            "/relative",
            "example.com",
            "https://user:pw@example.com/",
            "https://127.0.0.1/",
            "https://127.1.2.3/",
            "https://[::1]/",
            "https://[::ffff:127.0.0.1]/",
            "https://2130706433/",
            "https://0x7f.1/",
            "https://10.1.2.3/",
            "https://169.254.169.254/latest/meta-data",
            "https://[fe80::1]/",
            "https://0.0.0.0/",
        ];
        for url in refused {
            assert!(parse_url(url, STRICT).is_err(), "{url} must be refused");
        }
        for url in [
            "https://example.com/hooks",
            "https://93.184.216.34:8443/x?y=1",
            "https://[2606:4700::1]/",
        ] {
            assert!(parse_url(url, STRICT).is_ok(), "{url} must be allowed");
        }
        let open = UrlPolicy {
            allow_http: true,
            allow_private_networks: true,
        };
        assert!(parse_url("http://127.0.0.1:9000/hook", open).is_ok());
        assert!(parse_url("ftp://127.0.0.1/", open).is_err());
    }
}
