//! One packet through the IDS: headers, flow state, stream carry-over,
//! rule evaluation and actions. Independent of the NF SDK so that tests,
//! benchmarks and fuzz targets can drive it directly.

use sluice_packet::{parse, FlowKey, IpProtocol, ParseError};

use super::alert_log::{json_escape, AlertLog, AlertRecord, RuleMeta};
use super::matcher::{MatchedBy, Matcher, PacketFacts};
use super::rule::Action;
use super::stream::{StreamTable, TcpSeg};

/// What to do with a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Let it through (it may have raised alerts).
    Forward,
    /// Drop it: a `drop` rule matched in IPS mode.
    Drop,
    /// Drop it: it does not parse.
    Malformed(ParseError),
}

/// Counts since the last [`Engine::take_stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// IP packets whose rules were evaluated.
    pub packets_inspected: u64,
    /// Transport payload bytes of those packets.
    pub bytes_inspected: u64,
    /// Alerts raised (`alert` and `drop` rules that matched).
    pub alerts: u64,
    /// Packets dropped by `drop` rules (IPS mode).
    pub drops: u64,
    /// Rules that matched only across a segment boundary.
    pub stream_reassembled_matches: u64,
    /// Out-of-order segments, gaps and retransmissions (carry-over reset).
    pub stream_gaps: u64,
    /// `pass` rules that stopped evaluation.
    pub passes: u64,
    /// Alerts the log could not take (buffer full or size bound).
    pub alert_log_dropped: u64,
}

/// The inspection engine.
#[derive(Debug)]
pub struct Engine {
    matcher: Matcher,
    stream: StreamTable,
    track_streams: bool,
    ips: bool,
    meta: Vec<RuleMeta>,
    actions: Vec<Action>,
    log: AlertLog,
    stats: Stats,
    /// Matches per rule since the last [`Engine::take_rule_hits`]: counts
    /// and the indices touched (both sized at build time).
    hits: Vec<u64>,
    touched: Vec<u32>,
}

/// Engine settings besides the rules.
#[derive(Debug)]
pub struct EngineConfig {
    /// Drop rules drop (IPS) instead of only alerting (IDS).
    pub ips: bool,
    /// Carry TCP segment tails over for cross-segment matches.
    pub stream: bool,
    /// Flow ids are below this.
    pub flow_capacity: u32,
    /// The alert log.
    pub log: AlertLog,
}

impl Engine {
    /// Opens the alert log now (before a sandbox closes).
    pub fn open_log(&mut self) {
        self.log.open();
    }

    /// Builds the engine around a compiled rule set.
    pub fn new(matcher: Matcher, cfg: EngineConfig) -> Engine {
        let tail = if cfg.stream {
            matcher.max_content_len().saturating_sub(1)
        } else {
            0
        };
        let meta = (0..matcher.len())
            .map(|i| {
                let r = matcher.rule(i);
                RuleMeta {
                    sid: r.sid,
                    rev: r.rev,
                    msg_json: json_escape(&r.msg),
                    classtype_json: json_escape(r.classtype.as_deref().unwrap_or("")),
                    action: r.action.name(),
                }
            })
            .collect();
        let n = matcher.len();
        Engine {
            stream: StreamTable::new(cfg.flow_capacity, tail),
            track_streams: cfg.stream,
            ips: cfg.ips,
            actions: (0..n).map(|i| matcher.rule(i).action).collect(),
            meta,
            log: cfg.log,
            stats: Stats::default(),
            hits: vec![0; n],
            touched: Vec::with_capacity(n),
            matcher,
        }
    }

    /// The compiled rules.
    pub fn matcher(&self) -> &Matcher {
        &self.matcher
    }

    /// Inspects one frame of flow `flow_id` (u32::MAX: none).
    pub fn inspect(&mut self, frame: &[u8], flow_id: u32, ts_ns: u64) -> Decision {
        let h = match parse(frame) {
            Ok(h) => h,
            Err(e) => return Decision::Malformed(e),
        };
        if h.ip_version == 0 {
            return Decision::Forward; // ARP and other non-IP frames
        }
        let Ok(key) = FlowKey::from_headers(frame, &h) else {
            return Decision::Forward;
        };
        let start = usize::from(h.payload_offset);
        let payload = frame
            .get(start..start + usize::from(h.payload_len))
            .unwrap_or(&[]);
        self.stats.packets_inspected += 1;
        self.stats.bytes_inspected += payload.len() as u64;

        let dir = usize::from(!key.is_canonical());
        let tcp = (h.l4_protocol == IpProtocol::TCP && h.has_l4_header()).then(|| {
            let l4 = usize::from(h.l4_offset);
            let b = |i: usize| frame.get(l4 + i).copied().unwrap_or(0);
            TcpSeg {
                seq: u32::from_be_bytes([b(4), b(5), b(6), b(7)]),
                flags: b(13),
            }
        });
        let flow = self.stream.observe(flow_id, dir, tcp);
        let (carry_len, seg) = match tcp {
            Some(seg) if self.track_streams => {
                let s = self.stream.begin(flow_id, dir, seg, payload.len());
                if s.gap {
                    self.stats.stream_gaps += 1;
                }
                (s.carry_len, Some(seg))
            }
            _ => (0, None),
        };
        let facts = PacketFacts {
            proto: key.proto,
            src: key.src_ip(),
            src_port: key.src_port,
            dst: key.dst_ip(),
            dst_port: key.dst_port,
            to_server: flow.to_server,
            established: flow.established,
        };
        let carry = self.stream.tail(flow_id, dir, carry_len);
        let mut decision = Decision::Forward;
        let Engine {
            matcher,
            ips,
            actions,
            stats,
            log,
            hits,
            touched,
            ..
        } = self;
        matcher.evaluate(&facts, payload, carry, |i, how| {
            let action = actions[i];
            if action == Action::Pass {
                stats.passes += 1;
                return false;
            }
            stats.alerts += 1;
            if how == MatchedBy::Stream {
                stats.stream_reassembled_matches += 1;
            }
            if hits[i] == 0 {
                touched.push(i as u32);
            }
            hits[i] += 1;
            let dropped = action == Action::Drop && *ips;
            log.record(AlertRecord {
                ts_ns,
                rule: i as u32,
                dropped,
                stream: how == MatchedBy::Stream,
                proto: facts.proto,
                src: facts.src,
                src_port: facts.src_port,
                dst: facts.dst,
                dst_port: facts.dst_port,
            });
            if dropped {
                stats.drops += 1;
                decision = Decision::Drop;
                return false;
            }
            true
        });
        if let Some(seg) = seg {
            self.stream.finish(flow_id, dir, seg, carry_len, payload);
        }
        decision
    }
}

impl Engine {
    /// Takes the counts accumulated since the last call (the alert log's
    /// losses included).
    pub fn take_stats(&mut self) -> Stats {
        let mut s = std::mem::take(&mut self.stats);
        s.alert_log_dropped = self.log.take_dropped();
        s
    }

    /// Calls `f(rule index, matches)` for every rule that matched since
    /// the last call, and resets those counts.
    pub fn take_rule_hits(&mut self, mut f: impl FnMut(usize, u64)) {
        for &i in &self.touched {
            let i = i as usize;
            f(i, std::mem::take(&mut self.hits[i]));
        }
        self.touched.clear();
    }

    /// Whether the alert log should be flushed now (end of a batch).
    pub fn log_flush_due(&mut self, now_ns: u64) -> bool {
        self.log.flush_due(now_ns)
    }

    /// Writes the buffered alerts.
    pub fn flush_log(&mut self, now_ns: u64) {
        self.log.flush(&self.meta, now_ns);
    }

    /// Forgets the state of flow `flow_id`.
    pub fn flow_end(&mut self, flow_id: u32) {
        self.stream.end(flow_id);
    }

    /// Back to the just-built state (buffered alerts are written first).
    pub fn reset(&mut self, now_ns: u64) {
        self.flush_log(now_ns);
        self.stream.clear();
        self.stats = Stats::default();
        self.take_rule_hits(|_, _| {});
    }
}
