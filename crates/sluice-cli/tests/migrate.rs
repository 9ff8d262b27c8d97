//! `sluice migrate`: a stateful firewall, with its two tap ports and two
//! chains, moves from one daemon to another while a UDP stream and a UDP
//! echo flow through it between two network namespaces.
//!
//! What is proved: nothing of the stream is lost (frames that arrive
//! during the move wait in the taps); a reply the server sends after the
//! move on a connection the client opened before it passes (the firewall
//! passes it only as part of a connection it tracks: its connection
//! table moved), while a flow the server starts is still dropped (the
//! rules moved too); the echo keeps working; the source lets go of
//! everything. Refused moves change nothing: a taken name at the
//! destination (the move is aborted, the source keeps serving) and a
//! component with a port that cannot move; a move given up half way
//! (`abort` on both sides after the pause) leaves the source serving.
//!
//! Needs root (namespaces, taps, pidfd_getfd): skips with a message
//! otherwise.

mod daemon_util;
#[path = "../src/migrate_env.rs"]
mod migrate_env;

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use daemon_util::Daemon;
use migrate_env::{udp_stream, TapEnv, CLI_IP, SRV_IP};
use serde_json::Value;

const FIREWALL: &str = "nfs:\n  - name: fw\n    type: firewall\n    config:\n      default: drop\n      rules:\n        - { action: accept, proto: udp, dst: 10.77.0.2/32 }\n";

fn privileged() -> bool {
    if sluice_nic::has_net_caps() {
        return true;
    }
    eprintln!("skipping: moving taps between daemons needs root (namespaces, pidfd_getfd)");
    false
}

/// Runs `f` on a thread inside namespace `ns`.
fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        sluice_sys::enter_netns(&ns).expect("enter namespace");
        f()
    })
    .join()
    .expect("thread")
}

/// A UDP echo on the server's port 7, and a counter of what reaches its
/// port 9; both stop with `stop`.
fn servers(env: &TapEnv, stop: Arc<AtomicBool>, counted: Arc<AtomicU64>) {
    for port in [7u16, 9] {
        let (ns, stop, counted) = (env.srv_ns.clone(), stop.clone(), counted.clone());
        std::thread::spawn(move || {
            sluice_sys::enter_netns(&ns).expect("enter namespace");
            let s = UdpSocket::bind((SRV_IP, port)).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
            let mut buf = [0u8; 2048];
            while !stop.load(Ordering::Relaxed) {
                if let Ok((n, from)) = s.recv_from(&mut buf) {
                    if port == 7 {
                        let _ = s.send_to(&buf[..n], from);
                    } else {
                        counted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        });
    }
}

/// `n` request/reply rounds on one client socket (one flow); returns the
/// replies that came back.
fn echo(s: &UdpSocket, n: u32) -> u32 {
    let mut got = 0;
    let mut buf = [0u8; 64];
    for i in 0..n {
        let msg = format!("ping {i}");
        s.send(msg.as_bytes()).unwrap();
        if let Ok(k) = s.recv(&mut buf) {
            got += u32::from(&buf[..k] == msg.as_bytes());
        }
    }
    got
}

/// Whether a datagram the server starts (a flow the firewall's rules do
/// not accept) reaches the client.
fn server_started_flow_passes(env: &TapEnv) -> bool {
    let cli = env.cli_ns.clone();
    let listener = std::thread::spawn(move || {
        sluice_sys::enter_netns(&cli).expect("enter namespace");
        let s = UdpSocket::bind((CLI_IP, 5555)).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let mut buf = [0u8; 64];
        s.recv(&mut buf).is_ok()
    });
    std::thread::sleep(Duration::from_millis(50));
    in_ns(&env.srv_ns, || {
        let s = UdpSocket::bind((SRV_IP, 0)).unwrap();
        for _ in 0..3 {
            s.send_to(b"unsolicited", (CLI_IP, 5555)).unwrap();
        }
    });
    listener.join().unwrap()
}

/// Whether each port of `d` is paused.
fn paused(d: &Daemon) -> Vec<bool> {
    d.get("/v1/ports")
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["stats"]["paused"].as_bool().unwrap())
        .collect()
}

fn names(d: &Daemon, what: &str) -> Vec<String> {
    d.get(&format!("/v1/{what}"))
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_firewall_moves_between_daemons_with_its_connections_and_loses_nothing() {
    if !privileged() {
        return;
    }
    let tag = format!("{}", std::process::id() % 100_000);
    let env = TapEnv::new(&tag).expect("namespaces");
    let a = Daemon::start();
    let b = Daemon::start();
    let dir = tempfile::tempdir().unwrap();
    let spec = format!("{}{FIREWALL}", env.spec("fw"));
    a.apply(&spec, &dir.path().join("spec.yaml"));
    env.attach(Duration::from_secs(10)).expect("taps");

    let stop = Arc::new(AtomicBool::new(false));
    let counted = Arc::new(AtomicU64::new(0));
    servers(&env, stop.clone(), counted.clone());
    // One client flow for the echo, kept across the move.
    let client = in_ns(&env.cli_ns, || {
        let s = UdpSocket::bind((CLI_IP, 40_000)).unwrap();
        s.connect((SRV_IP, 7)).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        s
    });
    assert_eq!(echo(&client, 20), 20, "the echo through the first daemon");
    // A flow the client opens now and the server answers only after the
    // move: its first packet on the new daemon goes the reply way, which
    // the firewall passes only if the connection came with it.
    let late_server = in_ns(&env.srv_ns, || UdpSocket::bind((SRV_IP, 8)).unwrap());
    let late_client = in_ns(&env.cli_ns, || {
        let s = UdpSocket::bind((CLI_IP, 40_001)).unwrap();
        s.connect((SRV_IP, 8)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        s
    });
    late_client.send(b"open").unwrap();
    late_server
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let mut buf = [0u8; 64];
    assert_eq!(
        late_server.recv(&mut buf).unwrap(),
        4,
        "the late flow's opening"
    );
    assert!(
        !server_started_flow_passes(&env),
        "the firewall passed a flow the server started"
    );

    // A move given up half way, on both sides: the destination had the
    // objects (ports paused), the source had paused; after the aborts the
    // destination runs nothing and the source serves again.
    let fw = serde_json::json!({ "nf": "fw" }).to_string().into_bytes();
    let r = a.req("POST", "/v1/migrations/export", Some(fw.clone()));
    assert_eq!(r.status, 200, "{r}");
    let r = b.req("POST", "/v1/migrations/import", Some(r.body));
    assert_eq!(r.status, 200, "{r}");
    assert_eq!(
        paused(&b),
        [true, true],
        "the destination's ports open paused"
    );
    assert_eq!(paused(&a), [false, false]);
    let r = a.req("POST", "/v1/migrations/pause", Some(fw.clone()));
    assert_eq!(r.status, 200, "{r}");
    assert_eq!(r.header("content-type"), Some("application/octet-stream"));
    assert_eq!(paused(&a), [true, true]);
    let r = b.req(
        "POST",
        "/v1/migrations/resume?nf=fw",
        Some(b"garbage".to_vec()),
    );
    assert_eq!(r.status, 400, "{r}");
    assert!(r.text().contains("not the states of a move"), "{r}");
    for d in [&b, &a] {
        let r = d.req("POST", "/v1/migrations/abort", Some(fw.clone()));
        assert_eq!(r.status, 200, "{r}");
        let r = d.req("POST", "/v1/migrations/abort", Some(fw.clone()));
        assert_eq!(r.status, 409, "a second abort: {r}");
    }
    assert!(names(&b, "chains").is_empty() && names(&b, "ports").is_empty());
    assert_eq!(paused(&a), [false, false]);
    assert_eq!(echo(&client, 5), 5, "the echo after a move given up");

    // The stream to port 9 flows during the move.
    let stream_stop = Arc::new(AtomicBool::new(false));
    let stream = udp_stream(&env.cli_ns, (9, 1), 2_000, stream_stop.clone());
    std::thread::sleep(Duration::from_millis(300));
    let out = a
        .cli()
        .args(["migrate", "fw", "--to"])
        .arg(&b.socket)
        .args(["-o", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\nsource:\n{}\ndestination:\n{}",
        String::from_utf8_lossy(&out.stderr),
        a.log_text(),
        b.log_text()
    );
    let moved: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(moved["ports"], serde_json::json!(["cli", "srv"]));
    assert_eq!(moved["nfs"], serde_json::json!(["fw"]));
    assert_eq!(moved["chains"], serde_json::json!(["c2s", "s2c"]));
    assert!(moved["state_bytes"].as_u64().unwrap() > 0, "{moved}");
    std::thread::sleep(Duration::from_millis(300));
    stream_stop.store(true, Ordering::Relaxed);
    let sent = stream.join().unwrap().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let got = counted.load(Ordering::Relaxed);
    assert!(sent > 500, "the stream sent only {sent}");
    assert_eq!(
        got,
        sent,
        "datagrams lost during the move: {moved}\ndestination: {:#}\nsource's log:\n{}",
        b.get("/v1/stats")["ports"],
        a.log_text(),
    );

    // The source lets go of everything; the destination runs it all.
    assert!(names(&a, "chains").is_empty() && names(&a, "ports").is_empty());
    assert_eq!(names(&b, "chains"), ["c2s", "s2c"]);
    assert_eq!(names(&b, "nfs"), ["fw"]);
    // The connection moved: the late reply passes.
    late_server
        .send_to(b"late reply", (CLI_IP, 40_001))
        .unwrap();
    assert_eq!(
        late_client.recv(&mut buf).ok(),
        Some(10),
        "the moved firewall dropped a reply of a connection it tracked: {:#}",
        b.get("/v1/stats")["nfs"]
    );
    assert_eq!(
        echo(&client, 20),
        20,
        "the echo through the second daemon: {:#}",
        b.get("/v1/stats")["nfs"]
    );
    assert!(
        !server_started_flow_passes(&env),
        "the moved firewall passed a flow the server started"
    );

    // A refused import: the name is taken at the destination, so the move
    // is aborted and the source keeps serving.
    a.apply(
        "ports:\n  - { name: gen, kind: generator, rate_pps: 1000 }\n  - { name: out, kind: sink }\nnfs:\n  - { name: fw, type: forwarder }\nchains:\n  - { name: main, from: gen, nfs: [fw], to: out }\n",
        &dir.path().join("a.yaml"),
    );
    let spec_b = b.get("/v1/spec");
    let out = b
        .cli()
        .args(["migrate", "fw", "--to"])
        .arg(&a.socket)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("exists already") && err.contains("the source runs as before"),
        "{err}"
    );
    assert_eq!(b.get("/v1/spec"), spec_b);
    assert_eq!(names(&a, "chains"), ["main"]);
    assert_eq!(echo(&client, 5), 5, "the echo after an aborted move");

    // A generator cannot move: refused before anything pauses.
    let out = a
        .cli()
        .args(["migrate", "fw", "--to"])
        .arg(&b.socket)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("port gen (generator)") && err.contains("only tap ports"),
        "{err}"
    );
    let before = a.packets_out();
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        a.packets_out() > before,
        "the source stopped after a refused move"
    );
    stop.store(true, Ordering::Relaxed);

    // Every buffer came back on both daemons, across the moves, the aborts
    // and the source left with nothing in between.
    for mut d in [a, b] {
        assert!(d.stop(10).is_some_and(|s| s.success()), "{}", d.log_text());
        let last: Value = serde_json::from_str(
            &std::fs::read_to_string(d.state_dir.join("last-run.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(last["leaked_buffers"], 0, "{last:#}");
    }
}
