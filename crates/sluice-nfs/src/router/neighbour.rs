//! The neighbour table: IP address (and port) → MAC, filled by ARP / NDP
//! and static config; RFC 826 / RFC 4861 §7.3 states reduced to what a
//! forwarding plane needs (incomplete, reachable, static).
//!
//! Fixed capacity, open addressing with linear probing, sized at build
//! time: learning on the packet path never allocates. When the table is
//! full, new neighbours are not learned (counted by the caller). Entries
//! are never removed (no aging yet; a learned MAC is replaced when the
//! neighbour announces a new one).

/// State of an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// A request was sent at `stamp_ns`; no answer yet.
    Incomplete,
    /// Learned from ARP / NDP.
    Reachable,
    /// From config; never overwritten by learning.
    Static,
}

#[derive(Clone, Copy)]
struct Slot {
    key: u128,
    port: u16,
    used: bool,
    state: State,
    mac: [u8; 6],
    stamp_ns: u64,
}

const EMPTY: Slot = Slot {
    key: 0,
    port: 0,
    used: false,
    state: State::Incomplete,
    mac: [0; 6],
    stamp_ns: 0,
};

/// Key of an IPv4 neighbour: the IPv4-mapped IPv6 address.
#[inline]
pub fn v4_key(a: u32) -> u128 {
    0xffff_0000_0000 | a as u128
}

/// Result of [`Neighbours::learn`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Learned {
    /// A new entry was created.
    New,
    /// An existing entry was updated (or confirmed).
    Updated,
    /// Nothing changed (static entry, or no entry and `create` false).
    Ignored,
    /// The table is full.
    Full,
}

/// Fixed-capacity neighbour table.
pub struct Neighbours {
    slots: Vec<Slot>,
    mask: usize,
    len: usize,
    capacity: usize,
    /// Bumped by every change, so a copy of a lookup's result (the
    /// router's last-next-hop memo) knows when it may be stale.
    version: u64,
}

impl Neighbours {
    /// A table holding up to `capacity` neighbours.
    pub fn new(capacity: usize) -> Neighbours {
        let capacity = capacity.max(1);
        let n = (capacity * 2).next_power_of_two();
        Neighbours {
            slots: vec![EMPTY; n],
            mask: n - 1,
            len: 0,
            capacity,
            version: 0,
        }
    }

    /// Number of entries (any state).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the table has no entry.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The slot holding `(key, port)`, or the empty slot where it would go.
    #[inline]
    fn probe(&self, key: u128, port: u16) -> usize {
        let h = (key as u64 ^ (key >> 64) as u64 ^ port as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut i = (h >> 32) as usize & self.mask;
        loop {
            let s = &self.slots[i];
            if !s.used || (s.key == key && s.port == port) {
                return i;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// The MAC of a resolved neighbour.
    // One hash and usually one cache line; part of router/nf_forward_*.
    #[inline]
    pub fn mac(&self, key: u128, port: u16) -> Option<[u8; 6]> {
        let s = &self.slots[self.probe(key, port)];
        (s.used && s.state != State::Incomplete).then_some(s.mac)
    }

    /// Changes whenever any entry changes (learned, added, solicited,
    /// cleared): a [`Self::mac`] result read at version `v` still holds
    /// while `version()` is `v`.
    #[inline]
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The state of an entry, if any.
    pub fn state(&self, key: u128, port: u16) -> Option<State> {
        let s = &self.slots[self.probe(key, port)];
        s.used.then_some(s.state)
    }

    /// Records `mac` for `(key, port)`: creates the entry only if `create`
    /// (RFC 826: a request addressed to us; Linux `arp_accept=0` ignores
    /// other unsolicited announcements), otherwise only updates an existing
    /// one (including an incomplete one we asked about).
    pub fn learn(
        &mut self,
        key: u128,
        port: u16,
        mac: [u8; 6],
        now_ns: u64,
        create: bool,
    ) -> Learned {
        self.version += 1;
        let i = self.probe(key, port);
        let s = &mut self.slots[i];
        if s.used {
            if s.state == State::Static {
                return Learned::Ignored;
            }
            s.state = State::Reachable;
            s.mac = mac;
            s.stamp_ns = now_ns;
            return Learned::Updated;
        }
        if !create {
            return Learned::Ignored;
        }
        if self.len == self.capacity {
            return Learned::Full;
        }
        *s = Slot {
            key,
            port,
            used: true,
            state: State::Reachable,
            mac,
            stamp_ns: now_ns,
        };
        self.len += 1;
        Learned::New
    }

    /// Adds a static entry (config); `false` if the table is full.
    pub fn add_static(&mut self, key: u128, port: u16, mac: [u8; 6]) -> bool {
        self.version += 1;
        let i = self.probe(key, port);
        if !self.slots[i].used {
            if self.len == self.capacity {
                return false;
            }
            self.len += 1;
        }
        self.slots[i] = Slot {
            key,
            port,
            used: true,
            state: State::Static,
            mac,
            stamp_ns: 0,
        };
        true
    }

    /// Called when a packet needs the unresolved neighbour `(key, port)`:
    /// true if a request should be sent now (none sent within
    /// `retrans_ns`, RFC 4861 RetransTimer / Linux `retrans_time_ms`).
    /// Records the request in an incomplete entry when there is room.
    pub fn should_solicit(&mut self, key: u128, port: u16, now_ns: u64, retrans_ns: u64) -> bool {
        self.version += 1;
        let i = self.probe(key, port);
        let s = &mut self.slots[i];
        if s.used {
            if s.state != State::Incomplete {
                return false;
            }
            if now_ns.saturating_sub(s.stamp_ns) < retrans_ns {
                return false;
            }
            s.stamp_ns = now_ns;
            return true;
        }
        if self.len < self.capacity {
            *s = Slot {
                key,
                port,
                used: true,
                state: State::Incomplete,
                mac: [0; 6],
                stamp_ns: now_ns,
            };
            self.len += 1;
        }
        true
    }

    /// Forgets every learned entry, keeping static ones.
    pub fn clear_learned(&mut self) {
        self.version += 1;
        let keep: Vec<Slot> = self
            .slots
            .iter()
            .filter(|s| s.used && s.state == State::Static)
            .copied()
            .collect();
        self.slots.iter_mut().for_each(|s| *s = EMPTY);
        self.len = 0;
        for s in keep {
            self.add_static(s.key, s.port, s.mac);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learn_solicit_static_and_capacity() {
        let mut t = Neighbours::new(2);
        let a = v4_key(0x0a00_0001);
        assert_eq!(t.mac(a, 0), None);
        let v = t.version();
        assert_eq!(t.learn(a, 0, [1; 6], 5, false), Learned::Ignored);
        assert_ne!(t.version(), v, "every mutating call moves the version");
        assert!(t.should_solicit(a, 0, 100, 1000));
        assert!(
            !t.should_solicit(a, 0, 500, 1000),
            "within the retransmit time"
        );
        assert!(t.should_solicit(a, 0, 1100, 1000));
        assert_eq!(t.state(a, 0), Some(State::Incomplete));
        assert_eq!(t.mac(a, 0), None);
        // A reply to our request updates the incomplete entry.
        assert_eq!(t.learn(a, 0, [2; 6], 1200, false), Learned::Updated);
        assert_eq!(t.mac(a, 0), Some([2; 6]));
        assert!(!t.should_solicit(a, 0, 5000, 1000));
        // Same address on another port is another neighbour.
        assert_eq!(t.mac(a, 1), None);
        assert!(t.add_static(7, 1, [7; 6]));
        assert_eq!(t.learn(7, 1, [8; 6], 0, true), Learned::Ignored);
        assert_eq!(t.mac(7, 1), Some([7; 6]));
        assert_eq!(t.learn(9, 0, [9; 6], 0, true), Learned::Full);
        assert_eq!(t.len(), 2);
        t.clear_learned();
        assert_eq!(t.len(), 1);
        assert_eq!(t.mac(7, 1), Some([7; 6]));
    }
}
