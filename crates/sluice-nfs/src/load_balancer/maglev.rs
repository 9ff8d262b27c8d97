//! Maglev consistent hashing (Eisenbud et al., "Maglev: A Fast and Reliable
//! Software Network Load Balancer", NSDI 2016, §3.4).
//!
//! Each backend gets a permutation of the `M` table slots from two hashes
//! of its name, `offset = h1(name) mod M` and `skip = h2(name) mod (M−1) + 1`
//! (M prime, so every skip generates a full permutation); the backends then
//! take turns claiming their next still-free preferred slot until the table
//! is full (the paper's Pseudocode 1). A backend of weight `w` takes `w`
//! turns per round, so it gets a share proportional to `w`. Removing a
//! backend mostly frees only its own slots, so only about 1/N of the keys
//! move ("minimal disruption", §3.4).

/// No backend is up: the table maps everything here.
pub const NONE: u16 = u16::MAX;

/// Whether `n` is prime (trial division; build time only).
pub fn is_prime(n: u64) -> bool {
    if n < 2 {
        return false;
    }
    let mut d = 2;
    while d * d <= n {
        if n % d == 0 {
            return false;
        }
        d += 1;
    }
    true
}

/// The smallest prime ≥ `n`.
pub fn next_prime(n: u64) -> u64 {
    let mut p = n.max(2);
    while !is_prime(p) {
        p += 1;
    }
    p
}

/// The default table size for `n` backends: 65537 (the paper's choice)
/// or the smallest prime ≥ 100 × n if that is larger.
pub fn default_size(n: usize) -> u64 {
    next_prime((100 * n as u64).max(65_537))
}

fn hash(bytes: &[u8], seed: u64) -> u64 {
    // FNV-1a, then a splitmix finaliser so that names differing in one
    // byte get unrelated offsets and skips.
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ seed;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    crate::bridge::table::mix64(h)
}

/// One backend's permutation parameters and weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preference {
    /// First preferred slot.
    pub offset: u64,
    /// Distance between successive preferred slots (1..M).
    pub skip: u64,
    /// Turns per round (≥ 1).
    pub weight: u32,
}

impl Preference {
    /// The permutation of backend `name` for a table of prime size `m`.
    pub fn new(name: &str, weight: u32, m: u64) -> Preference {
        Preference {
            offset: hash(name.as_bytes(), 0x4d61_676c_6576_0001) % m,
            skip: hash(name.as_bytes(), 0x4d61_676c_6576_0002) % (m - 1) + 1,
            weight: weight.max(1),
        }
    }

    /// The `j`-th preferred slot: `permutation[i][j]` of the paper.
    pub fn slot(&self, j: u64, m: u64) -> u64 {
        (self.offset + j % m * self.skip) % m
    }
}

/// The lookup table.
#[derive(Debug, Clone)]
pub struct Maglev {
    prefs: Vec<Preference>,
    table: Vec<u16>,
    next: Vec<u64>,
}

impl Maglev {
    /// A table of prime size `m` over backends `(name, weight)` (at most
    /// 65535), every one of them up.
    pub fn new(backends: &[(&str, u32)], m: u64) -> Maglev {
        assert!(is_prime(m) && m >= 2, "maglev table size must be prime");
        assert!(backends.len() < usize::from(NONE));
        let prefs: Vec<Preference> = backends
            .iter()
            .map(|(n, w)| Preference::new(n, *w, m))
            .collect();
        let mut g = Maglev {
            next: vec![0; prefs.len()],
            prefs,
            table: vec![NONE; m as usize],
        };
        g.populate(&vec![true; backends.len()]);
        g
    }

    /// Table size M.
    pub fn size(&self) -> u64 {
        self.table.len() as u64
    }

    /// The table: slot → backend index (or [`NONE`]).
    pub fn table(&self) -> &[u16] {
        &self.table
    }

    /// The backend for a key hash.
    #[inline]
    pub fn lookup(&self, hash: u64) -> u16 {
        self.table[(hash % self.table.len() as u64) as usize]
    }

    /// Refills the table with the backends for which `up` is true
    /// (Pseudocode 1, with weighted turns). Reuses its memory; runs off the
    /// packet path (≈ M × log M steps).
    pub fn populate(&mut self, up: &[bool]) {
        let m = self.table.len() as u64;
        self.table.fill(NONE);
        self.next.fill(0);
        if !up.iter().take(self.prefs.len()).any(|u| *u) {
            return;
        }
        let mut filled = 0u64;
        loop {
            for (i, p) in self.prefs.iter().enumerate() {
                if !up.get(i).copied().unwrap_or(false) {
                    continue;
                }
                for _ in 0..p.weight {
                    let mut c = p.slot(self.next[i], m);
                    while self.table[c as usize] != NONE {
                        self.next[i] += 1;
                        c = p.slot(self.next[i], m);
                    }
                    self.table[c as usize] = i as u16;
                    self.next[i] += 1;
                    filled += 1;
                    if filled == m {
                        return;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primes() {
        assert_eq!(next_prime(65_537), 65_537);
        assert_eq!(next_prime(100), 101);
        assert_eq!(default_size(3), 65_537);
        assert_eq!(default_size(1000), 100_003);
        assert!(!is_prime(65_535));
    }

    #[test]
    fn paper_example_shape() {
        // Fig. 3 of the paper: 3 backends, M = 7; every slot is filled and
        // each backend gets 2 or 3 slots.
        let g = Maglev::new(&[("b0", 1), ("b1", 1), ("b2", 1)], 7);
        let mut n = [0; 3];
        for b in g.table() {
            n[usize::from(*b)] += 1;
        }
        assert!(n.iter().all(|c| (2..=3).contains(c)), "{n:?}");
    }
}
