//! `ids` cost per packet: 1 000 generated Snort rules (HTTP URI and
//! parameter signatures, some nocase, some pcre, some UDP/hex), 1500-byte
//! HTTP-like TCP packets on 64 in-order flows (stream carry-over active).
//!
//! ```sh
//! cargo bench -p sluice-nfs --bench ids -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! Criterion prints ns per packet (`time`) and decimal bytes per second
//! (`thrpt`, GB/s of frame bytes; × 8 = Gbit/s).
//!
//! * `ids/1k_rules_1500B_clean`: no packet matches (the common case); the
//!   payload is built from the rules' own vocabulary, so the automaton
//!   walks real partial matches and some rules reach verification.
//! * `ids/1k_rules_1500B_10pct_alerts`: every tenth packet carries one
//!   rule's signature.

#![allow(missing_docs)] // criterion_group! generates an undocumented pub fn

use std::hint::black_box;
use std::net::IpAddr;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use serde_json::json;
use sluice_nfs::ids::engine::{Decision, Engine};
use sluice_packet::{write_frame, FrameSpec, L4Spec, MacAddr, TcpFlags};
use sluice_spec::ConfigNode;

/// Deterministic xorshift generator: the rule set and packets are the same
/// on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<'a>(&mut self, v: &[&'a str]) -> &'a str {
        v[(self.next() % v.len() as u64) as usize]
    }
}

const DIRS: &[&str] = &[
    "cgi-bin",
    "scripts",
    "admin",
    "wp-admin",
    "include",
    "modules",
    "servlet",
    "api",
    "phpmyadmin",
    "portal",
    "images",
    "shop",
    "webdav",
    "console",
    "manager",
    "forum",
];
const WORDS: &[&str] = &[
    "login", "upload", "config", "setup", "shell", "backup", "debug", "export", "viewer", "search",
    "report", "install", "update", "profile", "gallery", "download", "register", "checkout",
    "invoice", "status", "index", "default", "main", "session",
];
const EXTS: &[&str] = &["php", "asp", "aspx", "jsp", "cgi", "pl", "do", "action"];
const PARAMS: &[&str] = &[
    "id", "file", "cmd", "page", "path", "user", "dir", "q", "url", "exec",
];

/// `n` rules in the style of the Snort community rule set.
fn ruleset(n: usize, rng: &mut Rng) -> Vec<String> {
    let mut rules = Vec::with_capacity(n);
    for i in 0..n {
        let sid = 2_000_000 + i;
        let dir = rng.pick(DIRS);
        let word = rng.pick(WORDS);
        let ext = rng.pick(EXTS);
        let num = rng.next() % 1000;
        let param = rng.pick(PARAMS);
        let rule = match i % 10 {
            0..=5 => format!(
                "alert tcp $EXTERNAL_NET any -> $HOME_NET $HTTP_PORTS (msg:\"WEB-APP {word}{num}.{ext} access\"; flow:to_server,established; content:\"/{dir}/{word}{num}.{ext}\"; nocase; content:\"{param}=\"; distance:0; classtype:web-application-attack; sid:{sid}; rev:1;)"
            ),
            6 => format!(
                "alert tcp $EXTERNAL_NET any -> $HOME_NET $HTTP_PORTS (msg:\"WEB-APP {word} injection {num}\"; flow:to_server,established; content:\"{word}_{num}\"; pcre:\"/{param}=[^&]*(union|select)\\s/i\"; sid:{sid}; rev:2;)"
            ),
            7 => format!(
                "drop tcp $EXTERNAL_NET any -> $HOME_NET $HTTP_PORTS (msg:\"WEB-APP {dir} traversal {num}\"; flow:to_server,established; content:\"GET\"; depth:3; content:\"/{dir}/../{word}{num}\"; distance:0; sid:{sid}; rev:1;)"
            ),
            8 => format!(
                "alert udp $EXTERNAL_NET any -> $HOME_NET 53 (msg:\"DNS suspicious {word}{num}\"; content:\"|{:02x}|{word}{num}|03|com\"; nocase; sid:{sid}; rev:1;)",
                word.len() + num.to_string().len()
            ),
            _ => format!(
                "alert tcp $HOME_NET $HTTP_PORTS -> $EXTERNAL_NET any (msg:\"WEB-APP {word} error leak {num}\"; flow:to_client,established; content:\"{word} error {num}\"; sid:{sid}; rev:1;)"
            ),
        };
        rules.push(rule);
    }
    rules
}

fn engine(rules: Vec<String>) -> Engine {
    let cfg = json!({
        "mode": "ips",
        "vars": {
            "HOME_NET": "10.1.0.0/16",
            "EXTERNAL_NET": "!$HOME_NET",
            "HTTP_PORTS": "[80,8080,8000:8100]",
        },
        "rules": rules,
    });
    sluice_nfs::ids::build_engine(&ConfigNode::from_json(cfg), 1024).expect("valid rules")
}

/// A 1500-byte HTTP-like frame for flow `i`; `sig` is inserted if given.
fn http_frame(i: usize, rng: &mut Rng, sig: Option<&str>) -> Vec<u8> {
    let mut text = format!(
        "GET /{}/{}.{}?{}={} HTTP/1.1\r\nHost: www{i}.example.com\r\nUser-Agent: Mozilla/5.0\r\nCookie: ",
        rng.pick(DIRS),
        rng.pick(WORDS),
        rng.pick(EXTS),
        rng.pick(PARAMS),
        rng.pick(WORDS),
    );
    if let Some(s) = sig {
        text.push_str(s);
    }
    let payload_len = 1500 - 14 - 20 - 20;
    while text.len() < payload_len {
        text.push_str(rng.pick(WORDS));
        text.push(if rng.next() % 3 == 0 { '&' } else { '=' });
    }
    text.truncate(payload_len);
    let spec = FrameSpec {
        src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
        dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
        vlan: None,
        src_ip: IpAddr::from([192, 0, 2, (i % 250) as u8 + 1]),
        dst_ip: IpAddr::from([10, 1, 0, 10]),
        ttl: 64,
        l4: L4Spec::Tcp {
            src_port: 40000 + i as u16,
            dst_port: 80,
            seq: 1,
            ack: 1,
            flags: TcpFlags::ACK | TcpFlags::PSH,
            window: 512,
        },
    };
    let mut buf = vec![0u8; 1500];
    let n = write_frame(&mut buf, &spec, text.as_bytes()).expect("fits");
    assert_eq!(n, 1500);
    buf
}

const FLOWS: usize = 64;
/// TCP sequence number offset in these frames (Ethernet 14 + IPv4 20 + 4).
const SEQ_AT: usize = 38;

fn bench_case(c: &mut Criterion, name: &str, every: Option<usize>) {
    let mut rng = Rng(0x05ee_d1d5);
    let rules = ruleset(1000, &mut rng);
    // A real signature for the alerting case: the URI of a drop rule.
    let sig = rules
        .iter()
        .find(|r| r.starts_with("drop"))
        .and_then(|r| r.split("content:\"").nth(2))
        .and_then(|c| c.split('"').next())
        .expect("the set has drop rules")
        .to_string();
    let mut e = engine(rules);
    let mut frames: Vec<Vec<u8>> = (0..FLOWS)
        .map(|i| {
            let s = every.filter(|k| i % k == 0).map(|_| sig.as_str());
            http_frame(i, &mut rng, s)
        })
        .collect();
    // Open every flow in both directions (client first) so that
    // `flow:to_server,established` rules are live; otherwise their header
    // check would skip verification.
    let mut seqs = vec![1u32; FLOWS];
    for (i, f) in frames.iter_mut().enumerate() {
        f[SEQ_AT..SEQ_AT + 4].copy_from_slice(&seqs[i].to_be_bytes());
        seqs[i] = seqs[i].wrapping_add(1500 - 54);
        e.inspect(f, i as u32, 0);
        let mut reply = f[..54].to_vec();
        reply[26..30].copy_from_slice(&f[30..34]);
        reply[30..34].copy_from_slice(&f[26..30]);
        reply[34..36].copy_from_slice(&f[36..38]);
        reply[36..38].copy_from_slice(&f[34..36]);
        reply[16..18].copy_from_slice(&40u16.to_be_bytes());
        e.inspect(&reply, i as u32, 0);
    }
    // The first packets of a flow are not established yet: no alerts.
    let _ = e.take_stats();
    let mut k = 0usize;
    let mut g = c.benchmark_group("ids");
    g.throughput(Throughput::BytesDecimal(1500));
    g.bench_function(name, |b| {
        b.iter(|| {
            let i = k % FLOWS;
            k += 1;
            // Keep every flow in order so the stream carry-over is used.
            let f = &mut frames[i];
            f[SEQ_AT..SEQ_AT + 4].copy_from_slice(&seqs[i].to_be_bytes());
            seqs[i] = seqs[i].wrapping_add(1500 - 54);
            black_box(e.inspect(black_box(f), i as u32, 0))
        })
    });
    g.finish();
    // Wall time on a shared machine includes time other processes ran;
    // thread CPU time does not.
    const N: u32 = 20_000;
    let cpu0 = sluice_sys::thread_cpu_ns();
    for _ in 0..N {
        let i = k % FLOWS;
        k += 1;
        let f = &mut frames[i];
        f[SEQ_AT..SEQ_AT + 4].copy_from_slice(&seqs[i].to_be_bytes());
        seqs[i] = seqs[i].wrapping_add(1500 - 54);
        black_box(e.inspect(black_box(f), i as u32, 0));
    }
    let ns = (sluice_sys::thread_cpu_ns() - cpu0) as f64 / f64::from(N);
    println!(
        "ids/{name}: thread CPU time {ns:.0} ns/packet = {:.2} Gbit/s per core ({N} packets)",
        1500.0 * 8.0 / ns
    );
    let s = e.take_stats();
    assert_eq!(s.stream_gaps, 0);
    if every.is_none() {
        assert_eq!(s.alerts, 0, "clean traffic raised alerts");
    } else {
        assert!(s.alerts > 0);
        let f = &mut frames[0];
        f[SEQ_AT..SEQ_AT + 4].copy_from_slice(&seqs[0].to_be_bytes());
        assert_eq!(e.inspect(f, 0, 0), Decision::Drop);
    }
}

fn benches(c: &mut Criterion) {
    bench_case(c, "1k_rules_1500B_clean", None);
    bench_case(c, "1k_rules_1500B_10pct_alerts", Some(10));
}

criterion_group!(ids, benches);
criterion_main!(ids);
