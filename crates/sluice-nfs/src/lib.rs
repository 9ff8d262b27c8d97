//! sluice-nfs
