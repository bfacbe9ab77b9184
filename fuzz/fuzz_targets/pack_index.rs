//! Fuzz target `pack_index`: see `cairn_tests::decoders::pack_index` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cairn_tests::decoders::pack_index(data));
