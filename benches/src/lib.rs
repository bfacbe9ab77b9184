//! Benchmarks and the comparison harness.
