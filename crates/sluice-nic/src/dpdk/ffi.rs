//! Declarations of the C shim (`shim.c`) and the only `unsafe` of the DPDK
//! port: each wrapper states what the C side needs.
#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};

/// Opaque `struct rte_mbuf`.
#[repr(C)]
pub(crate) struct Mbuf {
    _private: [u8; 0],
}

/// Opaque `struct rte_mempool`.
#[repr(C)]
pub(crate) struct Mempool {
    _private: [u8; 0],
}

extern "C" {
    fn sl_eal_init(argc: c_int, argv: *mut *mut c_char) -> c_int;
    fn sl_strerror(err: c_int) -> *const c_char;
    fn sl_dev_probe(devargs: *const c_char, log: *mut c_char, loglen: usize) -> c_int;
    fn sl_vdev_uninit(name: *const c_char) -> c_int;
    fn sl_port_by_name(name: *const c_char, port: *mut u16) -> c_int;
    fn sl_port_setup(
        port: u16,
        nq: u16,
        nb_desc: u16,
        mbufs: c_uint,
        mp_out: *mut *mut Mempool,
        err: *mut c_char,
        errlen: usize,
    ) -> c_int;
    fn sl_port_close(port: u16, remove: c_int, mp: *mut Mempool);
    fn sl_thread_register() -> c_int;
    fn sl_thread_unregister();
    fn sl_rx_burst(port: u16, q: u16, pkts: *mut *mut Mbuf, n: u16) -> u16;
    fn sl_tx_burst(port: u16, q: u16, pkts: *mut *mut Mbuf, n: u16) -> u16;
    fn sl_mbuf_copy_out(m: *const Mbuf, dst: *mut c_void, cap: u32) -> c_int;
    fn sl_mbuf_free_bulk(pkts: *mut *mut Mbuf, n: c_uint);
    fn sl_mbuf_alloc_bulk(mp: *mut Mempool, pkts: *mut *mut Mbuf, n: c_uint) -> c_int;
    fn sl_mbuf_copy_in(m: *mut Mbuf, src: *const c_void, len: u16) -> c_int;
    fn sl_stats(port: u16, out: *mut u64) -> c_int;
}

/// `rte_strerror` of a positive errno.
pub(crate) fn strerror(err: i32) -> String {
    // SAFETY: rte_strerror returns a pointer to a NUL-terminated string in
    // static or thread-local storage, valid until the next call on this
    // thread; we copy it out at once.
    unsafe { CStr::from_ptr(sl_strerror(err.abs())) }
        .to_string_lossy()
        .into_owned()
}

/// `rte_eal_init` with `args` (argv[0] included). The strings are leaked:
/// EAL may keep pointers into argv for the life of the process.
pub(crate) fn eal_init(args: &[String]) -> Result<(), i32> {
    let mut argv: Vec<*mut c_char> = args
        .iter()
        .map(|a| {
            CString::new(a.as_str())
                .expect("no NUL in EAL arguments")
                .into_raw()
        })
        .collect();
    argv.push(std::ptr::null_mut());
    let argv = Box::leak(argv.into_boxed_slice());
    // SAFETY: argv is a NULL-terminated array of `args.len()` valid C
    // strings that live for the rest of the process; called at most once
    // (the caller holds a OnceLock).
    let r = unsafe { sl_eal_init(args.len() as c_int, argv.as_mut_ptr()) };
    if r < 0 {
        Err(-r)
    } else {
        Ok(())
    }
}

/// `rte_dev_probe(devargs)`: creates a (virtual) device after EAL init.
/// Returns the call's result (an errno on failure) and what DPDK logged
/// meanwhile, its lines joined by "; ".
pub(crate) fn dev_probe(devargs: &str) -> (Result<(), i32>, String) {
    let Ok(c) = CString::new(devargs) else {
        return (Err(libc::EINVAL), String::new());
    };
    let mut log = vec![0u8; 4096];
    // SAFETY: a valid C string, and a writable buffer of the length
    // passed, both alive for the duration of the call; the shim
    // NUL-terminates the buffer.
    let r = unsafe { sl_dev_probe(c.as_ptr(), log.as_mut_ptr().cast(), log.len()) };
    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
    let text = String::from_utf8_lossy(&log[..end])
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    (if r < 0 { Err(-r) } else { Ok(()) }, text)
}

/// `rte_vdev_uninit(name)`: frees the name of a virtual device whose
/// driver created no port (a failure is left to the next probe to report).
pub(crate) fn vdev_uninit(name: &str) {
    if let Ok(c) = CString::new(name) {
        // SAFETY: a valid C string for the duration of the call.
        let _ = unsafe { sl_vdev_uninit(c.as_ptr()) };
    }
}

/// The ethdev port id of device `name`.
pub(crate) fn port_by_name(name: &str) -> Option<u16> {
    let c = CString::new(name).ok()?;
    let mut p = 0u16;
    // SAFETY: valid C string and a writable u16.
    let r = unsafe { sl_port_by_name(c.as_ptr(), &mut p) };
    (r == 0).then_some(p)
}

/// Configures, starts and returns the mempool of `port`, or an error text.
pub(crate) fn port_setup(
    port: u16,
    queues: u16,
    desc: u16,
    mbufs: u32,
) -> Result<*mut Mempool, String> {
    let mut mp: *mut Mempool = std::ptr::null_mut();
    let mut err = [0u8; 256];
    // SAFETY: `mp` and `err` are writable; the shim writes at most
    // `err.len()` bytes (snprintf) including the NUL.
    let r = unsafe {
        sl_port_setup(
            port,
            queues,
            desc,
            mbufs,
            &mut mp,
            err.as_mut_ptr().cast(),
            err.len(),
        )
    };
    if r < 0 {
        let end = err.iter().position(|&b| b == 0).unwrap_or(err.len());
        Err(String::from_utf8_lossy(&err[..end]).into_owned())
    } else {
        Ok(mp)
    }
}

/// Stops and closes `port`, removes its device if `remove`, frees `mp`.
pub(crate) fn port_close(port: u16, remove: bool, mp: *mut Mempool) {
    // SAFETY: `port` was set up by `port_setup` and `mp` is its pool (or
    // null); no mbuf of the pool is held by us any more.
    unsafe { sl_port_close(port, c_int::from(remove), mp) }
}

/// Gives the calling thread an lcore id if it has none: `Ok(true)` if
/// it registered one now (give it back with [`thread_unregister`] on the
/// same thread), `Ok(false)` if it had one, `Err(errno)` if none is left.
pub(crate) fn thread_register() -> Result<bool, c_int> {
    // SAFETY: EAL is initialised (a port exists); the call touches only
    // the calling thread's lcore id and EAL's table of them.
    match unsafe { sl_thread_register() } {
        r if r < 0 => Err(-r),
        r => Ok(r == 1),
    }
}

/// Gives back the lcore id [`thread_register`] gave this thread.
pub(crate) fn thread_unregister() {
    // SAFETY: called once, on the thread that registered, when it no
    // longer uses DPDK (its thread-local guard's drop).
    unsafe { sl_thread_unregister() }
}

/// Receives up to `pkts.len()` mbufs into `pkts`; returns how many.
#[inline]
pub(crate) fn rx_burst(port: u16, q: u16, pkts: &mut [*mut Mbuf]) -> usize {
    let n = pkts.len().min(u16::MAX as usize) as u16;
    // SAFETY: `pkts` has room for `n` pointers; the port and queue are set up.
    usize::from(unsafe { sl_rx_burst(port, q, pkts.as_mut_ptr(), n) })
}

/// Queues mbufs for transmit; the driver owns the first `returned` ones.
#[inline]
pub(crate) fn tx_burst(port: u16, q: u16, pkts: &mut [*mut Mbuf]) -> usize {
    let n = pkts.len().min(u16::MAX as usize) as u16;
    // SAFETY: `pkts` holds `n` valid mbufs we own.
    usize::from(unsafe { sl_tx_burst(port, q, pkts.as_mut_ptr(), n) })
}

/// Copies a received frame into `dst`; its length, or None if longer.
#[inline]
pub(crate) fn copy_out(m: *mut Mbuf, dst: &mut [u8]) -> Option<usize> {
    let cap = dst.len().min(u32::MAX as usize) as u32;
    // SAFETY: `m` is a valid mbuf we own (from rx_burst) and `dst` is
    // writable for `cap` bytes; the shim writes only when the frame fits.
    let r = unsafe { sl_mbuf_copy_out(m, dst.as_mut_ptr().cast(), cap) };
    usize::try_from(r).ok()
}

/// Frees mbufs we own.
#[inline]
pub(crate) fn free_bulk(pkts: &mut [*mut Mbuf]) {
    if pkts.is_empty() {
        return;
    }
    // SAFETY: every pointer is a valid mbuf we own; they are not used again.
    unsafe { sl_mbuf_free_bulk(pkts.as_mut_ptr(), pkts.len() as c_uint) }
}

/// Allocates `pkts.len()` mbufs from `mp` (all or nothing).
#[inline]
pub(crate) fn alloc_bulk(mp: *mut Mempool, pkts: &mut [*mut Mbuf]) -> bool {
    // SAFETY: `mp` is the live pool of the port; `pkts` has room for
    // `pkts.len()` pointers.
    unsafe { sl_mbuf_alloc_bulk(mp, pkts.as_mut_ptr(), pkts.len() as c_uint) == 0 }
}

/// Sets a fresh mbuf's data to `src`; false if it does not fit.
#[inline]
pub(crate) fn copy_in(m: *mut Mbuf, src: &[u8]) -> bool {
    let Ok(len) = u16::try_from(src.len()) else {
        return false;
    };
    // SAFETY: `m` is a fresh mbuf we own; `src` is readable for `len` bytes.
    unsafe { sl_mbuf_copy_in(m, src.as_ptr().cast(), len) == 0 }
}

/// Device counters: ipackets, opackets, ibytes, obytes, imissed, ierrors,
/// oerrors, rx_nombuf.
pub(crate) fn stats(port: u16) -> Option<[u64; 8]> {
    let mut s = [0u64; 8];
    // SAFETY: `s` has the 8 slots the shim writes.
    (unsafe { sl_stats(port, s.as_mut_ptr()) } == 0).then_some(s)
}
