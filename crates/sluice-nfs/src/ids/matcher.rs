//! Multi-pattern prefilter and option-chain verification.
//!
//! One Aho–Corasick automaton holds each rule's fast pattern (its
//! `fast_pattern` content, else its longest positive content), ASCII
//! case-insensitive so that one automaton serves `nocase` and exact
//! contents alike (exact case is checked in verification). A scan over the
//! payload marks candidate rules; candidates are then checked in rule
//! order: header (protocol, addresses, ports, `flow`) first, then the
//! payload options with Snort's cursor semantics.
//!
//! Stream matching: a second automaton holds every positive content of the
//! rules that can match across a TCP segment boundary (those without
//! absolute `offset`/`depth` windows). It only scans the boundary window,
//! the previous segment's tail plus the first `max_len − 1` bytes of this
//! payload, so it costs a few dozen bytes per in-order segment.

use std::net::IpAddr;

use aho_corasick::automaton::{Automaton, StateID};
use aho_corasick::dfa::DFA;
use aho_corasick::{AhoCorasick, Anchored, Input, MatchKind};
use memchr::memmem;

use super::rule::{FlowDir, PayloadOpt, Rule};

/// Upper bound on positions tried per rule and packet when a relative
/// option chain has to backtrack (Snort bounds this too); a rule that needs
/// more does not match.
const BACKTRACK_BUDGET: u32 = 256;

/// Finds one content.
#[derive(Debug, Clone)]
enum Finder {
    /// memchr's SIMD substring search.
    Exact(Box<memmem::Finder<'static>>),
    /// Single-pattern ASCII case-insensitive search (rare-byte prefilter).
    NoCase(AhoCorasick),
}

impl Finder {
    fn new(pattern: &[u8], nocase: bool) -> Finder {
        if nocase {
            let ac = AhoCorasick::builder()
                .ascii_case_insensitive(true)
                .build([pattern])
                .expect("a single pattern of at most 1 KiB always builds");
            Finder::NoCase(ac)
        } else {
            Finder::Exact(Box::new(memmem::Finder::new(pattern).into_owned()))
        }
    }

    /// Start of the first occurrence in `hay`.
    #[inline]
    fn find(&self, hay: &[u8]) -> Option<usize> {
        match self {
            Finder::Exact(f) => f.find(hay),
            Finder::NoCase(ac) => ac.find(Input::new(hay)).map(|m| m.start()),
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Window {
    /// The whole buffer.
    Any,
    /// `[offset, offset + depth)`.
    Abs { offset: usize, depth: Option<usize> },
    /// `[cursor + distance, … + within)`.
    Rel {
        distance: i64,
        within: Option<usize>,
    },
}

#[derive(Debug, Clone)]
enum Opt {
    Content {
        finder: Finder,
        len: usize,
        negated: bool,
        window: Window,
        /// Later options depend on where this one matched, so other
        /// occurrences are worth trying when they fail.
        retry: bool,
    },
    Pcre {
        regex: regex::bytes::Regex,
        relative: bool,
        negated: bool,
    },
}

/// A rule ready for matching.
#[derive(Debug)]
struct Compiled {
    rule: Rule,
    opts: Vec<Opt>,
    /// Can match across a segment boundary (no absolute windows).
    stream_ok: bool,
}

/// Patterns of one automaton and the rules each one nominates.
#[derive(Debug)]
struct PatternIndex {
    /// A full DFA, driven by [`PatternIndex::mark`]'s own loop: the
    /// `AhoCorasick` wrapper's overlapping search goes through a trait
    /// object per byte (it took 29 % more time on ids/1k_rules_1500B_clean).
    dfa: DFA,
    start: StateID,
    /// Rules of pattern `p`: `rules[starts[p]..starts[p + 1]]`.
    starts: Vec<u32>,
    rules: Vec<u32>,
    /// Per-packet scratch: patterns already seen (one bit each).
    seen: Vec<u64>,
}

impl PatternIndex {
    fn build(pairs: &[(Vec<u8>, u32)]) -> Option<PatternIndex> {
        if pairs.is_empty() {
            return None;
        }
        // Deduplicate case-folded patterns: many rules share one.
        let mut ids: std::collections::HashMap<Vec<u8>, usize> = Default::default();
        let mut patterns: Vec<Vec<u8>> = Vec::new();
        let mut per: Vec<Vec<u32>> = Vec::new();
        for (p, r) in pairs {
            let key = p.to_ascii_lowercase();
            let id = *ids.entry(key.clone()).or_insert_with(|| {
                patterns.push(key);
                per.push(Vec::new());
                patterns.len() - 1
            });
            if per[id].last() != Some(r) {
                per[id].push(*r);
            }
        }
        let dfa = DFA::builder()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .build(&patterns)
            .expect("contents are at most 1 KiB each; the automaton always builds");
        let start = dfa
            .start_state(Anchored::No)
            .expect("the default DFA supports unanchored searches");
        let mut starts = Vec::with_capacity(per.len() + 1);
        let mut rules = Vec::new();
        starts.push(0);
        for rs in &per {
            rules.extend_from_slice(rs);
            starts.push(rules.len() as u32);
        }
        Some(PatternIndex {
            dfa,
            start,
            starts,
            rules,
            seen: vec![0; patterns.len().div_ceil(64)],
        })
    }

    /// Marks in `bits` the rules of every pattern found in `hay` whose
    /// match `[start, end)` passes `keep`.
    #[inline]
    fn mark(&mut self, hay: &[u8], bits: &mut [u64], keep: impl Fn(usize, usize) -> bool) {
        self.seen.fill(0);
        let dfa = &self.dfa;
        let ix = (&self.starts[..], &self.rules[..]);
        let seen = &mut self.seen;
        // One DFA step is a dependent load (≈ 5 ns when the row is in L2,
        // measured: ids/1k_rules_1500B_clean). Scanning LANES slices of
        // the payload in one loop overlaps those loads. Lane k reports the
        // occurrences starting in its slice: it reads on for
        // max_len − 1 bytes past the slice's end, and starts from the
        // start state, so it never reports one starting before its slice.
        const LANES: usize = 4;
        let n = hay.len();
        let overlap = dfa.max_pattern_len().saturating_sub(1);
        if n < 256 || overlap * 4 > n {
            let mut sid = self.start;
            for (i, &byte) in hay.iter().enumerate() {
                sid = dfa.next_state(Anchored::No, sid, byte);
                // Start and match states are "special"; most bytes are neither.
                if dfa.is_special(sid) && dfa.is_match(sid) {
                    on_hit(dfa, sid, i + 1, ix, seen, bits, &keep);
                }
            }
            return;
        }
        let chunk = n.div_ceil(LANES);
        let begin: [usize; LANES] = std::array::from_fn(|k| (k * chunk).min(n));
        let end: [usize; LANES] = std::array::from_fn(|k| ((k + 1) * chunk + overlap).min(n));
        let common = (0..LANES).map(|k| end[k] - begin[k]).min().unwrap_or(0);
        let mut sid = [self.start; LANES];
        for j in 0..common {
            for k in 0..LANES {
                let pos = begin[k] + j;
                sid[k] = dfa.next_state(Anchored::No, sid[k], hay[pos]);
                if dfa.is_special(sid[k]) && dfa.is_match(sid[k]) {
                    on_hit(dfa, sid[k], pos + 1, ix, seen, bits, &keep);
                }
            }
        }
        for k in 0..LANES {
            let mut s = sid[k];
            let rest = hay.iter().enumerate().take(end[k]).skip(begin[k] + common);
            for (pos, &byte) in rest {
                s = dfa.next_state(Anchored::No, s, byte);
                if dfa.is_special(s) && dfa.is_match(s) {
                    on_hit(dfa, s, pos + 1, ix, seen, bits, &keep);
                }
            }
        }
    }
}

/// Marks the rules of the patterns ending at `end` in state `sid`. Kept out
/// of line so the scan loop stays small enough to hold its state in
/// registers.
#[inline(never)]
fn on_hit(
    dfa: &DFA,
    sid: StateID,
    end: usize,
    (starts, rules): (&[u32], &[u32]),
    seen: &mut [u64],
    bits: &mut [u64],
    keep: &impl Fn(usize, usize) -> bool,
) {
    for k in 0..dfa.match_len(sid) {
        let pid = dfa.match_pattern(sid, k);
        let p = pid.as_usize();
        let (w, b) = (p / 64, 1u64 << (p % 64));
        if seen[w] & b != 0 || !keep(end - dfa.pattern_len(pid), end) {
            continue;
        }
        seen[w] |= b;
        for &r in &rules[starts[p] as usize..starts[p + 1] as usize] {
            bits[r as usize / 64] |= 1 << (r % 64);
        }
    }
}

/// What the matcher knows about a packet besides its bytes.
#[derive(Debug, Clone, Copy)]
pub struct PacketFacts {
    /// IP protocol number.
    pub proto: u8,
    /// Source address.
    pub src: IpAddr,
    /// Source port (0 without ports).
    pub src_port: u16,
    /// Destination address.
    pub dst: IpAddr,
    /// Destination port (0 without ports).
    pub dst_port: u16,
    /// Sent by the connection's initiator (`None`: unknown).
    pub to_server: Option<bool>,
    /// The connection is established.
    pub established: bool,
}

impl Compiled {
    #[inline]
    fn header_ok(&self, f: &PacketFacts) -> bool {
        let r = &self.rule;
        if !r.header_matches(f.proto, &f.src, f.src_port, &f.dst, f.dst_port) {
            return false;
        }
        let dir_ok = match r.flow.dir {
            FlowDir::Any => true,
            FlowDir::ToServer => f.to_server == Some(true),
            FlowDir::ToClient => f.to_server == Some(false),
        };
        dir_ok && r.flow.established.is_none_or(|e| e == f.established)
    }
}

/// The compiled rule set with its per-packet scratch.
#[derive(Debug)]
pub struct Matcher {
    rules: Vec<Compiled>,
    fast: Option<PatternIndex>,
    boundary: Option<PatternIndex>,
    /// Rules without a positive content: candidates for every packet.
    always: Vec<u64>,
    cand: Vec<u64>,
    stream_cand: Vec<u64>,
    /// IP protocols (by class: tcp, udp, icmp, other) some rule with a
    /// fast pattern covers; for the others the scan is skipped.
    scan_proto: [bool; 4],
    max_content_len: usize,
    /// Previous tail + this payload, built only when a boundary candidate
    /// needs it; sized at build time for the largest IP payload.
    combined: Vec<u8>,
    boundary_buf: Vec<u8>,
}

/// How a rule matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchedBy {
    /// Within this packet's payload.
    Packet,
    /// Only across the boundary with the previous in-order segment.
    Stream,
}

fn proto_class(p: u8) -> usize {
    match p {
        6 => 0,
        17 => 1,
        1 | 58 => 2,
        _ => 3,
    }
}

impl Matcher {
    /// Compiles `rules` (in evaluation order). `carry_cap` is the most
    /// bytes of a previous segment the caller will ever pass as `carry`.
    pub fn new(rules: Vec<Rule>, carry_cap: usize) -> Matcher {
        let mut fast_pairs = Vec::new();
        let mut boundary_pairs = Vec::new();
        let mut always = vec![0u64; rules.len().div_ceil(64)];
        let mut scan_proto = [false; 4];
        let mut max_content_len = 0;
        let compiled: Vec<Compiled> = rules
            .into_iter()
            .enumerate()
            .map(|(i, rule)| {
                let opts = compile_opts(&rule);
                let stream_ok = !opts.iter().any(|o| {
                    matches!(
                        o,
                        Opt::Content {
                            window: Window::Abs { .. },
                            ..
                        }
                    )
                });
                let positives: Vec<&super::rule::Content> = rule
                    .payload
                    .iter()
                    .filter_map(|o| match o {
                        PayloadOpt::Content(c) if !c.negated => Some(c),
                        _ => None,
                    })
                    .collect();
                let fp = positives
                    .iter()
                    .find(|c| c.fast_pattern)
                    .or_else(|| positives.iter().max_by_key(|c| c.pattern.len()));
                match fp {
                    Some(c) => {
                        fast_pairs.push((c.pattern.clone(), i as u32));
                        for (k, sc) in scan_proto.iter_mut().enumerate() {
                            let p = [6u8, 17, 1, 0][k];
                            *sc |= rule.proto.covers(p) || (k == 2 && rule.proto.covers(58));
                        }
                    }
                    None => always[i / 64] |= 1 << (i % 64),
                }
                for c in &positives {
                    max_content_len = max_content_len.max(c.pattern.len());
                    if stream_ok {
                        boundary_pairs.push((c.pattern.clone(), i as u32));
                    }
                }
                Compiled {
                    rule,
                    opts,
                    stream_ok,
                }
            })
            .collect();
        let words = compiled.len().div_ceil(64);
        Matcher {
            fast: PatternIndex::build(&fast_pairs),
            boundary: PatternIndex::build(&boundary_pairs),
            always,
            cand: vec![0; words],
            stream_cand: vec![0; words],
            scan_proto,
            max_content_len,
            combined: Vec::with_capacity(carry_cap + usize::from(u16::MAX)),
            boundary_buf: Vec::with_capacity(carry_cap + max_content_len),
            rules: compiled,
        }
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether there are no rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Rule `i`.
    pub fn rule(&self, i: usize) -> &Rule {
        &self.rules[i].rule
    }

    /// Longest positive content of any rule (0 if none).
    pub fn max_content_len(&self) -> usize {
        self.max_content_len
    }

    /// Evaluates the rules on one packet: `payload` is its transport
    /// payload, `carry` the tail of the flow direction's previous in-order
    /// segment (empty if none). Calls `on_match(rule index, how)` for each
    /// matching rule in rule order until it returns false.
    pub fn evaluate(
        &mut self,
        f: &PacketFacts,
        payload: &[u8],
        carry: &[u8],
        mut on_match: impl FnMut(usize, MatchedBy) -> bool,
    ) {
        self.cand.copy_from_slice(&self.always);
        let scan = !payload.is_empty() && self.scan_proto[proto_class(f.proto)];
        let mut have_stream = false;
        if scan {
            // Most of the per-packet cost (bench: ids/1k_rules_1500B_clean).
            if let Some(ix) = self.fast.as_mut() {
                ix.mark(payload, &mut self.cand, |_, _| true);
            }
            if !carry.is_empty() {
                if let Some(ix) = self.boundary.as_mut() {
                    self.stream_cand.fill(0);
                    self.boundary_buf.clear();
                    self.boundary_buf.extend_from_slice(carry);
                    let n = payload.len().min(self.max_content_len.saturating_sub(1));
                    self.boundary_buf.extend_from_slice(&payload[..n]);
                    let cut = carry.len();
                    // Only occurrences straddling the boundary are new.
                    ix.mark(&self.boundary_buf, &mut self.stream_cand, |s, e| {
                        s < cut && e > cut
                    });
                    have_stream = self.stream_cand.iter().any(|w| *w != 0);
                }
            }
        }
        let mut combined_ready = false;
        for w in 0..self.cand.len() {
            let stream_bits = if have_stream { self.stream_cand[w] } else { 0 };
            let mut bits = self.cand[w] | stream_bits;
            while bits != 0 {
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let i = w * 64 + b;
                let r = &self.rules[i];
                if !r.header_ok(f) {
                    continue;
                }
                let mut how = None;
                if self.cand[w] & (1 << b) != 0 && verify(&r.opts, payload, None) {
                    how = Some(MatchedBy::Packet);
                } else if stream_bits & (1 << b) != 0 && r.stream_ok {
                    if !combined_ready {
                        self.combined.clear();
                        self.combined.extend_from_slice(carry);
                        self.combined.extend_from_slice(payload);
                        combined_ready = true;
                    }
                    if verify(&r.opts, &self.combined, Some(carry.len())) {
                        how = Some(MatchedBy::Stream);
                    }
                }
                if let Some(how) = how {
                    if !on_match(i, how) {
                        return;
                    }
                }
            }
        }
    }
}

fn compile_opts(rule: &Rule) -> Vec<Opt> {
    let mut opts: Vec<Opt> = rule
        .payload
        .iter()
        .map(|o| match o {
            PayloadOpt::Content(c) => Opt::Content {
                finder: Finder::new(&c.pattern, c.nocase),
                len: c.pattern.len(),
                negated: c.negated,
                window: if c.is_relative() {
                    Window::Rel {
                        distance: i64::from(c.distance.unwrap_or(0)),
                        within: c.within.map(|w| w as usize),
                    }
                } else if c.offset.is_some() || c.depth.is_some() {
                    Window::Abs {
                        offset: c.offset.unwrap_or(0) as usize,
                        depth: c.depth.map(|d| d as usize),
                    }
                } else {
                    Window::Any
                },
                retry: false,
            },
            PayloadOpt::Pcre(p) => Opt::Pcre {
                regex: p.regex.clone(),
                relative: p.relative,
                negated: p.negated,
            },
        })
        .collect();
    // A content is retried at later positions only if a later option is
    // placed relative to it.
    let mut later_relative = false;
    for o in opts.iter_mut().rev() {
        match o {
            Opt::Content {
                retry,
                window,
                negated,
                ..
            } => {
                *retry = later_relative;
                if !*negated {
                    // A positive content resets the cursor for what follows;
                    // options before it matter only if it is relative.
                    later_relative = matches!(window, Window::Rel { .. });
                } else {
                    later_relative |= matches!(window, Window::Rel { .. });
                }
            }
            Opt::Pcre {
                relative, negated, ..
            } => {
                if !*negated {
                    later_relative = *relative;
                } else {
                    later_relative |= *relative;
                }
            }
        }
    }
    opts
}

/// Whether the option chain matches `buf`. With `need_end = Some(n)`
/// (stream mode) some positive option must end after byte `n`, so that a
/// match lying wholly in the previous segment is not reported again.
fn verify(opts: &[Opt], buf: &[u8], need_end: Option<usize>) -> bool {
    let mut budget = BACKTRACK_BUDGET;
    search(opts, buf, 0, 0, need_end, &mut budget)
}

fn search(
    opts: &[Opt],
    buf: &[u8],
    cursor: usize,
    max_end: usize,
    need_end: Option<usize>,
    budget: &mut u32,
) -> bool {
    let Some((o, rest)) = opts.split_first() else {
        return need_end.is_none_or(|n| max_end > n);
    };
    let retry_all = need_end.is_some();
    match o {
        Opt::Content {
            finder,
            len,
            negated,
            window,
            retry,
        } => {
            let n = buf.len();
            let (start, end) = match *window {
                Window::Any => (0, n),
                Window::Abs { offset, depth } => {
                    (offset, depth.map_or(n, |d| offset.saturating_add(d)))
                }
                Window::Rel { distance, within } => {
                    let s = (cursor as i64).saturating_add(distance).max(0) as usize;
                    (s, within.map_or(n, |w| s.saturating_add(w)))
                }
            };
            let end = end.min(n);
            if *negated {
                let found =
                    start <= end && end - start >= *len && finder.find(&buf[start..end]).is_some();
                return !found && search(rest, buf, cursor, max_end, need_end, budget);
            }
            let mut from = start;
            while from <= end && end - from >= *len {
                let Some(pos) = finder.find(&buf[from..end]) else {
                    return false;
                };
                let m_end = from + pos + len;
                if search(rest, buf, m_end, max_end.max(m_end), need_end, budget) {
                    return true;
                }
                if !(*retry || retry_all) || *budget == 0 {
                    return false;
                }
                *budget -= 1;
                from += pos + 1;
            }
            false
        }
        Opt::Pcre {
            regex,
            relative,
            negated,
        } => {
            // Like Snort, a relative expression sees the buffer from the
            // cursor on, so `^` anchors at the cursor.
            let start = if *relative { cursor } else { 0 };
            let m_end = buf
                .get(start..)
                .and_then(|hay| regex.find(hay))
                .map(|m| start + m.end());
            match (m_end, *negated) {
                (Some(_), true) => false,
                (None, true) => search(rest, buf, cursor, max_end, need_end, budget),
                (None, false) => false,
                (Some(e), false) => search(rest, buf, e, max_end.max(e), need_end, budget),
            }
        }
    }
}
