//! sluice-ports
