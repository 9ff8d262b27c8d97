//! A bump in the wire on one host: network namespaces `cli` and `srv`
//! whose veths end in a third namespace `wire`, where sluice (or a Linux
//! bridge, for comparison) joins them. Used by `sluice bench wire` and the
//! end-to-end tests (which include this file). Needs root.
//!
//! ```text
//!  [cli ns] c0 10.10.0.1 ── wc [wire ns: sluice or br0] ws ── s0 10.10.0.2 [srv ns]
//! ```
//!
//! [`WireEnv::new`] turns offloads (checksum, TSO/GSO, GRO) off on every
//! veth: a bump reading with AF_PACKET sees frames as the wire would carry
//! them. [`WireEnv::with_offloads`] leaves the veths' defaults on, as a
//! host has them: TCP then moves 64 KiB super-packets with partial
//! checksums, which a bump must take with `offload: true`. Everything
//! created is removed when the [`WireEnv`] drops, even after a failed
//! assertion.
#![allow(dead_code)] // the tests use a different subset than the benchmark

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Client address (in `cli`).
pub const CLI_IP: &str = "10.10.0.1";
/// Server address (in `srv`).
pub const SRV_IP: &str = "10.10.0.2";
/// The wire namespace's interface towards the client.
pub const WIRE_CLI: &str = "wc";
/// The wire namespace's interface towards the server.
pub const WIRE_SRV: &str = "ws";

/// Runs `ip ARGS`, failing with its stderr.
pub fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run `ip` (install iproute2): {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// A command run inside namespace `ns` (`ip netns exec`).
pub fn in_ns_cmd(ns: &str, program: &str) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns, program]);
    c
}

/// Runs `f` on a thread that has entered namespace `ns` (sockets it opens
/// live there); other threads are unaffected.
pub fn in_netns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<Result<T, String>> {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        sluice_sys::enter_netns(&ns).map_err(|e| format!("cannot enter namespace {ns}: {e}"))?;
        Ok(f())
    })
}

/// A child process killed (and reaped) on drop.
pub struct ChildGuard(pub Option<Child>);

impl ChildGuard {
    /// Takes the child out (to wait for it yourself).
    pub fn take(&mut self) -> Option<Child> {
        self.0.take()
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Interface counters from the kernel (`ip -s -j link`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkCounters {
    /// Frames received.
    pub rx_packets: u64,
    /// Frames sent.
    pub tx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
}

/// The namespaces and veths of one bump in the wire.
pub struct WireEnv {
    /// Client namespace.
    pub cli: String,
    /// Server namespace.
    pub srv: String,
    /// Namespace where the bump runs.
    pub wire: String,
    created: Vec<String>,
}

impl WireEnv {
    /// Creates the three namespaces and two veth pairs with offloads off;
    /// `tag` keeps concurrent environments apart.
    pub fn new(tag: &str) -> Result<WireEnv, String> {
        Self::with_offloads(tag, false)
    }

    /// As [`WireEnv::new`], with the veths' offloads left on when
    /// `offloads` (the kernel's defaults: checksum offload, TSO, GSO).
    pub fn with_offloads(tag: &str, offloads: bool) -> Result<WireEnv, String> {
        let id = format!("{tag}{}", std::process::id());
        let mut env = WireEnv {
            cli: format!("sl-cli-{id}"),
            srv: format!("sl-srv-{id}"),
            wire: format!("sl-wire-{id}"),
            created: Vec::new(),
        };
        for ns in [env.cli.clone(), env.srv.clone(), env.wire.clone()] {
            let _ = ip(&["netns", "del", &ns]);
            ip(&["netns", "add", &ns])?;
            env.created.push(ns.clone());
            // No IPv6 autoconfiguration chatter: the only frames on the
            // wire are the ones a test sends.
            for key in ["all", "default"] {
                let _ = in_ns_cmd(&ns, "sh")
                    .args([
                        "-c",
                        &format!("echo 1 > /proc/sys/net/ipv6/conf/{key}/disable_ipv6"),
                    ])
                    .status();
            }
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        }
        ip(&[
            "link", "add", "c0", "netns", &env.cli, "type", "veth", "peer", "name", WIRE_CLI,
            "netns", &env.wire,
        ])?;
        ip(&[
            "link", "add", "s0", "netns", &env.srv, "type", "veth", "peer", "name", WIRE_SRV,
            "netns", &env.wire,
        ])?;
        ip(&[
            "-n",
            &env.cli,
            "addr",
            "add",
            &format!("{CLI_IP}/24"),
            "dev",
            "c0",
        ])?;
        ip(&[
            "-n",
            &env.srv,
            "addr",
            "add",
            &format!("{SRV_IP}/24"),
            "dev",
            "s0",
        ])?;
        for (ns, dev) in [
            (&env.cli, "c0"),
            (&env.srv, "s0"),
            (&env.wire, WIRE_CLI),
            (&env.wire, WIRE_SRV),
        ] {
            if !offloads {
                offloads_off(ns, dev)?;
            }
            ip(&["-n", ns, "link", "set", dev, "up"])?;
        }
        Ok(env)
    }

    /// Kernel counters of `dev` in namespace `ns`.
    pub fn counters(&self, ns: &str, dev: &str) -> Result<LinkCounters, String> {
        let out = Command::new("ip")
            .args(["-n", ns, "-s", "-j", "link", "show", "dev", dev])
            .output()
            .map_err(|e| e.to_string())?;
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .map_err(|e| format!("ip -j link: {e}: {}", String::from_utf8_lossy(&out.stderr)))?;
        let s = &v[0]["stats64"];
        let get = |dir: &str, k: &str| s[dir][k].as_u64().unwrap_or(0);
        Ok(LinkCounters {
            rx_packets: get("rx", "packets"),
            tx_packets: get("tx", "packets"),
            rx_bytes: get("rx", "bytes"),
            tx_bytes: get("tx", "bytes"),
        })
    }

    /// Joins `wc` and `ws` with a Linux bridge (the baseline sluice is
    /// compared with); `nft_rules` (nftables `bridge` family rules for a
    /// forward chain) are loaded when given.
    pub fn bridge(&self, nft_rules: Option<&str>) -> Result<(), String> {
        let w = &self.wire;
        ip(&["-n", w, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", w, "link", "set", WIRE_CLI, "master", "br0"])?;
        ip(&["-n", w, "link", "set", WIRE_SRV, "master", "br0"])?;
        ip(&["-n", w, "link", "set", "br0", "up"])?;
        if let Some(rules) = nft_rules {
            let script = format!(
                "table bridge sluice_baseline {{\n  chain forward {{\n    type filter hook forward priority 0; policy accept;\n{rules}\n  }}\n}}\n"
            );
            let mut c = in_ns_cmd(w, "nft")
                .args(["-f", "-"])
                .stdin(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("cannot run nft (install nftables): {e}"))?;
            if let Some(mut stdin) = c.stdin.take() {
                use std::io::Write;
                stdin
                    .write_all(script.as_bytes())
                    .map_err(|e| e.to_string())?;
            }
            let out = c.wait_with_output().map_err(|e| e.to_string())?;
            if !out.status.success() {
                return Err(format!("nft: {}", String::from_utf8_lossy(&out.stderr)));
            }
        }
        Ok(())
    }

    /// Removes the bridge (and its ruleset) again.
    pub fn unbridge(&self) -> Result<(), String> {
        let _ = in_ns_cmd(&self.wire, "nft")
            .args(["delete", "table", "bridge", "sluice_baseline"])
            .stderr(Stdio::null())
            .status();
        ip(&["-n", &self.wire, "link", "del", "br0"])
    }

    /// Waits until namespace `ns` has at least `n` packet sockets open
    /// (the bump's ports are bound), for up to `timeout`.
    pub fn wait_packet_sockets(&self, n: usize, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            let out = in_ns_cmd(&self.wire, "cat")
                .arg("/proc/net/packet")
                .output()
                .map_err(|e| e.to_string())?;
            let count = String::from_utf8_lossy(&out.stdout)
                .lines()
                .count()
                .saturating_sub(1);
            if count >= n {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "sluice did not open {n} packet sockets within {timeout:?}"
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl WireEnv {
    /// Waits until every interface of `devs` in the wire namespace has an
    /// XDP program attached (an `af_xdp` bump is ready), for up to `timeout`.
    pub fn wait_xdp(&self, devs: &[&str], timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            let ready = devs.iter().all(|d| {
                Command::new("ip")
                    .args(["-n", &self.wire, "link", "show", "dev", d])
                    .output()
                    .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("prog/xdp"))
            });
            if ready {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "sluice did not attach XDP to {devs:?} within {timeout:?}"
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Turns off the offloads a software bump cannot honour.
pub fn offloads_off(ns: &str, dev: &str) -> Result<(), String> {
    let st = in_ns_cmd(ns, "ethtool")
        .args([
            "-K", dev, "tx", "off", "tso", "off", "gso", "off", "gro", "off",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run ethtool (install it: apt-get install ethtool): {e}"))?;
    if st.success() {
        Ok(())
    } else {
        Err(format!("ethtool -K {dev} failed in namespace {ns}"))
    }
}

impl Drop for WireEnv {
    fn drop(&mut self) {
        // Killing whatever still runs inside first: a namespace with
        // processes outlives `ip netns del`.
        for ns in &self.created {
            if let Ok(out) = Command::new("ip").args(["netns", "pids", ns]).output() {
                let me = std::process::id().to_string();
                for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                    if pid != me {
                        let _ = Command::new("kill").args(["-9", pid]).status();
                    }
                }
            }
            let _ = ip(&["netns", "del", ns]);
        }
    }
}
