//! A typed, framed, non-blocking message channel over a stream socket.
//!
//! Each message is serialised with `postcard` and framed as a 4-byte
//! little-endian length followed by the bytes. Neither end ever blocks on
//! the other: [`Channel::send`] queues the frame and writes as much as the
//! socket takes; what is left goes out on later [`Channel::flush`] calls
//! (the owner polls for writability while [`Channel::wants_write`]).
//! [`Channel::recv`] reads whatever is available and returns complete
//! messages. A platform and a template that both had messages for the
//! other could once deadlock, each spinning on `EAGAIN` in `sendto` and
//! neither reading (680 NFs started at once); with queues on both sides
//! and reads never skipped, that cannot happen.
//!
//! Frames above [`MAX_FRAME`] or bytes that do not decode are protocol
//! errors: the channel reports itself broken and the owner treats the peer
//! as gone.

use std::io::{self, Read, Write};
use std::marker::PhantomData;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;

use serde::de::DeserializeOwned;
use serde::Serialize;

/// Largest frame either side accepts (an NF config with its rules is far
/// smaller; a routes table travels as a file path, not inline).
pub const MAX_FRAME: usize = 64 << 20;

/// Most descriptors one [`Channel::send_fds`] carries: the arena's
/// regions (platform words, each trust domain's slots and buffers, large
/// buffers).
pub const MAX_FDS: usize = 2 * sluice_mem::arena::MAX_DOMAINS + 2;

/// Bytes `recv` reads per `read` call.
const READ_CHUNK: usize = 16 * 1024;

/// One end of a channel that sends `Out` and receives `In`.
pub struct Channel<Out, In> {
    sock: UnixStream,
    inbuf: Vec<u8>,
    /// Where `recv` reads into, zeroed once here: a fresh 16 KiB array per
    /// call was a 16 KiB memset every time the worker looked for messages
    /// (each maintenance pass, ≈ 1,000 times a second: ≈ 16,000
    /// instructions each, callgrind).
    rbuf: Box<[u8; READ_CHUNK]>,
    outbuf: Vec<u8>,
    /// Bytes of `outbuf` already written.
    sent: usize,
    closed: bool,
    _types: PhantomData<fn(Out) -> In>,
}

impl<Out: Serialize, In: DeserializeOwned> Channel<Out, In> {
    /// Wraps a connected socket (made non-blocking here).
    pub fn new(sock: UnixStream) -> io::Result<Self> {
        sock.set_nonblocking(true)?;
        Ok(Channel {
            sock,
            inbuf: Vec::new(),
            rbuf: Box::new([0; READ_CHUNK]),
            outbuf: Vec::new(),
            sent: 0,
            closed: false,
            _types: PhantomData,
        })
    }

    /// Queues `msg` and writes what the socket takes now. Fails only if
    /// the message cannot be encoded or the peer is gone.
    pub fn send(&mut self, msg: &Out) -> io::Result<()> {
        if self.closed {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "peer is gone"));
        }
        let bytes = postcard::to_stdvec(msg).map_err(io::Error::other)?;
        if bytes.len() > MAX_FRAME {
            return Err(io::Error::other(format!(
                "message of {} bytes exceeds the {MAX_FRAME}-byte frame limit",
                bytes.len()
            )));
        }
        self.outbuf
            .extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        self.outbuf.extend_from_slice(&bytes);
        self.flush();
        Ok(())
    }

    /// Writes queued bytes until the socket would block.
    pub fn flush(&mut self) {
        while self.sent < self.outbuf.len() && !self.closed {
            match self.sock.write(&self.outbuf[self.sent..]) {
                Ok(0) => self.closed = true,
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => self.closed = true,
            }
        }
        if self.sent == self.outbuf.len() {
            self.outbuf.clear();
            self.sent = 0;
        } else if self.sent > (1 << 20) {
            // Keep the buffer from growing without bound under a slow peer.
            self.outbuf.drain(..self.sent);
            self.sent = 0;
        }
    }

    /// Whether bytes wait to be written (poll for writability).
    pub fn wants_write(&self) -> bool {
        self.sent < self.outbuf.len()
    }

    /// Bytes queued and not yet written.
    pub fn queued(&self) -> usize {
        self.outbuf.len() - self.sent
    }

    /// Reads what is available and appends the complete messages to `out`.
    pub fn recv(&mut self, out: &mut Vec<In>) {
        while !self.closed {
            match self.sock.read(&mut self.rbuf[..]) {
                Ok(0) => self.closed = true,
                Ok(n) => self.inbuf.extend_from_slice(&self.rbuf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => self.closed = true,
            }
        }
        let mut at = 0;
        while self.inbuf.len() - at >= 4 {
            let mut len = [0u8; 4];
            len.copy_from_slice(&self.inbuf[at..at + 4]);
            let len = u32::from_le_bytes(len) as usize;
            if len > MAX_FRAME {
                self.closed = true;
                break;
            }
            if self.inbuf.len() - at - 4 < len {
                break;
            }
            match postcard::from_bytes(&self.inbuf[at + 4..at + 4 + len]) {
                Ok(m) => out.push(m),
                Err(_) => {
                    self.closed = true;
                    break;
                }
            }
            at += 4 + len;
        }
        self.inbuf.drain(..at);
    }

    /// Whether the peer closed, or broke the protocol.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Sends up to [`MAX_FDS`] descriptors (`SCM_RIGHTS`) with a one-byte
    /// payload, before any framed message is queued (the receiver takes
    /// them first).
    pub fn send_fds(&mut self, fds: &[BorrowedFd<'_>]) -> io::Result<()> {
        use rustix::net::{sendmsg, SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
        use std::mem::MaybeUninit;
        debug_assert!(self.outbuf.is_empty(), "the descriptors go first");
        if fds.len() > MAX_FDS {
            return Err(io::Error::other("too many descriptors for one message"));
        }
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        if !control.push(SendAncillaryMessage::ScmRights(fds)) {
            return Err(io::Error::other("the descriptors do not fit the message"));
        }
        // One byte, so the receiver's recvmsg has something to return.
        self.sock.set_nonblocking(false)?;
        let r = sendmsg(
            &self.sock,
            &[io::IoSlice::new(&[0xfd])],
            &mut control,
            SendFlags::NOSIGNAL,
        );
        self.sock.set_nonblocking(true)?;
        r?;
        Ok(())
    }

    /// Receives the descriptors sent with [`Self::send_fds`], waiting up
    /// to `timeout_ms` for them.
    pub fn recv_fds(&mut self, timeout_ms: i32) -> io::Result<Vec<OwnedFd>> {
        use rustix::net::{recvmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
        use std::mem::MaybeUninit;
        sluice_sys::wait_readable(self.sock.as_fd(), timeout_ms)?;
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let mut byte = [0u8; 1];
        let got = recvmsg(
            &self.sock,
            &mut [io::IoSliceMut::new(&mut byte)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        )?;
        if got.bytes != 1 {
            return Err(io::Error::other("no descriptor arrived"));
        }
        let mut fds = Vec::new();
        for msg in control.drain() {
            if let RecvAncillaryMessage::ScmRights(got) = msg {
                fds.extend(got);
            }
        }
        if fds.is_empty() {
            return Err(io::Error::other("the message carried no descriptor"));
        }
        Ok(fds)
    }
}

impl<Out, In> AsFd for Channel<Out, In> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type A = Channel<String, Vec<u32>>;
    type B = Channel<Vec<u32>, String>;

    fn pair() -> (A, B) {
        let (a, b) = UnixStream::pair().unwrap();
        (Channel::new(a).unwrap(), Channel::new(b).unwrap())
    }

    #[test]
    fn messages_arrive_whole_and_in_order() {
        let (mut a, mut b) = pair();
        a.send(&"one".to_string()).unwrap();
        a.send(&"two".to_string()).unwrap();
        let mut got = Vec::new();
        b.recv(&mut got);
        assert_eq!(got, ["one", "two"]);
        b.send(&vec![1, 2, 3]).unwrap();
        let mut back = Vec::new();
        a.recv(&mut back);
        assert_eq!(back, [vec![1, 2, 3]]);
    }

    #[test]
    fn both_ends_sending_more_than_the_socket_holds_never_block() {
        // Each side queues far more than a socket buffer before reading:
        // with blocking writes this deadlocks (defect: 680 NFs at start).
        let (mut a, mut b) = pair();
        let big = vec![7u32; 1 << 16];
        for i in 0..64 {
            a.send(&format!("{i}:{}", "x".repeat(10_000))).unwrap();
            b.send(&big).unwrap();
        }
        assert!(a.wants_write() && b.wants_write());
        let (mut at_a, mut at_b) = (Vec::new(), Vec::new());
        for _ in 0..10_000 {
            a.flush();
            b.flush();
            a.recv(&mut at_a);
            b.recv(&mut at_b);
            if at_a.len() == 64 && at_b.len() == 64 {
                break;
            }
        }
        assert_eq!((at_a.len(), at_b.len()), (64, 64));
        assert!(at_b[63].starts_with("63:"));
    }

    #[test]
    fn garbage_and_oversized_frames_close_the_channel() {
        let (a, mut b) = pair();
        let mut raw = a.sock.try_clone().unwrap();
        raw.write_all(&3u32.to_le_bytes()).unwrap();
        raw.write_all(&[0xff, 0xff, 0xff]).unwrap();
        let mut got = Vec::new();
        b.recv(&mut got);
        assert!(b.is_closed() && got.is_empty());
        let (a, mut b) = pair();
        let mut raw = a.sock.try_clone().unwrap();
        raw.write_all(&(MAX_FRAME as u32 + 1).to_le_bytes())
            .unwrap();
        b.recv(&mut got);
        assert!(b.is_closed());
    }

    #[test]
    fn descriptors_travel_before_the_messages() {
        let (mut a, mut b) = pair();
        let pipes: Vec<_> = (0..3).map(|_| sluice_sys::output_pipe().unwrap()).collect();
        let ends: Vec<_> = pipes.iter().map(|(_, w)| w.as_fd()).collect();
        a.send_fds(&ends).unwrap();
        a.send(&"after".to_string()).unwrap();
        let fds = b.recv_fds(1000).unwrap();
        assert_eq!(fds.len(), 3);
        for (fd, (r, _)) in fds.iter().zip(&pipes) {
            rustix::io::write(fd, b"hi").unwrap();
            let mut buf = [0u8; 2];
            assert_eq!(rustix::io::read(r, &mut buf).unwrap(), 2);
        }
        let too_many: Vec<_> = (0..=MAX_FDS).map(|_| ends[0]).collect();
        assert!(a.send_fds(&too_many).is_err());
        let mut got = Vec::new();
        b.recv(&mut got);
        assert_eq!(got, ["after"]);
    }
}
