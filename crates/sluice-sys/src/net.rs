//! Network helpers for the wire tests and benchmark: entering a network
//! namespace from one thread, and sending UDP datagrams in batches.

use std::io;

/// Moves the calling thread (only it) into the network namespace `name`
/// created by `ip netns add` (`/run/netns/<name>`): sockets it opens
/// afterwards live in that namespace. Used by the wire tests and benchmark
/// to run clients and servers on either side of a bump in the wire.
pub fn enter_netns(name: &str) -> io::Result<()> {
    use std::os::fd::AsFd;
    let f = std::fs::File::open(format!("/run/netns/{name}"))?;
    rustix::thread::move_into_link_name_space(
        f.as_fd(),
        Some(rustix::thread::LinkNameSpaceType::Network),
    )?;
    Ok(())
}

/// Sends `count` copies of `payload` (at most 64) on a connected UDP
/// socket with one `sendmmsg` call; returns how many were sent.
pub fn send_copies(sock: &std::net::UdpSocket, payload: &[u8], count: usize) -> io::Result<usize> {
    use rustix::net::{MMsgHdr, SendAncillaryBuffer, SendFlags};
    let iov = [io::IoSlice::new(payload)];
    let mut control: [SendAncillaryBuffer<'_, '_, '_>; 64] =
        std::array::from_fn(|_| SendAncillaryBuffer::default());
    let mut msgs: Vec<MMsgHdr<'_>> = control
        .iter_mut()
        .take(count.min(64))
        .map(|c| MMsgHdr::new(&iov, c))
        .collect();
    Ok(rustix::net::sendmmsg(sock, &mut msgs, SendFlags::DONTWAIT)?)
}
