//! `load_balancer`: Maglev table properties (full, even, weighted, the
//! paper's population algorithm, minimal disruption), connection
//! persistence when a backend goes down, NAT round trips with valid
//! checksums (IPv4/IPv6, TCP/UDP), DSR, other traffic, and config errors.

mod common;
use common::*;

use std::collections::HashSet;
use std::net::IpAddr;

use proptest::prelude::*;
use serde_json::{json, Value};
use sluice_nf::harness::Harness;
use sluice_nf::{BuildContext, DropReason, Verdict};
use sluice_nfs::load_balancer::balancer::Balancer;
use sluice_nfs::load_balancer::maglev::{is_prime, Maglev, Preference, NONE};
use sluice_nfs::load_balancer::{config, LoadBalancer};
use sluice_packet::{flow_key, parse, verify_checksums, FlowKey, IpProtocol, L4Spec};
use sluice_spec::ConfigNode;

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("backend-{i}")).collect()
}

fn maglev(n: usize, m: u64) -> Maglev {
    let ns = names(n);
    let bs: Vec<(&str, u32)> = ns.iter().map(|s| (s.as_str(), 1)).collect();
    Maglev::new(&bs, m)
}

/// Pseudo-random client tuples to the VIP (deterministic).
fn keys(n: usize) -> Vec<FlowKey> {
    let mut x = 0x1234_5678_9abc_def0u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let src = IpAddr::from([10, (x >> 8) as u8, (x >> 16) as u8, (x >> 24) as u8]);
            FlowKey::new(
                src,
                "10.0.0.100".parse().unwrap(),
                (x >> 32) as u16 | 1024,
                80,
                IpProtocol::TCP,
            )
        })
        .collect()
}

#[test]
fn table_is_full_and_even() {
    for n in [1, 3, 10, 100] {
        let g = maglev(n, 65_537);
        let mut count = vec![0u64; n];
        for b in g.table() {
            assert_ne!(*b, NONE);
            count[usize::from(*b)] += 1;
        }
        // Every round gives each backend one slot: counts differ by ≤ 1.
        let (lo, hi) = (count.iter().min().unwrap(), count.iter().max().unwrap());
        assert!(hi - lo <= 1, "n={n}: {lo}..{hi}");
    }
}

#[test]
fn keys_spread_evenly_over_backends() {
    // 10 backends, 200 k client tuples: each backend within 3 % of 1/10.
    let g = maglev(10, 65_537);
    let lb = balancer(json!({ "vip": "10.0.0.100", "backends": backends_json(10) }));
    let mut count = [0u64; 10];
    for k in keys(200_000) {
        count[usize::from(g.lookup(lb.maglev_hash(&k)))] += 1;
    }
    for c in count {
        let share = c as f64 / 200_000.0;
        assert!((share - 0.1).abs() < 0.003, "{count:?}");
    }
}

#[test]
fn weights_scale_the_share() {
    let g = Maglev::new(&[("a", 1), ("b", 2), ("c", 1)], 65_537);
    let mut count = [0u64; 3];
    for b in g.table() {
        count[usize::from(*b)] += 1;
    }
    let m = 65_537.0;
    assert!((count[0] as f64 / m - 0.25).abs() < 0.001, "{count:?}");
    assert!((count[1] as f64 / m - 0.50).abs() < 0.001, "{count:?}");
}

#[test]
fn removing_one_of_n_backends_moves_about_one_nth_of_the_keys() {
    for n in [5usize, 10, 20] {
        let mut g = maglev(n, 65_537);
        let before = g.table().to_vec();
        let mut up = vec![true; n];
        up[n / 2] = false;
        g.populate(&up);
        let after = g.table();
        let moved = before.iter().zip(after).filter(|(a, b)| a != b).count();
        let owned = before.iter().filter(|b| usize::from(**b) == n / 2).count();
        // Every slot of the removed backend moves; of the others, only a
        // small fraction (Maglev trades a little disruption for balance:
        // §3.4 and Fig. 11 of the paper).
        let extra = (moved - owned) as f64 / 65_537.0;
        assert!(after.iter().all(|b| usize::from(*b) != n / 2));
        assert!(
            extra < 0.02,
            "n={n}: {moved} moved, {owned} owned, extra {extra}"
        );
        // Putting it back restores the original table exactly.
        g.populate(&vec![true; n]);
        assert_eq!(g.table(), &before[..]);
    }
}

/// The paper's Pseudocode 1 with explicit permutation lists.
fn reference(prefs: &[Preference], m: u64) -> Vec<u16> {
    let perm: Vec<Vec<u64>> = prefs
        .iter()
        .map(|p| (0..m).map(|j| (p.offset + j * p.skip) % m).collect())
        .collect();
    let mut next = vec![0usize; prefs.len()];
    let mut entry = vec![NONE; m as usize];
    let mut n = 0;
    loop {
        for i in 0..prefs.len() {
            let mut c = perm[i][next[i]];
            while entry[c as usize] != NONE {
                next[i] += 1;
                c = perm[i][next[i]];
            }
            entry[c as usize] = i as u16;
            next[i] += 1;
            n += 1;
            if n == m {
                return entry;
            }
        }
    }
}

proptest! {
    /// The table equals the paper's permutation fill for any backend names
    /// and prime size, and every permutation visits every slot.
    #[test]
    fn population_is_the_permutation_fill(
        ns in prop::collection::hash_set("[a-z0-9]{1,12}", 1..12),
        m_seed in 0usize..40,
    ) {
        let primes: Vec<u64> = (1200u64..3000).filter(|p| is_prime(*p)).collect();
        let m = primes[m_seed % primes.len()];
        let ns: Vec<String> = ns.into_iter().collect();
        let bs: Vec<(&str, u32)> = ns.iter().map(|s| (s.as_str(), 1)).collect();
        let g = Maglev::new(&bs, m);
        let prefs: Vec<Preference> = ns.iter().map(|s| Preference::new(s, 1, m)).collect();
        for p in &prefs {
            let slots: HashSet<u64> = (0..m).map(|j| p.slot(j, m)).collect();
            prop_assert_eq!(slots.len() as u64, m);
        }
        prop_assert_eq!(g.table(), &reference(&prefs, m)[..]);
    }
}

fn backends_json(n: usize) -> Value {
    (0..n)
        .map(|i| json!({ "name": format!("backend-{i}"), "addr": format!("10.0.1.{}", i + 1), "port": 8080, "mac": format!("02:00:00:00:01:{:02x}", i + 1) }))
        .collect()
}

fn balancer(cfg: Value) -> Balancer {
    let node = ConfigNode::from_json(cfg);
    let ctx = BuildContext {
        name: "lb".into(),
        config: &node,
        resolver: &TestResolver,
        flow_capacity: FLOW_CAPACITY,
    };
    config::compile(&ctx).unwrap_or_else(|e| panic!("{e}"))
}

fn syn(src: &str, sport: u16, dst: &str, dport: u16) -> Vec<u8> {
    tcp(src, sport, dst, dport)
}

fn c(h: &Harness, name: &str) -> u64 {
    h.counter(counter_index("load_balancer", name))
}

#[test]
fn connections_keep_their_backend_when_another_goes_down() {
    let mut nf = LoadBalancer::new(balancer(
        json!({ "vip": "10.0.0.100", "ports": [80], "backends": backends_json(4), "max_connections": 4096 }),
    ));
    let mut h = Harness::new();
    let clients: Vec<Vec<u8>> = (0..1000)
        .map(|i| {
            syn(
                &format!("192.168.{}.{}", i / 250, i % 250 + 1),
                10_000 + i as u16,
                "10.0.0.100",
                80,
            )
        })
        .collect();
    let backend_of = |f: &[u8]| flow_key(f).unwrap().dst_ip();
    let first: Vec<IpAddr> = h
        .run(&mut nf, &clients)
        .iter()
        .map(|o| backend_of(&o.frame))
        .collect();
    assert_eq!(c(&h, "new_connections"), 1000);
    let used: HashSet<IpAddr> = first.iter().copied().collect();
    assert_eq!(used.len(), 4);
    // Extended counter i = requests sent to backend i.
    for i in 0..4 {
        let addr: IpAddr = format!("10.0.1.{}", i + 1).parse().unwrap();
        let n = first.iter().filter(|b| **b == addr).count() as u64;
        assert_eq!(h.ext_counter(i), n, "backend {i}");
    }

    // Backend 2 (10.0.1.3) goes down. What Maglev alone would now say for
    // each key: some connections of the other backends would move too.
    let down: IpAddr = "10.0.1.3".parse().unwrap();
    nf.lb.set_up(2, false);
    let keys: Vec<FlowKey> = clients.iter().map(|f| flow_key(f).unwrap()).collect();
    let would_move = keys
        .iter()
        .zip(&first)
        .filter(|(k, b)| {
            **b != down && {
                let nb = nf.lb.maglev().lookup(nf.lb.maglev_hash(k));
                nf.lb.backends()[usize::from(nb)].addr != **b
            }
        })
        .count();

    let second: Vec<IpAddr> = h
        .run(&mut nf, &clients)
        .iter()
        .map(|o| backend_of(&o.frame))
        .collect();
    let on_down = first.iter().filter(|b| **b == down).count();
    for (a, b) in first.iter().zip(&second) {
        if *a == down {
            assert_ne!(b, &down);
        } else {
            assert_eq!(a, b, "a connection of a live backend moved");
        }
    }
    assert_eq!(c(&h, "rescheduled"), on_down as u64);
    assert_eq!(c(&h, "tracked"), (1000 - on_down) as u64);
    // ≈ 1/4 of the connections were on the removed backend.
    assert!((200..300).contains(&on_down), "{on_down}");
    eprintln!("without connection tracking {would_move} more connections would have moved");
}

#[test]
fn health_config_marks_backends_down() {
    let cfg = json!({ "vip": "10.0.0.100", "backends": backends_json(3), "health": { "down": ["backend-0", "backend-2"] } });
    let mut nf = build("load_balancer", cfg);
    let mut h = Harness::new();
    let input: Vec<Vec<u8>> = (0..50)
        .map(|i| udp("192.168.0.1", 1000 + i, "10.0.0.100", 53))
        .collect();
    for o in h.run(nf.as_mut(), &input) {
        assert_eq!(
            flow_key(&o.frame).unwrap().dst_ip(),
            "10.0.1.2".parse::<IpAddr>().unwrap()
        );
    }
    let all_down = json!({ "vip": "10.0.0.100", "backends": backends_json(1), "health": { "down": ["backend-0"] } });
    let mut nf = build("load_balancer", all_down);
    let out = h.run(nf.as_mut(), &input[..1]);
    assert_eq!(
        out[0].verdict,
        Verdict::Drop(DropReason::nf_local(reason_index(
            "load_balancer",
            "no_backend"
        )))
    );
}

fn nat_round_trip(vip: &str, backend: &str, client: &str, is_tcp: bool) {
    let cfg = json!({
        "vip": vip, "ports": [80],
        "backends": [{ "name": "only", "addr": backend, "port": 8080 }],
    });
    let mut nf = build("load_balancer", cfg);
    let mut h = Harness::new();
    let l4 = |s, d| {
        if is_tcp {
            tcp_l4(s, d)
        } else {
            L4Spec::Udp {
                src_port: s,
                dst_port: d,
            }
        }
    };
    let req = frame(client, vip, l4(40_000, 80), b"request body");
    let out = h.run(nf.as_mut(), std::slice::from_ref(&req));
    assert_eq!(out[0].verdict, Verdict::Next);
    let f = &out[0].frame;
    verify_checksums(f, &parse(f).unwrap()).unwrap();
    // Exactly the request with the destination rewritten.
    assert_eq!(
        f,
        &frame(client, backend, l4(40_000, 8080), b"request body")
    );

    // The backend answers; the platform gives the reply its own flow.
    let reply = frame(backend, client, l4(8080, 40_000), b"response");
    let out = h.run(nf.as_mut(), &[reply]);
    let f = &out[0].frame;
    verify_checksums(f, &parse(f).unwrap()).unwrap();
    assert_eq!(f, &frame(vip, client, l4(80, 40_000), b"response"));
    assert_eq!(c(&h, "replies"), 1);
    // A packet from the backend's address on another port is no reply.
    let stray = frame(backend, client, l4(8081, 40_000), b"x");
    let out = h.run(nf.as_mut(), std::slice::from_ref(&stray));
    assert_eq!(out[0].frame, stray);
    assert_eq!(c(&h, "other"), 1);
}

#[test]
fn nat_round_trips_with_valid_checksums() {
    for is_tcp in [true, false] {
        nat_round_trip("10.0.0.100", "10.0.1.7", "192.168.1.1", is_tcp);
        nat_round_trip("fd00::100", "fd01::7", "fd02::1", is_tcp);
    }
}

#[test]
fn dsr_rewrites_only_the_destination_mac() {
    let mut bs = backends_json(2);
    for b in bs.as_array_mut().unwrap() {
        b.as_object_mut().unwrap().remove("port");
    }
    let cfg = json!({ "vip": "10.0.0.100", "mode": "dsr", "backends": bs });
    let mut nf = build("load_balancer", cfg);
    let mut h = Harness::new();
    let req = udp("192.168.1.1", 5000, "10.0.0.100", 53);
    let out = h.run(nf.as_mut(), std::slice::from_ref(&req));
    let f = &out[0].frame;
    assert_eq!(&f[6..], &req[6..]);
    assert!(
        f[..6] == [2, 0, 0, 0, 1, 1] || f[..6] == [2, 0, 0, 0, 1, 2],
        "{:02x?}",
        &f[..6]
    );
}

#[test]
fn other_traffic_fragments_and_malformed() {
    let cfg =
        json!({ "vip": "10.0.0.100", "ports": [80], "proto": "tcp", "backends": backends_json(2) });
    let mut nf = build("load_balancer", cfg);
    let mut h = Harness::new();
    let mut frag = udp("192.168.1.1", 5000, "10.0.0.100", 80);
    frag[20] = 0x20; // MF
    let c_ = sluice_packet::checksum::checksum(&{
        let mut x = frag[14..34].to_vec();
        x[10] = 0;
        x[11] = 0;
        x
    });
    frag[24..26].copy_from_slice(&c_.to_be_bytes());
    let input = vec![
        udp("192.168.1.1", 5000, "10.0.0.100", 80), // UDP: not served
        tcp("192.168.1.1", 5000, "10.0.0.100", 81), // port not served
        arp(),
        ping("192.168.1.1", "10.0.0.100", 1, false),
        frag,
        vec![0u8; 10],
    ];
    let out = h.run(nf.as_mut(), &input);
    for i in 0..4 {
        assert_eq!(out[i].verdict, Verdict::Next);
        assert_eq!(out[i].frame, input[i]);
    }
    assert_eq!(
        out[4].verdict,
        Verdict::Drop(DropReason::nf_local(reason_index(
            "load_balancer",
            "fragment"
        )))
    );
    assert!(
        matches!(out[5].verdict, Verdict::Drop(r) if r.name().unwrap().starts_with("malformed:"))
    );
    assert_eq!(c(&h, "other"), 4);
}

#[test]
fn flow_end_and_idle_timeout_forget_connections() {
    let cfg = json!({ "vip": "10.0.0.100", "backends": backends_json(2), "idle_timeout_s": 10, "max_connections": 2 });
    let mut nf = build("load_balancer", cfg);
    let mut h = Harness::new();
    let a = udp("192.168.1.1", 1, "10.0.0.100", 53);
    let b = udp("192.168.1.1", 2, "10.0.0.100", 53);
    let d = udp("192.168.1.1", 3, "10.0.0.100", 53);
    h.run(nf.as_mut(), &[a.clone(), b.clone(), d.clone()]);
    assert_eq!(c(&h, "new_connections"), 2);
    assert_eq!(c(&h, "untracked"), 1);
    assert_eq!(c(&h, "connections"), 2);
    let id = h.flow_id_of(&a).unwrap();
    h.end_flow(nf.as_mut(), id);
    assert_eq!(c(&h, "connections"), 1);
    // 11 s later b has been idle too long and is swept.
    h.set_now_ns(h_now() + 11_000_000_000);
    h.run(nf.as_mut(), &[d]);
    assert_eq!(c(&h, "expired"), 1);
    assert_eq!(c(&h, "new_connections"), 3);
    assert_eq!(c(&h, "connections"), 1);
}

fn h_now() -> u64 {
    1_000_000_000
}

#[test]
fn config_errors_name_the_field() {
    let b = backends_json(2);
    let cases = [
        (json!(null), "", "needs a config"),
        (
            json!({ "vip": "10.0.0.300", "backends": b }),
            "vip",
            "invalid address",
        ),
        (
            json!({ "vip": "10.0.0.1", "backends": [] }),
            "backends",
            "at least one",
        ),
        (
            json!({ "vip": "10.0.0.1", "backends": [{ "name": "a", "addr": "fd00::1" }] }),
            "backends[0].addr",
            "family",
        ),
        (
            json!({ "vip": "10.0.0.1", "mode": "dsr", "backends": [{ "name": "a", "addr": "10.0.0.2" }] }),
            "backends[0].mac",
            "dsr",
        ),
        (
            json!({ "vip": "10.0.0.1", "backends": [{ "name": "a", "addr": "10.0.0.2" }, { "name": "a", "addr": "10.0.0.3" }] }),
            "backends[1].name",
            "duplicate",
        ),
        (
            json!({ "vip": "10.0.0.1", "backends": [{ "name": "a", "addr": "10.0.0.2", "weight": 0 }] }),
            "backends[0].weight",
            "1-100",
        ),
        (
            json!({ "vip": "10.0.0.1", "backends": b, "table_size": 65536 }),
            "table_size",
            "not prime",
        ),
        (
            json!({ "vip": "10.0.0.1", "backends": b, "table_size": 101 }),
            "table_size",
            "100 × backends",
        ),
        (
            json!({ "vip": "10.0.0.1", "backends": b, "health": { "down": ["nope"] } }),
            "health.down[0]",
            "no backend",
        ),
        (
            json!({ "vip": "10.0.0.1", "backends": b, "mode": "tunnel" }),
            "mode",
            "unknown variant",
        ),
    ];
    for (cfg, field, msg) in cases {
        let e = build_err("load_balancer", cfg.clone()).to_string();
        assert!(e.contains(field) && e.contains(msg), "{cfg}: {e}");
    }
}
