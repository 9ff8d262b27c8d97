//! `load_balancer`: spreads the connections of a virtual service (VIP,
//! ports) over backends with Maglev consistent hashing, and keeps each
//! connection on its backend.
//!
//! A request (a TCP or UDP packet to the VIP on a served port) is looked up
//! in the connection table by its client 5-tuple (through a per-flow-id
//! cache); a new connection takes the Maglev table's backend for the
//! tuple's hash and is recorded, so it keeps that backend while the
//! backend set changes. A connection whose backend is marked down moves to
//! the backend Maglev now gives (counted `rescheduled`); connections of
//! other backends do not move. In `nat` mode the destination VIP:port is
//! rewritten to the backend's address:port and the backend's replies
//! (matched by a reverse-tuple table, since the platform gives them a
//! different flow id) are rewritten to come from VIP:port; IPv4 header and
//! TCP/UDP checksums are updated incrementally (RFC 1624). In `dsr` mode
//! only the destination MAC is rewritten (the backend holds the VIP and
//! answers directly). Packets not for the service pass untouched.
//!
//! | config key | type | default | meaning |
//! |---|---|---|---|
//! | `vip` | address | required | virtual IP (v4 or v6) |
//! | `ports` | list of ports | all | served destination ports |
//! | `proto` | `tcp`/`udp`/`any` | `any` | served protocols |
//! | `mode` | `nat`/`dsr` | `nat` | rewrite |
//! | `backends[]` | `{name, addr, port?, mac?, weight?}` | required | `mac` required for dsr; `port` defaults to the client's destination port; weight 1–100, default 1 |
//! | `table_size` | prime | 65537, or the next prime ≥ 100 × backends | Maglev table size M |
//! | `max_connections` | integer | flow capacity | connection table size |
//! | `idle_timeout_s` | integer | 300 | idle connections are forgotten after this |
//! | `health.down` | list of backend names | `[]` | backends marked down |
//!
//! Drop reasons: `no_backend` (every backend down), `fragment` (IP
//! fragments to the VIP: their ports are unknown). Extended counters: one
//! per backend (request packets), by backend index.
//!
//! ```yaml
//! - name: lb
//!   type: load_balancer
//!   config:
//!     vip: 10.0.0.100
//!     ports: [80]
//!     backends:
//!       - { name: web1, addr: 10.0.1.1, port: 8080 }
//!       - { name: web2, addr: 10.0.1.2, port: 8080, weight: 2 }
//! ```

pub mod balancer;
pub mod config;
pub mod maglev;
pub mod nat;
mod state;
#[cfg(test)]
mod state_tests;

use sluice_nf::{Batch, BuildContext, Context, DropReason, NetworkFunction, NfType};
use sluice_spec::SpecError;

use balancer::{Action, Balancer};

const NO_BACKEND: DropReason = DropReason::nf_local(0);
const FRAGMENT: DropReason = DropReason::nf_local(1);

const C_NEW: usize = 0;
const C_TRACKED: usize = 1;
const C_REPLIES: usize = 2;
const C_RESCHEDULED: usize = 3;
const C_UNTRACKED: usize = 4;
const C_EXPIRED: usize = 5;
const C_OTHER: usize = 6;
const C_CONNECTIONS: usize = 7;

/// The NF wrapper around [`Balancer`].
pub struct LoadBalancer {
    /// The core (public so tests can mark backends down).
    pub lb: Balancer,
    /// Requests per backend in this batch, and which backends have any:
    /// one extended-counter update per backend used, not per packet.
    per_backend: Vec<u32>,
    touched: Vec<u16>,
}

impl LoadBalancer {
    /// Wraps a balancer.
    pub fn new(lb: Balancer) -> LoadBalancer {
        LoadBalancer {
            per_backend: vec![0; lb.backends().len()],
            touched: Vec::with_capacity(lb.backends().len()),
            lb,
        }
    }
}

impl NetworkFunction for LoadBalancer {
    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        let now = ctx.now_ns();
        let lb = &mut self.lb;
        let (per_backend, touched) = (&mut self.per_backend, &mut self.touched);
        lb.sweep(now);
        batch.for_each(|p| {
            let flow_id = p.flow_id();
            match lb.handle(p.data_mut(), flow_id, now) {
                Action::ToBackend(b) => {
                    if let Some(n) = per_backend.get_mut(usize::from(b)) {
                        if *n == 0 {
                            touched.push(b);
                        }
                        *n += 1;
                    }
                }
                Action::Reply | Action::Other => {}
                Action::NoBackend => p.drop_with(NO_BACKEND),
                Action::Fragment => p.drop_with(FRAGMENT),
                Action::Malformed(e) => p.drop_malformed(e),
            }
        });
        for b in touched.drain(..) {
            let n = std::mem::take(&mut per_backend[usize::from(b)]);
            ctx.count_ext(usize::from(b), u64::from(n));
        }
        let s = lb.take_stats();
        ctx.count(C_NEW, s.new_connections);
        ctx.count(C_TRACKED, s.tracked);
        ctx.count(C_REPLIES, s.replies);
        ctx.count(C_RESCHEDULED, s.rescheduled);
        ctx.count(C_UNTRACKED, s.untracked);
        ctx.count(C_EXPIRED, s.expired);
        ctx.count(C_OTHER, s.other);
        ctx.set_gauge(C_CONNECTIONS, lb.connections() as u64);
    }

    fn flow_end(&mut self, flow_id: u32, ctx: &mut Context<'_>) {
        self.lb.flow_end(flow_id);
        ctx.set_gauge(C_CONNECTIONS, self.lb.connections() as u64);
    }

    fn reset(&mut self) {
        self.lb.reset();
    }

    /// Version 1: the tracked connections (layout in `state.rs`).
    fn state_version(&self) -> Option<u16> {
        Some(state::VERSION)
    }

    fn checkpoint(&self, out: &mut sluice_nf::StateWriter) {
        self.lb.write_state(out);
    }

    fn restore(&mut self, state: &[u8]) -> Result<(), sluice_nf::StateError> {
        self.lb.read_state(state)
    }
}

fn build(ctx: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
    Ok(Box::new(LoadBalancer::new(config::compile(ctx)?)))
}

/// Type descriptor.
pub const TYPE: NfType = NfType {
    name: "load_balancer",
    summary: "spreads a virtual service's connections over backends with Maglev hashing and connection tracking (NAT or DSR)",
    drop_reasons: &["no_backend", "fragment"],
    counters: &[
        "new_connections",
        "tracked",
        "replies",
        "rescheduled",
        "untracked",
        "expired",
        "other",
        "connections",
    ],
    build,
    frames: sluice_nf::FrameNeeds::MtuFrames,
};
