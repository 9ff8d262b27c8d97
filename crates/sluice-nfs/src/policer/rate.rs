//! Rates and sizes written the way tc(8) writes them.
//!
//! A config number is taken literally (bytes per second for a rate, bytes
//! for a size: the units of RFC 2697/2698); a string carries a tc unit.
//! Rates: `bit`, `kbit`, `mbit`, `gbit`, `tbit` (powers of 1000 bits per
//! second) and `bps`, `kbps`, `mbps`, `gbps`, `tbps` (powers of 1000 *bytes*
//! per second, as tc reads them). Sizes: `b`, `k`/`kb`, `m`/`mb`, `g`/`gb`
//! (powers of 1024 bytes, as tc), and `kbit`, `mbit`, `gbit` (1024-based
//! bits). Fractions are allowed (`1.5mbit`); the result is rounded down to
//! whole bytes and must not be zero.

/// Largest rate accepted: 10 Tbit/s (keeps token arithmetic in range).
pub const MAX_RATE_BYTES: u64 = 1_250_000_000_000;
/// Largest bucket accepted: 16 GiB (scaled by 10⁹ it still fits a u64).
pub const MAX_SIZE_BYTES: u64 = 16 << 30;

fn split(s: &str) -> Result<(f64, String), String> {
    let s = s.trim();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(end);
    if num.is_empty() {
        return Err(format!("`{s}` does not start with a number"));
    }
    let v: f64 = num
        .parse()
        .map_err(|_| format!("`{num}` is not a number"))?;
    Ok((v, unit.trim().to_ascii_lowercase()))
}

fn finish(v: f64, max: u64, what: &str, text: &str) -> Result<u64, String> {
    if !v.is_finite() || v < 1.0 {
        return Err(format!("{what} `{text}` is less than one byte"));
    }
    if v > max as f64 {
        return Err(format!(
            "{what} `{text}` is above the maximum of {max} bytes"
        ));
    }
    Ok(v as u64)
}

/// Parses a rate; returns bytes per second.
pub fn parse_rate(text: &str) -> Result<u64, String> {
    let (v, unit) = split(text)?;
    let bits = |m: f64| v * m / 8.0;
    let bytes = match unit.as_str() {
        "bit" => bits(1.0),
        "kbit" => bits(1e3),
        "mbit" => bits(1e6),
        "gbit" => bits(1e9),
        "tbit" => bits(1e12),
        "bps" | "" => v,
        "kbps" => v * 1e3,
        "mbps" => v * 1e6,
        "gbps" => v * 1e9,
        "tbps" => v * 1e12,
        _ => {
            return Err(format!(
                "unknown rate unit `{unit}` in `{text}` (bit, kbit, mbit, gbit, tbit, bps, kbps, mbps, gbps, tbps)"
            ))
        }
    };
    finish(bytes, MAX_RATE_BYTES, "rate", text)
}

/// Parses a size; returns bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let (v, unit) = split(text)?;
    let bytes = match unit.as_str() {
        "" | "b" => v,
        "k" | "kb" => v * 1024.0,
        "m" | "mb" => v * 1024.0 * 1024.0,
        "g" | "gb" => v * 1024.0 * 1024.0 * 1024.0,
        "kbit" => v * 1024.0 / 8.0,
        "mbit" => v * 1024.0 * 1024.0 / 8.0,
        "gbit" => v * 1024.0 * 1024.0 * 1024.0 / 8.0,
        _ => {
            return Err(format!(
                "unknown size unit `{unit}` in `{text}` (b, k/kb, m/mb, g/gb, kbit, mbit, gbit)"
            ))
        }
    };
    finish(bytes, MAX_SIZE_BYTES, "size", text)
}

/// A rate or size as written in a config: a plain number or a string with
/// a unit.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(untagged)]
pub enum Quantity {
    /// Bytes (per second, for a rate).
    Num(u64),
    /// A number with a tc unit.
    Text(String),
}

impl Quantity {
    /// As a rate in bytes per second.
    pub fn rate(&self) -> Result<u64, String> {
        match self {
            Quantity::Num(n) => finish(*n as f64, MAX_RATE_BYTES, "rate", &n.to_string()),
            Quantity::Text(s) => parse_rate(s),
        }
    }

    /// As a size in bytes.
    pub fn size(&self) -> Result<u64, String> {
        match self {
            Quantity::Num(n) => finish(*n as f64, MAX_SIZE_BYTES, "size", &n.to_string()),
            Quantity::Text(s) => parse_size(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tc_units() {
        assert_eq!(parse_rate("8bit"), Ok(1));
        assert_eq!(parse_rate("10mbit"), Ok(1_250_000));
        assert_eq!(parse_rate("1.5gbit"), Ok(187_500_000));
        assert_eq!(parse_rate("2kbps"), Ok(2000));
        assert_eq!(parse_rate("125000"), Ok(125_000));
        assert_eq!(parse_size("1500"), Ok(1500));
        assert_eq!(parse_size("10kb"), Ok(10_240));
        assert_eq!(parse_size("1m"), Ok(1 << 20));
        assert_eq!(parse_size("8kbit"), Ok(1024));
    }

    #[test]
    fn rejects_nonsense() {
        for s in [
            "", "mbit", "1x", "0", "0.1bit", "-5", "1e3", "99tbit", "1.2.3kb",
        ] {
            assert!(parse_rate(s).is_err(), "{s}");
        }
        assert!(parse_size("17g").is_err());
        assert!(Quantity::Num(0).size().is_err());
    }
}
