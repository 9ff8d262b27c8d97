//! Differential test against Linux: the same random table of a few
//! thousand IPv4 and IPv6 routes is installed in a network namespace (on
//! dummy interfaces, or veth pairs where the dummy module is missing,
//! with `ip -batch`) and in the router; `ip route get`
//! and the router must choose the same next hop and device for random
//! destinations. Needs root and iproute2; skips with a message otherwise.
//! The namespace is deleted even when the test fails.

mod common;

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::process::Command;

use serde_json::json;
use sluice_nf::{BuildContext, NfId, PortId, Resolver};
use sluice_nfs::router::compile;
use sluice_spec::ConfigNode;

const DEVS: usize = 4;

struct DumResolver;
impl Resolver for DumResolver {
    fn nf(&self, _: &str) -> Option<NfId> {
        None
    }
    fn port(&self, name: &str) -> Option<PortId> {
        let n: u16 = name.strip_prefix("dum")?.parse().ok()?;
        (usize::from(n) < DEVS).then_some(PortId(n))
    }
    /// Every port here both receives and transmits.
    fn input_port(&self, name: &str) -> Option<PortId> {
        self.port(name)
    }
}

/// Deletes the namespace when dropped (also on panic).
struct Netns(String);
impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn ip(ns: &str, args: &[&str]) -> std::process::Output {
    Command::new("ip")
        .arg("-n")
        .arg(ns)
        .args(args)
        .output()
        .expect("ip runs")
}

fn ok(out: std::process::Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn can_run() -> Result<(), String> {
    let uid = Command::new("id")
        .arg("-u")
        .output()
        .map_err(|e| e.to_string())?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return Err("not root".into());
    }
    Command::new("ip")
        .arg("-V")
        .output()
        .map_err(|e| format!("no iproute2: {e}"))?;
    Ok(())
}

fn gw4(d: usize) -> String {
    format!("100.64.{d}.2")
}
fn gw6(d: usize) -> String {
    format!("fd00:0:0:{d}::2")
}

#[test]
fn lookups_match_linux_ip_route_get() {
    if let Err(why) = can_run() {
        eprintln!("skipping the Linux differential test: {why} (needs root and iproute2)");
        return;
    }
    let ns = Netns(format!("sluice-rt-{}", std::process::id()));
    let _ = Command::new("ip").args(["netns", "del", &ns.0]).output();
    let out = Command::new("ip")
        .args(["netns", "add", &ns.0])
        .output()
        .unwrap();
    if !out.status.success() {
        eprintln!(
            "skipping the Linux differential test: cannot create a network namespace: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    // Room for thousands of IPv6 routes on older kernels.
    let _ = Command::new("ip")
        .args(["netns", "exec", &ns.0, "sh", "-c"])
        .arg("echo 1000000 > /proc/sys/net/ipv6/route/max_size")
        .output();

    // Dummy interfaces where the kernel has the module, else veth pairs
    // (both ends in the namespace, up, so the links have carrier).
    let link = if ip(&ns.0, &["link", "add", "probe0", "type", "dummy"])
        .status
        .success()
    {
        "type dummy"
    } else {
        "type veth peer name peer{d}"
    };
    let mut setup = String::from("link set lo up\n");
    let mut interfaces = Vec::new();
    for d in 0..DEVS {
        writeln!(
            setup,
            "link add dum{d} {}",
            link.replace("{d}", &d.to_string())
        )
        .unwrap();
        writeln!(setup, "link set dum{d} up").unwrap();
        if link.starts_with("type veth") {
            writeln!(setup, "link set peer{d} up").unwrap();
        }
        writeln!(setup, "addr add 100.64.{d}.1/24 dev dum{d}").unwrap();
        writeln!(setup, "addr add fd00:0:0:{d}::1/64 dev dum{d} nodad").unwrap();
        interfaces.push(json!({
            "port": format!("dum{d}"),
            "mac": format!("02:00:00:00:0{d}:00"),
            "addresses": [format!("100.64.{d}.1/24"), format!("fd00:0:0:{d}::1/64")],
        }));
    }

    // Random routes clustered under a few roots so they nest; far from
    // the gateways' subnets (a route covering a gateway would make Linux
    // refuse the routes through it).
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let mut routes: Vec<String> = vec![
        format!("0.0.0.0/0 via {} dev dum0", gw4(0)),
        format!("::/0 via {} dev dum0", gw6(0)),
    ];
    let roots4 = [0x0a00_0000u32, 0x0a01_0000, 0xac10_0000, 0xc633_6400];
    for _ in 0..3000 {
        let r = rng.next();
        let root = roots4[(r % 4) as usize];
        let len = 8 + ((r >> 8) % 25) as u32;
        let bits = (rng.next() as u32) >> (8 + (r >> 20) as u32 % 16);
        let a = (root ^ bits) & if len == 0 { 0 } else { u32::MAX << (32 - len) };
        let d = ((r >> 32) % DEVS as u64) as usize;
        let via = if (r >> 40) % 4 == 0 {
            String::new()
        } else {
            format!("via {} ", gw4(d))
        };
        routes.push(format!("{}/{len} {via}dev dum{d}", Ipv4Addr::from(a)));
    }
    let roots6 = [
        0x2001_0db8u128 << 96,
        0x2001_0db8_00aau128 << 80,
        0x2a00u128 << 112,
    ];
    for _ in 0..2000 {
        let r = rng.next();
        let root = roots6[(r % 3) as usize];
        let len = 16 + ((r >> 8) % 113) as u32;
        let bits =
            ((rng.next() as u128) << 64 | rng.next() as u128) >> (16 + (r >> 20) as u32 % 64);
        let a = (root ^ bits) & (u128::MAX << (128 - len));
        let d = ((r >> 32) % DEVS as u64) as usize;
        let via = if (r >> 40) % 4 == 0 {
            String::new()
        } else {
            format!("via {} ", gw6(d))
        };
        routes.push(format!("{}/{len} {via}dev dum{d}", Ipv6Addr::from(a)));
    }
    for r in &routes {
        writeln!(setup, "route replace {r}").unwrap();
    }
    let dir = std::env::temp_dir().join(format!("sluice-rt-diff-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let setup_path = dir.join("setup.batch");
    std::fs::write(&setup_path, &setup).unwrap();
    ok(
        ip(&ns.0, &["-batch", setup_path.to_str().unwrap()]),
        "ip -batch setup",
    );

    // Queries: random addresses under the roots (so that they hit the
    // nested routes), plus a few anywhere.
    let mut queries: Vec<IpAddr> = Vec::new();
    for i in 0..3000 {
        let r = rng.next();
        let a = if i % 10 == 0 {
            (r as u32 % 0xdf00_0000) | 0x0100_0000
        } else {
            roots4[(r % 4) as usize] ^ ((rng.next() as u32) >> (8 + (r >> 20) as u32 % 12))
        };
        let a = Ipv4Addr::from(a);
        if a.is_loopback() || a.octets()[0] == 100 || a.octets()[0] == 0 || a.octets()[3] == 255 {
            continue;
        }
        queries.push(a.into());
    }
    for _ in 0..3000 {
        let r = rng.next();
        let bits =
            ((rng.next() as u128) << 64 | rng.next() as u128) >> (16 + (r >> 20) as u32 % 80);
        queries.push(Ipv6Addr::from(roots6[(r % 3) as usize] ^ bits).into());
    }
    let mut q = String::new();
    for a in &queries {
        writeln!(q, "route get {a}").unwrap();
    }
    let q_path = dir.join("query.batch");
    std::fs::write(&q_path, &q).unwrap();
    let got = ok(
        ip(&ns.0, &["-batch", q_path.to_str().unwrap()]),
        "ip route get",
    );
    std::fs::remove_dir_all(&dir).unwrap();
    let answers: Vec<&str> = got
        .lines()
        .filter(|l| !l.starts_with(char::is_whitespace))
        .collect();
    assert_eq!(answers.len(), queries.len(), "one answer per query");

    let node = ConfigNode::from_json(json!({ "interfaces": interfaces, "routes": routes }));
    let ctx = BuildContext {
        name: "r".into(),
        config: &node,
        resolver: &DumResolver,
        flow_capacity: 16,
    };
    let router = compile(&ctx).unwrap_or_else(|e| panic!("{e}"));
    let (mut compared, mut with_gw) = (0, 0);
    for (a, line) in queries.iter().zip(&answers) {
        let w: Vec<&str> = line.split_whitespace().collect();
        if matches!(w[0], "local" | "broadcast" | "multicast" | "unreachable") {
            continue;
        }
        let after = |k: &str| w.iter().position(|x| *x == k).map(|i| w[i + 1]);
        let linux_dev = after("dev").expect("a dev in every answer");
        let linux_via = after("via");
        let hops = router.table().nexthops(*a);
        assert_eq!(hops.len(), 1, "{a}: {line}");
        let iface = router.iface_name(hops[0].iface as usize);
        let via = hops[0].gateway.map(|g| match a {
            IpAddr::V4(_) => Ipv4Addr::from(g as u32).to_string(),
            IpAddr::V6(_) => Ipv6Addr::from(g).to_string(),
        });
        assert_eq!(
            (iface, via.as_deref()),
            (linux_dev, linux_via),
            "{a}: linux says `{line}`"
        );
        compared += 1;
        with_gw += usize::from(linux_via.is_some());
    }
    assert!(compared > 5000, "compared {compared}");
    assert!(
        with_gw > 1000 && with_gw < compared,
        "{with_gw} of {compared}"
    );
    eprintln!("{compared} lookups agree with Linux ({with_gw} through a gateway)");
}
