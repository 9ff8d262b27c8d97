//! Two network namespaces joined through a pair of sluice tap ports, for
//! moving the NF between them from one daemon to another (`sluice bench
//! migrate` and `tests/migrate.rs`, which includes this file). Needs root.
//!
//! ```text
//!  [cli ns] tap <tag>c 10.77.0.1 ══ sluice: c2s/s2c through NF ══ tap <tag>s 10.77.0.2 [srv ns]
//! ```
//!
//! The daemon creates the taps (in the host namespace); [`TapEnv::attach`]
//! moves each into its namespace, gives it an address, a fixed MAC, a
//! permanent neighbour entry for the other side (no ARP through the NF)
//! and a long queue (frames wait there while the NF moves), and turns
//! IPv6 off (no router solicitations among the counted frames). The
//! namespaces go when the [`TapEnv`] drops.
#![allow(dead_code)] // the test and the benchmark use different parts

use std::net::UdpSocket;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Client address (in the client namespace).
pub const CLI_IP: &str = "10.77.0.1";
/// Server address (in the server namespace).
pub const SRV_IP: &str = "10.77.0.2";
const CLI_MAC: &str = "02:77:00:00:00:01";
const SRV_MAC: &str = "02:77:00:00:00:02";
/// Frames each tap queue holds while nobody reads it.
pub const TAP_QUEUE: u32 = 20_000;

fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run `{program}`: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The namespaces and tap names of one setup.
pub struct TapEnv {
    /// Client namespace.
    pub cli_ns: String,
    /// Server namespace.
    pub srv_ns: String,
    /// The tap on the client's side.
    pub cli_tap: String,
    /// The tap on the server's side.
    pub srv_tap: String,
}

impl TapEnv {
    /// Creates the namespaces (`tag`: at most 10 characters, unique to
    /// the caller).
    pub fn new(tag: &str) -> Result<TapEnv, String> {
        let env = TapEnv {
            cli_ns: format!("slm-{tag}-cli"),
            srv_ns: format!("slm-{tag}-srv"),
            cli_tap: format!("slm{tag}c"),
            srv_tap: format!("slm{tag}s"),
        };
        for ns in [&env.cli_ns, &env.srv_ns] {
            let _ = run("ip", &["netns", "del", ns]);
            run("ip", &["netns", "add", ns])?;
            run("ip", &["-n", ns, "link", "set", "lo", "up"])?;
            // /proc/sys/net is the namespace of the thread that writes.
            let ns = ns.clone();
            std::thread::spawn(move || -> Result<(), String> {
                sluice_sys::enter_netns(&ns).map_err(|e| format!("cannot enter {ns}: {e}"))?;
                for conf in ["all", "default"] {
                    let key = format!("/proc/sys/net/ipv6/conf/{conf}/disable_ipv6");
                    std::fs::write(&key, "1").map_err(|e| format!("{key}: {e}"))?;
                }
                Ok(())
            })
            .join()
            .map_err(|_| "the namespace thread panicked".to_string())??;
        }
        Ok(env)
    }

    /// The ports and chains of the setup, around NF `nf` (whose
    /// definition is the caller's).
    pub fn spec(&self, nf: &str) -> String {
        format!(
            "ports:\n  - {{ name: cli, kind: tap, interface: {} }}\n  - {{ name: srv, kind: tap, interface: {} }}\nchains:\n  - {{ name: c2s, from: cli, nfs: [{nf}], to: srv }}\n  - {{ name: s2c, from: srv, nfs: [{nf}], to: cli }}\n",
            self.cli_tap, self.srv_tap
        )
    }

    /// Moves the taps the daemon created into the namespaces and sets
    /// them up.
    pub fn attach(&self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        for tap in [&self.cli_tap, &self.srv_tap] {
            while run("ip", &["link", "show", tap]).is_err() {
                if Instant::now() > deadline {
                    return Err(format!("the daemon did not create tap {tap}"));
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let sides = [
            (
                &self.cli_ns,
                &self.cli_tap,
                CLI_IP,
                CLI_MAC,
                SRV_IP,
                SRV_MAC,
            ),
            (
                &self.srv_ns,
                &self.srv_tap,
                SRV_IP,
                SRV_MAC,
                CLI_IP,
                CLI_MAC,
            ),
        ];
        for (ns, tap, ip, mac, peer_ip, peer_mac) in sides {
            run("ip", &["link", "set", tap, "netns", ns])?;
            let queue = TAP_QUEUE.to_string();
            run(
                "ip",
                &[
                    "-n",
                    ns,
                    "link",
                    "set",
                    tap,
                    "address",
                    mac,
                    "txqueuelen",
                    &queue,
                ],
            )?;
            run(
                "ip",
                &["-n", ns, "addr", "add", &format!("{ip}/24"), "dev", tap],
            )?;
            run("ip", &["-n", ns, "link", "set", tap, "up"])?;
            run(
                "ip",
                &[
                    "-n",
                    ns,
                    "neigh",
                    "replace",
                    peer_ip,
                    "lladdr",
                    peer_mac,
                    "dev",
                    tap,
                    "nud",
                    "permanent",
                ],
            )?;
        }
        Ok(())
    }

    /// Frames `dev` received in namespace `ns` (what sluice wrote to it).
    pub fn rx_packets(ns: &str, dev: &str) -> Result<u64, String> {
        let out = run("ip", &["-n", ns, "-s", "-j", "link", "show", "dev", dev])?;
        let v: serde_json::Value =
            serde_json::from_str(&out).map_err(|e| format!("ip -j link: {e}"))?;
        v[0]["stats64"]["rx"]["packets"]
            .as_u64()
            .ok_or_else(|| format!("no rx counter for {dev}"))
    }

    /// Frames the server's tap received.
    pub fn delivered(&self) -> Result<u64, String> {
        Self::rx_packets(&self.srv_ns, &self.srv_tap)
    }
}

impl Drop for TapEnv {
    fn drop(&mut self) {
        for ns in [&self.cli_ns, &self.srv_ns] {
            let _ = run("ip", &["netns", "del", ns]);
        }
    }
}

/// A paced UDP stream from the client namespace to the server, over
/// `flows` destination ports from `first_port` on, at `rate` datagrams/s,
/// until `stop`; returns the datagrams the kernel took (`send` succeeded).
pub fn udp_stream(
    ns: &str,
    (first_port, flows): (u16, u16),
    rate: u64,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Result<u64, String>> {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        sluice_sys::enter_netns(&ns).map_err(|e| format!("cannot enter {ns}: {e}"))?;
        let s = UdpSocket::bind((CLI_IP, 0)).map_err(|e| e.to_string())?;
        let start = Instant::now();
        let mut sent = 0u64;
        let payload = [0x5au8; 18];
        while !stop.load(Ordering::Relaxed) {
            // Paced on the clock: catch up after a stall rather than drift.
            let due = start + Duration::from_nanos(sent * 1_000_000_000 / rate.max(1));
            let now = Instant::now();
            if due > now {
                std::thread::sleep((due - now).min(Duration::from_millis(1)));
                continue;
            }
            let port = first_port + (sent % u64::from(flows.max(1))) as u16;
            if s.send_to(&payload, (SRV_IP, port)).is_ok() {
                sent += 1;
            }
        }
        Ok(sent)
    })
}
