//! Panic-free big-endian field access helpers shared by the header views.
//!
//! Reads outside the buffer return zero and writes outside the buffer are
//! ignored.  Views only use these at offsets that `new_checked` has
//! validated, so the fallback is never hit for well-behaved buffers; it only
//! exists so that no input (or inconsistent setter use) can cause a panic.

#[inline(always)]
pub(crate) fn u8_at(b: &[u8], off: usize) -> u8 {
    match b.get(off) {
        Some(v) => *v,
        None => 0,
    }
}

#[inline(always)]
pub(crate) fn u16_at(b: &[u8], off: usize) -> u16 {
    match b.get(off..off.saturating_add(2)) {
        Some(&[x, y]) => u16::from_be_bytes([x, y]),
        _ => 0,
    }
}

#[inline(always)]
pub(crate) fn u32_at(b: &[u8], off: usize) -> u32 {
    match b.get(off..off.saturating_add(4)) {
        Some(&[a, b2, c, d]) => u32::from_be_bytes([a, b2, c, d]),
        _ => 0,
    }
}

#[inline(always)]
pub(crate) fn array_at<const N: usize>(b: &[u8], off: usize) -> [u8; N] {
    let mut out = [0u8; N];
    if let Some(s) = b.get(off..off.saturating_add(N)) {
        out.copy_from_slice(s);
    }
    out
}

/// `&b[start..end]` with both bounds clamped to the buffer (never panics).
#[inline(always)]
pub(crate) fn slice(b: &[u8], start: usize, end: usize) -> &[u8] {
    let end = end.min(b.len());
    let start = start.min(end);
    match b.get(start..end) {
        Some(s) => s,
        None => &[],
    }
}

/// Mutable counterpart of [`slice`].
#[inline(always)]
pub(crate) fn slice_mut(b: &mut [u8], start: usize, end: usize) -> &mut [u8] {
    let end = end.min(b.len());
    let start = start.min(end);
    match b.get_mut(start..end) {
        Some(s) => s,
        None => &mut [],
    }
}

#[inline(always)]
pub(crate) fn set_u8(b: &mut [u8], off: usize, v: u8) {
    if let Some(x) = b.get_mut(off) {
        *x = v;
    }
}

#[inline(always)]
pub(crate) fn set_u16(b: &mut [u8], off: usize, v: u16) {
    set_bytes(b, off, &v.to_be_bytes());
}

#[inline(always)]
pub(crate) fn set_u32(b: &mut [u8], off: usize, v: u32) {
    set_bytes(b, off, &v.to_be_bytes());
}

#[inline(always)]
pub(crate) fn set_bytes(b: &mut [u8], off: usize, v: &[u8]) {
    if let Some(s) = b.get_mut(off..off.saturating_add(v.len())) {
        s.copy_from_slice(v);
    }
}
