//! DPDK's `testpmd` (Debian's `dpdk-dev`), driven through its interactive
//! prompt over pipes: `start`, then `show port stats all` whenever the
//! benchmark samples it, then `stop` and `quit` when dropped.
//!
//! Its main lcore (CPU 0) only reads the prompt; one forwarding lcore
//! (CPU 1, `--nb-cores=1`) polls both ports: `io` passes each burst on
//! untouched, `macswap` swaps the addresses first.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use super::work::Work;
use super::{Env, Running};

/// The program, as Debian installs it.
pub(crate) const PROGRAM: &str = "dpdk-testpmd";

pub(crate) struct Testpmd {
    child: Child,
    stdin: ChildStdin,
    /// Lines of its stdout and stderr, as they come.
    lines: Receiver<String>,
}

impl Testpmd {
    /// Why it cannot run here, if it cannot.
    pub fn missing() -> Option<String> {
        (!super::on_path(PROGRAM))
            .then(|| format!("{PROGRAM} is not installed (Debian: apt-get install dpdk-dev)"))
    }

    pub fn start(work: Work, env: &Env) -> Result<Testpmd, String> {
        let mode = if work == Work::Macswap {
            "macswap"
        } else {
            "io"
        };
        // Its stdout is a pipe: without `stdbuf` the C library would hold
        // its answers in a 4 KiB buffer.
        let mut child = Command::new("stdbuf")
            .args(["-oL", PROGRAM, "-l", "0,1", "--in-memory", "--no-pci"])
            .args(work.vdev_args(&env.pcap))
            .args(["--", "-i", "--nb-cores=1", "--total-num-mbufs=32768"])
            .arg(format!("--forward-mode={mode}"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {PROGRAM}: {e}"))?;
        let (tx, lines) = mpsc::channel();
        for out in [
            child
                .stdout
                .take()
                .map(|o| Box::new(o) as Box<dyn std::io::Read + Send>),
            child
                .stderr
                .take()
                .map(|e| Box::new(e) as Box<dyn std::io::Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        return;
                    }
                }
            });
        }
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let mut t = Testpmd {
            child,
            stdin,
            lines,
        };
        t.command("start")?;
        t.wait_for(
            |l| l.contains("packet forwarding - ports="),
            Duration::from_secs(60),
        )?;
        Ok(t)
    }

    fn command(&mut self, cmd: &str) -> Result<(), String> {
        writeln!(self.stdin, "{cmd}")
            .and_then(|()| self.stdin.flush())
            .map_err(|e| format!("{PROGRAM} stopped taking commands: {e}"))
    }

    /// Reads lines until one satisfies `done`; the lines read.
    fn wait_for(
        &mut self,
        mut done: impl FnMut(&str) -> bool,
        timeout: Duration,
    ) -> Result<Vec<String>, String> {
        let deadline = Instant::now() + timeout;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    let end = done(&l);
                    seen.push(l);
                    if end {
                        return Ok(seen);
                    }
                }
                Err(e) => {
                    let tail = seen[seen.len().saturating_sub(8)..].join("\n");
                    let why = match e {
                        mpsc::RecvTimeoutError::Timeout => "did not answer in time",
                        mpsc::RecvTimeoutError::Disconnected => "exited",
                    };
                    return Err(format!("{PROGRAM} {why}; its last words:\n{tail}"));
                }
            }
        }
    }
}

impl Running for Testpmd {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn tx(&mut self) -> Result<[u64; 2], String> {
        self.command("show port stats all")?;
        let mut ports = 0;
        let block = self.wait_for(
            |l| {
                if l.contains("Tx-pps:") {
                    ports += 1;
                }
                ports == 2
            },
            Duration::from_secs(10),
        )?;
        tx_packets(&block).ok_or_else(|| format!("cannot read {PROGRAM}'s port statistics"))
    }
}

impl Drop for Testpmd {
    fn drop(&mut self) {
        let _ = self.command("stop");
        let _ = self.command("quit");
        super::reap(&mut self.child, Duration::from_secs(10));
    }
}

/// Packets each port transmitted, from the output of
/// `show port stats all` (a block per port: a `NIC statistics for port
/// N` header, then `TX-packets: COUNT ...`).
pub(crate) fn tx_packets(lines: &[String]) -> Option<[u64; 2]> {
    let mut tx = [None, None];
    let mut port = None;
    for l in lines {
        if let Some(rest) = l.split("NIC statistics for port").nth(1) {
            port = rest.split_whitespace().next()?.parse::<usize>().ok();
        } else if let Some(rest) = l.split("TX-packets:").nth(1) {
            let n = rest.split_whitespace().next()?.parse::<u64>().ok()?;
            if let Some(slot) = port.and_then(|p| tx.get_mut(p)) {
                *slot = Some(n);
            }
        }
    }
    Some([tx[0]?, tx[1]?])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What testpmd 22.11 printed on this machine, prompt included.
    const SHOW: &str = "testpmd> 
  ######################## NIC statistics for port 0  ########################
  RX-packets: 171753312  RX-missed: 0          RX-bytes:  0
  RX-errors: 0
  RX-nombuf:  0         
  TX-packets: 17         TX-errors: 0          TX-bytes:  0

  Throughput (since last show)
  Rx-pps:            0          Rx-bps:            0
  Tx-pps:            0          Tx-bps:            0
  ############################################################################

  ######################## NIC statistics for port 1  ########################
  RX-packets: 0          RX-missed: 0          RX-bytes:  0
  RX-errors: 0
  RX-nombuf:  0         
  TX-packets: 138357888  TX-errors: 0          TX-bytes:  0

  Throughput (since last show)
  Rx-pps:            0          Rx-bps:            0
  Tx-pps:     46119296          Tx-bps:            0
  ############################################################################";

    fn lines(s: &str) -> Vec<String> {
        s.lines().map(str::to_string).collect()
    }

    #[test]
    fn port_statistics_are_read_per_port() {
        assert_eq!(tx_packets(&lines(SHOW)), Some([17, 138_357_888]));
    }

    #[test]
    fn incomplete_or_garbled_statistics_are_refused() {
        let one_port: String = SHOW.lines().take(8).collect::<Vec<_>>().join("\n");
        assert_eq!(tx_packets(&lines(&one_port)), None);
        assert_eq!(tx_packets(&lines(&SHOW.replace("138357888", "lots"))), None);
        assert_eq!(tx_packets(&[]), None);
    }
}
