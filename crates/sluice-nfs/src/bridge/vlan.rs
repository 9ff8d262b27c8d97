//! Pushing, popping and rewriting 802.1Q tags in place.

use sluice_mem::Pkt;

/// Makes the frame in `pkt` carry `want` as its outer 802.1Q tag (`Some`)
/// or no tag (`None`), given whether it has one now. Pushing uses the
/// buffer's headroom; the 12 MAC bytes move by 4. Returns false (frame
/// unchanged) only if the headroom or the frame is too short.
pub fn retag(pkt: &mut Pkt<'_>, has_tag: bool, want: Option<u16>) -> bool {
    match (has_tag, want) {
        (false, None) => true,
        (true, Some(tci)) => match pkt.data_mut().get_mut(14..16) {
            Some(t) => {
                t.copy_from_slice(&tci.to_be_bytes());
                true
            }
            None => false,
        },
        (true, None) => {
            let d = pkt.data_mut();
            if d.len() < 18 {
                return false;
            }
            d.copy_within(0..12, 4);
            pkt.pull_front(4).is_some()
        }
        (false, Some(tci)) => {
            if pkt.data().len() < 14 || pkt.push_front(4).is_none() {
                return false;
            }
            let d = pkt.data_mut();
            d.copy_within(4..16, 0);
            d[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
            d[14..16].copy_from_slice(&tci.to_be_bytes());
            true
        }
    }
}
