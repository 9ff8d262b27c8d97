//! A client of the daemon's API: HTTP/1.1 (hyper) over its UNIX socket,
//! or over TCP with the bearer token.

use std::path::PathBuf;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Where the daemon is and how to get in.
#[derive(Debug, Clone)]
pub enum Endpoint {
    /// Its UNIX socket.
    Unix(PathBuf),
    /// `host:port`, with the token.
    Tcp(String, String),
}

/// One answer.
#[derive(Debug)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// Body bytes.
    pub body: Vec<u8>,
}

impl Answer {
    /// The body as JSON (`Null` if it is not).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// The error the daemon described, as `message (field, line:column)`.
    pub fn error_text(&self) -> String {
        let v = self.json();
        let e = &v["error"];
        let Some(msg) = e["message"].as_str() else {
            return format!(
                "HTTP {}: {}",
                self.status,
                String::from_utf8_lossy(&self.body).trim()
            );
        };
        match e["field"].as_str() {
            Some(f) if !msg.contains(f) => format!("{msg} (field {f})"),
            _ => msg.to_string(),
        }
    }
}

/// A client. It keeps its connection open between requests (HTTP/1.1
/// keep-alive): a loop of requests, as `sluice bench instantiate` or a
/// watching command makes, pays the connect and the daemon's per-connection
/// setup once, not per request.
pub struct Client {
    rt: tokio::runtime::Runtime,
    endpoint: Endpoint,
    /// The open connection, if the last request left one.
    conn: std::sync::Mutex<Option<Sender>>,
}

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

impl Client {
    /// A client of `endpoint`.
    pub fn new(endpoint: Endpoint) -> Result<Client, String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the client runtime: {e}"))?;
        Ok(Client {
            rt,
            endpoint,
            conn: std::sync::Mutex::new(None),
        })
    }

    /// Where it connects.
    pub fn endpoint_owned(&self) -> Endpoint {
        self.endpoint.clone()
    }

    /// Sends a request; `body` goes as JSON.
    pub fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Answer, String> {
        let bytes = body.map(|b| b.to_string()).unwrap_or_default();
        self.rt
            .block_on(self.call_async(method, path, bytes.into_bytes(), "application/json"))
    }

    /// Sends a request with a binary body (`application/octet-stream`).
    pub fn call_bytes(&self, method: &str, path: &str, body: Vec<u8>) -> Result<Answer, String> {
        self.rt
            .block_on(self.call_async(method, path, body, "application/octet-stream"))
    }

    /// `GET path`, expecting 200 and JSON of type `T`.
    pub fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, String> {
        let a = self.call("GET", path, None)?;
        if a.status != 200 {
            return Err(a.error_text());
        }
        serde_json::from_slice(&a.body).map_err(|e| format!("unexpected answer to {path}: {e}"))
    }

    async fn call_async(
        &self,
        method: &str,
        path: &str,
        bytes: Vec<u8>,
        content_type: &str,
    ) -> Result<Answer, String> {
        let body = Bytes::from(bytes);
        let build = || {
            let mut req = hyper::Request::builder()
                .method(method)
                .uri(path)
                .header("host", "sluice")
                .header("content-type", content_type);
            if let Endpoint::Tcp(_, token) = &self.endpoint {
                req = req.header("authorization", format!("Bearer {token}"));
            }
            req.body(Full::new(body.clone())).map_err(|e| e.to_string())
        };
        let req = build()?;
        let kept = self.conn.lock().unwrap_or_else(|p| p.into_inner()).take();
        let kept = match kept {
            Some(mut s) => {
                // Let the connection's task run once: a close the daemon
                // sent while the connection sat idle is read now, not
                // found by writing into it.
                tokio::task::yield_now().await;
                s.ready().await.is_ok().then_some(s)
            }
            None => None,
        };
        let (mut sender, reused) = match kept {
            Some(s) => (s, true),
            None => (self.connect().await?, false),
        };
        let res = match sender.try_send_request(req).await {
            Ok(res) => res,
            // The daemon closed a kept connection (it stopped, or timed the
            // connection out) as the request went. Sent again on a new
            // connection only when that cannot do it twice: nothing went
            // out, or it only reads.
            Err(mut e) if reused && (e.message().is_some() || method == "GET") => {
                let req = match e.take_message() {
                    Some(req) => req,
                    None => build()?,
                };
                sender = self.connect().await?;
                sender
                    .send_request(req)
                    .await
                    .map_err(|e| format!("the request failed: {e}"))?
            }
            Err(e) => return Err(format!("the request failed: {}", e.into_error())),
        };
        let answer = read(res).await?;
        *self.conn.lock().unwrap_or_else(|p| p.into_inner()) = Some(sender);
        Ok(answer)
    }

    /// A new connection to the daemon.
    async fn connect(&self) -> Result<Sender, String> {
        match &self.endpoint {
            Endpoint::Unix(p) => {
                let s = tokio::net::UnixStream::connect(p).await.map_err(|e| {
                    format!(
                        "cannot reach the daemon at {}: {e} (is `sluice daemon` running? set \
                         --socket or SLUICE_SOCKET)",
                        p.display()
                    )
                })?;
                handshake(TokioIo::new(s)).await
            }
            Endpoint::Tcp(addr, _) => {
                let s = tokio::net::TcpStream::connect(addr)
                    .await
                    .map_err(|e| format!("cannot reach the daemon at {addr}: {e}"))?;
                // Requests are small and answered one at a time: Nagle's
                // delay would only wait for an acknowledgement.
                let _ = s.set_nodelay(true);
                handshake(TokioIo::new(s)).await
            }
        }
    }
}

async fn handshake<S>(io: TokioIo<S>) -> Result<Sender, String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| format!("HTTP handshake failed: {e}"))?;
    tokio::spawn(conn);
    Ok(sender)
}

async fn read(res: hyper::Response<hyper::body::Incoming>) -> Result<Answer, String> {
    let status = res.status().as_u16();
    let body = res
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("reading the answer failed: {e}"))?
        .to_bytes()
        .to_vec();
    Ok(Answer { status, body })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::os::unix::net::UnixListener;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// What a test server does with each request it reads on a connection.
    #[derive(Clone, Copy)]
    enum Serve {
        /// Answers and keeps the connection open.
        KeepAlive,
        /// Answers as if it kept the connection, then closes it (as a
        /// daemon that stops or times the connection out).
        CloseAfter,
        /// Reads the request and closes without an answer.
        Vanish,
    }

    /// Serves `how` on a socket in `dir`; counts connections and requests.
    fn server(dir: &std::path::Path, how: Serve) -> (PathBuf, Arc<[AtomicUsize; 2]>) {
        let path = dir.join("s.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let seen: Arc<[AtomicUsize; 2]> = Arc::default();
        let counts = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                counts[0].fetch_add(1, Ordering::SeqCst);
                let counts = counts.clone();
                std::thread::spawn(move || {
                    let mut r = BufReader::new(stream.try_clone().unwrap());
                    let mut w = stream;
                    loop {
                        let mut len = 0usize;
                        let mut line = String::new();
                        loop {
                            line.clear();
                            if r.read_line(&mut line).unwrap_or(0) == 0 {
                                return;
                            }
                            if line == "\r\n" {
                                break;
                            }
                            if let Some(v) =
                                line.to_ascii_lowercase().strip_prefix("content-length:")
                            {
                                len = v.trim().parse().unwrap();
                            }
                        }
                        let mut body = vec![0; len];
                        r.read_exact(&mut body).unwrap();
                        let n = counts[1].fetch_add(1, Ordering::SeqCst) + 1;
                        if let Serve::Vanish = how {
                            return;
                        }
                        let text = n.to_string();
                        let answer = format!(
                            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{text}",
                            text.len()
                        );
                        w.write_all(answer.as_bytes()).unwrap();
                        if let Serve::CloseAfter = how {
                            return;
                        }
                    }
                });
            }
        });
        (path, seen)
    }

    #[test]
    fn requests_share_one_connection() {
        let dir = tempfile::tempdir().unwrap();
        let (path, seen) = server(dir.path(), Serve::KeepAlive);
        let c = Client::new(Endpoint::Unix(path)).unwrap();
        for n in 1..=3 {
            let a = c
                .call("POST", "/x", Some(&serde_json::json!({"n": n})))
                .unwrap();
            assert_eq!(a.body, n.to_string().as_bytes());
        }
        assert_eq!(seen[0].load(Ordering::SeqCst), 1, "one connection");
        assert_eq!(seen[1].load(Ordering::SeqCst), 3);
    }

    #[test]
    fn a_closed_connection_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let (path, seen) = server(dir.path(), Serve::CloseAfter);
        let c = Client::new(Endpoint::Unix(path)).unwrap();
        for n in 1..=6 {
            // A change too: the close is seen before it is sent.
            let method = if n % 2 == 0 { "POST" } else { "GET" };
            let a = c.call(method, "/x", None).unwrap();
            assert_eq!(a.body, n.to_string().as_bytes());
            // Let the close reach the client before it sends again.
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(seen[0].load(Ordering::SeqCst), 6);
        assert_eq!(seen[1].load(Ordering::SeqCst), 6, "each sent once");
    }

    #[test]
    fn a_request_that_went_out_is_not_sent_again() {
        let dir = tempfile::tempdir().unwrap();
        let (path, seen) = server(dir.path(), Serve::Vanish);
        let c = Client::new(Endpoint::Unix(path)).unwrap();
        let e = c
            .call("POST", "/x", Some(&serde_json::json!({})))
            .unwrap_err();
        assert!(e.contains("the request failed"), "{e}");
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(seen[1].load(Ordering::SeqCst), 1, "sent once");
    }
}
