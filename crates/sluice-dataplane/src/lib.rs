//! sluice-dataplane
