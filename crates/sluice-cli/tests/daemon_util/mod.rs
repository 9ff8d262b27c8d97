//! Helpers for tests that run the real `sluice daemon`: start it on a
//! temporary socket and state directory, talk HTTP/1.1 to it over the
//! socket (or TCP) with a small client that can also send what a real
//! client would not (oversized or malformed bodies), stop or kill it.
#![allow(dead_code)]

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// One HTTP answer.
#[derive(Debug, Clone)]
pub struct Resp {
    /// Status code.
    pub status: u16,
    /// Header lines (names lower-cased).
    pub headers: Vec<(String, String)>,
    /// Body (chunked encoding removed).
    pub body: Vec<u8>,
}

impl Resp {
    /// The body as JSON (`Null` if it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

impl std::fmt::Display for Resp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = self.text();
        let cut: String = text.chars().take(600).collect();
        write!(f, "HTTP {}: {cut}", self.status)
    }
}

/// A stream the client can talk over and clone for a writer thread.
pub trait Stream: Read + Write + Send + Sized + 'static {
    /// A second handle on the same connection.
    fn dup(&self) -> std::io::Result<Self>;
}

impl Stream for UnixStream {
    fn dup(&self) -> std::io::Result<Self> {
        self.try_clone()
    }
}

impl Stream for TcpStream {
    fn dup(&self) -> std::io::Result<Self> {
        self.try_clone()
    }
}

/// Sends one request (`Connection: close`) and reads the whole answer.
/// The body is written from another thread while the answer is read, so
/// a server that answers before reading it all (413) is seen answering,
/// not as a write error.
pub fn http<S: Stream>(
    stream: S,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
) -> std::io::Result<Resp> {
    stream_timeouts(&stream);
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: sluice\r\nConnection: close\r\n");
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    for (k, v) in headers {
        head += &format!("{k}: {v}\r\n");
    }
    if let Some(b) = &body {
        if !chunked {
            head += &format!("Content-Length: {}\r\n", b.len());
        }
        if !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        {
            head += "Content-Type: application/json\r\n";
        }
    }
    head += "\r\n";
    let mut w = stream.dup()?;
    let writer = std::thread::spawn(move || -> std::io::Result<()> {
        w.write_all(head.as_bytes())?;
        if let Some(b) = body {
            if chunked {
                for c in b.chunks(1 << 20) {
                    w.write_all(format!("{:x}\r\n", c.len()).as_bytes())?;
                    w.write_all(c)?;
                    w.write_all(b"\r\n")?;
                }
                w.write_all(b"0\r\n\r\n")?;
            } else {
                w.write_all(&b)?;
            }
        }
        w.flush()
    });
    let mut raw = Vec::new();
    let mut r = stream;
    let read = r.read_to_end(&mut raw);
    let wrote = writer.join().expect("writer thread");
    if raw.is_empty() {
        read?;
        wrote?;
        return Err(std::io::Error::new(
            ErrorKind::UnexpectedEof,
            "the connection closed without an answer",
        ));
    }
    parse_response(&raw)
}

fn stream_timeouts<S: Stream>(s: &S) {
    // Both stream types have the same setters; go through Any to reach them.
    let any: &dyn std::any::Any = s;
    let t = Some(Duration::from_secs(60));
    if let Some(u) = any.downcast_ref::<UnixStream>() {
        let _ = u.set_read_timeout(t);
        let _ = u.set_write_timeout(t);
    } else if let Some(c) = any.downcast_ref::<TcpStream>() {
        let _ = c.set_read_timeout(t);
        let _ = c.set_write_timeout(t);
    }
}

fn parse_response(raw: &[u8]) -> std::io::Result<Resp> {
    let bad = |m: &str| std::io::Error::new(ErrorKind::InvalidData, m.to_string());
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad("no end of headers"))?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| bad("headers not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("no status"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut body = raw[end + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    if chunked {
        body = dechunk(&body).ok_or_else(|| bad("bad chunked body"))?;
    }
    Ok(Resp {
        status,
        headers,
        body,
    })
}

fn dechunk(mut b: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let nl = b.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&b[..nl]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        b = &b[nl + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(b.get(..size)?);
        b = b.get(size + 2..)?;
    }
}

/// A TCP port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// How to start a daemon.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Also listen on TCP with this token.
    pub token: Option<String>,
    /// Extra arguments.
    pub args: Vec<String>,
}

/// A running `sluice daemon`, stopped (SIGTERM, then SIGKILL) on drop.
pub struct Daemon {
    /// The daemon process (`None` once it has been killed and reaped).
    pub child: Option<Child>,
    /// Holds the socket, state directory, log and token file.
    pub dir: PathBuf,
    _guard: Option<tempfile::TempDir>,
    /// Its UNIX socket.
    pub socket: PathBuf,
    /// Its state directory.
    pub state_dir: PathBuf,
    /// Its TCP address and token, when it listens on TCP.
    pub tcp: Option<(SocketAddr, String)>,
    /// Its standard error.
    pub log: PathBuf,
}

impl Daemon {
    /// Starts a daemon in a fresh temporary directory and waits until it
    /// answers.
    pub fn start() -> Daemon {
        Self::start_with(Options::default())
    }

    /// Starts a daemon with `opts` in a fresh temporary directory.
    pub fn start_with(opts: Options) -> Daemon {
        let guard = tempfile::Builder::new()
            .prefix("sluice-daemon-test")
            .tempdir()
            .unwrap();
        let dir = guard.path().to_path_buf();
        let mut d = Self::start_in(&dir, opts);
        d._guard = Some(guard);
        d
    }

    /// Starts a daemon whose socket, state directory and log are in
    /// `dir` (a restarted daemon reuses the directory of the first).
    pub fn start_in(dir: &Path, opts: Options) -> Daemon {
        // A free TCP port may be taken between our look and the daemon's
        // bind: try another then.
        let mut tries = 0;
        loop {
            match Self::try_start_in(dir, &opts) {
                Ok(d) => return d,
                Err(log) if tries < 3 && log.contains("cannot listen on 127.0.0.1") => tries += 1,
                Err(log) => panic!("{log}"),
            }
        }
    }

    fn try_start_in(dir: &Path, opts: &Options) -> Result<Daemon, String> {
        let socket = dir.join("sluice.sock");
        let state_dir = dir.join("state");
        let log = dir.join(format!(
            "daemon-{}.log",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
        cmd.args(["daemon", "--socket"])
            .arg(&socket)
            .arg("--state-dir")
            .arg(&state_dir)
            .args(&opts.args)
            .env_remove("SLUICE_SERVER")
            .env_remove("SLUICE_TOKEN_FILE")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::from(std::fs::File::create(&log).unwrap()))
            .stderr(Stdio::from(
                std::fs::OpenOptions::new().append(true).open(&log).unwrap(),
            ));
        let tcp = opts.token.as_ref().map(|token| {
            let file = dir.join("token");
            std::fs::write(&file, format!("{token}\n")).unwrap();
            let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
            cmd.arg("--listen")
                .arg(addr.to_string())
                .arg("--token-file")
                .arg(&file);
            (addr, token.clone())
        });
        let child = cmd.spawn().expect("start sluice daemon");
        let mut d = Daemon {
            child: Some(child),
            dir: dir.to_path_buf(),
            _guard: None,
            socket,
            state_dir,
            tcp,
            log,
        };
        d.wait_ready()?;
        Ok(d)
    }

    /// The daemon's pid.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the daemon runs").id()
    }

    /// Its log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(st) = self.child.as_mut().unwrap().try_wait().unwrap() {
                self.child = None;
                return Err(format!(
                    "the daemon exited ({st}) while starting:\n{}",
                    self.log_text()
                ));
            }
            if let Ok(r) = self.try_req("GET", "/v1/version", None) {
                if r.status == 200 {
                    if let Some((addr, _)) = &self.tcp {
                        // The TCP listener binds after the socket's.
                        if TcpStream::connect(addr).is_err() {
                            std::thread::sleep(Duration::from_millis(20));
                            continue;
                        }
                    }
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "the daemon did not answer within 30 s:\n{}",
                    self.log_text()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// One request over the UNIX socket.
    pub fn try_req(
        &self,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> std::io::Result<Resp> {
        self.try_req_with(method, path, &[], body)
    }

    /// One request over the UNIX socket, with extra headers.
    pub fn try_req_with(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<Vec<u8>>,
    ) -> std::io::Result<Resp> {
        http(
            UnixStream::connect(&self.socket)?,
            method,
            path,
            headers,
            body,
        )
    }

    /// One request over the UNIX socket; panics when it gets no answer.
    pub fn req(&self, method: &str, path: &str, body: Option<Vec<u8>>) -> Resp {
        self.try_req(method, path, body).unwrap_or_else(|e| {
            panic!(
                "{method} {path}: no answer ({e}); the daemon's log:\n{}",
                self.log_text()
            )
        })
    }

    /// `GET path`, expecting 200 and JSON.
    pub fn get(&self, path: &str) -> Value {
        let r = self.req("GET", path, None);
        assert_eq!(r.status, 200, "GET {path}: {r}");
        r.json()
    }

    /// `PUT /v1/spec` with `body` as JSON.
    pub fn put_spec(&self, body: &Value) -> Resp {
        self.req("PUT", "/v1/spec", Some(body.to_string().into_bytes()))
    }

    /// Applies spec text (relative paths resolve beside `source`);
    /// panics unless it is accepted.
    pub fn apply(&self, text: &str, source: &Path) -> Value {
        let r = self.put_spec(&json!({ "spec": text, "source": source.to_string_lossy() }));
        assert_eq!(r.status, 200, "apply: {r}");
        r.json()
    }

    /// One request over TCP, with `headers`.
    pub fn tcp_req(&self, method: &str, path: &str, headers: &[(&str, &str)]) -> Resp {
        let (addr, _) = self.tcp.as_ref().expect("the daemon listens on TCP");
        http(
            TcpStream::connect(addr).unwrap(),
            method,
            path,
            headers,
            None,
        )
        .unwrap_or_else(|e| panic!("{method} {path} over TCP: no answer ({e})"))
    }

    /// Asserts the daemon still runs and answers.
    pub fn assert_alive(&mut self, after: &str) {
        if let Some(st) = self.child.as_mut().unwrap().try_wait().unwrap() {
            panic!("the daemon died ({st}) after {after}:\n{}", self.log_text());
        }
        match self.try_req("GET", "/v1/version", None) {
            Ok(r) if r.status == 200 => {}
            other => panic!(
                "the daemon no longer answers after {after}: {other:?}\n{}",
                self.log_text()
            ),
        }
    }

    /// Packets out so far (`/v1/stats`).
    pub fn packets_out(&self) -> u64 {
        self.get("/v1/stats")["packets_out"].as_u64().unwrap()
    }

    /// Waits until packets flow out (or panics after `secs`).
    pub fn wait_traffic(&self, secs: u64) -> u64 {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let n = self.packets_out();
            if n > 0 {
                return n;
            }
            assert!(
                Instant::now() < deadline,
                "no packets out after {secs} s: {:#}\n{}",
                self.get("/v1/stats"),
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `kill -9`, then reaps it.
    pub fn kill9(&mut self) {
        let mut c = self.child.take().expect("the daemon runs");
        let _ = c.kill();
        let _ = c.wait();
    }

    /// SIGTERM, then waits (SIGKILL after `secs`); returns whether it
    /// exited on its own and its status.
    pub fn stop(&mut self, secs: u64) -> Option<std::process::ExitStatus> {
        let mut c = self.child.take()?;
        let _ = Command::new("kill")
            .args(["-TERM", &c.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < deadline {
            if let Ok(Some(st)) = c.try_wait() {
                return Some(st);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = c.kill();
        let _ = c.wait();
        None
    }

    /// A `sluice` command aimed at this daemon's socket.
    pub fn cli(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_sluice"));
        c.arg("--socket")
            .arg(&self.socket)
            .env_remove("SLUICE_SERVER")
            .env_remove("SLUICE_TOKEN_FILE")
            .stdin(Stdio::null());
        c
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.child.is_some() && self.stop(10).is_none() {
            eprintln!("the daemon did not stop on SIGTERM within 10 s");
        }
    }
}

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `examples/quickstart.yaml`: its text and path.
pub fn quickstart() -> (String, PathBuf) {
    let p = root().join("examples/quickstart.yaml");
    (std::fs::read_to_string(&p).unwrap(), p)
}

/// A small spec: generator → inline NFs → sink; `rate` packets/s.
pub fn inline_spec(rate: u64, nfs: &[&str]) -> String {
    let mut s = format!(
        "settings:\n  buffers: 4096\nports:\n  - {{ name: gen, kind: generator, flows: 8, protocol: udp, size: 64, rate_pps: {rate} }}\n  - {{ name: out, kind: sink }}\nnfs:\n"
    );
    for n in nfs {
        s += &format!("  - {{ name: {n}, type: forwarder }}\n");
    }
    s += &format!(
        "chains:\n  - {{ name: main, from: gen, nfs: [{}], to: out }}\n",
        nfs.join(", ")
    );
    s
}
