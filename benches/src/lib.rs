//! Benchmarks and the comparison harness.
//!
//! - [`gen`]: a deterministic generator of source-like trees, and deterministic edits.
//! - [`ingest`]: stores a directory in a [`cairn_store::Store`] the simplest way, to measure
//!   the store (not a substitute for `cairn-snapshot`).
//! - `benches/store_put.rs`: criterion benches of the store's writer.
//! - `src/bin/store_size.rs`: the store's size on disk for a generated tree, raw and compressed.
//! - `src/bin/compare.rs`: the comparison harness against `git status`, shadow git and `tar`.
//!
//! `docs/PERFORMANCE.md` says how to run them and what they measured.

#![forbid(unsafe_code)]

pub mod cli;
pub mod gen;
pub mod ingest;
pub mod rng;
pub mod text;
