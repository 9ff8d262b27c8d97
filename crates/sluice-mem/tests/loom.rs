//! Model checks of the lock-free ring, the pool and the wake-word protocol
//! under the interleavings loom explores. Run with `scripts/loom.sh`, i.e.
//! `LOOM_MAX_PREEMPTIONS=3 RUSTFLAGS="--cfg loom" cargo test -p sluice-mem --test loom --release`.
//!
//! The models are deliberately tiny (a ring of 2 slots moving 3 items, a
//! pool of 2 buffers shared by 2 threads, one producer waking one sleeper)
//! and every model runs with a preemption bound (3 unless
//! `LOOM_MAX_PREEMPTIONS` says otherwise): unbounded exploration of even
//! these models takes tens of minutes, while bugs in protocols this small
//! need at most two or three preemptions to show.
#![cfg(loom)]

use loom::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use loom::sync::Arc;
use sluice_mem::{BellWord, BufferPool, CoreTurn, PoolCache, RingRef, RingShared, WakeWord};

/// Preemption bound used when `LOOM_MAX_PREEMPTIONS` is not set.
const DEFAULT_PREEMPTIONS: usize = 3;

/// Runs `f` under loom with a preemption bound (the environment's, or
/// [`DEFAULT_PREEMPTIONS`]).
fn model<F>(f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(DEFAULT_PREEMPTIONS);
    }
    builder.check(f);
}

struct Ring {
    shared: RingShared,
    slots: Vec<AtomicU32>,
}

impl Ring {
    fn new(n: usize) -> Arc<Ring> {
        Arc::new(Ring {
            shared: RingShared::default(),
            slots: (0..n).map(|_| AtomicU32::new(0)).collect(),
        })
    }

    fn get(&self) -> RingRef<'_> {
        RingRef::new(&self.shared, &self.slots).unwrap()
    }
}

/// Three items through a ring of two: the producer must wait for the
/// consumer to free a slot, and the third item reuses slot 0, so a slot read
/// racing with its overwrite (or a publish racing with the slot write) shows
/// up as a wrong or duplicated item.
#[test]
fn ring_delivers_every_item_once_in_order() {
    model(|| {
        let r = Ring::new(2);
        let r2 = r.clone();
        let producer = loom::thread::spawn(move || {
            let mut p = r2.get().producer();
            let items = [1u32, 2, 3];
            let mut sent = 0;
            while sent < items.len() {
                let n = p.enqueue(&items[sent..]).unwrap();
                if n == 0 {
                    loom::thread::yield_now();
                }
                sent += n;
            }
        });
        let mut c = r.get().consumer();
        let mut got = Vec::new();
        let mut out = [0u32; 2];
        while got.len() < 3 {
            let n = c.dequeue(&mut out).unwrap();
            if n == 0 {
                loom::thread::yield_now();
            }
            got.extend_from_slice(&out[..n]);
        }
        assert_eq!(got, vec![1, 2, 3]);
        producer.join().unwrap();
        assert_eq!(r.get().occupancy(), 0);
    });
}

/// Two workers, each with its own cache, allocate and free one buffer from
/// a pool of two. A buffer handed to both at once trips the `held` marker;
/// a buffer lost on the way back shows in the final audit.
#[test]
fn pool_caches_never_hand_out_a_buffer_twice() {
    model(|| {
        let pool = Arc::new(BufferPool::new(2));
        let held = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let pool = pool.clone();
                let held = held.clone();
                loom::thread::spawn(move || {
                    let mut cache = PoolCache::new(&pool, 1);
                    let h = cache.alloc().expect("two buffers for two workers");
                    let i = h.index() as usize;
                    assert!(
                        !held[i].swap(true, Ordering::AcqRel),
                        "buffer {i} handed to two workers at once"
                    );
                    assert_eq!(pool.owner(i as u32), Some(sluice_mem::pool::OWNER_PLATFORM));
                    held[i].store(false, Ordering::Release);
                    cache.free(h);
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        let audit = pool.audit();
        assert_eq!((audit.free, audit.platform, audit.at_nfs), (2, 0, 0));
        assert_eq!(pool.global_free(), 2);
    });
}

/// The consumer half of the sleep protocol, as a worker or NF runs it:
/// announce sleep, re-check the ring, then cancel or sleep. Returns whether
/// it decided to sleep.
fn consumer_goes_to_sleep(wake: &WakeWord, ring: RingRef<'_>) -> bool {
    wake.prepare_sleep();
    let mut c = ring.consumer();
    if c.available().unwrap() > 0 {
        wake.cancel_sleep();
        false
    } else {
        true
    }
}

/// Emulates `WakeWord::sleep` (a futex wait on SLEEPING, which does not
/// exist under loom): block while the word still says SLEEPING, then mark
/// the owner running, as `sleep` does after the futex returns.
fn emulated_sleep(wake: &WakeWord) {
    while wake.is_sleeping() {
        loom::thread::yield_now();
    }
    wake.cancel_sleep();
}

/// No lost wake-up: a consumer whose re-check found the ring empty goes to
/// sleep, so the producer that published into that ring must see SLEEPING and
/// issue the wake (the futex wake, or the word already changed so the futex
/// wait returns EAGAIN). This is the Dekker pair of SeqCst fences in
/// `prepare_sleep` and `wake`; weakening either fence fails this model.
#[test]
fn wake_is_never_lost() {
    model(|| {
        let wake = Arc::new(WakeWord::default());
        let r = Ring::new(2);
        let (wake2, r2) = (wake.clone(), r.clone());
        let producer = loom::thread::spawn(move || {
            let mut p = r2.get().producer();
            assert_eq!(p.enqueue(&[7]).unwrap(), 1);
            wake2.wake()
        });
        let slept = consumer_goes_to_sleep(&wake, r.get());
        let woke = producer.join().unwrap();
        assert!(
            !slept || woke,
            "consumer slept on a non-empty ring and the producer did not wake it"
        );
        if slept {
            assert!(!wake.is_sleeping(), "the wake must clear SLEEPING");
        }
    });
}

/// The whole consumer loop with an emulated futex wait: whatever the
/// interleaving, the consumer ends up with the item (a lost wake-up would
/// leave it spinning in `emulated_sleep` until loom's branch limit fails
/// the model).
#[test]
fn sleeping_consumer_always_gets_the_item() {
    model(|| {
        let wake = Arc::new(WakeWord::default());
        let r = Ring::new(2);
        let (wake2, r2) = (wake.clone(), r.clone());
        let producer = loom::thread::spawn(move || {
            let mut p = r2.get().producer();
            assert_eq!(p.enqueue(&[7]).unwrap(), 1);
            wake2.wake();
        });
        let mut c = r.get().consumer();
        let mut out = [0u32; 1];
        loop {
            if c.dequeue(&mut out).unwrap() == 1 {
                break;
            }
            if consumer_goes_to_sleep(&wake, r.get()) {
                emulated_sleep(&wake);
            }
        }
        assert_eq!(out, [7]);
        producer.join().unwrap();
    });
}

/// Turns (`sluice_mem::turn`): the holder A releases the core's turn while
/// the platform puts a packet in B's ring and claims the turn for B. Either
/// the platform sees nobody holding, or A's second look sees B's packet;
/// whatever the interleaving, B ends up holding the turn and exactly one
/// side was told to wake it, so a packet never waits on a core whose turn
/// nobody holds.
#[test]
fn a_released_turn_is_never_lost_while_work_waits() {
    model(|| {
        let turn = Arc::new(CoreTurn::default());
        let ring_b = Ring::new(2);
        const A: u32 = 0;
        const B: u32 = 1;
        assert!(turn.claim(A));
        let (turn2, ring2) = (turn.clone(), ring_b.clone());
        let platform = loom::thread::spawn(move || {
            let mut p = ring2.get().producer();
            assert_eq!(p.enqueue(&[9]).unwrap(), 1);
            turn2.claim(B)
        });
        assert!(turn.release(A));
        let a_claimed = ring_b.get().occupancy() > 0 && turn.claim(B);
        let platform_claimed = platform.join().unwrap();
        assert!(turn.holds(B), "B has a packet and nobody holds the turn");
        assert!(
            a_claimed ^ platform_claimed,
            "exactly one side must wake B (A: {a_claimed}, platform: {platform_claimed})"
        );
    });
}

/// Passing the turn to a sleeping NF: the passer moves the turn, then
/// wakes the receiver; the receiver checks the holder after announcing its
/// sleep. It never sleeps through a turn it was given.
#[test]
fn a_passed_turn_always_wakes_its_receiver() {
    model(|| {
        let turn = Arc::new(CoreTurn::default());
        let wake = Arc::new(WakeWord::default());
        const A: u32 = 0;
        const B: u32 = 1;
        assert!(turn.claim(A));
        let (turn2, wake2) = (turn.clone(), wake.clone());
        let passer = loom::thread::spawn(move || {
            assert!(turn2.pass(A, B));
            wake2.wake()
        });
        wake.prepare_sleep();
        let slept = if turn.holds(B) {
            wake.cancel_sleep();
            false
        } else {
            true
        };
        let woke = passer.join().unwrap();
        assert!(!slept || woke, "B slept with the turn and nobody woke it");
    });
}

/// A ring under pressure while another NF holds the turn: the worker
/// publishes packets past three quarters of B's ring, fails to claim the
/// turn (A holds it) and wakes B anyway; B, about to wait for the turn,
/// looks at its ring after announcing its sleep. It never sleeps through a
/// ring under pressure (it must run out of turn).
#[test]
fn a_ring_under_pressure_always_wakes_its_nf() {
    use sluice_mem::turn::under_pressure;
    const CAPACITY: u32 = 4;
    model(|| {
        let turn = Arc::new(CoreTurn::default());
        let wake = Arc::new(WakeWord::default());
        // The ring's producer index (the consumer's stays at 0).
        let tail = Arc::new(AtomicU32::new(2));
        const A: u32 = 0;
        const B: u32 = 1;
        assert!(turn.claim(A));
        let (turn2, wake2, tail2) = (turn.clone(), wake.clone(), tail.clone());
        let worker = loom::thread::spawn(move || {
            tail2.store(3, Ordering::Release);
            // `NfLink::wake`: the worker knows what it just published.
            if !turn2.claim(B) && !under_pressure(3, CAPACITY) {
                return false;
            }
            wake2.wake()
        });
        wake.prepare_sleep();
        let pressed = under_pressure(tail.load(Ordering::Acquire), CAPACITY);
        let slept = if turn.holds(B) || pressed {
            wake.cancel_sleep();
            false
        } else {
            true
        };
        let woke = worker.join().unwrap();
        assert!(!slept || woke, "B slept on a ring under pressure");
    });
}

/// An NF publishes two items, ringing its doorbell after each, while a
/// worker takes the bell twice and drains the ring whenever it found the
/// bit. Whatever the interleaving, an item the worker has not read must
/// have its bit still set, so the next pass finds it (`doorbell.rs`).
/// Ringing before publishing fails this model.
#[test]
fn a_published_entry_always_leaves_its_doorbell_rung() {
    model(|| {
        let r = Ring::new(2);
        let bell = Arc::new(BellWord::default());
        // Another worker's NF rang before: its bit is not this worker's.
        bell.ring(1 << 9);
        let (r2, bell2) = (r.clone(), bell.clone());
        let nf = loom::thread::spawn(move || {
            let mut p = r2.get().producer();
            for item in [1u32, 2] {
                assert_eq!(p.enqueue(&[item]).unwrap(), 1);
                bell2.ring(1 << 5);
            }
        });
        let mut c = r.get().consumer();
        let mut got = 0;
        let mut out = [0u32; 2];
        for _ in 0..2 {
            if bell.take(1 << 5) != 0 {
                got += c.dequeue(&mut out).unwrap();
            }
        }
        nf.join().unwrap();
        assert!(
            got == 2 || bell.any(1 << 5),
            "{got} of 2 items read and the doorbell is silent"
        );
        // The other worker's bit was left alone.
        assert!(bell.any(1 << 9));
    });
}
