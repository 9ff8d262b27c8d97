//! Golden test: `fixtures/router/in.pcap` through the router must give
//! exactly the frames of `expected.pcap` (in order) with the ports and
//! drop reasons of `expected.txt`. The expected frames were built by scapy
//! from the RFCs, independently of sluice (see `make_golden.py`):
//! forwarding with MAC rewrite, TTL expiry → ICMP time exceeded, no route
//! → ICMP unreachable (IPv4 and IPv6), ARP reply, NS → NA, and forwarding
//! to the neighbours just learned.

mod common;
use common::*;

use std::path::{Path, PathBuf};

use serde_json::json;
use sluice_nf::harness::Harness;
use sluice_nf::{DropReason, PortId, Verdict};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/router")
        .join(name)
}

/// The frames of a classic little-endian pcap file.
fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(b[0..4], 0xa1b2_c3d4u32.to_le_bytes(), "{}", path.display());
    assert_eq!(b[20..24], 1u32.to_le_bytes(), "Ethernet link type");
    let mut out = Vec::new();
    let mut i = 24;
    while i + 16 <= b.len() {
        let incl = u32::from_le_bytes(b[i + 8..i + 12].try_into().unwrap()) as usize;
        let orig = u32::from_le_bytes(b[i + 12..i + 16].try_into().unwrap()) as usize;
        assert_eq!(incl, orig, "whole frames only");
        out.push(b[i + 16..i + 16 + incl].to_vec());
        i += 16 + incl;
    }
    assert_eq!(i, b.len());
    out
}

#[test]
fn router_output_matches_the_golden_capture() {
    let mut nf = build(
        "router",
        json!({
            "interfaces": router_interfaces(),
            "routes": [
                "10.0.0.0/8 via 192.168.2.2 dev dump",
                "2001:db8:100::/48 via 2001:db8:2::2 dev dump",
            ],
            "neighbours": [
                { "ip": "192.168.2.2", "mac": "02:00:00:00:00:22", "dev": "dump" },
                { "ip": "2001:db8:2::2", "mac": "02:00:00:00:00:22", "dev": "dump" },
            ],
        }),
    );
    let input = read_pcap(&fixture("in.pcap"));
    let expected = read_pcap(&fixture("expected.pcap"));
    let verdicts: Vec<String> = std::fs::read_to_string(fixture("expected.txt"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(input.len(), 12);
    assert_eq!(verdicts.len(), input.len());

    // One frame per batch: frames 10 and 11 need what frames 1 and 2 taught.
    let mut h = Harness::new();
    let mut sent = Vec::new();
    for (i, (frame, want)) in input.iter().zip(&verdicts).enumerate() {
        let o = h.run(nf.as_mut(), std::slice::from_ref(frame)).remove(0);
        let want_v = match want.split_once(' ') {
            Some(("port", p)) => Verdict::ToPort(PortId(p.parse().unwrap())),
            Some(("drop", r)) => Verdict::Drop(DropReason::nf_local(reason_index("router", r))),
            _ => panic!("bad expected.txt line {want}"),
        };
        assert_eq!(o.verdict, want_v, "frame {i}");
        if matches!(o.verdict, Verdict::ToPort(_)) {
            sent.push((i, o.frame));
        }
    }
    assert_eq!(sent.len(), expected.len());
    for ((i, got), want) in sent.iter().zip(&expected) {
        assert_eq!(got, want, "frame {i}");
    }
    let c = |n: &str| h.counter(counter_index("router", n));
    assert_eq!(c("forwarded"), 5);
    assert_eq!(c("ttl_expired"), 2);
    assert_eq!(c("no_route"), 2);
    assert_eq!(c("icmp_sent"), 4);
    assert_eq!(c("arp_replies"), 1);
    assert_eq!(c("nd_advertisements"), 1);
    assert_eq!(c("neighbours_learned"), 2);
    assert_eq!(c("neighbours"), 4);
}
