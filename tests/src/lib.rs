//! Cross-crate end-to-end tests live in `tests/tests/`.
//!
//! The library holds what both the tests and the fuzz targets in `fuzz/` run:
//! [`decoders`], the checks each fuzz target makes of one decoder.

pub mod decoders;
