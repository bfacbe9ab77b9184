//! Fuzz target `stat_cache`: see `cairn_tests::decoders::stat_cache` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cairn_tests::decoders::stat_cache(data));
