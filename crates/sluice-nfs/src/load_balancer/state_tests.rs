//! The `load_balancer` checkpoint (`state.rs`): restored instances send
//! and answer as the original does, checkpoints are stable, bad states are
//! refused whole.

use super::{config, LoadBalancer};
use sluice_nf::harness::{Harness, Outcome};
use sluice_nf::{BuildContext, NetworkFunction, StateError, StateWriter, Verdict};
use sluice_packet::builder::{write_frame, FrameSpec, L4Spec};
use sluice_packet::{MacAddr, TcpFlags};
use sluice_spec::ConfigNode;

const S: u64 = 1_000_000_000;

use sluice_nf::harness::NoNames;

/// VIP 10.0.0.100, ports 53 and 80, three backends (on port 8080 for NAT).
fn lb(max_connections: u32, mode: &str) -> LoadBalancer {
    // DSR keeps the client's port.
    let port = (mode == "nat").then_some(8080);
    let backends: Vec<_> = (1..=3)
        .map(|i| serde_json::json!({ "name": format!("b{i}"), "addr": format!("10.0.1.{i}"), "port": port, "mac": format!("02:00:00:00:01:{i:02x}") }))
        .collect();
    let config = ConfigNode::from_json(serde_json::json!({
        "vip": "10.0.0.100",
        "ports": [53, 80],
        "mode": mode,
        "backends": backends,
        "max_connections": max_connections,
    }));
    let ctx = BuildContext {
        name: "lb".into(),
        config: &config,
        resolver: &NoNames,
        flow_capacity: 64,
    };
    LoadBalancer::new(config::compile(&ctx).unwrap())
}

fn frame(src: &str, sport: u16, dst: &str, dport: u16, tcp: bool) -> Vec<u8> {
    let l4 = if tcp {
        L4Spec::Tcp {
            src_port: sport,
            dst_port: dport,
            seq: 1,
            ack: 1,
            flags: TcpFlags::ACK,
            window: 100,
        }
    } else {
        L4Spec::Udp {
            src_port: sport,
            dst_port: dport,
        }
    };
    let spec = FrameSpec {
        src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
        dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
        vlan: None,
        src_ip: src.parse().unwrap(),
        dst_ip: dst.parse().unwrap(),
        ttl: 64,
        l4,
    };
    let mut buf = vec![0u8; 100];
    let n = write_frame(&mut buf, &spec, &[0xab; 12]).unwrap();
    buf.truncate(n);
    buf
}

const VIP: &str = "10.0.0.100";

/// Client `i`'s request (TCP to port 80 for even `i`, UDP to 53 for odd).
fn request(i: u16) -> Vec<u8> {
    let (port, tcp) = if i % 2 == 0 { (80, true) } else { (53, false) };
    frame(&format!("192.168.0.{}", i + 1), 1000 + i, VIP, port, tcp)
}

/// The backend a request went to (its rewritten destination address).
fn backend_of(o: &Outcome) -> String {
    format!("10.0.1.{}", o.frame[33])
}

/// Client `i`'s reply from backend `b`.
fn reply(i: u16, b: &str) -> Vec<u8> {
    frame(
        b,
        8080,
        &format!("192.168.0.{}", i + 1),
        1000 + i,
        i % 2 == 0,
    )
}

/// Eight connections, TCP and UDP; returns each one's backend.
fn drive(nf: &mut LoadBalancer) -> Vec<String> {
    let mut h = Harness::new();
    h.set_now_ns(10 * S);
    let out = h.run(nf, &(0..8).map(request).collect::<Vec<_>>());
    out.iter().map(backend_of).collect()
}

fn checkpoint(nf: &dyn NetworkFunction) -> Vec<u8> {
    let mut w = StateWriter::new();
    nf.checkpoint(&mut w);
    w.into_bytes()
}

/// Replies of every connection, more requests, and a new connection.
fn run_next(nf: &mut LoadBalancer, backends: &[String]) -> Vec<Outcome> {
    let mut frames: Vec<Vec<u8>> = (0..8)
        .map(|i| reply(i, &backends[usize::from(i)]))
        .collect();
    frames.extend((0..8).map(request));
    frames.push(request(20));
    let mut h = Harness::new();
    h.set_now_ns(20 * S);
    h.run(nf, &frames)
}

#[test]
fn a_restored_balancer_answers_as_the_original_and_a_fresh_one_does_not() {
    let mut a = lb(64, "nat");
    let backends = drive(&mut a);
    let state = checkpoint(&a);
    let mut b = lb(64, "nat");
    assert_eq!(b.state_version(), Some(1));
    b.restore(&state).unwrap();
    assert_eq!(b.lb.connections(), 8);
    let mut fresh = lb(64, "nat");

    let (oa, ob, of) = (
        run_next(&mut a, &backends),
        run_next(&mut b, &backends),
        run_next(&mut fresh, &backends),
    );
    assert_eq!(oa, ob);
    for i in 0..8 {
        // Replies come from the VIP again on the restored instance...
        assert_eq!(&ob[i].frame[26..30], &[10, 0, 0, 100], "reply {i}");
        assert_eq!(ob[i].verdict, Verdict::Next);
        // ...and pass untouched through a fresh one.
        assert_eq!(of[i].frame, reply(i as u16, &backends[i]), "reply {i}");
        // Requests keep their backend.
        assert_eq!(backend_of(&ob[8 + i]), backends[i]);
    }
    assert_eq!(b.lb.connections(), 9);
    assert_eq!(checkpoint(&a), checkpoint(&b));
}

#[test]
fn checkpoint_restore_checkpoint_gives_the_same_bytes() {
    for mode in ["nat", "dsr"] {
        let mut a = lb(64, mode);
        drive(&mut a);
        let state = checkpoint(&a);
        assert_eq!(state.len(), 4 + 8 * 53);
        let mut b = lb(64, mode);
        b.restore(&state).unwrap();
        assert_eq!(checkpoint(&b), state, "{mode}");
        b.restore(&state).unwrap();
        assert_eq!(checkpoint(&b), state, "{mode}: restored over itself");
        b.restore(&[0; 4]).unwrap();
        assert_eq!(b.lb.connections(), 0);
    }
}

/// A balancer with other connections than the checkpoints tried on it.
fn bystander() -> (LoadBalancer, Vec<u8>) {
    let mut nf = lb(64, "nat");
    let mut h = Harness::new();
    h.set_now_ns(5 * S);
    h.run(&mut nf, &[request(30), request(31)]);
    let before = checkpoint(&nf);
    (nf, before)
}

#[test]
fn truncated_and_random_states_are_refused_and_change_nothing() {
    let mut a = lb(64, "nat");
    drive(&mut a);
    let state = checkpoint(&a);
    let (mut nf, before) = bystander();
    sluice_nf::state_check::check_restore(&mut nf, &state);
    assert_eq!(checkpoint(&nf), before);
}

const C0: usize = 4; // first connection record
const C: usize = 53; // its size

#[test]
fn corrupt_states_are_refused_whole() {
    let mut a = lb(64, "nat");
    drive(&mut a);
    let state = checkpoint(&a);
    let (mut nf, before) = bystander();
    let with = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut s = state.clone();
        f(&mut s);
        s
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "backend 3 of 3",
            with(&|s| s[C0 + C + 38..C0 + C + 40].copy_from_slice(&3u16.to_le_bytes())),
        ),
        ("backend NONE", with(&|s| s[C0 + 38..C0 + 40].fill(0xff))),
        ("not to the VIP", with(&|s| s[C0 + 31] = 99)),
        ("an unserved port", with(&|s| s[C0 + 34] = 81)),
        ("an unserved protocol", with(&|s| s[C0 + 36] = 1)),
        ("IP version 5", with(&|s| s[C0 + 37] = 5)),
        ("unknown flags", with(&|s| s[C0 + 52] = 2)),
        (
            "duplicate client",
            with(&|s| {
                let first = s[C0..C0 + C].to_vec();
                s[C0 + C..C0 + 2 * C].copy_from_slice(&first);
            }),
        ),
    ];
    for (what, s) in &cases {
        let got = nf.restore(s);
        assert!(
            matches!(got, Err(StateError::Invalid { .. })),
            "{what}: {got:?}"
        );
        assert_eq!(checkpoint(&nf), before, "{what}");
    }
    // A reply flag in DSR mode.
    let mut dsr = lb(64, "dsr");
    let got = dsr.restore(&state);
    assert!(matches!(got, Err(StateError::Invalid { .. })), "{got:?}");
    let mut trailing = state.clone();
    trailing.push(0);
    assert_eq!(
        nf.restore(&trailing),
        Err(StateError::TrailingBytes { count: 1 })
    );
    // More connections than a smaller instance holds: refused, not cut.
    let mut small = lb(4, "nat");
    let got = small.restore(&state);
    assert!(
        matches!(got, Err(StateError::Invalid { at: 0, .. })),
        "{got:?}"
    );
    assert_eq!(small.lb.connections(), 0);
    assert_eq!(checkpoint(&nf), before);
    // Still working: its connections' replies are answered.
    let mut h = Harness::new();
    h.set_now_ns(6 * S);
    let out = h.run(&mut nf, &[request(30)]);
    let b = backend_of(&out[0]);
    let out = h.run(&mut nf, &[reply(30, &b)]);
    assert_eq!(&out[0].frame[26..30], &[10, 0, 0, 100]);
}
