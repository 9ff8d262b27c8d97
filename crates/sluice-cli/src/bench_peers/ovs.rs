//! Open vSwitch with its DPDK datapath (Debian's `openvswitch-switch-dpdk`),
//! started for one run in a directory of its own (database, sockets,
//! logs) and stopped when dropped; the host's own OVS, if any, is not
//! touched.
//!
//! One bridge (`datapath_type=netdev`) holds the two DPDK ports as
//! OpenFlow ports 1 and 2, with one flow per direction: `in_port=1,
//! actions=output:2` (and back for `bidir`); `macswap` swaps the
//! addresses through a register first. Its PMD thread polls on CPU 1,
//! its main thread stays on CPU 0, as testpmd's lcores do.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::work::Work;
use super::{Env, Running};

/// The DPDK build of the switch, as Debian installs it (the plain
/// `ovs-vswitchd` has no DPDK datapath).
const VSWITCHD: &str = "/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk";
const SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

pub(crate) struct Ovs {
    dir: PathBuf,
    vswitchd: u32,
    ovsdb: Option<u32>,
}

impl Ovs {
    /// Why it cannot run here, if it cannot.
    pub fn missing() -> Option<String> {
        (!Path::new(VSWITCHD).exists() || !super::on_path("ovs-vsctl")).then(|| {
            "OVS-DPDK is not installed (Debian: apt-get install openvswitch-switch-dpdk)".into()
        })
    }

    pub fn start(work: Work, env: &Env) -> Result<Ovs, String> {
        let dir = std::env::temp_dir().join(format!("sluice-bench-ovs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let mut ovs = Ovs {
            dir,
            vswitchd: 0,
            ovsdb: None,
        };
        ovs.bring_up(work, env)?;
        Ok(ovs)
    }

    fn bring_up(&mut self, work: Work, env: &Env) -> Result<(), String> {
        let d = self.dir.clone();
        let db = d.join("conf.db");
        let sock = format!("unix:{}", d.join("db.sock").display());
        self.tool("ovsdb-tool", &["create", &db.to_string_lossy(), SCHEMA])?;
        self.tool(
            "ovsdb-server",
            &[
                &db.to_string_lossy(),
                &format!("--remote=punix:{}", d.join("db.sock").display()),
                &format!("--pidfile={}", d.join("ovsdb-server.pid").display()),
                &format!("--log-file={}", d.join("ovsdb-server.log").display()),
                "--detach",
            ],
        )?;
        self.ovsdb = read_pid(&d.join("ovsdb-server.pid"));
        self.vsctl(&["--no-wait", "init"])?;
        let extra = format!("--no-pci {}", work.vdev_args(&env.pcap).join(" "));
        self.vsctl(&[
            "--no-wait",
            "set",
            "Open_vSwitch",
            ".",
            "other_config:dpdk-init=true",
            &format!("other_config:dpdk-extra={extra}"),
            "other_config:dpdk-socket-mem=1024",
            "other_config:dpdk-lcore-mask=0x1",
            "other_config:pmd-cpu-mask=0x2",
        ])?;
        self.tool(
            VSWITCHD,
            &[
                &sock,
                &format!("--pidfile={}", d.join("vswitchd.pid").display()),
                &format!("--log-file={}", d.join("vswitchd.log").display()),
                "--detach",
            ],
        )
        .map_err(|e| format!("{e}\n{}", self.log_errors()))?;
        self.vswitchd = read_pid(&d.join("vswitchd.pid")).ok_or("ovs-vswitchd wrote no pid")?;
        let [(dev0, _), (dev1, _)] = work.devices(&env.pcap);
        self.vsctl(&[
            "add-br",
            "br0",
            "--",
            "set",
            "bridge",
            "br0",
            "datapath_type=netdev",
        ])?;
        for (port, dev, ofport) in [("p0", dev0, 1), ("p1", dev1, 2)] {
            self.vsctl(&[
                "add-port",
                "br0",
                port,
                "--",
                "set",
                "Interface",
                port,
                "type=dpdk",
                &format!("options:dpdk-devargs={dev}"),
                &format!("ofport_request={ofport}"),
            ])
            .map_err(|e| format!("{e}\n{}", self.log_errors()))?;
        }
        let mgmt = self.mgmt();
        self.tool("ovs-ofctl", &["del-flows", &mgmt])?;
        for flow in flows(work) {
            self.tool("ovs-ofctl", &["add-flow", &mgmt, &flow])?;
        }
        Ok(())
    }

    /// `ovs-vsctl` on this instance's database.
    fn vsctl(&self, args: &[&str]) -> Result<String, String> {
        let db = format!("--db=unix:{}", self.dir.join("db.sock").display());
        let mut all = vec![db.as_str(), "--timeout=60"];
        all.extend_from_slice(args);
        self.tool("ovs-vsctl", &all)
    }

    fn mgmt(&self) -> String {
        format!("unix:{}", self.dir.join("br0.mgmt").display())
    }

    /// Runs an OVS tool with this instance's directories; its stdout.
    fn tool(&self, program: &str, args: &[&str]) -> Result<String, String> {
        let out = Command::new(program)
            .args(args)
            .env("OVS_RUNDIR", &self.dir)
            .env("OVS_LOGDIR", &self.dir)
            .env("OVS_DBDIR", &self.dir)
            .output()
            .map_err(|e| format!("cannot run {program}: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "{program} {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The errors ovs-vswitchd logged (why DPDK or a port refused).
    fn log_errors(&self) -> String {
        std::fs::read_to_string(self.dir.join("vswitchd.log"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("|ERR|") || l.contains("|EMER|"))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// The OpenFlow rules of a work.
pub(crate) fn flows(work: Work) -> Vec<String> {
    let fwd = match work {
        // Ethernet addresses are 48 bits: through a 128-bit register.
        Work::Macswap => "move:NXM_OF_ETH_DST[]->NXM_NX_XXREG0[0..47],\
             move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],\
             move:NXM_NX_XXREG0[0..47]->NXM_OF_ETH_SRC[],output:2"
            .to_string(),
        _ => "output:2".to_string(),
    };
    let mut f = vec![format!("in_port=1,actions={fwd}")];
    if work.both_ways() {
        f.push("in_port=2,actions=output:1".into());
    }
    f
}

impl Running for Ovs {
    fn pid(&self) -> u32 {
        self.vswitchd
    }

    fn tx(&mut self) -> Result<[u64; 2], String> {
        let text = self.tool("ovs-ofctl", &["dump-ports", &self.mgmt()])?;
        tx_packets(&text).ok_or_else(|| format!("cannot read OVS's port counters:\n{text}"))
    }
}

impl Drop for Ovs {
    fn drop(&mut self) {
        // The switch holds the huge pages and the devices: it must be gone
        // before the next system starts.
        for pid in [Some(self.vswitchd), self.ovsdb].into_iter().flatten() {
            if let Some(p) = sluice_sys::Pid::from_raw(pid as i32) {
                let _ = sluice_sys::terminate(p);
                let t0 = Instant::now();
                while !sluice_sys::process_gone(p) && t0.elapsed() < Duration::from_secs(10) {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn read_pid(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Packets OpenFlow ports 1 and 2 transmitted, from `ovs-ofctl
/// dump-ports` (`port  N: rx pkts=...` then a line `tx pkts=COUNT, ...`).
pub(crate) fn tx_packets(text: &str) -> Option<[u64; 2]> {
    let mut tx = [None, None];
    let mut port = None;
    for l in text.lines() {
        let l = l.trim();
        if let Some(rest) = l.strip_prefix("port") {
            port = rest
                .split(':')
                .next()
                .and_then(|p| p.trim().parse::<usize>().ok());
        } else if let Some(rest) = l.strip_prefix("tx pkts=") {
            let n = rest.split(',').next()?.parse::<u64>().ok()?;
            if let Some(slot) = port
                .and_then(|p| p.checked_sub(1))
                .and_then(|i| tx.get_mut(i))
            {
                *slot = Some(n);
            }
        }
    }
    Some([tx[0]?, tx[1]?])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What OVS 3.1 printed on this machine.
    const DUMP: &str = "OFPST_PORT reply (xid=0x2): 3 ports
  port LOCAL: rx pkts=0, bytes=0, drop=0, errs=0, frame=0, over=0, crc=0
           tx pkts=0, bytes=0, drop=0, errs=0, coll=0
  port  1: rx pkts=480436512, bytes=0, drop=0, errs=0, frame=?, over=?, crc=?
           tx pkts=12, bytes=0, drop=0, errs=0, coll=?
  port  2: rx pkts=0, bytes=0, drop=0, errs=0, frame=?, over=?, crc=?
           tx pkts=85456672, bytes=0, drop=0, errs=0, coll=?";

    #[test]
    fn port_counters_are_read_per_openflow_port() {
        assert_eq!(tx_packets(DUMP), Some([12, 85_456_672]));
    }

    #[test]
    fn missing_or_garbled_counters_are_refused() {
        let no_port2: String = DUMP.lines().take(5).collect::<Vec<_>>().join("\n");
        assert_eq!(tx_packets(&no_port2), None);
        assert_eq!(tx_packets(&DUMP.replace("tx pkts=12,", "tx pkts=x,")), None);
    }

    #[test]
    fn each_work_gets_its_flows() {
        assert_eq!(flows(Work::Io), ["in_port=1,actions=output:2"]);
        assert_eq!(flows(Work::Pcap), flows(Work::Io));
        assert_eq!(flows(Work::Bidir).len(), 2);
        assert!(flows(Work::Bidir)[1].starts_with("in_port=2,"));
        let swap = &flows(Work::Macswap)[0];
        assert!(
            swap.contains("NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[]"),
            "{swap}"
        );
        assert!(swap.ends_with("output:2"));
    }
}
