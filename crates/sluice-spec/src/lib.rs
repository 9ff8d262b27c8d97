//! sluice-spec
