//! The small element NFs: mac_swap, ttl, checksum_fix, rewrite, sampler,
//! latency_probe, mirror, cycle_burner.

mod common;
use common::*;

use proptest::prelude::*;
use serde_json::json;
use sluice_nf::harness::Harness;
use sluice_nf::{Batch, Context, DropReason, NetworkFunction, NfId, Verdict};
use sluice_nfs::elements::checksum_fix::fix;
use sluice_nfs::elements::rewrite::Rewrite;
use sluice_packet::ipv4::Ipv4Packet;
use sluice_packet::{parse, verify_checksums, L4Spec, ParseError};

fn local(ty: &str, reason: &str) -> Verdict {
    Verdict::Drop(DropReason::nf_local(reason_index(ty, reason)))
}

fn ctr(h: &Harness, ty: &str, name: &str) -> u64 {
    h.counter(counter_index(ty, name))
}

#[test]
fn mac_swap_swaps_and_drops_runts() {
    let mut nf = build("mac_swap", json!(null));
    let f = udp("10.0.0.1", 1, "10.0.0.2", 2);
    let mut h = Harness::new();
    let out = h.run(nf.as_mut(), &[f.clone(), vec![0; 10]]);
    assert_eq!(&out[0].frame[..6], &f[6..12]);
    assert_eq!(&out[0].frame[6..12], &f[..6]);
    assert_eq!(&out[0].frame[12..], &f[12..]);
    assert_eq!(
        out[1].verdict,
        Verdict::Drop(DropReason::malformed(ParseError::EthernetTruncated))
    );
    assert_eq!(ctr(&h, "mac_swap", "swapped"), 1);
    assert!(build_err("mac_swap", json!({ "x": 1 }))
        .to_string()
        .contains("no config"));
}

#[test]
fn ttl_decrements_with_a_valid_checksum_and_drops_expired() {
    let mut nf = build("ttl", json!(null));
    let v4 = udp("10.0.0.1", 1, "10.0.0.2", 2);
    let v6 = tcp("2001:db8::1", 1, "2001:db8::2", 2);
    let mut last = v4.clone();
    last[22] = 1;
    Ipv4Packet::new_checked(&mut last[14..])
        .unwrap()
        .fill_checksum();
    let mut h = Harness::new();
    let out = h.run(nf.as_mut(), &[v4.clone(), v6.clone(), last, arp()]);
    assert_eq!(out[0].frame[22], 63);
    assert!(Ipv4Packet::new_checked(&out[0].frame[14..])
        .unwrap()
        .verify_checksum());
    assert_eq!(out[1].frame[21], 63);
    assert_eq!(out[2].verdict, local("ttl", "expired"));
    assert_eq!((out[3].verdict, &out[3].frame), (Verdict::Next, &arp()));
    assert_eq!(
        (ctr(&h, "ttl", "decremented"), ctr(&h, "ttl", "expired")),
        (2, 1)
    );
}

fn corrupt_all(f: &mut [u8]) {
    let h = parse(f).unwrap();
    let l3 = h.l3_offset as usize;
    let l4 = h.l4_offset as usize;
    if h.ip_version == 4 {
        f[l3 + 10] ^= 0x5a;
    }
    let at = match h.l4_protocol.0 {
        6 => 16,
        17 => 6,
        _ => 2,
    };
    f[l4 + at] ^= 0xa5;
}

#[test]
fn checksum_fix_recomputes_every_checksum() {
    let mut nf = build("checksum_fix", json!({}));
    let good = vec![
        tcp("10.0.0.1", 1, "10.0.0.2", 2),
        udp("2001:db8::1", 1, "2001:db8::2", 2),
        ping("10.0.0.1", "10.0.0.2", 5, false),
        ping("2001:db8::1", "2001:db8::2", 5, true),
    ];
    let bad: Vec<Vec<u8>> = good
        .iter()
        .map(|f| {
            let mut f = f.clone();
            corrupt_all(&mut f);
            f
        })
        .collect();
    let mut h = Harness::new();
    let out = h.run(nf.as_mut(), &bad);
    for (o, g) in out.iter().zip(&good) {
        assert_eq!(&o.frame, g);
    }
    assert_eq!(ctr(&h, "checksum_fix", "fixed"), 4);
    let out = h.run(nf.as_mut(), &good);
    assert!(out.iter().zip(&good).all(|(o, g)| &o.frame == g));
    assert_eq!(ctr(&h, "checksum_fix", "fixed"), 4);
    assert_eq!(ctr(&h, "checksum_fix", "checked"), 8);

    // IPv4 UDP without a checksum keeps 0 unless asked.
    let mut zero = udp("10.0.0.1", 1, "10.0.0.2", 2);
    zero[40..42].fill(0);
    let kept = Harness::new().run(build("checksum_fix", json!({})).as_mut(), &[zero.clone()]);
    assert_eq!(&kept[0].frame[40..42], &[0, 0]);
    let computed = Harness::new().run(
        build("checksum_fix", json!({ "udp_zero": "compute" })).as_mut(),
        &[zero],
    );
    assert_eq!(computed[0].frame, udp("10.0.0.1", 1, "10.0.0.2", 2));
}

#[test]
fn rewrite_sets_fields_with_incremental_checksums() {
    let mut nf = build(
        "rewrite",
        json!({ "src_mac": "02:00:00:00:00:99", "src_ip": "192.0.2.7", "dst_ip6": "2001:db8::99",
                "dst_port": 8080, "dscp": 46 }),
    );
    let input = vec![
        tcp("10.0.0.1", 1000, "10.0.0.2", 80),
        udp("2001:db8::1", 1000, "2001:db8::2", 53),
        ping("10.0.0.1", "10.0.0.2", 5, false),
    ];
    let mut h = Harness::new();
    let out = h.run(nf.as_mut(), &input);
    let f = &out[0].frame;
    assert_eq!(&f[6..12], &[2, 0, 0, 0, 0, 0x99]);
    assert_eq!(&f[26..30], &[192, 0, 2, 7]);
    assert_eq!(f[15] >> 2, 46);
    assert_eq!(&f[36..38], &8080u16.to_be_bytes());
    let g = &out[1].frame;
    assert_eq!(
        &g[38..54],
        &"2001:db8::99"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets()
    );
    assert_eq!(((u16::from_be_bytes([g[14], g[15]]) >> 6) & 0x3f) as u8, 46);
    for o in &out {
        let hd = parse(&o.frame).unwrap();
        verify_checksums(&o.frame, &hd).unwrap();
    }
    assert_eq!(ctr(&h, "rewrite", "rewritten"), 3);
    assert!(build_err("rewrite", json!({}))
        .to_string()
        .contains("at least one field"));
    assert!(build_err("rewrite", json!({ "dscp": 64 }))
        .to_string()
        .contains("dscp"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// Incremental updates give the same bytes as recomputing from scratch.
    #[test]
    fn rewrite_incremental_equals_full_recompute(
        v6 in any::<bool>(), proto in 0u8..3, sport in any::<u16>(), dport in any::<u16>(),
        payload in proptest::collection::vec(any::<u8>(), 0..64),
        a in any::<[u8; 4]>(), b in any::<[u8; 16]>(), np in proptest::option::of(any::<u16>()),
        dscp in proptest::option::of(0u8..64),
    ) {
        let (s, d) = if v6 { ("2001:db8::1", "2001:db8::2") } else { ("10.0.0.1", "10.0.0.2") };
        let l4 = match proto {
            0 => L4Spec::Udp { src_port: sport, dst_port: dport },
            1 => tcp_l4(sport, dport),
            _ => L4Spec::IcmpEcho { id: sport, seq: dport, reply: false },
        };
        let mut f = frame(s, d, l4, &payload);
        let r = Rewrite {
            src_ip: Some(a.into()),
            dst_ip6: Some(b.into()),
            src_port: np,
            dscp,
            ..Rewrite::default()
        };
        let h = parse(&f).unwrap();
        r.apply(&mut f, &h);
        let mut full = f.clone();
        let hf = parse(&full).unwrap();
        fix(&mut full, &hf, false);
        prop_assert_eq!(&f, &full);
    }
}

#[test]
fn sampler_deterministic_random_and_pass() {
    let frames: Vec<Vec<u8>> = (0..9).map(|i| udp("10.0.0.1", i, "10.0.0.2", 2)).collect();
    let mut nf = build("sampler", json!({ "rate": 3, "to": "a" }));
    let mut h = Harness::new();
    let v: Vec<Verdict> = h
        .run(nf.as_mut(), &frames)
        .into_iter()
        .map(|o| o.verdict)
        .collect();
    let ns = local("sampler", "not_sampled");
    let s = Verdict::ToNf(NfId(0));
    assert_eq!(v, [ns, ns, s, ns, ns, s, ns, ns, s]);
    assert_eq!(
        (
            ctr(&h, "sampler", "sampled"),
            ctr(&h, "sampler", "unsampled")
        ),
        (3, 6)
    );

    let many: Vec<Vec<u8>> = (0..4000)
        .map(|i| udp("10.0.0.1", i as u16, "10.0.0.2", 2))
        .collect();
    let run = |seed: u64| -> Vec<bool> {
        let mut nf = build(
            "sampler",
            json!({ "rate": 10, "mode": "random", "seed": seed, "unsampled": "pass", "to": "a" }),
        );
        let out = Harness::new().run(nf.as_mut(), &many);
        assert!(out
            .iter()
            .all(|o| matches!(o.verdict, Verdict::Next | Verdict::ToNf(NfId(0)))));
        out.into_iter()
            .map(|o| o.verdict == Verdict::ToNf(NfId(0)))
            .collect()
    };
    let (a, b, c) = (run(7), run(7), run(8));
    assert!(a == b, "same seed, same samples");
    assert!(a != c, "another seed, other samples");
    let mut nf = build(
        "sampler",
        json!({ "rate": 10, "mode": "random", "seed": 7 }),
    );
    let mut h = Harness::new();
    h.run(nf.as_mut(), &many);
    let n = ctr(&h, "sampler", "sampled");
    assert!((300..=500).contains(&n), "≈ 400 of 4000 sampled: {n}");
    assert!(build_err("sampler", json!({ "rate": 0 }))
        .to_string()
        .contains("rate"));
    assert!(build_err("sampler", json!({ "rate": 2, "to": "drop" }))
        .to_string()
        .contains("cannot be dropped"));
}

/// Stamps packet i with `now - ages[i]` before the wrapped NF sees it.
struct Aged {
    inner: Box<dyn NetworkFunction>,
    ages: Vec<u64>,
}

impl NetworkFunction for Aged {
    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        let now = ctx.now_ns();
        let mut i = 0;
        batch.for_each(|p| {
            let age = self.ages[i % self.ages.len()];
            // `u64::MAX`: unstamped; `u64::MAX - 1`: stamped 1 µs after
            // the batch's clock was read.
            let ts = match age {
                u64::MAX => 0,
                a if a == u64::MAX - 1 => now + 1_000,
                a => now - a,
            };
            p.raw().set_timestamp_ns(ts);
            i += 1;
        });
        self.inner.process(batch, ctx);
    }
}

#[test]
fn latency_probe_publishes_percentiles() {
    let probe = build("latency_probe", json!(null));
    let mut ages: Vec<u64> = (1..=100).map(|i| i * 1000).collect();
    ages.push(u64::MAX); // unstamped
    ages.push(u64::MAX - 1); // stamped after the batch clock: age 0
    let mut nf = Aged { inner: probe, ages };
    let frames: Vec<Vec<u8>> = (0..102)
        .map(|i| udp("10.0.0.1", i, "10.0.0.2", 2))
        .collect();
    let mut h = Harness::new();
    h.set_now_ns(10_000_000_000);
    let out = h.run(&mut nf, &frames);
    assert!(out.iter().all(|o| o.verdict == Verdict::Next));
    let g = |n: &str| ctr(&h, "latency_probe", n);
    assert_eq!(
        (g("samples"), g("unstamped"), g("max_ns")),
        (101, 1, 100_000)
    );
    assert!(
        (50_000..=50_000 + 50_000 / 8).contains(&g("p50_ns")),
        "{}",
        g("p50_ns")
    );
    assert!((99_000..=100_000).contains(&g("p99_ns")), "{}", g("p99_ns"));
}

#[test]
fn mirror_writes_a_pcap_and_packets_continue() {
    let dir = std::env::temp_dir().join(format!("mirror-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("m.pcap");
    let frames = vec![
        udp("10.0.0.1", 1, "10.0.0.2", 2),
        tcp("2001:db8::1", 1, "2001:db8::2", 2),
    ];
    {
        let mut nf = build(
            "mirror",
            json!({ "path": path.to_str().unwrap(), "snaplen": 60 }),
        );
        let mut h = Harness::new();
        let out = h.run(nf.as_mut(), &frames);
        assert!(out
            .iter()
            .zip(&frames)
            .all(|(o, f)| o.verdict == Verdict::Next && &o.frame == f));
        assert_eq!(ctr(&h, "mirror", "captured"), 2);
    }
    let b = std::fs::read(&path).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(&b[..4], &0xa1b23c4du32.to_le_bytes());
    assert_eq!(&b[16..20], &60u32.to_le_bytes());
    let mut off = 24;
    for f in &frames {
        let cap = u32::from_le_bytes(b[off + 8..off + 12].try_into().unwrap()) as usize;
        let len = u32::from_le_bytes(b[off + 12..off + 16].try_into().unwrap()) as usize;
        assert_eq!((cap, len), (f.len().min(60), f.len()));
        assert_eq!(&b[off + 16..off + 16 + cap], &f[..cap]);
        off += 16 + cap;
    }
    assert_eq!(off, b.len());
    let e = build_err("mirror", json!({ "path": "/nonexistent-dir/x.pcap" }));
    assert!(e.to_string().contains("cannot create"), "{e}");
}

/// Per-worker copies of a mirror would all create and write the one file
/// (found with `settings.workers: 2`: the file held one worker's records,
/// the counters both workers'), so the spec is refused before the file is
/// touched.
#[test]
fn mirror_refuses_per_worker_copies() {
    let dir = scratch_dir("mirror-replicas");
    let path = dir.join("m.pcap");
    let config = json!({ "path": path.to_str().unwrap() });
    let e = try_build_replicated("mirror", config.clone(), 2)
        .err()
        .expect("two copies of one mirror must be refused");
    assert!(
        e.to_string()
            .contains("mirror writes one pcap file, so it cannot run as 2 copies side by side"),
        "{e}"
    );
    assert!(!path.exists(), "a refused mirror must not create its file");
    assert!(try_build_replicated("mirror", config, 1).is_ok());
    // Building creates no file either: the instance does when it runs.
    assert!(!path.exists());
    std::fs::remove_dir_all(&dir).ok();
}

fn scratch_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn cycle_burner_spins_the_configured_iterations() {
    let mut nf = build("cycle_burner", json!({ "iterations_per_packet": 1000 }));
    let mut h = Harness::new();
    let f = udp("10.0.0.1", 1, "10.0.0.2", 2);
    let out = h.run(nf.as_mut(), &[f.clone(), f.clone(), f.clone()]);
    assert!(out
        .iter()
        .all(|o| o.verdict == Verdict::Next && o.frame == f));
    assert_eq!(
        (
            ctr(&h, "cycle_burner", "packets"),
            ctr(&h, "cycle_burner", "iterations")
        ),
        (3, 3000)
    );
    assert!(
        build_err("cycle_burner", json!({ "ns_per_packet": 20_000_000 }))
            .to_string()
            .contains("10 ms")
    );
}
