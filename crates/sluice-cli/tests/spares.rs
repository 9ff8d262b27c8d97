//! Spares against the real daemon: after a change that started a process
//! NF, its worker's template keeps a process ready for the slot the next
//! NF will take, like the last NF (confined already when its type's build
//! reads neither its name nor its restart count, as a forwarder's; bare
//! otherwise, as a mirror's). The next such NF added through the API runs
//! in that very process (its pid is the spare's), confined as a freshly
//! forked one is, carries traffic, and is counted as a spare's start; a
//! new spare waits for the NF after it. With `shells: false` no spare is
//! kept.

mod common;
mod daemon_util;

use std::time::{Duration, Instant};

use common::descendants_named;
use daemon_util::{root, Daemon};
use serde_json::{json, Value};

const SPEC: &str = "settings:\n  buffers: 4096\n  shells: SHELLS\nports:\n  - { name: gen, kind: generator, flows: 8, protocol: udp, size: 64, rate_pps: 2000 }\n  - { name: out, kind: sink }\n\
                    nfs:\n  - { name: a, type: forwarder, isolation: process }\n\
                    chains:\n  - { name: main, from: gen, match: { proto: udp }, nfs: [a], to: out }\n";

/// NF `name` with a chain of its own from `gen` (TCP to `port`: idle)
/// or, when `feed`, from a generator of its own, so it carries packets.
fn addition(name: &str, port: u16, feed: bool) -> String {
    let from = if feed {
        format!("g{name}")
    } else {
        "gen".into()
    };
    let ports = if feed {
        format!("ports:\n  - {{ name: g{name}, kind: generator, flows: 2, protocol: udp, size: 64, rate_pps: 1000 }}\n")
    } else {
        String::new()
    };
    let matching = if feed {
        String::new()
    } else {
        format!("match: {{ proto: tcp, dst_port: {port} }}, ")
    };
    format!(
        "{ports}nfs:\n  - {{ name: {name}, type: forwarder, isolation: process }}\n\
         chains:\n  - {{ name: c{name}, from: {from}, {matching}nfs: [{name}], to: out }}\n"
    )
}

fn add(d: &Daemon, text: &str) {
    let r = d.req(
        "POST",
        "/v1/spec/additions",
        Some(json!({ "spec": text }).to_string().into_bytes()),
    );
    assert_eq!(r.status, 200, "{r}");
}

/// The one spare process under the daemon that is not one of `gone`
/// (replaced or taken: they may linger a moment), once there is one.
fn the_spare(d: &Daemon, gone: &[u32]) -> u32 {
    let t = Instant::now();
    loop {
        let found: Vec<u32> = descendants_named(d.pid(), "sluice-spare")
            .into_iter()
            .filter(|p| !gone.contains(p))
            .filter(|p| status_field(*p, "State").starts_with('S'))
            .collect();
        if found.len() == 1 {
            return found[0];
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "spares under the daemon: {found:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn nf(d: &Daemon, name: &str) -> Value {
    let s = d.get("/v1/stats");
    s["nfs"]
        .as_array()
        .and_then(|v| v.iter().find(|n| n["name"] == name).cloned())
        .unwrap_or_else(|| panic!("no NF {name} in {s:#}"))
}

fn pid_of(d: &Daemon, name: &str) -> u32 {
    let all: Value = d.get("/v1/instances");
    all.as_array()
        .and_then(|v| {
            v.iter()
                .find(|i| i["nf"] == name && i["state"] == "running")
        })
        .and_then(|i| i["pid"].as_u64())
        .unwrap_or_else(|| panic!("no running instance of {name}: {all:#}")) as u32
}

/// A field's value of `/proc/PID/status` (empty once it is gone).
fn status_field(pid: u32, field: &str) -> String {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

#[test]
fn the_next_nf_runs_in_the_spare_its_template_made_ahead() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start();
    d.apply(&SPEC.replace("SHELLS", "true"), &root().join("spares.yaml"));
    d.wait_traffic(20);
    assert_eq!(nf(&d, "a")["spare_starts"], 0, "the first NF was forked");
    // The spare made after `a` is like it, and `a` came from a file: it
    // serves the next NF of that file (relative paths resolve there).
    // NFs added through the API come from `<api>`; b is forked.
    let first = the_spare(&d, &[]);
    add(&d, &addition("b", 9, false));

    let spare = the_spare(&d, &[first]);
    // Like b, a forwarder, whose build reads neither its name nor its
    // restart count: confined already while it waits.
    assert_eq!(status_field(spare, "Seccomp"), "2", "confined ahead");
    add(&d, &addition("c", 10, true));
    let c = pid_of(&d, "c");
    assert_eq!(c, spare, "c runs in the spare made before it was asked for");
    let stats = nf(&d, "c");
    assert_eq!(stats["spare_starts"], 1, "{stats:#}");
    assert_eq!(stats["starts"], 1, "{stats:#}");
    assert_eq!(stats["shell_starts"], 0, "counted apart: {stats:#}");
    // Confined as a fork of the template is: same allow-list, no new
    // privileges, the same kind of identity as the first NF's.
    let a = pid_of(&d, "a");
    for field in ["Seccomp", "NoNewPrivs", "CapEff"] {
        assert_eq!(status_field(c, field), status_field(a, field), "{field}");
    }
    assert_eq!(status_field(c, "Seccomp"), "2");
    let comm = std::fs::read_to_string(format!("/proc/{c}/comm")).unwrap();
    assert_eq!(comm.trim(), "nf:c");
    // It carries its chain's packets.
    let t = Instant::now();
    while nf(&d, "c")["packets"].as_u64().unwrap_or(0) < 50 {
        assert!(t.elapsed() < Duration::from_secs(10), "c carried nothing");
        std::thread::sleep(Duration::from_millis(50));
    }

    // A mirror's build asks whether it restarts (it appends then): its
    // spare is bare, handed the whole request at the start.
    let mirror = |name: &str, port: u16| {
        let path = dir.path().join(format!("{name}.pcap"));
        format!(
            "nfs:\n  - {{ name: {name}, type: mirror, isolation: process, config: {{ path: {} }} }}\n\
             chains:\n  - {{ name: c{name}, from: gen, match: {{ proto: tcp, dst_port: {port} }}, nfs: [{name}], to: out }}\n",
            path.display()
        )
    };
    let next = the_spare(&d, &[first, spare]);
    add(&d, &mirror("m1", 77));
    let bare = the_spare(&d, &[first, spare, next]);
    assert_eq!(status_field(bare, "Seccomp"), "0", "bare until its start");
    add(&d, &mirror("m2", 78));
    assert_eq!(pid_of(&d, "m2"), bare);
    assert_eq!(nf(&d, "m2")["spare_starts"], 1);
    assert!(dir.path().join("m2.pcap").exists(), "m2 opened its file");

    // Slots given back go out first, so a spare may wait in another slot
    // than the next NF would take: the next NF takes the spare's.
    for path in ["/v1/chains/cc", "/v1/nfs/c"] {
        let r = d.req("DELETE", path, None);
        assert_eq!(r.status, 200, "{r}");
    }
    let kept = the_spare(&d, &[first, spare, next, bare]);
    add(&d, &addition("f", 12, false));
    assert_eq!(pid_of(&d, "f"), kept);
    assert_eq!(nf(&d, "f")["spare_starts"], 1);
    // Spares replaced or made like another NF were killed on purpose:
    // nothing says a spare ended.
    let log = d.log_text();
    assert!(!log.contains("spare for slot"), "{log}");
    // Nothing is left holding a slot.
    let t = Instant::now();
    loop {
        let slots = &d.get("/v1/stats")["nf_slots"];
        if slots["stopping"] == 0 && slots["in_use"] == 5 {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "{slots:#}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn without_shells_no_spare_is_kept() {
    let d = Daemon::start();
    d.apply(
        &SPEC.replace("SHELLS", "false"),
        &root().join("spares.yaml"),
    );
    d.wait_traffic(20);
    add(&d, &addition("b", 9, false));
    std::thread::sleep(Duration::from_millis(300));
    assert!(descendants_named(d.pid(), "sluice-spare").is_empty());
    assert_eq!(nf(&d, "b")["spare_starts"], 0);
}
