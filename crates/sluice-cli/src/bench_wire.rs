//! `sluice bench wire`: a bump in the wire between two network namespaces
//! (see [`crate::wire_env`]), measured in one run against plain Linux
//! forwarding of the same traffic through a bridge with the equivalent
//! nftables rule.
//!
//! - **64 B UDP**: 16 flows of minimum-size frames sent flat out with
//!   `sendmmsg` from the client namespace; the rate is what the server's
//!   interface receives (kernel counter), after a 0.5 s warm-up.
//! - **TCP**: one iperf3 stream (if iperf3 is installed).
//! - **Latency**: round trips of single UDP datagrams echoed by the server
//!   (no other traffic), p50 and p99.
//!
//! The chain is one ACL with one rule (drop TCP to port 8081), the bridge
//! gets `tcp dport 8081 drop` in an nftables bridge forward chain.
//!
//! With `--offloads on` (the default) the veths keep the kernel's default
//! offloads (checksum, TSO, GSO), as a host's interfaces have them, and
//! sluice's `af_packet` ports get `offload: true`: TCP crosses both bumps
//! as 64 KiB super-packets, the ACL judging one per super-packet. With
//! `--offloads off` everything moves at wire size (the earlier setup).
//! AF_XDP ports take no offloads: `--port af_xdp` always runs with them off.

use std::net::UdpSocket;
use std::process::{ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::cli::{IsolationArg, OnOff, RingArg, WireArgs, WirePortArg};
use crate::wire_env::{
    in_netns, in_ns_cmd, ChildGuard, WireEnv, CLI_IP, SRV_IP, WIRE_CLI, WIRE_SRV,
};

/// UDP payload giving a 60 B frame (64 B on the wire with the FCS).
const UDP_PAYLOAD: usize = 18;
const FLOWS: u16 = 16;
const WARMUP: Duration = Duration::from_millis(500);

#[derive(Debug, Serialize)]
struct WireResult {
    port: &'static str,
    ring: &'static str,
    isolation: &'static str,
    /// Offloads on the veths and `offload: true` on sluice's ports.
    offloads: bool,
    /// The two headline figures of one run: sluice's TCP throughput
    /// (Gbit/s) and its ratios to Linux for TCP and for 64 B packets.
    tcp_gbps: Option<f64>,
    tcp_vs_linux: Option<f64>,
    pps_vs_linux: f64,
    packet_size: u16,
    duration_s: f64,
    sluice_mpps: f64,
    linux_mpps: f64,
    ratio: f64,
    /// What the sender managed to offer during each run (Mpps).
    sluice_offered_mpps: f64,
    linux_offered_mpps: f64,
    sluice_tcp_gbps: Option<f64>,
    linux_tcp_gbps: Option<f64>,
    tcp_ratio: Option<f64>,
    /// UDP echo round trip through the bump, µs (p50, p99).
    sluice_rtt_us: [f64; 2],
    linux_rtt_us: [f64; 2],
    sluice_leaked_buffers: u64,
    sluice_drops_total: u64,
    /// Super-packets sluice's ports received whole, and how many of them
    /// it had to cut into segments (0 when every NF takes super-packets).
    sluice_gso_rx: u64,
    sluice_gso_split: u64,
}

struct Measured {
    mpps: f64,
    offered_mpps: f64,
    tcp_gbps: Option<f64>,
    rtt_us: [f64; 2],
}

/// Round trips per latency measurement.
const PINGS: usize = 2000;
const ECHO_PORT: u16 = 7;

/// Runs `sluice bench wire`.
pub fn run(a: WireArgs) -> ExitCode {
    if !sluice_nic::has_net_caps() {
        eprintln!(
            "sluice: bench wire creates network namespaces and raw sockets: run it as root \
             (or with CAP_NET_ADMIN and CAP_NET_RAW)"
        );
        return ExitCode::from(1);
    }
    match bench(&a) {
        Ok(r) => {
            if a.json {
                crate::print_stdout(&(serde_json::to_string_pretty(&r).unwrap_or_default() + "\n"));
            } else {
                let tcp = |g: Option<f64>| g.map_or("n/a".to_string(), |g| format!("{g:.2}"));
                crate::print_stdout(&format!(
                    "bump in the wire, {} ports (ring {}, offloads {}), ACL {}, 64 B UDP, {:.0} s each (offered {:.2} / {:.2} Mpps)\n\
                     {:<8} {:>10} {:>12} {:>22}\n\
                     {:<8} {:>10.3} {:>12} {:>10.1} {:>11.1}\n\
                     {:<8} {:>10.3} {:>12} {:>10.1} {:>11.1}\n\
                     {:<8} {:>10.2} {:>12}\n",
                    r.port,
                    r.ring,
                    if r.offloads { "on" } else { "off" },
                    r.isolation,
                    r.duration_s,
                    r.sluice_offered_mpps,
                    r.linux_offered_mpps,
                    "",
                    "UDP Mpps",
                    "TCP Gbit/s",
                    "RTT p50 / p99 µs",
                    "sluice",
                    r.sluice_mpps,
                    tcp(r.sluice_tcp_gbps),
                    r.sluice_rtt_us[0],
                    r.sluice_rtt_us[1],
                    "linux",
                    r.linux_mpps,
                    tcp(r.linux_tcp_gbps),
                    r.linux_rtt_us[0],
                    r.linux_rtt_us[1],
                    "ratio",
                    r.ratio,
                    r.tcp_ratio.map_or("n/a".to_string(), |t| format!("{t:.2}")),
                ));
            }
            if r.sluice_leaked_buffers > 0 {
                return ExitCode::from(3);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("sluice: bench wire: {e}");
            ExitCode::from(1)
        }
    }
}

fn bench(a: &WireArgs) -> Result<WireResult, String> {
    let d = a.duration.duration().max(Duration::from_millis(500));
    let offloads = a.offloads == OnOff::On && a.port == WirePortArg::AfPacket;
    let env = WireEnv::with_offloads("b", offloads)?;
    let ring = match a.ring {
        RingArg::V3 => "v3",
        RingArg::V2 => "v2",
    };
    let (port, opts) = match a.port {
        WirePortArg::AfPacket if offloads => {
            ("af_packet", format!(", ring: {ring}, offload: true"))
        }
        WirePortArg::AfPacket => ("af_packet", format!(", ring: {ring}")),
        WirePortArg::AfXdp => ("af_xdp", String::new()),
    };
    let ring = if a.port == WirePortArg::AfPacket {
        ring
    } else {
        "-"
    };
    let isolation = match a.isolation {
        IsolationArg::Inline => "inline",
        IsolationArg::Process => "process",
    };

    env.bridge(Some("    tcp dport 8081 drop"))?;
    let linux = measure(&env, d)?;
    env.unbridge()?;

    let dir = tempfile_dir()?;
    let spec = dir.join("wire.yaml");
    std::fs::write(
        &spec,
        format!(
            "settings:\n  buffers: 16384\n  batch: 32\nports:\n  - {{ name: cli, kind: {port}, interface: {WIRE_CLI}{opts} }}\n  - {{ name: srv, kind: {port}, interface: {WIRE_SRV}{opts} }}\nnfs:\n  - name: acl\n    type: acl\n    isolation: {isolation}\n    config:\n      default: accept\n      rules:\n        - {{ action: drop, proto: tcp, dst_port: 8081 }}\nchains:\n  - {{ name: wire, from: cli, nfs: [acl], to: srv, bidirectional: true }}\n"
        ),
    )
    .map_err(|e| format!("cannot write the spec: {e}"))?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let child = in_ns_cmd(&env.wire, exe.to_str().unwrap_or("sluice"))
        .args(["run", spec.to_str().unwrap_or_default(), "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start sluice: {e}"))?;
    let mut guard = ChildGuard(Some(child));
    match a.port {
        WirePortArg::AfPacket => env.wait_packet_sockets(2, Duration::from_secs(20))?,
        WirePortArg::AfXdp => env.wait_xdp(&[WIRE_CLI, WIRE_SRV], Duration::from_secs(20))?,
    }
    let sluice = measure(&env, d);
    let child = guard.take().ok_or("sluice vanished")?;
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(&dir);
    let sluice = sluice?;
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|_| {
        format!(
            "sluice did not report: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    let ratio = |s: f64, l: f64| if l > 0.0 { s / l } else { 0.0 };
    let tcp_ratio = sluice
        .tcp_gbps
        .zip(linux.tcp_gbps)
        .map(|(s, l)| ratio(s, l));
    let port_sum = |key: &str| -> u64 {
        report["ports"]
            .as_array()
            .map(|ps| ps.iter().filter_map(|p| p[key].as_u64()).sum())
            .unwrap_or(0)
    };
    Ok(WireResult {
        port,
        ring,
        isolation,
        offloads,
        tcp_gbps: sluice.tcp_gbps,
        tcp_vs_linux: tcp_ratio,
        pps_vs_linux: ratio(sluice.mpps, linux.mpps),
        packet_size: 64,
        duration_s: d.as_secs_f64(),
        sluice_mpps: sluice.mpps,
        linux_mpps: linux.mpps,
        ratio: ratio(sluice.mpps, linux.mpps),
        sluice_offered_mpps: sluice.offered_mpps,
        linux_offered_mpps: linux.offered_mpps,
        sluice_tcp_gbps: sluice.tcp_gbps,
        linux_tcp_gbps: linux.tcp_gbps,
        tcp_ratio,
        sluice_rtt_us: sluice.rtt_us,
        linux_rtt_us: linux.rtt_us,
        sluice_leaked_buffers: report["leaked_buffers"].as_u64().unwrap_or(u64::MAX),
        sluice_drops_total: report["drops_total"].as_u64().unwrap_or(0),
        sluice_gso_rx: port_sum("gso_rx"),
        sluice_gso_split: port_sum("gso_split"),
    })
}

fn tempfile_dir() -> Result<std::path::PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("sluice-bench-wire-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}

/// 64 B UDP rate and TCP throughput from `cli` to `srv` through whatever
/// joins them now.
fn measure(env: &WireEnv, d: Duration) -> Result<Measured, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let blaster = in_netns(&env.cli, move || -> Result<(), String> {
        let socks: Vec<UdpSocket> = (0..FLOWS)
            .map(|_| {
                let s = UdpSocket::bind((CLI_IP, 0))?;
                s.connect((SRV_IP, 9))?;
                Ok(s)
            })
            .collect::<std::io::Result<_>>()
            .map_err(|e| format!("cannot open the UDP sender: {e}"))?;
        let payload = [0u8; UDP_PAYLOAD];
        while !stop2.load(Ordering::Relaxed) {
            for s in &socks {
                // Full socket buffers just mean the path is saturated.
                let _ = sluice_sys::send_copies(s, &payload, 64);
            }
        }
        Ok(())
    });
    std::thread::sleep(WARMUP);
    let sent0 = env.counters(&env.cli, "c0")?;
    let got0 = env.counters(&env.srv, "s0")?;
    let t0 = std::time::Instant::now();
    std::thread::sleep(d);
    let sent1 = env.counters(&env.cli, "c0")?;
    let got1 = env.counters(&env.srv, "s0")?;
    let secs = t0.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    blaster
        .join()
        .map_err(|_| "the UDP sender panicked".to_string())???;
    // Let the queues drain before the TCP run.
    std::thread::sleep(Duration::from_millis(300));
    let rtt_us = udp_rtt(env)?;
    Ok(Measured {
        mpps: (got1.rx_packets - got0.rx_packets) as f64 / secs / 1e6,
        offered_mpps: (sent1.tx_packets - sent0.tx_packets) as f64 / secs / 1e6,
        tcp_gbps: iperf3(env, d),
        rtt_us,
    })
}

/// p50 and p99 of [`PINGS`] UDP echo round trips, in µs.
fn udp_rtt(env: &WireEnv) -> Result<[f64; 2], String> {
    let echo = in_netns(&env.srv, || UdpSocket::bind((SRV_IP, ECHO_PORT)))
        .join()
        .map_err(|_| "echo setup panicked".to_string())??
        .map_err(|e| format!("cannot bind the echo server: {e}"))?;
    echo.set_read_timeout(Some(Duration::from_millis(200)))
        .map_err(|e| e.to_string())?;
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let server = std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        while !stop2.load(Ordering::Relaxed) {
            if let Ok((n, from)) = echo.recv_from(&mut buf) {
                let _ = echo.send_to(&buf[..n], from);
            }
        }
    });
    let client = in_netns(&env.cli, || -> std::io::Result<Vec<f64>> {
        let s = UdpSocket::bind((CLI_IP, 0))?;
        s.connect((SRV_IP, ECHO_PORT))?;
        s.set_read_timeout(Some(Duration::from_millis(100)))?;
        let mut rtts = Vec::with_capacity(PINGS);
        let mut buf = [0u8; 64];
        for i in 0..PINGS as u32 + 50 {
            let t = std::time::Instant::now();
            s.send(&i.to_be_bytes())?;
            // A lost datagram just times out and is not counted. Replies to
            // earlier pings that come late (a backlog from the UDP run still
            // draining) are skipped: reading one reply per ping would
            // otherwise stay behind forever and match nothing.
            while let Ok(n) = s.recv(&mut buf) {
                if n == 4 && buf[..4] == i.to_be_bytes() {
                    if i >= 50 {
                        rtts.push(t.elapsed().as_secs_f64() * 1e6);
                    }
                    break;
                }
                if t.elapsed() > Duration::from_millis(100) {
                    break;
                }
            }
        }
        Ok(rtts)
    })
    .join();
    stop.store(true, Ordering::Relaxed);
    let _ = server.join();
    let mut rtts = client
        .map_err(|_| "the echo client panicked".to_string())??
        .map_err(|e| format!("echo client: {e}"))?;
    if rtts.is_empty() {
        return Err("no UDP echo came back through the bump".into());
    }
    rtts.sort_by(f64::total_cmp);
    let pct = |p: f64| rtts[((rtts.len() - 1) as f64 * p) as usize];
    Ok([pct(0.5), pct(0.99)])
}

fn iperf3(env: &WireEnv, d: Duration) -> Option<f64> {
    let _server = ChildGuard(Some(
        in_ns_cmd(&env.srv, "iperf3")
            .args(["-s", "-1", "-B", SRV_IP])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?,
    ));
    std::thread::sleep(Duration::from_millis(300));
    let out = in_ns_cmd(&env.cli, "iperf3")
        .args([
            "-c",
            SRV_IP,
            "-t",
            &format!("{:.0}", d.as_secs_f64().max(1.0)),
            "-J",
        ])
        .output()
        .ok()?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .map(|b| b / 1e9)
}
