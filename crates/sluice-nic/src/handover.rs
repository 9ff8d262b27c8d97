//! Descriptors handed over from another sluice daemon (`sluice migrate`).
//!
//! A tap interface lives as long as someone holds one of its queue
//! descriptors, and frames sent to it while nobody reads wait in its
//! queues (up to the interface's `txqueuelen` each). So a port can move
//! between two daemons without the interface noticing: the new daemon
//! takes copies of the old one's descriptors (`sluice_sys::take_fds`),
//! offers them here under the interface's name, and the port it then
//! opens for that interface ([`crate::open`]) runs on them instead of
//! creating the interface, and reads the frames that waited.
//!
//! An offer is taken by the next open of its interface, or withdrawn (the
//! move failed): either way it is used once.

use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::sync::Mutex;

use sluice_spec::PortKind;

use crate::NicError;

/// Offers by interface name. A process-wide table because the port is
/// opened on a worker, far from the control code that received the
/// descriptors; it holds at most one migration's ports at a time.
static OFFERS: Mutex<BTreeMap<String, Vec<OwnedFd>>> = Mutex::new(BTreeMap::new());

/// The interface a port of `kind` would run on if it can be handed over
/// (a `tap` port); `None` for kinds whose descriptors cannot move.
pub fn interface_of(kind: &PortKind) -> Option<&str> {
    match kind {
        PortKind::Tap(n) => Some(&n.interface),
        _ => None,
    }
}

/// Offers `fds` to the next port opened on `kind`'s interface.
///
/// # Errors
/// `kind` cannot run on handed-over descriptors.
pub fn offer(kind: &PortKind, fds: Vec<OwnedFd>) -> Result<(), NicError> {
    let Some(interface) = interface_of(kind) else {
        return Err(NicError(format!(
            "a {} port cannot be handed over (only tap ports can)",
            kind.kind_name()
        )));
    };
    lock().insert(interface.to_string(), fds);
    Ok(())
}

/// Closes an offer nobody took (the move failed). Closing our copies
/// leaves the interface to whoever else holds it.
pub fn withdraw(kind: &PortKind) {
    if let Some(interface) = interface_of(kind) {
        lock().remove(interface);
    }
}

/// Takes the offer for `interface`, if there is one.
pub(crate) fn take(interface: &str) -> Option<Vec<OwnedFd>> {
    lock().remove(interface)
}

fn lock() -> std::sync::MutexGuard<'static, BTreeMap<String, Vec<OwnedFd>>> {
    // The table holds plain descriptors: a panic elsewhere cannot leave
    // it inconsistent.
    OFFERS.lock().unwrap_or_else(|e| e.into_inner())
}
