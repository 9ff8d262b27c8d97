//! Validated command-line values. Every number a subcommand takes is
//! checked while clap parses the command line, so a bad value is a usage
//! error (exit 2) naming the flag and the allowed range, never a panic once
//! the command is under way (`Duration::from_secs_f64` panics on negative,
//! NaN, infinite and too large values) nor a spec error about a spec the
//! user never wrote.
//!
//! The integer ranges repeat the spec's limits (`docs/spec-reference.md`)
//! for the settings and generator keys the benchmarks fill in from flags.

use std::time::Duration;

/// A positive, finite number of seconds (`5`, `0.5`, `1e3`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Seconds(Duration);

impl Seconds {
    /// As a `Duration`.
    pub fn duration(self) -> Duration {
        self.0
    }

    /// In seconds.
    pub fn as_secs_f64(self) -> f64 {
        self.0.as_secs_f64()
    }
}

/// The longest `sluice run --duration`: a year.
pub const RUN_MAX_S: f64 = 31_536_000.0;
/// The longest `sluice bench chain|nfs|wire --duration`: a day.
pub const BENCH_MAX_S: f64 = 86_400.0;
/// The longest `sluice bench jitter --duration`: an hour of every CPU spinning.
pub const JITTER_MAX_S: f64 = 3_600.0;

fn seconds(text: &str, max: f64) -> Result<Seconds, String> {
    let allowed = format!("give a number of seconds greater than 0 and at most {max}");
    let v: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("not a number; {allowed} (e.g. 5 or 0.5)"))?;
    if !v.is_finite() || v <= 0.0 || v > max {
        return Err(allowed);
    }
    // Cannot panic: 0 < v <= max, far below Duration's ceiling.
    Ok(Seconds(Duration::from_secs_f64(v)))
}

/// Parses `sluice run --duration`.
pub fn run_seconds(text: &str) -> Result<Seconds, String> {
    seconds(text, RUN_MAX_S)
}

/// Parses the `--duration` of `bench chain`, `nfs` and `wire`.
pub fn bench_seconds(text: &str) -> Result<Seconds, String> {
    seconds(text, BENCH_MAX_S)
}

/// Parses `bench jitter --duration`.
pub fn jitter_seconds(text: &str) -> Result<Seconds, String> {
    seconds(text, JITTER_MAX_S)
}

/// The longest `sluice soak --minutes`: a day.
pub const SOAK_MAX_MIN: f64 = 1_440.0;

/// Parses `sluice soak --minutes` (the value, in a [`Seconds`], counts
/// minutes).
pub fn minutes(text: &str) -> Result<Seconds, String> {
    seconds(text, SOAK_MAX_MIN).map_err(|e| e.replace("seconds", "minutes"))
}

/// Most NFs in `bench chain --length` (each is an NF slot in the arena and,
/// with process isolation, a process).
pub const MAX_CHAIN_LENGTH: i64 = 1024;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_accept_positive_finite_values_up_to_the_ceiling() {
        assert_eq!(run_seconds("5").unwrap().as_secs_f64(), 5.0);
        assert_eq!(run_seconds(" 0.25 ").unwrap().as_secs_f64(), 0.25);
        assert_eq!(run_seconds("1e3").unwrap().as_secs_f64(), 1000.0);
        assert_eq!(
            jitter_seconds("3600").unwrap().duration(),
            Duration::from_secs(3600)
        );
        // Shorter than a nanosecond is a zero-length run, not an error.
        assert_eq!(run_seconds("1e-300").unwrap().duration(), Duration::ZERO);
    }

    #[test]
    fn seconds_refuse_everything_else_with_the_allowed_range() {
        for bad in [
            "-1",
            "0",
            "-0",
            "nan",
            "NaN",
            "inf",
            "-inf",
            "infinity",
            "1e300",
            "31536001",
            "18446744073709551616",
            "",
            "5s",
            "0x10",
        ] {
            let e = run_seconds(bad).unwrap_err();
            assert!(
                e.contains("greater than 0 and at most 31536000"),
                "{bad}: {e}"
            );
        }
        assert!(bench_seconds("86401").is_err());
        assert!(jitter_seconds("3601").is_err());
    }
}
