//! `AfXdpPort`: the XSKs of one interface behind the [`NicPort`] contract,
//! over a UMEM that is the arena's buffer region (see the module doc).

use std::cell::Cell;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use sluice_mem::{Arena, Backing, HandleBatch, PoolCache, MAX_BATCH};

use super::attach::{attach, explain_xsk, privilege_hint};
use super::bpf::{self, XdpMode};
use super::config::AfXdpConfig;
use super::lent::Lent;
use super::queue::{Queue, CHUNK};
use super::xsk::{self, StepError, Umem, Xsk, XskBind};
use crate::sampled::Sampled;
use crate::{NicError, NicPort, NicStats};

/// Frames the generic (copy-mode) transmit path takes per `sendto` wakeup
/// in the kernel (`MAX_PER_SOCKET_BUDGET`); bounds our wakeup loop.
const KERNEL_TX_BUDGET: u32 = 32;

/// Ring entries of the probe socket `release` binds to learn that the
/// kernel let go of a closed socket's queue.
const RELEASE_PROBE_RING: u32 = 64;

/// An AF_XDP port: one XSK per queue, an XSKMAP and the redirect program
/// attached with a BPF link.
pub struct AfXdpPort {
    // Field order is drop order: detach the program first so no frame is
    // redirected to a socket being torn down. `release` takes the link
    // and the queues out early.
    link: Option<OwnedFd>,
    _prog: OwnedFd,
    queues: Vec<Queue>,
    _map: OwnedFd,
    /// With several queues, an epoll instance over all their sockets.
    poll: Option<OwnedFd>,
    interface: String,
    ifindex: u32,
    mode: XdpMode,
    bind: XskBind,
    umem: Umem,
    /// Longest frame the interface takes: MTU + Ethernet and VLAN headers,
    /// at most a UMEM chunk. Longer ones are refused as `tx_errors` here
    /// rather than sent and silently dropped by the device.
    max_tx_len: usize,
    stats: NicStats,
    /// The kernel's drop and invalid-descriptor counts (a `getsockopt`
    /// per queue).
    kernel: Sampled<(u64, u64)>,
    /// Buffers `release` could not take back (the kernel kept a queue).
    stuck: u32,
    rx_next: usize,
    tx_next: usize,
}

impl AfXdpPort {
    /// Opens the port: creates the XSKMAP, one socket per queue over
    /// `arena`'s buffer region, loads the redirect program and attaches
    /// it. The fill rings start empty; the first [`NicPort::rx_burst`]
    /// fills them with arena buffers.
    ///
    /// Zero-copy binding is tried only when the arena is on huge pages: a
    /// zero-copy driver refuses a frame that crosses a page boundary
    /// between pages that are not physically contiguous, and with 4 KiB
    /// pages most of the 2,240 B buffers cross one.
    ///
    /// # Errors
    /// A [`NicError`] whose message says what is wrong and what to do.
    pub fn open(cfg: &AfXdpConfig, arena: &Arena) -> Result<AfXdpPort, NicError> {
        let ifname = &cfg.interface;
        let err = |m: String| NicError(format!("af_xdp port on `{ifname}`: {m}"));
        let region = arena.dma_region().ok_or_else(|| {
            err("the arena is an NF process's view (one trust domain), not the platform's".into())
        })?;
        let umem = Umem {
            addr: region.addr,
            len: region.len,
            chunk: CHUNK,
        };
        let force_copy = cfg.force_copy || *arena.backing() != Backing::HugePages;
        let ifindex = xsk::ifindex(ifname).ok_or_else(|| {
            err(
                "no such interface (see `ip link show`); create it or fix `interface` — note \
                 that sluice looks it up in its own network namespace"
                    .to_string(),
            )
        })?;
        let map = bpf::create_xskmap(cfg.queues).map_err(|e| match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => {
                err(format!("creating the XSKMAP: {e}; {}", privilege_hint()))
            }
            Some(libc::EINVAL) | Some(libc::ENOSYS) => err(format!(
                "creating the XSKMAP: {e}: this kernel has no BPF XSKMAP; it needs Linux ≥ 5.4 \
                 with CONFIG_BPF_SYSCALL and CONFIG_XDP_SOCKETS, or use an `af_packet` port"
            )),
            _ => err(format!("creating the XSKMAP: {e}")),
        })?;
        let prog = bpf::load_redirect_program(&map).map_err(|(e, log)| match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) if log.is_empty() => err(format!(
                "loading the XDP program: {e}; {}",
                privilege_hint()
            )),
            _ => err(format!(
                "the kernel rejected the XDP program: {e}; verifier log: {log}"
            )),
        })?;
        let mtu = xsk::mtu(ifname).map_err(|e| err(format!("reading the MTU: {e}")))?;
        let max_tx_len = (mtu as usize + 14 + 4).min(CHUNK as usize);
        // Attach before binding any socket: a refused attachment then leaves
        // no socket bound (their release is deferred in the kernel).
        let (link, mode) = attach(&prog, ifindex, cfg.xdp_mode).map_err(err)?;
        let mut queues = Vec::with_capacity(cfg.queues as usize);
        for q in 0..cfg.queues {
            let x = Xsk::open(ifindex, q, umem, cfg.ring_size, force_copy)
                .map_err(|e| err(explain_xsk(ifname, q, cfg.queues, e)))?;
            bpf::xskmap_set(&map, q, x.raw_fd())
                .map_err(|e| err(format!("adding queue {q}'s socket to the XSKMAP: {e}")))?;
            queues.push(Queue {
                xsk: x,
                lent: Lent::new(arena.total_buffers()),
                ring: cfg.ring_size,
            });
        }
        let poll = if queues.len() > 1 {
            let fds: Vec<RawFd> = queues.iter().map(|q| q.xsk.raw_fd()).collect();
            Some(xsk::epoll_of(&fds).map_err(|e| err(format!("epoll over the queues: {e}")))?)
        } else {
            None
        };
        let bind = queues.first().map_or(XskBind::Copy, |q| q.xsk.bind);
        Ok(AfXdpPort {
            link: Some(link),
            _prog: prog,
            queues,
            _map: map,
            poll,
            interface: ifname.clone(),
            ifindex,
            mode,
            bind,
            umem,
            max_tx_len,
            stats: NicStats::default(),
            kernel: Sampled::new((0, 0)),
            stuck: 0,
            rx_next: 0,
            tx_next: 0,
        })
    }

    /// The XDP mode the program runs in (native or generic).
    pub fn xdp_mode(&self) -> XdpMode {
        self.mode
    }

    /// How the sockets are bound (zero-copy or copy).
    pub fn bind_mode(&self) -> XskBind {
        self.bind
    }

    /// The interface name.
    pub fn interface(&self) -> &str {
        &self.interface
    }

    /// The interface index.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// A one-line description for the run log.
    pub fn describe(&self) -> String {
        format!(
            "af_xdp on {} ({} queue(s), XDP {} mode, {} sockets)",
            self.interface,
            self.queues.len(),
            self.mode.as_str(),
            self.bind_mode().as_str()
        )
    }
}

impl AfXdpPort {
    /// Waits until the kernel has let go of queue `q` of a socket just
    /// closed: a new socket can bind the queue only once the old one's
    /// buffer pool is detached from it, which happens in a kernel work
    /// item after `close` returns (and, with a zero-copy driver, only then
    /// has the device stopped writing into the buffers it was given). The
    /// probe binds in copy mode with an empty fill ring, so it writes
    /// nothing; `Xsk::open` retries a busy queue for up to a second.
    fn wait_released(&self, q: u32) -> Result<(), StepError> {
        Xsk::open(self.ifindex, q, self.umem, RELEASE_PROBE_RING, true).map(drop)
    }

    /// The kernel's drop and invalid-descriptor counts over all sockets.
    fn read_kernel(&self) -> (u64, u64) {
        let (mut dropped, mut invalid) = (0, 0);
        for q in &self.queues {
            if let Ok(k) = q.xsk.statistics() {
                // The kernel's rx_dropped already includes the frames it
                // dropped for an empty fill ring (it bumps both counters).
                dropped += k.rx_dropped + k.rx_ring_full;
                invalid += k.tx_invalid_descs;
            }
        }
        (dropped, invalid)
    }
}

impl NicPort for AfXdpPort {
    fn kind(&self) -> &'static str {
        "af_xdp"
    }

    fn rx_burst(
        &mut self,
        arena: &Arena,
        cache: &mut PoolCache<'_>,
        out: &mut HandleBatch,
        max: usize,
    ) -> Result<usize, NicError> {
        let mut max = max.min(MAX_BATCH - out.len());
        let nq = self.queues.len();
        let mut got = 0;
        for k in 0..nq {
            if max == 0 {
                break;
            }
            let q = &mut self.queues[(self.rx_next + k) % nq];
            let n = q.rx(arena, cache, out, max as u32, &mut self.stats);
            got += n;
            max -= n;
        }
        if nq > 0 {
            self.rx_next = (self.rx_next + 1) % nq;
        }
        Ok(got)
    }

    fn tx_burst(
        &mut self,
        arena: &Arena,
        cache: &mut PoolCache<'_>,
        batch: &mut HandleBatch,
    ) -> Result<usize, NicError> {
        let nq = self.queues.len();
        if nq == 0 {
            return Ok(0);
        }
        let q = &mut self.queues[self.tx_next];
        self.tx_next = (self.tx_next + 1) % nq;
        q.reap_completions(arena, cache);
        let room = q.xsk.tx.free(batch.len() as u32);
        let before = batch.len();
        let mut sent = 0u32;
        let stats = &mut self.stats;
        let max_len = self.max_tx_len;
        let (xsk, lent) = (&mut q.xsk, &mut q.lent);
        // Whether the handle `retain` is about to give up was sent (lent
        // to the kernel until its completion) or refused (freed now).
        let was_sent = Cell::new(false);
        batch.retain(
            |h| {
                if sent == room {
                    return true;
                }
                let buf = arena.dma_offset(h);
                let p = arena.pkt(h);
                let len = p.len() as usize;
                if !p.meta_is_sane() || len == 0 || len > max_len {
                    stats.tx_errors += 1;
                    was_sent.set(false);
                    return false;
                }
                // In place: the descriptor names the packet's own bytes.
                let addr = buf + u64::from(p.data_off());
                xsk.tx.write(
                    sent,
                    libc::xdp_desc {
                        addr,
                        len: len as u32,
                        options: 0,
                    },
                );
                stats.tx_bytes += len as u64;
                sent += 1;
                was_sent.set(true);
                false
            },
            |h| {
                if was_sent.get() {
                    // Cannot fail: the handle is unique and from this arena.
                    if let Err(h) = lent.put(h) {
                        cache.free(h);
                    }
                } else {
                    cache.free(h);
                }
            },
        );
        if sent > 0 {
            q.xsk.tx.submit(sent);
            self.stats.tx_packets += u64::from(sent);
        }
        // Copy mode transmits only inside a sendto wakeup, at most
        // KERNEL_TX_BUDGET frames each: one syscall per 32 frames is the
        // price of copy mode (zero-copy drivers clear the flag while their
        // NAPI loop drains the ring).
        if q.xsk.tx.needs_wakeup() {
            let mut kicks = q.xsk.tx.pending().div_ceil(KERNEL_TX_BUDGET) + 1;
            while kicks > 0 && q.xsk.tx.pending() > 0 {
                q.xsk.kick_tx().map_err(|e| {
                    NicError(format!(
                        "af_xdp port on `{}`: transmit: {e}",
                        self.interface
                    ))
                })?;
                kicks -= 1;
            }
        }
        Ok(before - batch.len())
    }

    /// `native XDP, zero-copy` (the device writes arena buffers) or
    /// `generic XDP, copy` (the kernel copies each frame into one).
    fn mode(&self) -> Option<String> {
        Some(format!(
            "{} XDP, {}",
            self.mode.as_str(),
            self.bind.as_str()
        ))
    }

    fn rx_fd(&self) -> Option<RawFd> {
        match &self.poll {
            Some(ep) => Some(ep.as_raw_fd()),
            None => self.queues.first().map(|q| q.xsk.raw_fd()),
        }
    }

    fn counters(&self) -> NicStats {
        self.stats
    }

    fn stats(&self) -> NicStats {
        // After `release` there are no sockets: the last figures stay.
        let (dropped, invalid) = self.kernel.get(|old| {
            if self.queues.is_empty() {
                old
            } else {
                self.read_kernel()
            }
        });
        let mut s = self.stats;
        s.rx_dropped += dropped;
        s.tx_errors += invalid;
        let lent: u64 = self.queues.iter().map(|q| u64::from(q.lent.count())).sum();
        s.held = lent + u64::from(self.stuck);
        s
    }

    fn release(&mut self, cache: &mut PoolCache<'_>) -> Result<(), NicError> {
        // Final kernel counters first, into the port's own: the sockets
        // are about to go.
        let (dropped, invalid) = self.read_kernel();
        self.stats.rx_dropped += dropped;
        self.stats.tx_errors += invalid;
        self.kernel.set((0, 0));
        // No more redirects, then no more sockets.
        self.link = None;
        self.poll = None;
        let queues = std::mem::take(&mut self.queues);
        let mut lent = Vec::with_capacity(queues.len());
        for Queue { xsk, lent: l, .. } in queues {
            drop(xsk);
            lent.push(l);
        }
        for (q, mut l) in lent.into_iter().enumerate() {
            match self.wait_released(q as u32) {
                Ok(()) => l.drain(|h| cache.free(h)),
                // Never hand back a buffer the device may still write:
                // these stay held (and counted in `held`) for good.
                Err(_) => self.stuck += l.count(),
            }
        }
        if self.stuck > 0 {
            return Err(NicError(format!(
                "af_xdp port on `{}`: the kernel did not release the queues within a second; \
                 {} buffers stay held",
                self.interface, self.stuck
            )));
        }
        Ok(())
    }
}
