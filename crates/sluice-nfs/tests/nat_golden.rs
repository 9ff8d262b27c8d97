//! Golden test: a checked-in capture goes through `nat` frame by frame,
//! each at its record's timestamp; the verdicts, the output frames (byte
//! for byte) and the counters must match. The expected frames were built
//! independently by scapy with every checksum computed from scratch; see
//! `tests/fixtures/nat/make_nat_golden.py`.

mod common;
mod nat_util;
use common::*;

use std::path::{Path, PathBuf};

use serde_json::json;
use sluice_nf::harness::Harness;
use sluice_nf::{DropReason, PortId, Verdict};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/nat")
        .join(name)
}

/// Every record of a classic little-endian microsecond pcap file:
/// (timestamp ns, bytes). Read by hand to stay independent of sluice.
fn read_pcap(path: &Path) -> Vec<(u64, Vec<u8>)> {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    assert_eq!(
        u32_at(0),
        0xa1b2_c3d4,
        "{}: LE microsecond pcap",
        path.display()
    );
    assert_eq!(u32_at(20), 1, "{}: Ethernet", path.display());
    let mut out = Vec::new();
    let mut o = 24;
    while o < b.len() {
        let (sec, usec, incl, orig) = (
            u32_at(o),
            u32_at(o + 4),
            u32_at(o + 8) as usize,
            u32_at(o + 12) as usize,
        );
        assert_eq!(incl, orig, "whole frames");
        out.push((
            u64::from(sec) * 1_000_000_000 + u64::from(usec) * 1000,
            b[o + 16..o + 16 + incl].to_vec(),
        ));
        o += 16 + incl;
    }
    out
}

fn verdict(name: &str) -> Verdict {
    match name {
        "next" => Verdict::Next,
        "port:0" => Verdict::ToPort(PortId(0)),
        d => Verdict::Drop(DropReason::nf_local(reason_index(
            "nat",
            d.strip_prefix("drop:").unwrap(),
        ))),
    }
}

#[test]
fn capture_through_nat_matches_the_golden_output() {
    let input = read_pcap(&fixture("nat_in.pcap"));
    let expected = read_pcap(&fixture("nat_expected.pcap"));
    let verdicts: Vec<Verdict> = std::fs::read_to_string(fixture("nat_verdicts.txt"))
        .unwrap()
        .lines()
        .map(verdict)
        .collect();
    assert_eq!((input.len(), verdicts.len(), expected.len()), (25, 25, 21));

    let mut nf = build(
        "nat",
        json!({
            "inside": ["10.0.0.0/24"],
            "pool": ["192.0.2.0/31"],
            "capacity": 64,
            "forward": [{ "proto": "tcp", "external": "192.0.2.1:8080", "internal": "10.0.0.5:80" }],
        }),
    );
    let mut h = Harness::new();
    let mut got = Vec::new();
    for (i, ((ts, frame), want)) in input.iter().zip(&verdicts).enumerate() {
        h.set_now_ns(*ts);
        let o = h
            .run(nf.as_mut(), std::slice::from_ref(frame))
            .pop()
            .unwrap();
        assert_eq!(o.verdict, *want, "frame {}", i + 1);
        if !matches!(o.verdict, Verdict::Drop(_)) {
            got.push(o.frame);
        }
    }
    assert_eq!(got.len(), expected.len());
    for (i, (g, (_, e))) in got.iter().zip(&expected).enumerate() {
        assert_eq!(g, e, "output frame {}", i + 1);
    }
    let c = |n: &str| h.counter(counter_index("nat", n));
    assert_eq!(c("translated_out"), 7);
    assert_eq!(c("translated_in"), 7);
    assert_eq!(c("hairpinned"), 2);
    assert_eq!(c("icmp_errors_translated"), 3);
    assert_eq!(c("untranslated"), 2);
    assert_eq!(c("filtered"), 3);
    assert_eq!(c("no_mapping"), 0);
    // UDP 10.0.0.1:5000, 10.0.0.3:5000, 10.0.0.3:7000; TCP 10.0.0.2:40000;
    // ICMP id 0x1234 — all expired by the last frame. The forwarded
    // server's mapping is static and not counted.
    assert_eq!(c("mapping_created"), 5);
    assert_eq!(c("mapping_expired"), 5);
    assert_eq!((c("mappings"), c("sessions")), (0, 1));
}
