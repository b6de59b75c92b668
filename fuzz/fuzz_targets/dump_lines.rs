#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| evenkeel_cli::fuzz::lines(data));
