//! How log lines look on stderr: `sluice: <message>`, or for a line an NF
//! process wrote, `sluice: nf <name>: <line>` (the `nf` field of events
//! with target `sluice::nf`). Warnings and errors keep that shape: the
//! message says what happened, and scripts grep for it.

use std::fmt;

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The plain `sluice: …` format.
pub struct Plain;

#[derive(Default)]
struct Fields {
    message: String,
    nf: Option<String>,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "nf" => self.nf = Some(format!("{value:?}")),
            _ => {}
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.message = value.to_string(),
            "nf" => self.nf = Some(value.to_string()),
            _ => {}
        }
    }
}

impl<S, N> FormatEvent<S, N> for Plain
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut f = Fields::default();
        event.record(&mut f);
        match f.nf {
            Some(nf) => writeln!(writer, "sluice: nf {nf}: {}", f.message),
            None => writeln!(writer, "sluice: {}", f.message),
        }
    }
}
