//! The daemon's REST API against the real `sluice daemon`: malformed and
//! hostile requests are a 4xx naming the field (never a 5xx, never a
//! crash, never a change), an invalid spec is a located 422, concurrent
//! applies of one version have exactly one winner, the TCP listener wants
//! its token everywhere, the socket is not world-writable, and an NF a
//! chain uses cannot be deleted.

mod daemon_util;

use std::sync::{Arc, Barrier};

use daemon_util::{inline_spec, root, Daemon, Options, Resp};
use serde_json::{json, Value};

/// Asserts `r` is the JSON error the API promises: status `status`, a
/// code, a message, and `field` when one is expected.
fn assert_error(r: &Resp, status: u16, field: Option<&str>, what: &str) {
    assert_eq!(r.status, status, "{what}: {r}");
    let v = r.json();
    let e = &v["error"];
    assert!(
        e["code"].is_string() && e["message"].is_string(),
        "{what}: not a JSON error body: {r}"
    );
    if let Some(f) = field {
        assert_eq!(e["field"], f, "{what}: the error should name `{f}`: {r}");
    }
}

fn apply_base(d: &Daemon) -> Value {
    let spec = inline_spec(1000, &["fwd"]);
    d.apply(&spec, &root().join("base.yaml"));
    d.get("/v1/spec")
}

#[test]
fn malformed_bodies_are_a_400_naming_the_field_and_change_nothing() {
    let mut d = Daemon::start();
    let before = apply_base(&d);
    let spec = inline_spec(2000, &["fwd"]);
    let cases: Vec<(&str, Vec<u8>, Option<&str>, &str)> = vec![
        (
            "spec is a number",
            json!({"spec": 5}).to_string().into(),
            Some("spec"),
            "invalid type",
        ),
        (
            "spec is an object",
            json!({"spec": {"ports": []}}).to_string().into(),
            Some("spec"),
            "invalid type",
        ),
        (
            "dry_run is a string",
            json!({"spec": spec, "dry_run": "yes"}).to_string().into(),
            Some("dry_run"),
            "invalid type",
        ),
        (
            "resource_version is negative",
            json!({"spec": spec, "resource_version": -1})
                .to_string()
                .into(),
            Some("resource_version"),
            "invalid value",
        ),
        (
            "resource_version is a float",
            json!({"spec": spec, "resource_version": 1.5})
                .to_string()
                .into(),
            Some("resource_version"),
            "invalid type",
        ),
        (
            "source is an array",
            json!({"spec": spec, "source": ["a"]}).to_string().into(),
            Some("source"),
            "invalid type",
        ),
        (
            "an unknown field",
            json!({"spec": spec, "dryrun": true}).to_string().into(),
            Some("dryrun"),
            "unknown field `dryrun`",
        ),
        (
            "no spec",
            json!({"dry_run": true}).to_string().into(),
            None,
            "missing field `spec`",
        ),
        ("an empty body", Vec::new(), None, "EOF"),
        (
            "not JSON",
            b"ports: []".to_vec(),
            None,
            "invalid request body",
        ),
        ("a JSON array", b"[1,2]".to_vec(), None, "invalid type"),
        ("JSON null", b"null".to_vec(), None, "invalid type"),
        (
            "trailing garbage",
            [json!({"spec": spec}).to_string().as_bytes(), b"}"].concat(),
            None,
            "trailing characters",
        ),
        (
            "not UTF-8",
            b"{\"spec\": \"\xff\xfe\"}".to_vec(),
            Some("spec"),
            "invalid",
        ),
    ];
    for (what, body, field, words) in cases {
        let r = d.req("PUT", "/v1/spec", Some(body));
        assert_error(&r, 400, field, what);
        let msg = r.json()["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            msg.contains(words),
            "{what}: the message should say `{words}`: {msg}"
        );
        d.assert_alive(what);
    }
    assert_eq!(
        d.get("/v1/spec"),
        before,
        "a refused request changed the state"
    );
}

#[test]
fn malformed_queries_and_unknown_names_are_4xx() {
    let mut d = Daemon::start();
    apply_base(&d);
    let cases: &[(&str, &str, u16)] = &[
        ("DELETE", "/v1/nfs/fwd?resource_version=abc", 400),
        ("DELETE", "/v1/nfs/fwd?resource_version=-1", 400),
        ("DELETE", "/v1/nfs/fwd?force=true", 400),
        ("DELETE", "/v1/chains/main?resource_version=99", 409),
        ("GET", "/v1/nfs/fwd/logs?after=yesterday", 400),
        ("GET", "/v1/nfs/fwd/logs?follow=1", 400),
        ("GET", "/v1/nfs/nope/logs", 404),
        ("GET", "/v1/nfs/nope", 404),
        ("GET", "/v1/ports/nope", 404),
        ("GET", "/v1/chains/nope", 404),
        ("DELETE", "/v1/nfs/nope", 404),
        ("DELETE", "/v1/ports/nope", 404),
        ("DELETE", "/v1/chains/nope", 404),
    ];
    for &(method, path, status) in cases {
        let r = d.req(method, path, None);
        assert_error(&r, status, None, &format!("{method} {path}"));
        d.assert_alive(path);
    }
    // A name that is not UTF-8, paths and methods that do not exist: JSON
    // errors too.
    let r = d.req("GET", "/v1/nfs/%ff%fe", None);
    assert_error(&r, 400, Some("name"), "a name that is not UTF-8");
    let r = d.req("DELETE", "/v1/chains/%c3%28", None);
    assert_error(&r, 400, Some("name"), "a name that is not UTF-8");
    for path in ["/v1/nope", "/v1/nfs/fwd/nope", "/v2/spec"] {
        let r = d.req("GET", path, None);
        assert_error(&r, 404, None, path);
    }
    for (method, path) in [
        ("POST", "/v1/spec"),
        ("PATCH", "/v1/nfs"),
        ("PUT", "/metrics"),
    ] {
        let r = d.req(method, path, Some(b"{}".to_vec()));
        assert_error(&r, 405, None, &format!("{method} {path}"));
    }
    assert_eq!(d.get("/v1/spec")["resource_version"], 1);
}

#[test]
fn bodies_over_32_mib_are_413_and_the_daemon_answers_afterwards() {
    let mut d = Daemon::start();
    let before = apply_base(&d);
    // A spec string just over the limit, announced by Content-Length and
    // streamed without one (chunked).
    let mut big = b"{\"spec\": \"".to_vec();
    big.resize(33 << 20, b'a');
    big.extend_from_slice(b"\"}");
    let r = d.req("PUT", "/v1/spec", Some(big.clone()));
    assert_error(&r, 413, None, "33 MiB with Content-Length");
    d.assert_alive("a 33 MiB body");
    let r = d
        .try_req_with(
            "PUT",
            "/v1/spec",
            &[("Transfer-Encoding", "chunked")],
            Some(big),
        )
        .unwrap();
    assert_error(&r, 413, None, "33 MiB chunked");
    d.assert_alive("a 33 MiB chunked body");
    // A body under the limit holding a spec too large to be one: refused
    // by the spec parser, not a crash.
    let spec = format!(
        "ports:\n{}",
        "  - { name: p, kind: sink }\n".repeat(400_000)
    );
    let r = d.put_spec(&json!({ "spec": spec }));
    assert!(
        (400..500).contains(&r.status),
        "a 10 MB spec of 400 000 ports: {r}"
    );
    d.assert_alive("a 10 MB spec");
    assert_eq!(d.get("/v1/spec"), before);
}

#[test]
fn absurd_nesting_is_refused_with_a_located_error_not_a_crash() {
    let mut d = Daemon::start();
    let before = apply_base(&d);
    const DEEP: usize = 100_000;
    // JSON nesting in the request body itself, where a string or a
    // number is due and as the whole body.
    for (what, body) in [
        (
            "spec",
            format!("{{\"spec\": {}{}}}", "[".repeat(DEEP), "]".repeat(DEEP)),
        ),
        (
            "dry_run",
            format!("{{\"spec\": \"\", \"dry_run\": {}", "{\"a\": ".repeat(DEEP)),
        ),
        ("the body", "[".repeat(DEEP) + &"]".repeat(DEEP)),
        ("the body, unclosed", "{\"a\":[".repeat(DEEP)),
    ] {
        let r = d.req("PUT", "/v1/spec", Some(body.into_bytes()));
        assert_error(
            &r,
            400,
            None,
            &format!("JSON nested 100 000 deep in {what}"),
        );
        d.assert_alive(&format!("JSON nested 100 000 deep in {what}"));
    }
    // YAML nesting inside the spec string, in every way YAML nests.
    let specs: Vec<(&str, String)> = vec![
        (
            "flow sequences, closed",
            "[".repeat(DEEP) + &"]".repeat(DEEP),
        ),
        ("flow sequences, unclosed", "[".repeat(DEEP)),
        ("flow mappings", "{a: ".repeat(DEEP) + &"}".repeat(DEEP)),
        ("block sequences", "- ".repeat(DEEP) + "x\n"),
        (
            // Indentation is the nesting: 5 000 levels take 12 MB.
            "block mappings",
            (0..5_000).fold(String::new(), |mut s, i| {
                s += &" ".repeat(i);
                s += "a:\n";
                s
            }),
        ),
        (
            "a JSON spec",
            format!("{{\"ports\": {}{}}}", "[".repeat(DEEP), "]".repeat(DEEP)),
        ),
        ("inside a port", format!("ports:\n  - {}", "[".repeat(DEEP))),
    ];
    for (what, spec) in specs {
        let r = d.put_spec(&json!({ "spec": spec }));
        assert_error(&r, 422, None, what);
        let e = &r.json()["error"];
        assert!(
            e["line"].as_u64().is_some_and(|l| l >= 1) && e["column"].is_u64(),
            "{what}: the error should say where: {r}"
        );
        d.assert_alive(what);
    }
    assert_eq!(d.get("/v1/spec"), before);
}

#[test]
fn an_invalid_spec_is_422_with_field_line_and_column_and_changes_nothing() {
    let mut d = Daemon::start();
    let before = apply_base(&d);
    let good = inline_spec(2000, &["fwd"]);
    // A value of the wrong type, an unknown NF type, a chain through an NF
    // that does not exist: each located.
    let cases = [
        ("rate_pps: 2000", "rate_pps: fast", "ports[0].rate_pps"),
        ("type: forwarder", "type: no_such_type", "nfs[0].type"),
        ("nfs: [fwd]", "nfs: [ghost]", "chains[0].nfs[0]"),
    ];
    for (from, to, field) in cases {
        let bad = good.replace(from, to);
        assert_ne!(bad, good);
        let line = bad.lines().position(|l| l.contains(to)).unwrap() + 1;
        let r = d.put_spec(&json!({ "spec": bad, "source": "bad.yaml" }));
        assert_error(&r, 422, Some(field), to);
        let e = &r.json()["error"];
        assert_eq!(e["code"], "invalid_spec", "{r}");
        assert_eq!(e["line"], line, "{to}: wrong line: {r}");
        let col = e["column"].as_u64().unwrap() as usize;
        let text_line = bad.lines().nth(line - 1).unwrap();
        assert!(
            col >= 1 && col <= text_line.len(),
            "{to}: column {col} is outside line {line} `{text_line}`"
        );
        assert!(
            e["message"].as_str().unwrap().contains("bad.yaml"),
            "the message should name the source: {r}"
        );
        // A dry run of it is refused the same way.
        let r = d.put_spec(&json!({ "spec": bad, "dry_run": true }));
        assert_error(&r, 422, Some(field), "dry run");
        d.assert_alive(to);
    }
    assert_eq!(
        d.get("/v1/spec"),
        before,
        "an invalid spec changed the state"
    );
    // The valid one still applies on top.
    let r = d.put_spec(&json!({ "spec": good, "resource_version": 1 }));
    assert_eq!(r.status, 200, "{r}");
    assert_eq!(r.json()["resource_version"], 2);
    assert_eq!(d.get("/v1/spec")["spec"]["ports"][0]["rate_pps"], 2000);
}

#[test]
fn concurrent_applies_of_one_version_have_exactly_one_winner() {
    let d = Arc::new(Daemon::start());
    apply_base(&d);
    // Each round: two changes computed from the same version race; each
    // spec differs from the other in two places, so a mix would show.
    for round in 0..6u64 {
        let version = d.get("/v1/spec")["resource_version"].as_u64().unwrap();
        let rates = [3000 + round * 10, 5000 + round * 10];
        let names = [format!("a{round}"), format!("b{round}")];
        let barrier = Arc::new(Barrier::new(2));
        let threads: Vec<_> = (0..2)
            .map(|i| {
                let d = d.clone();
                let barrier = barrier.clone();
                let spec = inline_spec(rates[i], &[names[i].as_str()]);
                std::thread::spawn(move || {
                    let body = json!({ "spec": spec, "resource_version": version });
                    barrier.wait();
                    d.put_spec(&body)
                })
            })
            .collect();
        let answers: Vec<Resp> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let won: Vec<usize> = (0..2).filter(|&i| answers[i].status == 200).collect();
        let lost: Vec<usize> = (0..2).filter(|&i| answers[i].status == 409).collect();
        assert!(
            won.len() == 1 && lost.len() == 1,
            "round {round}: want one 200 and one 409: {} / {}",
            answers[0],
            answers[1]
        );
        let w = won[0];
        assert_eq!(answers[lost[0]].json()["error"]["code"], "conflict");
        assert_eq!(answers[w].json()["resource_version"], version + 1);
        let now = d.get("/v1/spec");
        assert_eq!(now["resource_version"], version + 1);
        let spec = &now["spec"];
        assert_eq!(
            (
                spec["ports"][0]["rate_pps"].clone(),
                spec["nfs"][0]["name"].clone()
            ),
            (json!(rates[w]), json!(names[w])),
            "round {round}: the state is not the winner's: {spec:#}"
        );
        assert_eq!(spec["nfs"].as_array().unwrap().len(), 1, "{spec:#}");
        // The data plane runs the winner's NF, not the loser's.
        let nfs = d.get("/v1/nfs");
        let running: Vec<&str> = nfs
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["name"].as_str().unwrap())
            .collect();
        assert_eq!(running, [names[w].as_str()]);
    }
    // A stale version is refused outright.
    let r = d.put_spec(&json!({ "spec": inline_spec(1, &["x"]), "resource_version": 1 }));
    assert_error(&r, 409, None, "stale version");
}

#[test]
fn settings_at_their_limits_run_and_past_them_are_refused() {
    let mut d = Daemon::start();
    // Every u64 the schema allows, at its maximum: traffic flows (a
    // deadline computed from one must not overflow on the packet path).
    let max = u64::MAX;
    let spec = format!(
        "settings:\n  buffers: 4096\n  restart: {{ backoff_ms: {max} }}\n  flow_table: {{ idle_timeout_ms: 31536000000 }}\n\
         ports:\n  - {{ name: gen, kind: generator, flows: 8, protocol: udp, size: 64, rate_pps: {max}, count: {max}, packets_per_flow: 4294967295 }}\n  - {{ name: out, kind: sink }}\n\
         nfs:\n  - {{ name: f, type: forwarder }}\nchains:\n  - {{ name: main, from: gen, nfs: [f], to: out }}\n"
    );
    // An idle timeout of u64::MAX ms once passed validation and made the
    // worker thread panic on its first flow (now + timeout overflowed).
    // Asked of the empty daemon, which takes a spec's settings as they
    // are (a running one refuses other settings whatever their values).
    for v in ["31536000001".to_string(), max.to_string()] {
        let bad = spec.replace(
            "idle_timeout_ms: 31536000000",
            &format!("idle_timeout_ms: {v}"),
        );
        let r = d.put_spec(&json!({ "spec": bad }));
        assert_error(&r, 422, Some("settings.flow_table.idle_timeout_ms"), &v);
        assert!(r.text().contains("must be an integer between"), "{r}");
    }
    assert_eq!(d.get("/v1/spec")["resource_version"], 0);
    d.apply(&spec, &root().join("limits.yaml"));
    let first = d.wait_traffic(10);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let second = d.packets_out();
    assert!(
        second > first,
        "traffic stopped: {first} then {second}\n{}",
        d.log_text()
    );
    d.assert_alive("settings at their limits");
    assert!(!d.log_text().contains("panicked"), "{}", d.log_text());
    let status = d.stop(15).expect("the daemon should stop on SIGTERM");
    assert!(status.success(), "{status}");
}

#[test]
fn the_socket_is_0660_and_the_state_dir_private() {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let d = Daemon::start();
    let m = std::fs::metadata(&d.socket).unwrap();
    assert!(m.file_type().is_socket());
    assert_eq!(
        m.permissions().mode() & 0o777,
        0o660,
        "the socket's mode is {:o}",
        m.permissions().mode() & 0o777
    );
    let m = std::fs::metadata(&d.state_dir).unwrap();
    assert_eq!(m.permissions().mode() & 0o777, 0o700);
}

#[test]
fn a_second_daemon_does_not_take_over_a_live_socket() {
    let d = Daemon::start();
    d.apply(&inline_spec(1000, &["fwd"]), &root().join("one.yaml"));
    // Same socket, same state directory: refused before it starts a data
    // plane or re-applies the state, and the first daemon keeps its socket.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("daemon")
        .arg("--socket")
        .arg(&d.socket)
        .arg("--state-dir")
        .arg(&d.state_dir)
        .env("RUST_LOG", "info")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("already listens"), "{err}");
    assert!(
        !err.contains("re-applied"),
        "it started the data plane: {err}"
    );
    assert_eq!(d.get("/v1/version")["api"], "v1");
    assert_eq!(d.get("/v1/spec")["resource_version"], 1);
}

#[test]
fn the_tcp_listener_wants_the_token_for_api_metrics_and_dashboard() {
    let token = "s3cret-token-for-tests";
    let d = Daemon::start_with(Options {
        token: Some(token.into()),
        ..Options::default()
    });
    let right = format!("Bearer {token}");
    let paths = ["/v1/version", "/v1/spec", "/metrics", "/", "/app.js"];
    for path in paths {
        let r = d.tcp_req("GET", path, &[]);
        assert_error(&r, 401, None, &format!("{path} without a token"));
        assert_eq!(r.json()["error"]["code"], "unauthorized");
        for wrong in [
            "Bearer wrong",
            "Bearer s3cret-token-for-test",
            "Bearer s3cret-token-for-tests-and-more",
            "Basic s3cret-token-for-tests",
            "s3cret-token-for-tests",
            "Bearer ",
        ] {
            let r = d.tcp_req("GET", path, &[("Authorization", wrong)]);
            assert_error(&r, 401, None, &format!("{path} with `{wrong}`"));
        }
        let r = d.tcp_req("GET", path, &[("Cookie", "sluice_token=wrong")]);
        assert_error(&r, 401, None, &format!("{path} with a wrong cookie"));
        let r = d.tcp_req("GET", path, &[("Authorization", &right)]);
        assert_eq!(r.status, 200, "{path} with the token: {r}");
        // The UNIX socket needs none.
        assert_eq!(
            d.req("GET", path, None).status,
            200,
            "{path} over the socket"
        );
    }
    assert!(d
        .tcp_req(
            "GET",
            "/metrics",
            &[
                ("Authorization", &right),
                ("Accept", "application/openmetrics-text")
            ]
        )
        .text()
        .ends_with("# EOF\n"));
    // Changes need it too.
    let r = d.tcp_req("DELETE", "/v1/nfs/x", &[]);
    assert_error(&r, 401, None, "DELETE without a token");

    // The dashboard's way in: /?token= sets the cookie and redirects to /
    // (so the token leaves the address bar); the cookie then opens
    // everything.
    let r = d.tcp_req("GET", "/?token=wrong", &[]);
    assert_error(&r, 401, None, "/?token=wrong");
    assert!(r.header("set-cookie").is_none());
    let r = d.tcp_req("GET", "/v1/version?token=s3cret-token-for-tests", &[]);
    assert_error(&r, 401, None, "?token= on an API path");
    let r = d.tcp_req("GET", &format!("/?token={token}"), &[]);
    assert_eq!(r.status, 303, "{r}");
    assert_eq!(r.header("location"), Some("/"));
    let cookie = r.header("set-cookie").expect("a cookie").to_string();
    assert!(
        cookie.starts_with(&format!("sluice_token={token}")),
        "{cookie}"
    );
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
    let pair = cookie.split(';').next().unwrap().to_string();
    for path in paths {
        let r = d.tcp_req("GET", path, &[("Cookie", &pair)]);
        assert_eq!(r.status, 200, "{path} with the cookie: {r}");
    }
    let r = d.tcp_req("GET", "/", &[("Cookie", &format!("theme=dark; {pair}"))]);
    assert_eq!(r.status, 200, "the cookie among others: {r}");
}

#[test]
fn a_tcp_listener_without_a_token_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("daemon")
        .arg("--socket")
        .arg(dir.path().join("s.sock"))
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .args(["--listen", "127.0.0.1:1"])
        .env_remove("SLUICE_TOKEN_FILE")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--token-file"));
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("daemon")
        .arg("--socket")
        .arg(dir.path().join("s.sock"))
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .args(["--listen", "127.0.0.1:1", "--token-file"])
        .arg(&empty)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("empty"));
}

#[test]
fn an_nf_a_chain_uses_cannot_be_deleted_until_the_chain_is() {
    let mut d = Daemon::start();
    // Two chains: a desired state keeps at least one (see below).
    let spec = inline_spec(1000, &["first", "second"]).replace(
        "nfs: [first, second], to: out }",
        "match: { proto: udp }, nfs: [first, second], to: out }\n  - { name: other, from: gen, nfs: [first], to: out }",
    );
    d.apply(&spec, &root().join("two.yaml"));
    let before = d.get("/v1/spec");
    let r = d.req("DELETE", "/v1/nfs/second", None);
    assert_error(&r, 422, Some("chains[0].nfs[1]"), "deleting an NF in use");
    assert_eq!(r.json()["error"]["code"], "in_use");
    let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(
        msg.contains("main"),
        "the refusal should name the chain that uses the NF: {msg}"
    );
    assert_eq!(d.get("/v1/spec"), before);
    d.assert_alive("a refused delete");
    // Used by both chains: both named.
    for (path, field) in [
        ("/v1/nfs/first", "chains[0].nfs[0]"),
        ("/v1/ports/gen", "chains[0].from"),
        ("/v1/ports/out", "chains[0].to"),
    ] {
        let r = d.req("DELETE", path, None);
        assert_error(&r, 422, Some(field), path);
        assert!(r.text().contains("chains main, other"), "{r}");
    }
    assert_eq!(d.get("/v1/spec"), before);
    // Delete the chain, then its NF.
    let r = d.req("DELETE", "/v1/chains/main?resource_version=1", None);
    assert_eq!(r.status, 200, "{r}");
    assert_eq!(r.json()["resource_version"], 2);
    assert_eq!(r.json()["diff"]["chains"]["removed"], json!(["main"]));
    let r = d.req("DELETE", "/v1/nfs/second?resource_version=2", None);
    assert_eq!(r.status, 200, "{r}");
    assert_eq!(r.json()["resource_version"], 3);
    assert_eq!(r.json()["diff"]["nfs"]["removed"], json!(["second"]));
    let nfs = d.get("/v1/nfs");
    assert_eq!(nfs.as_array().unwrap().len(), 1, "{nfs:#}");
    assert_eq!(nfs[0]["name"], "first");
    assert_eq!(d.get("/v1/chains")[0]["name"], "other");
    // The one chain left still uses `first`, by its new place.
    let r = d.req("DELETE", "/v1/nfs/first", None);
    assert_error(&r, 422, Some("chains[0].nfs[0]"), "first, used by other");
    assert!(r.text().contains("chain other:"), "{r}");
    // A desired state keeps at least one chain (the spec's rule): deleting
    // the last one is refused, not a 5xx, and changes nothing.
    let r = d.req("DELETE", "/v1/chains/other", None);
    assert_error(&r, 422, None, "deleting the last chain");
    assert_eq!(r.json()["error"]["code"], "last_chain", "{r}");
    assert_eq!(d.get("/v1/spec")["resource_version"], 3);
    d.assert_alive("deleting the last chain");
}

#[test]
fn the_served_openapi_document_is_the_committed_one() {
    let d = Daemon::start();
    let served = d.get("/v1/openapi.json");
    let committed: Value =
        serde_json::from_str(&std::fs::read_to_string(root().join("docs/openapi.json")).unwrap())
            .unwrap();
    assert_eq!(
        served, committed,
        "docs/openapi.json is stale: regenerate it with \
         `SLUICE_UPDATE_OPENAPI=1 cargo test -p sluice-daemon --test openapi`"
    );
}
