//! Golden pcap tests for the tunnel NFs: frames from `inner.pcap` through
//! `vxlan_encap` / `gre_encap` must equal, byte for byte, what scapy built
//! in `fixtures/tunnel/make_tunnel_golden.py`; the decapsulators must give
//! the inner frames back; tshark must decode the outputs as VXLAN / GRE
//! without malformed packets.

mod common;
use common::*;

use std::path::{Path, PathBuf};

use serde_json::json;
use sluice_nf::harness::Harness;
use sluice_nf::Verdict;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/tunnel")
        .join(name)
}

/// Frames of a classic little-endian pcap.
fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(
        &b[..4],
        &0xa1b2c3d4u32.to_le_bytes(),
        "little-endian microsecond pcap"
    );
    let mut out = vec![];
    let mut off = 24;
    while off + 16 <= b.len() {
        let n = u32::from_le_bytes(b[off + 8..off + 12].try_into().unwrap()) as usize;
        out.push(b[off + 16..off + 16 + n].to_vec());
        off += 16 + n;
    }
    out
}

fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let mut f = vec![];
    f.extend_from_slice(&0xa1b2c3d4u32.to_le_bytes());
    f.extend_from_slice(&[2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    f.extend_from_slice(&65535u32.to_le_bytes());
    f.extend_from_slice(&1u32.to_le_bytes());
    for fr in frames {
        f.extend_from_slice(&[0; 8]);
        f.extend_from_slice(&(fr.len() as u32).to_le_bytes());
        f.extend_from_slice(&(fr.len() as u32).to_le_bytes());
        f.extend_from_slice(fr);
    }
    std::fs::write(path, f).unwrap();
}

fn outer() -> serde_json::Value {
    json!({ "local": "192.0.2.1", "remote": "192.0.2.2",
            "src_mac": "02:00:00:00:01:01", "dst_mac": "02:00:00:00:01:02" })
}

fn with(mut base: serde_json::Value, extra: serde_json::Value) -> serde_json::Value {
    for (k, v) in extra.as_object().unwrap() {
        base[k] = v.clone();
    }
    base
}

/// Runs `ty` on `frames`; every packet must pass.
fn through(ty: &str, config: serde_json::Value, frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut nf = build(ty, config);
    Harness::new()
        .run(nf.as_mut(), frames)
        .into_iter()
        .map(|o| {
            assert_eq!(o.verdict, Verdict::Next, "{ty}");
            o.frame
        })
        .collect()
}

/// `tshark -V` output for `frames` (None when tshark is missing).
fn tshark(frames: &[Vec<u8>], tag: &str) -> Option<String> {
    if std::process::Command::new("tshark")
        .arg("-v")
        .output()
        .is_err()
    {
        eprintln!("SKIP tshark check: tshark is not installed");
        return None;
    }
    let path =
        std::env::temp_dir().join(format!("tunnel-golden-{tag}-{}.pcap", std::process::id()));
    write_pcap(&path, frames);
    let out = std::process::Command::new("tshark")
        .args(["-r", path.to_str().unwrap(), "-V"])
        .output()
        .unwrap();
    std::fs::remove_file(&path).ok();
    assert!(out.status.success());
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn vxlan_matches_scapy_and_tshark() {
    let inner = read_pcap(&fixture("inner.pcap"));
    let expected = read_pcap(&fixture("vxlan_expected.pcap"));
    assert_eq!(inner.len(), 4);
    let cfg = with(
        outer(),
        json!({ "vni": 100, "src_port_range": "49152-49152" }),
    );
    let out = through("vxlan_encap", cfg, &inner);
    for (i, (o, e)) in out.iter().zip(&expected).enumerate() {
        assert_eq!(o, e, "frame {i} differs from scapy's");
    }
    assert_eq!(
        through("vxlan_decap", json!({ "vni": 100 }), &expected),
        inner
    );
    if let Some(text) = tshark(&out, "vxlan") {
        assert_eq!(
            text.matches("Virtual eXtensible Local Area Network")
                .count(),
            4,
            "{text}"
        );
        assert_eq!(
            text.matches("VXLAN Network Identifier (VNI): 100").count(),
            4
        );
        assert!(!text.contains("Malformed"), "{text}");
        assert!(text.contains("Echo (ping) request"));
    }
}

#[test]
fn gre_matches_scapy_and_tshark() {
    let inner = read_pcap(&fixture("inner.pcap"));
    let expected = read_pcap(&fixture("gre_expected.pcap"));
    let out = through(
        "gre_encap",
        with(outer(), json!({ "mode": "eth", "key": 42 })),
        &inner,
    );
    for (i, (o, e)) in out.iter().zip(&expected).enumerate() {
        assert_eq!(o, e, "frame {i} differs from scapy's");
    }
    assert_eq!(through("gre_decap", json!({ "key": 42 }), &expected), inner);
    if let Some(text) = tshark(&out, "gre") {
        assert_eq!(
            text.matches("Generic Routing Encapsulation (Transparent Ethernet bridging)")
                .count(),
            4,
            "{text}"
        );
        assert_eq!(text.matches("Key: 0x0000002a").count(), 4);
        assert!(!text.contains("Malformed"), "{text}");
    }
}
