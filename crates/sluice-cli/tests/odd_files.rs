//! `sluice validate` given a FIFO, a device or a huge file as the spec or as
//! a file the spec names refuses it at once (exit 2, a message saying what
//! the file is), instead of blocking for ever or reading gigabytes.

mod common;
use common::*;

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `sluice validate SPEC`, killing it and failing the test if it has
/// not finished within a few seconds.
fn validate_promptly(spec: &Path) -> Output {
    let mut child = sluice()
        .args(["validate", spec.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("sluice validate {} hung", spec.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn mkfifo(path: &Path) {
    let ok = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "mkfifo {} failed", path.display());
}

fn refused(spec: &Path, words: &str) {
    let out = validate_promptly(spec);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}: {err}", spec.display());
    assert!(
        err.contains(words),
        "{}: want '{words}' in: {err}",
        spec.display()
    );
}

#[test]
fn the_spec_must_be_a_regular_file_of_at_most_16_mib() {
    refused(
        Path::new("/dev/zero"),
        "/dev/zero: cannot read spec file: it is a character device, not a regular file",
    );
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("spec.yaml");
    mkfifo(&fifo);
    refused(
        &fifo,
        "cannot read spec file: it is a FIFO, not a regular file",
    );
    let big = dir.path().join("big.yaml");
    std::fs::File::create(&big)
        .unwrap()
        .set_len((16 << 20) + 1)
        .unwrap();
    refused(&big, "cannot read spec file: it is larger than 16 MiB");
}

#[test]
fn files_the_spec_names_must_be_regular_files() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    let fifo = fifo.to_str().unwrap();
    let router = |routes: &str| {
        format!(
            "ports:\n  - {{ name: gen, kind: generator }}\n  - {{ name: out, kind: sink }}\n\
             nfs:\n  - name: r\n    type: router\n    config:\n      \
             interfaces: [{{ port: out, mac: \"02:00:00:00:00:01\", addresses: [10.0.0.1/24] }}]\n      \
             routes_file: {routes}\n\
             chains:\n  - {{ name: c, from: gen, nfs: [r], to: out }}\n"
        )
    };
    let ids = |rules: &str| {
        format!(
            "ports:\n  - {{ name: gen, kind: generator }}\n  - {{ name: out, kind: sink }}\n\
             nfs:\n  - {{ name: i, type: ids, config: {{ rules_file: {rules} }} }}\n\
             chains:\n  - {{ name: c, from: gen, nfs: [i], to: out }}\n"
        )
    };
    let pcap = |path: &str| {
        format!(
            "ports:\n  - {{ name: p, kind: pcap_in, path: {path} }}\n  - {{ name: out, kind: sink }}\n\
             chains:\n  - {{ name: c, from: p, to: out }}\n"
        )
    };
    for (text, line, words) in [
        (router(fifo), ":9:", "it is a FIFO, not a regular file"),
        (router("/dev/zero"), ":9:", "it is a character device"),
        (ids(fifo), ":5:", "it is a FIFO, not a regular file"),
        (ids("/dev/zero"), ":5:", "it is a character device"),
        (pcap(fifo), ":2:", "is not a regular file"),
        (pcap("/dev/zero"), ":2:", "is not a regular file"),
    ] {
        let spec = dir.path().join("spec.yaml");
        std::fs::write(&spec, &text).unwrap();
        refused(&spec, words);
        refused(&spec, &format!("spec.yaml{line}"));
    }
}
