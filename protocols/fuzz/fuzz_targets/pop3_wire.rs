#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    meshmail_protocols::pop3::wire::fuzz(data);
});
