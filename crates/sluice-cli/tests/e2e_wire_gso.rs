//! TCP at host speed through a bump in the wire: the veths keep their
//! offloads (checksum offload, TSO, GSO), sluice's `af_packet` ports have
//! `offload: true`, and TCP crosses as 64 KiB super-packets with partial
//! checksums. Checks that the bytes arrive intact, that a stateful firewall
//! and an ACL still enforce their policy on super-packets, that a chain
//! with an NF needing wire-sized frames gets valid segments, and that
//! partial checksums leaving through `pcap_out` are completed.
//!
//! Needs root (namespaces, veths, raw sockets): skips with a message
//! otherwise. Everything created is removed by Drop guards.

#[path = "../src/wire_env.rs"]
mod wire_env;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, UdpSocket};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use wire_env::{in_netns, in_ns_cmd, ChildGuard, WireEnv, CLI_IP, SRV_IP, WIRE_CLI, WIRE_SRV};

const DATA_PORT: u16 = 5001;
const BLOCKED_PORT: u16 = 8081;
const REVERSE_PORT: u16 = 5002;
const PROBE_PORT: u16 = 9999;
/// Bytes per transfer: enough for thousands of super-packets.
const TRANSFER: usize = 64 << 20;

fn privileged() -> bool {
    if sluice_nic::has_net_caps() {
        return true;
    }
    eprintln!(
        "skipping: the wire tests need root (CAP_NET_ADMIN and CAP_NET_RAW) to create \
         namespaces, veths and raw sockets; run them as root (CI does)"
    );
    false
}

fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    in_netns(ns, f).join().expect("thread").expect("setns")
}

/// FNV-1a over a byte stream.
#[derive(Clone, Copy)]
struct Fnv(u64);

impl Fnv {
    fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    fn feed(&mut self, b: &[u8]) {
        for &x in b {
            self.0 = (self.0 ^ u64::from(x)).wrapping_mul(0x100_0000_01b3);
        }
    }
}

/// Deterministic pseudo-random bytes (xorshift), so corruption anywhere
/// changes the hash.
fn fill(buf: &mut [u8], state: &mut u64) {
    for c in buf.chunks_mut(8) {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        let w = state.to_le_bytes();
        c.copy_from_slice(&w[..c.len()]);
    }
}

/// Sends [`TRANSFER`] bytes from the client to a server in the server
/// namespace on `port`; returns (bytes sent, hash sent, bytes received,
/// hash received).
fn transfer(env: &WireEnv, port: u16) -> (usize, u64, usize, u64) {
    let listener = in_ns(&env.srv, move || {
        TcpListener::bind((SRV_IP, port)).expect("bind")
    });
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().expect("accept");
        let mut h = Fnv::new();
        let mut n = 0;
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(k) => {
                    h.feed(&buf[..k]);
                    n += k;
                }
                Err(e) => panic!("server read: {e}"),
            }
        }
        (n, h.0)
    });
    let (sent, sent_hash) = in_ns(&env.cli, move || {
        let mut s = TcpStream::connect((SRV_IP, port)).expect("connect through the bump");
        let mut h = Fnv::new();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut buf = vec![0u8; 1 << 16];
        let mut n = 0;
        while n < TRANSFER {
            fill(&mut buf, &mut state);
            s.write_all(&buf).expect("send");
            h.feed(&buf);
            n += buf.len();
        }
        s.shutdown(Shutdown::Write).unwrap();
        // Wait for the server to close (all bytes acknowledged).
        let _ = s.read(&mut [0u8; 1]);
        (n, h.0)
    });
    let (got, got_hash) = server.join().expect("server");
    (sent, sent_hash, got, got_hash)
}

fn start_sluice(env: &WireEnv, spec: &Path) -> ChildGuard {
    let child = in_ns_cmd(&env.wire, env!("CARGO_BIN_EXE_sluice"))
        .args(["run", spec.to_str().unwrap(), "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sluice");
    let guard = ChildGuard(Some(child));
    env.wait_packet_sockets(2, Duration::from_secs(20))
        .expect("sluice ready");
    guard
}

fn stop_sluice(mut g: ChildGuard) -> (Option<i32>, Value, String) {
    let child = g.take().expect("running");
    let st = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let out = child.wait_with_output().expect("wait for sluice");
    let report = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (
        out.status.code(),
        report,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn port<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["ports"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == name))
        .unwrap_or(&Value::Null)
}

fn spec(dir: &Path, nfs: &str, chain_nfs: &str) -> std::path::PathBuf {
    let text = format!(
        r#"settings:
  buffers: 8192
  batch: 32
ports:
  - {{ name: cli, kind: af_packet, interface: {WIRE_CLI}, offload: true }}
  - {{ name: srv, kind: af_packet, interface: {WIRE_SRV}, offload: true }}
  - {{ name: dump, kind: pcap_out, path: {dump} }}
nfs:
{nfs}
chains:
  - {{ name: probe, from: cli, match: {{ proto: udp, dst_port: {PROBE_PORT} }}, nfs: [acl], to: dump }}
  - {{ name: wire, from: cli, nfs: [{chain_nfs}], to: srv, bidirectional: true }}
"#,
        dump = dir.join("probe.pcap").display()
    );
    let path = dir.join("gso.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

const ACL: &str = "  - name: acl\n    type: acl\n    config:\n      default: accept\n      rules:\n        - { action: drop, proto: tcp, dst_port: 8081 }\n";

#[test]
fn tcp_crosses_as_super_packets_intact_and_policy_still_holds() {
    if !privileged() {
        return;
    }
    let env = WireEnv::with_offloads("g", true).expect("namespaces");
    let dir = tempfile::tempdir().unwrap();
    let nfs = format!(
        "  - name: fw\n    type: firewall\n    config:\n      default: drop\n      tcp_loose: false\n      rules:\n        - {{ action: accept, proto: tcp, dst: {SRV_IP}/32, dst_port: {DATA_PORT}-{BLOCKED_PORT} }}\n        - {{ action: accept, proto: udp }}\n{ACL}  - {{ name: mon, type: monitor }}\n"
    );
    let sluice = start_sluice(&env, &spec(dir.path(), &nfs, "fw, acl, mon"));

    let (sent, sent_hash, got, got_hash) = transfer(&env, DATA_PORT);
    assert_eq!((got, got_hash), (sent, sent_hash), "bytes arrive intact");

    // The ACL drops TCP to 8081 even though its traffic would come as
    // super-packets: the SYN never gets through.
    let _blocked = in_ns(&env.srv, || {
        TcpListener::bind((SRV_IP, BLOCKED_PORT)).unwrap()
    });
    let r = in_ns(&env.cli, || {
        TcpStream::connect_timeout(
            &format!("{SRV_IP}:{BLOCKED_PORT}").parse().unwrap(),
            Duration::from_secs(1),
        )
    });
    assert!(
        r.is_err(),
        "the ACL must drop connections to {BLOCKED_PORT}"
    );
    // The firewall admits new connections from the client side only.
    let _rev = in_ns(&env.cli, || {
        TcpListener::bind((CLI_IP, REVERSE_PORT)).unwrap()
    });
    let r = in_ns(&env.srv, || {
        TcpStream::connect_timeout(
            &format!("{CLI_IP}:{REVERSE_PORT}").parse().unwrap(),
            Duration::from_secs(1),
        )
    });
    assert!(
        r.is_err(),
        "the firewall must drop connections from the server side"
    );

    // UDP from a stack with checksum offload leaves with a partial
    // checksum; through pcap_out (no offloads) it must be completed.
    in_ns(&env.cli, || {
        let s = UdpSocket::bind((CLI_IP, 0)).unwrap();
        for i in 0..10u16 {
            s.send_to(
                &vec![i as u8; 100 + 137 * usize::from(i)],
                (SRV_IP, PROBE_PORT),
            )
            .unwrap();
        }
    });
    std::thread::sleep(Duration::from_millis(300));

    let (code, report, stderr) = stop_sluice(sluice);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(report["unaccounted"], 0, "{report}");
    assert_eq!(report["leaked_buffers"], 0, "{report}");
    let cli = port(&report, "cli");
    let gso_rx = cli["gso_rx"].as_u64().unwrap_or(0);
    assert!(
        gso_rx > 100,
        "TCP must have crossed as super-packets: {cli}"
    );
    assert_eq!(cli["gso_split"], 0, "every NF takes super-packets: {cli}");
    assert!(port(&report, "srv")["gso_tx"].as_u64().unwrap_or(0) > 100);
    let drops = &report["drops"];
    assert!(drops["acl:denied"].as_u64().unwrap_or(0) >= 1, "{drops}");
    assert!(drops["fw:denied"].as_u64().unwrap_or(0) >= 1, "{drops}");
    assert!(
        drops.as_object().unwrap().keys().all(|k| k != "fw:invalid"),
        "conntrack must follow super-packets without calling them invalid: {drops}"
    );
    let dump = port(&report, "dump");
    assert!(
        dump["checksums_completed"].as_u64().unwrap_or(0) >= 10,
        "{dump}"
    );

    // Every probe in the capture has valid checksums.
    let mut replay =
        sluice_ports::pcap::PcapReplay::load(dir.path().join("probe.pcap"), Some(1)).unwrap();
    let mut n = 0;
    while let Some((_, f)) = replay.peek() {
        let h = sluice_packet::parse(f).unwrap();
        sluice_packet::verify_checksums(f, &h).expect("completed checksum");
        n += 1;
        replay.advance();
    }
    assert_eq!(n, 10);
}

#[test]
fn an_nf_that_needs_wire_frames_gets_valid_segments() {
    if !privileged() {
        return;
    }
    let env = WireEnv::with_offloads("h", true).expect("namespaces");
    let dir = tempfile::tempdir().unwrap();
    // `ttl` rewrites the IP header: it declares it needs wire-sized frames,
    // so super-packets are cut into segments as they enter its chain.
    let nfs = format!("{ACL}  - {{ name: ttl, type: ttl }}\n");
    let sluice = start_sluice(&env, &spec(dir.path(), &nfs, "acl, ttl"));
    let (sent, sent_hash, got, got_hash) = transfer(&env, DATA_PORT);
    assert_eq!((got, got_hash), (sent, sent_hash), "bytes arrive intact");
    let (code, report, stderr) = stop_sluice(sluice);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(report["unaccounted"], 0, "{report}");
    assert_eq!(report["leaked_buffers"], 0, "{report}");
    let cli = port(&report, "cli");
    let split = cli["gso_split"].as_u64().unwrap_or(0);
    assert!(split > 100, "super-packets must have been cut: {cli}");
    // Each super-packet became many wire frames: far more packets entered
    // the chain than super-packets arrived.
    assert!(cli["rx_packets"].as_u64().unwrap() > 5 * split, "{cli}");
    assert_eq!(
        port(&report, "srv")["gso_tx"],
        0,
        "segments leave as plain frames"
    );
}
