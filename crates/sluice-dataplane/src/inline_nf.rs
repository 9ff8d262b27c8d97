//! An inline NF: an NF object the worker calls on its own thread, kept
//! behind one door that a panic cannot get past.
//!
//! An inline NF's code runs on the worker's thread, so a bug in it (an
//! index out of bounds, an `unwrap` on a bad packet) would otherwise end
//! the worker and every chain it serves. Every call the worker makes into
//! the NF goes through [`InlineNf::call`], which catches a panic there.
//! The NF is then *crashed*: its state is no longer known to be whole, so
//! its code is never called again; [`InlineNf::call`] answers
//! [`Fault::Down`] without running it until the worker puts a fresh
//! instance in its place ([`InlineNf::replace`]). What the worker does
//! about it (the packets of the batch, the restart policy) is
//! `worker/inline_crash.rs`'s job.
//!
//! Catching costs nothing while nothing panics (`catch_unwind` is an
//! unwinding landing pad, not a check per call). Under
//! `settings.restart.inline_panic: stop` the worker lets the panic go on
//! instead, and the platform stops with its message (`worker/failure.rs`).

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use sluice_nf::NetworkFunction;

/// An inline NF's object, and whether its code has panicked.
pub struct InlineNf {
    code: Box<dyn NetworkFunction>,
    crashed: bool,
}

/// Why [`InlineNf::call`] did not return the call's result.
pub enum Fault {
    /// The NF had crashed before: its code was not called.
    Down,
    /// The NF's code panicked during this call; the NF is now crashed.
    /// The panic's payload (for its message, or to go on with it).
    Panicked(Box<dyn Any + Send>),
}

impl InlineNf {
    /// Wraps a freshly built NF.
    pub fn new(code: Box<dyn NetworkFunction>) -> Self {
        InlineNf {
            code,
            crashed: false,
        }
    }

    /// Whether its code has panicked (and not been replaced since).
    pub fn is_crashed(&self) -> bool {
        self.crashed
    }

    /// Runs `f` on the NF's code, unless the NF has crashed. A panic in
    /// `f` is caught and crashes the NF.
    ///
    /// `AssertUnwindSafe` is sound here in the only sense it asks about:
    /// whatever `f` leaves half-changed (the NF's own state) is never
    /// looked at again, as the NF is never called again; what the worker
    /// lent it (the batch, the allocation cache) is checked by the
    /// worker after a fault (see `worker/inline_crash.rs`).
    #[inline]
    pub fn call<R>(&mut self, f: impl FnOnce(&mut dyn NetworkFunction) -> R) -> Result<R, Fault> {
        if self.crashed {
            return Err(Fault::Down);
        }
        let code = &mut *self.code;
        catch_unwind(AssertUnwindSafe(|| f(code))).map_err(|payload| {
            self.crashed = true;
            Fault::Panicked(payload)
        })
    }

    /// Puts a fresh instance in place of this one (a restart, or a new
    /// config that replaces it); the NF is whole again.
    pub fn replace(&mut self, fresh: Box<dyn NetworkFunction>) {
        let old = std::mem::replace(&mut self.code, fresh);
        let crashed = std::mem::replace(&mut self.crashed, false);
        drop_code(old, crashed);
    }
}

impl Drop for InlineNf {
    fn drop(&mut self) {
        let old = std::mem::replace(&mut self.code, Box::new(Gone));
        drop_code(old, self.crashed);
    }
}

/// Drops an NF's object. A crashed one's drop may meet its own state half
/// changed (in a debug build a batch of handles it never gave back says so
/// with a panic): that panic is the NF's, not the worker's.
fn drop_code(code: Box<dyn NetworkFunction>, crashed: bool) {
    if crashed {
        let _ = catch_unwind(AssertUnwindSafe(move || drop(code)));
    } else {
        drop(code);
    }
}

/// What an [`InlineNf`] holds while it is being dropped (no allocation:
/// a zero-sized box).
struct Gone;

impl NetworkFunction for Gone {
    fn process(&mut self, _: &mut sluice_nf::Batch<'_>, _: &mut sluice_nf::Context<'_>) {}
}

/// The message a panic was raised with (`panic!` with a literal gives a
/// `&str`, with arguments a `String`; anything else is not text).
pub fn panic_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "(a panic without a message)"
    }
}

#[cfg(test)]
mod tests {
    use std::panic::resume_unwind;

    use sluice_nf::{Batch, Context};

    use super::*;

    /// Counts its calls; panics on the call numbered `panic_at`.
    struct Fragile {
        calls: u32,
        panic_at: u32,
    }

    impl NetworkFunction for Fragile {
        fn process(&mut self, _: &mut Batch<'_>, _: &mut Context<'_>) {}
        fn reset(&mut self) {
            self.calls += 1;
            if self.calls == self.panic_at {
                // A panic without the panic hook: other tests of this
                // binary fork, and a child forked while this thread held
                // the hook's locks would hang on them.
                resume_unwind(Box::new(format!("call {} went wrong", self.calls)));
            }
        }
    }

    fn fragile(panic_at: u32) -> InlineNf {
        InlineNf::new(Box::new(Fragile { calls: 0, panic_at }))
    }

    #[test]
    fn a_panic_crashes_the_nf_and_its_code_is_never_called_again() {
        let mut nf = fragile(2);
        assert!(nf.call(|c| c.reset()).is_ok());
        match nf.call(|c| c.reset()) {
            Err(Fault::Panicked(p)) => assert!(panic_message(p.as_ref()).contains("call 2")),
            _ => panic!("the second call panics"),
        }
        assert!(nf.is_crashed());
        // Not called: a third call would not panic, and would return Ok.
        let mut ran = false;
        assert!(matches!(
            nf.call(|c| {
                ran = true;
                c.reset()
            }),
            Err(Fault::Down)
        ));
        assert!(!ran);
    }

    #[test]
    fn a_fresh_instance_makes_it_whole_again() {
        let mut nf = fragile(1);
        assert!(nf.call(|c| c.reset()).is_err());
        nf.replace(Box::new(Fragile {
            calls: 0,
            panic_at: 0,
        }));
        assert!(!nf.is_crashed());
        assert!(nf.call(|c| c.reset()).is_ok());
    }

    #[test]
    fn a_panic_s_message_is_read_whatever_its_form() {
        // The payloads `panic!` makes: a literal's `&str`, a formatted
        // message's `String` (raised without the hook, as above).
        let literal = catch_unwind(|| resume_unwind(Box::new("plain"))).unwrap_err();
        assert_eq!(panic_message(literal.as_ref()), "plain");
        let n = 7;
        let formatted = catch_unwind(|| resume_unwind(Box::new(format!("n = {n}")))).unwrap_err();
        assert_eq!(panic_message(formatted.as_ref()), "n = 7");
        let other = catch_unwind(|| resume_unwind(Box::new(7u8))).unwrap_err();
        assert_eq!(panic_message(other.as_ref()), "(a panic without a message)");
    }
}
