//! A daemon whose data plane fails (a worker's code panicked: here an
//! inline NF's, which runs on the worker's thread, under `inline_panic:
//! stop`) stops and says why,
//! rather than answer for a platform whose packets no longer move; its
//! desired state is kept and is applied again at its next start.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use sluice_daemon::{DaemonConfig, DaemonError};
use sluice_dataplane::PlatformSettings;
use sluice_nf::{Batch, BuildContext, Context, NetworkFunction, NfType};
use sluice_spec::SpecError;

/// Forwards 20 batches, then panics.
struct Bomb {
    left: u32,
}

impl NetworkFunction for Bomb {
    fn process(&mut self, _batch: &mut Batch<'_>, _ctx: &mut Context<'_>) {
        if self.left == 0 {
            panic!("the bomb went off");
        }
        self.left -= 1;
    }
}

fn build_bomb(_: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
    Ok(Box::new(Bomb { left: 20 }))
}

static REGISTRY: &[NfType] = &[NfType {
    name: "bomb",
    summary: "test NF: panics after 20 batches",
    drop_reasons: &[],
    counters: &[],
    build: build_bomb,
    frames: sluice_nf::FrameNeeds::MtuFrames,
}];

const SPEC: &str = "settings: { restart: { inline_panic: stop } }\nports:\n  - { name: gen, kind: generator, flows: 4, size: 64, rate_pps: 100000 }\n  - { name: out, kind: sink }\nnfs:\n  - { name: b, type: bomb, isolation: inline }\nchains:\n  - { name: c, from: gen, nfs: [b], to: out }\n";

const WHY: &str = "worker 0 stopped: its code panicked: the bomb went off";

/// A daemon on `dir`, in a thread: inline NFs only, so no NF template
/// (this test binary is not one).
fn start(dir: &Path) -> std::thread::JoinHandle<Result<(), DaemonError>> {
    let mut platform = PlatformSettings::defaults(8);
    platform.start_host = false;
    let cfg = DaemonConfig {
        socket: Some(dir.join("sock")),
        listen: None,
        token: None,
        tenant_tokens: Vec::new(),
        state_dir: dir.join("state"),
        platform,
    };
    std::thread::spawn(move || sluice_daemon::run(cfg, REGISTRY))
}

/// One HTTP/1.1 request on the daemon's socket; the status line's code.
fn request(dir: &Path, method: &str, path: &str, body: &str) -> u16 {
    let sock = dir.join("sock");
    let t = Instant::now();
    let mut s = loop {
        match UnixStream::connect(&sock) {
            Ok(s) => break s,
            Err(e) => {
                assert!(t.elapsed() < Duration::from_secs(30), "no daemon: {e}");
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    };
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: sluice\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {answer:?}"))
}

/// The daemon's end, or a failure if it keeps running for 60 s (without
/// the failure seen, it would run until a signal).
fn ended(daemon: std::thread::JoinHandle<Result<(), DaemonError>>) -> Result<(), DaemonError> {
    let t = Instant::now();
    while !daemon.is_finished() {
        assert!(t.elapsed() < Duration::from_secs(60), "the daemon runs on");
        std::thread::sleep(Duration::from_millis(10));
    }
    daemon.join().unwrap()
}

#[test]
fn a_daemon_whose_worker_panics_stops_with_why_and_keeps_its_desired_state() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = start(dir.path());
    let body = serde_json::json!({ "spec": SPEC }).to_string();
    assert_eq!(request(dir.path(), "PUT", "/v1/spec", &body), 200);
    assert_eq!(
        ended(daemon),
        Err(DaemonError::DataPlaneFailed(WHY.to_string()))
    );
    assert!(!dir.path().join("sock").exists(), "its socket is removed");

    // Started again, it applies the kept spec with no request, and the
    // same NF fails the same way.
    let again = start(dir.path());
    assert_eq!(
        ended(again),
        Err(DaemonError::DataPlaneFailed(WHY.to_string()))
    );
}
