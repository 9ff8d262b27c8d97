//! Reading the spec file: only regular files, and at most
//! `MAX_SPEC_BYTES`, so a FIFO, a device or a runaway file is a prompt,
//! clear error instead of a hang or gigabytes of memory.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use sluice_spec::{load, SpecError, MAX_SPEC_BYTES};

/// Loads `path` on another thread; fails the test if that takes more than
/// a few seconds (reading a FIFO nobody writes to blocks for ever).
fn load_promptly(path: &Path) -> Result<sluice_spec::Spec, SpecError> {
    let (tx, rx) = mpsc::channel();
    let p = path.to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(load(&p, &["monitor"]));
    });
    rx.recv_timeout(Duration::from_secs(10))
        .unwrap_or_else(|_| panic!("loading {} hung", path.display()))
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sluice-spec-file-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn mkfifo(path: &Path) {
    let ok = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(ok, "mkfifo {} failed", path.display());
}

#[test]
fn a_fifo_is_refused_without_waiting_for_a_writer() {
    let dir = temp_dir("fifo");
    let fifo = dir.join("spec.yaml");
    mkfifo(&fifo);
    let e = load_promptly(&fifo).unwrap_err();
    assert_eq!(e.file, fifo.display().to_string());
    assert!(
        e.message
            .contains("cannot read spec file: it is a FIFO, not a regular file"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_device_is_refused_before_reading_it() {
    // /dev/zero would otherwise be read until memory runs out.
    let e = load_promptly(Path::new("/dev/zero")).unwrap_err();
    assert!(
        e.message
            .contains("it is a character device, not a regular file"),
        "{e}"
    );
}

#[test]
fn a_directory_is_refused() {
    let dir = temp_dir("dir");
    let e = load_promptly(&dir).unwrap_err();
    assert!(e.message.contains("it is a directory"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_file_above_the_limit_is_refused_with_the_limit() {
    assert_eq!(
        MAX_SPEC_BYTES,
        16 << 20,
        "docs/spec-reference.md says 16 MiB"
    );
    let dir = temp_dir("big");
    let path = dir.join("spec.yaml");
    // Sparse: the size is what counts, not the blocks.
    let f = std::fs::File::create(&path).unwrap();
    f.set_len(MAX_SPEC_BYTES + 1).unwrap();
    let e = load_promptly(&path).unwrap_err();
    assert!(
        e.message
            .contains("cannot read spec file: it is larger than 16 MiB"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_file_at_the_limit_is_read() {
    // Exactly the limit is allowed: the spec is parsed (and here refused
    // for its content, not its size).
    let dir = temp_dir("edge");
    let path = dir.join("spec.yaml");
    let mut text = "# padding\n".repeat((MAX_SPEC_BYTES as usize) / 10);
    text.truncate(MAX_SPEC_BYTES as usize - 1);
    text.push('\n');
    std::fs::write(&path, &text).unwrap();
    let e = load_promptly(&path).unwrap_err();
    assert!(!e.message.contains("larger than"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
