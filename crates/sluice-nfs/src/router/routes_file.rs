//! The route syntax shared by `routes:` and `routes_file:`, one route per
//! line, in the words of `ip route`:
//!
//! ```text
//! # comment
//! 10.0.0.0/8 via 192.168.1.1 dev out1          # through a gateway
//! 192.168.1.0/24 dev out1                      # connected (on-link)
//! 2001:db8::/32 via fe80::1 dev out2
//! default via 192.168.1.1 dev out1             # 0.0.0.0/0 (::/0 with a v6 gateway)
//! 10.2.0.0/16 nexthop via 192.168.1.1 dev out1 nexthop via 192.168.2.1 dev out2   # ECMP
//! ```
//!
//! A prefix without a length is a host route. Host bits set beyond the
//! prefix length are an error (as `ip route` reports for IPv4), so a typo
//! cannot silently widen a route.

use std::net::IpAddr;

use sluice_spec::IpNet;

/// Most next hops one route may have.
pub const MAX_NEXTHOPS: usize = 16;

/// One next hop of a route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NextHopSpec {
    /// The gateway; `None` for a connected route (the destination itself is
    /// the neighbour).
    pub via: Option<IpAddr>,
    /// The output port name.
    pub dev: String,
}

/// One parsed route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteSpec {
    /// The destination prefix (host bits zero).
    pub prefix: IpNet,
    /// One or more next hops (several: ECMP).
    pub nexthops: Vec<NextHopSpec>,
}

/// A syntax error at a 1-based line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteSyntaxError {
    /// Line number (1-based).
    pub line: usize,
    /// What is wrong.
    pub msg: String,
}

impl std::fmt::Display for RouteSyntaxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.msg)
    }
}

/// Parses a whole routes file; `on_route` gets each route in order.
/// Stops at the first error.
pub fn parse_routes(
    text: &str,
    mut on_route: impl FnMut(RouteSpec),
) -> Result<usize, RouteSyntaxError> {
    let mut n = 0;
    for (i, line) in text.lines().enumerate() {
        match parse_line(line) {
            Ok(Some(r)) => {
                on_route(r);
                n += 1;
            }
            Ok(None) => {}
            Err(msg) => return Err(RouteSyntaxError { line: i + 1, msg }),
        }
    }
    Ok(n)
}

/// Parses one line: `Ok(None)` for a blank or comment-only line.
pub fn parse_line(line: &str) -> Result<Option<RouteSpec>, String> {
    let line = line.split('#').next().unwrap_or("");
    let mut words = line.split_ascii_whitespace();
    let Some(dest) = words.next() else {
        return Ok(None);
    };
    let mut nexthops: Vec<NextHopSpec> = Vec::new();
    let mut via: Option<IpAddr> = None;
    let mut dev: Option<String> = None;
    let mut seen_nexthop = false;
    let finish = |via: &mut Option<IpAddr>,
                  dev: &mut Option<String>,
                  nexthops: &mut Vec<NextHopSpec>|
     -> Result<(), String> {
        match dev.take() {
            Some(d) => {
                if nexthops.len() == MAX_NEXTHOPS {
                    return Err(format!("more than {MAX_NEXTHOPS} next hops"));
                }
                nexthops.push(NextHopSpec {
                    via: via.take(),
                    dev: d,
                });
                Ok(())
            }
            None if via.is_some() => Err("next hop has `via` but no `dev`".into()),
            None => Ok(()),
        }
    };
    while let Some(w) = words.next() {
        match w {
            "via" => {
                if via.is_some() {
                    finish(&mut via, &mut dev, &mut nexthops)?;
                    if via.is_some() {
                        return Err("two `via` in one next hop".into());
                    }
                }
                let a = words.next().ok_or("`via` needs an address")?;
                via = Some(
                    a.parse()
                        .map_err(|_| format!("invalid gateway address `{a}`"))?,
                );
            }
            "dev" => {
                if dev.is_some() || (!seen_nexthop && !nexthops.is_empty()) {
                    return Err("two `dev` in one next hop (use `nexthop` for ECMP)".into());
                }
                let d = words.next().ok_or("`dev` needs a port name")?;
                dev = Some(d.to_string());
                if !seen_nexthop {
                    // Plain form: `PREFIX [via A] dev D` is one next hop.
                    finish(&mut via, &mut dev, &mut nexthops)?;
                }
            }
            "nexthop" => {
                if !seen_nexthop && !nexthops.is_empty() {
                    return Err("`nexthop` after a plain next hop".into());
                }
                seen_nexthop = true;
                finish(&mut via, &mut dev, &mut nexthops)?;
            }
            other => {
                return Err(format!(
                    "unexpected `{other}` (expected `via ADDRESS`, `dev PORT` or `nexthop`)"
                ))
            }
        }
    }
    finish(&mut via, &mut dev, &mut nexthops)?;
    if nexthops.is_empty() {
        return Err(format!("route `{dest}` has no `dev`"));
    }
    let first_v6 = nexthops
        .iter()
        .find_map(|n| n.via)
        .is_some_and(|a| a.is_ipv6());
    let prefix = parse_prefix(dest, first_v6)?;
    for n in &nexthops {
        if let Some(v) = n.via {
            if v.is_ipv6() != matches!(prefix, IpNet::V6(_)) {
                return Err(format!("gateway {v} is not of the family of {prefix}"));
            }
        }
    }
    Ok(Some(RouteSpec { prefix, nexthops }))
}

fn parse_prefix(s: &str, v6_default: bool) -> Result<IpNet, String> {
    if s == "default" {
        let p = if v6_default { "::/0" } else { "0.0.0.0/0" };
        return Ok(p.parse().expect("literal prefix"));
    }
    let net: IpNet = if s.contains('/') {
        s.parse().map_err(|_| {
            format!("invalid prefix `{s}` (expected e.g. 10.0.0.0/8 or 2001:db8::/32)")
        })?
    } else {
        let a: IpAddr = s
            .parse()
            .map_err(|_| format!("invalid destination `{s}` (expected a prefix or an address)"))?;
        IpNet::from(a)
    };
    if net.trunc() != net {
        return Err(format!(
            "host bits set in `{s}` (did you mean {}?)",
            net.trunc()
        ));
    }
    Ok(net)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(line: &str) -> RouteSpec {
        parse_line(line).unwrap().unwrap()
    }

    fn nh(via: Option<&str>, dev: &str) -> NextHopSpec {
        NextHopSpec {
            via: via.map(|v| v.parse().unwrap()),
            dev: dev.into(),
        }
    }

    #[test]
    fn forms() {
        let r = ok("10.0.0.0/8 via 192.168.1.1 dev out1");
        assert_eq!(r.prefix.to_string(), "10.0.0.0/8");
        assert_eq!(r.nexthops, [nh(Some("192.168.1.1"), "out1")]);
        let r = ok("  2001:db8::/32 via fe80::1 dev out2 # comment");
        assert_eq!(r.nexthops, [nh(Some("fe80::1"), "out2")]);
        let r = ok("192.168.1.0/24 dev out1");
        assert_eq!(r.nexthops, [nh(None, "out1")]);
        assert_eq!(
            ok("default via 1.2.3.4 dev a").prefix.to_string(),
            "0.0.0.0/0"
        );
        assert_eq!(ok("default via ::1 dev a").prefix.to_string(), "::/0");
        assert_eq!(ok("10.1.2.3 dev a").prefix.to_string(), "10.1.2.3/32");
        let r =
            ok("10.2.0.0/16 nexthop via 10.0.0.1 dev a nexthop via 10.0.0.2 dev b nexthop dev c");
        assert_eq!(
            r.nexthops,
            [
                nh(Some("10.0.0.1"), "a"),
                nh(Some("10.0.0.2"), "b"),
                nh(None, "c")
            ]
        );
        assert_eq!(parse_line("   # only a comment"), Ok(None));
        assert_eq!(parse_line(""), Ok(None));
    }

    #[test]
    fn errors_say_what_is_wrong() {
        for (line, want) in [
            ("10.0.0.0/8 via 1.1.1.1", "no `dev`"),
            ("10.0.0.0/8", "no `dev`"),
            ("10.0.0.0/33 dev a", "invalid prefix"),
            ("10.1.0.0/8 dev a", "host bits set"),
            ("10.0.0.0/8 via nope dev a", "invalid gateway"),
            ("10.0.0.0/8 via 2001:db8::1 dev a", "not of the family"),
            ("10.0.0.0/8 dev a metric 5", "unexpected `metric`"),
            ("10.0.0.0/8 dev", "needs a port"),
            ("10.0.0.0/8 dev a dev b", "two `dev`"),
            ("10.0.0.0/8 dev a nexthop dev b", "`nexthop` after a plain"),
            ("x dev a", "invalid destination"),
        ] {
            let e = parse_line(line).unwrap_err();
            assert!(e.contains(want), "{line}: {e}");
        }
        let e = parse_routes("10.0.0.0/8 dev a\n\nbad\n", |_| {}).unwrap_err();
        assert_eq!(e.line, 3);
    }
}
