//! Who may reach the API from a browser, and with what: the `Host` check that stops DNS
//! rebinding, the `Origin` check and CORS answers that stop other sites' pages from
//! driving the server, the JSON-only bodies that keep a plain form post out, and the
//! bearer scheme read case-insensitively. Pure decisions over header values; the server
//! applies them.

use std::net::{IpAddr, SocketAddr};

/// What the operator allows, and where the server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessRules {
    /// The address the API is bound to.
    pub bound: SocketAddr,
    /// `--allowed-host`: host names (optionally `name:port`) a request's `Host` may name
    /// besides IP literals and `localhost`; `*` allows any.
    pub allowed_hosts: Vec<String>,
    /// `--cors-origin`: origins (`scheme://host[:port]`) allowed besides the page's own
    /// and localhost's; `*` allows any.
    pub cors_origins: Vec<String>,
}

/// A `Host` value split into its name (lowercase, without brackets or a trailing dot)
/// and its port.
fn split_host(host: &str) -> Option<(String, Option<u16>)> {
    let host = host.trim();
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        let (name, after) = rest.split_once(']')?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':')?.parse().ok()?),
        };
        (name, port)
    } else {
        match host.rsplit_once(':') {
            Some((name, p)) if !name.contains(':') => (name, Some(p.parse().ok()?)),
            Some(_) => (host, None), // a bare IPv6 literal
            None => (host, None),
        }
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    (!name.is_empty()).then_some((name, port))
}

/// Whether `name` is loopback by definition (not by a resolver an attacker controls).
fn is_local_name(name: &str) -> bool {
    name == "localhost" || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

impl AccessRules {
    /// Whether a request naming `host` in its `Host` header is served. IP literals and
    /// `localhost` always are (a rebinding attack needs a name the attacker resolves);
    /// other names must be listed with `--allowed-host`, except on a wildcard bind
    /// (`0.0.0.0`, `[::]`) with no `--allowed-host` at all, which takes any name (the
    /// server is meant to be reached by whatever name the network gives it).
    pub fn host_allowed(&self, host: &str) -> bool {
        let Some((name, port)) = split_host(host) else { return false };
        if name.parse::<IpAddr>().is_ok() || name == "localhost" {
            return true;
        }
        if self.allowed_hosts.is_empty() {
            return self.bound.ip().is_unspecified();
        }
        self.allowed_hosts.iter().any(|a| {
            if a == "*" {
                return true;
            }
            match split_host(a) {
                Some((n, None)) => n == name,
                Some((n, Some(p))) => n == name && port.unwrap_or(80) == p,
                None => false,
            }
        })
    }

    /// Whether a request from a page of `origin` may use the API: the page's own origin
    /// (its authority is the request's `host`), any localhost origin, or one listed with
    /// `--cors-origin`. `null` (a file or a sandboxed frame) only when listed.
    pub fn origin_allowed(&self, origin: &str, host: Option<&str>) -> bool {
        let origin = origin.trim().trim_end_matches('/');
        if self
            .cors_origins
            .iter()
            .any(|o| o == "*" || o.trim_end_matches('/').eq_ignore_ascii_case(origin))
        {
            return true;
        }
        let Some((scheme, authority)) = origin.split_once("://") else { return false };
        if !matches!(scheme.to_ascii_lowercase().as_str(), "http" | "https") {
            return false;
        }
        let Some((name, port)) = split_host(authority) else { return false };
        if is_local_name(&name) {
            return true;
        }
        host.and_then(split_host).is_some_and(|(h, hp)| {
            let default = if scheme.eq_ignore_ascii_case("https") { 443 } else { 80 };
            h == name && hp.unwrap_or(default) == port.unwrap_or(default)
        })
    }
}

/// Whether a `Content-Type` value names JSON (`application/json`, any parameters, any
/// case).
pub fn is_json(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim();
    essence.eq_ignore_ascii_case("application/json")
}

/// The token of an `Authorization: Bearer TOKEN` value; the scheme's case does not
/// matter (RFC 9110), nor the spaces around the token.
pub fn bearer_token(authorization: &str) -> Option<&str> {
    let (scheme, token) = authorization.trim_start().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(bound: &str, hosts: &[&str], origins: &[&str]) -> AccessRules {
        AccessRules {
            bound: bound.parse().expect("addr"),
            allowed_hosts: hosts.iter().map(|s| s.to_string()).collect(),
            cors_origins: origins.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn a_loopback_server_takes_ip_and_localhost_hosts_and_refuses_other_names() {
        let r = rules("127.0.0.1:8080", &[], &[]);
        for ok in ["127.0.0.1:8080", "localhost:8080", "[::1]:8080", "LOCALHOST", "localhost."] {
            assert!(r.host_allowed(ok), "{ok}");
        }
        for bad in ["evil.example:8080", "evil.example", "", "[::1", "localhost:x"] {
            assert!(!r.host_allowed(bad), "{bad}");
        }
        let listed = rules("127.0.0.1:8080", &["box.lan", "api.lan:9000"], &[]);
        assert!(listed.host_allowed("box.lan:8080") && listed.host_allowed("BOX.LAN"));
        assert!(listed.host_allowed("api.lan:9000") && !listed.host_allowed("api.lan:9001"));
        assert!(!listed.host_allowed("evil.example:8080"));
        assert!(rules("127.0.0.1:8080", &["*"], &[]).host_allowed("anything.example"));
    }

    #[test]
    fn a_wildcard_bind_takes_any_name_until_allowed_hosts_are_given() {
        assert!(rules("0.0.0.0:8080", &[], &[]).host_allowed("server:8080"));
        assert!(rules("[::]:8080", &[], &[]).host_allowed("server:8080"));
        let listed = rules("0.0.0.0:8080", &["server"], &[]);
        assert!(listed.host_allowed("server:8080") && listed.host_allowed("10.0.0.5:8080"));
        assert!(!listed.host_allowed("evil.example:8080"));
        assert!(!rules("192.168.1.5:8080", &[], &[]).host_allowed("box.lan:8080"));
    }

    #[test]
    fn the_pages_own_origin_localhost_origins_and_listed_ones_are_allowed() {
        let r = rules("127.0.0.1:8080", &[], &["https://app.example"]);
        let host = Some("127.0.0.1:8080");
        assert!(r.origin_allowed("http://127.0.0.1:8080", host));
        assert!(r.origin_allowed("http://localhost:3000", host));
        assert!(r.origin_allowed("http://[::1]:5173", host));
        assert!(r.origin_allowed("https://app.example", host));
        assert!(r.origin_allowed("https://APP.example/", host));
        assert!(r.origin_allowed("http://box.lan:8080", Some("box.lan:8080")), "its own");
        assert!(r.origin_allowed("http://box.lan", Some("box.lan:80")), "default port");
        assert!(!r.origin_allowed("http://box.lan:8081", Some("box.lan:8080")));
        for bad in ["https://evil.example", "null", "file://", "ftp://localhost", ""] {
            assert!(!r.origin_allowed(bad, host), "{bad}");
        }
        assert!(rules("127.0.0.1:8080", &[], &["*"]).origin_allowed("https://evil.example", host));
        assert!(rules("127.0.0.1:8080", &[], &["null"]).origin_allowed("null", host));
    }

    #[test]
    fn only_json_bodies_and_a_bearer_of_any_case_are_read() {
        assert!(is_json("application/json") && is_json("Application/JSON; charset=utf-8"));
        for bad in ["text/plain", "application/x-www-form-urlencoded", "", "application/jsonx"] {
            assert!(!is_json(bad), "{bad}");
        }
        assert_eq!(bearer_token("Bearer k1"), Some("k1"));
        assert_eq!(bearer_token("bearer k1"), Some("k1"));
        assert_eq!(bearer_token("BEARER  k1 "), Some("k1"));
        assert_eq!(bearer_token("Basic k1"), None);
        assert_eq!(bearer_token("Bearer"), None);
    }
}
