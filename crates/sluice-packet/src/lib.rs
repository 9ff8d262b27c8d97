//! sluice-packet
