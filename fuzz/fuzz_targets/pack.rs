//! Fuzz target `pack`: see `cairn_tests::decoders::pack` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cairn_tests::decoders::pack(data));
