//! The `mirror` NF's capture file through the binary: `sluice validate`
//! leaves it alone, a relative path lands in the spec file's directory
//! whatever the current directory, and a mirror restarted with its graph
//! after a crash appends to the file its first instance created.

mod common;
use common::*;

use std::path::Path;
use std::process::Stdio;

use serde_json::Value;
use sluice_ports::pcap::TsResolution;
use sluice_ports::PcapReader;

/// Captured frames of the pcap file at `path` (orig length, bytes); the
/// whole file must parse.
fn pcap_records(path: &Path) -> Vec<(u32, Vec<u8>)> {
    let mut rd = PcapReader::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(rd.header().resolution, TsResolution::Nanos);
    assert_eq!(rd.header().linktype, 1);
    let mut recs = Vec::new();
    while let Some(p) = rd.next_packet().unwrap() {
        recs.push((p.orig_len, p.data.to_vec()));
    }
    recs
}

fn ctr(r: &Value, name: &str, counter: &str) -> u64 {
    nf(r, name)["counters"][counter]
        .as_u64()
        .unwrap_or_else(|| panic!("NF {name} has no counter {counter}: {r:#}"))
}

/// A generator → mirror(s) → sink spec; `mirrors` is the `nfs` block.
fn mirror_spec(mirrors: &str, names: &str) -> String {
    format!(
        "ports:\n  - {{ name: gen, kind: generator, flows: 8, size: 128, rate_pps: 5000 }}\n  - {{ name: out, kind: sink }}\n  - {{ name: dump, kind: pcap_out, path: port.pcap }}\nnfs:\n{mirrors}chains:\n  - {{ name: main, from: gen, nfs: [{names}], to: out }}\n"
    )
}

/// `sluice validate` builds every NF to check its config; before, the
/// mirror's build created (truncated) its file, so validating a spec
/// destroyed the capture of the last run. Now the existing file stays
/// byte for byte, and no file is created where there was none; a bad
/// path is still an error.
#[test]
fn validate_leaves_capture_files_alone() {
    let specs = tempfile::tempdir().unwrap();
    let old = specs.path().join("old.pcap");
    let content: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
    std::fs::write(&old, &content).unwrap();
    let mtime = std::fs::metadata(&old).unwrap().modified().unwrap();
    let spec = specs.path().join("spec.yaml");
    // Absolute paths: this is about validation, not about where relative
    // paths resolve (see below).
    std::fs::write(
        &spec,
        mirror_spec(
            &format!(
                "  - {{ name: a, type: mirror, config: {{ path: {} }} }}\n  - {{ name: b, type: mirror, isolation: inline, config: {{ path: {} }} }}\n",
                old.display(),
                specs.path().join("new.pcap").display()
            ),
            "a, b",
        ),
    )
    .unwrap();
    let out = sluice().arg("validate").arg(&spec).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read(&old).unwrap(),
        content,
        "validate changed the capture"
    );
    assert_eq!(std::fs::metadata(&old).unwrap().modified().unwrap(), mtime);
    assert!(!specs.path().join("new.pcap").exists());

    std::fs::write(
        &spec,
        mirror_spec(
            "  - { name: a, type: mirror, config: { path: missing/x.pcap } }\n",
            "a",
        ),
    )
    .unwrap();
    let out = sluice().arg("validate").arg(&spec).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("nfs[0].config.path") && err.contains("cannot create"),
        "{err}"
    );
}

/// A relative mirror path resolves against the spec file's directory, as
/// the `pcap_out` port's beside it does, from whatever directory sluice
/// runs in and however the spec is named; before, it landed in the
/// current directory.
#[test]
fn relative_mirror_path_lands_beside_the_spec() {
    let top = tempfile::tempdir().unwrap();
    let specs = top.path().join("specs");
    let elsewhere = top.path().join("elsewhere");
    std::fs::create_dir(&specs).unwrap();
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::write(
        specs.join("spec.yaml"),
        mirror_spec(
            "  - { name: tap, type: mirror, config: { path: cap.pcap, snaplen: 60 } }\n",
            "tap",
        ),
    )
    .unwrap();
    // Named absolutely from elsewhere, and relatively from its parent.
    for (cwd, spec) in [
        (elsewhere.as_path(), specs.join("spec.yaml")),
        (top.path(), Path::new("specs/spec.yaml").to_path_buf()),
    ] {
        let _ = std::fs::remove_file(specs.join("cap.pcap"));
        let out = sluice()
            .current_dir(cwd)
            .args(["run", spec.to_str().unwrap(), "--json", "--duration", "0.5"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let r: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_accounted(&r);
        let captured = ctr(&r, "tap", "captured");
        assert!(captured > 100, "{r:#}");
        let recs = pcap_records(&specs.join("cap.pcap"));
        assert_eq!(recs.len() as u64, captured);
        assert!(
            recs.iter().all(|(orig, d)| *orig == 128 && d.len() == 60),
            "{:?}",
            recs.first().map(|(o, d)| (o, d.len()))
        );
        // The pcap_out port's relative path went to the same directory.
        assert!(specs.join("port.pcap").exists());
        for dir in [elsewhere.as_path(), top.path()] {
            assert!(!dir.join("cap.pcap").exists(), "{}", dir.display());
        }
    }
}

/// A mirror in a graph with a `chaos` element that exits every 1000
/// packets: each crash restarts the graph's process and rebuilds the
/// mirror. The first instance creates the file, every restarted one
/// appends, so the file holds all instances' records under one header
/// (less what a dying instance still had buffered); before, every
/// instance truncated it and only the last one's records were left.
#[test]
fn restarted_mirror_appends_to_the_first_instances_file() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("spec.yaml");
    let cap = dir.path().join("cap.pcap");
    std::fs::write(
        &spec,
        "settings:\n  restart: { policy: always, max_restarts: 1000, backoff_ms: 5 }\nports:\n  - { name: gen, kind: generator, flows: 8, size: 128, rate_pps: 10000 }\n  - { name: out, kind: sink }\nnfs:\n  - name: g\n    type: graph\n    isolation: process\n    config:\n      elements:\n        - { name: tap, type: mirror, config: { path: CAP, buffer_bytes: 4096 } }\n        - { name: bad, type: chaos, config: { fault: exit, after_packets: 1000 } }\nchains:\n  - { name: main, from: gen, nfs: [g], to: out }\n"
            .replace("CAP", cap.to_str().unwrap()),
    )
    .unwrap();
    let (out, r) = run_json(&spec, 1.5);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_accounted(&r);
    let restarts = nf(&r, "g")["restarts"].as_u64().unwrap();
    assert!(restarts >= 2, "{r:#}");
    let recs = pcap_records(&cap);
    assert!(
        recs.iter().all(|(orig, d)| *orig == 128 && d.len() == 128),
        "{:?}",
        recs.first().map(|(o, d)| (o, d.len()))
    );
    // Every crashed instance passed 1000 packets to its mirror and lost
    // at most one 4096-byte buffer of them (28 records of 144 bytes).
    let last = ctr(&r, "g", "tap.captured");
    assert!(
        recs.len() as u64 >= 900 * restarts,
        "{} records, {restarts} restarts, last instance captured {last}: {r:#}",
        recs.len()
    );
}
