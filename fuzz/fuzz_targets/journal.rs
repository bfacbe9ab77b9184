//! Fuzz target `journal`: see `cairn_tests::decoders::journal` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cairn_tests::decoders::journal(data));
