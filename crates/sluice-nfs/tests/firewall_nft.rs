//! Differential test against Linux: the same packets go through the
//! firewall NF (in the harness) and through nftables in a network namespace
//! (`firewall_nft/ruleset.nft`: `ct state established,related accept`,
//! `ct state invalid drop`, then the same rules), and every packet must get
//! the same fate: passed, dropped, or answered with a reject.
//!
//! Needs root, `ip`, `nft` (Debian package nftables, installed by
//! `.ci/run`) and python3; skips with a message otherwise. The namespaces
//! are removed by the script even when it fails.

mod common;
mod firewall_support;
use common::*;
use firewall_support::*;

use std::path::Path;
use std::process::Command;

use serde_json::json;
use sluice_nf::harness::Harness;
use sluice_nf::Verdict;
use sluice_packet::checksum;

const C: &str = "10.1.0.2";
const S: &str = "10.2.0.2";

/// The packets, in order, each with a distinct IPv4 identification so the
/// Linux side can recognise it after forwarding.
fn packets() -> Vec<Vec<u8>> {
    let get = b"GET / HTTP/1.0\r\n\r\n";
    let ok = b"HTTP/1.0 200 OK\r\n\r\n";
    let (g, o) = (get.len() as u32, ok.len() as u32);
    let dns_q = udp(C, 3333, S, 53);
    let mut v = vec![
        // 0-7: a whole accepted connection.
        tcp_seg(C, 40000, S, 80, SYN, 1000, 0, b""),
        tcp_seg(S, 80, C, 40000, SYN | ACK, 5000, 1001, b""),
        tcp_seg(C, 40000, S, 80, ACK, 1001, 5001, b""),
        tcp_seg(C, 40000, S, 80, ACK | PSH, 1001, 5001, get),
        tcp_seg(S, 80, C, 40000, ACK | PSH, 5001, 1001 + g, ok),
        tcp_seg(C, 40000, S, 80, FIN | ACK, 1001 + g, 5001 + o, b""),
        tcp_seg(S, 80, C, 40000, FIN | ACK, 5001 + o, 1002 + g, b""),
        tcp_seg(C, 40000, S, 80, ACK, 1002 + g, 5002 + o, b""),
        // 8-11: blocked, rejected (RST, ICMP), server may not open.
        tcp_seg(C, 40001, S, 22, SYN, 77, 0, b""),
        tcp_seg(C, 40002, S, 23, SYN, 4242, 0, b""),
        udp(C, 40003, S, 9),
        tcp_seg(S, 80, C, 40009, SYN, 9, 0, b""),
        // 12-13: picked up mid-stream (tcp_loose), its reply passes.
        tcp_seg(C, 40004, S, 80, ACK | PSH, 700, 900, b"more"),
        tcp_seg(S, 80, C, 40004, ACK, 900, 704, b""),
        // 14-16: ping, its reply, an unsolicited reply.
        ping(C, S, 7, false),
        ping(S, C, 7, true),
        ping(S, C, 8, true),
        // 17-20: DNS, its reply, a related ICMP error, an unrelated one.
        dns_q.clone(),
        udp(S, 53, C, 3333),
        icmp_error(S, C, 3, 3, ip_of(&dns_q)),
        icmp_error(S, C, 3, 3, ip_of(&udp(C, 3334, S, 53))),
        // 21-22: invalid flags, a FIN opening nothing.
        tcp_seg(C, 40005, S, 80, SYN | FIN, 1, 0, b""),
        tcp_seg(C, 40010, S, 80, FIN | ACK, 1, 1, b""),
        // 23: mid-stream data to telnet: NEW, rejected with a RST.
        tcp_seg(C, 40006, S, 23, ACK | PSH, 10, 20, b"hi"),
        // 24: the server opening UDP: no rule.
        udp(S, 53, C, 3335),
        // 25-27: SYN, an ACK in SYN_SENT (invalid), the server's RST.
        tcp_seg(C, 40011, S, 80, SYN, 300, 0, b""),
        tcp_seg(C, 40011, S, 80, ACK, 301, 1, b""),
        tcp_seg(S, 80, C, 40011, RST | ACK, 0, 301, b""),
    ];
    for (i, f) in v.iter_mut().enumerate() {
        let id = 0x4000 + i as u16;
        let old = u16::from_be_bytes([f[18], f[19]]);
        f[18..20].copy_from_slice(&id.to_be_bytes());
        let c = u16::from_be_bytes([f[24], f[25]]);
        f[24..26].copy_from_slice(&checksum::update_u16(c, old, id).to_be_bytes());
    }
    v
}

fn nf_fates(frames: &[Vec<u8>]) -> Vec<&'static str> {
    let mut fw = firewall(json!({
        "rules": [
            { "action": "accept", "dst": "10.2.0.2", "proto": "tcp", "dst_port": 80 },
            { "action": "reject", "proto": "tcp", "dst_port": 23 },
            { "action": "reject", "proto": "udp", "dst_port": 9, "reject_with": "port_unreachable" },
            { "action": "accept", "proto": "icmp", "icmp_type": 8 },
            { "action": "accept", "proto": "udp", "dst_port": 53 },
        ]
    }));
    Harness::new()
        .run(&mut fw, frames)
        .iter()
        .map(|o| match o.verdict {
            Verdict::Next => "pass",
            Verdict::ToPort(_) => "reject",
            _ => "drop",
        })
        .collect()
}

fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let mut b = Vec::new();
    for w in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65535, 1] {
        b.extend_from_slice(&w.to_le_bytes());
    }
    for f in frames {
        for w in [0u32, 0, f.len() as u32, f.len() as u32] {
            b.extend_from_slice(&w.to_le_bytes());
        }
        b.extend_from_slice(f);
    }
    std::fs::write(path, b).unwrap();
}

fn missing_prerequisite() -> Option<String> {
    let uid = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1).unwrap_or("").to_string())
        });
    if uid.as_deref() != Some("0") {
        return Some("not root".into());
    }
    for tool in ["ip", "nft", "python3"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            return Some(format!(
                "`{tool}` not found (apt-get install iproute2 nftables python3)"
            ));
        }
    }
    None
}

#[test]
fn same_fate_as_linux_nftables() {
    let frames = packets();
    let ours = nf_fates(&frames);
    // The NF side alone is deterministic: check it even without root.
    let d = "drop";
    let (p, r) = ("pass", "reject");
    assert_eq!(
        ours,
        [p, p, p, p, p, p, p, p, d, r, r, d, p, p, p, p, d, p, p, p, d, d, d, r, d, p, d, p]
    );
    if let Some(why) = missing_prerequisite() {
        eprintln!("skipping the nftables differential test: {why}");
        return;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("fw-nft-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("frames.pcap");
    write_pcap(&pcap, &frames);
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/firewall_nft");
    let out = Command::new("python3")
        .arg(here.join("nft_diff.py"))
        .arg(&pcap)
        .arg(here.join("ruleset.nft"))
        .arg(std::process::id().to_string())
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "nft_diff.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let linux: Vec<String> = serde_json::from_slice(&out.stdout).expect("a JSON list of fates");
    let diffs: Vec<String> = ours
        .iter()
        .zip(&linux)
        .enumerate()
        .filter(|(_, (a, b))| **a != b.as_str())
        .map(|(i, (a, b))| format!("packet {i}: firewall {a}, Linux {b}"))
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(linux.len(), ours.len());
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}
