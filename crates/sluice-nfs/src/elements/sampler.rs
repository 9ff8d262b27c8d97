//! `sampler`: passes one packet in `rate` (sFlow/PSAMP style packet
//! sampling, RFC 5475 §5.1): every `rate`-th packet (`mode:
//! deterministic`) or each packet with probability 1/`rate` from a seeded
//! xorshift generator (`mode: random`, reproducible for a given seed).
//!
//! Sampled packets get the verdict `to` (default `next`); the others are
//! dropped (`not_sampled`) or, with `unsampled: pass`, continue.
//!
//! | config key | type | default | meaning |
//! |---|---|---|---|
//! | `rate` | 1.. | required | sample 1 in `rate` |
//! | `mode` | `deterministic`/`random` | `deterministic` | how |
//! | `seed` | u64 | `1` | random mode seed |
//! | `to` | NF, port, `next` | `next` | where sampled packets go |
//! | `unsampled` | `drop`/`pass` | `drop` | what happens to the others |
//!
//! Counters: `sampled`, `unsampled`. Drop reasons: `not_sampled`.

use serde::Deserialize;
use sluice_nf::{Batch, BuildContext, Context, DropReason, NetworkFunction, NfType, Verdict};
use sluice_spec::SpecError;

const NOT_SAMPLED: DropReason = DropReason::nf_local(0);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Mode {
    Deterministic,
    Random,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Unsampled {
    Drop,
    Pass,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    rate: u64,
    #[serde(default = "d_mode")]
    mode: Mode,
    #[serde(default = "d_seed")]
    seed: u64,
    #[serde(default = "d_next")]
    to: String,
    #[serde(default = "d_drop")]
    unsampled: Unsampled,
}

fn d_mode() -> Mode {
    Mode::Deterministic
}
fn d_seed() -> u64 {
    1
}
fn d_next() -> String {
    "next".into()
}
fn d_drop() -> Unsampled {
    Unsampled::Drop
}

/// The sampling NF.
pub struct Sampler {
    rate: u64,
    random: bool,
    seed: u64,
    state: u64,
    count: u64,
    to: Verdict,
    pass: bool,
}

impl Sampler {
    fn next_sampled(&mut self) -> bool {
        if self.random {
            // xorshift64*: a uniform draw below u64::MAX / rate.
            let mut x = self.state;
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            self.state = x;
            x.wrapping_mul(0x2545_f491_4f6c_dd1d) < u64::MAX / self.rate
        } else {
            self.count += 1;
            if self.count == self.rate {
                self.count = 0;
                true
            } else {
                false
            }
        }
    }
}

impl NetworkFunction for Sampler {
    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        let (mut s, mut u) = (0u64, 0u64);
        batch.for_each(|p| {
            if self.next_sampled() {
                s += 1;
                p.set_verdict(self.to);
            } else {
                u += 1;
                if !self.pass {
                    p.drop_with(NOT_SAMPLED);
                }
            }
        });
        ctx.count(0, s);
        ctx.count(1, u);
    }

    fn reset(&mut self) {
        self.state = self.seed;
        self.count = 0;
    }
}

fn build(ctx: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
    let cfg: Config = ctx.config.deserialize()?;
    if cfg.rate == 0 {
        return Err(ctx.config.error_at_path("rate", "rate must be at least 1"));
    }
    let to = super::classifier::resolve_target(ctx, "to", &cfg.to)?;
    if matches!(to, Verdict::Drop(_)) {
        return Err(ctx
            .config
            .error_at_path("to", "sampled packets cannot be dropped (`to: drop`)"));
    }
    // xorshift needs a non-zero state.
    let seed = if cfg.seed == 0 {
        0x9e37_79b9_7f4a_7c15
    } else {
        cfg.seed
    };
    Ok(Box::new(Sampler {
        rate: cfg.rate,
        random: cfg.mode == Mode::Random,
        seed,
        state: seed,
        count: 0,
        to,
        pass: cfg.unsampled == Unsampled::Pass,
    }))
}

/// Type descriptor.
pub const TYPE: NfType = NfType {
    name: "sampler",
    summary: "passes 1 in N packets, deterministically or at random",
    drop_reasons: &["not_sampled"],
    counters: &["sampled", "unsampled"],
    build,
    frames: sluice_nf::FrameNeeds::MtuFrames,
};
