//! Golden test: a checked-in capture (a TCP connection's whole life plus
//! blocked, rejected and invalid packets, written by
//! `fixtures/firewall/make_golden.py` with scapy) goes through the firewall
//! in the harness; what comes out must equal the expected capture frame for
//! frame (rejects replaced by the RST / ICMP unreachable scapy built), with
//! the expected verdicts and counters.

mod common;
use common::*;

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use sluice_nf::harness::Harness;
use sluice_nf::{DropReason, PortId, Verdict};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/firewall")
        .join(name)
}

/// The frames of a classic little-endian libpcap file (µs or ns stamps).
fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let magic = u32::from_le_bytes(b[0..4].try_into().unwrap());
    assert!(
        magic == 0xa1b2_c3d4 || magic == 0xa1b2_3c4d,
        "{}: little-endian pcap",
        path.display()
    );
    assert_eq!(
        u32::from_le_bytes(b[20..24].try_into().unwrap()),
        1,
        "Ethernet"
    );
    let mut out = Vec::new();
    let mut off = 24;
    while off + 16 <= b.len() {
        let incl = u32::from_le_bytes(b[off + 8..off + 12].try_into().unwrap()) as usize;
        let orig = u32::from_le_bytes(b[off + 12..off + 16].try_into().unwrap()) as usize;
        assert_eq!(incl, orig, "whole frames");
        out.push(b[off + 16..off + 16 + incl].to_vec());
        off += 16 + incl;
    }
    assert_eq!(off, b.len(), "no trailing bytes");
    out
}

fn config() -> Value {
    json!({
        "tcp_loose": false,
        "rules": [
            { "action": "accept", "proto": "tcp", "dst": "198.51.100.80", "dst_port": 80 },
            { "action": "reject", "proto": "tcp", "dst_port": 23 },
            { "action": "reject", "proto": "udp", "dst_port": 9 },
            { "action": "accept", "proto": "icmp", "icmp_type": 8 },
        ],
    })
}

#[test]
fn golden_capture_through_the_firewall() {
    let input = read_pcap(&fixture("golden_in.pcap"));
    let expected = read_pcap(&fixture("golden_expected.pcap"));
    let want: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("golden_expected.json")).unwrap())
            .unwrap();
    let verdicts: Vec<&str> = want["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(verdicts.len(), input.len());

    let mut nf = build("firewall", config());
    let mut h = Harness::new();
    let out = h.run(nf.as_mut(), &input);
    let mut got_frames = Vec::new();
    for (i, (o, v)) in out.iter().zip(&verdicts).enumerate() {
        let want_v = match *v {
            "next" => Verdict::Next,
            "reject" => Verdict::ToPort(PortId(0)),
            d => Verdict::Drop(DropReason::nf_local(reason_index(
                "firewall",
                d.strip_prefix("drop:").unwrap(),
            ))),
        };
        assert_eq!(o.verdict, want_v, "packet {i}");
        if !matches!(o.verdict, Verdict::Drop(_)) {
            got_frames.push(o.frame.clone());
        }
    }
    assert_eq!(got_frames.len(), expected.len());
    for (i, (g, e)) in got_frames.iter().zip(&expected).enumerate() {
        assert_eq!(g, e, "output frame {i}");
    }
    // Per-rule hits (extended counters): rule 0 accepted the web
    // connection, 1 and 2 rejected, 3 accepted the ping.
    let hits: Vec<u64> = (0..5).map(|i| h.ext_counter(i)).collect();
    assert_eq!(hits, [1, 1, 1, 1, 0]);
    let t = nf_type("firewall");
    for (i, name) in t.counters.iter().enumerate() {
        assert_eq!(
            h.counter(i),
            want["counters"][name].as_u64().unwrap(),
            "counter {name}"
        );
    }
}
