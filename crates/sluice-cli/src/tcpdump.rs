//! `sluice tcpdump`: live capture from a running daemon, as pcapng (to a
//! file, or standard output for `tshark -r -`), or as one summary line per
//! packet when standard output is a terminal.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;

use crate::client::Endpoint;
use crate::ctl::client;
use crate::ctl_args::{ConnArgs, TcpdumpArgs};

fn query(a: &TcpdumpArgs) -> String {
    let mut pairs = vec![
        ("target", a.target.clone()),
        ("snaplen", a.snaplen.to_string()),
    ];
    if let Some(c) = a.count {
        pairs.push(("count", c.to_string()));
    }
    if !a.filter.is_empty() {
        pairs.push(("filter", a.filter.join(" ")));
    }
    serde_urlencoded::to_string(pairs).unwrap_or_default()
}

/// Runs a capture until its count is reached or the daemon ends it.
pub fn run(conn: &ConnArgs, a: TcpdumpArgs) -> ExitCode {
    let c = match client(conn) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sluice: {e}");
            return ExitCode::from(1);
        }
    };
    let path = format!("/v1/capture?{}", query(&a));
    let to_pcap = a.write.is_some() || !std::io::stdout().is_terminal();
    let mut out: Box<dyn Write> = match &a.write {
        Some(p) if p.as_os_str() != "-" => match std::fs::File::create(p) {
            Ok(f) => Box::new(std::io::BufWriter::new(f)),
            Err(e) => {
                eprintln!("sluice: cannot create {}: {e}", p.display());
                return ExitCode::from(1);
            }
        },
        _ => Box::new(std::io::stdout().lock()),
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sluice: {e}");
            return ExitCode::from(1);
        }
    };
    let endpoint = c.endpoint_owned();
    let result = rt.block_on(async move {
        let mut req = hyper::Request::builder()
            .method("GET")
            .uri(&path)
            .header("host", "sluice");
        if let Endpoint::Tcp(_, token) = &endpoint {
            req = req.header("authorization", format!("Bearer {token}"));
        }
        let req = req
            .body(http_body_util::Empty::<hyper::body::Bytes>::new())
            .map_err(|e| e.to_string())?;
        let mut res = match &endpoint {
            Endpoint::Unix(p) => {
                let s = tokio::net::UnixStream::connect(p)
                    .await
                    .map_err(|e| format!("cannot reach the daemon at {}: {e}", p.display()))?;
                stream(TokioIo::new(s), req).await?
            }
            Endpoint::Tcp(addr, _) => {
                let s = tokio::net::TcpStream::connect(addr)
                    .await
                    .map_err(|e| format!("cannot reach the daemon at {addr}: {e}"))?;
                stream(TokioIo::new(s), req).await?
            }
        };
        if !res.status().is_success() {
            let body = res.into_body().collect().await.map_err(|e| e.to_string())?;
            let a = crate::client::Answer {
                status: 400,
                body: body.to_bytes().to_vec(),
            };
            return Err(a.error_text());
        }
        let mut summary = Summary::default();
        let mut packets = 0u64;
        while let Some(frame) = res.body_mut().frame().await {
            let frame = frame.map_err(|e| e.to_string())?;
            let Some(data) = frame.data_ref() else {
                continue;
            };
            if to_pcap {
                out.write_all(data).map_err(|e| e.to_string())?;
                out.flush().map_err(|e| e.to_string())?;
            } else {
                for line in summary.feed(data) {
                    writeln!(out, "{line}").map_err(|e| e.to_string())?;
                }
            }
            packets = summary.packets.max(packets);
        }
        let _ = packets;
        Ok::<(), String>(())
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.contains("Broken pipe") => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice: {e}");
            ExitCode::from(1)
        }
    }
}

async fn stream<S>(
    io: TokioIo<S>,
    req: hyper::Request<http_body_util::Empty<hyper::body::Bytes>>,
) -> Result<hyper::Response<hyper::body::Incoming>, String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| format!("HTTP handshake failed: {e}"))?;
    tokio::spawn(conn);
    sender
        .send_request(req)
        .await
        .map_err(|e| format!("the request failed: {e}"))
}

/// Turns a pcapng stream into one line per packet.
#[derive(Default)]
struct Summary {
    buf: Vec<u8>,
    packets: u64,
}

impl Summary {
    fn feed(&mut self, data: &[u8]) -> Vec<String> {
        self.buf.extend_from_slice(data);
        let mut lines = Vec::new();
        let mut at = 0;
        while self.buf.len() - at >= 12 {
            let kind = u32::from_le_bytes(self.buf[at..at + 4].try_into().unwrap_or_default());
            let len = u32::from_le_bytes(self.buf[at + 4..at + 8].try_into().unwrap_or_default())
                as usize;
            if len < 12 || self.buf.len() - at < len {
                break;
            }
            if kind == 6 && len >= 32 {
                let b = &self.buf[at + 8..at + len - 4];
                let ts = (u64::from(u32::from_le_bytes(b[4..8].try_into().unwrap_or_default()))
                    << 32)
                    | u64::from(u32::from_le_bytes(b[8..12].try_into().unwrap_or_default()));
                let cap = u32::from_le_bytes(b[12..16].try_into().unwrap_or_default()) as usize;
                let orig = u32::from_le_bytes(b[16..20].try_into().unwrap_or_default());
                let frame = b.get(20..20 + cap).unwrap_or(&[]);
                self.packets += 1;
                lines.push(describe(ts, orig, frame));
            }
            at += len;
        }
        self.buf.drain(..at);
        lines
    }
}

/// `hh:mm:ss.micro proto src > dst, length N`.
fn describe(ts_ns: u64, len: u32, frame: &[u8]) -> String {
    let secs = ts_ns / 1_000_000_000;
    let t = format!(
        "{:02}:{:02}:{:02}.{:06}",
        secs / 3600 % 24,
        secs / 60 % 60,
        secs % 60,
        ts_ns % 1_000_000_000 / 1000
    );
    let what = match sluice_packet::parse(frame)
        .ok()
        .and_then(|h| sluice_packet::FlowKey::from_headers(frame, &h).ok())
    {
        Some(k) => {
            let proto =
                sluice_spec::proto_name(k.proto).map_or(k.proto.to_string(), str::to_string);
            if matches!(k.proto, 6 | 17 | 132) {
                format!(
                    "{proto} {}:{} > {}:{}",
                    k.src_ip(),
                    k.src_port,
                    k.dst_ip(),
                    k.dst_port
                )
            } else {
                format!("{proto} {} > {}", k.src_ip(), k.dst_ip())
            }
        }
        None => "non-IP".to_string(),
    };
    format!("{t} {what}, length {len}")
}
