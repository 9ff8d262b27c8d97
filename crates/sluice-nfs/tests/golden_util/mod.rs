//! Shared by the golden tests of policer/shaper, flow_monitor and the
//! utility elements: fixture paths, a hand-written pcap reader/writer
//! (independent of sluice's own pcap code) and the tshark check.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// `tests/fixtures/<dir>/<name>`.
pub fn fixture(dir: &str, name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(dir)
        .join(name)
}

/// Every record of a classic little-endian microsecond pcap with Ethernet
/// link type: (timestamp in ns, frame bytes).
pub fn read_pcap_ts(path: &Path) -> Vec<(u64, Vec<u8>)> {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    assert_eq!(u32_at(0), 0xa1b2_c3d4, "{}: µs pcap", path.display());
    assert_eq!(u32_at(20), 1, "{}: Ethernet link type", path.display());
    let mut out = Vec::new();
    let mut i = 24;
    while i + 16 <= b.len() {
        let ts = u64::from(u32_at(i)) * 1_000_000_000 + u64::from(u32_at(i + 4)) * 1_000;
        let incl = u32_at(i + 8) as usize;
        assert_eq!(incl, u32_at(i + 12) as usize, "whole frames only");
        out.push((ts, b[i + 16..i + 16 + incl].to_vec()));
        i += 16 + incl;
    }
    assert_eq!(i, b.len(), "{}: trailing bytes", path.display());
    out
}

/// The frames of a pcap, without timestamps.
pub fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
    read_pcap_ts(path).into_iter().map(|(_, f)| f).collect()
}

/// Writes `frames` as a classic pcap (timestamps 0).
pub fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let mut file = Vec::new();
    file.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    file.extend_from_slice(&[2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    file.extend_from_slice(&65535u32.to_le_bytes());
    file.extend_from_slice(&1u32.to_le_bytes());
    for f in frames {
        file.extend_from_slice(&[0; 8]);
        file.extend_from_slice(&(f.len() as u32).to_le_bytes());
        file.extend_from_slice(&(f.len() as u32).to_le_bytes());
        file.extend_from_slice(f);
    }
    std::fs::write(path, file).unwrap();
}

/// `tshark -V` of `frames` (with extra decode-as `args`), asserting that
/// nothing is malformed, every IPv4/UDP/TCP checksum is right and no
/// expert warning or error is raised; None
/// (after saying SKIP) when tshark is not installed.
pub fn tshark_clean(frames: &[Vec<u8>], tag: &str, args: &[&str]) -> Option<String> {
    if std::process::Command::new("tshark")
        .arg("-v")
        .output()
        .is_err()
    {
        eprintln!("SKIP tshark check ({tag}): tshark is not installed");
        return None;
    }
    let path = std::env::temp_dir().join(format!("golden-{tag}-{}.pcap", std::process::id()));
    write_pcap(&path, frames);
    let out = std::process::Command::new("tshark")
        .arg("-r")
        .arg(&path)
        // Checksums are verified (a bad one is an expert error); TCP
        // sequence analysis is about the capture, not the packets.
        .args([
            "-o",
            "ip.check_checksum:TRUE",
            "-o",
            "udp.check_checksum:TRUE",
            "-o",
            "tcp.check_checksum:TRUE",
            "-o",
            "tcp.analyze_sequence_numbers:FALSE",
        ])
        .args(args)
        .arg("-V")
        .output()
        .unwrap();
    std::fs::remove_file(&path).ok();
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        !text.contains("Malformed"),
        "{tag}: tshark says malformed:\n{text}"
    );
    for bad in ["[Severity level: Error]", "[Severity level: Warning]"] {
        assert!(!text.contains(bad), "{tag}: tshark expert {bad}:\n{text}");
    }
    Some(text)
}

/// Splits an `expected.txt` of `key value…` lines, skipping `#` comments.
pub fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}
