//! DPDK port (cargo feature `dpdk`): any DPDK ethdev — a NIC bound to a
//! DPDK driver, or a virtual device such as `net_ring`, `net_null` or
//! `net_af_packet` — behind the [`NicPort`] contract.
//!
//! Frames are copied between mbufs and arena buffers at the boundary, as in
//! the AF_XDP port: the arena's 2240 B buffers are not DPDK mbufs, and the
//! copy keeps the pool's ownership accounting intact (see "NIC ports" in
//! `docs/architecture.md`).
//!
//! DPDK's fast-path calls (`rte_eth_rx_burst`, `rte_pktmbuf_alloc`, …) are
//! `static inline` in its headers, so a small C shim (`shim.c`, compiled by
//! `build.rs` with the `cc` crate against Debian's `libdpdk-dev`) gives them
//! linkable symbols; `ffi` holds the declarations and all the `unsafe`.
//!
//! EAL is initialised once per process, with the `eal_args` of the first
//! DPDK port opened; every later port must ask for the same arguments.
//! Virtual devices are created after EAL init with `rte_dev_probe`, so each
//! port brings its own `vdev` arguments.

mod ffi;
mod lcore;

use std::os::fd::RawFd;
use std::sync::{Mutex, OnceLock};

use serde::Deserialize;
use sluice_mem::{Arena, HandleBatch, PoolCache, DATA_ROOM, MAX_BATCH};
use sluice_spec::{NicSpec, SpecError};

use crate::sampled::Sampled;
use crate::{NicError, NicPort, NicStats};

/// Settings of one DPDK port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DpdkConfig {
    /// Device name (`interface`): a PCI address such as `0000:03:00.0`, or
    /// the name of a virtual device such as `net_ring0`.
    pub interface: String,
    /// Virtual device arguments (`vdev`): when set, the device is created as
    /// `<interface>,<vdev>` (e.g. `iface=veth0` for `net_af_packet0`, `size=64`
    /// for `net_null0`; an empty string for none).
    pub vdev: Option<String>,
    /// EAL arguments (`eal_args`, default `["--in-memory"]`, which needs
    /// huge pages; without them use `["--no-huge", "--no-shconf"]`). `-l 0`
    /// and `--no-telemetry` are added unless given.
    pub eal_args: Vec<String>,
    /// RX/TX queue pairs (`queues`, default 1).
    pub queues: u16,
    /// Descriptors per queue (`descriptors`, default 1024).
    pub descriptors: u16,
    /// Mbufs in the port's pool (`mbufs`, default 8191).
    pub mbufs: u32,
}

impl DpdkConfig {
    /// Defaults for device `interface`.
    pub fn new(interface: &str) -> Self {
        DpdkConfig {
            interface: interface.to_string(),
            vdev: None,
            eal_args: vec!["--in-memory".to_string()],
            queues: 1,
            descriptors: 1024,
            mbufs: 8191,
        }
    }

    /// Decodes a `dpdk` port of the spec.
    ///
    /// # Errors
    /// A located [`SpecError`] naming the option that is wrong.
    pub fn from_spec(spec: &NicSpec) -> Result<Self, SpecError> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Opts {
            vdev: Option<String>,
            eal_args: Option<Vec<String>>,
            queues: Option<u16>,
            descriptors: Option<u16>,
            mbufs: Option<u32>,
        }
        let o: Opts = spec.options.deserialize()?;
        let mut c = DpdkConfig::new(&spec.interface);
        c.vdev = o.vdev;
        if let Some(a) = o.eal_args {
            c.eal_args = a;
        }
        c.queues = o.queues.unwrap_or(1);
        if c.queues == 0 {
            return Err(spec
                .options
                .error_at_path("queues", "queues must be at least 1"));
        }
        c.descriptors = o.descriptors.unwrap_or(1024);
        if !(64..=8192).contains(&c.descriptors) {
            return Err(spec
                .options
                .error_at_path("descriptors", "descriptors must be between 64 and 8192"));
        }
        c.mbufs = o.mbufs.unwrap_or(8191);
        if c.mbufs < 2 * u32::from(c.descriptors) * u32::from(c.queues) {
            return Err(spec.options.error_at_path(
                "mbufs",
                "mbufs must be at least 2 × descriptors × queues (RX rings hold that many)",
            ));
        }
        Ok(c)
    }
}

/// The EAL arguments the process was initialised with, or why it failed.
static EAL: OnceLock<Result<Vec<String>, String>> = OnceLock::new();
/// Serialises device creation, setup and close (DPDK's control path is
/// not thread-safe); never taken on the packet path.
static CONTROL: Mutex<()> = Mutex::new(());

fn eal_argv(user: &[String]) -> Vec<String> {
    let mut v = vec!["sluice".to_string()];
    let has_lcores = user
        .iter()
        .any(|a| a == "-l" || a == "-c" || a.starts_with("--lcores") || a.starts_with("-l"));
    if !has_lcores {
        // One lcore: sluice runs its own threads, EAL must not start
        // workers on every core.
        v.extend(["-l".to_string(), "0".to_string()]);
    }
    if !user.iter().any(|a| a.contains("telemetry")) {
        v.push("--no-telemetry".to_string());
    }
    v.extend(user.iter().cloned());
    v
}

fn init_eal(args: &[String]) -> Result<(), String> {
    let r = EAL.get_or_init(|| {
        let argv = eal_argv(args);
        // rte_eal_init pins the calling thread to the main lcore; the
        // thread that opens ports is sluice's, so its affinity is restored.
        let saved = affinity::get();
        let r = ffi::eal_init(&argv).map_err(|e| {
            let hint = match e {
                libc::EACCES | libc::EPERM => "run as root (or with the capabilities DPDK needs)",
                libc::ENOMEM => "reserve huge pages or add `--no-huge` to eal_args",
                libc::EALREADY => "EAL was initialised by someone else in this process",
                _ => {
                    "check eal_args (DPDK's log above says which one is wrong); without huge \
                     pages use `--no-huge --no-shconf` (`--no-huge` cannot be combined with \
                     `--in-memory`), with them check `dpdk-hugepages.py -s`"
                }
            };
            format!(
                "EAL init with {argv:?} failed: {} ; {hint}",
                ffi::strerror(e)
            )
        });
        if let Some(set) = saved {
            affinity::set(&set);
        }
        r.map(|()| args.to_vec())
    });
    match r {
        Ok(done) if done == args => Ok(()),
        Ok(done) => Err(format!(
            "EAL is already initialised with eal_args {done:?}; every dpdk port of the process \
             must use the same eal_args (got {args:?})"
        )),
        Err(e) => Err(e.clone()),
    }
}

mod affinity {
    #![allow(unsafe_code)]
    pub(super) fn get() -> Option<libc::cpu_set_t> {
        // SAFETY: all-zero cpu_set_t is valid; sched_getaffinity writes at
        // most its size.
        let mut s: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: see above; pid 0 is the calling thread.
        let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&s), &mut s) };
        (r == 0).then_some(s)
    }
    pub(super) fn set(s: &libc::cpu_set_t) {
        // SAFETY: `s` is a valid cpu_set_t of the size passed.
        unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(s), s) };
    }
}

/// A started DPDK ethdev with its mbuf pool.
pub struct DpdkPort {
    name: String,
    port: u16,
    queues: u16,
    mempool: *mut ffi::Mempool,
    created: bool,
    stats: NicStats,
    /// The device's missed/no-mbuf and transmit-error counts
    /// (`rte_eth_stats_get`: register reads on a real NIC).
    device: Sampled<(u64, u64)>,
    rx_next: u16,
    tx_next: u16,
    mbufs: [*mut ffi::Mbuf; MAX_BATCH],
}

// SAFETY: the port id and mempool pointer refer to DPDK objects that any
// thread may use; the port is driven by one thread at a time (`&mut self`),
// and DPDK's per-queue functions need exactly that.
#[allow(unsafe_code)]
unsafe impl Send for DpdkPort {}

impl DpdkPort {
    /// Initialises EAL if needed, creates the virtual device if `vdev` is
    /// set, configures and starts the port.
    ///
    /// # Errors
    /// A [`NicError`] whose message says what is wrong and what to do.
    pub fn open(cfg: &DpdkConfig) -> Result<DpdkPort, NicError> {
        let name = &cfg.interface;
        let err = |m: String| NicError(format!("dpdk port `{name}`: {m}"));
        init_eal(&cfg.eal_args).map_err(err)?;
        let _g = CONTROL.lock().unwrap_or_else(|e| e.into_inner());
        let mut created = false;
        if let Some(args) = &cfg.vdev {
            if ffi::port_by_name(name).is_some() {
                return Err(err(
                    "the device already exists (another port uses it)".into()
                ));
            }
            let devargs = if args.is_empty() {
                name.clone()
            } else {
                format!("{name},{args}")
            };
            let (probed, log) = ffi::dev_probe(&devargs);
            let said = if log.is_empty() {
                String::new()
            } else {
                format!(" (DPDK: {log})")
            };
            probed.map_err(|e| {
                err(format!(
                    "creating virtual device `{devargs}`: {}{said}; the name must start with a \
                     DPDK virtual driver (net_ring, net_null, net_af_packet, net_tap, …) and the \
                     arguments must be that driver's",
                    ffi::strerror(e)
                ))
            })?;
            // A driver may refuse its arguments and still report success.
            if ffi::port_by_name(name).is_none() {
                ffi::vdev_uninit(name);
                return Err(err(format!(
                    "DPDK did not create virtual device `{devargs}`{said}; check the \
                     arguments against the driver's documentation"
                )));
            }
            created = true;
        }
        let Some(port) = ffi::port_by_name(name) else {
            return Err(err(
                "no such DPDK device: bind the NIC to a DPDK driver (`dpdk-devbind.py -b \
                 vfio-pci <pci>`) and use its PCI address, or create a virtual device with `vdev`"
                    .into(),
            ));
        };
        let mempool =
            ffi::port_setup(port, cfg.queues, cfg.descriptors, cfg.mbufs).map_err(|m| {
                if created {
                    ffi::port_close(port, true, std::ptr::null_mut());
                }
                err(m)
            })?;
        Ok(DpdkPort {
            name: name.clone(),
            port,
            queues: cfg.queues,
            mempool,
            created,
            stats: NicStats::default(),
            device: Sampled::new((0, 0)),
            rx_next: 0,
            tx_next: 0,
            mbufs: [std::ptr::null_mut(); MAX_BATCH],
        })
    }

    /// The DPDK port id.
    pub fn port_id(&self) -> u16 {
        self.port
    }

    /// Raw device counters (ipackets, opackets, ibytes, obytes, imissed,
    /// ierrors, oerrors, rx_nombuf), for comparing with ours.
    pub fn device_stats(&self) -> Option<[u64; 8]> {
        ffi::stats(self.port)
    }
}

impl Drop for DpdkPort {
    fn drop(&mut self) {
        let _g = CONTROL.lock().unwrap_or_else(|e| e.into_inner());
        ffi::port_close(self.port, self.created, self.mempool);
    }
}

impl NicPort for DpdkPort {
    fn kind(&self) -> &'static str {
        "dpdk"
    }

    fn rx_burst(
        &mut self,
        arena: &Arena,
        cache: &mut PoolCache<'_>,
        out: &mut HandleBatch,
        max: usize,
    ) -> Result<usize, NicError> {
        let max = max.min(MAX_BATCH - out.len());
        if max == 0 {
            return Ok(0);
        }
        lcore::ensure();
        let q = self.rx_next;
        self.rx_next = (self.rx_next + 1) % self.queues;
        let n = ffi::rx_burst(self.port, q, &mut self.mbufs[..max]);
        let mut appended = 0;
        for &m in &self.mbufs[..n] {
            let Some(mut h) = cache.alloc() else {
                // No buffer: the frame is lost like a NIC drop, counted.
                self.stats.rx_dropped += 1;
                continue;
            };
            let mut p = arena.pkt(&mut h);
            p.reset(DATA_ROOM);
            match ffi::copy_out(m, p.data_mut()) {
                Some(len) => {
                    p.set_len(len);
                    // Cannot fail: max ≤ room left in `out`.
                    if let Err(h) = out.push(h) {
                        cache.free(h);
                        self.stats.rx_dropped += 1;
                        continue;
                    }
                    self.stats.rx_packets += 1;
                    self.stats.rx_bytes += len as u64;
                    appended += 1;
                }
                None => {
                    cache.free(h);
                    self.stats.rx_oversize += 1;
                }
            }
        }
        ffi::free_bulk(&mut self.mbufs[..n]);
        Ok(appended)
    }

    fn tx_burst(
        &mut self,
        arena: &Arena,
        cache: &mut PoolCache<'_>,
        batch: &mut HandleBatch,
    ) -> Result<usize, NicError> {
        let before = batch.len();
        // Frames that cannot fit one mbuf are refused first, so the mbufs
        // below line up with the batch. Almost no batch has one: a read
        // pass decides, and only then is the batch compacted.
        let fits = |len: usize| len > 0 && len <= 2048 - 128;
        if !batch.iter_mut().all(|h| fits(arena.pkt(h).len() as usize)) {
            let stats = &mut self.stats;
            batch.retain(
                |h| {
                    let ok = fits(arena.pkt(h).len() as usize);
                    if !ok {
                        stats.tx_errors += 1;
                    }
                    ok
                },
                |h| cache.free(h),
            );
        }
        let n = batch.len();
        if n == 0 {
            return Ok(before);
        }
        lcore::ensure();
        let mbufs = &mut self.mbufs[..n];
        if !ffi::alloc_bulk(self.mempool, mbufs) {
            // Pool empty: nothing queued now; the caller retries.
            return Ok(before - n);
        }
        for (h, &m) in batch.iter_mut().zip(mbufs.iter()) {
            let ok = ffi::copy_in(m, arena.pkt(h).data());
            debug_assert!(ok, "length checked above");
        }
        let q = self.tx_next;
        self.tx_next = (self.tx_next + 1) % self.queues;
        let sent = ffi::tx_burst(self.port, q, mbufs);
        ffi::free_bulk(&mut mbufs[sent..]);
        let mut bytes = 0;
        batch.drain_front(sent, |mut h| {
            bytes += arena.pkt(&mut h).len() as u64;
            cache.free(h);
        });
        self.stats.tx_packets += sent as u64;
        self.stats.tx_bytes += bytes;
        Ok(before - batch.len())
    }

    /// Frames are copied between mbufs and arena buffers, both ways.
    fn mode(&self) -> Option<String> {
        Some("copy (mbuf ↔ arena buffer)".to_string())
    }

    fn rx_fd(&self) -> Option<RawFd> {
        // DPDK ports are polled.
        None
    }

    fn counters(&self) -> NicStats {
        self.stats
    }

    fn stats(&self) -> NicStats {
        let (dropped, errors) = self
            .device
            .get(|old| ffi::stats(self.port).map_or(old, |d| (d[4] + d[7], d[6])));
        let mut s = self.stats;
        s.rx_dropped += dropped;
        s.tx_errors += errors;
        s
    }
}

impl std::fmt::Debug for DpdkPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DpdkPort")
            .field("name", &self.name)
            .field("port", &self.port)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_spec::ConfigNode;

    fn spec(options: serde_json::Value) -> NicSpec {
        NicSpec {
            interface: "net_null0".into(),
            options: ConfigNode::from_json(options).with_path("ports[1]"),
        }
    }

    #[test]
    fn options_decode_with_defaults() {
        let c = DpdkConfig::from_spec(&spec(serde_json::json!({
            "vdev": "size=64", "eal_args": ["--no-huge", "--no-shconf"]
        })))
        .unwrap();
        assert_eq!(c.vdev.as_deref(), Some("size=64"));
        assert_eq!(c.eal_args, ["--no-huge", "--no-shconf"]);
        assert_eq!((c.queues, c.descriptors, c.mbufs), (1, 1024, 8191));
    }

    #[test]
    fn bad_options_name_the_field() {
        for (opts, field) in [
            (serde_json::json!({"queues": 0}), "ports[1].queues"),
            (
                serde_json::json!({"descriptors": 10}),
                "ports[1].descriptors",
            ),
            (serde_json::json!({"mbufs": 100}), "ports[1].mbufs"),
            (serde_json::json!({"eal": []}), "ports[1]"),
        ] {
            let e = DpdkConfig::from_spec(&spec(opts)).unwrap_err().to_string();
            assert!(e.contains(field), "{e}");
        }
    }

    #[test]
    fn eal_gets_one_lcore_unless_told_otherwise() {
        let a = eal_argv(&["--no-huge".to_string()]);
        assert_eq!(a, ["sluice", "-l", "0", "--no-telemetry", "--no-huge"]);
        let a = eal_argv(&["--lcores=1".to_string(), "--telemetry".to_string()]);
        assert_eq!(a, ["sluice", "--lcores=1", "--telemetry"]);
    }
}
