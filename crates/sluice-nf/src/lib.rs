//! sluice-nf
