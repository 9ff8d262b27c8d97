//! An AF_XDP port lends arena buffers to the kernel (its fill ring, the
//! frames it sent until they complete). Removed from a running daemon
//! while traffic flows into it, it gives every one of them back: once the
//! traffic that remains has finished, the platform holds no buffer.
//!
//! Needs root (a veth pair, BPF); skips with a message otherwise.

mod common;
use common::*;

use std::process::Command;

/// A veth pair, deleted on drop (also when an assertion fails).
struct Pair(String);

impl Pair {
    fn new(name: &str) -> Pair {
        let peer = format!("{name}p");
        let ok = Command::new("ip")
            .args(["link", "add", name, "type", "veth", "peer", "name", &peer])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "ip link add {name}");
        for dev in [name, peer.as_str()] {
            let up = Command::new("ip").args(["link", "set", dev, "up"]).status();
            assert!(up.is_ok_and(|s| s.success()), "ip link set {dev} up");
        }
        Pair(name.to_string())
    }

    fn has_xdp(&self) -> bool {
        Command::new("ip")
            .args(["link", "show", "dev", &self.0])
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("prog/xdp"))
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.0]).status();
    }
}

fn spec(to: &str, xdp_if: Option<&str>, count: Option<u64>) -> String {
    let count = count.map(|c| format!(", count: {c}")).unwrap_or_default();
    let mut s = format!(
        "ports:\n  - {{ name: gen, kind: generator, flows: 64, protocol: udp, size: 64, rate_pps: 200000{count} }}\n  - {{ name: out, kind: sink }}\n"
    );
    if let Some(i) = xdp_if {
        s += &format!("  - {{ name: xo, kind: af_xdp, interface: {i}, ring_size: 256 }}\n");
    }
    s + &format!(
        "nfs:\n  - {{ name: fw, type: forwarder }}\nchains:\n  - {{ name: c, from: gen, nfs: [fw], to: {to} }}\n"
    )
}

#[test]
fn an_af_xdp_port_removed_under_load_gives_back_every_buffer_it_lent() {
    if !sluice_nic::has_net_caps() {
        eprintln!("skipped: needs root (CAP_NET_ADMIN) for a veth pair and BPF");
        return;
    }
    let pair = Pair::new(&format!("sxl{}", std::process::id() % 100_000));
    let d = Daemon::start();
    d.apply(&spec("xo", Some(&pair.0), None));
    assert!(pair.has_xdp(), "the port attached its program");
    d.wait_packets_in(50_000);
    let s = d.stats();
    let xo = port(&s, "xo");
    assert!(xo["tx_packets"].as_u64().unwrap() > 0, "{xo:#}");
    // The fill ring's 256 buffers at least, and they are the platform's.
    // Only those: the frames in transmission (a batch more) may complete
    // between the port's count and the pool's audit, which are taken at
    // different moments of a running worker (the audit is exact only when
    // none runs), so comparing the port's whole count with the audit
    // failed now and then under load.
    let held = xo["held_buffers"].as_u64().unwrap();
    assert!(held >= 256, "{xo:#}");
    assert!(
        s["buffers"]["held_by_platform"].as_u64().unwrap() >= 256,
        "{s:#}"
    );

    // Remove the port while the generator keeps sending; what remains
    // goes to the sink and stops after a known count.
    const COUNT: u64 = 100_000;
    let r = d.apply(&spec("out", None, Some(COUNT)));
    assert_eq!(r["diff"]["ports"]["removed"][0], "xo", "{r:#}");
    assert!(!pair.has_xdp(), "the program is detached with the port");
    let t = std::time::Instant::now();
    let s = loop {
        let s = d.stats();
        let done = port(&s, "out")["tx_packets"] == COUNT && s["unaccounted"] == 0;
        if done || t.elapsed() > std::time::Duration::from_secs(60) {
            break s;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(port(&s, "out")["tx_packets"], COUNT, "{s:#}");
    let b = &s["buffers"];
    assert_eq!(b["held_by_platform"], 0, "nothing left lent: {s:#}");
    assert_eq!(b["held_by_nfs"], 0, "{s:#}");
    assert_eq!(b["free"], b["capacity"], "{s:#}");
}
