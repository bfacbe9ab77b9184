//! Fuzz target `tree`: see `cairn_tests::decoders::tree` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cairn_tests::decoders::tree(data));
