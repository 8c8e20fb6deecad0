//! Route pattern parsing and routing: the first line of the input is a
//! list of patterns (separated by spaces), the rest signal types (one per
//! line). Never panics; `Router::add` accepts a pattern exactly when
//! `validate_path` accepts it trimmed, and a route found by the router matches by `matches`.
#![no_main]

use jido::signal::Signal;
use jido::signal::router::{Router, matches, validate_path};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut lines = text.split('\n');
    let patterns: Vec<&str> = lines.next().unwrap_or("").split(' ').take(16).collect();
    let mut router: Router<usize> = Router::new();
    for (i, p) in patterns.iter().enumerate() {
        // Routes trim surrounding whitespace from their path.
        let added = router.add(*p, i).is_ok();
        assert_eq!(
            added,
            validate_path(p.trim()).is_ok(),
            "add vs validate_path for {p:?}"
        );
    }
    for ty in lines.take(16) {
        let signal = Signal::new(ty, serde_json::Value::Null);
        if let Ok(found) = router.route(&signal) {
            for i in found {
                assert!(
                    matches(patterns[*i].trim(), ty),
                    "{:?} routed to {ty:?}",
                    patterns[*i]
                );
            }
        }
    }
});
