//! Element graphs: several NFs ("elements", Click's word) composed into
//! one NF, so a custom NF can be declared in a spec instead of written.
//!
//! Each element has at most one successor (its `Next`); elements also
//! reach each other by name with `ToNf` (the graph resolves element names
//! to ids above [`LOCAL_BASE`]). A batch enters at the entry element; the
//! runner feeds each element the packets queued for it, in element order,
//! until every packet has left the graph: `Next` from an element without a
//! successor (continue the chain after the graph NF), a port, a platform
//! NF, or a drop. Drop reasons of element `e` are renumbered into the
//! graph's own list (`<element>.<reason>`) and its counters into the
//! graph's extended counters, so elements never share a counter.
//!
//! Packets an element *emits* (held or created, see `Context::emit`)
//! leave the graph directly with their verdict.
//!
//! Cost: one pass over each element's queue plus a verdict decode per
//! packet and element, ≈ 2–4 ns per packet-hop beyond the elements' own
//! work (bench `graph` in sluice-nfs).

use sluice_mem::{HandleBatch, NF_COUNTERS};

use crate::batch::Batch;
use crate::context::Context;
use crate::drop_reason::DropReason;
use crate::nf::NetworkFunction;
use crate::verdict::{NfId, Verdict};

/// NF ids at and above this name elements of the enclosing graph.
pub const LOCAL_BASE: u16 = 0xF000;

/// Extended counters reserved per element.
pub const COUNTERS_PER_ELEMENT: usize = NF_COUNTERS;

/// One element of a graph.
pub struct Element {
    /// Its name (unique in the graph).
    pub name: String,
    /// The element itself.
    pub nf: Box<dyn NetworkFunction>,
    /// Names of its drop reasons.
    pub drop_reasons: Vec<String>,
    /// Names of its counters.
    pub counters: Vec<String>,
    /// The element that gets its `Next` packets, if any.
    pub next: Option<usize>,
}

/// A compiled element graph, runnable as an NF.
pub struct ElementGraph {
    elements: Vec<Element>,
    entry: usize,
    drop_base: Vec<u16>,
    queues: Vec<HandleBatch>,
    done: HandleBatch,
}

impl ElementGraph {
    /// A graph of `elements` entered at `entry`. Successors must be valid
    /// indices (the spec decoder checks names before building).
    pub fn new(elements: Vec<Element>, entry: usize) -> Self {
        let mut drop_base = Vec::with_capacity(elements.len());
        let mut base = 0u16;
        for e in &elements {
            drop_base.push(base);
            base = base.saturating_add(e.drop_reasons.len() as u16);
        }
        let queues = elements.iter().map(|_| HandleBatch::new()).collect();
        ElementGraph {
            elements,
            entry,
            drop_base,
            queues,
            done: HandleBatch::new(),
        }
    }

    /// Most element visits per batch before packets still inside are
    /// dropped as a loop (elements may route to each other in cycles).
    fn max_rounds(&self) -> usize {
        self.elements.len() * 8
    }

    /// Routes one packet `e` has processed: back into a queue, or out.
    fn route(&mut self, e: usize, mut h: sluice_mem::PktHandle, arena: &sluice_mem::Arena) {
        let mut p = arena.pkt(&mut h);
        let verdict = Verdict::decode(p.verdict_raw());
        let target = match verdict {
            Some(Verdict::Next) => self.elements[e].next,
            Some(Verdict::ToNf(NfId(id))) if id >= LOCAL_BASE => {
                let k = (id - LOCAL_BASE) as usize;
                if k < self.elements.len() {
                    Some(k)
                } else {
                    p.set_verdict_raw(Verdict::Drop(DropReason::INVALID_VERDICT).encode());
                    None
                }
            }
            Some(Verdict::Drop(r)) => {
                if let Some(local) = r.as_nf_local() {
                    let v = if (local as usize) < self.elements[e].drop_reasons.len() {
                        DropReason::nf_local(self.drop_base[e] + local)
                    } else {
                        DropReason::INVALID_VERDICT
                    };
                    p.set_verdict_raw(Verdict::Drop(v).encode());
                }
                None
            }
            _ => None,
        };
        let dest = match target {
            Some(k) => {
                p.set_verdict_raw(Verdict::Next.encode());
                &mut self.queues[k]
            }
            None => &mut self.done,
        };
        // Queues hold at most a batch: every packet came from one batch.
        if let Err(h) = dest.push(h) {
            let _ = self.done.push(h);
        }
    }

    fn each(&mut self, mut f: impl FnMut(usize, &mut Element)) {
        for (i, e) in self.elements.iter_mut().enumerate() {
            f(i, e);
        }
    }
}

fn ext_base(i: usize) -> usize {
    i * COUNTERS_PER_ELEMENT
}

impl NetworkFunction for ElementGraph {
    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        let (arena, handles) = batch.parts();
        let entry = self.entry;
        handles.drain(|h| {
            let _ = self.queues[entry].push(h);
        });
        let mut rounds = 0;
        while let Some(e) = self.queues.iter().position(|q| !q.is_empty()) {
            if rounds == self.max_rounds() {
                break;
            }
            rounds += 1;
            let mut q = std::mem::take(&mut self.queues[e]);
            {
                let mut sub = Batch::new(arena, &mut q);
                let mut ectx = ctx.for_element(ext_base(e));
                self.elements[e].nf.process(&mut sub, &mut ectx);
            }
            // Packets routed back to `e` land in the fresh queue left by
            // `take` (a stack value, no allocation); `q` is empty now.
            q.drain(|h| self.route(e, h, arena));
        }
        // Whatever is still inside went round in circles.
        let looped = Verdict::Drop(DropReason::LOOP_DETECTED).encode();
        for q in &mut self.queues {
            q.drain(|mut h| {
                arena.pkt(&mut h).set_verdict_raw(looped);
                let _ = self.done.push(h);
            });
        }
        self.done.drain(|h| {
            let _ = handles.push(h);
        });
    }

    fn flow_end(&mut self, flow_id: u32, ctx: &mut Context<'_>) {
        self.each(|i, e| e.nf.flow_end(flow_id, &mut ctx.for_element(ext_base(i))));
    }

    fn reset(&mut self) {
        self.each(|_, e| e.nf.reset());
    }

    fn open_handles(&mut self) {
        self.each(|_, e| e.nf.open_handles());
    }

    fn alloc_reserve(&self) -> u32 {
        self.elements.iter().map(|e| e.nf.alloc_reserve()).sum()
    }

    fn tick_interval_ns(&self) -> Option<u64> {
        self.elements
            .iter()
            .filter_map(|e| e.nf.tick_interval_ns())
            .min()
    }

    fn tick(&mut self, ctx: &mut Context<'_>) {
        self.each(|i, e| {
            if e.nf.tick_interval_ns().is_some() {
                e.nf.tick(&mut ctx.for_element(ext_base(i)));
            }
        });
    }

    fn stop(&mut self, ctx: &mut Context<'_>) {
        self.each(|i, e| e.nf.stop(&mut ctx.for_element(ext_base(i))));
    }

    fn drop_reason_names(&self) -> Option<Vec<String>> {
        Some(
            self.elements
                .iter()
                .flat_map(|e| {
                    e.drop_reasons
                        .iter()
                        .map(move |r| format!("{}.{r}", e.name))
                })
                .collect(),
        )
    }

    fn counter_names(&self) -> Option<Vec<(usize, String)>> {
        Some(
            self.elements
                .iter()
                .enumerate()
                .flat_map(|(i, e)| {
                    e.counters
                        .iter()
                        .take(COUNTERS_PER_ELEMENT)
                        .enumerate()
                        .map(move |(j, c)| {
                            (NF_COUNTERS + ext_base(i) + j, format!("{}.{c}", e.name))
                        })
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::Harness;
    use crate::PortId;

    /// Sends UDP packets with an even source port to element `to`, others on.
    struct Split {
        to: u16,
    }
    impl NetworkFunction for Split {
        fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
            batch.for_each(|p| {
                if p.data().get(35).is_some_and(|b| b % 2 == 0) {
                    p.set_verdict(Verdict::ToNf(NfId(LOCAL_BASE + self.to)));
                }
            });
            ctx.count(0, batch.len() as u64);
        }
    }

    /// Writes `mark` into byte 42 and drops everything if `drop_all`.
    struct Mark {
        mark: u8,
        drop_all: bool,
    }
    impl NetworkFunction for Mark {
        fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
            batch.for_each(|p| {
                if let Some(b) = p.data_mut().get_mut(42) {
                    *b = self.mark;
                }
                if self.drop_all {
                    p.drop_with(DropReason::nf_local(1));
                }
            });
            ctx.count(1, batch.len() as u64);
        }
    }

    fn element(name: &str, nf: Box<dyn NetworkFunction>, next: Option<usize>) -> Element {
        Element {
            name: name.into(),
            nf,
            drop_reasons: vec!["a".into(), "b".into()],
            counters: vec!["seen".into(), "marked".into()],
            next,
        }
    }

    fn frame(src_port: u16) -> Vec<u8> {
        let mut f = vec![0u8; 60];
        f[12] = 0x08;
        f[34..36].copy_from_slice(&src_port.to_be_bytes());
        f
    }

    #[test]
    fn packets_follow_next_edges_and_named_detours() {
        // split --Next--> one --> (leaves); split --ToNf(two)--> two --> (leaves)
        let mut g = ElementGraph::new(
            vec![
                element("split", Box::new(Split { to: 2 }), Some(1)),
                element(
                    "one",
                    Box::new(Mark {
                        mark: 1,
                        drop_all: false,
                    }),
                    None,
                ),
                element(
                    "two",
                    Box::new(Mark {
                        mark: 2,
                        drop_all: false,
                    }),
                    None,
                ),
            ],
            0,
        );
        let mut h = Harness::new();
        let out = h.run(&mut g, &[frame(1), frame(2), frame(3), frame(4)]);
        let marks: Vec<u8> = out.iter().map(|o| o.frame[42]).collect();
        assert_eq!(out.len(), 4);
        assert!(out.iter().all(|o| o.verdict == Verdict::Next));
        let mut sorted = marks.clone();
        sorted.sort();
        assert_eq!(sorted, vec![1, 1, 2, 2]);
        // Counters are per element in the extended range.
        assert_eq!(h.ext_counter(0), 4, "split saw 4");
        assert_eq!(h.ext_counter(COUNTERS_PER_ELEMENT + 1), 2, "one marked 2");
        assert_eq!(
            h.ext_counter(2 * COUNTERS_PER_ELEMENT + 1),
            2,
            "two marked 2"
        );
        assert_eq!(
            g.counter_names().unwrap()[3],
            (
                NF_COUNTERS + COUNTERS_PER_ELEMENT + 1,
                "one.marked".to_string()
            )
        );
    }

    #[test]
    fn element_drop_reasons_are_renumbered_into_the_graph() {
        let mut g = ElementGraph::new(
            vec![
                element(
                    "first",
                    Box::new(Mark {
                        mark: 1,
                        drop_all: false,
                    }),
                    Some(1),
                ),
                element(
                    "second",
                    Box::new(Mark {
                        mark: 2,
                        drop_all: true,
                    }),
                    None,
                ),
            ],
            0,
        );
        let out = Harness::new().run(&mut g, &[frame(1)]);
        // second's reason 1 ("b") is the graph's reason 2 + 1 = 3.
        assert_eq!(out[0].verdict, Verdict::Drop(DropReason::nf_local(3)));
        assert_eq!(g.drop_reason_names().unwrap()[3], "second.b");
    }

    /// Sends every packet to element `to` (a cycle when it is itself).
    struct Bounce {
        to: u16,
    }
    impl NetworkFunction for Bounce {
        fn process(&mut self, batch: &mut Batch<'_>, _ctx: &mut Context<'_>) {
            batch.for_each(|p| p.set_verdict(Verdict::ToNf(NfId(LOCAL_BASE + self.to))));
        }
    }

    #[test]
    fn cycles_end_as_counted_loop_drops_and_bad_ids_as_invalid() {
        let mut g = ElementGraph::new(vec![element("b", Box::new(Bounce { to: 0 }), None)], 0);
        let out = Harness::new().run(&mut g, &[frame(1), frame(2)]);
        assert!(out
            .iter()
            .all(|o| o.verdict == Verdict::Drop(DropReason::LOOP_DETECTED)));
        let mut g = ElementGraph::new(vec![element("b", Box::new(Bounce { to: 7 }), None)], 0);
        let out = Harness::new().run(&mut g, &[frame(1)]);
        assert_eq!(out[0].verdict, Verdict::Drop(DropReason::INVALID_VERDICT));
    }

    /// Sends everything to port 1.
    struct ToPort1;
    impl NetworkFunction for ToPort1 {
        fn process(&mut self, batch: &mut Batch<'_>, _ctx: &mut Context<'_>) {
            batch.for_each(|p| p.set_verdict(Verdict::ToPort(PortId(1))));
        }
    }

    #[test]
    fn port_verdicts_leave_the_graph_at_once() {
        let mut g = ElementGraph::new(
            vec![
                element("out", Box::new(ToPort1), Some(1)),
                element(
                    "never",
                    Box::new(Mark {
                        mark: 9,
                        drop_all: true,
                    }),
                    None,
                ),
            ],
            0,
        );
        let out = Harness::new().run(&mut g, &[frame(1)]);
        assert_eq!(out[0].verdict, Verdict::ToPort(PortId(1)));
        assert_ne!(out[0].frame[42], 9);
    }
}
