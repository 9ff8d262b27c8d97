//! The client commands end to end: `sluice apply -f`, `get` (table,
//! `-o json|yaml|wide`), `delete`, `ps`, `stats -o json` (the keys of
//! `sluice run --json`) and `logs`, against a real daemon running the
//! quickstart with its NFs as processes.

mod daemon_util;

use std::collections::BTreeSet;
use std::process::Output;

use daemon_util::{quickstart, Daemon};
use serde_json::Value;

fn run(d: &Daemon, args: &[&str]) -> Output {
    d.cli().args(args).output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs a command that must succeed; returns its standard output.
fn ok(d: &Daemon, args: &[&str]) -> String {
    let o = run(d, args);
    assert!(
        o.status.success(),
        "sluice {}: {:?}\nstdout: {}\nstderr: {}",
        args.join(" "),
        o.status,
        stdout(&o),
        stderr(&o)
    );
    stdout(&o)
}

/// Runs a command that must succeed and print JSON.
fn ok_json(d: &Daemon, args: &[&str]) -> Value {
    let text = ok(d, args);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("sluice {args:?}: {e}: {text}"))
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .cloned()
        .collect()
}

/// The header row of a table and the row starting with `first`.
fn row<'a>(table: &'a str, first: &str) -> (Vec<&'a str>, Vec<&'a str>) {
    let mut lines = table.lines();
    let header = lines
        .next()
        .unwrap_or_default()
        .split("   ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    let r = lines
        .find(|l| l.split_whitespace().next() == Some(first))
        .unwrap_or_else(|| panic!("no row {first} in\n{table}"))
        .split("   ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    (header, r)
}

#[test]
fn apply_get_ps_stats_logs_and_delete_through_the_cli() {
    let d = Daemon::start();
    let (text, path) = quickstart();
    let spec = path.to_str().unwrap();

    // apply: a dry run changes nothing; the real one says what it did.
    let out = ok(&d, &["apply", "-f", spec, "--dry-run"]);
    assert!(
        out.contains("nf/acl added") && out.contains("(dry run)"),
        "{out}"
    );
    assert_eq!(d.get("/v1/spec")["resource_version"], 0);
    let out = ok(&d, &["apply", "-f", spec]);
    for l in [
        "port/gen added",
        "port/out added",
        "nf/acl added",
        "nf/mon added",
        "chain/main added",
        "version 1 applied",
    ] {
        assert!(out.contains(l), "`{l}` missing from:\n{out}");
    }
    let out = ok(&d, &["apply", "-f", spec]);
    assert!(out.starts_with("no change"), "{out}");
    let v = ok_json(&d, &["apply", "-f", spec, "-o", "json"]);
    assert_eq!(v["resource_version"], 1);
    d.wait_traffic(20);

    // get: tables, wide tables, JSON and YAML.
    let out = ok(&d, &["get", "nfs"]);
    let (h, r) = row(&out, "acl");
    assert_eq!(
        h,
        ["NAME", "TYPE", "ISOLATION", "PACKETS", "DROPS", "RESTARTS"]
    );
    assert_eq!(&r[..3], ["acl", "acl", "process"]);
    let out = ok(&d, &["get", "nfs", "-o", "wide"]);
    let (h, r) = row(&out, "mon");
    assert_eq!(h.len(), 10, "{out}");
    assert_eq!(&h[6..], ["NS/PKT", "INSTANCES", "SANDBOX", "DOMAIN"]);
    assert_eq!(r[7], "1", "one instance per worker: {out}");
    assert_eq!(
        r[8], "strict",
        "process NFs are sandboxed by default: {out}"
    );
    assert_eq!(r[9], "platform", "{out}");
    let nfs = ok_json(&d, &["get", "nfs", "-o", "json"]);
    let names: Vec<&str> = nfs
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["acl", "mon"]);
    let one = ok_json(&d, &["get", "nf", "acl", "-o", "json"]);
    assert_eq!(one["name"], "acl");
    assert_eq!(one["definition"]["config"]["default"], "accept");
    let yaml = ok(&d, &["get", "nf", "acl", "-o", "yaml"]);
    for (k, v) in [("name", "acl"), ("type", "acl"), ("isolation", "process")] {
        assert!(
            yaml.lines()
                .any(|x| x == format!("{k}: {v}") || x == format!("{k}: \"{v}\"")),
            "`{k}: {v}` missing from the YAML:\n{yaml}"
        );
    }
    assert!(yaml.lines().any(|x| x == "definition:"), "{yaml}");
    assert!(
        serde_json::from_str::<Value>(&yaml).is_err(),
        "-o yaml printed JSON"
    );
    let out = ok(&d, &["get", "chains"]);
    let (_, r) = row(&out, "main");
    assert_eq!(r, ["main", "gen", "acl → mon → out"]);
    let out = ok(&d, &["get", "chains", "-o", "wide"]);
    assert!(out.lines().next().unwrap().ends_with("MATCH"), "{out}");
    let out = ok(&d, &["get", "ports", "-o", "wide"]);
    let (h, r) = row(&out, "gen");
    assert_eq!(h[..4], ["NAME", "KIND", "RX", "TX"]);
    assert!(h.contains(&"RX BYTES"), "{out}");
    assert_eq!(r[1], "generator");
    let o = run(&d, &["get", "nf", "nope"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("no NF named nope"), "{}", stderr(&o));

    // ps: one row per NF instance, the pid of a live process named after
    // the NF.
    let out = ok(&d, &["ps"]);
    for nf in ["acl", "mon"] {
        let (h, r) = row(&out, nf);
        assert_eq!(
            h,
            ["NF", "WORKER", "PID", "CPU", "STATE", "MPPS", "RESTARTS"]
        );
        assert_eq!(r[4], "running", "{out}");
        let comm = std::fs::read_to_string(format!("/proc/{}/comm", r[2])).unwrap_or_default();
        assert_eq!(comm.trim(), format!("nf:{nf}"), "pid {} in\n{out}", r[2]);
    }
    let ps = ok_json(&d, &["ps", "-o", "json"]);
    assert_eq!(ps.as_array().unwrap().len(), 2, "{ps:#}");
    assert!(ps[0]["pid"].as_u64().unwrap() > 0);
    let out = ok(&d, &["ps", "-o", "wide"]);
    assert!(out.lines().next().unwrap().ends_with("PACKETS"), "{out}");

    // stats -o json: the same keys as `sluice run --json`, at every level
    // the report has.
    let live = ok_json(&d, &["stats", "-o", "json"]);
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["run", spec, "--json", "--duration", "0.5"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let batch: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("sluice run --json: {e}: {}", stderr(&o)));
    assert_eq!(keys(&live), keys(&batch), "top-level keys differ");
    for list in ["ports", "nfs", "chains"] {
        assert_eq!(
            keys(&live[list][0]),
            keys(&batch[list][0]),
            "keys of {list}[0] differ"
        );
    }
    assert_eq!(keys(&live["buffers"]), keys(&batch["buffers"]));
    assert!(live["packets_out"].as_u64().unwrap() > 0);
    // A process NF's CPU time, read from the kernel for the live report.
    let acl = (live["nfs"].as_array().unwrap().iter())
        .find(|n| n["name"] == "acl")
        .unwrap();
    assert!(acl["process_cpu_us"].as_u64().unwrap() > 0, "{acl:#}");
    let human = ok(&d, &["stats"]);
    assert!(human.contains("acl") && human.contains("mon"), "{human}");
    assert!(human.starts_with("sluice daemon "), "{human}");

    // logs: the platform's account of each NF process.
    let pid = ps
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["nf"] == "acl")
        .unwrap()["pid"]
        .clone();
    let out = ok(&d, &["logs", "acl"]);
    assert!(
        out.lines().any(
            |l| l.starts_with("[platform] running (pid ") && l.contains(&format!("pid {pid},"))
        ),
        "no start line for pid {pid} in:\n{out}"
    );
    let o = run(&d, &["logs", "ghost"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no NF named ghost"), "{}", stderr(&o));

    // delete: an NF in use is refused naming its chain; the chain, then
    // the NF, go. A second chain (from a second generator, through acl)
    // stays, since a desired state keeps at least one chain.
    let two = d.dir.join("two.yaml");
    std::fs::write(
        &two,
        text.replace(
            "  - name: out\n",
            "  - { name: gen2, kind: generator, flows: 4, rate_pps: 1000 }\n  - name: out\n",
        ) + "  - { name: other, from: gen2, nfs: [acl], to: out }\n",
    )
    .unwrap();
    let out = ok(&d, &["apply", "-f", two.to_str().unwrap()]);
    assert!(
        out.contains("chain/other added") && out.contains("version 2"),
        "{out}"
    );
    let o = run(&d, &["delete", "nf", "mon"]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("main"),
        "the refusal should name the chain: {}",
        stderr(&o)
    );
    assert_eq!(d.get("/v1/spec")["resource_version"], 2);
    let out = ok(&d, &["delete", "chain", "main"]);
    assert!(
        out.contains("chain/main removed") && out.contains("version 3"),
        "{out}"
    );
    let out = ok(&d, &["delete", "nf", "mon"]);
    assert!(
        out.contains("nf/mon removed") && out.contains("version 4"),
        "{out}"
    );
    let names: Vec<String> = ok_json(&d, &["get", "nfs", "-o", "json"])
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["acl"]);
    let o = run(&d, &["delete", "nf", "mon"]);
    assert_eq!(o.status.code(), Some(2));
    let o = run(&d, &["delete", "nf", "acl"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("chain other"), "{}", stderr(&o));

    // An invalid file: refused with the file, line and field.
    let bad = d.dir.join("bad.yaml");
    std::fs::write(&bad, text.replace("rate_pps: 500000", "rate_pps: lots")).unwrap();
    let o = run(&d, &["apply", "-f", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains("bad.yaml:") && err.contains("ports[0].rate_pps"),
        "{err}"
    );
    assert_eq!(d.get("/v1/spec")["resource_version"], 4);

    // The last chain cannot go alone, and says what stops everything.
    let o = run(&d, &["delete", "chain", "other"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("sluice delete spec"), "{}", stderr(&o));
    for (args, says) in [
        (&["delete", "spec", "other"][..], "takes no name"),
        (&["delete", "nf"][..], "needs the name"),
    ] {
        let o = run(&d, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
    // `delete spec` stops everything and keeps the daemon; a second one
    // changes nothing; an apply starts again from nothing.
    let out = ok(&d, &["delete", "spec"]);
    assert!(
        out.contains("chain/other removed") && out.contains("nf/acl removed"),
        "{out}"
    );
    assert!(out.contains("version 5"), "{out}");
    let now = d.get("/v1/spec");
    assert_eq!(
        (now["resource_version"].as_u64(), &now["spec"]),
        (Some(5), &Value::Null)
    );
    assert_eq!(
        ok_json(&d, &["get", "nfs", "-o", "json"]),
        serde_json::json!([])
    );
    assert!(ok(&d, &["delete", "spec"]).contains("version 5"));
    let out = ok(&d, &["apply", "-f", two.to_str().unwrap()]);
    assert!(out.contains("version 6"), "{out}");
}

#[test]
fn the_cli_says_when_no_daemon_answers() {
    let dir = tempfile::tempdir().unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("--socket")
        .arg(dir.path().join("none.sock"))
        .args(["get", "nfs"])
        .env_remove("SLUICE_SERVER")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("cannot reach the daemon"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn the_cli_reaches_a_daemon_over_tcp_with_the_token_file() {
    let d = Daemon::start_with(daemon_util::Options {
        token: Some("cli-token".into()),
        ..Default::default()
    });
    let (addr, _) = d.tcp.clone().unwrap();
    let (_, path) = quickstart();
    let tcp = |args: &[&str], token: &str| {
        let f = d.dir.join(format!("tok-{token}"));
        std::fs::write(&f, token).unwrap();
        std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["--server", &addr.to_string(), "--token-file"])
            .arg(&f)
            .args(args)
            .env_remove("SLUICE_SOCKET")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let o = tcp(&["apply", "-f", path.to_str().unwrap()], "cli-token");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(d.get("/v1/spec")["resource_version"], 1);
    let o = tcp(&["get", "nfs"], "not-it");
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("Bearer"), "{}", stderr(&o));
}
