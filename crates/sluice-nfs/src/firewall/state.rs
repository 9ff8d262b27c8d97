//! The firewall's checkpoint (state version 1): its tracked connections
//! (`conntrack::state`, with their TCP window tracking) and its per-rule
//! hit counts. Rules, zones and the conntrack policy are config: a
//! checkpoint restores into a firewall built from the same config, and
//! one whose rule count differs refuses it. Datagrams in reassembly are
//! left out: their fragments are resent or time out as in any restart.

use sluice_nf::{StateError, StateReader, StateWriter};

use super::Firewall;

/// The layout this module writes (the tracker's own and the rule hits).
pub const STATE_VERSION: u16 = 1;

// The tracker's layout is part of ours: bump ours with it.
const _: () = assert!(crate::conntrack::state::STATE_VERSION == 1);

impl Firewall {
    /// Writes the connections, then the rule hits.
    pub(super) fn write_state(&self, out: &mut StateWriter) {
        self.ct.write_state(out);
        out.len(self.rule_hits.len());
        for &h in &self.rule_hits {
            out.u64(h);
        }
    }

    /// Reads a state whole, then replaces the connections and rule hits.
    pub(super) fn read_state(&mut self, state: &[u8]) -> Result<(), StateError> {
        let mut r = StateReader::new(state);
        let restored = self.ct.read_state(&mut r)?;
        let at = r.position();
        let n = r.len(8)?;
        if n != self.rule_hits.len() {
            return Err(r.invalid_at(
                at,
                format!(
                    "hits for {n} rules; this firewall has {} (another config)",
                    self.rule_hits.len()
                ),
            ));
        }
        let hits = (0..n).map(|_| r.u64()).collect::<Result<Vec<_>, _>>()?;
        r.finish()?;
        self.ct.install_state(restored);
        self.rule_hits = hits;
        Ok(())
    }
}
