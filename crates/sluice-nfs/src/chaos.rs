//! `chaos`: a fault injector for resilience tests and drills. It forwards
//! packets like `forwarder` until `after_packets` packets have passed, then
//! misbehaves as configured:
//!
//! | `fault` | what the NF does |
//! |---|---|
//! | `none` | nothing (a plain forwarder) |
//! | `panic` | panics (process NFs: the process dies with exit code 101) |
//! | `abort` | aborts (SIGABRT) |
//! | `exit` | exits with code 7 |
//! | `garbage_verdicts` | writes random bits into every verdict |
//! | `garbage_metadata` | writes random packet offsets/lengths/chains |
//! | `garbage_ring` | writes random and duplicate handles into its ring |
//! | `hang` | spins forever inside `process`, never returning (a process NF keeps its core busy and never yields; inline it would stop its worker, so use it with `isolation: process`) |
//! | `sleep` | sleeps forever inside `process` (a process NF that neither works nor gives its packets back) |
//!
//! The platform must survive every one of these: count the damage, take
//! back every buffer, restart the NF per policy, and keep traffic flowing.
//! Config keys: `fault` (default `none`), `after_packets` (default 1000),
//! `seed` (default 1).

use serde::Deserialize;
use sluice_nf::{Batch, BuildContext, Context, NetworkFunction, NfType};
use sluice_spec::SpecError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Fault {
    None,
    Panic,
    Abort,
    Exit,
    GarbageVerdicts,
    GarbageMetadata,
    GarbageRing,
    Hang,
    Sleep,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default = "no_fault")]
    fault: Fault,
    #[serde(default = "thousand")]
    after_packets: u64,
    #[serde(default = "one")]
    seed: u64,
}

fn no_fault() -> Fault {
    Fault::None
}
fn thousand() -> u64 {
    1000
}
fn one() -> u64 {
    1
}

/// The chaos NF.
pub struct Chaos {
    fault: Fault,
    after: u64,
    seen: u64,
    rng: u64,
}

impl Chaos {
    fn next(&mut self) -> u64 {
        // xorshift64*: enough randomness for garbage.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

impl NetworkFunction for Chaos {
    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        // The first `after` packets pass untouched; the fault starts with
        // packet `after + 1` (at index `skip` of this batch).
        let skip = self.after.saturating_sub(self.seen) as usize;
        self.seen += batch.len() as u64;
        if self.seen <= self.after {
            return;
        }
        match self.fault {
            Fault::None => {}
            Fault::Panic => panic!("chaos NF: injected panic after {} packets", self.seen),
            Fault::Abort => std::process::abort(),
            Fault::Exit => std::process::exit(7),
            Fault::GarbageVerdicts => {
                for i in skip..batch.len() {
                    let v = self.next() as u32;
                    if let Some(mut p) = batch.get(i) {
                        p.raw().set_verdict_raw(v);
                    }
                }
            }
            Fault::GarbageMetadata => {
                for i in skip..batch.len() {
                    let (a, b) = (self.next(), self.next());
                    if let Some(mut p) = batch.get(i) {
                        let m = p.raw();
                        match a % 4 {
                            0 => m.set_data_off(a as u16),
                            1 => m.set_len_raw(b as u16),
                            2 => m.set_chain(b as u16),
                            _ => m.set_hop(b as u16),
                        }
                    }
                }
            }
            Fault::GarbageRing => {
                let mut junk = [0u32; 8];
                for j in junk.iter_mut() {
                    *j = self.next() as u32 % 70_000;
                }
                ctx.inject_raw_output(&junk);
            }
            Fault::Hang => loop {
                std::hint::spin_loop();
            },
            Fault::Sleep => loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            },
        }
    }

    fn reset(&mut self) {
        self.seen = 0;
    }
}

fn build(ctx: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
    let cfg: Config = ctx.config.deserialize()?;
    Ok(Box::new(Chaos {
        fault: cfg.fault,
        after: cfg.after_packets,
        seen: 0,
        rng: cfg.seed.max(1),
    }))
}

/// Type descriptor.
pub const TYPE: NfType = NfType {
    name: "chaos",
    summary:
        "forwards, then injects a configured fault (panic, abort, garbage) for resilience tests",
    drop_reasons: &[],
    counters: &[],
    build,
    frames: sluice_nf::FrameNeeds::MtuFrames,
};
