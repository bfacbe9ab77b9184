//! Fuzz target `manifest`: see `cairn_tests::decoders::manifest` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cairn_tests::decoders::manifest(data));
