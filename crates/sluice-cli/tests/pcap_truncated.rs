//! Golden test through the real binary: a capture cut short in its last
//! record (`tests/fixtures/golden_truncated.pcap`, written by
//! `make_golden.py`) is replayed the way tcpdump and tshark read it: every
//! intact record, a warning about the cut one, and the cut record counted
//! as the port's `truncated_records`, instead of refusing the whole file.

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

/// The intact records of a pcap file (stopping at a cut record).
fn frames(path: &Path) -> Vec<Vec<u8>> {
    let mut r = PcapReader::open(path).unwrap();
    let mut out = Vec::new();
    while let Ok(Some(p)) = r.next_packet() {
        out.push(p.data.to_vec());
    }
    out
}

#[test]
fn a_capture_cut_in_its_last_record_replays_its_intact_records() {
    let input = fixture("golden_truncated.pcap");
    let whole = frames(&fixture("golden_in.pcap"));
    assert_eq!(whole.len(), 36);
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("out.pcap");
    let spec_path = dir.path().join("spec.yaml");
    std::fs::write(
        &spec_path,
        format!(
            "ports:\n  - {{ name: trace, kind: pcap_in, path: \"{}\" }}\n  \
             - {{ name: dump, kind: pcap_out, path: \"{}\" }}\n\
             chains:\n  - {{ name: main, from: trace, to: dump }}\n",
            input.display(),
            out_path.display()
        ),
    )
    .unwrap();
    let (out, r) = run_json(&spec_path, 30.0);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "status {:?}: {stderr}", out.status);
    assert_accounted(&r);
    assert_eq!(r["packets_in"], 35, "{r:#}");
    assert_eq!(r["packets_out"], 35, "{r:#}");
    assert_eq!(port(&r, "trace")["truncated_records"], 1, "{r:#}");
    assert_eq!(port(&r, "dump")["truncated_records"], 0, "{r:#}");
    assert!(
        stderr.contains(&format!(
            "sluice: warning: port trace: {}: pcap record at offset 6185 truncated: 30 of 73 captured bytes; replaying the 35 intact records",
            input.display()
        )),
        "{stderr}"
    );
    assert_eq!(frames(&out_path), whole[..35]);

    // tshark reads the same records (and complains about the same cut).
    match Command::new("tshark")
        .args(["-n", "-r"])
        .arg(&input)
        .args(["-T", "fields", "-e", "frame.number"])
        .output()
    {
        Err(_) => eprintln!("tshark not installed: skipping the record-count comparison with it"),
        Ok(ts) => {
            let count = String::from_utf8_lossy(&ts.stdout).lines().count();
            assert_eq!(count, 35, "tshark's record count");
            assert!(
                String::from_utf8_lossy(&ts.stderr).contains("cut short in the middle of a packet"),
                "tshark: {}",
                String::from_utf8_lossy(&ts.stderr)
            );
        }
    }
}
