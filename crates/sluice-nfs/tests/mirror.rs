//! `mirror`'s file handling: building it (what `sluice validate` and the
//! platform's checks do) touches no file; the file is created when the
//! first instance of a run first runs and appended to by a restarted
//! instance; a relative path resolves against the spec file's directory.

mod common;
use common::*;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::json;
use sluice_nf::harness::Harness;
use sluice_nf::{BuildContext, NetworkFunction, NfId, PortId, Resolver};
use sluice_spec::{ConfigNode, SourceName, SpecError};

/// A resolver for an instance built after `.0` earlier ones crashed.
struct Restarted(u32);

impl Resolver for Restarted {
    fn nf(&self, _: &str) -> Option<NfId> {
        None
    }
    fn port(&self, _: &str) -> Option<PortId> {
        None
    }
    fn input_port(&self, _: &str) -> Option<PortId> {
        None
    }
    fn restarts(&self) -> u32 {
        self.0
    }
}

/// Builds a mirror from `config` as the `restarts + 1`-th instance.
fn build_mirror(config: &ConfigNode, restarts: u32) -> Result<Box<dyn NetworkFunction>, SpecError> {
    (nf_type("mirror").build)(&BuildContext {
        name: "tap".into(),
        config,
        resolver: &Restarted(restarts),
        flow_capacity: FLOW_CAPACITY,
    })
}

fn config(path: &Path) -> ConfigNode {
    ConfigNode::from_json(json!({ "path": path.to_str().unwrap(), "snaplen": 60 }))
}

/// A fresh directory under the system temp dir.
fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mirror-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn frames(n: u16) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| udp("10.0.0.1", 1000 + i, "10.0.0.2", 53))
        .collect()
}

/// Builds an instance, runs `frames` through it and stops it, as the
/// platform runs an instance to its end.
fn run_instance(config: &ConfigNode, restarts: u32, frames: &[Vec<u8>]) {
    let mut nf = build_mirror(config, restarts).unwrap();
    let mut h = Harness::new();
    h.run(nf.as_mut(), frames);
    h.stop(nf.as_mut());
}

/// The records of the capture at `path`: checks the one file header and
/// that the records fill the file exactly; returns the captured bytes.
fn records(path: &Path) -> Vec<Vec<u8>> {
    let b = std::fs::read(path).unwrap();
    assert!(b.len() >= 24, "{} bytes", b.len());
    assert_eq!(&b[..4], &0xa1b2_3c4du32.to_le_bytes(), "magic");
    assert_eq!(&b[16..20], &60u32.to_le_bytes(), "snaplen");
    let mut out = Vec::new();
    let mut off = 24;
    while off < b.len() {
        let cap = u32::from_le_bytes(b[off + 8..off + 12].try_into().unwrap()) as usize;
        assert!(
            off + 16 + cap <= b.len(),
            "record at {off} runs past the end"
        );
        out.push(b[off + 16..off + 16 + cap].to_vec());
        off += 16 + cap;
    }
    out
}

/// `sluice validate` builds every NF: a mirror built (and dropped) without
/// running must leave an existing capture byte for byte as it was and
/// create no file where there is none. (Before, the build truncated the
/// file.)
#[test]
fn building_a_mirror_touches_no_file() {
    let dir = scratch("build");
    let existing = dir.join("old.pcap");
    let old: Vec<u8> = (0..=255u8).cycle().take(5000).collect();
    std::fs::write(&existing, &old).unwrap();
    let before = std::fs::metadata(&existing).unwrap().modified().unwrap();
    for restarts in [0, 1] {
        drop(build_mirror(&config(&existing), restarts).unwrap());
    }
    assert_eq!(std::fs::read(&existing).unwrap(), old);
    assert_eq!(
        std::fs::metadata(&existing).unwrap().modified().unwrap(),
        before
    );

    let absent = dir.join("new.pcap");
    drop(build_mirror(&config(&absent), 0).unwrap());
    assert!(!absent.exists(), "a mirror that never ran created its file");

    // Running it creates the file (header only when no packet came).
    run_instance(&config(&absent), 0, &[]);
    assert_eq!(std::fs::metadata(&absent).unwrap().len(), 24);
    std::fs::remove_dir_all(&dir).ok();
}

/// The build checks what it can without touching the file.
#[test]
fn building_checks_the_path() {
    let dir = scratch("check");
    let err = |p: &Path| build_mirror(&config(p), 0).err().unwrap().to_string();
    let e = err(&dir);
    assert!(e.contains("is a directory"), "{e}");
    let e = err(&dir.join("no-such-dir/x.pcap"));
    assert!(
        e.contains("cannot create") && e.contains("no-such-dir"),
        "{e}"
    );
    std::fs::write(dir.join("file"), b"").unwrap();
    let e = err(&dir.join("file/x.pcap"));
    assert!(e.contains("is not a directory"), "{e}");
    let e = build_mirror(&ConfigNode::from_json(json!({ "path": "" })), 0)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("must not be empty"), "{e}");

    // Permissions (root may write anywhere: not checkable as root).
    let ro = dir.join("ro");
    std::fs::create_dir(&ro).unwrap();
    let root = std::fs::metadata(&ro).unwrap().uid() == 0;
    std::fs::write(ro.join("x.pcap"), b"keep").unwrap();
    std::fs::set_permissions(ro.join("x.pcap"), std::fs::Permissions::from_mode(0o444)).unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    if !root {
        let e = err(&ro.join("y.pcap"));
        assert!(e.contains("is not writable"), "{e}");
        let e = err(&ro.join("x.pcap"));
        assert!(e.contains("cannot write"), "{e}");
    }
    assert_eq!(std::fs::read(ro.join("x.pcap")).unwrap(), b"keep");
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::remove_dir_all(&dir).ok();
}

/// The first instance of a run truncates whatever was at the path; a
/// restarted instance appends its records under the first one's header,
/// so the file holds every instance's records. (Before, each instance
/// truncated the file at its build and only the last one's records were
/// left.)
#[test]
fn a_restarted_instance_appends() {
    let dir = scratch("restart");
    let path = dir.join("cap.pcap");
    std::fs::write(&path, vec![0xee; 300]).unwrap();
    let cfg = config(&path);
    let f = frames(5);
    run_instance(&cfg, 0, &f[..2]);
    assert_eq!(records(&path), f[..2]);
    run_instance(&cfg, 1, &f[2..4]);
    run_instance(&cfg, 2, &f[4..]);
    assert_eq!(records(&path), f);

    // A restart finding no file (the first instance died before it first
    // ran) starts one, header included.
    std::fs::remove_file(&path).unwrap();
    run_instance(&cfg, 1, &f[..1]);
    assert_eq!(records(&path), f[..1]);
    // One finding something that is not this mirror's capture (another
    // header) starts the file anew rather than append to it.
    std::fs::write(&path, vec![0xee; 300]).unwrap();
    run_instance(&cfg, 3, &f[..1]);
    assert_eq!(records(&path), f[..1]);
    // A new run's first instance starts anew.
    run_instance(&cfg, 0, &f[1..2]);
    assert_eq!(records(&path), f[1..2]);
    std::fs::remove_dir_all(&dir).ok();
}

/// Records reach the file in whole-record writes: an instance that dies
/// without flushing (its buffered records lost) leaves a file that ends on
/// a record boundary, so the next instance's records append cleanly.
/// (Through a `BufWriter`, a record header could be written out without
/// its data when the buffer filled between the two.)
#[test]
fn a_crashed_instance_leaves_whole_records() {
    let dir = scratch("crash");
    let path = dir.join("cap.pcap");
    let cfg = ConfigNode::from_json(
        json!({ "path": path.to_str().unwrap(), "snaplen": 2000, "buffer_bytes": 4096 }),
    );
    let big: Vec<Vec<u8>> = (0..7u8)
        .map(|i| {
            let mut f = udp("10.0.0.1", 1, "10.0.0.2", 2);
            f.resize(1500, i);
            f
        })
        .collect();
    let mut nf = build_mirror(&cfg, 0).unwrap();
    Harness::new().run(nf.as_mut(), &big);
    std::mem::forget(nf); // dies: no stop, no drop, the buffer is lost
                          // 4096 bytes hold two 1516-byte records: 6 of the 7 were written.
    let b = std::fs::read(&path).unwrap();
    assert_eq!(b.len(), 24 + 6 * 1516);
    let mut nf = build_mirror(&cfg, 1).unwrap();
    let mut h = Harness::new();
    h.run(nf.as_mut(), &big[..1]);
    h.stop(nf.as_mut());
    let want: Vec<Vec<u8>> = big[..6].iter().chain(&big[..1]).cloned().collect();
    let got: Vec<Vec<u8>> = {
        let b = std::fs::read(&path).unwrap();
        let mut out = Vec::new();
        let mut off = 24;
        while off < b.len() {
            let cap = u32::from_le_bytes(b[off + 8..off + 12].try_into().unwrap()) as usize;
            out.push(b[off + 16..off + 16 + cap].to_vec());
            off += 16 + cap;
        }
        assert_eq!(off, b.len());
        out
    };
    assert_eq!(got, want);
    std::fs::remove_dir_all(&dir).ok();
}

/// A relative `path` resolves against the directory of the spec file the
/// config came from, as a `pcap_out` port's does, not against the
/// current directory. (Before, it landed in the current directory.)
#[test]
fn a_relative_path_resolves_against_the_spec_directory() {
    let dir = scratch("relative");
    let name = format!("mirror-relative-{}.pcap", std::process::id());
    let spec = dir.join("spec.yaml");
    let cfg = ConfigNode::from_json(json!({ "path": name, "snaplen": 60 }))
        .with_source(SourceName::from(spec.as_path()));
    let f = frames(3);
    run_instance(&cfg, 0, &f);
    assert_eq!(records(&dir.join(&name)), f);
    assert!(
        !Path::new(&name).exists(),
        "written to the current directory"
    );

    // The error for a missing directory names the resolved path.
    let cfg = ConfigNode::from_json(json!({ "path": "sub/x.pcap" }))
        .with_source(SourceName::from(spec.as_path()));
    let e = build_mirror(&cfg, 0).err().unwrap().to_string();
    assert!(e.contains(&dir.join("sub").display().to_string()), "{e}");
    assert!(e.contains("spec file's directory"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}
