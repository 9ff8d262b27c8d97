//! Fixed-count loops over the operations measured by the `ring` and `pool`
//! benches, for counting instructions with callgrind, which (unlike
//! wall-clock time) does not move when the machine is busy.
//!
//! `instr OP ROUNDS` runs `ROUNDS` rounds of `OP` and nothing else. OP is
//! `ring1`, `ring32` or `ring256` (enqueue+dequeue of that batch),
//! `pool_pair` (alloc+free), `pool_batch32` (32 allocs, 32 frees), `hop32`
//! (one NF round trip of 32 packets, as in the `pool` bench) or
//! `hop32_wakes` (the same plus the two `wake` calls). Instructions per item
//! are the difference between two runs divided by the extra items, which
//! cancels start-up and set-up: `scripts/bench-instr.sh` does exactly that.
//! Without arguments (as under `cargo bench`) it runs every OP briefly and
//! exits, so `cargo bench` stays quick.

use std::hint::black_box;
use std::sync::atomic::AtomicU32;

use sluice_mem::{
    Arena, ArenaConfig, BufferPool, HandleBatch, NfEndpoint, NfLink, PoolCache, RingRef,
    RingShared, RxEntry,
};

const BUFFERS: u32 = 4096;
const BATCH: usize = 32;

fn ring(batch: usize, rounds: u64) {
    let shared = RingShared::default();
    let slots: Vec<AtomicU32> = (0..1024).map(|_| AtomicU32::new(0)).collect();
    let r = RingRef::new(&shared, &slots).expect("power-of-two ring");
    let (mut p, mut c) = (r.producer(), r.consumer());
    let items: Vec<u32> = (0..batch as u32).collect();
    let mut out = vec![0u32; batch];
    for _ in 0..rounds {
        let n = p.enqueue(black_box(&items)).unwrap();
        let m = c.dequeue(black_box(&mut out[..n])).unwrap();
        assert_eq!(n, m);
        black_box(&out);
    }
}

fn pool_pair(rounds: u64) {
    let pool = BufferPool::new(BUFFERS);
    let mut cache = PoolCache::new(&pool, BATCH);
    for _ in 0..rounds {
        let h = cache.alloc().expect("pool has buffers");
        cache.free(black_box(h));
    }
}

fn pool_batch(rounds: u64) {
    let pool = BufferPool::new(BUFFERS);
    let mut cache = PoolCache::new(&pool, BATCH);
    let mut batch = HandleBatch::new();
    for _ in 0..rounds {
        for _ in 0..BATCH {
            let h = cache.alloc().expect("pool has buffers");
            if batch.push(h).is_err() {
                unreachable!("batch of {BATCH} fits");
            }
        }
        black_box(batch.indices());
        batch.drain(|h| cache.free(h));
    }
}

fn hop(rounds: u64, wakes: bool) {
    let arena = Arena::create(ArenaConfig {
        buffers: BUFFERS,
        ring_size: 1024,
        nf_slots: 1,
        workers: 1,
        hugepages: false,
        large_buffers: 0,
        ..Default::default()
    })
    .expect("arena");
    let pool = BufferPool::new(arena.buffers());
    let mut cache = PoolCache::new(&pool, BATCH);
    let mut link = NfLink::new(&arena, 0);
    let mut nf = NfEndpoint::new(&arena, 0, 0);
    let mut batch = HandleBatch::new();
    for _ in 0..BATCH {
        if batch
            .push(cache.alloc().expect("pool has buffers"))
            .is_err()
        {
            unreachable!("batch of {BATCH} fits");
        }
    }
    let mut raw = [0u32; BATCH];
    let mut back = HandleBatch::new();
    for _ in 0..rounds {
        link.send(&pool, &mut batch).unwrap();
        if wakes {
            black_box(link.wake());
        }
        let n = nf.recv_raw(&mut raw).unwrap();
        for &r in &raw[..n] {
            match nf.decode(r) {
                Some(RxEntry::Packet(h)) => {
                    if back.push(h).is_err() {
                        unreachable!("batch of {BATCH} fits");
                    }
                }
                other => panic!("unexpected ring entry {other:?}"),
            }
        }
        nf.send(&mut back).unwrap();
        if wakes {
            black_box(nf.wake_platform());
        }
        black_box(link.recv(&pool, &mut batch, BATCH).unwrap());
    }
    batch.drain(|h| cache.free(h));
}

fn run(op: &str, rounds: u64) -> Result<(), String> {
    match op {
        "ring1" => ring(1, rounds),
        "ring32" => ring(32, rounds),
        "ring256" => ring(256, rounds),
        "pool_pair" => pool_pair(rounds),
        "pool_batch32" => pool_batch(rounds),
        "hop32" => hop(rounds, false),
        "hop32_wakes" => hop(rounds, true),
        _ => return Err(format!("unknown op {op:?}")),
    }
    Ok(())
}

fn main() {
    // `cargo bench` passes flags such as `--bench`; only bare words count.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let result = match args.as_slice() {
        [] => [
            "ring1",
            "ring32",
            "ring256",
            "pool_pair",
            "pool_batch32",
            "hop32",
            "hop32_wakes",
        ]
        .iter()
        .try_for_each(|op| run(op, 1000)),
        [op, rounds] => match rounds.parse() {
            Ok(rounds) => run(op, rounds),
            Err(e) => Err(format!("bad ROUNDS {rounds:?}: {e}")),
        },
        _ => Err("usage: instr OP ROUNDS".to_string()),
    };
    if let Err(e) = result {
        eprintln!("instr: {e}");
        std::process::exit(2);
    }
}
