//! Helpers for tests that run the `sluice` binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Path of the built binary.
pub fn sluice() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
}

/// The workspace root (for `examples/`).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Writes `text` to a temp spec file and returns (dir guard, path).
pub fn spec_file(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spec.yaml");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

/// Runs `sluice bench ARGS` (no input) and parses its stdout as JSON
/// (`Null` when it printed none).
pub fn bench(args: &[&str]) -> (Output, Value) {
    let out = sluice()
        .arg("bench")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out, v)
}

/// Runs `sluice run SPEC --duration D --json` and parses the report.
pub fn run_json(spec: &Path, duration: f64) -> (Output, Value) {
    let out = sluice()
        .args([
            "run",
            spec.to_str().unwrap(),
            "--json",
            "--duration",
            &duration.to_string(),
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out, v)
}

/// Asserts the accounting invariants every run must satisfy.
pub fn assert_accounted(r: &Value) {
    assert_eq!(r["leaked_buffers"], 0, "leaked buffers: {r:#}");
    assert_eq!(r["unaccounted"], 0, "unaccounted packets: {r:#}");
    assert_eq!(r["buffers"]["free"], r["buffers"]["capacity"], "{r:#}");
}

/// The report's entry for port `name`.
pub fn port<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no port {name} in {r:#}"))
}

/// The report's entry for NF `name`.
pub fn nf<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["nfs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == name)
        .unwrap()
}

/// Pids of the descendants of `pid` whose command name is `comm`.
pub fn descendants_named(pid: u32, comm: &str) -> Vec<u32> {
    let mut found = Vec::new();
    let mut frontier = vec![pid];
    while let Some(p) = frontier.pop() {
        // Children belong to the thread that started them (the platform's
        // worker threads start its NF templates): read every thread's list.
        let mut children = String::new();
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) {
            for t in tasks.flatten() {
                let path = t.path().join("children");
                children += &std::fs::read_to_string(path).unwrap_or_default();
                children.push(' ');
            }
        }
        for c in children
            .split_whitespace()
            .filter_map(|c| c.parse::<u32>().ok())
        {
            let name = std::fs::read_to_string(format!("/proc/{c}/comm")).unwrap_or_default();
            if name.trim() == comm {
                found.push(c);
            }
            frontier.push(c);
        }
    }
    found
}

/// Starts `sluice run SPEC --json --duration 120` (the spec's `count`
/// ends the run; the duration only bounds a hang).
pub fn start_run(spec: &Path) -> Child {
    sluice()
        .args(["run", spec.to_str().unwrap(), "--json", "--duration", "120"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits until `n` processes named `comm` run under `pid` (panics after
/// 20 s) and returns them.
pub fn wait_for(pid: u32, comm: &str, n: usize) -> Vec<u32> {
    let mut found = Vec::new();
    for _ in 0..1000 {
        found = descendants_named(pid, comm);
        if found.len() >= n {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(found.len(), n, "{comm} processes");
    found
}

/// `kill -9 PID`; panics if it fails.
pub fn kill_9(pid: u32) {
    let ok = Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -9 {pid}");
}

/// Waits for a child to exit and parses its stdout as the JSON report.
pub fn finish_json(child: Child) -> (Output, Value) {
    let out = child.wait_with_output().unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out, v)
}

/// A generator → NFs → sink spec with the given NF block and chain list.
pub fn chain_spec(rate: u64, nfs_block: &str, chain: &str, restart: &str) -> String {
    format!(
        "settings:\n  restart: {{ {restart} }}\nports:\n  - {{ name: gen, kind: generator, flows: 32, protocol: udp, size: 64, rate_pps: {rate} }}\n  - {{ name: out, kind: sink }}\nnfs:\n{nfs_block}chains:\n  - {{ name: main, from: gen, nfs: [{chain}], to: out }}\n"
    )
}

/// A daemon on a private socket and state directory, killed on drop.
pub struct Daemon {
    /// The daemon process.
    pub child: Child,
    /// Its socket.
    pub socket: PathBuf,
    /// Its temporary directory (state, specs written for it).
    pub dir: tempfile::TempDir,
}

impl Daemon {
    /// Starts `sluice daemon` on a temporary socket and state directory.
    pub fn start() -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("sluice.sock");
        let child = sluice()
            .args(["daemon", "--socket"])
            .arg(&socket)
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let t = Instant::now();
        while !socket.exists() {
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "the daemon did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Daemon { child, socket, dir }
    }

    /// Runs a client command against it: (success, stdout as JSON, stderr).
    pub fn cli(&self, args: &[&str]) -> (bool, Value, String) {
        let out = sluice()
            .arg("--socket")
            .arg(&self.socket)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            out.status.success(),
            serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// `sluice apply -f` of `spec`; panics if it fails.
    pub fn apply(&self, spec: &str) -> Value {
        let path = self.dir.path().join("spec.yaml");
        std::fs::write(&path, spec).unwrap();
        let (ok, v, err) = self.cli(&["apply", "-f", path.to_str().unwrap(), "-o", "json"]);
        assert!(ok, "apply failed: {err}\n{spec}");
        v
    }

    /// Waits until at least `packets` came in (panics after 120 s).
    pub fn wait_packets_in(&self, packets: u64) {
        let t = Instant::now();
        while self.stats()["packets_in"].as_u64().unwrap_or(0) < packets {
            assert!(t.elapsed() < Duration::from_secs(120), "traffic stalled");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits (up to 120 s) until `count` packets came in and went out,
    /// and returns the stats then.
    pub fn wait_done(&self, count: u64) -> Value {
        let t = Instant::now();
        loop {
            let s = self.stats();
            let done = s["packets_in"] == count && s["packets_out"] == count;
            if done || t.elapsed() > Duration::from_secs(120) {
                return s;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `sluice stats -o json`.
    pub fn stats(&self) -> Value {
        let (ok, v, err) = self.cli(&["stats", "-o", "json"]);
        assert!(ok, "{err}");
        v
    }

    /// `sluice ps -o json`.
    pub fn instances(&self) -> Vec<Value> {
        let (ok, v, err) = self.cli(&["ps", "-o", "json"]);
        assert!(ok, "{err}");
        v.as_array().cloned().unwrap_or_default()
    }

    /// The pids of its NF processes, in `sluice ps` order, once `n` run
    /// (panics after 30 s).
    pub fn running_pids(&self, n: usize) -> Vec<u64> {
        let t = Instant::now();
        loop {
            let p: Vec<u64> = self
                .instances()
                .iter()
                .filter_map(|i| i["pid"].as_u64())
                .filter(|&p| p > 0)
                .collect();
            if p.len() == n {
                return p;
            }
            assert!(t.elapsed() < Duration::from_secs(30), "NFs did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
