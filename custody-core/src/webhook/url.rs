//! Endpoint URLs: a small strict parser with one canonical form.
//!
//! The URL is stored and sent in its canonical form, so what was checked at registration is
//! exactly what the HTTP client connects to later: no second parser can read the host
//! differently. Hosts are read the way browsers (WHATWG) read them, so an IPv4 address in an odd
//! notation (`127.1`, `0x7f.0.0.1`, `0177.0.0.1`, `2130706433`) is recognised as the address it
//! is, then judged by [`super::ssrf`]. Host names are resolved and checked by the adapter, at
//! registration and again on every delivery.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::ssrf::{AddressClass, AddressPolicy, ForbiddenAddress};

pub const URL_CHARS_MAX: usize = 2048;
const HOST_CHARS_MAX: usize = 253;
const LABEL_CHARS_MAX: usize = 63;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    pub const fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    pub const fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }
}

/// A host as read from a URL: an IP address (in any notation) or a lowercase domain name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Host {
    Ip(IpAddr),
    Domain(String),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Ip(IpAddr::V4(ip)) => write!(f, "{ip}"),
            Host::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
            Host::Domain(name) => f.write_str(name),
        }
    }
}

/// Why a URL is refused. The messages are safe to show the operator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("the URL is longer than {URL_CHARS_MAX} characters")]
    TooLong,
    #[error("the URL must be ASCII without spaces or control characters")]
    Characters,
    #[error("the URL must start with https:// (http:// only to a loopback address when webhooks.allow_insecure_loopback is on)")]
    Scheme,
    #[error("the URL must not carry a user name or password")]
    UserInfo,
    #[error("the URL must not carry a fragment")]
    Fragment,
    #[error("the URL has no host")]
    NoHost,
    #[error("the host is not valid: {0}")]
    Host(&'static str),
    #[error("the port must be a number from 1 to 65535")]
    Port,
    #[error("the path or query has a character that is not allowed")]
    Path,
    #[error("{0}")]
    Forbidden(ForbiddenAddress),
    #[error("{0} names this machine, where webhooks may not be delivered")]
    LocalName(String),
}

/// A parsed endpoint URL. Build it with [`parse_endpoint_url`]; it prints in canonical form.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EndpointUrl {
    pub scheme: Scheme,
    pub host: Host,
    pub port: u16,
    /// Starts with `/`.
    pub path_and_query: String,
}

impl EndpointUrl {
    /// `host[:port]` as sent in the `Host` header (the port only when not the default).
    pub fn authority(&self) -> String {
        if self.port == self.scheme.default_port() {
            self.host.to_string()
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl fmt::Display for EndpointUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}://{}{}",
            self.scheme.as_str(),
            self.authority(),
            self.path_and_query
        )
    }
}

/// Parses one part of an IPv4 address the WHATWG way: `0x` hex, leading-zero octal, decimal.
fn ipv4_number(part: &str) -> Option<u64> {
    let (digits, radix) =
        if let Some(hex) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
            (hex, 16)
        } else if part.len() > 1 && part.starts_with('0') {
            (&part[1..], 8)
        } else {
            (part, 10)
        };
    if digits.is_empty() {
        // "0x" alone is zero; an empty decimal part is not a number.
        return (radix == 16).then_some(0);
    }
    if !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    // Long runs of leading zeros are legal and still small.
    let significant = digits.trim_start_matches('0');
    if significant.len() > 12 {
        return None;
    }
    if significant.is_empty() {
        return Some(0);
    }
    u64::from_str_radix(significant, radix).ok()
}

/// WHATWG "ends in a number": the host is then an IPv4 address or invalid, never a name.
fn ends_in_number(labels: &[&str]) -> bool {
    let Some(last) = labels.last() else {
        return false;
    };
    !last.is_empty() && (last.bytes().all(|b| b.is_ascii_digit()) || ipv4_number(last).is_some())
}

/// WHATWG IPv4 parsing: 1 to 4 parts, the last one filling the remaining bytes.
fn parse_ipv4(labels: &[&str]) -> Option<Ipv4Addr> {
    if labels.is_empty() || labels.len() > 4 {
        return None;
    }
    let numbers: Vec<u64> = labels
        .iter()
        .map(|l| ipv4_number(l))
        .collect::<Option<_>>()?;
    let (last, init) = numbers.split_last()?;
    if init.iter().any(|&n| n > 255) {
        return None;
    }
    let room = 8 * (5 - u32::try_from(numbers.len()).ok()?);
    if *last >= 1u64 << room {
        return None;
    }
    let mut value = *last;
    for (i, n) in init.iter().enumerate() {
        value += n << (8 * (3 - i));
    }
    u32::try_from(value).ok().map(Ipv4Addr::from)
}

/// Reads a host: `[v6]`, an IPv4 address in any WHATWG notation, or a domain name (returned
/// lowercase, without a trailing dot). Percent signs, underscores, non-ASCII (use punycode),
/// IPv6 zone ids and single-label names are refused.
pub fn parse_host(input: &str) -> Result<Host, UrlError> {
    if input.is_empty() {
        return Err(UrlError::NoHost);
    }
    if let Some(inner) = input.strip_prefix('[') {
        let inner = inner
            .strip_suffix(']')
            .ok_or(UrlError::Host("unclosed bracket"))?;
        if inner.contains('%') {
            return Err(UrlError::Host("IPv6 zone identifiers are not allowed"));
        }
        return inner
            .parse::<Ipv6Addr>()
            .map(|ip| Host::Ip(IpAddr::V6(ip)))
            .map_err(|_| UrlError::Host("not a valid IPv6 address"));
    }
    let host = input.to_ascii_lowercase();
    if !host
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
    {
        return Err(UrlError::Host(
            "only letters, digits, dots and hyphens (punycode for other names)",
        ));
    }
    let trimmed = host.strip_suffix('.').unwrap_or(&host);
    let labels: Vec<&str> = trimmed.split('.').collect();
    if ends_in_number(&labels) {
        return parse_ipv4(&labels)
            .map(|ip| Host::Ip(IpAddr::V4(ip)))
            .ok_or(UrlError::Host("not a valid IPv4 address"));
    }
    if trimmed.is_empty() || trimmed.len() > HOST_CHARS_MAX {
        return Err(UrlError::Host("a name is 1 to 253 characters"));
    }
    for label in &labels {
        if label.is_empty() || label.len() > LABEL_CHARS_MAX {
            return Err(UrlError::Host("empty or over-long label"));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(UrlError::Host("a label may not start or end with a hyphen"));
        }
    }
    if labels.len() < 2 {
        return Err(UrlError::Host("use a fully qualified domain name"));
    }
    Ok(Host::Domain(trimmed.to_owned()))
}

fn valid_path_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/?".contains(&b)
}

fn valid_path(s: &str) -> bool {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let ok = bytes.len() > i + 2
                    && bytes[i + 1].is_ascii_hexdigit()
                    && bytes[i + 2].is_ascii_hexdigit();
                if !ok {
                    return false;
                }
                i += 3;
            }
            b if valid_path_char(b) => i += 1,
            _ => return false,
        }
    }
    true
}

fn is_local_name(name: &str) -> bool {
    name == "localhost" || name.ends_with(".localhost")
}

/// Parses and checks an endpoint URL against `policy`:
/// - `https` to a public address or a domain name (whose addresses the adapter checks);
/// - `http` only with `allow_insecure_loopback`, and only to a literal loopback address.
pub fn parse_endpoint_url(input: &str, policy: AddressPolicy) -> Result<EndpointUrl, UrlError> {
    if input.len() > URL_CHARS_MAX {
        return Err(UrlError::TooLong);
    }
    if !input.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(UrlError::Characters);
    }
    if input.contains('\\') {
        return Err(UrlError::Characters);
    }
    let (scheme, rest) = input.split_once("://").ok_or(UrlError::Scheme)?;
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "https" => Scheme::Https,
        "http" => Scheme::Http,
        _ => return Err(UrlError::Scheme),
    };
    if rest.contains('#') {
        return Err(UrlError::Fragment);
    }
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    if authority.contains('@') {
        return Err(UrlError::UserInfo);
    }
    let (host_part, port_part) = if authority.starts_with('[') {
        match authority.find(']') {
            Some(close) => {
                let (h, p) = authority.split_at(close + 1);
                match p {
                    "" => (h, None),
                    p => (h, Some(p.strip_prefix(':').ok_or(UrlError::Port)?)),
                }
            }
            None => return Err(UrlError::Host("unclosed bracket")),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let host = parse_host(host_part)?;
    let port = match port_part {
        None => scheme.default_port(),
        Some(p) if !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()) => p
            .parse::<u16>()
            .ok()
            .filter(|&n| n > 0)
            .ok_or(UrlError::Port)?,
        Some(_) => return Err(UrlError::Port),
    };
    let path_and_query = if tail.starts_with('/') {
        tail.to_owned()
    } else {
        format!("/{tail}")
    };
    if !valid_path(&path_and_query) {
        return Err(UrlError::Path);
    }
    match &host {
        Host::Ip(ip) => policy.check(*ip).map_err(UrlError::Forbidden)?,
        Host::Domain(name) if is_local_name(name) => return Err(UrlError::LocalName(name.clone())),
        Host::Domain(_) => {}
    }
    if scheme == Scheme::Http {
        let loopback_literal =
            matches!(&host, Host::Ip(ip) if super::ssrf::classify(*ip) == AddressClass::Loopback);
        if !(policy.allow_insecure_loopback && loopback_literal) {
            return Err(UrlError::Scheme);
        }
    }
    Ok(EndpointUrl {
        scheme,
        host,
        port,
        path_and_query,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const STRICT: AddressPolicy = AddressPolicy {
        allow_insecure_loopback: false,
    };
    const LOCAL: AddressPolicy = AddressPolicy {
        allow_insecure_loopback: true,
    };

    #[test]
    fn odd_ipv4_notations_are_the_addresses_they_denote() {
        for (host, ip) in [
            ("127.0.0.1", "127.0.0.1"),
            ("127.1", "127.0.0.1"),
            ("127.0.1", "127.0.0.1"),
            ("0x7f.0.0.1", "127.0.0.1"),
            ("0X7F.0.0.1", "127.0.0.1"),
            ("0177.0.0.1", "127.0.0.1"),
            ("00000177.0.0.01", "127.0.0.1"),
            ("2130706433", "127.0.0.1"),
            ("0x7f000001", "127.0.0.1"),
            ("017700000001", "127.0.0.1"),
            ("0", "0.0.0.0"),
            ("0x", "0.0.0.0"),
            ("127.0.0.1.", "127.0.0.1"),
            ("169.254.43518", "169.254.169.254"),
            ("0xa9.0xfe.0xa9.0xfe", "169.254.169.254"),
            ("3232235777", "192.168.1.1"),
            ("8.8.8.8", "8.8.8.8"),
        ] {
            assert_eq!(
                parse_host(host).unwrap(),
                Host::Ip(ip.parse().unwrap()),
                "{host}"
            );
        }
        for bad in [
            "256.0.0.1",
            "1.2.3.4.5",
            "4294967296",
            "0x100000000",
            "1.2.65536",
            "08.0.0.1",
            "1..2.3",
            "example.123",
        ] {
            assert!(parse_host(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn names_and_ipv6() {
        assert_eq!(
            parse_host("Hooks.Example.COM.").unwrap(),
            Host::Domain("hooks.example.com".into())
        );
        assert_eq!(
            parse_host("[::ffff:127.0.0.1]").unwrap(),
            Host::Ip("::ffff:7f00:1".parse().unwrap())
        );
        for bad in [
            "",
            "intranet",
            "exa_mple.com",
            "-a.example.com",
            "a-.example.com",
            "a..example.com",
            "%31%32%37.0.0.1",
            "ex\u{e4}mple.com",
            "[fe80::1%25eth0]",
            "[::1",
            "[not-v6]",
        ] {
            assert!(parse_host(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_ssrf_matrix_is_refused() {
        for url in [
            "https://127.0.0.1/hook",
            "https://127.1/hook",
            "https://0x7f.0.0.1/hook",
            "https://2130706433/hook",
            "https://0177.0.0.1/hook",
            "https://0/hook",
            "https://0.0.0.0/hook",
            "https://[::1]/hook",
            "https://[::]/hook",
            "https://[::ffff:127.0.0.1]/hook",
            "https://[::ffff:a9fe:a9fe]/hook",
            "https://[::127.0.0.1]/hook",
            "https://[64:ff9b::7f00:1]/hook",
            "https://[64:ff9b::10.0.0.1]/hook",
            "https://[fe80::1]/hook",
            "https://[fc00::1]/hook",
            "https://[fd00::1]/hook",
            "https://[ff02::1]/hook",
            "https://[2001:db8::1]/hook",
            "https://10.0.0.1/hook",
            "https://172.16.5.4/hook",
            "https://192.168.0.1/hook",
            "https://169.254.169.254/latest/meta-data",
            "https://100.64.0.1/hook",
            "https://192.0.2.1/hook",
            "https://198.51.100.1/hook",
            "https://203.0.113.1/hook",
            "https://224.0.0.1/hook",
            "https://255.255.255.255/hook",
            "https://240.0.0.1/hook",
            "https://198.18.0.1/hook",
            "https://localhost/hook",
            "https://api.localhost/hook",
            "http://8.8.8.8/hook",
            "http://hooks.example.com/hook",
            "ftp://hooks.example.com/hook",
            "hooks.example.com/hook",
            "https://user:pw@hooks.example.com/hook",
            "https://hooks.example.com@127.0.0.1/hook",
            "https://hooks.example.com/hook#frag",
            "https://hooks.example.com:0/hook",
            "https://hooks.example.com:65536/hook",
            "https://hooks.example.com:/hook",
            "https://hooks.example.com:+443/hook",
            "https://hooks.example.com/a b",
            "https://hooks.example.com/a\\b",
            "https://hooks.example.com/%zz",
            "https:///hook",
        ] {
            assert!(parse_endpoint_url(url, STRICT).is_err(), "{url} accepted");
        }
    }

    #[test]
    fn loopback_over_http_only_when_allowed() {
        assert_eq!(
            parse_endpoint_url("http://127.0.0.1:8080/hook", STRICT).unwrap_err(),
            UrlError::Forbidden(ForbiddenAddress {
                ip: "127.0.0.1".parse().unwrap(),
                class: AddressClass::Loopback
            })
        );
        let ok = parse_endpoint_url("http://127.1:8080/hook?x=1", LOCAL).unwrap();
        assert_eq!(ok.to_string(), "http://127.0.0.1:8080/hook?x=1");
        assert!(parse_endpoint_url("http://[::1]:9/h", LOCAL).is_ok());
        // The switch opens loopback and nothing else.
        for url in [
            "http://10.0.0.1/hook",
            "http://8.8.8.8/hook",
            "http://hooks.example.com/hook",
            "https://192.168.1.1/hook",
            "http://localhost:8080/hook",
        ] {
            assert!(parse_endpoint_url(url, LOCAL).is_err(), "{url} accepted");
        }
    }

    proptest::proptest! {
        #[test]
        fn every_ipv4_spelling_is_judged_as_its_address(n: u32) {
            let ip = Ipv4Addr::from(n);
            let o = ip.octets();
            let low24 = u32::from_be_bytes([0, o[1], o[2], o[3]]);
            let public = super::super::ssrf::classify_v4(ip) == AddressClass::Public;
            for spelling in [
                ip.to_string(),
                n.to_string(),
                format!("0x{n:x}"),
                format!("0{n:o}"),
                format!("{}.{low24}", o[0]),
                format!("0x{:x}.0{:o}.{}.0X{:X}", o[0], o[1], o[2], o[3]),
                format!("[::ffff:{ip}]"),
            ] {
                let expected = if spelling.starts_with('[') {
                    IpAddr::V6(ip.to_ipv6_mapped())
                } else {
                    IpAddr::V4(ip)
                };
                proptest::prop_assert_eq!(parse_host(&spelling), Ok(Host::Ip(expected)));
                let url = format!("https://{spelling}/hook");
                let accepted = parse_endpoint_url(&url, STRICT);
                proptest::prop_assert_eq!(accepted.is_ok(), public, "{}", url);
                if let Ok(u) = accepted {
                    // The canonical form reads back as the same URL.
                    proptest::prop_assert_eq!(parse_endpoint_url(&u.to_string(), STRICT), Ok(u));
                }
            }
        }
    }

    #[test]
    fn canonical_form() {
        for (input, canonical) in [
            (
                "https://Hooks.Example.com/in",
                "https://hooks.example.com/in",
            ),
            (
                "HTTPS://hooks.example.com:443",
                "https://hooks.example.com/",
            ),
            (
                "https://hooks.example.com:8443?a=b",
                "https://hooks.example.com:8443/?a=b",
            ),
            ("https://8.8.8.8/x%20y", "https://8.8.8.8/x%20y"),
            (
                "https://[2606:4700:0:0::1111]:444/h",
                "https://[2606:4700::1111]:444/h",
            ),
        ] {
            let url = parse_endpoint_url(input, STRICT).unwrap();
            assert_eq!(url.to_string(), canonical);
            assert_eq!(parse_endpoint_url(canonical, STRICT).unwrap(), url);
        }
    }
}
