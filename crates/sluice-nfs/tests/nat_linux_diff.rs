//! Differential test against Linux: the same UDP exchanges go through an
//! nftables `snat` router in network namespaces and through `nat`, and the
//! externally visible behaviour must agree — port preservation, the
//! address used, a different port for a second host's clash, replies
//! reaching the right inside endpoint, unsolicited packets not getting in.
//! Linux picks a clashing host's new port at random and `nat` takes the
//! next free one, so that case compares "changed, in range", not values.
//!
//! Needs root, `ip`, `nft` and `python3`; skips with a message otherwise.
//! Namespaces are named after the test's pid and removed even on failure.

mod common;
mod nat_util;
use common::*;
use nat_util::*;

use std::process::{Command, Stdio};

use serde_json::json;
use sluice_nf::harness::Harness;
use sluice_nf::Verdict;

struct Netns(Vec<String>);

impl Drop for Netns {
    fn drop(&mut self) {
        for n in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

fn sh(cmd: &str) -> String {
    let o = Command::new("sh")
        .args(["-c", cmd])
        .output()
        .expect("sh runs");
    assert!(
        o.status.success(),
        "`{cmd}` failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Echo server in `ns` on 192.0.2.7:53: answers each datagram to its
/// source and prints `addr:port` of every source, for `secs` seconds.
const SERVER: &str = r#"
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("192.0.2.7", 53)); s.settimeout(0.2)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    try:
        d, a = s.recvfrom(2048)
    except socket.timeout:
        continue
    print("%s:%d" % a, flush=True)
    s.sendto(d, a)
"#;

/// Client in `ns`: from each `addr:port` argument, one datagram to
/// 192.0.2.7:53; prints the reply's source or `none`.
const CLIENT: &str = r#"
import socket, sys
for ep in sys.argv[1:]:
    a, p = ep.split(":")
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((a, int(p))); s.settimeout(2)
    s.sendto(b"differential", ("192.0.2.7", 53))
    try:
        d, r = s.recvfrom(2048)
        print("%s:%d" % r, flush=True)
    except socket.timeout:
        print("none", flush=True)
"#;

/// Unsolicited datagram from outside to 192.0.2.1:6000, and a listener
/// inside on 10.0.0.1:6000 that prints `got` if anything arrives.
const LISTEN: &str = r#"
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("10.0.0.1", 6000)); s.settimeout(1.5)
try:
    s.recvfrom(2048); print("got")
except socket.timeout:
    print("nothing")
"#;

#[test]
fn udp_snat_agrees_with_linux_nftables() {
    let root = sh("id -u").trim() == "0";
    if !root || !["ip", "nft", "python3"].iter().all(|t| have(t)) {
        eprintln!("skipping: needs root, ip, nft and python3 (network namespaces and nftables)");
        return;
    }
    let p = std::process::id();
    let (ins, rt, out) = (
        format!("natd-in-{p}"),
        format!("natd-rt-{p}"),
        format!("natd-out-{p}"),
    );
    let _guard = Netns(vec![ins.clone(), rt.clone(), out.clone()]);
    for n in [&ins, &rt, &out] {
        sh(&format!("ip netns add {n}"));
        sh(&format!("ip -n {n} link set lo up"));
    }
    sh(&format!(
        "ip link add ndi{p} netns {ins} type veth peer name ndr{p} netns {rt}"
    ));
    sh(&format!(
        "ip link add ndo{p} netns {out} type veth peer name ndw{p} netns {rt}"
    ));
    sh(&format!("ip -n {ins} addr add 10.0.0.1/24 dev ndi{p} && ip -n {ins} addr add 10.0.0.2/24 dev ndi{p} && ip -n {ins} link set ndi{p} up"));
    sh(&format!("ip -n {ins} route add default via 10.0.0.254"));
    sh(&format!(
        "ip -n {rt} addr add 10.0.0.254/24 dev ndr{p} && ip -n {rt} link set ndr{p} up"
    ));
    sh(&format!(
        "ip -n {rt} addr add 192.0.2.1/24 dev ndw{p} && ip -n {rt} link set ndw{p} up"
    ));
    sh(&format!(
        "ip -n {out} addr add 192.0.2.7/24 dev ndo{p} && ip -n {out} link set ndo{p} up"
    ));
    sh(&format!(
        "ip netns exec {rt} sysctl -qw net.ipv4.ip_forward=1"
    ));
    sh(&format!(
        "ip netns exec {rt} nft -f - <<'EOF'\ntable ip nat {{\n  chain post {{ type nat hook postrouting priority 100; oifname \"ndw{p}\" snat to 192.0.2.1; }}\n}}\nEOF"
    ));

    // Linux.
    let server = Command::new("ip")
        .args(["netns", "exec", &out, "python3", "-c", SERVER, "6"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let replies = sh(&format!(
        "ip netns exec {ins} python3 -c '{CLIENT}' 10.0.0.1:5000 10.0.0.2:5000 10.0.0.1:5000"
    ));
    let listener = Command::new("ip")
        .args(["netns", "exec", &ins, "python3", "-c", LISTEN])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    sh(&format!(
        "ip netns exec {out} python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b\"x\", (\"192.0.2.1\", 6000))'"
    ));
    let got_in = String::from_utf8_lossy(&listener.wait_with_output().unwrap().stdout)
        .trim()
        .to_string();
    let seen = String::from_utf8_lossy(&server.wait_with_output().unwrap().stdout).into_owned();
    let linux_seen: Vec<&str> = seen.lines().collect();
    let linux_replies: Vec<&str> = replies.lines().collect();

    // nat, same exchanges.
    let mut nf = build(
        "nat",
        json!({ "inside": ["10.0.0.0/24"], "pool": ["192.0.2.1"] }),
    );
    let mut h = Harness::new();
    let mut ours_seen = Vec::new();
    let mut ours_replies = Vec::new();
    for (host, port) in [("10.0.0.1", 5000), ("10.0.0.2", 5000), ("10.0.0.1", 5000)] {
        let o = h
            .run(nf.as_mut(), &[udp4(host, port, "192.0.2.7", 53)])
            .pop()
            .unwrap();
        assert_eq!(o.verdict, Verdict::Next);
        let (src, _) = tuple(&o.frame);
        let (a, pt) = src.split_once(':').unwrap();
        let back = h
            .run(
                nf.as_mut(),
                &[udp4("192.0.2.7", 53, a, pt.parse().unwrap())],
            )
            .pop()
            .unwrap();
        assert_eq!(back.verdict, Verdict::Next);
        assert_eq!(
            tuple(&back.frame).1,
            format!("{host}:{port}"),
            "the reply reaches the sender"
        );
        ours_seen.push(src);
        ours_replies.push("192.0.2.7:53".to_string());
    }
    let unsolicited = h
        .run(nf.as_mut(), &[udp4("192.0.2.7", 9, "192.0.2.1", 6000)])
        .pop()
        .unwrap();

    eprintln!("linux server saw {linux_seen:?}; nat sent {ours_seen:?}");
    // Compare.
    assert_eq!(
        linux_replies, ours_replies,
        "every exchange got its reply (linux: {linux_replies:?})"
    );
    assert_eq!(linux_seen.len(), 3, "linux server saw {seen}");
    assert_eq!(
        linux_seen[0], "192.0.2.1:5000",
        "linux preserves the first port"
    );
    assert_eq!(ours_seen[0], linux_seen[0]);
    assert_eq!(linux_seen[2], linux_seen[0], "linux reuses the mapping");
    assert_eq!(ours_seen[2], ours_seen[0]);
    for (who, ep) in [
        ("linux", linux_seen[1].to_string()),
        ("nat", ours_seen[1].clone()),
    ] {
        let (a, pt) = ep.split_once(':').unwrap();
        let pt: u16 = pt.parse().unwrap();
        assert_eq!(a, "192.0.2.1", "{who}");
        assert!(
            pt != 5000 && pt >= 1024,
            "{who}: the clashing host gets another port, got {pt}"
        );
    }
    assert_eq!(
        got_in, "nothing",
        "linux keeps the unsolicited datagram out"
    );
    assert!(
        matches!(unsolicited.verdict, Verdict::Drop(_)),
        "nat keeps it out too"
    );
}
