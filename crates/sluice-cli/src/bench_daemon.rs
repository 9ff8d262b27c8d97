//! A daemon for the benchmarks that measure one: this binary started as
//! a child with its own socket and state directory (removed when dropped),
//! and applies through its API as a user's would be; and what those
//! benchmarks share (spreads of timings, a port's first packet).

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{json, Value};

use crate::client::{Client, Endpoint};

pub(crate) struct Daemon {
    child: Child,
    dir: std::path::PathBuf,
    args: Vec<String>,
}

impl Daemon {
    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its state directory.
    pub fn state_dir(&self) -> std::path::PathBuf {
        self.dir.join("state")
    }

    /// Stops it as an operator would (SIGTERM: it drains and keeps its
    /// final report) and waits up to `timeout` for it to exit.
    pub fn stop(&mut self, timeout: Duration) -> Result<(), String> {
        let pid =
            sluice_sys::Pid::from_raw(self.child.id() as i32).ok_or("the daemon has no pid")?;
        sluice_sys::terminate(pid).map_err(|e| format!("cannot stop the daemon: {e}"))?;
        let t0 = Instant::now();
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) => return Ok(()),
                Ok(None) if t0.elapsed() > timeout => {
                    return Err(format!("the daemon did not stop within {timeout:?}"))
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    /// Stops it ([`Daemon::stop`]), then starts it again on the same
    /// socket and state directory (it re-applies its desired state).
    /// Returns how long it was gone: from the signal to its socket
    /// answering again.
    pub fn restart(&mut self, timeout: Duration) -> Result<Duration, String> {
        let t0 = Instant::now();
        self.stop(timeout)?;
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        self.child = spawn(&self.dir, &args)?;
        let client = Client::new(Endpoint::Unix(self.dir.join("sluice.sock")))?;
        while client.get::<Value>("/v1/version").is_err() {
            if t0.elapsed() > timeout {
                return Err(format!("the daemon did not answer within {timeout:?}"));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(t0.elapsed())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn now_unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// What one apply took: its start (Unix ns), round trip (ms) and the
/// runtime's own phases (ms): compile, prepare, commit, total.
pub(crate) struct Took {
    pub t0: u64,
    pub request_ms: f64,
    pub phases: [f64; 4],
}

impl Took {
    /// Adds this apply's phases to `into` (compile, prepare, commit, the
    /// rest of the request).
    pub fn record(&self, into: &mut [Vec<f64>; 4]) {
        into[0].push(self.phases[0]);
        into[1].push(self.phases[1]);
        into[2].push(self.phases[2]);
        into[3].push(self.request_ms - self.phases[3]);
    }
}

/// Applies `text`.
pub(crate) fn apply(c: &Client, text: &str) -> Result<Took, String> {
    let version = c.get::<Value>("/v1/spec")?["resource_version"]
        .as_u64()
        .unwrap_or(0);
    let body = json!({ "spec": text, "resource_version": version });
    timed(c, "PUT", "/v1/spec", &body)
}

/// Adds the ports, NFs and chains of `text` (`POST /v1/spec/additions`).
pub(crate) fn add(c: &Client, text: &str) -> Result<Took, String> {
    timed(c, "POST", "/v1/spec/additions", &json!({ "spec": text }))
}

/// One change request, timed from the request's start to its answer.
fn timed(c: &Client, method: &str, path: &str, body: &Value) -> Result<Took, String> {
    let t0 = now_unix_ns();
    let started = Instant::now();
    let a = c.call(method, path, Some(body))?;
    let took = started.elapsed().as_secs_f64() * 1e3;
    if a.status != 200 {
        return Err(a.error_text());
    }
    let r: Value = serde_json::from_slice(&a.body).map_err(|e| e.to_string())?;
    let ms = |k: &str| r[k].as_u64().unwrap_or(0) as f64 / 1e3;
    Ok(Took {
        t0,
        request_ms: took,
        phases: [
            ms("compile_us"),
            ms("prepare_us"),
            ms("commit_us"),
            ms("took_us"),
        ],
    })
}

pub(crate) fn start_daemon() -> Result<(Daemon, Client), String> {
    start_daemon_with(&[])
}

/// A daemon started with `args` besides its socket and state directory.
pub(crate) fn start_daemon_with(args: &[&str]) -> Result<(Daemon, Client), String> {
    // One directory (and socket) per daemon: the steady-state rounds
    // start several, one after the other.
    static STARTED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("sluice-bench-deploy-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let socket = dir.join("sluice.sock");
    let child = spawn(&dir, args)?;
    let d = Daemon {
        child,
        dir,
        args: args.iter().map(|a| a.to_string()).collect(),
    };
    let t = Instant::now();
    while !socket.exists() {
        if t.elapsed() > Duration::from_secs(30) {
            return Err("the daemon did not start within 30 s".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok((d, Client::new(Endpoint::Unix(socket))?))
}

/// Starts this binary as a daemon with its socket and state in `dir`.
fn spawn(dir: &std::path::Path, args: &[&str]) -> Result<Child, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    std::process::Command::new(exe)
        .args(["daemon", "--socket"])
        .arg(dir.join("sluice.sock"))
        .arg("--state-dir")
        .arg(dir.join("state"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start the daemon: {e}"))
}

/// Percentiles of a sample (the unit is the field's that holds it).
#[derive(Debug, Serialize)]
pub(crate) struct Spread {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

/// The value below which a share `q` of `sorted` lies (0 if empty).
pub(crate) fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1]
}

pub(crate) fn spread(mut v: Vec<f64>) -> Spread {
    v.sort_by(f64::total_cmp);
    Spread {
        p50: quantile(&v, 0.5),
        p99: quantile(&v, 0.99),
        max: v.last().copied().unwrap_or(0.0),
    }
}

pub(crate) fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    quantile(&v, 0.5)
}

/// Waits until port `name` has transmitted, looking every `every`;
/// returns when it first did (the port's own timestamp, Unix ns).
pub(crate) fn first_tx(c: &Client, name: &str, every: Duration) -> Result<u64, String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let p: Value = c.get(&format!("/v1/ports/{name}"))?;
        let t = p["stats"]["first_tx_unix_ns"].as_u64().unwrap_or(0);
        if t > 0 {
            return Ok(t);
        }
        if Instant::now() > deadline {
            return Err(format!("port {name} carried nothing within 30 s"));
        }
        std::thread::sleep(every);
    }
}
