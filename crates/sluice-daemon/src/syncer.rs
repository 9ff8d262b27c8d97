//! A thread that makes written files durable (`fdatasync`) while the
//! control thread does something else.
//!
//! An addition's journal line must be on disk before the addition is
//! acknowledged, and `fdatasync` is not cheap: 120 µs on this project's
//! VM when idle, several hundred under load, all of it on the path of an
//! NF's creation when it ran after the change was applied. The control
//! thread now writes the line first, hands the file here, applies the
//! change (which mostly waits for the workers and the new NFs) and waits
//! for the sync only before it answers (`desired.rs`).
//!
//! One thread, one file at a time, in order; a sync that fails is
//! reported to the one who waits for it.

use std::fs::File;
use std::io;
use std::sync::mpsc::{sync_channel, Receiver, Sender, SyncSender};

type Job = (File, SyncSender<io::Result<()>>);

/// The sync thread (it ends when this is dropped).
#[derive(Debug)]
pub struct Syncer {
    tx: Sender<Job>,
}

/// A sync under way.
#[derive(Debug)]
pub struct Pending {
    rx: Receiver<io::Result<()>>,
}

impl Pending {
    /// Blocks until the file is durable, or says why it is not.
    pub fn wait(self) -> io::Result<()> {
        self.rx
            .recv()
            .unwrap_or_else(|_| Err(io::Error::other("the sync thread is gone")))
    }
}

impl Syncer {
    /// Starts the thread.
    pub fn start() -> io::Result<Syncer> {
        let (tx, rx) = std::sync::mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("sluice-sync".into())
            .spawn(move || {
                for (file, done) in rx {
                    let _ = done.send(file.sync_data());
                }
            })?;
        Ok(Syncer { tx })
    }

    /// Makes what was written to `file` durable, in the background.
    pub fn sync(&self, file: File) -> Pending {
        let (done, rx) = sync_channel(1);
        if let Err(e) = self.tx.send((file, done)) {
            // The thread is gone (it never panics; only at exit): sync
            // here rather than not at all.
            let (file, done) = e.0;
            let _ = done.send(file.sync_data());
        }
        Pending { rx }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_file_handed_over_is_synced_and_its_result_comes_back() {
        let d = tempfile::tempdir().unwrap();
        let s = Syncer::start().unwrap();
        let mut f = File::create(d.path().join("a")).unwrap();
        f.write_all(b"line\n").unwrap();
        assert!(s.sync(f).wait().is_ok());
        assert_eq!(std::fs::read(d.path().join("a")).unwrap(), b"line\n");
        // A descriptor that cannot be synced (a pipe) says so.
        let (r, _w) = std::io::pipe().unwrap();
        let pipe = File::from(std::os::fd::OwnedFd::from(r));
        assert!(s.sync(pipe).wait().is_err());
    }
}
