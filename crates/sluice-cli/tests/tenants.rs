//! Tenants on a daemon: a tenant's token changes only its own NFs and
//! chains and looks only into its own NFs; the operator (its token, or
//! the UNIX socket) changes anything; a refused change changes nothing.

mod daemon_util;
use daemon_util::*;

use serde_json::{json, Value};

const SPEC: &str = "ports:
  - { name: gen, kind: generator, rate_pps: 1000 }
  - { name: out, kind: sink }
nfs:
  - { name: op, type: forwarder }
  - { name: a1, type: monitor, tenant: a }
  - { name: b1, type: monitor, tenant: b }
chains:
  - { name: main, from: gen, match: { dst_port: 80 }, nfs: [op], to: out }
  - { name: ca, from: gen, match: { dst_port: 1 }, nfs: [a1, op], to: out, tenant: a }
  - { name: cb, from: gen, match: { dst_port: 2 }, nfs: [b1], to: out, tenant: b }
";

struct Tenants {
    d: Daemon,
}

impl Tenants {
    fn start() -> Tenants {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::write(&a, "token-of-a\n").unwrap();
        std::fs::write(&b, "token-of-b\n").unwrap();
        let d = Daemon::start_with(Options {
            token: Some("token-of-the-operator".into()),
            args: vec![
                "--tenant".into(),
                format!("a={}", a.display()),
                "--tenant".into(),
                format!("b={}", b.display()),
            ],
        });
        // The token files are read at start.
        drop(dir);
        d.apply(SPEC, &d.dir.join("spec.yaml"));
        Tenants { d }
    }

    /// `method path` over TCP with `token` and a JSON `body`.
    fn call(&self, token: &str, method: &str, path: &str, body: Option<&Value>) -> Resp {
        let (addr, _) = self.d.tcp.as_ref().unwrap();
        let auth = format!("Bearer {token}");
        http(
            std::net::TcpStream::connect(addr).unwrap(),
            method,
            path,
            &[("Authorization", &auth)],
            body.map(|b| b.to_string().into_bytes()),
        )
        .unwrap()
    }

    /// The desired spec (JSON) and its version.
    fn spec(&self) -> (Value, u64) {
        let s = self.d.get("/v1/spec");
        (s["spec"].clone(), s["resource_version"].as_u64().unwrap())
    }

    /// Applies `spec` as `token`.
    fn put(&self, token: &str, spec: &Value) -> Resp {
        self.call(
            token,
            "PUT",
            "/v1/spec",
            Some(&json!({ "spec": spec.to_string() })),
        )
    }
}

/// A change to a spec's JSON.
type Edit = Box<dyn Fn(&mut Value)>;

fn forbidden(r: &Resp, naming: &str) {
    assert_eq!(r.status, 403, "{r}");
    let e = &r.json()["error"];
    assert_eq!(e["code"], "forbidden", "{r}");
    assert!(
        e["message"].as_str().unwrap().contains(naming),
        "{naming}: {r}"
    );
}

fn entry<'a>(spec: &'a mut Value, key: &str, name: &str) -> &'a mut Value {
    spec[key]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|e| e["name"] == name)
        .unwrap()
}

#[test]
fn a_tenant_changes_only_its_own_nfs_and_chains() {
    let mut t = Tenants::start();
    let (a, b, op) = ("token-of-a", "token-of-b", "token-of-the-operator");

    // Tenant a adds an NF and a chain of its own.
    let (mut spec, _) = t.spec();
    spec["nfs"]
        .as_array_mut()
        .unwrap()
        .push(json!({ "name": "a2", "type": "forwarder", "tenant": "a" }));
    spec["chains"].as_array_mut().unwrap().push(json!({
        "name": "ca2", "from": "gen", "match": { "dst_port": 3 }, "nfs": ["a2"],
        "to": "out", "tenant": "a"
    }));
    let r = t.put(a, &spec);
    assert_eq!(r.status, 200, "{r}");
    assert_eq!(r.json()["diff"]["nfs"]["added"], json!(["a2"]), "{r}");

    // Everything else is refused, and a refusal changes nothing.
    let (base, version) = t.spec();
    let refusals: Vec<(&str, Edit, &str)> = vec![
        (
            "another tenant's NF",
            Box::new(|s| entry(s, "nfs", "b1")["isolation"] = "inline".into()),
            "NF \"b1\" is tenant \"b\"'s",
        ),
        (
            "the operator's NF",
            Box::new(|s| entry(s, "nfs", "op")["isolation"] = "inline".into()),
            "NF \"op\" is the operator's",
        ),
        (
            "taking the operator's NF",
            Box::new(|s| entry(s, "nfs", "op")["tenant"] = "a".into()),
            "NF \"op\" is the operator's",
        ),
        (
            "giving its own chain away",
            Box::new(|s| {
                entry(s, "chains", "ca2")
                    .as_object_mut()
                    .unwrap()
                    .remove("tenant");
            }),
            "chain \"ca2\" is the operator's",
        ),
        (
            "a port",
            Box::new(|s| entry(s, "ports", "gen")["rate_pps"] = 5.into()),
            "ports are the operator's",
        ),
        (
            "settings",
            Box::new(|s| s["settings"]["restart"]["backoff_ms"] = 1.into()),
            "settings are the operator's",
        ),
    ];
    for (what, change, naming) in &refusals {
        let mut s = base.clone();
        change(&mut s);
        let r = t.put(a, &s);
        forbidden(&r, naming);
        assert_eq!(t.spec(), (base.clone(), version), "{what} changed nothing");
    }
    forbidden(
        &t.call(a, "DELETE", "/v1/nfs/b1", None),
        "NF \"b1\" is tenant \"b\"'s",
    );
    forbidden(
        &t.call(a, "DELETE", "/v1/chains/main", None),
        "chain \"main\"",
    );
    forbidden(&t.call(a, "DELETE", "/v1/ports/gen", None), "ports");
    forbidden(
        &t.call(a, "DELETE", "/v1/spec", None),
        "the whole desired state is the operator's",
    );
    assert_eq!(t.spec(), (base.clone(), version));

    // A tenant's chain may not pass another tenant's NF: a spec error.
    let mut s = base.clone();
    entry(&mut s, "chains", "ca2")["nfs"] = json!(["a2", "b1"]);
    let r = t.put(a, &s);
    assert_eq!(r.status, 422, "{r}");
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("belongs to tenant \"b\""));

    // Looking in: its own NFs only.
    assert_eq!(t.call(a, "GET", "/v1/nfs/a1/logs", None).status, 200);
    forbidden(&t.call(a, "GET", "/v1/nfs/b1/logs", None), "tenant \"b\"'s");
    forbidden(
        &t.call(a, "GET", "/v1/capture?target=b1&count=1", None),
        "tenant \"b\"'s",
    );
    forbidden(
        &t.call(a, "GET", "/v1/capture?target=gen&count=1", None),
        "port",
    );
    // Reading the spec and stats is open to tenants.
    assert_eq!(t.call(b, "GET", "/v1/stats", None).status, 200);

    // Tenant a removes what it added.
    assert_eq!(t.call(a, "DELETE", "/v1/chains/ca2", None).status, 200);
    assert_eq!(t.call(a, "DELETE", "/v1/nfs/a2", None).status, 200);

    // The operator's token, like the socket, changes anything.
    let (mut s, _) = t.spec();
    entry(&mut s, "nfs", "b1")["isolation"] = "inline".into();
    assert_eq!(t.put(op, &s).status, 200);
    let (now, _) = t.spec();
    assert_eq!(
        now["nfs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["name"] == "b1")
            .unwrap()["isolation"],
        "inline"
    );
    // An unknown token is nobody.
    assert_eq!(t.call("token-of-c", "GET", "/v1/spec", None).status, 401);
    t.d.assert_alive("the tenants' requests");
}

#[test]
fn tenant_tokens_are_checked_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("t");
    std::fs::write(&f, "same\n").unwrap();
    let run = |args: &[String]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
            .arg("daemon")
            .arg("--socket")
            .arg(dir.path().join("s.sock"))
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let tenant = format!("a={}", f.display());
    assert!(run(&["--tenant".into(), tenant.clone()]).contains("--tenant needs --listen"));
    let e = run(&[
        "--listen".into(),
        format!("127.0.0.1:{}", free_port()),
        "--token-file".into(),
        f.display().to_string(),
        "--tenant".into(),
        tenant,
    ]);
    assert!(e.contains("its token is the operator's"), "{e}");
    assert!(run(&["--tenant".into(), "a".into()]).contains("NAME=FILE"));
}

/// An addition is a change like any other: a tenant adds its own NFs and
/// chains, never a port or another tenant's object, and a refused one
/// changes nothing.
#[test]
fn a_tenant_adds_only_its_own_objects() {
    let t = Tenants::start();
    let (a, op) = ("token-of-a", "token-of-the-operator");
    let add = |token: &str, text: &str| {
        t.call(
            token,
            "POST",
            "/v1/spec/additions",
            Some(&json!({ "spec": text })),
        )
    };
    let (before, v) = t.spec();
    forbidden(
        &add(
            a,
            "ports:\n  - { name: g9, kind: generator, rate_pps: 10 }\n",
        ),
        "ports are the operator's",
    );
    forbidden(
        &add(a, "nfs:\n  - { name: b9, type: forwarder, tenant: b }\n"),
        "b9",
    );
    forbidden(&add(a, "nfs:\n  - { name: n9, type: forwarder }\n"), "n9");
    assert_eq!(t.spec(), (before, v), "refusals change nothing");

    let mine = "nfs:\n  - { name: a2, type: forwarder, tenant: a }\n\
                chains:\n  - { name: ca2, from: gen, match: { dst_port: 3 }, nfs: [a2], to: out, tenant: a }\n";
    let r = add(a, mine);
    assert_eq!(r.status, 200, "{r}");
    assert_eq!(r.json()["resource_version"], v + 1, "{r}");
    let r = add(op, "nfs:\n  - { name: op2, type: forwarder }\n");
    assert_eq!(r.status, 200, "the operator adds anything: {r}");
}
