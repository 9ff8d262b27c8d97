//! `ids` packet path: arbitrary frames, and TCP segments with arbitrary
//! payloads and sequence numbers on a few flows, through a rule set that
//! uses every option (relative and negative windows, negation, pcre,
//! flow). Must never panic; counters must stay consistent.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_nfs::ids::engine::{Decision, Engine};
use sluice_packet::{write_frame, FrameSpec, L4Spec, MacAddr, TcpFlags};
use sluice_spec::ConfigNode;

const RULES: &[&str] = &[
    "pass tcp 10.0.0.99 any -> any any (sid:1;)",
    "alert tcp any any -> $HOME_NET 80 (msg:\"a\"; flow:to_server; content:\"GET\"; depth:3; content:\"cmd\"; distance:0; within:40; content:!\"safe\"; sid:2;)",
    "drop tcp any any <> any any (content:\"evil\"; nocase; content:\"xx\"; distance:-6; within:8; sid:3;)",
    "alert tcp any any -> any any (content:\"ab\"; pcre:\"/^c+d/R\"; sid:4;)",
    "alert udp any any -> any [53,5353] (content:\"|00 01|\"; offset:2; depth:4; pcre:!\"/z{3}/\"; sid:5;)",
    "alert ip any any -> any any (content:\"AAAA\"; fast_pattern; content:\"BB\"; sid:6;)",
    "alert icmp any any -> any any (sid:7;)",
    "alert tcp any any -> any any (flow:established,to_client; pcre:\"/(a|b)*c/i\"; sid:8;)",
];

fn engine() -> Engine {
    let cfg = serde_json::json!({
        "mode": "ips",
        "vars": { "HOME_NET": "10.0.0.0/8" },
        "rules": RULES,
    });
    sluice_nfs::ids::build_engine(&ConfigNode::from_json(cfg), 8).unwrap()
}

fn tcp(dir: u8, seq: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
    let (a, b): ([u8; 4], [u8; 4]) = ([192, 0, 2, 1], [10, 1, 0, 1]);
    let (src, dst, sp, dp) = if dir & 1 == 0 {
        (a, b, 1234, 80)
    } else {
        (b, a, 80, 1234)
    };
    let spec = FrameSpec {
        src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
        dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
        vlan: None,
        src_ip: src.into(),
        dst_ip: dst.into(),
        ttl: 64,
        l4: L4Spec::Tcp {
            src_port: sp,
            dst_port: dp,
            seq,
            ack: 1,
            flags: TcpFlags::from_bits(flags),
            window: 512,
        },
    };
    let mut buf = vec![0u8; spec.header_len() + payload.len()];
    let n = write_frame(&mut buf, &spec, payload).unwrap();
    buf.truncate(n);
    buf
}

thread_local! {
    // Building the engine (automata, regexes) costs milliseconds; one per
    // thread, reset before every input, keeps the fuzzer fast and also
    // exercises `reset`.
    static ENGINE: std::cell::RefCell<Engine> = std::cell::RefCell::new(engine());
}

fuzz_target!(|data: &[u8]| {
    ENGINE.with(|e| run(&mut e.borrow_mut(), data));
});

fn run(e: &mut Engine, data: &[u8]) {
    e.reset(0);
    let mut rest = data;
    let mut inspected = 0u64;
    let mut seq = [1u32; 2];
    // Records: [kind, flow, a, b, len, bytes…]
    while rest.len() >= 5 {
        let (kind, flow, a, b, len) = (
            rest[0],
            rest[1] % 10,
            rest[2],
            rest[3],
            usize::from(rest[4]) * 8,
        );
        let body = &rest[5..];
        let n = len.min(body.len());
        let (chunk, tail) = body.split_at(n);
        rest = tail;
        // Flow ids 8 and 9 are out of range: no flow state.
        let flow_id = u32::from(flow);
        let frame = if kind & 1 == 0 {
            chunk.to_vec()
        } else {
            let d = usize::from(a & 1);
            // Mostly in order, sometimes jumps.
            let s = if b & 7 == 0 {
                seq[d].wrapping_add(u32::from(b))
            } else {
                seq[d]
            };
            seq[d] = s.wrapping_add(chunk.len() as u32);
            tcp(a, s, b >> 2, chunk)
        };
        match e.inspect(&frame, flow_id, 0) {
            Decision::Forward | Decision::Drop => {}
            Decision::Malformed(_) => {}
        }
        if sluice_packet::parse(&frame).is_ok_and(|h| h.ip_version != 0) {
            inspected += 1;
        }
        if kind & 0x80 != 0 {
            e.flow_end(flow_id);
        }
    }
    let s = e.take_stats();
    assert_eq!(s.packets_inspected, inspected);
    assert!(s.drops <= s.alerts);
}
