//! Which `Host` headers name this server. A browser sends the name it looked up, so a page of
//! another site whose name DNS points at this address (rebinding) arrives under that name: only
//! an address, `localhost`, this machine's name and the names the user allows are served.

use std::net::Ipv4Addr;

pub struct Hosts {
    /// Lowercase names besides addresses and `localhost`.
    names: Vec<String>,
}

impl Hosts {
    pub fn new(names: &[String]) -> Self {
        Self { names: names.iter().map(|n| n.trim_end_matches('.').to_ascii_lowercase()).collect() }
    }

    /// Whether `host` (a `Host` header: a name or an address, with or without a port) is ours.
    pub fn allows(&self, host: &str) -> bool {
        // An IPv6 address, bracketed: an address cannot be rebound.
        if let Some(rest) = host.strip_prefix('[') {
            return rest.split_once(']').is_some_and(|(a, port)| {
                a.parse::<std::net::Ipv6Addr>().is_ok() && (port.is_empty() || is_port(port))
            });
        }
        let name = match host.rsplit_once(':') {
            Some((n, port)) if is_port(port) => n,
            Some(_) => return false,
            None => host,
        };
        if name.parse::<Ipv4Addr>().is_ok() {
            return true;
        }
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        !name.is_empty() && (name == "localhost" || name.ends_with(".localhost") || self.names.contains(&name))
    }
}

/// A port as it follows a name (`9400`) or a bracketed address (`:9400`).
fn is_port(p: &str) -> bool {
    let p = p.strip_prefix(':').unwrap_or(p);
    !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_localhost_and_the_names_given() {
        let h = Hosts::new(&["gpu-node-01".into(), "Dash.Example.COM.".into()]);
        for ok in [
            "127.0.0.1:9400",
            "10.0.0.7",
            "[::1]:9400",
            "[fe80::1]",
            "localhost:9400",
            "LOCALHOST",
            "app.localhost:9400",
            "gpu-node-01:9400",
            "dash.example.com",
            "dash.example.com.:443",
        ] {
            assert!(h.allows(ok), "{ok}");
        }
        for refused in [
            "",
            "evil.example:9400",
            "gpu-node-01.evil.example",
            "localhost.evil.example",
            "127.0.0.1.nip.io",
            "[::1",
            "[not-an-address]:9400",
            "gpu-node-01:http",
            "gpu-node-01:99999999",
        ] {
            assert!(!h.allows(refused), "{refused}");
        }
    }
}
