//! The NAT tables as checkpoint records, and tables rebuilt from records
//! (`state.rs` decodes and checks the bytes): indexes, slab free lists,
//! expiry bounds and the port pool's allocations are derived here, never
//! read from a checkpoint.

use super::{deltas, key, AddrRef, Behaviour, Endpoint, Mapping, Session, Tables, NONE};
use crate::nat::pool::{class_of, Pool};

/// A dynamic mapping as a checkpoint holds it (`state.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MappingRec {
    pub proto: u8,
    pub internal: Endpoint,
    pub key_remote: Endpoint,
    pub external: Endpoint,
    pub expires: u64,
}

/// A live session as a checkpoint holds it (`state.rs`): `mapping` is the
/// position of its mapping among the [`MappingRec`]s, or [`NONE`] for a
/// port-forwarding rule's; `filter_expires` is its address-dependent
/// filtering entry's expiry (0 without ADF).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SessionRec {
    pub proto: u8,
    pub internal: Endpoint,
    pub remote: Endpoint,
    pub external: Endpoint,
    pub mapping: u32,
    pub tcp: u8,
    pub expires: u64,
    pub marked: u64,
    pub filter_expires: u64,
}

/// Checkpoints: the tables as records, and tables rebuilt from records
/// (indexes, slabs, expiry bounds and port pool derived, never read).
impl Tables {
    /// Whether this config keeps address-dependent filtering entries.
    pub(crate) fn adf(&self) -> bool {
        self.filtering == Behaviour::AddressDependent
    }

    /// Session capacity (and dynamic mapping capacity).
    pub(crate) fn capacity(&self) -> usize {
        self.sessions.len()
    }

    /// Empty tables of the same config and seed, with the port-forwarding
    /// rules' static mappings added again (their ports reserved in `pool`,
    /// which should be empty).
    pub(crate) fn empty_like(&self, pool: &mut Pool) -> Tables {
        let cap = self.sessions.len();
        let statics = self.mappings.items.len().saturating_sub(cap);
        let mut t = Tables::new(
            cap,
            statics,
            self.mapping,
            self.filtering,
            self.timeouts,
            self.seed,
        );
        for m in self.mappings.items.iter().filter(|m| m.live && m.is_static) {
            t.add_static(m.proto, m.internal, m.external, pool);
        }
        t
    }

    /// The dynamic mappings and live sessions, in slot order.
    pub(crate) fn records(&self) -> (Vec<MappingRec>, Vec<SessionRec>) {
        let mut pos = vec![NONE; self.mappings.items.len()];
        let mut maps = Vec::with_capacity(self.mapping_count());
        for (i, m) in self.mappings.items.iter().enumerate() {
            if m.live && !m.is_static {
                pos[i] = maps.len() as u32;
                maps.push(MappingRec {
                    proto: m.proto,
                    internal: m.internal,
                    key_remote: m.key_remote,
                    external: m.external,
                    expires: m.expires,
                });
            }
        }
        let sessions = self.sessions.iter().filter(|x| x.live);
        let sessions = sessions.map(|x| SessionRec {
            proto: x.proto,
            internal: x.internal,
            remote: x.remote,
            external: x.external,
            mapping: pos.get(x.mapping as usize).copied().unwrap_or(NONE),
            tcp: x.tcp,
            expires: x.expires,
            marked: x.marked,
            filter_expires: self
                .filters
                .items
                .get(x.filter as usize)
                .map_or(0, |f| f.expires),
        });
        (maps, sessions.collect())
    }

    /// The port-forwarding rule's mapping of (`proto`, `internal`).
    pub(crate) fn static_of(&self, proto: u8, internal: Endpoint) -> Option<u32> {
        self.find_mapping(key(proto, internal, Endpoint::default()))
            .filter(|&m| self.mappings.items[m as usize].is_static)
    }

    /// Live sessions of mapping `m`.
    pub(crate) fn sessions_of(&self, m: u32) -> u32 {
        self.mappings
            .items
            .get(m as usize)
            .map_or(0, |m| m.sessions)
    }

    /// Adds dynamic mapping `r` on pool address number `pa`, taking its
    /// port there. Refused when its keys or port are taken, its key does not
    /// fit the mapping behaviour, or the table is full.
    pub(crate) fn put_mapping(
        &mut self,
        r: &MappingRec,
        pa: usize,
        pool: &mut Pool,
    ) -> Result<u32, &'static str> {
        if self.mapping.mask(r.key_remote) != r.key_remote {
            return Err("its remote key does not fit the mapping behaviour");
        }
        let ik = key(r.proto, r.internal, r.key_remote);
        let ek = key(r.proto, r.external, Endpoint::default());
        if self.find_mapping(ik).is_some() {
            return Err("another mapping has its internal key");
        }
        if self.find_ext(ek).is_some() || !pool.reserve(pa, class_of(r.proto), r.external.port) {
            return Err("its external endpoint is taken");
        }
        let Some(m) = self.mappings.alloc() else {
            return Err("more mappings than capacity");
        };
        self.mappings.items[m as usize] = Mapping {
            internal: r.internal,
            key_remote: r.key_remote,
            external: r.external,
            proto: r.proto,
            is_static: false,
            live: true,
            sessions: 0,
            pool_addr: pa as u32,
            expires: r.expires,
        };
        let (hi, he) = (self.h(ik), self.h(ek));
        self.m_int.insert(hi, m);
        self.m_ext.insert(he, m);
        Ok(m)
    }

    /// Adds session `r` through mapping slot `m`. Refused when it does not
    /// match its mapping, its keys are taken, its expiries contradict the
    /// mapping's or its filtering entry's, or the table is full.
    pub(crate) fn put_session(&mut self, r: &SessionRec, m: u32) -> Result<(), &'static str> {
        let mp = *self
            .mappings
            .items
            .get(m as usize)
            .ok_or("no such mapping")?;
        if !mp.live || (mp.proto, mp.internal, mp.external) != (r.proto, r.internal, r.external) {
            return Err("its endpoints are not its mapping's");
        }
        if !mp.is_static && mp.expires < r.marked {
            return Err("its mapping expires before it");
        }
        let (ki, ko) = (
            key(r.proto, r.internal, r.remote),
            key(r.proto, r.remote, r.external),
        );
        let ss = &self.sessions;
        let taken_in = self.s_in.find(self.h(ki), |s| {
            let s = &ss[s as usize];
            key(s.proto, s.internal, s.remote) == ki
        });
        let taken_out = self.s_out.find(self.h(ko), |s| {
            let s = &ss[s as usize];
            key(s.proto, s.remote, s.external) == ko
        });
        if taken_in.is_some() || taken_out.is_some() {
            return Err("another session has its tuple");
        }
        let mut filter = NONE;
        if self.adf() {
            if r.filter_expires < r.marked {
                return Err("its filtering entry expires before it");
            }
            filter = match self.find_filter(m, r.remote.addr) {
                Some(f) if self.filters.items[f as usize].expires != r.filter_expires => {
                    return Err("its filtering entry's expiry differs from another session's");
                }
                Some(f) => f,
                None => {
                    let f = self
                        .filters
                        .alloc()
                        .ok_or("more filtering entries than capacity")?;
                    self.filters.items[f as usize] = AddrRef {
                        mapping: m,
                        addr: r.remote.addr,
                        refs: 0,
                        expires: r.filter_expires,
                    };
                    let h = self.h((u128::from(m) << 32) | u128::from(r.remote.addr));
                    self.f_idx.insert(h, f);
                    f
                }
            };
        } else if r.filter_expires != 0 {
            return Err("a filtering entry without address-dependent filtering");
        }
        let s = self.s_slab.alloc().ok_or("more sessions than capacity")?;
        if let Some(f) = self.filters.items.get_mut(filter as usize) {
            f.refs += 1;
        }
        self.mappings.items[m as usize].sessions += 1;
        let (delta_out, delta_in) = deltas(r.internal, r.external);
        self.sessions[s as usize] = Session {
            internal: r.internal,
            external: r.external,
            remote: r.remote,
            proto: r.proto,
            tcp: r.tcp,
            live: true,
            // The full path sets them again for the packets it translates.
            fast: 0,
            mapping: m,
            filter,
            expires: r.expires,
            marked: r.marked,
            delta_out,
            delta_in,
        };
        self.bounds.lower(s, r.expires);
        let (hi, ho) = (self.h(ki), self.h(ko));
        self.s_in.insert(hi, s);
        self.s_out.insert(ho, s);
        Ok(())
    }
}
