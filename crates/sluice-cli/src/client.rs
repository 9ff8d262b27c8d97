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

/// A client (one connection per request; requests are rare and small).
pub struct Client {
    rt: tokio::runtime::Runtime,
    endpoint: Endpoint,
}

impl Client {
    /// A client of `endpoint`.
    pub fn new(endpoint: Endpoint) -> Result<Client, String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the client runtime: {e}"))?;
        Ok(Client { rt, endpoint })
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
        let mut req = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("host", "sluice")
            .header("content-type", content_type);
        if let Endpoint::Tcp(_, token) = &self.endpoint {
            req = req.header("authorization", format!("Bearer {token}"));
        }
        let req = req
            .body(Full::new(Bytes::from(bytes)))
            .map_err(|e| e.to_string())?;
        let res = match &self.endpoint {
            Endpoint::Unix(p) => {
                let s = tokio::net::UnixStream::connect(p).await.map_err(|e| {
                    format!(
                        "cannot reach the daemon at {}: {e} (is `sluice daemon` running? set \
                         --socket or SLUICE_SOCKET)",
                        p.display()
                    )
                })?;
                send(TokioIo::new(s), req).await?
            }
            Endpoint::Tcp(addr, _) => {
                let s = tokio::net::TcpStream::connect(addr)
                    .await
                    .map_err(|e| format!("cannot reach the daemon at {addr}: {e}"))?;
                send(TokioIo::new(s), req).await?
            }
        };
        Ok(res)
    }
}

async fn send<S>(io: TokioIo<S>, req: hyper::Request<Full<Bytes>>) -> Result<Answer, String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| format!("HTTP handshake failed: {e}"))?;
    tokio::spawn(conn);
    let res = sender
        .send_request(req)
        .await
        .map_err(|e| format!("the request failed: {e}"))?;
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
