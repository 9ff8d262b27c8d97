//! Every NF type's packet path on arbitrary frames, flow ends and clock
//! jumps: `process`, `tick`, `flow_end` and `stop` never panic, and an NF
//! never returns more packets from a batch than the batch held.
//!
//! The NFs are the ones of `examples/*.yaml`, compiled exactly as the
//! platform compiles them (`sluice_dataplane::compile::compile`, then each
//! NF's recipe builds it), so the configs fuzzed are the ones users start
//! from. The examples hold every type of the registry; the target refuses
//! to start when one is missing, so a new NF type without an example fails
//! `scripts/fuzz.sh` instead of going unfuzzed.
//!
//! Input: `[nf, record*]`. The first byte picks the NF (examples' NFs with
//! the same type and config count once, in file order). A record is
//! `[op, arg, len, bytes…]`:
//! - `op % 4 == 0`: queue a frame of `len * 4` bytes (a batch is sent when
//!   it is full, before any other op, and at the end);
//! - `op % 4 == 1`: advance the clock by `arg` milliseconds (`arg >= 200`:
//!   by `arg` seconds) and run `tick`;
//! - `op % 4 == 2`: end the flow with harness id `arg % 16` (some ids never
//!   had a packet);
//! - `op % 4 == 3`: send what is queued now.
//!
//! What is not fuzzed here: `open_handles` (files a mirror or an alert log
//! writes; their writers have their own tests) and per-NF state invariants
//! (the per-type targets, such as `ids_packet` and `nat_translate`, check
//! those).
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sluice_dataplane::compile::{compile, Target};
use sluice_dataplane::recipe::NfRecipe;
use sluice_mem::MAX_BATCH;
use sluice_nf::harness::Harness;
use sluice_nf::NetworkFunction;

/// The harness hands out flow ids from 0 per input; the NFs are built for
/// the smallest flow table a spec may have (`settings.flow_table.capacity`
/// is at least 1024), so an input never brings more frames than that.
/// Per-flow tables of 1024 entries also keep building an NF per input
/// quick: the examples' 65,536 cost milliseconds of zeroing each.
const MAX_FRAMES: usize = 1024;

fn recipes() -> &'static [NfRecipe] {
    static RECIPES: OnceLock<Vec<NfRecipe>> = OnceLock::new();
    RECIPES.get_or_init(|| {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples");
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .expect("examples/ is readable")
            .map(|e| e.expect("examples/ entry").path())
            .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
            .collect();
        // read_dir's order is the file system's: sort so that a corpus
        // entry picks the same NF in every run.
        files.sort();
        let names: Vec<&str> = sluice_nfs::REGISTRY.iter().map(|t| t.name).collect();
        let mut out: Vec<NfRecipe> = Vec::new();
        for f in &files {
            let spec = sluice_spec::load(f, &names)
                .unwrap_or_else(|e| panic!("{} does not load: {e}", f.display()));
            let plan = compile(&spec, sluice_nfs::REGISTRY, &Target::of_spec(&spec), None)
                .unwrap_or_else(|e| panic!("{} does not compile: {e}", f.display()));
            for (_, nf) in plan.nfs_in_order() {
                let r = &nf.recipe;
                if !out
                    .iter()
                    .any(|o| o.type_name == r.type_name && o.config == r.config)
                {
                    let mut r = r.clone();
                    r.flow_capacity = MAX_FRAMES as u32;
                    out.push(r);
                }
            }
        }
        for t in sluice_nfs::REGISTRY {
            assert!(
                out.iter().any(|r| r.type_name == t.name),
                "no example in examples/ uses NF type `{}`: add one so that it is fuzzed",
                t.name
            );
        }
        out
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let all = recipes();
    let recipe = &all[usize::from(pick) % all.len()];
    let mut nf = recipe
        .build(sluice_nfs::REGISTRY, 0)
        .expect("a recipe that compiled builds again");
    HARNESS.with(|h| {
        let mut h = h.borrow_mut();
        h.reset();
        run(&mut h, nf.as_mut(), rest);
    });
});

thread_local! {
    // A fresh harness maps and touches a new arena (most of an input's
    // time); `reset` gives the next input one as new, cheaply.
    static HARNESS: std::cell::RefCell<Harness> = std::cell::RefCell::new(Harness::new());
}

fn run(h: &mut Harness, nf: &mut dyn NetworkFunction, mut rest: &[u8]) {
    let mut now_ns: u64 = 1_000_000_000;
    let mut queued: Vec<Vec<u8>> = Vec::with_capacity(MAX_BATCH);
    let mut frames = 0usize;
    while rest.len() >= 3 {
        let (op, arg, len) = (rest[0] % 4, rest[1], usize::from(rest[2]) * 4);
        rest = &rest[3..];
        if op == 0 {
            let n = len.min(rest.len());
            let (frame, tail) = rest.split_at(n);
            rest = tail;
            if frames == MAX_FRAMES {
                break;
            }
            frames += 1;
            queued.push(frame.to_vec());
            if queued.len() == MAX_BATCH {
                send(h, nf, &mut queued);
            }
            continue;
        }
        send(h, nf, &mut queued);
        match op {
            1 => {
                let step = if arg >= 200 {
                    u64::from(arg) * 1_000_000_000
                } else {
                    u64::from(arg) * 1_000_000
                };
                now_ns += step;
                h.set_now_ns(now_ns);
                h.tick(nf);
            }
            2 => h.end_flow(nf, u32::from(arg % 16)),
            _ => {}
        }
        drop(h.take_emitted());
    }
    send(h, nf, &mut queued);
    h.stop(nf);
    drop(h.take_emitted());
}

/// Runs the queued frames as one batch.
fn send(h: &mut Harness, nf: &mut dyn NetworkFunction, queued: &mut Vec<Vec<u8>>) {
    if queued.is_empty() {
        return;
    }
    let out = h.run(nf, queued);
    // Packets taken out of the batch come back through `take_emitted`;
    // the batch itself can only shrink.
    assert!(
        out.len() <= queued.len(),
        "{} out of {}",
        out.len(),
        queued.len()
    );
    queued.clear();
}
