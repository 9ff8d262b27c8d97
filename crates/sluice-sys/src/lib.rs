//! sluice-sys
