//! A worker whose code panics.
//!
//! A worker's thread runs the packet path and the code of its inline NFs,
//! so a panic there (a platform bug, or a bug in an inline NF under
//! `settings.restart.inline_panic: stop`; by default an inline NF's panic
//! fails only that NF, `inline_crash.rs`) ends the worker: its ports are no longer polled and its packets stop. What must
//! not follow is a platform that still answers, applies and reports as if
//! nothing happened. So the panic is caught at the top of the worker's
//! thread, and from then on:
//!
//! - its mailbox records why ([`Mailbox::fail`](super::Mailbox::fail)),
//!   and drops every command, waiting or posted later, so whoever asks
//!   the worker something learns at once that no answer will come;
//! - [`Runtime::failure`](crate::Runtime::failure) names it, an apply is
//!   refused with it (`RunError::Failed`), and a report carries it in
//!   `failed_workers`;
//! - the worker is dropped like a stopped one: its host stops the NF
//!   template, whose NF processes die with it (`PR_SET_PDEATHSIG`).
//!
//! The worker does not try to go on: after a panic its state (rings half
//! drained, buffers in flight, an NF mid-batch) is not known to be whole.
//! What runs it (`sluice run`, the daemon) stops and says why; the daemon
//! exits with an error, and its desired state, kept on disk, is applied
//! again when it is started again.

use std::panic::{catch_unwind, AssertUnwindSafe};

use super::Worker;
use crate::inline_nf::panic_message;

impl Worker<'_> {
    /// [`Worker::serve`] until a stop command, or until the worker's code
    /// panics: then its mailbox records the panic's message (see the
    /// module docs), and the panic goes no further.
    pub fn serve_or_fail(&mut self) {
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| self.serve())) {
            let why = format!(
                "worker {} stopped: its code panicked: {}",
                self.cfg.index,
                panic_message(panic.as_ref())
            );
            tracing::error!("{why}");
            self.mail.fail(why);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc::{sync_channel, TryRecvError};

    use crate::worker::{Command, Mailbox};

    #[test]
    fn a_failed_mailbox_closes_every_reply_channel_waiting_or_posted_later() {
        let mail = Mailbox::default();
        let (waiting_tx, waiting) = sync_channel(1);
        mail.post(Command::Instances(waiting_tx));
        assert_eq!(
            waiting.try_recv().err(),
            Some(TryRecvError::Empty),
            "queued"
        );
        assert_eq!(mail.failure(), None);

        mail.fail("worker 0 stopped: its code panicked: boom".into());
        assert_eq!(waiting.try_recv().err(), Some(TryRecvError::Disconnected));
        let (later_tx, later) = sync_channel(1);
        mail.post(Command::Instances(later_tx));
        assert_eq!(later.try_recv().err(), Some(TryRecvError::Disconnected));
        assert!(mail.take().is_empty());

        // The first reason stays.
        mail.fail("again".into());
        assert_eq!(
            mail.failure(),
            Some("worker 0 stopped: its code panicked: boom")
        );
    }
}
