//! sluice itself: a daemon (this binary, started as a child) given the
//! work as a spec through its API, as a user's deployment would be, with
//! one forwarder NF between the two DPDK ports, inline in the worker or in
//! its own process. Its ports' counters are read from the API.
//!
//! One worker, which polls both ports; a process NF runs beside it on the
//! other CPU (the platform's default placement), so the process rows pay
//! for two busy cores and their cycles per packet say so.

use std::time::Duration;

use serde_json::Value;

use super::work::Work;
use super::{Env, Running};
use crate::bench_daemon::{self, Daemon};
use crate::client::Client;

pub(crate) struct Sluice {
    daemon: Daemon,
    client: Client,
}

impl Sluice {
    /// Why it cannot run here, if it cannot.
    pub fn missing() -> Option<String> {
        (!cfg!(feature = "dpdk")).then(|| {
            "this sluice has no DPDK ports (build it with `cargo build --release -p sluice-cli --features dpdk`)"
                .into()
        })
    }

    pub fn start(work: Work, isolation: &str, env: &Env) -> Result<Sluice, String> {
        let (daemon, client) = bench_daemon::start_daemon()?;
        bench_daemon::apply(&client, &spec(work, isolation, env))
            .map_err(|e| format!("the daemon refused the spec: {e}"))?;
        Ok(Sluice { daemon, client })
    }
}

/// The spec of one work.
pub(crate) fn spec(work: Work, isolation: &str, env: &Env) -> String {
    let [(dev0, args0), (dev1, args1)] = work.devices(&env.pcap);
    let swap = if work == Work::Macswap {
        "    config: { mac_swap: true }\n"
    } else {
        ""
    };
    let back = if work.both_ways() {
        "    bidirectional: true\n"
    } else {
        ""
    };
    let port = |name: &str, dev: &str, args: &str| {
        format!(
            "  - name: {name}\n    kind: dpdk\n    interface: {dev}\n    vdev: \"{args}\"\n    eal_args: [\"--in-memory\", \"--no-pci\"]\n"
        )
    };
    format!(
        "settings:\n  hugepages: true\n  buffers: 32768\nports:\n{}{}\
         nfs:\n  - name: fwd\n    type: forwarder\n    isolation: {isolation}\n{swap}\
         chains:\n  - name: c\n    from: p0\n    nfs: [fwd]\n    to: p1\n{back}",
        port("p0", dev0, &args0),
        port("p1", dev1, &args1),
    )
}

impl Running for Sluice {
    fn pid(&self) -> u32 {
        self.daemon.pid()
    }

    fn tx(&mut self) -> Result<[u64; 2], String> {
        let mut tx = [0; 2];
        for (slot, port) in tx.iter_mut().zip(["p0", "p1"]) {
            let p: Value = self.client.get(&format!("/v1/ports/{port}"))?;
            *slot = p["stats"]["tx_packets"]
                .as_u64()
                .ok_or_else(|| format!("port {port} has no tx_packets: {p}"))?;
        }
        Ok(tx)
    }
}

impl Drop for Sluice {
    fn drop(&mut self) {
        let _ = self.daemon.stop(Duration::from_secs(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_work_gives_a_valid_spec() {
        let env = Env::for_tests();
        for work in Work::ALL {
            for isolation in ["inline", "process"] {
                let text = spec(work, isolation, &env);
                let s = sluice_spec::parse_str(&text, "<peers>", &crate::bench::nf_type_names())
                    .unwrap_or_else(|e| panic!("{work:?} {isolation}: {e}\n{text}"));
                s.validate(&crate::bench::nf_type_names())
                    .unwrap_or_else(|e| panic!("{work:?} {isolation}: {e}\n{text}"));
                assert_eq!(text.contains("mac_swap: true"), work == Work::Macswap);
                assert_eq!(text.contains("bidirectional: true"), work == Work::Bidir);
            }
        }
    }
}
