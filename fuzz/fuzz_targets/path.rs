//! Fuzz target `path`: see `cairn_tests::decoders::path` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cairn_tests::decoders::path(data));
