//! IPv6 longest-prefix match: a leaf-pushed multibit trie of byte-wide
//! stride tables whose subtrees end in one-cache-line range nodes.
//!
//! Every entry is a `u32`: a value (top bit clear; [`NONE`] = no route) or
//! a pointer (top bit set, three kind bits, 28 index bits) to
//!
//! - a **stride table** of 2^8 or 2^16 entries indexed by the next 8 or 16
//!   address bits (DIR-24-8 generalised, Gupta et al. INFOCOM'98). The root
//!   is a 2^16 table; a subtree holding many prefixes (a busy /16) gets a
//!   2^16 table, others 2^8.
//! - a **range line**: one 64-byte line holding the sorted boundaries of
//!   the ranges a small subtree's prefixes cut the next 32, 64 or 128
//!   address bits into, with each range's value (prefixes as ranges, as in
//!   DXR, Zec et al. 2012). A /40 holding a few /41–/64s, or one /128 host
//!   route, is one line instead of a chain of stride tables.
//! - a **range array**: 256 range lines indexed by the next 8 bits, for a
//!   subtree with prefixes under many of its 256 sub-slots (a /32 holding
//!   hundreds of /33–/64s). A line whose slot holds too many prefixes
//!   instead points on to a deeper subtree.
//!
//! With a million /32–/64 routes a lookup reads the root and a 2^16 table
//! (both cached) and then one range line: one cache miss, like DIR-24-8's
//! one `tbl24` read for IPv4. Strides are whole bytes, so a walk reads its
//! slot straight from the address bytes, and no node needs a popcount (the
//! workspace builds without the `popcnt` instruction, where Poptrie's
//! bitmaps cost ≈ 12 instructions a level). In
//! [`LpmV6::lookup_batch`] many walks advance stage by stage without
//! data-dependent branches, prefetching their range lines before
//! searching any, so their cache misses overlap.
//!
//! Built once from the whole route list (a later duplicate prefix
//! replaces an earlier one, as `ip route replace`), recursively over the
//! prefixes sorted by address.

/// Value meaning "no route".
pub const NONE: u32 = 0;
const PTR: u32 = 1 << 31;
const KIND_SHIFT: u32 = 28;
const INDEX: u32 = (1 << KIND_SHIFT) - 1;
/// Pointer kinds, paired so that one test of the top three bits tells the
/// walk's stages apart: `100` stride tables, `101` 32-bit range lines and
/// arrays of them, `110` the rare wide range lines.
const STRIDE8: u32 = 0;
const STRIDE16: u32 = 1;
const RANGE32: u32 = 2;
const RANGE_ARRAY: u32 = 3;
const RANGE64: u32 = 4;
const RANGE128: u32 = 5;
/// A subtree with at least this many prefixes gets a 2^16 stride table
/// (256 KiB, ≤ 64 bytes per prefix) instead of a 2^8 one.
const STRIDE16_MIN: usize = 4096;
/// A subtree whose prefixes reach past the next 8 bits in at least this
/// many of its 256 slots gets a range array (16 KiB, ≤ 512 bytes per busy
/// slot) instead of a 2^8 stride table (1 KiB, then one more read).
const RANGE_ARRAY_MIN: usize = 32;
/// Entries of a stride table are stored in units of 256.
const UNIT: usize = 256;
/// 32-bit range line keys are stored `^ BIAS` as `i32`: signed compares
/// then order them as the unsigned keys (and vectorise on SSE2).
const BIAS: u32 = 1 << 31;

/// Ranges over the next 32 address bits: up to 8 (first key, value)
/// pairs. `keys[0]` is 0 and unused pairs repeat the last range (key
/// `u32::MAX`, same value), so a lookup searches all eight without
/// knowing how many are used (the wider lines count the keys ≤ its own).
/// Keys are stored `^ BIAS`.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Range32 {
    keys: [i32; 8],
    vals: [u32; 8],
}

/// Ranges over the next 64 address bits: up to 5.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Range64 {
    keys: [u64; 5],
    vals: [u32; 5],
}

/// Ranges over the rest of the address (up to 128 bits): up to 3, enough
/// for one host route alone under a shorter prefix.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Range128 {
    keys: [u128; 3],
    vals: [u32; 3],
}

/// Address bytes, zero-padded so that reading 16 bytes from any byte
/// depth below 16 stays inside.
type Bytes = [u8; 32];

#[inline(always)]
fn bytes(addr: u128) -> Bytes {
    let mut b = [0u8; 32];
    b[..16].copy_from_slice(&addr.to_be_bytes());
    b
}

#[inline(always)]
fn be32(b: &Bytes, at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at & 15..(at & 15) + 4]);
    u32::from_be_bytes(w)
}

#[inline(always)]
fn be64(b: &Bytes, at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at & 15..(at & 15) + 8]);
    u64::from_be_bytes(w)
}

#[inline(always)]
fn be128(b: &Bytes, at: usize) -> u128 {
    let mut w = [0u8; 16];
    w.copy_from_slice(&b[at & 15..(at & 15) + 16]);
    u128::from_be_bytes(w)
}

/// Whether `e` points to a stride table.
#[inline(always)]
fn is_stride(e: u32) -> bool {
    e >> 29 == 0b100
}

/// Whether `e` points to a 32-bit range line or a range array.
#[inline(always)]
fn is_range(e: u32) -> bool {
    e >> 29 == 0b101
}

/// Index into a range line's values of the range holding `key`.
#[inline(always)]
fn range_index<K: Copy + PartialOrd>(keys: &[K], key: K) -> usize {
    keys.iter().filter(|&&k| k <= key).count().wrapping_sub(1)
}

/// A range line from `(first key, value)` pairs (at most `N`, first key 0).
fn line<K: Copy, const N: usize>(
    segs: &[(u128, u32)],
    key: impl Fn(u128) -> K,
    max: K,
) -> ([K; N], [u32; N]) {
    let n = segs.len();
    (
        std::array::from_fn(|k| if k < n { key(segs[k].0) } else { max }),
        std::array::from_fn(|k| segs[k.min(n - 1)].1),
    )
}

/// A leaf-pushed multibit trie mapping IPv6 prefixes to values in
/// `1..2^31`.
pub struct LpmV6 {
    /// Stride tables, in units of 256 entries; the root (a 2^16 table) is
    /// first, so an index of 0 is always valid.
    tbl: Vec<u32>,
    /// 32-bit range lines, single or in arrays of 256; line 0 is a dummy
    /// that walks with nothing to search read instead of branching.
    r32: Vec<Range32>,
    r64: Vec<Range64>,
    r128: Vec<Range128>,
}

#[derive(Clone, Copy)]
struct Pfx {
    addr: u128,
    len: u8,
    value: u32,
}

/// Where prefixes of `pfx` (sorted by address) longer than `end` fall in a
/// node at depth `d` of stride `s`: `(slot, those prefixes)`, by slot.
fn children(pfx: &[Pfx], d: u32, s: u32) -> Vec<(usize, &[Pfx])> {
    let end = d + s;
    let slot = |p: &Pfx| (p.addr.wrapping_shl(d) >> (128 - s)) as usize;
    let mut out = Vec::new();
    let mut i = 0;
    while i < pfx.len() {
        let s0 = slot(&pfx[i]);
        let mut j = i;
        while j < pfx.len() && slot(&pfx[j]) == s0 {
            j += 1;
        }
        // Prefixes ending within the node start at their slot's first
        // address, so they sort before the slot's longer prefixes.
        let k = pfx[i..j]
            .iter()
            .position(|p| p.len as u32 > end)
            .map_or(j, |k| i + k);
        if k < j {
            out.push((s0, &pfx[k..j]));
        }
        i = j;
    }
    out
}

impl LpmV6 {
    /// Builds the trie from `(address, prefix length, value)` triples. Host
    /// bits are ignored; for duplicate prefixes the later one wins. Values
    /// must be in `1..2^31`.
    // ≈ 1.4–1.6 s and 75 MiB for the bench's 1 M routes (release; the
    // bench prints both).
    pub fn build(routes: &[(u128, u8, u32)]) -> LpmV6 {
        Self::build_with(routes, STRIDE16_MIN, RANGE_ARRAY_MIN)
    }

    /// [`Self::build`] with other thresholds for 2^16 stride tables and
    /// range arrays (tests use small ones to exercise them on small
    /// tables).
    #[doc(hidden)]
    pub fn build_with(
        routes: &[(u128, u8, u32)],
        stride16_min: usize,
        range_array_min: usize,
    ) -> LpmV6 {
        let mut pfx: Vec<(Pfx, usize)> = routes
            .iter()
            .enumerate()
            .map(|(i, &(addr, len, value))| {
                debug_assert!(value & PTR == 0, "LPM value {value} ≥ 2^31");
                let len = len.min(128);
                let addr = if len == 0 {
                    0
                } else {
                    addr & (u128::MAX << (128 - len as u32))
                };
                (Pfx { addr, len, value }, i)
            })
            .collect();
        // By address then length (a prefix sorts before the longer ones it
        // contains), later duplicates last; then keep the last duplicate.
        pfx.sort_unstable_by_key(|(p, i)| (p.addr, p.len, *i));
        let mut uniq: Vec<Pfx> = Vec::with_capacity(pfx.len());
        for (p, _) in pfx {
            match uniq.last_mut() {
                Some(last) if last.addr == p.addr && last.len == p.len => *last = p,
                _ => uniq.push(p),
            }
        }
        let mut b = Builder {
            t: LpmV6 {
                tbl: Vec::new(),
                r32: vec![Range32 {
                    keys: [i32::MIN; 8],
                    vals: [NONE; 8],
                }],
                r64: Vec::new(),
                r128: Vec::new(),
            },
            stride16_min,
            range_array_min,
        };
        // The root; a default route is painted like any prefix of 16 bits
        // or fewer.
        b.stride_table(0, 16, NONE, &uniq);
        // Built by pushing; copied once into exact-size vectors on 2 MiB
        // pages (a lookup's range line is a random read: the TLB miss it
        // spares was 10–25 % of a lookup).
        let t = b.t;
        LpmV6 {
            tbl: sluice_sys::copy_to_huge_pages(&t.tbl),
            r32: sluice_sys::copy_to_huge_pages(&t.r32),
            r64: sluice_sys::copy_to_huge_pages(&t.r64),
            r128: sluice_sys::copy_to_huge_pages(&t.r128),
        }
    }

    /// One stride-table step of a walk `at` a byte depth: the entry `e`
    /// leads to and the bytes consumed, or `(e, 0)` if `e` is not a stride
    /// table. Branch free (masks), so interleaved walks do not wait on each
    /// other's data.
    #[inline(always)]
    fn stride_step(&self, e: u32, b: &Bytes, at: u32) -> (u32, u32) {
        let m = 0u32.wrapping_sub(is_stride(e) as u32);
        let next = self
            .tbl
            .get(Self::stride_slot(e, b, at))
            .copied()
            .unwrap_or(NONE);
        (next & m | e & !m, (1 + (e >> KIND_SHIFT & 1)) & m)
    }

    /// The stride table entry a stride step `at` a byte depth reads, or 0
    /// (the root's first, a harmless read) if `e` is not a stride table.
    #[inline(always)]
    fn stride_slot(e: u32, b: &Bytes, at: u32) -> usize {
        let m = 0usize.wrapping_sub(is_stride(e) as usize);
        let wide = e >> KIND_SHIFT & 1;
        let slot = be32(b, at as usize) >> (24 - 8 * wide);
        ((e & INDEX) as usize * UNIT + slot as usize) & m
    }

    /// The range line a range step `at` a byte depth reads: the one `e`
    /// points to (in a range array, the one the next byte picks), or the
    /// dummy line 0 if `e` is not a 32-bit range line or array.
    #[inline(always)]
    fn range_line_of(e: u32, b: &Bytes, at: u32) -> u32 {
        let m = 0u32.wrapping_sub(is_range(e) as u32);
        let array = e >> KIND_SHIFT & 1;
        let slot = (b[at as usize & 15] as u32) & 0u32.wrapping_sub(array);
        ((e & INDEX) + slot) & m
    }

    /// One range step `at` a byte depth, in line `i` (from
    /// [`Self::range_line_of`]): the value (or, from a range array, the
    /// deeper subtree) of the range holding the address, and the bytes
    /// consumed to find the line; `(e, 0)` if `e` is not a 32-bit range
    /// line or array. Branch free.
    #[inline(always)]
    fn range_step(&self, e: u32, i: u32, b: &Bytes, at: u32) -> (u32, u32) {
        let m = 0u32.wrapping_sub(is_range(e) as u32);
        let array = e >> KIND_SHIFT & 1;
        let key = (be32(b, (at + array) as usize) ^ BIAS) as i32;
        let v = match self.r32.get(i as usize) {
            Some(r) => {
                // Branch-free binary search of the 8 sorted keys (keys[0]
                // is the smallest key, so the answer is in 0..8).
                let k = &r.keys;
                let mut j = ((k[4] <= key) as usize) << 2;
                j |= ((k[j | 2] <= key) as usize) << 1;
                j |= (k[j | 1] <= key) as usize;
                r.vals[j]
            }
            None => NONE,
        };
        (v & m | e & !m, array & m)
    }

    /// The value at the end of a walk: `e` itself, or the range of the
    /// 64- or 128-bit range line `e` points to.
    #[inline(always)]
    fn finish(&self, e: u32, b: &Bytes, at: u32) -> u32 {
        if e & PTR == 0 {
            return e;
        }
        let i = (e & INDEX) as usize;
        let at = at as usize;
        let v = match e >> KIND_SHIFT & 7 {
            RANGE64 => self
                .r64
                .get(i)
                .and_then(|r| r.vals.get(range_index(&r.keys, be64(b, at))).copied()),
            RANGE128 => self
                .r128
                .get(i)
                .and_then(|r| r.vals.get(range_index(&r.keys, be128(b, at))).copied()),
            _ => None,
        };
        v.unwrap_or(NONE)
    }

    /// The value of the longest prefix containing `addr`, or [`NONE`].
    // ≈ 100 ns per random lookup at 1 M routes (bench mix), cache-cold,
    // ≈ 31 ns with the lines cached: the root and the /16's table are
    // cached, the /40's range line is not, and one walk's reads depend on
    // each other (bench: router/lpm_v6_lookup_1M, CPU time under load;
    // use `lookup_batch` for many).
    #[inline]
    pub fn lookup(&self, addr: u128) -> u32 {
        let b = bytes(addr);
        let mut at = 0;
        let e = self.walk(PTR | STRIDE16 << KIND_SHIFT, &b, &mut at);
        self.finish(e, &b, at)
    }

    /// Walks on from entry `e` at byte depth `at` (moved on with the walk)
    /// to a value or a 64-/128-bit range line for [`Self::finish`].
    #[inline]
    fn walk(&self, mut e: u32, b: &Bytes, at: &mut u32) -> u32 {
        loop {
            while is_stride(e) {
                let (next, n) = self.stride_step(e, b, *at);
                e = next;
                *at += n;
            }
            if !is_range(e) {
                return e;
            }
            let (next, n) = self.range_step(e, Self::range_line_of(e, b, *at), b, *at);
            e = next;
            *at += n;
        }
    }

    /// Looks up every address of `addrs` into `out` (same length). Walks
    /// run `W` at a time, stage by stage: each stage handles every walk
    /// without branching on the data, and the range lines (the cache
    /// misses) of all `W` walks are prefetched before any is searched, so
    /// they are in flight together instead of one walk's miss at a time.
    // ≈ 29 ns per address vs ≈ 49 ns before (plain loads, every stage for
    // every walk until the deepest one ended; 34 ns on a quiet VM) and
    // ≈ 100 ns one after another, on a cache-cold 1 M-route table;
    // ≈ 147 vs 171 instructions per address (bench:
    // router/lpm_v6_lookup_batch_1M, CPU time on a loaded 2-core VM;
    // callgrind). The prefetch is most of the gain: the same code with a
    // touch (`black_box(line.vals[0])`, a load that must complete before
    // it retires) took ≈ 47 vs 33 ns, timed alternately in one process.
    pub fn lookup_batch(&self, addrs: &[u128], out: &mut [u32]) {
        // 32 lanes beat 8, 16 and 128 (bench: router/lpm_v6_lookup_batch_1M).
        const W: usize = 32;
        // The root is always first; as an array its index (the top 16
        // bits) needs no bounds check.
        let Some(root) = self.tbl.first_chunk::<{ 1 << 16 }>() else {
            for (a, o) in addrs.iter().zip(out.iter_mut()) {
                *o = self.lookup(*a);
            }
            return;
        };
        for (a, o) in addrs.chunks(W).zip(out.chunks_mut(W)) {
            // A short last chunk walks zero addresses in the spare lanes.
            let mut b = [[0u8; 32]; W];
            let mut e = [NONE; W];
            let mut more = false;
            for i in 0..W {
                let x = a.get(i).copied().unwrap_or(0);
                b[i] = bytes(x);
                e[i] = root[(x >> 112) as usize];
                more |= is_stride(e[i]);
            }
            let mut at = [2u32; W];
            // Stride tables (for the bench's table, one step: the busy
            // /16's 2^16 table, mostly cached): every walk's read first,
            // then every walk's update. Prefetching these reads too was
            // ≈ 2 % slower (bench: router/lpm_v6_lookup_batch_1M).
            while more {
                let mut next = [NONE; W];
                for i in 0..W {
                    next[i] = self
                        .tbl
                        .get(Self::stride_slot(e[i], &b[i], at[i]))
                        .copied()
                        .unwrap_or(NONE);
                }
                more = false;
                for i in 0..W {
                    let m = 0u32.wrapping_sub(is_stride(e[i]) as u32);
                    at[i] += (1 + (e[i] >> KIND_SHIFT & 1)) & m;
                    e[i] = next[i] & m | e[i] & !m;
                    more |= is_stride(e[i]);
                }
            }
            // Range lines are mostly cache misses: prefetch every walk's
            // line (a prefetch, unlike a load, does not hold up
            // retirement), then search them.
            let mut line = [0u32; W];
            for i in 0..W {
                line[i] = Self::range_line_of(e[i], &b[i], at[i]);
                if let Some(r) = self.r32.get(line[i] as usize) {
                    sluice_sys::prefetch(r);
                }
            }
            let mut deep = 0u32;
            for i in 0..W {
                let (next, n) = self.range_step(e[i], line[i], &b[i], at[i]);
                e[i] = next;
                at[i] += n;
                deep |= ((is_stride(next) | is_range(next)) as u32) << i;
            }
            // The few walks that go on past a range array (≈ 1 % of the
            // bench's, under a /40 too busy for one line) finish one by
            // one rather than taking all W lanes through more stages.
            while deep != 0 {
                let i = deep.trailing_zeros() as usize;
                deep &= deep - 1;
                e[i] = self.walk(e[i], &b[i], &mut at[i]);
            }
            for (i, o) in o.iter_mut().enumerate() {
                *o = self.finish(e[i], &b[i], at[i]);
            }
        }
    }

    /// Bytes held by the trie (stride tables and range lines).
    pub fn memory_bytes(&self) -> usize {
        self.tbl.len() * 4 + (self.r32.len() + self.r64.len() + self.r128.len()) * 64
    }
}

/// Builds the trie's nodes.
struct Builder {
    t: LpmV6,
    stride16_min: usize,
    range_array_min: usize,
}

impl Builder {
    /// The entry for the subtree at bit depth `d` (a multiple of 8) holding
    /// `pfx` (sorted by address, all longer than `d`, all under the same
    /// `d`-bit prefix), where addresses no prefix covers get `inherited`.
    fn subtree(&mut self, d: u32, inherited: u32, pfx: &[Pfx]) -> u32 {
        if pfx.is_empty() {
            return inherited;
        }
        if let Some(e) = self.range_line(d, inherited, pfx) {
            return e;
        }
        if pfx.len() >= self.stride16_min && d + 16 <= 128 {
            return self.stride_table(d, 16, inherited, pfx);
        }
        if d + 8 < 128 && children(pfx, d, 8).len() >= self.range_array_min {
            return self.range_array(d, inherited, pfx);
        }
        self.stride_table(d, 8, inherited, pfx)
    }

    /// The values of a node's 2^`s` slots from the prefixes of `pfx` that
    /// end within them (the longest covering each slot), else `inherited`.
    fn paint(d: u32, s: u32, inherited: u32, pfx: &[Pfx], slots: &mut [u32]) {
        slots.fill(inherited);
        let end = d + s;
        // In address order a prefix comes before every prefix nested in
        // it, so painting in that order leaves each slot its longest.
        for p in pfx.iter().filter(|p| p.len as u32 <= end) {
            let start = (p.addr.wrapping_shl(d) >> (128 - s)) as usize;
            let n = 1usize << (end - p.len as u32);
            slots[start..start + n].fill(p.value);
        }
    }

    /// A 2^`s` stride table for the subtree at depth `d`.
    fn stride_table(&mut self, d: u32, s: u32, inherited: u32, pfx: &[Pfx]) -> u32 {
        let base = self.t.tbl.len();
        self.t.tbl.resize(base + (1 << s), NONE);
        Self::paint(d, s, inherited, pfx, &mut self.t.tbl[base..]);
        for (slot, sub) in children(pfx, d, s) {
            let e = self.subtree(d + s, self.t.tbl[base + slot], sub);
            self.t.tbl[base + slot] = e;
        }
        let kind = if s == 16 { STRIDE16 } else { STRIDE8 };
        PTR | kind << KIND_SHIFT | (base / UNIT) as u32
    }

    /// A range array for the subtree at depth `d`: one 32-bit range line
    /// per 8-bit slot, or a line pointing on to the slot's subtree where
    /// its prefixes do not fit one.
    fn range_array(&mut self, d: u32, inherited: u32, pfx: &[Pfx]) -> u32 {
        let mut slots = [NONE; 256];
        Self::paint(d, 8, inherited, pfx, &mut slots);
        let base = self.t.r32.len();
        let flat = |v: u32| Range32 {
            keys: [
                i32::MIN,
                i32::MAX,
                i32::MAX,
                i32::MAX,
                i32::MAX,
                i32::MAX,
                i32::MAX,
                i32::MAX,
            ],
            vals: [v; 8],
        };
        self.t.r32.extend(slots.iter().map(|&v| flat(v)));
        let end = d + 8;
        for (slot, sub) in children(pfx, d, 8) {
            let v = slots[slot];
            let fits = sub.iter().all(|p| p.len as u32 <= end + 32);
            let r = match fits.then(|| ranges(end, 32, v, sub, 8)).flatten() {
                Some(segs) => {
                    let (keys, vals) = line(&segs, |k| (k as u32 ^ BIAS) as i32, i32::MAX);
                    Range32 { keys, vals }
                }
                None => flat(self.subtree(end, v, sub)),
            };
            self.t.r32[base + slot] = r;
        }
        PTR | RANGE_ARRAY << KIND_SHIFT | base as u32
    }

    /// A single range line for the subtree, if its prefixes cut the
    /// narrowest key width that covers them into few enough ranges.
    fn range_line(&mut self, d: u32, inherited: u32, pfx: &[Pfx]) -> Option<u32> {
        let longest = pfx.iter().map(|p| p.len as u32).max().unwrap_or(d);
        let (w, cap) = match longest - d {
            0..=32 => (32, 8),
            33..=64 => (64, 5),
            _ => (128, 3),
        };
        if pfx.len() > 2 * cap {
            return None;
        }
        let segs = ranges(d, w, inherited, pfx, cap)?;
        let t = &mut self.t;
        let (kind, index) = match w {
            32 => {
                let (keys, vals) = line(&segs, |k| (k as u32 ^ BIAS) as i32, i32::MAX);
                t.r32.push(Range32 { keys, vals });
                (RANGE32, t.r32.len() - 1)
            }
            64 => {
                let (keys, vals) = line(&segs, |k| k as u64, u64::MAX);
                t.r64.push(Range64 { keys, vals });
                (RANGE64, t.r64.len() - 1)
            }
            _ => {
                let (keys, vals) = line(&segs, |k| k, u128::MAX);
                t.r128.push(Range128 { keys, vals });
                (RANGE128, t.r128.len() - 1)
            }
        };
        Some(PTR | kind << KIND_SHIFT | index as u32)
    }
}

/// The ranges that `pfx` (sorted by address, lengths in `d+1..=d+w`, all
/// under one `d`-bit prefix) cut the `w` address bits after depth `d` into:
/// `(first key, value)` pairs, the first at key 0, adjacent values
/// distinct. `None` when there are more than `cap`.
fn ranges(d: u32, w: u32, inherited: u32, pfx: &[Pfx], cap: usize) -> Option<Vec<(u128, u32)>> {
    let top = if w == 128 {
        u128::MAX
    } else {
        (1u128 << w) - 1
    };
    let key = |p: &Pfx| (p.addr.wrapping_shl(d) >> (128 - w)) & top;
    let span = |p: &Pfx| {
        let host = d + w - p.len as u32;
        if host >= 128 {
            u128::MAX
        } else {
            (1u128 << host) - 1
        }
    };
    let mut segs: Vec<(u128, u32)> = vec![(0, inherited)];
    let push = |segs: &mut Vec<(u128, u32)>, k: u128, v: u32| {
        let last = segs.len() - 1;
        if segs[last].0 == k {
            segs[last].1 = v;
            if last > 0 && segs[last - 1].1 == v {
                segs.pop();
            }
        } else if segs[last].1 != v {
            segs.push((k, v));
        }
    };
    // The enclosing prefixes of the current one: (last key, value).
    let mut stack: Vec<(u128, u32)> = Vec::new();
    for p in pfx {
        let lo = key(p);
        while let Some(&(hi, _)) = stack.last() {
            if hi >= lo {
                break;
            }
            stack.pop();
            let v = stack.last().map_or(inherited, |s| s.1);
            push(&mut segs, hi + 1, v);
        }
        push(&mut segs, lo, p.value);
        stack.push((lo | span(p), p.value));
        if segs.len() > cap + 1 {
            return None;
        }
    }
    while let Some((hi, _)) = stack.pop() {
        if hi < top {
            let v = stack.last().map_or(inherited, |s| s.1);
            push(&mut segs, hi + 1, v);
        }
    }
    (segs.len() <= cap).then_some(segs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> u128 {
        u128::from(s.parse::<std::net::Ipv6Addr>().unwrap())
    }

    #[test]
    fn longest_prefix_wins() {
        let routes = [
            (a("2001:db8::"), 32, 2),
            (a("::"), 0, 1),
            (a("2001:db8:1::"), 48, 3),
            (a("2001:db8:1:2::"), 64, 4),
            (a("2001:db8:1:2::5"), 128, 5),
            (a("2001:db8:1:2::4"), 127, 6),
            (a("2001::"), 16, 7),
        ];
        let t = LpmV6::build(&routes);
        assert_eq!(t.lookup(a("3000::1")), 1);
        assert_eq!(t.lookup(a("2001:1::1")), 7);
        assert_eq!(t.lookup(a("2001:db8:ffff::1")), 2);
        assert_eq!(t.lookup(a("2001:db8:1:3::1")), 3);
        assert_eq!(t.lookup(a("2001:db8:1:2::1")), 4);
        assert_eq!(t.lookup(a("2001:db8:1:2::5")), 5);
        assert_eq!(t.lookup(a("2001:db8:1:2::4")), 6);
        assert_eq!(t.lookup(a("2001:db8:1:2::6")), 4);
        assert_eq!(t.lookup(a("2001:db8:1:2::3")), 4);
        let addrs: Vec<u128> = [
            "3000::1",
            "2001:db8:1:2::5",
            "2001:db8:1:2::4",
            "2001:1::1",
            "2001:db8:1:3::1",
            "2001:db8:ffff::1",
            "2001:db8:1:2::6",
            "2001:db8:1:2::1",
            "2001:db8:1:2::3",
        ]
        .iter()
        .map(|s| a(s))
        .collect();
        let mut out = vec![0; addrs.len()];
        t.lookup_batch(&addrs, &mut out);
        assert_eq!(out, [1, 5, 6, 7, 3, 2, 4, 4, 4]);
    }

    #[test]
    fn empty_and_host_routes() {
        assert_eq!(LpmV6::build(&[]).lookup(a("::1")), NONE);
        let t = LpmV6::build(&[(a("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"), 128, 9)]);
        assert_eq!(t.lookup(u128::MAX), 9);
        assert_eq!(t.lookup(u128::MAX - 1), NONE);
    }
}
