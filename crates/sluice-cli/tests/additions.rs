//! `POST /v1/spec/additions` and `sluice add` against the real daemon: an
//! NF with its chain and port joins a running platform and carries
//! traffic; a taken name is a 409 naming its field, an addition that
//! would make the spec invalid is a 422 located in the addition, a
//! `settings` block is not an addition, a stale version is a 409, a dry
//! run changes nothing, and none of the refusals changes anything.

mod daemon_util;

use std::time::{Duration, Instant};

use daemon_util::{inline_spec, root, Daemon, Resp};
use serde_json::{json, Value};

fn post(d: &Daemon, body: Value) -> Resp {
    d.req(
        "POST",
        "/v1/spec/additions",
        Some(body.to_string().into_bytes()),
    )
}

/// A second generator, an NF and the chain between them and `out`.
const SECOND: &str = "ports:\n  - { name: gen2, kind: generator, flows: 4, protocol: udp, size: 64, rate_pps: 2000 }\n\
                      nfs:\n  - { name: f2, type: forwarder }\n\
                      chains:\n  - { name: second, from: gen2, nfs: [f2], to: out }\n";

fn nf_packets(d: &Daemon, name: &str) -> u64 {
    let s = d.get("/v1/stats");
    s["nfs"]
        .as_array()
        .and_then(|v| v.iter().find(|n| n["name"] == name))
        .and_then(|n| n["packets"].as_u64())
        .unwrap_or(0)
}

fn assert_refused(r: &Resp, status: u16, code: &str, field: Option<&str>) {
    assert_eq!(r.status, status, "{r}");
    let e = &r.json()["error"];
    assert_eq!(e["code"], code, "{r}");
    if let Some(f) = field {
        assert_eq!(e["field"], f, "{r}");
    }
}

#[test]
fn an_addition_joins_a_running_platform_and_refusals_change_nothing() {
    let d = Daemon::start();
    d.apply(&inline_spec(1000, &["fwd"]), &root().join("base.yaml"));
    d.wait_traffic(20);
    let v1 = d.get("/v1/spec");
    let version = v1["resource_version"].as_u64().unwrap();

    // Refusals first: each leaves the desired state as it was.
    let taken = "nfs:\n  - { name: x1, type: forwarder }\n  - { name: main, type: forwarder }\n";
    let r = post(&d, json!({ "spec": taken }));
    assert_refused(&r, 409, "already_exists", Some("nfs[1].name"));
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("chain main"),
        "{r}"
    );

    let broken = "nfs:\n  - { name: f9, type: forwarder }\n\
                  chains:\n  - { name: c9, from: gen, nfs: [f9], to: nowhere }\n";
    let r = post(&d, json!({ "spec": broken, "source": "add.yaml" }));
    assert_refused(&r, 422, "invalid_spec", Some("chains[0].to"));
    assert_eq!(r.json()["error"]["line"], 4, "located in the addition: {r}");
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("add.yaml:4:"),
        "{r}"
    );

    // Valid, but a port that cannot open: the apply fails, and the
    // objects appended to the desired state come off again.
    let unopenable = "ports:\n  - { name: e9, kind: af_packet, interface: nonexist9 }\n\
                      nfs:\n  - { name: f8, type: forwarder }\n\
                      chains:\n  - { name: c8, from: e9, nfs: [f8], to: out }\n";
    let r = post(&d, json!({ "spec": unopenable }));
    assert_refused(&r, 422, "setup_failed", None);
    assert_eq!(d.get("/v1/spec"), v1, "a failed apply changed the spec");

    let r = post(
        &d,
        json!({ "spec": "settings: { buffers: 8192 }\nnfs: []\n" }),
    );
    assert_refused(&r, 422, "invalid_spec", None);
    let r = post(&d, json!({ "spec": "{}" }));
    assert_refused(&r, 422, "invalid_spec", None);
    let r = post(
        &d,
        json!({ "spec": SECOND, "resource_version": version + 7 }),
    );
    assert_refused(&r, 409, "conflict", None);
    let r = post(&d, json!({ "spec": SECOND, "extra": 1 }));
    assert_eq!(r.status, 400, "{r}");

    let r = post(&d, json!({ "spec": SECOND, "dry_run": true }));
    assert_eq!(r.status, 200, "{r}");
    assert_eq!(r.json()["diff"]["chains"]["added"][0], "second", "{r}");
    assert_eq!(
        d.get("/v1/spec"),
        v1,
        "no refusal and no dry run changed anything"
    );

    // The addition itself, over the version just read.
    let r = post(&d, json!({ "spec": SECOND, "resource_version": version }));
    assert_eq!(r.status, 200, "{r}");
    let a = r.json();
    assert_eq!(a["resource_version"], version + 1, "{a:#}");
    assert_eq!(a["diff"]["ports"]["added"][0], "gen2", "{a:#}");
    assert_eq!(a["diff"]["nfs"]["added"][0], "f2", "{a:#}");
    assert_eq!(a["diff"]["chains"]["added"][0], "second", "{a:#}");
    assert!(
        a["diff"]["nfs"]["changed"]
            .as_array()
            .is_none_or(|c| c.is_empty()),
        "{a:#}"
    );
    let spec = d.get("/v1/spec")["spec"].clone();
    let names = |k: &str| -> Vec<String> {
        spec[k]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names("nfs"), ["fwd", "f2"]);
    assert_eq!(names("chains"), ["main", "second"]);
    assert_eq!(names("ports"), ["gen", "out", "gen2"]);

    // Both chains carry traffic: the old one was not disturbed.
    let (old, deadline) = (
        nf_packets(&d, "fwd"),
        Instant::now() + Duration::from_secs(20),
    );
    while nf_packets(&d, "f2") == 0 || nf_packets(&d, "fwd") <= old {
        assert!(Instant::now() < deadline, "{:#}", d.get("/v1/stats"));
        std::thread::sleep(Duration::from_millis(50));
    }

    // The same again is a name taken.
    let r = post(&d, json!({ "spec": SECOND }));
    assert_refused(&r, 409, "already_exists", Some("ports[0].name"));

    // `sluice add -f FILE`, which sends only the file. Additions go after
    // what exists, so a chain behind a catch-all of its port is refused.
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("third.yaml");
    let third = |from: &str, port: &str| {
        format!(
            "{port}nfs:\n  - {{ name: f3, type: forwarder }}\nchains:\n  - {{ name: third, from: {from}, match: {{ proto: udp }}, nfs: [f3], to: out }}\n"
        )
    };
    std::fs::write(&f, third("gen2", "")).unwrap();
    let add = || d.cli().arg("add").arg("-f").arg(&f).output().unwrap();
    let shadowed = add();
    assert!(!shadowed.status.success());
    assert!(
        String::from_utf8_lossy(&shadowed.stderr).contains("would never see traffic"),
        "{shadowed:?}"
    );
    let gen3 = "ports:\n  - { name: gen3, kind: generator, flows: 2, protocol: udp, size: 64, rate_pps: 1000 }\n";
    std::fs::write(&f, third("gen3", gen3)).unwrap();
    let out = add();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("third") && text.contains("added in"),
        "{text}"
    );
    assert_eq!(d.get("/v1/spec")["resource_version"], version + 2);
    let again = add();
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("exists already"),
        "{again:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while nf_packets(&d, "f3") == 0 {
        assert!(Instant::now() < deadline, "{:#}", d.get("/v1/stats"));
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Additions are journaled, not written whole: a restarted daemon runs the
/// whole spec with every addition replayed on top, at the same version,
/// and the next change goes on from there.
#[test]
fn a_restarted_daemon_replays_the_journaled_additions() {
    let dir = tempfile::tempdir().unwrap();
    let mut d = Daemon::start_in(dir.path(), Default::default());
    d.apply(&inline_spec(1000, &["fwd"]), &root().join("base.yaml"));
    for i in 0..3 {
        let add = format!(
            "ports:\n  - {{ name: g{i}, kind: generator, flows: 2, rate_pps: 500 }}\nnfs:\n  - {{ name: f{i}, type: forwarder }}\nchains:\n  - {{ name: c{i}, from: g{i}, nfs: [f{i}], to: out }}\n"
        );
        let r = post(&d, json!({ "spec": add, "source": "add.yaml" }));
        assert_eq!(r.status, 200, "{r}");
        if i == 1 {
            // Valid, but it cannot start: its journal line, written
            // before the apply, is taken back before the refusal.
            let bad = "ports:\n  - { name: e9, kind: af_packet, interface: nonexist9 }\n\
                       nfs:\n  - { name: f9, type: forwarder }\n\
                       chains:\n  - { name: c9, from: e9, nfs: [f9], to: out }\n";
            let r = post(&d, json!({ "spec": bad, "source": "bad.yaml" }));
            assert_refused(&r, 422, "setup_failed", None);
        }
    }
    let journal = std::fs::read_to_string(d.state_dir.join("desired.journal")).unwrap();
    let lines: Vec<&str> = journal.lines().collect();
    assert_eq!(lines.len(), 5, "{journal}");
    assert!(lines[2].contains("nonexist9"), "{journal}");
    assert_eq!(lines[3], r#"{"revoked":4}"#, "{journal}");
    assert!(lines[4].contains(r#""resource_version":4"#), "{journal}");
    let before = d.get("/v1/spec");
    assert!(d.stop(10).is_some_and(|s| s.success()));

    // The failed addition is not replayed (the restart would fail on its
    // port and set the whole state aside).
    let d = Daemon::start_in(dir.path(), Default::default());
    assert_eq!(d.get("/v1/spec"), before);
    let deadline = Instant::now() + Duration::from_secs(20);
    while nf_packets(&d, "f2") == 0 {
        assert!(
            Instant::now() < deadline,
            "the replayed chain carries nothing"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // A whole change writes everything and starts the journal afresh.
    let version = before["resource_version"].as_u64().unwrap();
    let r = d.req("DELETE", "/v1/chains/c0", None);
    assert_eq!(r.status, 200, "{r}");
    assert_eq!(d.get("/v1/spec")["resource_version"], version + 1);
    assert!(!d.state_dir.join("desired.journal").exists());
}
