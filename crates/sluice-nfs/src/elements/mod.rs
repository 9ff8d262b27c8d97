//! Small Click-style element NFs, one file each, and the filter language
//! the classifier uses.

pub mod classifier;
pub mod filter;
