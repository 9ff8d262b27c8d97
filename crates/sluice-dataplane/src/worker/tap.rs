//! Live capture (`sluice tcpdump`): copies of the packets passing a port
//! or an NF's input or output, sent to whoever asked.
//!
//! Untapped traffic pays one emptiness check of the tap list per batch at
//! each tap point. Tapped traffic pays a copy per packet (up to the
//! snapshot length) into a bounded channel; when the reader falls behind,
//! copies are dropped and counted, never the packets themselves.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::Arc;

use sluice_mem::HandleBatch;

use super::Worker;

/// Where packets are copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TapPoint {
    /// Packets a port received.
    PortRx(u16),
    /// Packets a port is about to transmit.
    PortTx(u16),
    /// Packets about to enter an NF.
    NfIn(u16),
    /// Packets an NF has just returned.
    NfOut(u16),
}

/// A copied packet.
#[derive(Debug, Clone)]
pub struct Captured {
    /// Wall-clock time of the copy, ns since the Unix epoch.
    pub time_ns: u64,
    /// The packet's length on the wire.
    pub len: u32,
    /// Its first bytes (up to the snapshot length).
    pub data: Vec<u8>,
}

/// Which packets a tap copies.
pub type TapFilter = Arc<dyn Fn(&[u8]) -> bool + Send + Sync>;

/// A capture as the control thread sets it up (one per worker, sharing
/// the channel and the count).
#[derive(Clone)]
pub struct TapSpec {
    /// Identifies it for removal.
    pub id: u64,
    /// Where.
    pub point: TapPoint,
    /// Bytes kept per packet.
    pub snaplen: u32,
    /// Which packets (all if `None`).
    pub filter: Option<TapFilter>,
    /// Copies still wanted, shared by the workers (`u64::MAX`: no limit).
    pub remaining: Arc<AtomicU64>,
    /// Copies the reader was too slow for.
    pub lost: Arc<AtomicU64>,
    /// Where copies go.
    pub tx: SyncSender<Captured>,
}

impl<'a> Worker<'a> {
    /// Copies the packets of `b` at `point` to the taps there.
    #[cold]
    pub(super) fn tap(&mut self, point: TapPoint, b: &mut HandleBatch) {
        let arena = self.arena;
        let offset = self.realtime_offset_ns;
        let mut done = Vec::new();
        for (k, t) in self.taps.iter().enumerate() {
            if t.point != point {
                continue;
            }
            for h in b.iter_mut() {
                let p = arena.pkt(h);
                let data = p.data();
                if t.filter.as_ref().is_some_and(|f| !f(data)) {
                    continue;
                }
                let left = t.remaining.load(Ordering::Relaxed);
                if left == 0 {
                    done.push(k);
                    break;
                }
                if left != u64::MAX {
                    t.remaining.fetch_sub(1, Ordering::Relaxed);
                }
                let keep = data.len().min(t.snaplen as usize);
                let c = Captured {
                    time_ns: sluice_sys::monotonic_ns() + offset,
                    len: data.len() as u32,
                    data: data[..keep].to_vec(),
                };
                match t.tx.try_send(c) {
                    Ok(()) => {}
                    Err(TrySendError::Full(_)) => {
                        t.lost.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(TrySendError::Disconnected(_)) => {
                        done.push(k);
                        break;
                    }
                }
            }
        }
        for k in done.into_iter().rev() {
            self.taps.swap_remove(k);
        }
    }

    /// Adds a tap.
    pub(super) fn add_tap(&mut self, t: TapSpec) {
        self.taps.push(t);
    }

    /// Removes tap `id`.
    pub(super) fn remove_tap(&mut self, id: u64) {
        self.taps.retain(|t| t.id != id);
    }
}
