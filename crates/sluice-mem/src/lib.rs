//! sluice-mem
