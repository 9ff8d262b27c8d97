//! The routes-file parser never panics, and every route it accepts is
//! well formed and reads back the same after printing.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_nfs::router::routes_file::{parse_line, parse_routes, MAX_NEXTHOPS};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut routes = Vec::new();
    let _ = parse_routes(text, |r| routes.push(r));
    for r in routes {
        assert!(!r.nexthops.is_empty() && r.nexthops.len() <= MAX_NEXTHOPS);
        assert_eq!(r.prefix.trunc(), r.prefix);
        let mut line = r.prefix.to_string();
        for n in &r.nexthops {
            line.push_str(" nexthop");
            if let Some(v) = n.via {
                assert_eq!(v.is_ipv6(), r.prefix.addr().is_ipv6());
                line.push_str(&format!(" via {v}"));
            }
            line.push_str(&format!(" dev {}", n.dev));
        }
        assert_eq!(parse_line(&line), Ok(Some(r)), "{line}");
    }
});
