//! `AfXdpPort`: the XSKs of one interface behind the [`NicPort`] contract.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use sluice_mem::{Arena, HandleBatch, PoolCache, DATA_ROOM, MAX_BATCH};

use super::bpf::{self, XdpMode};
use super::config::{AfXdpConfig, XdpModeChoice};
use super::xsk::{self, StepError, Xsk, XskBind, XskSizes, FRAME};
use crate::{NicError, NicPort, NicStats};

/// Frames the generic (copy-mode) transmit path takes per `sendto` wakeup
/// in the kernel (`MAX_PER_SOCKET_BUDGET`); bounds our wakeup loop.
const KERNEL_TX_BUDGET: u32 = 32;

struct Queue {
    xsk: Xsk,
    /// UMEM frames free for transmit (the upper half of the UMEM plus
    /// completed ones), pre-sized so the packet path never allocates.
    tx_free: Vec<u64>,
}

/// An AF_XDP port: one XSK per queue, an XSKMAP and the redirect program
/// attached with a BPF link.
pub struct AfXdpPort {
    // Field order is drop order: detach the program first so no frame is
    // redirected to a socket being torn down.
    _link: OwnedFd,
    _prog: OwnedFd,
    queues: Vec<Queue>,
    _map: OwnedFd,
    /// With several queues, an epoll instance over all their sockets.
    poll: Option<OwnedFd>,
    interface: String,
    ifindex: u32,
    mode: XdpMode,
    /// Longest frame the interface takes: MTU + Ethernet and VLAN headers,
    /// at most a UMEM frame. Longer ones are refused as `tx_errors` here
    /// rather than sent and silently dropped by the device.
    max_tx_len: usize,
    stats: NicStats,
    rx_next: usize,
    tx_next: usize,
}

fn privilege_hint() -> &'static str {
    "AF_XDP needs CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF (or CAP_SYS_ADMIN): run sluice as root \
     or `setcap cap_net_admin,cap_net_raw,cap_bpf,cap_sys_admin+ep` on the binary"
}

impl AfXdpPort {
    /// Opens the port: creates the XSKMAP, one socket per queue, loads the
    /// redirect program and attaches it.
    ///
    /// # Errors
    /// A [`NicError`] whose message says what is wrong and what to do.
    pub fn open(cfg: &AfXdpConfig) -> Result<AfXdpPort, NicError> {
        let ifname = &cfg.interface;
        let err = |m: String| NicError(format!("af_xdp port on `{ifname}`: {m}"));
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
        let max_tx_len = (mtu as usize + 14 + 4).min(FRAME as usize);
        // Attach before binding any socket: a refused attachment then leaves
        // no socket bound (their release is deferred in the kernel).
        let (link, mode) = attach(&prog, ifindex, cfg.xdp_mode).map_err(err)?;
        let sizes = XskSizes {
            frames: cfg.ring_size * 2,
            ring: cfg.ring_size,
        };
        let mut queues = Vec::with_capacity(cfg.queues as usize);
        for q in 0..cfg.queues {
            let x = Xsk::open(ifindex, q, sizes, cfg.force_copy)
                .map_err(|e| err(explain_xsk(ifname, q, cfg.queues, e)))?;
            bpf::xskmap_set(&map, q, x.raw_fd())
                .map_err(|e| err(format!("adding queue {q}'s socket to the XSKMAP: {e}")))?;
            let tx_free = (sizes.ring..sizes.frames)
                .map(|f| u64::from(f) * u64::from(FRAME))
                .collect();
            queues.push(Queue { xsk: x, tx_free });
        }
        let poll = if queues.len() > 1 {
            let fds: Vec<RawFd> = queues.iter().map(|q| q.xsk.raw_fd()).collect();
            Some(xsk::epoll_of(&fds).map_err(|e| err(format!("epoll over the queues: {e}")))?)
        } else {
            None
        };
        Ok(AfXdpPort {
            _link: link,
            _prog: prog,
            queues,
            _map: map,
            poll,
            interface: ifname.clone(),
            ifindex,
            mode,
            max_tx_len,
            stats: NicStats::default(),
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
        self.queues[0].xsk.bind
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

fn attach(
    prog: &OwnedFd,
    ifindex: u32,
    choice: XdpModeChoice,
) -> Result<(OwnedFd, XdpMode), String> {
    let busy = |e: &io::Error| {
        format!(
            "attaching the XDP program: {e}: the interface already has an XDP program; see \
             `ip link show` and remove it (`ip link set dev <if> xdp off`) or stop the program \
             that owns it"
        )
    };
    let other = |e: io::Error, mode: XdpMode| match e.raw_os_error() {
        Some(libc::EBUSY) | Some(libc::EEXIST) => busy(&e),
        Some(libc::EPERM) | Some(libc::EACCES) => {
            format!("attaching the XDP program: {e}; {}", privilege_hint())
        }
        Some(libc::EINVAL) if mode == XdpMode::Generic => format!(
            "attaching the XDP program with a BPF link: {e}: this kernel cannot attach XDP \
             programs through BPF links (needs Linux ≥ 5.9)"
        ),
        _ => format!("attaching the XDP program in {} mode: {e}", mode.as_str()),
    };
    match choice {
        XdpModeChoice::Generic => bpf::link_xdp(prog, ifindex, XdpMode::Generic)
            .map(|l| (l, XdpMode::Generic))
            .map_err(|e| other(e, XdpMode::Generic)),
        XdpModeChoice::Native => bpf::link_xdp(prog, ifindex, XdpMode::Native)
            .map(|l| (l, XdpMode::Native))
            .map_err(|e| match e.raw_os_error() {
                Some(libc::EOPNOTSUPP) | Some(libc::EINVAL) => format!(
                    "attaching the XDP program in native mode: {e}: the driver has no native \
                     XDP support; set `xdp_mode: generic` (or `auto`)"
                ),
                _ => other(e, XdpMode::Native),
            }),
        XdpModeChoice::Auto => match bpf::link_xdp(prog, ifindex, XdpMode::Native) {
            Ok(l) => Ok((l, XdpMode::Native)),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY) | Some(libc::EEXIST)) => {
                Err(busy(&e))
            }
            Err(_) => bpf::link_xdp(prog, ifindex, XdpMode::Generic)
                .map(|l| (l, XdpMode::Generic))
                .map_err(|e| other(e, XdpMode::Generic)),
        },
    }
}

fn explain_xsk(ifname: &str, q: u32, queues: u32, e: StepError) -> String {
    let StepError { step, err } = e;
    let hint = match (step, err.raw_os_error()) {
        ("socket(AF_XDP)", Some(libc::EAFNOSUPPORT)) => {
            "this kernel has no AF_XDP sockets (needs CONFIG_XDP_SOCKETS=y, Linux ≥ 5.4); use an \
             `af_packet` port instead"
                .to_string()
        }
        (_, Some(libc::EPERM) | Some(libc::EACCES)) => privilege_hint().to_string(),
        ("XDP_UMEM_REG", Some(libc::ENOMEM) | Some(libc::ENOBUFS)) => {
            "the UMEM could not be locked: raise the locked-memory limit (`ulimit -l unlimited`, \
             LimitMEMLOCK=infinity) or lower `ring_size`"
                .to_string()
        }
        ("bind", Some(libc::EINVAL)) => format!(
            "queue {q} does not exist on `{ifname}` (see `ethtool -l {ifname}`); lower `queues` \
             (now {queues})"
        ),
        ("bind", Some(libc::EBUSY)) => format!(
            "queue {q} of `{ifname}` is already bound by another AF_XDP socket; stop the other \
             program"
        ),
        ("bind", Some(libc::ENETDOWN) | Some(libc::ENODEV)) => {
            format!("`{ifname}` disappeared; check `ip link show`")
        }
        _ => String::new(),
    };
    if hint.is_empty() {
        format!("queue {q}: {step}: {err}")
    } else {
        format!("queue {q}: {step}: {err}; {hint}")
    }
}

impl Queue {
    /// Moves up to `max` received frames into fresh arena buffers.
    fn rx(
        &mut self,
        arena: &Arena,
        cache: &mut PoolCache<'_>,
        out: &mut HandleBatch,
        max: u32,
        stats: &mut NicStats,
    ) -> usize {
        let x = &mut self.xsk;
        let n = x.rx.peek(max);
        // Every frame on the RX ring came from the fill ring, which has as
        // many slots as the RX half of the UMEM, so there is always room to
        // give the frames back.
        let room = x.fill.free(n);
        debug_assert_eq!(room, n);
        let n = n.min(room);
        let mut taken = 0;
        let mut appended = 0;
        while taken < n {
            let d = x.rx.read(taken);
            let len = d.len as usize;
            if len > DATA_ROOM {
                stats.rx_oversize += 1;
            } else {
                // No buffer: leave the rest on the RX ring for the next call
                // (the kernel counts what overflows it as `rx_ring_full`).
                let Some(mut h) = cache.alloc() else { break };
                let mut p = arena.pkt(&mut h);
                p.reset(len);
                // ≈ 13–21 ns for 64 B of ≈ 60 ns per frame here (bench:
                // af_xdp_rx, under load): the cost of not sharing the arena
                // as UMEM (see the module doc).
                x.copy_out(d.addr, p.data_mut());
                if let Err(h) = out.push(h) {
                    cache.free(h);
                    break;
                }
                stats.rx_packets += 1;
                stats.rx_bytes += len as u64;
                appended += 1;
            }
            x.fill.write(taken, d.addr & !u64::from(FRAME - 1));
            taken += 1;
        }
        if taken > 0 {
            x.rx.release(taken);
            x.fill.submit(taken);
        }
        // Zero-copy drivers stop polling when the fill ring ran dry and ask
        // for a wakeup; copy mode never sets the flag, so this syscall runs
        // only when the kernel asked for it.
        if x.fill.needs_wakeup() {
            x.kick_rx();
        }
        // Frames a previous tx_burst left on the TX ring (the kernel took
        // fewer than asked) must not wait for the next transmit: one more
        // wakeup, only when some are pending.
        if x.tx.needs_wakeup() && x.tx.pending() > 0 {
            let _ = x.kick_tx();
        }
        appended
    }

    /// Returns completed transmit frames to the free list.
    fn reap_completions(&mut self) {
        let x = &mut self.xsk;
        let n = x.comp.peek(u32::MAX);
        for i in 0..n {
            self.tx_free.push(x.comp.read(i) & !u64::from(FRAME - 1));
        }
        x.comp.release(n);
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
        self.rx_next = (self.rx_next + 1) % nq;
        Ok(got)
    }

    fn tx_burst(
        &mut self,
        arena: &Arena,
        cache: &mut PoolCache<'_>,
        batch: &mut HandleBatch,
    ) -> Result<usize, NicError> {
        let nq = self.queues.len();
        let q = &mut self.queues[self.tx_next];
        self.tx_next = (self.tx_next + 1) % nq;
        q.reap_completions();
        let room = q
            .xsk
            .tx
            .free(batch.len() as u32)
            .min(q.tx_free.len() as u32);
        let before = batch.len();
        let mut sent = 0u32;
        let mut full = false;
        let stats = &mut self.stats;
        let max_len = self.max_tx_len;
        batch.retain(
            |h| {
                if full {
                    return true;
                }
                let p = arena.pkt(h);
                let data = p.data();
                if data.is_empty() || data.len() > max_len {
                    stats.tx_errors += 1;
                    return false;
                }
                if sent == room {
                    full = true;
                    return true;
                }
                let addr = q.tx_free.pop().expect("room counts free frames");
                q.xsk.copy_in(addr, data);
                q.xsk.tx.write(
                    sent,
                    libc::xdp_desc {
                        addr,
                        len: data.len() as u32,
                        options: 0,
                    },
                );
                stats.tx_bytes += data.len() as u64;
                sent += 1;
                false
            },
            |h| cache.free(h),
        );
        if sent > 0 {
            q.xsk.tx.submit(sent);
            stats.tx_packets += u64::from(sent);
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

    fn rx_fd(&self) -> Option<RawFd> {
        match &self.poll {
            Some(ep) => Some(ep.as_raw_fd()),
            None => self.queues.first().map(|q| q.xsk.raw_fd()),
        }
    }

    fn stats(&self) -> NicStats {
        let mut s = self.stats;
        for q in &self.queues {
            if let Ok(k) = q.xsk.statistics() {
                // The kernel's rx_dropped already includes the frames it
                // dropped for an empty fill ring (it bumps both counters).
                s.rx_dropped += k.rx_dropped + k.rx_ring_full;
                s.tx_errors += k.tx_invalid_descs;
            }
        }
        s
    }
}
