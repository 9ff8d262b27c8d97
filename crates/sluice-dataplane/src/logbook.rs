//! The last lines each NF wrote, and what the platform said about it
//! (started, crashed, restarting), for `sluice logs NF [-f]`.
//!
//! Workers append off the packet path (host events arrive in their
//! millisecond maintenance); readers ask for the lines after a sequence
//! number, which is how `-f` follows. Each NF keeps at most
//! [`LINES_PER_NF`] lines: a chatty NF costs bounded memory.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use serde::Serialize;

/// Lines kept per NF.
pub const LINES_PER_NF: usize = 1000;

/// One line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct LogLine {
    /// Increases by one per line, across all NFs.
    pub seq: u64,
    /// Wall-clock time, milliseconds since the Unix epoch.
    pub time_ms: u64,
    /// The worker whose instance it concerns.
    pub worker: u32,
    /// The NF it concerns: the NF asked for, or one of its replicas
    /// (`NAME.k`).
    pub nf: String,
    /// `nf` for what the NF wrote, `platform` for what the platform says.
    #[schema(value_type = String)]
    pub source: &'static str,
    /// The text.
    pub line: String,
}

#[derive(Default)]
struct Inner {
    seq: u64,
    per_nf: HashMap<String, VecDeque<LogLine>>,
}

/// Lines by NF name.
#[derive(Default)]
pub struct LogBook {
    inner: Mutex<Inner>,
}

impl LogBook {
    /// Appends a line for NF `nf`.
    pub fn push(&self, nf: &str, worker: u32, source: &'static str, line: String) {
        let Ok(mut g) = self.inner.lock() else { return };
        g.seq += 1;
        let seq = g.seq;
        let time_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let q = g.per_nf.entry(nf.to_string()).or_default();
        if q.len() == LINES_PER_NF {
            q.pop_front();
        }
        q.push_back(LogLine {
            seq,
            time_ms,
            worker,
            nf: nf.to_string(),
            source,
            line,
        });
    }

    /// NF `nf`'s lines with a sequence number above `after`, oldest first,
    /// with those of its replicas (`nf.1`, `nf.2`, …) among them.
    pub fn since(&self, nf: &str, after: u64) -> Vec<LogLine> {
        let Ok(g) = self.inner.lock() else {
            return Vec::new();
        };
        let mut lines: Vec<LogLine> = g
            .per_nf
            .iter()
            .filter(|(name, _)| *name == nf || crate::naming::instance_of(name).nf == nf)
            .flat_map(|(_, q)| q.iter().filter(|l| l.seq > after).cloned())
            .collect();
        lines.sort_by_key(|l| l.seq);
        lines
    }

    /// Forgets NF `nf` (it was removed).
    pub fn forget(&self, nf: &str) {
        if let Ok(mut g) = self.inner.lock() {
            g.per_nf.remove(nf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_nf_s_lines_include_its_replicas_in_order() {
        let b = LogBook::default();
        b.push("m", 0, "platform", "started".into());
        b.push("m.1", 0, "platform", "started".into());
        b.push("mx", 0, "nf", "another NF".into());
        b.push("m", 0, "nf", "hello".into());
        let lines = b.since("m", 0);
        let got: Vec<(&str, &str)> = lines
            .iter()
            .map(|l| (l.nf.as_str(), l.line.as_str()))
            .collect();
        assert_eq!(got, [("m", "started"), ("m.1", "started"), ("m", "hello")]);
        assert_eq!(
            b.since("m.1", 0).len(),
            1,
            "a replica alone, by its own name"
        );
    }

    #[test]
    fn lines_follow_by_sequence_and_old_ones_fall_off() {
        let b = LogBook::default();
        for i in 0..LINES_PER_NF + 5 {
            b.push("a", 0, "nf", format!("line {i}"));
        }
        b.push("b", 1, "platform", "hello".into());
        let a = b.since("a", 0);
        assert_eq!(a.len(), LINES_PER_NF);
        assert_eq!(a[0].line, "line 5");
        let last = a.last().unwrap().seq;
        assert!(b.since("a", last).is_empty());
        assert_eq!(b.since("b", last)[0].line, "hello");
        b.forget("b");
        assert!(b.since("b", 0).is_empty());
    }
}
