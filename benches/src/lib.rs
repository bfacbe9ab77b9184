//! Benchmarks and the comparison harness.
//!
//! - [`gen`]: a deterministic generator of source-like trees, and deterministic edits.
//! - `src/bin/gen_tree.rs`: writes a generated tree to a directory.
//!
//! `docs/PERFORMANCE.md` says how to run them and what they measured.

#![forbid(unsafe_code)]

pub mod cli;
pub mod gen;
pub mod rng;
pub mod text;
