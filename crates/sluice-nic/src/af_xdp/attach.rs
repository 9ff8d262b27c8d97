//! Attaching the redirect program and explaining what the kernel refused:
//! every failure of `AfXdpPort::open` ends as a message that says what to
//! do.

use std::io;
use std::os::fd::OwnedFd;

use super::bpf::{self, XdpMode};
use super::config::XdpModeChoice;
use super::xsk::StepError;

pub(super) fn privilege_hint() -> &'static str {
    "AF_XDP needs CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF (or CAP_SYS_ADMIN): run sluice as root \
     or `setcap cap_net_admin,cap_net_raw,cap_bpf,cap_sys_admin+ep` on the binary"
}

pub(super) fn attach(
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

pub(super) fn explain_xsk(ifname: &str, q: u32, queues: u32, e: StepError) -> String {
    let StepError { step, err } = e;
    let hint = match (step, err.raw_os_error()) {
        ("socket(AF_XDP)", Some(libc::EAFNOSUPPORT)) => {
            "this kernel has no AF_XDP sockets (needs CONFIG_XDP_SOCKETS=y, Linux ≥ 5.4); use an \
             `af_packet` port instead"
                .to_string()
        }
        (_, Some(libc::EPERM) | Some(libc::EACCES)) => privilege_hint().to_string(),
        ("XDP_UMEM_REG", Some(libc::ENOMEM) | Some(libc::ENOBUFS)) => {
            "the arena's buffers (the UMEM) could not be locked: raise the locked-memory limit \
             (`ulimit -l unlimited`, LimitMEMLOCK=infinity) or run with CAP_IPC_LOCK"
                .to_string()
        }
        ("XDP_UMEM_REG", Some(libc::EINVAL)) => {
            "this kernel refuses unaligned-chunk UMEMs (needs Linux ≥ 5.4 with \
             XDP_UMEM_UNALIGNED_CHUNK_FLAG); use an `af_packet` port"
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
