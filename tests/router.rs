//! The signal router: path rules, wildcards, ordering, management and
//! property tests against a reference matcher.

use std::collections::BTreeSet;

use jido::ErrorKind;
use jido::signal::router::{MAX_PRIORITY, MIN_PRIORITY, matches, validate_path};
use jido::signal::{Route, Router, Signal};
use proptest::prelude::*;
use serde_json::{Value, json};

fn sig(ty: &str) -> Signal {
    Signal::new(ty, Value::Null)
}

fn routed<T: Clone>(router: &Router<T>, ty: &str) -> Vec<T> {
    router
        .route(&sig(ty))
        .map(|ts| ts.into_iter().cloned().collect())
        .unwrap_or_default()
}

// ---------------------------------------------------------------- paths

#[test]
fn invalid_paths_name_the_rule_broken() {
    let cases = [
        (
            "user..created",
            "consecutive_dots",
            "path cannot contain consecutive dots",
        ),
        (
            "user.**.**",
            "multiple_wildcards",
            "path cannot contain multiple wildcards",
        ),
        (
            "**.**.x",
            "multiple_wildcards",
            "path cannot contain multiple wildcards",
        ),
        (
            "user.crea*ted",
            "wildcard_in_segment",
            "path cannot contain '*' within a segment",
        ),
        (
            "user.***",
            "wildcard_in_segment",
            "path cannot contain '*' within a segment",
        ),
        (
            "user@123",
            "invalid_characters",
            "path contains invalid characters",
        ),
        (
            "user.cré",
            "invalid_characters",
            "path contains invalid characters",
        ),
        (
            "user created",
            "invalid_characters",
            "path contains invalid characters",
        ),
        ("", "empty", "path cannot be empty"),
        ("   ", "empty", "path cannot be empty"),
        (".user", "edge_dot", "path cannot start or end with a dot"),
        ("user.", "edge_dot", "path cannot start or end with a dot"),
    ];
    for (path, rule, message) in cases {
        let mut router = Router::new();
        let err = router.add(path, 1).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Configuration, "{path}");
        assert_eq!(err.message(), message, "{path}");
        assert_eq!(err.detail("rule"), Some(&json!(rule)), "{path}");
        assert_eq!(err.detail("path"), Some(&json!(path.trim())), "{path}");
        assert!(!err.retryable());
        assert!(router.is_empty());
    }
    for ok in [
        "a",
        "a.b_c-D.9",
        "*",
        "**",
        "a.*.b",
        "a.**.b.**",
        "**.a",
        "*.*",
    ] {
        validate_path(ok).unwrap();
    }
}

#[test]
fn paths_are_trimmed() {
    let mut router = Router::new();
    router.add("  user.created \n", "t").unwrap();
    assert_eq!(router.list()[0].path(), "user.created");
    assert_eq!(routed(&router, "user.created"), vec!["t"]);
}

#[test]
fn priorities_are_bounded() {
    let mut router = Router::new();
    let err = router
        .add_route(Route::new("a", 1).priority(MAX_PRIORITY + 1))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Configuration);
    assert_eq!(err.message(), "priority value exceeds maximum allowed");
    assert_eq!(err.detail("priority"), Some(&json!(101)));
    let err = router
        .add_route(Route::new("a", 1).priority(MIN_PRIORITY - 1))
        .unwrap_err();
    assert_eq!(err.message(), "priority value below minimum allowed");
    assert_eq!(err.detail("priority"), Some(&json!(-101)));
    router.add_route(Route::new("a", 1).priority(100)).unwrap();
    router.add_route(Route::new("a", 2).priority(-100)).unwrap();
    assert_eq!(router.len(), 2);
    assert_eq!(router.list()[0].get_priority(), 100);
}

// ---------------------------------------------------------------- wildcards

#[test]
fn star_matches_exactly_one_segment() {
    let mut router = Router::new();
    router.add("user.*", "star").unwrap();
    router.add("*.created", "star-first").unwrap();
    assert_eq!(routed(&router, "user.created"), vec!["star", "star-first"]);
    assert_eq!(routed(&router, "user.deleted"), vec!["star"]);
    assert!(routed(&router, "user").is_empty());
    assert!(routed(&router, "user.profile.updated").is_empty());
}

#[test]
fn globstar_matches_one_or_more_segments() {
    let mut router = Router::new();
    router.add("audit.**", "audit").unwrap();
    router.add("user.**.created", "user").unwrap();
    assert!(routed(&router, "audit").is_empty());
    assert_eq!(routed(&router, "audit.login"), vec!["audit"]);
    assert_eq!(routed(&router, "audit.a.b.c"), vec!["audit"]);
    assert!(routed(&router, "user.created").is_empty());
    assert_eq!(routed(&router, "user.x.created"), vec!["user"]);
    assert_eq!(routed(&router, "user.x.y.z.created"), vec!["user"]);
    assert!(routed(&router, "user.x.created.not").is_empty());
}

#[test]
fn a_bare_globstar_matches_every_type() {
    let mut router = Router::new();
    router.add("**", "all").unwrap();
    for ty in ["a", "a.b", "a.b.c.d.e.f", "Order_Placed-2"] {
        assert_eq!(routed(&router, ty), vec!["all"], "{ty}");
    }
}

#[test]
fn each_route_is_returned_once_even_with_several_globstars() {
    let mut router = Router::new();
    router.add("**.a.**", "twice").unwrap();
    router.add("**.a.**.b", "three").unwrap();
    assert_eq!(routed(&router, "x.a.a.a.y"), vec!["twice"]);
    assert_eq!(routed(&router, "a.a.a.a.a.b"), vec!["three", "twice"]);
}

#[test]
fn long_types_route_without_overflow() {
    let mut router = Router::new();
    router.add("**", "all").unwrap();
    router.add("**.x.**.y.**", "xy").unwrap();
    let ty = vec!["x"; 5_000].join(".") + ".y.z";
    assert_eq!(routed(&router, &ty), vec!["xy", "all"]);
}

#[test]
fn unroutable_types_match_nothing() {
    let mut router = Router::new();
    router.add("**", "all").unwrap();
    for ty in ["user@123", "", "a..b", ".a", "a.", "a b"] {
        let err = router.route(&sig(ty)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Routing, "{ty:?}");
        assert_eq!(
            err.detail("reason"),
            Some(&json!("invalid_signal_type")),
            "{ty:?}"
        );
    }
}

// ---------------------------------------------------------------- ordering

#[test]
fn order_is_complexity_then_priority_then_insertion() {
    let mut router = Router::new();
    router
        .add_route(Route::new("**", "all-high").priority(100))
        .unwrap();
    router.add("order.*", "star-1").unwrap();
    router.add("order.placed", "exact-1").unwrap();
    router.add("*.placed", "star-first").unwrap();
    router
        .add_route(Route::new("order.*", "star-high").priority(50))
        .unwrap();
    router.add("order.placed", "exact-2").unwrap();
    router.add("order.**", "glob").unwrap();
    router
        .add_route(Route::new("order.placed", "exact-low").priority(-5))
        .unwrap();
    assert_eq!(
        router
            .list()
            .iter()
            .map(|r| (r.path(), r.complexity()))
            .collect::<Vec<_>>(),
        vec![
            ("**", 0),
            ("order.*", 9100),
            ("order.placed", 13000),
            ("*.placed", 6000),
            ("order.*", 9100),
            ("order.placed", 13000),
            ("order.**", 8200),
            ("order.placed", 13000),
        ]
    );
    assert_eq!(
        routed(&router, "order.placed"),
        vec![
            "exact-1",
            "exact-2",
            "exact-low",
            "star-high",
            "star-1",
            "glob",
            "star-first",
            "all-high",
        ]
    );
}

#[test]
fn a_second_target_on_a_path_keeps_both_in_insertion_order() {
    let mut router = Router::new();
    router.add("a.b", 1).unwrap();
    router.add("a.b", 2).unwrap();
    router.add("a.b", 3).unwrap();
    assert_eq!(routed(&router, "a.b"), vec![1, 2, 3]);
    assert_eq!(router.len(), 3);
}

#[test]
fn a_router_without_wildcards_orders_and_refuses_like_any_other() {
    // Exact segments only (the common agent router): same order, same
    // errors; a wildcard added later is found beside the exact routes.
    let mut router = Router::new();
    router.add("order.placed", "plain").unwrap();
    router
        .add_route(Route::new("order.placed", "low").priority(-5))
        .unwrap();
    router
        .add_route(
            Route::new("order.placed", "checked")
                .priority(90)
                .when(|_| true),
        )
        .unwrap();
    router
        .add_route(Route::new("order.placed", "high").priority(20))
        .unwrap();
    router.add("order", "parent").unwrap();
    assert_eq!(
        routed(&router, "order.placed"),
        vec!["high", "plain", "low", "checked"]
    );
    assert_eq!(routed(&router, "order"), vec!["parent"]);
    for (ty, reason) in [
        ("order.shipped", "no_handlers_found"),
        ("order.placed.late", "no_handlers_found"),
        ("placed", "no_handlers_found"),
        ("order..placed", "invalid_signal_type"),
        ("order.placed.", "invalid_signal_type"),
        ("order.pla ced", "invalid_signal_type"),
        ("", "invalid_signal_type"),
    ] {
        let err = router.route(&sig(ty)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Routing, "{ty:?}");
        assert_eq!(err.detail("reason"), Some(&json!(reason)), "{ty:?}");
    }
    router.add("order.*", "star").unwrap();
    assert_eq!(
        routed(&router, "order.placed"),
        vec!["high", "plain", "low", "star", "checked"]
    );
    assert_eq!(routed(&router, "order.shipped"), vec!["star"]);
    router.remove("order.*");
    assert_eq!(routed(&router, "order.shipped"), Vec::<&str>::new());
    assert_eq!(routed(&router, "order"), vec!["parent"]);
}

// ---------------------------------------------------------------- match functions

#[test]
fn match_functions_filter_and_rank_with_complexity_zero() {
    let mut router = Router::new();
    router.add("payment.*", "any").unwrap();
    router
        .add_route(
            Route::new("payment.received", "large")
                .priority(10)
                .when(|s| {
                    s.data()
                        .and_then(|d| d["amount"].as_u64())
                        .is_some_and(|a| a > 1000)
                }),
        )
        .unwrap();
    router.add("**", "all").unwrap();
    let small = Signal::new("payment.received", json!({"amount": 5}));
    let large = Signal::new("payment.received", json!({"amount": 5000}));
    assert_eq!(router.route(&small).unwrap(), vec![&"any", &"all"]);
    assert_eq!(
        router.route(&large).unwrap(),
        vec![&"any", &"large", &"all"]
    );
    assert!(router.list()[1].has_match_fn());
}

#[test]
fn a_panicking_match_function_means_no_match() {
    let mut router = Router::new();
    router
        .add_route(Route::new("a", "panics").when(|s| s.data().unwrap()["x"].as_bool().unwrap()))
        .unwrap();
    router.add("a", "plain").unwrap();
    assert_eq!(router.route(&sig("a")).unwrap(), vec![&"plain"]);

    let mut only = Router::new();
    only.add_route(Route::new("a", 1).when(|_| panic!("boom")))
        .unwrap();
    let err = only.route(&sig("a")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Routing);
}

// ---------------------------------------------------------------- no match

#[test]
fn no_match_is_a_routing_error_with_the_type() {
    let mut router = Router::new();
    router.add("order.placed", 1).unwrap();
    let err = router.route(&sig("order.cancelled")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Routing);
    assert_eq!(err.message(), "no matching handlers found for signal");
    assert_eq!(err.detail("signal_type"), Some(&json!("order.cancelled")));
    assert_eq!(err.detail("reason"), Some(&json!("no_handlers_found")));
    assert!(!err.retryable());
    let empty: Router<u8> = Router::new();
    assert_eq!(
        empty.route(&sig("x")).unwrap_err().kind(),
        ErrorKind::Routing
    );
}

// ---------------------------------------------------------------- management

#[test]
fn remove_drops_a_whole_path_and_missing_paths_are_fine() {
    let mut router = Router::new();
    router.add("a.b", 1).unwrap();
    router.add("a.b", 2).unwrap();
    router.add("a.*", 3).unwrap();
    router.add("a.b.c", 4).unwrap();
    assert_eq!(router.remove(" a.b "), 2);
    assert_eq!(router.len(), 2);
    assert_eq!(routed(&router, "a.b"), vec![3]);
    assert_eq!(routed(&router, "a.b.c"), vec![4]);
    assert_eq!(router.remove("a.b"), 0);
    assert_eq!(router.remove("x.y.z"), 0);
    assert_eq!(router.remove("bad..path"), 0);
    assert_eq!(router.remove("a.*"), 1);
    assert_eq!(router.remove("a.b.c"), 1);
    assert!(router.is_empty());
    assert!(router.list().is_empty());
}

#[test]
fn merge_appends_the_other_routes_in_their_order() {
    let mut a = Router::new();
    a.add("x", "a1").unwrap();
    a.add("y", "a2").unwrap();
    let mut b = Router::new();
    b.add("x", "b1").unwrap();
    b.add("**", "b2").unwrap();
    b.add("x", "b3").unwrap();
    a.merge(b);
    assert_eq!(a.len(), 5);
    assert_eq!(
        a.list().iter().map(|r| *r.target()).collect::<Vec<_>>(),
        vec!["a1", "a2", "b1", "b2", "b3"]
    );
    assert_eq!(routed(&a, "x"), vec!["a1", "b1", "b3", "b2"]);
}

#[test]
fn add_all_is_all_or_nothing() {
    let mut router = Router::new();
    router.add("keep", 0).unwrap();
    let err = router
        .add_all([
            Route::new("a", 1),
            Route::new("b..c", 2),
            Route::new("d", 3),
        ])
        .unwrap_err();
    assert_eq!(err.detail("rule"), Some(&json!("consecutive_dots")));
    assert_eq!(router.len(), 1);
    let router = Router::from_routes([Route::new("a", 1), Route::new("a", 2)]).unwrap();
    assert_eq!(routed(&router, "a"), vec![1, 2]);
}

#[test]
fn routers_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync + 'static>() {}
    assert_send_sync::<Router<String>>();
    assert_send_sync::<Route<String>>();
}

#[test]
fn clones_are_independent() {
    let mut a = Router::new();
    a.add("x", 1).unwrap();
    let mut b = a.clone();
    b.add("x", 2).unwrap();
    assert_eq!(routed(&a, "x"), vec![1]);
    assert_eq!(routed(&b, "x"), vec![1, 2]);
}

// ---------------------------------------------------------------- matches()

#[test]
fn matches_uses_zero_or_more_globstar_unlike_route() {
    assert!(matches("audit.**", "audit"));
    assert!(matches("user.**.created", "user.created"));
    assert!(matches("**", "a.b"));
    assert!(matches("a.*.c", "a.b.c"));
    assert!(!matches("a.*.c", "a.c"));
    assert!(!matches("a.b", "a.b.c"));
    assert!(!matches("a", "a@b"));
    let mut router = Router::new();
    router.add("audit.**", 1).unwrap();
    assert!(router.route(&sig("audit")).is_err());
}

// ---------------------------------------------------------------- properties

/// The obvious recursive matcher.
fn reference(p: &[&str], t: &[&str], zero_ok: bool) -> bool {
    match p.split_first() {
        None => t.is_empty(),
        Some((&"**", rest)) => {
            let min = usize::from(!zero_ok);
            (min..=t.len()).any(|k| reference(rest, &t[k..], zero_ok))
        }
        Some((&"*", rest)) => !t.is_empty() && reference(rest, &t[1..], zero_ok),
        Some((seg, rest)) => t.first() == Some(seg) && reference(rest, &t[1..], zero_ok),
    }
}

fn pattern_strategy() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![Just("a"), Just("b"), Just("c"), Just("*"), Just("**")],
        1..5,
    )
    .prop_filter("no adjacent **", |segs| {
        segs.windows(2).all(|w| !(w[0] == "**" && w[1] == "**"))
    })
    .prop_map(|segs| segs.join("."))
}

fn type_strategy() -> impl Strategy<Value = String> {
    proptest::collection::vec(prop_oneof![Just("a"), Just("b"), Just("c")], 1..7)
        .prop_map(|s| s.join("."))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn wildcards_agree_with_the_reference_matcher(
        patterns in proptest::collection::vec(pattern_strategy(), 1..8),
        types in proptest::collection::vec(type_strategy(), 1..8),
    ) {
        let mut router = Router::new();
        for (i, p) in patterns.iter().enumerate() {
            router.add(p.as_str(), i).unwrap();
        }
        for ty in &types {
            let t: Vec<&str> = ty.split('.').collect();
            let expected: BTreeSet<usize> = patterns
                .iter()
                .enumerate()
                .filter(|(_, p)| reference(&p.split('.').collect::<Vec<_>>(), &t, false))
                .map(|(i, _)| i)
                .collect();
            let got = routed(&router, ty);
            prop_assert_eq!(got.len(), expected.len(), "duplicates in {:?}", got);
            prop_assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), expected);
            for p in &patterns {
                prop_assert_eq!(
                    matches(p, ty),
                    reference(&p.split('.').collect::<Vec<_>>(), &t, true),
                    "matches({}, {})", p, ty
                );
            }
        }
    }

    #[test]
    fn routing_is_independent_of_insertion_order_except_among_equal_ranks(
        routes in proptest::collection::vec((pattern_strategy(), -3i32..=3), 1..12),
        order in Just(()).prop_perturb(|_, mut rng| rng.random::<u64>()),
        types in proptest::collection::vec(type_strategy(), 1..6),
    ) {
        // Route i carries target i; the second router gets them shuffled.
        let mut shuffled: Vec<usize> = (0..routes.len()).collect();
        let mut seed = order;
        for i in (1..shuffled.len()).rev() {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            shuffled.swap(i, (seed >> 33) as usize % (i + 1));
        }
        let build = |ids: &[usize]| {
            let mut r = Router::new();
            for &i in ids {
                let (p, prio) = &routes[i];
                r.add_route(Route::new(p.as_str(), i).priority(*prio)).unwrap();
            }
            r
        };
        let first = build(&(0..routes.len()).collect::<Vec<_>>());
        let second = build(&shuffled);
        let rank = |i: usize| {
            let (p, prio) = &routes[i];
            (Route::new(p.as_str(), ()).complexity(), *prio)
        };
        let position = |ids: &[usize], i: usize| ids.iter().position(|&x| x == i).unwrap();
        for ty in &types {
            let a = routed(&first, ty);
            let b = routed(&second, ty);
            // Same ranks in the same (descending) order…
            let ranks_a: Vec<_> = a.iter().map(|&i| rank(i)).collect();
            let ranks_b: Vec<_> = b.iter().map(|&i| rank(i)).collect();
            prop_assert_eq!(&ranks_a, &ranks_b);
            let mut sorted = ranks_a.clone();
            sorted.sort_by(|x, y| y.cmp(x));
            prop_assert_eq!(&ranks_a, &sorted);
            // …the same targets…
            prop_assert_eq!(a.iter().collect::<BTreeSet<_>>(), b.iter().collect::<BTreeSet<_>>());
            // …and equal ranks in each router's insertion order.
            for w in b.windows(2) {
                if rank(w[0]) == rank(w[1]) {
                    prop_assert!(position(&shuffled, w[0]) < position(&shuffled, w[1]));
                }
            }
            for w in a.windows(2) {
                if rank(w[0]) == rank(w[1]) {
                    prop_assert!(w[0] < w[1]);
                }
            }
        }
    }
}
