//! Golden test through the real binary: a checked-in capture is replayed
//! through `forwarder` (MAC swap, process isolation) and `acl` (drops one
//! known flow) into a pcap file, which must equal the checked-in expected
//! capture frame for frame, in order. The fixtures and the script that
//! wrote them are in `tests/fixtures/` (see `make_golden.py`).

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::Command;

use sluice_ports::PcapReader;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Every record of a pcap file: (original length, bytes).
fn read_pcap(path: &Path) -> Vec<(u32, Vec<u8>)> {
    let mut r = PcapReader::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(r.header().linktype, 1, "{}: Ethernet", path.display());
    let mut out = Vec::new();
    while let Some(p) = r.next_packet().unwrap() {
        out.push((p.orig_len, p.data.to_vec()));
    }
    out
}

fn swap_macs(f: &[u8]) -> Vec<u8> {
    [&f[6..12], &f[0..6], &f[12..]].concat()
}

const DROPPED_SRC: [u8; 4] = [10, 0, 0, 66];

fn spec(input: &Path, output: &Path) -> String {
    format!(
        r#"ports:
  - {{ name: trace, kind: pcap_in, path: "{}" }}
  - {{ name: dump, kind: pcap_out, path: "{}" }}
nfs:
  - name: swap
    type: forwarder
    isolation: process
    config: {{ mac_swap: true }}
  - name: acl
    type: acl
    isolation: inline
    config:
      rules:
        - {{ action: drop, src: 10.0.0.66/32 }}
chains:
  - {{ name: main, from: trace, nfs: [swap, acl], to: dump }}
"#,
        input.display(),
        output.display()
    )
}

#[test]
fn fixtures_are_consistent() {
    // The expected file is the input with MACs swapped, minus the dropped
    // flow: checked here independently of sluice, so a bad fixture cannot
    // make the golden test pass.
    let input = read_pcap(&fixture("golden_in.pcap"));
    let expected = read_pcap(&fixture("golden_expected.pcap"));
    assert_eq!(input.len(), 36);
    assert_eq!(expected.len(), 31);
    let mine: Vec<Vec<u8>> = input
        .iter()
        .filter(|(_, f)| f.get(26..30) != Some(&DROPPED_SRC[..]))
        .map(|(_, f)| swap_macs(f))
        .collect();
    let theirs: Vec<Vec<u8>> = expected.iter().map(|(_, f)| f.clone()).collect();
    assert_eq!(mine, theirs);
    // Every frame is whole (not truncated) and every IP frame parses with
    // correct checksums; the two ARP frames are the only non-IP ones.
    let mut non_ip = 0;
    for (i, (orig, f)) in input.iter().enumerate() {
        assert_eq!(*orig as usize, f.len(), "frame {i}");
        if !check_ip_frame(f) {
            non_ip += 1;
        }
    }
    assert_eq!(non_ip, 2);
}

/// Checks the lengths and the IPv4 header and transport checksums of an
/// IP frame (optionally 802.1Q-tagged) by hand, independently of sluice;
/// returns false for non-IP frames.
fn check_ip_frame(f: &[u8]) -> bool {
    let mut off = 12;
    let mut et = u16::from_be_bytes([f[off], f[off + 1]]);
    if et == 0x8100 {
        off += 4;
        et = u16::from_be_bytes([f[off], f[off + 1]]);
    }
    let l3 = off + 2;
    let fold = |mut s: u32| {
        while s >> 16 != 0 {
            s = (s & 0xffff) + (s >> 16);
        }
        s as u16
    };
    let sum = |d: &[u8]| -> u32 {
        d.chunks(2)
            .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
            .sum()
    };
    match et {
        0x0800 => {
            assert_eq!(fold(sum(&f[l3..l3 + 20])), 0xffff, "ipv4 header checksum");
            let total = usize::from(u16::from_be_bytes([f[l3 + 2], f[l3 + 3]]));
            assert_eq!(l3 + total, f.len(), "no padding, no truncation");
            let proto = f[l3 + 9];
            let seg = &f[l3 + 20..];
            let pseudo = if proto == 1 {
                0
            } else {
                sum(&f[l3 + 12..l3 + 20]) + u32::from(proto) + seg.len() as u32
            };
            assert_eq!(fold(pseudo + sum(seg)), 0xffff, "l4 checksum");
            true
        }
        0x86dd => {
            let plen = usize::from(u16::from_be_bytes([f[l3 + 4], f[l3 + 5]]));
            assert_eq!(l3 + 40 + plen, f.len());
            let seg = &f[l3 + 40..];
            let pseudo = sum(&f[l3 + 8..l3 + 40]) + u32::from(f[l3 + 6]) + plen as u32;
            assert_eq!(fold(pseudo + sum(seg)), 0xffff, "l4 checksum");
            true
        }
        _ => false,
    }
}

#[test]
fn pcap_through_forwarder_and_acl_matches_the_golden_output() {
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("out.pcap");
    let spec_path = dir.path().join("golden.yaml");
    std::fs::write(&spec_path, spec(&fixture("golden_in.pcap"), &out_path)).unwrap();

    // The run ends by itself when the capture is exhausted; the duration
    // is only a safety net.
    let (out, r) = run_json(&spec_path, 30.0);
    assert!(
        out.status.success(),
        "status {:?}, stderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        r["duration_s"].as_f64().unwrap() < 25.0,
        "the run should end when the input is exhausted: {r:#}"
    );

    // Counters: 36 in, 31 out, exactly the 5 frames of the dropped flow
    // denied by the ACL, nothing else lost.
    assert_eq!(r["packets_in"], 36, "{r:#}");
    assert_eq!(r["packets_out"], 31, "{r:#}");
    assert_eq!(r["drops"], serde_json::json!({ "acl:denied": 5 }), "{r:#}");
    assert_eq!(r["drops_total"], 5, "{r:#}");
    assert_accounted(&r);
    let acl = nf(&r, "acl");
    assert_eq!(acl["isolation"], "inline");
    assert_eq!(acl["counters"]["denied"], 5, "{r:#}");
    // ARP frames are neither accepted nor denied.
    assert_eq!(acl["counters"]["accepted"], 29, "{r:#}");
    let swap = nf(&r, "swap");
    assert_eq!(swap["isolation"], "process");
    assert_eq!(swap["packets"], 36, "{r:#}");
    assert_eq!(swap["restarts"], 0, "{r:#}");

    // The output, frame for frame.
    let got = read_pcap(&out_path);
    let expected = read_pcap(&fixture("golden_expected.pcap"));
    assert_eq!(got.len(), expected.len());
    for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
        assert_eq!(g.0, e.0, "frame {i}: original length");
        assert_eq!(g.1, e.1, "frame {i}: bytes");
    }

    // An independent reader must accept the file too.
    if Command::new("tshark").arg("--version").output().is_err() {
        eprintln!("tshark not installed: skipping the tshark cross-check");
        return;
    }
    let ts = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(&out_path)
        .args(["-T", "fields", "-e", "frame.len", "-e", "eth.src"])
        .output()
        .unwrap();
    assert!(
        ts.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&ts.stderr)
    );
    let lines: Vec<String> = String::from_utf8_lossy(&ts.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(lines.len(), 31, "tshark read every frame: {lines:?}");
    for (line, (_, e)) in lines.iter().zip(&expected) {
        let mac = e[6..12]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":");
        assert_eq!(line, &format!("{}\t{mac}", e.len()));
    }
}
