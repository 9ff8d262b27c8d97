//! Golden pcap tests for `bridge` and `load_balancer`: a checked-in capture
//! runs through the NF in the harness and the frames it forwards must equal
//! the checked-in expected capture, frame for frame, with the expected
//! drops and counters. The fixtures and the scapy scripts that wrote them
//! are in `tests/fixtures/{bridge,load_balancer}/` (`make_golden.py`); the
//! load balancer's script computes each connection's backend with its own
//! Maglev and 5-tuple hash implementation, so this is also a differential
//! test of both.

mod common;
use common::*;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::json;
use sluice_nf::harness::Harness;
use sluice_nf::{PortId, Verdict};
use sluice_packet::{parse, verify_checksums};
use sluice_ports::PcapReader;

fn fixture(nf: &str, name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(nf)
        .join(name)
}

fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
    let mut r = PcapReader::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = Vec::new();
    while let Some(p) = r.next_packet().unwrap() {
        assert_eq!(
            p.orig_len as usize,
            p.data.len(),
            "{}: whole frames",
            path.display()
        );
        out.push(p.data.to_vec());
    }
    out
}

/// Drop counts by NF-local reason name.
fn drops(ty: &str, out: &[sluice_nf::harness::Outcome]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for o in out {
        if let Verdict::Drop(r) = o.verdict {
            let name = match r.as_nf_local() {
                Some(i) => nf_type(ty).drop_reasons[usize::from(i)].to_string(),
                None => r.name().unwrap(),
            };
            *m.entry(name).or_default() += 1;
        }
    }
    m
}

#[test]
fn bridge_golden() {
    let input = read_pcap(&fixture("bridge", "in.pcap"));
    let expected = read_pcap(&fixture("bridge", "expected.pcap"));
    assert_eq!((input.len(), expected.len()), (9, 5));
    let mut nf = build(
        "bridge",
        json!({ "ports": [{ "name": "out", "vlan": 10 }, { "name": "dump", "trunk": [10, 20], "native": 1 }] }),
    );
    let mut h = Harness::new();
    let out = h.run(nf.as_mut(), &input);
    let sent: Vec<&Vec<u8>> = out
        .iter()
        .filter(|o| o.verdict == Verdict::ToPort(PortId(1)))
        .map(|o| &o.frame)
        .collect();
    assert_eq!(sent.len(), expected.len());
    for (i, (g, e)) in sent.iter().zip(&expected).enumerate() {
        assert_eq!(*g, e, "frame {i}");
    }
    let want: BTreeMap<String, usize> =
        ["vlan_not_allowed", "same_port", "link_local", "bad_src_mac"]
            .iter()
            .map(|r| (r.to_string(), 1))
            .collect();
    assert_eq!(drops("bridge", &out), want);
    assert!(out
        .iter()
        .all(|o| matches!(o.verdict, Verdict::ToPort(PortId(1)) | Verdict::Drop(_))));
    let c = |n: &str| h.counter(counter_index("bridge", n));
    // A, D and C learned in VLAN 10 (the multicast-sourced frame is not).
    assert_eq!((c("learned"), c("flooded"), c("forwarded")), (3, 5, 0));
}

#[test]
fn load_balancer_golden() {
    let input = read_pcap(&fixture("load_balancer", "in.pcap"));
    let expected = read_pcap(&fixture("load_balancer", "expected.pcap"));
    assert_eq!(input.len(), 58);
    assert_eq!(expected.len(), input.len());
    let cfg = json!({
        "vip": "10.0.0.100",
        "ports": [80],
        "mode": "nat",
        "table_size": 65537,
        "backends": [
            { "name": "b0", "addr": "10.0.1.1", "port": 8080 },
            { "name": "b1", "addr": "10.0.1.2", "port": 8080 },
            { "name": "b2", "addr": "10.0.1.3", "port": 8080 },
        ],
    });
    let mut nf = build("load_balancer", cfg);
    let mut h = Harness::new();
    // One frame per batch, as a slow trickle would arrive: the connection
    // state must carry across batches.
    let mut out = Vec::new();
    for f in &input {
        out.extend(h.run(nf.as_mut(), std::slice::from_ref(f)));
    }
    for (i, (o, e)) in out.iter().zip(&expected).enumerate() {
        assert_eq!(o.verdict, Verdict::Next, "frame {i}");
        assert_eq!(&o.frame, e, "frame {i}");
        if let Ok(hd) = parse(&o.frame) {
            if hd.ip_version != 0 {
                verify_checksums(&o.frame, &hd).unwrap();
            }
        }
    }
    let c = |n: &str| h.counter(counter_index("load_balancer", n));
    // 8 TCP connections (3 client packets each) and 4 UDP flows (2 each);
    // 2 replies per connection/flow; the port-81 SYN and ARP are other.
    assert_eq!(c("new_connections"), 12);
    assert_eq!(c("tracked"), 8 * 2 + 4);
    assert_eq!(c("replies"), 8 * 2 + 4 * 2);
    assert_eq!(c("other"), 2);
    assert_eq!(drops("load_balancer", &out), BTreeMap::new());
}
