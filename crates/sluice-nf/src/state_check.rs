//! The restore contract, checked on any NF type (for its tests): given an
//! instance and a valid state of its type, [`check_restore`] feeds its
//! `restore` every truncation of the state, the state with a byte too
//! many, and thousands of states with bytes changed or made of noise, and
//! asserts what `NetworkFunction::restore` promises: an error, never a
//! panic, leaves the instance exactly as it was (its own checkpoint does
//! not change), and a state it accepts is one it writes back the same.

use crate::nf::NetworkFunction;
use crate::state::{StateError, StateWriter};

/// `nf`'s state as it writes it.
pub fn state_of(nf: &dyn NetworkFunction) -> Vec<u8> {
    let mut w = StateWriter::new();
    nf.checkpoint(&mut w);
    w.into_bytes()
}

/// Checks `nf`'s restore against truncations and corruptions of `valid`
/// (a state of its type); panics naming the input that broke the contract.
/// `nf` ends as it started.
pub fn check_restore(nf: &mut dyn NetworkFunction, valid: &[u8]) {
    let before = state_of(nf);
    let untouched = |nf: &dyn NetworkFunction, what: &str| {
        assert!(
            state_of(nf) == before,
            "a refused restore changed the NF ({what})"
        );
    };
    for cut in 0..valid.len() {
        let got = nf.restore(&valid[..cut]);
        assert!(
            matches!(got, Err(StateError::Truncated { .. })),
            "a state cut at byte {cut} of {} gave {got:?}",
            valid.len()
        );
        untouched(nf, &format!("cut at {cut}"));
    }
    let mut longer = valid.to_vec();
    longer.push(0);
    assert_eq!(
        nf.restore(&longer),
        Err(StateError::TrailingBytes { count: 1 })
    );
    untouched(nf, "a byte too many");
    // xorshift: deterministic, so a failure reproduces.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for i in 0..3000 {
        let input: Vec<u8> = if i % 3 == 0 || valid.is_empty() {
            let n = (rnd() % 256) as usize;
            (0..n).map(|_| rnd() as u8).collect()
        } else {
            // A valid state with a few bytes changed gets past the counts.
            let mut s = valid.to_vec();
            for _ in 0..1 + rnd() % 3 {
                let at = (rnd() as usize) % s.len();
                s[at] = rnd() as u8;
            }
            s
        };
        match nf.restore(&input) {
            Err(_) => untouched(nf, &format!("input {i}")),
            Ok(()) => {
                let back = state_of(nf);
                nf.restore(&back)
                    .unwrap_or_else(|e| panic!("input {i}: its own state back refused: {e}"));
                assert!(state_of(nf) == back, "input {i}: not written back the same");
                nf.restore(&before)
                    .unwrap_or_else(|e| panic!("the NF's first state refused: {e}"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Batch, Context, StateReader};

    /// A list of numbers, with a restore that keeps its promise.
    #[derive(Default)]
    struct Good(Vec<u32>);

    impl NetworkFunction for Good {
        fn process(&mut self, _: &mut Batch<'_>, _: &mut Context<'_>) {}
        fn state_version(&self) -> Option<u16> {
            Some(1)
        }
        fn checkpoint(&self, out: &mut StateWriter) {
            out.len(self.0.len());
            self.0.iter().for_each(|&n| out.u32(n));
        }
        fn restore(&mut self, state: &[u8]) -> Result<(), StateError> {
            let mut r = StateReader::new(state);
            let n = r.len(4)?;
            let v = (0..n).map(|_| r.u32()).collect::<Result<Vec<_>, _>>()?;
            r.finish()?;
            self.0 = v;
            Ok(())
        }
    }

    /// Changes itself before it has read the whole state.
    #[derive(Default)]
    struct Hasty(Vec<u32>);

    impl NetworkFunction for Hasty {
        fn process(&mut self, _: &mut Batch<'_>, _: &mut Context<'_>) {}
        fn checkpoint(&self, out: &mut StateWriter) {
            out.len(self.0.len());
            self.0.iter().for_each(|&n| out.u32(n));
        }
        fn restore(&mut self, state: &[u8]) -> Result<(), StateError> {
            let mut r = StateReader::new(state);
            let n = r.len(4)?;
            self.0.clear();
            for _ in 0..n {
                self.0.push(r.u32()?);
            }
            r.finish()
        }
    }

    #[test]
    fn a_careful_restore_passes() {
        let mut nf = Good(vec![7, 8]);
        let valid = state_of(&Good(vec![1, 2, 3]));
        check_restore(&mut nf, &valid);
        assert_eq!(nf.0, [7, 8], "as it started");
    }

    #[test]
    #[should_panic(expected = "a refused restore changed the NF")]
    fn a_restore_that_changes_before_it_has_read_everything_fails() {
        let mut nf = Hasty(vec![7, 8]);
        let valid = state_of(&Hasty(vec![1, 2, 3]));
        check_restore(&mut nf, &valid);
    }
}
