//! The moves a daemon keeps between two calls: what the control state
//! holds (a leaf module, so the control state does not import the
//! handlers).

use sluice_spec::{Component, Spec};

/// A move out of this daemon, exported and not yet committed or aborted.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub(super) nf: String,
    pub(super) part: Component,
}

/// A move into this daemon, imported and not yet resumed.
#[derive(Debug, Clone)]
pub struct Incoming {
    pub(super) nf: String,
    pub(super) ports: Vec<String>,
    /// What ran before the import (`None`: nothing).
    pub(super) before: Option<Spec>,
}
