//! `GET /v1/capture`: live capture as a pcapng stream (`sluice tcpdump`).
//!
//! The control thread installs the taps; a blocking task moves the copies
//! from the data plane's channel into the response body as Enhanced Packet
//! Blocks, so Wireshark and `tshark -r -` read it while it is written.
//! The capture ends after `count` packets or when the client goes away;
//! either way the taps come off.

use axum::body::{Body, Bytes};
use axum::extract::{RawQuery, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde::Deserialize;
use utoipa::IntoParams;

use crate::error::{ApiError, ErrorBody};
use crate::extract::{parse_query, AppState};
use crate::pcapng;
use crate::tenancy::Caller;

/// Query of `GET /v1/capture`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct CaptureQuery {
    /// A port (both directions) or an NF (`NAME`, `NAME:in` or `NAME:out`).
    pub target: String,
    /// Stop after this many packets.
    pub count: Option<u64>,
    /// Bytes kept of each packet (default 65535).
    pub snaplen: Option<u32>,
    /// A filter in the classifier NF's tcpdump-like language.
    pub filter: Option<String>,
}

/// A capture as the query asks for it, checked before anything is tapped.
pub struct CaptureRequest {
    /// The port or NF.
    pub name: String,
    /// An NF's output side (`NAME:out`) rather than its input.
    pub output: bool,
    /// Bytes kept of each packet, within 1..=262144.
    pub snaplen: u32,
    /// Stop after this many packets.
    pub count: Option<u64>,
    /// Packets the filter accepts; all when `None`.
    pub filter: Option<sluice_dataplane::worker::tap::TapFilter>,
}

impl CaptureRequest {
    /// Parses and checks `GET /v1/capture`'s query string: a 400 naming
    /// the field at fault otherwise.
    pub fn parse(query: Option<String>) -> Result<CaptureRequest, ApiError> {
        let q: CaptureQuery = parse_query(query)?;
        let snaplen = q.snaplen.unwrap_or(65_535).clamp(1, 262_144);
        let filter = match q.filter.as_deref().map(str::trim).filter(|f| !f.is_empty()) {
            None => None,
            Some(f) => {
                let expr = sluice_nfs::elements::filter::parse_filter(f).map_err(|e| {
                    ApiError::bad_request(format!("filter: {e}"), Some("filter".into()))
                })?;
                let pred: sluice_dataplane::worker::tap::TapFilter =
                    std::sync::Arc::new(move |frame: &[u8]| {
                        sluice_packet::parse(frame).is_ok_and(|h| {
                            expr.eval(&sluice_nfs::elements::filter::Fields::new(frame, &h))
                        })
                    });
                Some(pred)
            }
        };
        let (name, output) = match q.target.rsplit_once(':') {
            Some((n, "in")) => (n.to_string(), false),
            Some((n, "out")) => (n.to_string(), true),
            Some(_) => {
                return Err(ApiError::bad_request(
                    "target is NAME, NAME:in or NAME:out",
                    Some("target".into()),
                ))
            }
            None => (q.target, false),
        };
        Ok(CaptureRequest {
            name,
            output,
            snaplen,
            count: q.count,
            filter,
        })
    }
}

pub(crate) fn routes(state: AppState) -> Router {
    Router::new()
        .route("/v1/capture", get(capture))
        .with_state(state)
}

#[utoipa::path(get, path = "/v1/capture", tag = "capture", params(CaptureQuery),
    responses(
        (status = 200, description = "A pcapng stream (application/vnd.tcpdump.pcapng)", content_type = "application/vnd.tcpdump.pcapng"),
        (status = 400, description = "Bad query or filter", body = ErrorBody),
        (status = 403, description = "A tenant's token, and a port or an NF that is not the tenant's", body = ErrorBody),
        (status = 404, description = "No such port or NF", body = ErrorBody)))]
pub(crate) async fn capture(
    State(app): State<AppState>,
    caller: Caller,
    RawQuery(q): RawQuery,
) -> Result<Response, ApiError> {
    let CaptureRequest {
        name,
        output,
        snaplen,
        count,
        filter,
    } = CaptureRequest::parse(q)?;
    let cap = app
        .control
        .call(move |s| {
            caller.may_look_into(s.desired.as_deref(), &name)?;
            s.rt.tap(&name, output, snaplen, count, filter)
                .map_err(|e| ApiError::not_found(e.to_string()))
        })
        .await??;
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(64);
    let control = app.control.clone();
    tokio::task::spawn_blocking(move || {
        let mut head = pcapng::section_header();
        head.extend(pcapng::interface(snaplen));
        if tx.blocking_send(Ok(Bytes::from(head))).is_err() {
            return finish(&control, cap.id);
        }
        let mut sent = 0u64;
        loop {
            let mut chunk = Vec::new();
            match cap
                .packets
                .recv_timeout(std::time::Duration::from_millis(100))
            {
                Ok(p) => {
                    chunk.extend(pcapng::packet(&p));
                    sent += 1;
                    // Whatever else is there goes in the same write.
                    while let Ok(p) = cap.packets.try_recv() {
                        chunk.extend(pcapng::packet(&p));
                        sent += 1;
                        if chunk.len() > 1 << 20 {
                            break;
                        }
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            }
            if !chunk.is_empty() && tx.blocking_send(Ok(Bytes::from(chunk))).is_err() {
                break;
            }
            if count.is_some_and(|c| sent >= c) || tx.is_closed() {
                break;
            }
        }
        finish(&control, cap.id);
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    Ok((
        [(header::CONTENT_TYPE, "application/vnd.tcpdump.pcapng")],
        Body::from_stream(stream),
    )
        .into_response())
}

/// Takes the taps off (nothing waits for it).
fn finish(control: &crate::control::Control, id: u64) {
    control.post(move |s| s.rt.untap(id));
}
