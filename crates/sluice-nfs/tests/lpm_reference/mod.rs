//! The reference longest-prefix match the LPM property tests compare
//! against: scan every route, the longest matching prefix wins, the later
//! of equal prefixes wins (`ip route replace`).
#![allow(dead_code)] // each test binary uses part of it

pub fn mask4(a: u32, len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        a & (u32::MAX << (32 - len))
    }
}

pub fn mask6(a: u128, len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        a & (u128::MAX << (128 - len as u32))
    }
}

/// Longest match by scanning every route; the later of equal prefixes wins.
pub fn naive4(routes: &[(u32, u8, u32)], a: u32) -> u32 {
    let mut best: Option<(u8, u32)> = None;
    for &(p, l, v) in routes {
        if mask4(a, l) == mask4(p, l) && best.is_none_or(|(bl, _)| l >= bl) {
            best = Some((l, v));
        }
    }
    best.map_or(0, |b| b.1)
}

pub fn naive6(routes: &[(u128, u8, u32)], a: u128) -> u32 {
    let mut best: Option<(u8, u32)> = None;
    for &(p, l, v) in routes {
        if mask6(a, l) == mask6(p, l) && best.is_none_or(|(bl, _)| l >= bl) {
            best = Some((l, v));
        }
    }
    best.map_or(0, |b| b.1)
}
