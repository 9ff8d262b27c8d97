//! A seccomp allow-list compiled to classic BPF as a binary search over
//! system call numbers.
//!
//! Why by hand: installing a filter costs the kernel time in proportion to
//! how far it walks the program for each call number (it pre-evaluates
//! every number to build its cache of always-allowed calls), measured at
//! ~0.6 µs per instruction of a linear chain here. `seccompiler`, the
//! maintained Rust filter compiler, emits a linear chain of comparisons;
//! a search tree walks ~6 comparisons where the chain walked up to 80, so
//! an NF starts ~100 µs sooner. The program is small enough to check
//! whole: the tests run it in an interpreter against the rules for every
//! call number.
//!
//! Layout: check the architecture (else kill), load the call number, then
//! a tree of `JGE` splits down to groups of at most [`LEAF`] numbers
//! compared with `JEQ`; a number that matches none is killed. A matched
//! number without rules returns ALLOW; one with rules checks them in
//! place (rules are OR-ed, a rule's conditions AND-ed, each on the
//! argument's two 32-bit halves) and kills if none holds.

use std::io;

/// One classic BPF instruction (`struct sock_filter`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Insn {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

// Opcodes (linux/bpf_common.h).
const LD_W_ABS: u16 = 0x20;
const ALU_AND_K: u16 = 0x54;
const JEQ_K: u16 = 0x15;
const JGE_K: u16 = 0x35;
const RET_K: u16 = 0x06;

// struct seccomp_data offsets.
const NR: u32 = 0;
const ARCH: u32 = 4;
const fn arg_lo(i: u8) -> u32 {
    16 + 8 * i as u32
}
const fn arg_hi(i: u8) -> u32 {
    arg_lo(i) + 4
}

/// `SECCOMP_RET_KILL_PROCESS`.
pub(crate) const KILL: u32 = 0x8000_0000;
/// `SECCOMP_RET_ALLOW`.
pub(crate) const ALLOW: u32 = 0x7fff_0000;

/// Numbers compared one by one at a leaf of the tree.
const LEAF: usize = 3;

/// One condition on a 64-bit argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cond {
    /// `args[arg] == value`.
    Eq(u8, u64),
    /// `args[arg] & mask == value`.
    MaskedEq(u8, u64, u64),
}

impl Cond {
    /// Whether `args` satisfy it (the reference the tests hold the
    /// program to).
    #[cfg(test)]
    pub(crate) fn holds(self, args: &[u64; 6]) -> bool {
        match self {
            Cond::Eq(a, v) => args[a as usize] == v,
            Cond::MaskedEq(a, m, v) => args[a as usize] & m == v,
        }
    }
}

/// A call and when it is allowed: always (no rules) or when one of its
/// rules (a list of conditions, all of which must hold) holds.
pub(crate) type Allowed = (u32, Vec<Vec<Cond>>);

/// A jump target while the program is laid out.
#[derive(Debug, Clone, Copy)]
enum To {
    Next,
    Label(usize),
}

#[derive(Debug)]
enum Op {
    Insn { code: u16, jt: To, jf: To, k: u32 },
    Label(usize),
}

struct Asm {
    ops: Vec<Op>,
    labels: usize,
}

impl Asm {
    fn label(&mut self) -> usize {
        self.labels += 1;
        self.labels - 1
    }
    fn put(&mut self, code: u16, jt: To, jf: To, k: u32) {
        self.ops.push(Op::Insn { code, jt, jf, k });
    }
    fn ret(&mut self, k: u32) {
        self.put(RET_K, To::Next, To::Next, k);
    }
    fn load(&mut self, k: u32) {
        self.put(LD_W_ABS, To::Next, To::Next, k);
    }
    fn mark(&mut self, l: usize) {
        self.ops.push(Op::Label(l));
    }

    /// Resolves labels to forward offsets; an error if one does not fit
    /// a jump's 8 bits (never for programs of this size).
    fn finish(self) -> io::Result<Vec<Insn>> {
        let mut at = vec![usize::MAX; self.labels];
        let mut n = 0;
        for op in &self.ops {
            match op {
                Op::Label(l) => at[*l] = n,
                Op::Insn { .. } => n += 1,
            }
        }
        let mut out = Vec::with_capacity(n);
        for op in &self.ops {
            let Op::Insn { code, jt, jf, k } = *op else {
                continue;
            };
            let here = out.len();
            let off = |t: To| -> io::Result<u8> {
                match t {
                    To::Next => Ok(0),
                    To::Label(l) => at[l]
                        .checked_sub(here + 1)
                        .and_then(|d| u8::try_from(d).ok())
                        .ok_or_else(|| io::Error::other("seccomp filter: jump out of range")),
                }
            };
            out.push(Insn {
                code,
                jt: off(jt)?,
                jf: off(jf)?,
                k,
            });
        }
        u16::try_from(out.len()).map_err(|_| io::Error::other("seccomp filter: too long"))?;
        Ok(out)
    }
}

/// Compiles `allowed` (sorted or not; no number twice; up to ~190 calls,
/// an error beyond) for the architecture whose audit value is `arch`.
pub(crate) fn compile(arch: u32, allowed: &[Allowed]) -> io::Result<Vec<Insn>> {
    let mut sorted: Vec<&Allowed> = allowed.iter().collect();
    sorted.sort_by_key(|a| a.0);
    if sorted.windows(2).any(|w| w[0].0 == w[1].0) {
        return Err(io::Error::other("seccomp filter: a call is listed twice"));
    }
    let mut a = Asm {
        ops: Vec::new(),
        labels: 0,
    };
    // Every "kill" is a return in place: no jump ever crosses more than a
    // subtree, so offsets fit their 8 bits up to ~190 calls.
    let arch_ok = a.label();
    a.load(ARCH);
    a.put(JEQ_K, To::Label(arch_ok), To::Next, arch);
    a.ret(KILL);
    a.mark(arch_ok);
    a.load(NR);
    tree(&mut a, &sorted);
    a.finish()
}

/// The search over `calls` (sorted); the call number is in A.
fn tree(a: &mut Asm, calls: &[&Allowed]) {
    if calls.len() <= LEAF {
        let bodies: Vec<usize> = calls.iter().map(|_| a.label()).collect();
        for (c, &body) in calls.iter().zip(&bodies) {
            a.put(JEQ_K, To::Label(body), To::Next, c.0);
        }
        a.ret(KILL);
        for (c, &body) in calls.iter().zip(&bodies) {
            a.mark(body);
            rules(a, &c.1);
        }
        return;
    }
    let mid = calls.len() / 2;
    let right = a.label();
    a.put(JGE_K, To::Label(right), To::Next, calls[mid].0);
    tree(a, &calls[..mid]);
    a.mark(right);
    tree(a, &calls[mid..]);
}

/// A matched call: allow if it has no rules, else if one rule holds.
fn rules(a: &mut Asm, rules: &[Vec<Cond>]) {
    if rules.is_empty() {
        a.ret(ALLOW);
        return;
    }
    for rule in rules {
        let next = a.label();
        for &c in rule {
            let (arg, mask, value) = match c {
                Cond::Eq(arg, v) => (arg, u64::MAX, v),
                Cond::MaskedEq(arg, m, v) => (arg, m, v),
            };
            for (off, m, v) in [
                (arg_lo(arg), mask as u32, value as u32),
                (arg_hi(arg), (mask >> 32) as u32, (value >> 32) as u32),
            ] {
                if m == 0 && v == 0 {
                    continue; // nothing of this half is looked at
                }
                a.load(off);
                if m != u32::MAX {
                    a.put(ALU_AND_K, To::Next, To::Next, m);
                }
                a.put(JEQ_K, To::Next, To::Label(next), v);
            }
        }
        a.ret(ALLOW);
        a.mark(next);
    }
    a.ret(KILL);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `prog` on a `seccomp_data` as the kernel would (the subset of
    /// classic BPF it uses); the returned action.
    fn run(prog: &[Insn], arch: u32, nr: u32, args: &[u64; 6]) -> u32 {
        let word = |off: u32| -> u32 {
            match off {
                NR => nr,
                ARCH => arch,
                o if (16..64).contains(&o) => {
                    let i = ((o - 16) / 8) as usize;
                    if (o - 16) % 8 == 0 {
                        args[i] as u32
                    } else {
                        (args[i] >> 32) as u32
                    }
                }
                o => panic!("load of offset {o}"),
            }
        };
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let i = prog[pc];
            pc += 1;
            match i.code {
                LD_W_ABS => acc = word(i.k),
                ALU_AND_K => acc &= i.k,
                JEQ_K => pc += usize::from(if acc == i.k { i.jt } else { i.jf }),
                JGE_K => pc += usize::from(if acc >= i.k { i.jt } else { i.jf }),
                RET_K => return i.k,
                c => panic!("opcode {c:#x}"),
            }
        }
    }

    fn reference(allowed: &[Allowed], nr: u32, args: &[u64; 6]) -> u32 {
        match allowed.iter().find(|a| a.0 == nr) {
            Some((_, rules)) if rules.is_empty() => ALLOW,
            Some((_, rules)) if rules.iter().any(|r| r.iter().all(|c| c.holds(args))) => ALLOW,
            _ => KILL,
        }
    }

    fn sample() -> Vec<Allowed> {
        let mut v: Vec<Allowed> = [0u32, 1, 3, 9, 10, 24, 60, 157, 200, 202, 231, 318]
            .iter()
            .map(|&n| (n, Vec::new()))
            .collect();
        v.push((11, vec![vec![Cond::MaskedEq(2, 4, 0)]]));
        v.push((72, vec![vec![Cond::Eq(1, 1)], vec![Cond::Eq(1, 3)]]));
        v.push((234, vec![vec![Cond::Eq(0, 77), Cond::Eq(2, 1 << 40)]]));
        v
    }

    #[test]
    fn it_answers_as_the_rules_do_for_every_number_and_tricky_arguments() {
        let allowed = sample();
        let prog = compile(0xc000_003e, &allowed).unwrap();
        let argsets: Vec<[u64; 6]> = vec![
            [0; 6],
            [77, 1, 1 << 40, 0, 0, 0],
            [77, 3, 1 << 40 | 4, 0, 0, 0],
            [77 | 1 << 32, 1 | 1 << 32, 1 << 40, 0, 0, 0],
            [u64::MAX; 6],
            [5, 2, 3, 4, 0, 0],
        ];
        for nr in (0..600).chain([0x4000_0000, 0x4000_0001, u32::MAX]) {
            for args in &argsets {
                assert_eq!(
                    run(&prog, 0xc000_003e, nr, args),
                    reference(&allowed, nr, args),
                    "nr {nr} args {args:?}"
                );
            }
        }
        assert_eq!(
            run(&prog, 0x4000_0003, 0, &[0; 6]),
            KILL,
            "another ABI is killed"
        );
    }

    #[test]
    fn every_size_of_list_lays_out() {
        for n in 0..120u32 {
            let allowed: Vec<Allowed> = (0..n).map(|i| (i * 3, Vec::new())).collect();
            let prog = compile(1, &allowed).unwrap();
            for nr in 0..(n * 3 + 3) {
                assert_eq!(run(&prog, 1, nr, &[0; 6]), reference(&allowed, nr, &[0; 6]));
            }
        }
        assert!(compile(1, &[(5, vec![]), (5, vec![])]).is_err());
    }

    #[test]
    fn a_search_walks_few_instructions() {
        let allowed: Vec<Allowed> = (0..40u32).map(|i| (i * 7, Vec::new())).collect();
        let prog = compile(1, &allowed).unwrap();
        // Longest path: the arch check and load (3), ~log2(40/3) splits,
        // one leaf of LEAF comparisons and a return.
        let mut longest = 0;
        for nr in 0..300 {
            let (mut pc, mut steps, mut acc) = (0usize, 0, 0u32);
            loop {
                let i = prog[pc];
                pc += 1;
                steps += 1;
                match i.code {
                    LD_W_ABS => acc = if i.k == ARCH { 1 } else { nr },
                    JEQ_K => pc += usize::from(if acc == i.k { i.jt } else { i.jf }),
                    JGE_K => pc += usize::from(if acc >= i.k { i.jt } else { i.jf }),
                    _ => break,
                }
            }
            longest = longest.max(steps);
        }
        assert!(longest <= 12, "{longest} steps");
    }
}
