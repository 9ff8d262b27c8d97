//! Shared helpers of the AF_XDP tests: a veth pair into a fresh network
//! namespace, an AF_PACKET socket on the far end, kernel counters.
#![allow(unsafe_code, dead_code)]

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use sluice_mem::{Arena, ArenaConfig};

/// Whether we run as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn run(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A veth pair: `inside` in our namespace (the port's side), `peer` in a
/// new namespace `ns`. Dropping it deletes both.
pub struct Veth {
    pub ns: String,
    pub inside: String,
    pub peer: String,
}

impl Veth {
    pub fn new(tag: &str) -> Veth {
        Veth::with_queues(tag, 1)
    }

    /// A pair with `queues` RX and TX queues on each end.
    pub fn with_queues(tag: &str, queues: u32) -> Veth {
        static N: AtomicU32 = AtomicU32::new(0);
        let id = format!(
            "{}{}",
            std::process::id() % 100_000,
            N.fetch_add(1, Ordering::Relaxed)
        );
        let v = Veth {
            ns: format!("slx-{tag}-{id}"),
            inside: format!("sx{tag}{id}"),
            peer: format!("sp{tag}{id}"),
        };
        run(&["ip", "netns", "add", &v.ns]);
        let q = queues.to_string();
        run(&[
            "ip",
            "link",
            "add",
            &v.inside,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            &v.peer,
            "netns",
            &v.ns,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
        ]);
        // No IPv6 autoconfiguration traffic, so the counters see only ours.
        run(&[
            "sysctl",
            "-qw",
            &format!("net.ipv6.conf.{}.disable_ipv6=1", v.inside),
        ]);
        run(&[
            "ip",
            "netns",
            "exec",
            &v.ns,
            "sysctl",
            "-qw",
            &format!("net.ipv6.conf.{}.disable_ipv6=1", v.peer),
        ]);
        run(&["ip", "link", "set", &v.inside, "up"]);
        run(&["ip", "-n", &v.ns, "link", "set", &v.peer, "up"]);
        v
    }

    /// An AF_PACKET socket bound to the peer, inside its namespace.
    pub fn peer_socket(&self) -> PeerSocket {
        let peer = self.peer.clone();
        // A socket stays in the namespace it was created in.
        self.in_namespace(move || PeerSocket::open(&peer))
    }

    /// Runs `f` on a thread inside the peer's namespace (setns affects
    /// only the calling thread).
    pub fn in_namespace<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let ns = format!("/var/run/netns/{}", self.ns);
        std::thread::spawn(move || {
            let file = std::fs::File::open(&ns).unwrap();
            // SAFETY: setns on an open namespace file; affects this thread only.
            let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
            f()
        })
        .join()
        .unwrap()
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["link", "del", &self.inside])
            .output();
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).output();
    }
}

/// A raw packet socket on one interface.
pub struct PeerSocket {
    fd: OwnedFd,
    ifindex: i32,
}

impl PeerSocket {
    fn open(ifname: &str) -> PeerSocket {
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: plain socket(2), checked below.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(proto)) };
        assert!(
            fd >= 0,
            "AF_PACKET socket: {}",
            std::io::Error::last_os_error()
        );
        // SAFETY: fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let c = std::ffi::CString::new(ifname).unwrap();
        // SAFETY: valid C string.
        let ifindex = unsafe { libc::if_nametoindex(c.as_ptr()) } as i32;
        assert!(ifindex > 0);
        // SAFETY: all-zero sockaddr_ll is valid; we fill the fields we need.
        let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sa.sll_family = libc::AF_PACKET as u16;
        sa.sll_protocol = proto;
        sa.sll_ifindex = ifindex;
        // SAFETY: `sa` is a valid sockaddr_ll of the size passed.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sa as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        assert_eq!(r, 0, "bind: {}", std::io::Error::last_os_error());
        PeerSocket { fd, ifindex }
    }

    /// Sends one frame.
    pub fn send(&self, f: &[u8]) {
        // SAFETY: `f` is readable for its length.
        let r = unsafe { libc::send(self.fd.as_raw_fd(), f.as_ptr().cast(), f.len(), 0) };
        assert_eq!(
            r,
            f.len() as isize,
            "send: {}",
            std::io::Error::last_os_error()
        );
    }

    /// Sends one frame if the interface takes it now (false: a full
    /// queue, e.g. under a blast).
    pub fn try_send(&self, f: &[u8]) -> bool {
        // SAFETY: `f` is readable for its length.
        let r = unsafe { libc::send(self.fd.as_raw_fd(), f.as_ptr().cast(), f.len(), 0) };
        r == f.len() as isize
    }

    /// Receives `n` frames that came in from the wire (not our own
    /// outgoing ones), giving up at `timeout`.
    pub fn recv_incoming(&self, n: usize, timeout: Duration) -> Vec<Vec<u8>> {
        let deadline = Instant::now() + timeout;
        let mut out = Vec::new();
        let mut buf = vec![0u8; 4096];
        while out.len() < n && Instant::now() < deadline {
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            if unsafe { libc::poll(&mut pfd, 1, 100) } <= 0 {
                continue;
            }
            // SAFETY: all-zero sockaddr_ll is valid.
            let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut sl = std::mem::size_of::<libc::sockaddr_ll>() as u32;
            // SAFETY: `buf` and `sa` are writable for the lengths passed.
            let r = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                    (&mut sa as *mut libc::sockaddr_ll).cast(),
                    &mut sl,
                )
            };
            if r > 0 && sa.sll_pkttype != libc::PACKET_OUTGOING && sa.sll_ifindex == self.ifindex {
                out.push(buf[..r as usize].to_vec());
            }
        }
        out
    }
}

/// A test frame of `len` bytes: broadcast, local experimental ethertype
/// 0x88b5, then `seq` and a pattern.
pub fn frame(seq: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len.max(18)];
    f[..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    f[14..18].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in f[18..].iter_mut().enumerate() {
        *b = (i as u8) ^ (seq as u8);
    }
    f
}

/// A kernel interface counter from /sys/class/net/<if>/statistics.
pub fn sys_counter(ifname: &str, name: &str) -> u64 {
    std::fs::read_to_string(format!("/sys/class/net/{ifname}/statistics/{name}"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Whether no XDP program is attached to `ifname`, waiting up to 2 s: the
/// kernel may finish releasing a BPF link after the last descriptor closes
/// (deferred work), so "detached" is a condition to wait for, not a race
/// to win. Returns the last `ip link` output for messages.
pub fn xdp_detached(ifname: &str) -> (bool, String) {
    let mut out = link_show(ifname);
    for _ in 0..100 {
        if !out.contains("prog/xdp") {
            return (true, out);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        out = link_show(ifname);
    }
    (false, out)
}

/// `ip -d link show dev IFNAME`.
pub fn link_show(ifname: &str) -> String {
    let out = Command::new("ip")
        .args(["-d", "link", "show", "dev", ifname])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A small arena for a test.
pub fn arena() -> Arena {
    Arena::create(ArenaConfig {
        buffers: 4096,
        ring_size: 64,
        nf_slots: 1,
        workers: 1,
        hugepages: false,
        large_buffers: 0,
        ..Default::default()
    })
    .unwrap()
}
