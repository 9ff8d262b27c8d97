//! `sluice checkpoint` and `sluice restore` against a running daemon: a
//! monitor counts a finished run of 64 flows; its state is saved, the NF
//! is replaced by a fresh (empty) instance, as a process and then inline,
//! and the checkpoint brings every flow's counters back, byte for byte.
//! Then the bad files: truncated, corrupt, of another type, of another
//! state version, of another shape, with a state the NF refuses; each is
//! refused with a clear error and the NF keeps its state.

mod daemon_util;

use std::path::{Path, PathBuf};

use daemon_util::{Daemon, Resp};
use sluice_nf::checkpoint::{Checkpoint, Part};
use sluice_nf::{StateReader, StateWriter};

const COUNT: u64 = 20_000;

fn spec(monitor: &str) -> String {
    format!(
        "ports:\n  - {{ name: gen, kind: generator, flows: 64, protocol: udp, size: 64, rate_pps: 400000, count: {COUNT} }}\n  - {{ name: out, kind: sink }}\nnfs:\n  - {{ name: fwd, type: forwarder }}\n{monitor}chains:\n  - {{ name: main, from: gen, nfs: [fwd{}], to: out }}\n",
        if monitor.is_empty() { "" } else { ", mon" }
    )
}

fn apply(d: &Daemon, dir: &Path, monitor: &str) {
    d.apply(&spec(monitor), &dir.join("spec.yaml"));
}

fn monitor(isolation: &str) -> String {
    format!("  - {{ name: mon, type: monitor, isolation: {isolation} }}\n")
}

/// `sluice checkpoint mon -o FILE`, read back.
fn checkpoint(d: &Daemon, file: &Path) -> Checkpoint {
    let out = d
        .cli()
        .args(["checkpoint", "mon", "-o"])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("checkpoint of mon (monitor state v1)"),
        "{text}"
    );
    Checkpoint::decode(&std::fs::read(file).unwrap()).unwrap()
}

/// The monitor's state: (flow id, packets, bytes) of each counted flow.
fn flows(c: &Checkpoint) -> Vec<(u32, u64, u64)> {
    assert_eq!(c.parts.len(), 1, "one worker, one instance");
    let mut r = StateReader::new(&c.parts[0].state);
    r.u64().unwrap();
    let n = r.len(20).unwrap();
    let v = (0..n)
        .map(|_| (r.u32().unwrap(), r.u64().unwrap(), r.u64().unwrap()))
        .collect();
    r.finish().unwrap();
    v
}

fn restore(d: &Daemon, file: &Path) -> (bool, String, String) {
    let out = d.cli().args(["restore", "mon"]).arg(file).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn wait_done(d: &Daemon) {
    let t = std::time::Instant::now();
    while d.packets_out() < COUNT {
        assert!(t.elapsed().as_secs() < 60, "{:#}", d.get("/v1/stats"));
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn a_checkpoint_brings_every_flow_back_into_a_fresh_instance_process_or_inline() {
    let d = Daemon::start();
    let dir = tempfile::tempdir().unwrap();
    apply(&d, dir.path(), &monitor("process"));
    wait_done(&d);
    let saved = checkpoint(&d, &dir.path().join("mon.ck"));
    let counted = flows(&saved);
    assert_eq!(counted.len(), 64, "every flow: {counted:?}");
    assert_eq!(counted.iter().map(|f| f.1).sum::<u64>(), COUNT);

    for isolation in ["process", "inline"] {
        // A fresh instance: removed, then added back empty.
        apply(&d, dir.path(), "");
        apply(&d, dir.path(), &monitor(isolation));
        let empty = checkpoint(&d, &dir.path().join("empty.ck"));
        assert!(flows(&empty).is_empty(), "{isolation}: a fresh monitor");
        let (ok, out, err) = restore(&d, &dir.path().join("mon.ck"));
        assert!(ok, "{isolation}: {err}");
        assert!(out.contains("mon restored: 1 instance(s)"), "{out}");
        let back = checkpoint(&d, &dir.path().join("back.ck"));
        assert_eq!(back.parts[0].state, saved.parts[0].state, "{isolation}");
    }
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn post(d: &Daemon, bytes: Vec<u8>) -> Resp {
    d.req("POST", "/v1/nfs/mon/restore", Some(bytes))
}

#[test]
fn bad_checkpoints_are_refused_and_the_nf_keeps_its_state() {
    let d = Daemon::start();
    let dir = tempfile::tempdir().unwrap();
    apply(&d, dir.path(), &monitor("process"));
    wait_done(&d);
    let good_path = dir.path().join("mon.ck");
    let good = checkpoint(&d, &good_path);
    let bytes = std::fs::read(&good_path).unwrap();

    // Truncated and corrupt: the CLI says so before sending, the API
    // answers 400.
    let cut = &bytes[..bytes.len() - 7];
    let (ok, _, err) = restore(&d, &write(dir.path(), "cut.ck", cut));
    assert!(!ok && err.contains("truncated"), "{err}");
    let r = post(&d, cut.to_vec());
    assert_eq!(r.status, 400, "{r}");
    assert!(r.text().contains("truncated"), "{r}");
    let mut flipped = bytes.clone();
    flipped[40] ^= 0x10;
    let (ok, _, err) = restore(&d, &write(dir.path(), "bad.ck", &flipped));
    assert!(!ok && err.contains("corrupt"), "{err}");
    assert_eq!(post(&d, flipped).status, 400);
    let r = post(&d, b"hello".to_vec());
    assert_eq!(r.status, 400);
    assert!(r.text().contains("not a sluice checkpoint"), "{r}");

    // Sealed files that do not fit: 422 with the reason.
    let refused = |c: Checkpoint, why: &str| {
        let (ok, _, err) = restore(&d, &write(dir.path(), "x.ck", &c.encode()));
        assert!(!ok && err.contains(why), "{why}: {err}");
        let r = post(&d, c.encode());
        assert_eq!(r.status, 422, "{why}: {r}");
    };
    let mut other = good.clone();
    other.nf_type = "firewall".into();
    refused(other, "holds a firewall NF's state, not a monitor's");
    let mut newer = good.clone();
    newer.state_version = 2;
    refused(
        newer,
        "holds monitor state version 2; this monitor reads version 1",
    );
    let mut two = good.clone();
    two.parts.push(good.parts[0].clone());
    refused(two, "has 2 instance(s) but the NF runs 1");
    let mut w = StateWriter::new();
    w.u64(0);
    w.len(1);
    w.u32(u32::MAX);
    w.u64(1);
    w.u64(64);
    let mut beyond = good.clone();
    beyond.parts = vec![Part {
        instance: "mon".into(),
        state: w.into_bytes(),
    }];
    refused(beyond, "beyond this monitor's");

    // An NF without state, and one that does not exist.
    let r = d.req("GET", "/v1/nfs/nope/checkpoint", None);
    assert_eq!(r.status, 404, "{r}");

    // After all that, the monitor still holds what it counted.
    let after = checkpoint(&d, &dir.path().join("after.ck"));
    assert_eq!(after.parts[0].state, good.parts[0].state);
}

#[test]
fn an_nf_without_state_or_per_flow_is_not_checkpointed() {
    let d = Daemon::start();
    let dir = tempfile::tempdir().unwrap();
    let text = "ports:\n  - { name: gen, kind: generator, flows: 4, protocol: udp, size: 64, rate_pps: 1000 }\n  - { name: out, kind: sink }\nnfs:\n  - { name: fwd, type: forwarder, isolation: process }\n  - { name: mon, type: monitor, isolation: inline, replicas: 2, steer: per_flow }\nchains:\n  - { name: main, from: gen, nfs: [fwd, mon], to: out }\n";
    d.apply(text, &dir.path().join("spec.yaml"));
    let r = d.req("GET", "/v1/nfs/fwd/checkpoint", None);
    assert_eq!(r.status, 409, "{r}");
    assert!(r.text().contains("keeps no state to checkpoint"), "{r}");
    let r = d.req("GET", "/v1/nfs/mon/checkpoint", None);
    assert_eq!(r.status, 409, "{r}");
    assert!(r.text().contains("one instance per flow"), "{r}");
}

/// An NF of several instances (two replicas): one part per instance, and a
/// file with one bad part is refused before any instance takes its own.
#[test]
fn a_bad_part_is_refused_before_any_instance_changes() {
    let d = Daemon::start();
    let dir = tempfile::tempdir().unwrap();
    apply(
        &d,
        dir.path(),
        "  - { name: mon, type: monitor, isolation: process, replicas: 2 }\n",
    );
    wait_done(&d);
    let out = d
        .cli()
        .args(["checkpoint", "mon", "-o"])
        .arg(dir.path().join("two.ck"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let good = Checkpoint::decode(&std::fs::read(dir.path().join("two.ck")).unwrap()).unwrap();
    assert_eq!(good.parts.len(), 2, "one part per replica");
    assert!(
        good.parts.iter().all(|p| p.state.len() > 12),
        "both counted flows"
    );
    let mut bad = good.clone();
    bad.parts[1].state.truncate(5);
    let r = post(&d, bad.encode());
    assert_eq!(r.status, 422, "{r}");
    assert!(r.text().contains("part 1"), "{r}");
    let r = d.req("GET", "/v1/nfs/mon/checkpoint", None);
    assert_eq!(r.status, 200);
    assert_eq!(
        Checkpoint::decode(&r.body).unwrap().parts,
        good.parts,
        "untouched"
    );
    let r = post(&d, good.encode());
    assert_eq!(r.status, 200, "{r}");
}
