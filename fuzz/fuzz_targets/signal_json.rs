//! `Signal::from_json_slice` on arbitrary bytes: never panics; whatever
//! parses round-trips through the JSON format.
#![no_main]

use jido::signal::Signal;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(signal) = Signal::from_json_slice(data) {
        let again = Signal::from_json_slice(&signal.to_json_vec())
            .expect("a parsed signal must parse again from its own JSON");
        assert_eq!(again.ty(), signal.ty());
        assert_eq!(again.id(), signal.id());
        assert_eq!(again.data(), signal.data());
    }
});
