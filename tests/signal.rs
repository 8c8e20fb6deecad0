//! Signals: the CloudEvents envelope, parsing, serialisation, typed signals
//! and interoperability with the `cloudevents-sdk` crate.

use chrono::{TimeZone, Utc};
use cloudevents::{AttributesReader, EventBuilder, EventBuilderV10};
use jido::signal::{
    DEFAULT_SOURCE, JSON_CONTENT_TYPE, MAX_DATA_DEPTH, SPEC_VERSION, Signal, TypedSignal,
};
use jido::{Error, ErrorKind};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

fn fixed() -> Signal {
    Signal::builder("order.placed")
        .id("evt-1")
        .source("/shop")
        .subject("order-42")
        .time(Utc.with_ymd_and_hms(2024, 1, 2, 3, 4, 5).unwrap())
        .dataschema("https://example.com/order.json")
        .data(json!({"total": 99, "items": ["a", "b"]}))
        .extension("tenant", "acme")
        .build()
        .unwrap()
}

fn field_error(err: &Error, kind: ErrorKind, message: &str, field: &str) {
    assert_eq!(err.kind(), kind, "{err:?}");
    assert_eq!(err.message(), message, "{err:?}");
    assert_eq!(err.detail("field"), Some(&json!(field)), "{err:?}");
}

fn nested(depth: usize) -> Value {
    let mut v = json!(1);
    for _ in 0..depth {
        v = json!({ "a": v });
    }
    v
}

// ---------------------------------------------------------------- new / builder

#[test]
fn new_sets_the_defaults() {
    let s = Signal::new("user.created", json!({"id": 7}));
    assert_eq!(s.specversion(), "1.0.2");
    assert_eq!(s.ty(), "user.created");
    assert_eq!(s.source(), DEFAULT_SOURCE);
    assert_eq!(s.source(), "jido");
    let id = uuid::Uuid::parse_str(s.id()).unwrap();
    assert_eq!(id.get_version_num(), 7);
    assert_eq!(s.id().len(), 36);
    let time = s.time().unwrap();
    assert!(time.ends_with('Z'), "{time}");
    let parsed = s.time_utc().unwrap();
    assert!((Utc::now() - parsed).num_seconds().abs() < 60);
    assert_eq!(s.datacontenttype(), Some(JSON_CONTENT_TYPE));
    assert_eq!(s.data(), Some(&json!({"id": 7})));
    assert_eq!(s.subject(), None);
    assert_eq!(s.dataschema(), None);
    assert!(s.extensions().is_empty());
}

#[test]
fn new_without_data_has_no_content_type() {
    let s = Signal::new("tick", Value::Null);
    assert_eq!(s.data(), None);
    assert_eq!(s.datacontenttype(), None);
}

#[test]
fn ids_are_unique_and_time_ordered() {
    let a = Signal::new("a", Value::Null);
    let b = Signal::new("a", Value::Null);
    assert_ne!(a.id(), b.id());
    assert!(a.id() < b.id(), "UUIDv7 sort by creation time");
}

#[test]
fn ids_are_rfc_9562_version_7_with_the_signals_time() {
    for _ in 0..1000 {
        let s = Signal::new("a", Value::Null);
        let id = uuid::Uuid::parse_str(s.id()).unwrap();
        assert_eq!(id.get_version(), Some(uuid::Version::SortRand));
        assert_eq!(id.get_variant(), uuid::Variant::RFC4122);
        // Lowercase and hyphenated, as `uuid` writes it.
        assert_eq!(id.hyphenated().to_string(), s.id());
        // The id's millisecond timestamp is the signal's time (both come
        // from one clock read), never earlier; it runs ahead when ids are
        // made faster than one per 1/65 536 ms, or when a thread that read
        // the clock is preempted while others make ids (other tests make
        // ids on eight threads meanwhile), so allow a second.
        let (secs, nanos) = id.get_timestamp().unwrap().to_unix();
        let id_ms = i64::try_from(secs * 1000 + u64::from(nanos / 1_000_000)).unwrap();
        let time_ms = s.time_utc().unwrap().timestamp_millis();
        assert!(
            (0..1000).contains(&(id_ms - time_ms)),
            "{} at {:?}",
            s.id(),
            s.time()
        );
    }
}

#[test]
fn ids_are_unique_and_ordered_across_threads() {
    // Eight threads make ids at once; each thread's ids increase, and no
    // id is made twice.
    let per_thread = 20_000;
    let ids: Vec<Vec<String>> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..8)
            .map(|_| {
                scope.spawn(|| {
                    (0..per_thread)
                        .map(|_| Signal::new("t", Value::Null).id().to_owned())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let mut all = std::collections::HashSet::new();
    for thread in &ids {
        assert!(thread.windows(2).all(|w| w[0] < w[1]));
        for id in thread {
            assert!(all.insert(id.as_str()), "{id} made twice");
        }
    }
    assert_eq!(all.len(), 8 * per_thread);

    // An id made after another one on another thread (the first one's
    // making happened before, through a channel) sorts after it.
    let (to_b, from_a) = std::sync::mpsc::channel::<String>();
    let (to_a, from_b) = std::sync::mpsc::channel::<String>();
    std::thread::scope(|scope| {
        scope.spawn(move || {
            for _ in 0..2_000 {
                to_b.send(Signal::new("a", Value::Null).id().to_owned())
                    .unwrap();
                let theirs = from_b.recv().unwrap();
                let mine = Signal::new("a", Value::Null);
                assert!(mine.id() > theirs.as_str(), "{} after {theirs}", mine.id());
            }
        });
        scope.spawn(move || {
            for _ in 0..2_000 {
                let theirs = from_a.recv().unwrap();
                let mine = Signal::new("b", Value::Null).id().to_owned();
                assert!(mine > theirs, "{mine} after {theirs}");
                to_a.send(mine).unwrap();
            }
        });
    });
}

#[test]
fn builder_sets_every_attribute() {
    let s = fixed();
    assert_eq!(s.id(), "evt-1");
    assert_eq!(s.source(), "/shop");
    assert_eq!(s.ty(), "order.placed");
    assert_eq!(s.subject(), Some("order-42"));
    assert_eq!(s.time(), Some("2024-01-02T03:04:05Z"));
    assert_eq!(s.datacontenttype(), Some("application/json"));
    assert_eq!(s.dataschema(), Some("https://example.com/order.json"));
    assert_eq!(s.extension("tenant"), Some(&json!("acme")));
}

#[test]
fn builder_keeps_an_explicit_content_type_and_can_drop_time() {
    let s = Signal::builder("note")
        .datacontenttype("text/plain")
        .data("hello")
        .no_time()
        .build()
        .unwrap();
    assert_eq!(s.datacontenttype(), Some("text/plain"));
    assert_eq!(s.data(), Some(&json!("hello")));
    assert_eq!(s.time(), None);
}

#[test]
fn builder_rejects_missing_and_empty_attributes() {
    let cases: Vec<(jido::signal::SignalBuilder, &str, &str)> = vec![
        (Signal::builder(""), "invalid signal: missing type", "type"),
        (
            Signal::builder("a").source(""),
            "invalid signal: missing source",
            "source",
        ),
        (
            Signal::builder("a").id(""),
            "invalid signal: id given but empty",
            "id",
        ),
        (
            Signal::builder("a").subject(""),
            "invalid signal: subject given but empty",
            "subject",
        ),
        (
            Signal::builder("a").time_rfc3339(""),
            "invalid signal: time given but empty",
            "time",
        ),
        (
            Signal::builder("a").datacontenttype(""),
            "invalid signal: datacontenttype given but empty",
            "datacontenttype",
        ),
        (
            Signal::builder("a").dataschema(""),
            "invalid signal: dataschema given but empty",
            "dataschema",
        ),
        (
            Signal::builder("a").time_rfc3339("yesterday"),
            "invalid signal: time is not an rfc 3339 timestamp",
            "time",
        ),
        (
            Signal::builder("a").data(""),
            "invalid signal: data field given but empty",
            "data",
        ),
    ];
    for (builder, message, field) in cases {
        let err = builder.build().unwrap_err();
        field_error(&err, ErrorKind::Validation, message, field);
        assert!(!err.retryable());
    }
}

#[test]
fn extension_names_follow_cloudevents_rules() {
    let err = Signal::builder("a")
        .extension("Tenant", "x")
        .build()
        .unwrap_err();
    field_error(
        &err,
        ErrorKind::Validation,
        "invalid signal: extension name \"Tenant\" must be lowercase letters and digits",
        "Tenant",
    );
    assert_eq!(err.detail("reason"), Some(&json!("invalid_name")));

    let err = Signal::builder("a")
        .extension("my_ext", "x")
        .build()
        .unwrap_err();
    assert_eq!(err.detail("reason"), Some(&json!("invalid_name")));

    let err = Signal::builder("a")
        .extension("subject", "x")
        .build()
        .unwrap_err();
    field_error(
        &err,
        ErrorKind::Validation,
        "invalid signal: extension name subject is reserved",
        "subject",
    );

    let s = Signal::builder("a")
        .extension("traceparent", "00-abc")
        .extension("retries2", 3)
        .extension("flag", true)
        .extension("gone", "x")
        .extension("gone", Value::Null)
        .build()
        .unwrap();
    assert_eq!(
        Value::Object(s.extensions().clone()),
        json!({"traceparent": "00-abc", "retries2": 3, "flag": true})
    );
}

#[test]
fn extensions_can_be_edited() {
    let mut s = Signal::new("a", Value::Null);
    s.put_extension("tenant", "acme").unwrap();
    assert_eq!(s.extension("tenant"), Some(&json!("acme")));
    let err = s.put_extension("Bad", 1).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert_eq!(s.remove_extension("tenant"), Some(json!("acme")));
    assert_eq!(s.extension("tenant"), None);
    s.put_extension("x", 1).unwrap();
    s.put_extension("x", Value::Null).unwrap();
    assert!(s.extensions().is_empty());
}

#[test]
fn to_builder_changes_some_attributes_and_keeps_the_rest() {
    let s = fixed();
    let t = s.to_builder().subject("order-43").build().unwrap();
    assert_eq!(t.subject(), Some("order-43"));
    assert_eq!(t.id(), s.id());
    assert_eq!(t.time(), s.time());
    assert_eq!(t.data(), s.data());
    assert_eq!(t.extensions(), s.extensions());
}

#[test]
fn data_as_decodes_with_the_failing_path() {
    #[derive(Debug, Deserialize, PartialEq)]
    struct Order {
        total: u32,
        items: Vec<String>,
    }
    let s = fixed();
    assert_eq!(
        s.data_as::<Order>().unwrap(),
        Order {
            total: 99,
            items: vec!["a".into(), "b".into()]
        }
    );
    let bad = Signal::new("order.placed", json!({"total": 1, "items": [1]}));
    let err = bad.data_as::<Order>().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert_eq!(err.detail("path"), Some(&json!("items[0]")));
    assert_eq!(
        err.message(),
        "invalid data for signal order.placed: items[0]: invalid type: integer `1`, expected a string"
    );
}

// ---------------------------------------------------------------- JSON

#[test]
fn serialises_to_the_cloudevents_json_format() {
    let s = fixed();
    assert_eq!(
        s.to_json_string(),
        concat!(
            r#"{"specversion":"1.0.2","id":"evt-1","source":"/shop","type":"order.placed","#,
            r#""subject":"order-42","time":"2024-01-02T03:04:05Z","datacontenttype":"application/json","#,
            r#""dataschema":"https://example.com/order.json","data":{"total":99,"items":["a","b"]},"#,
            r#""tenant":"acme"}"#
        )
    );
    assert_eq!(
        s.to_json_value(),
        json!({
            "specversion": "1.0.2", "id": "evt-1", "source": "/shop", "type": "order.placed",
            "subject": "order-42", "time": "2024-01-02T03:04:05Z",
            "datacontenttype": "application/json", "dataschema": "https://example.com/order.json",
            "data": {"total": 99, "items": ["a", "b"]}, "tenant": "acme"
        })
    );
    assert_eq!(serde_json::to_value(&s).unwrap(), s.to_json_value());
    assert_eq!(s.to_json_vec(), s.to_json_string().into_bytes());
    let ce: Value = serde_json::from_str(&s.to_cloudevents_json_string()).unwrap();
    assert_eq!(ce["specversion"], "1.0");
    assert_eq!(ce["tenant"], "acme");
}

#[test]
fn round_trips_through_json() {
    let s = fixed();
    assert_eq!(Signal::from_json_str(&s.to_json_string()).unwrap(), s);
    assert_eq!(Signal::from_json_slice(&s.to_json_vec()).unwrap(), s);
    assert_eq!(
        Signal::from_json_str(&s.to_cloudevents_json_string()).unwrap(),
        s
    );
    assert_eq!(Signal::from_value(s.to_json_value()).unwrap(), s);
    assert_eq!(
        serde_json::from_str::<Signal>(&s.to_json_string()).unwrap(),
        s
    );
    let bare = Signal::new("x", Value::Null);
    assert_eq!(Signal::from_json_str(&bare.to_json_string()).unwrap(), bare);
}

#[test]
fn parsing_applies_jidos_validation() {
    let cases = [
        (
            json!({"type": "a", "source": "/s"}),
            "invalid signal: missing specversion",
            "specversion",
        ),
        (
            json!({"specversion": "0.3", "type": "a", "source": "/s"}),
            "invalid signal: unexpected specversion 0.3",
            "specversion",
        ),
        (
            json!({"specversion": "1.0.2", "source": "/s"}),
            "invalid signal: missing type",
            "type",
        ),
        (
            json!({"specversion": "1.0.2", "type": "", "source": "/s"}),
            "invalid signal: missing type",
            "type",
        ),
        (
            json!({"specversion": "1.0.2", "type": 5, "source": "/s"}),
            "invalid signal: type must be a string, got number",
            "type",
        ),
        (
            json!({"specversion": "1.0.2", "type": "a"}),
            "invalid signal: missing source",
            "source",
        ),
        (
            json!({"specversion": "1.0.2", "type": "a", "source": ""}),
            "invalid signal: missing source",
            "source",
        ),
        (
            json!({"specversion": "1.0.2", "type": "a", "source": "/s", "id": ""}),
            "invalid signal: id given but empty",
            "id",
        ),
        (
            json!({"specversion": "1.0.2", "type": "a", "source": "/s", "subject": ""}),
            "invalid signal: subject given but empty",
            "subject",
        ),
        (
            json!({"specversion": "1.0.2", "type": "a", "source": "/s", "time": ""}),
            "invalid signal: time given but empty",
            "time",
        ),
        (
            json!({"specversion": "1.0.2", "type": "a", "source": "/s", "time": "2024-13-01T00:00:00Z"}),
            "invalid signal: time is not an rfc 3339 timestamp",
            "time",
        ),
        (
            json!({"specversion": "1.0.2", "type": "a", "source": "/s", "datacontenttype": ""}),
            "invalid signal: datacontenttype given but empty",
            "datacontenttype",
        ),
        (
            json!({"specversion": "1.0.2", "type": "a", "source": "/s", "dataschema": ""}),
            "invalid signal: dataschema given but empty",
            "dataschema",
        ),
        (
            json!({"specversion": "1.0.2", "type": "a", "source": "/s", "subject": ["x"]}),
            "invalid signal: subject must be a string, got array",
            "subject",
        ),
        (
            json!({"specversion": "1.0.2", "type": "a", "source": "/s", "data": ""}),
            "invalid signal: data field given but empty",
            "data",
        ),
        (
            json!({"specversion": "1.0.2", "type": "a", "source": "/s", "myExt": 1}),
            "invalid signal: extension name \"myExt\" must be lowercase letters and digits",
            "myExt",
        ),
    ];
    for (value, message, field) in cases {
        let text = value.to_string();
        field_error(
            &Signal::from_json_str(&text).unwrap_err(),
            ErrorKind::Validation,
            message,
            field,
        );
        let Value::Object(map) = value else {
            unreachable!()
        };
        field_error(
            &Signal::from_map(map).unwrap_err(),
            ErrorKind::Validation,
            message,
            field,
        );
    }
}

#[test]
fn parsing_fills_in_what_may_be_missing() {
    let s =
        Signal::from_json_str(r#"{"specversion":"1.0","type":"a.b","source":"/s","data":{"x":1}}"#)
            .unwrap();
    assert_eq!(s.specversion(), SPEC_VERSION);
    assert_eq!(uuid::Uuid::parse_str(s.id()).unwrap().get_version_num(), 7);
    assert_eq!(s.time(), None);
    assert_eq!(s.datacontenttype(), Some("application/json"));
    let s = Signal::from_json_str(
        r#"{"specversion":"1.0.2","type":"a","source":"/s","data":null,"subject":null}"#,
    )
    .unwrap();
    assert_eq!(s.data(), None);
    assert_eq!(s.datacontenttype(), None);
    assert_eq!(s.subject(), None);
}

#[test]
fn unknown_attributes_become_extensions() {
    let s = Signal::from_json_str(
        r#"{"specversion":"1.0.2","type":"a","source":"/s","tenant":"acme","attempt":2,"meta":{"k":[1]},"dropped":null}"#,
    )
    .unwrap();
    assert_eq!(
        Value::Object(s.extensions().clone()),
        json!({"tenant": "acme", "attempt": 2, "meta": {"k": [1]}})
    );
    assert_eq!(
        s.to_json_value(),
        json!({"specversion": "1.0.2", "id": s.id(), "source": "/s", "type": "a",
               "tenant": "acme", "attempt": 2, "meta": {"k": [1]}})
    );
}

#[test]
fn malformed_json_and_non_objects_are_typed_errors() {
    let err = Signal::from_json_str("{\"specversion\": ").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert_eq!(err.message(), "invalid signal: malformed json");
    assert_eq!(err.detail("reason"), Some(&json!("malformed_json")));

    let err = Signal::from_json_str("[1, 2]").unwrap_err();
    assert_eq!(err.message(), "invalid signal: expected a json object");
    assert_eq!(err.detail("got"), Some(&json!("array")));
    let err = Signal::from_json_str("12").unwrap_err();
    assert_eq!(err.detail("got"), Some(&json!("number")));

    let err = Signal::from_value(json!("x")).unwrap_err();
    assert_eq!(err.message(), "invalid signal: expected a json object");
    assert_eq!(err.detail("got"), Some(&json!("string")));

    let err =
        serde_json::from_str::<Signal>(r#"{"specversion":"1.0.2","source":"/s"}"#).unwrap_err();
    assert!(
        err.to_string().starts_with("invalid signal: missing type"),
        "{err}"
    );
}

#[test]
fn data_nesting_is_limited() {
    assert_eq!(MAX_DATA_DEPTH, 100);
    let ok = json!({"specversion": "1.0.2", "type": "a", "source": "/s", "data": nested(MAX_DATA_DEPTH)});
    Signal::from_json_str(&ok.to_string()).unwrap();

    let deep = json!({"specversion": "1.0.2", "type": "a", "source": "/s", "data": nested(MAX_DATA_DEPTH + 1)});
    let err = Signal::from_json_str(&deep.to_string()).unwrap_err();
    field_error(
        &err,
        ErrorKind::Validation,
        "invalid signal: data nested deeper than 100 levels",
        "data",
    );
    assert_eq!(err.detail("max_depth"), Some(&json!(100)));
    let Value::Object(map) = deep else {
        unreachable!()
    };
    field_error(
        &Signal::from_map(map).unwrap_err(),
        ErrorKind::Validation,
        "invalid signal: data nested deeper than 100 levels",
        "data",
    );
    let err = Signal::builder("a")
        .data(nested(MAX_DATA_DEPTH + 1))
        .build()
        .unwrap_err();
    assert_eq!(err.detail("reason"), Some(&json!("too_deep")));
}

#[test]
fn hostile_nesting_neither_panics_nor_overflows() {
    for depth in [127, 128, 200, 100_000] {
        let text = format!(
            r#"{{"specversion":"1.0.2","type":"a","source":"/s","data":{}1{}}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        );
        let err = Signal::from_json_str(&text).unwrap_err();
        field_error(
            &err,
            ErrorKind::Validation,
            "invalid signal: data nested deeper than 100 levels",
            "data",
        );
    }
    let text = format!(
        r#"{{"specversion":"1.0.2","type":"a","source":"/s","deep":{}1{}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let err = Signal::from_json_str(&text).unwrap_err();
    field_error(
        &err,
        ErrorKind::Validation,
        "invalid signal: deep nested deeper than 100 levels",
        "deep",
    );
    let text = format!(
        r#"{{"specversion":"1.0.2","type":{}1"#,
        "{\"a\":".repeat(50_000)
    );
    let err = Signal::from_json_str(&text).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn parsing_random_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = Signal::from_json_slice(&bytes);
    }

    #[test]
    fn parsing_json_like_text_never_panics(text in r#"[\{\}\[\]":,a-z0-9 .\\-]{0,200}"#) {
        let _ = Signal::from_json_str(&text);
    }

    #[test]
    fn valid_events_round_trip(
        ty in "[a-z]{1,8}(\\.[a-z0-9_-]{1,8}){0,3}",
        source in "/[a-z]{1,10}",
        subject in proptest::option::of("[a-zA-Z0-9 ]{1,12}"),
        n in any::<i64>(),
        s in ".{0,20}",
        ext in proptest::option::of(("[a-z][a-z0-9]{0,9}", "[a-z]{1,5}")),
    ) {
        let mut b = Signal::builder(ty).source(source).data(json!({"n": n, "s": s}));
        if let Some(subject) = subject {
            b = b.subject(subject);
        }
        if let Some((name, value)) = ext
            && !jido::signal::RESERVED_ATTRIBUTES.contains(&name.as_str()) {
                b = b.extension(name, value);
            }
        let signal = b.build().unwrap();
        prop_assert_eq!(Signal::from_json_str(&signal.to_json_string()).unwrap(), signal.clone());
        prop_assert_eq!(Signal::from_json_str(&signal.to_cloudevents_json_string()).unwrap(), signal);
    }
}

// ---------------------------------------------------------------- interop

#[test]
fn our_json_parses_in_cloudevents_sdk_with_data_and_extensions() {
    let s = fixed()
        .to_builder()
        .extension("attempt", 3)
        .extension("replay", true)
        .build()
        .unwrap();
    let event: cloudevents::Event = serde_json::from_str(&s.to_cloudevents_json_string()).unwrap();
    assert_eq!(event.specversion(), cloudevents::event::SpecVersion::V10);
    assert_eq!(event.id(), "evt-1");
    assert_eq!(event.source(), "/shop");
    assert_eq!(event.ty(), "order.placed");
    assert_eq!(event.subject(), Some("order-42"));
    assert_eq!(
        event.time(),
        Some(&Utc.with_ymd_and_hms(2024, 1, 2, 3, 4, 5).unwrap())
    );
    assert_eq!(event.datacontenttype(), Some("application/json"));
    assert_eq!(
        event.dataschema().map(|u| u.as_str()),
        Some("https://example.com/order.json")
    );
    assert_eq!(
        event.data(),
        Some(&cloudevents::Data::Json(
            json!({"total": 99, "items": ["a", "b"]})
        ))
    );
    assert_eq!(
        event.extension("tenant").map(|v| v.to_string()),
        Some("acme".into())
    );
    assert_eq!(
        event.extension("attempt"),
        Some(&cloudevents::event::ExtensionValue::Integer(3))
    );
    assert_eq!(
        event.extension("replay"),
        Some(&cloudevents::event::ExtensionValue::Boolean(true))
    );
}

#[test]
fn our_json_without_data_parses_in_cloudevents_sdk() {
    let s = Signal::builder("ping")
        .source("/probe")
        .id("p-1")
        .build()
        .unwrap();
    let event: cloudevents::Event = serde_json::from_str(&s.to_cloudevents_json_string()).unwrap();
    assert_eq!(event.id(), "p-1");
    assert_eq!(event.ty(), "ping");
    assert_eq!(event.data(), None);
    assert_eq!(event.datacontenttype(), None);
    assert_eq!(event.iter_extensions().count(), 0);
    assert!(event.time().is_some());
}

#[test]
fn jidos_spec_version_is_refused_by_cloudevents_sdk() {
    // The quirk behind `to_cloudevents_json_string`: Jido writes "1.0.2",
    // the SDK only knows "1.0" (and "0.3").
    let err = serde_json::from_str::<cloudevents::Event>(&fixed().to_json_string()).unwrap_err();
    assert!(err.to_string().contains("1.0.2"), "{err}");
}

#[test]
fn cloudevents_sdk_json_parses_here_with_data_and_extensions() {
    let event = EventBuilderV10::new()
        .id("ce-1")
        .source("https://sdk.example/src")
        .ty("com.example.order.placed")
        .subject("o-9")
        .time(Utc.with_ymd_and_hms(2023, 6, 7, 8, 9, 10).unwrap())
        .data_with_schema(
            "application/json",
            "https://sdk.example/schema.json",
            json!({"total": 10, "ok": true}),
        )
        .extension("tenant", "acme")
        .extension("attempt", 2i64)
        .build()
        .unwrap();
    let text = serde_json::to_string(&event).unwrap();
    let s = Signal::from_json_str(&text).unwrap();
    assert_eq!(s.id(), "ce-1");
    assert_eq!(s.source(), "https://sdk.example/src");
    assert_eq!(s.ty(), "com.example.order.placed");
    assert_eq!(s.subject(), Some("o-9"));
    assert_eq!(
        s.time_utc(),
        Some(Utc.with_ymd_and_hms(2023, 6, 7, 8, 9, 10).unwrap())
    );
    assert_eq!(s.datacontenttype(), Some("application/json"));
    assert_eq!(s.dataschema(), Some("https://sdk.example/schema.json"));
    assert_eq!(s.data(), Some(&json!({"total": 10, "ok": true})));
    assert_eq!(s.extension("tenant"), Some(&json!("acme")));
    assert_eq!(s.extension("attempt"), Some(&json!(2)));
    // And back: what we write from it is what the SDK had.
    let again: cloudevents::Event = serde_json::from_str(&s.to_cloudevents_json_string()).unwrap();
    assert_eq!(again, event);
}

#[test]
fn cloudevents_sdk_json_without_data_parses_here() {
    let event = EventBuilderV10::new()
        .id("ce-2")
        .source("/sdk")
        .ty("heartbeat")
        .build()
        .unwrap();
    let s = Signal::from_json_str(&serde_json::to_string(&event).unwrap()).unwrap();
    assert_eq!(s.id(), "ce-2");
    assert_eq!(s.ty(), "heartbeat");
    assert_eq!(s.data(), None);
    assert_eq!(s.datacontenttype(), None);
    assert!(s.extensions().is_empty());
}

// ---------------------------------------------------------------- typed

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Order {
    id: String,
    total: u32,
}

struct OrderPlaced;
impl TypedSignal for OrderPlaced {
    const TYPE: &'static str = "order.placed";
    const SOURCE: &'static str = "/shop";
    const DATASCHEMA: Option<&'static str> = Some("https://example.com/order.json");
    type Data = Order;
    fn validate(data: &Order) -> jido::Result<()> {
        if data.total == 0 {
            return Err(Error::validation("total must be positive").with_detail("field", "total"));
        }
        Ok(())
    }
}

struct Broken;
impl TypedSignal for Broken {
    const TYPE: &'static str = "bad type!";
    type Data = ();
}

#[test]
fn typed_signals_fix_type_and_check_data() {
    let order = Order {
        id: "o-1".into(),
        total: 30,
    };
    let s = OrderPlaced::new(order.clone()).unwrap();
    assert_eq!(s.ty(), "order.placed");
    assert_eq!(s.source(), "/shop");
    assert_eq!(s.dataschema(), Some("https://example.com/order.json"));
    assert_eq!(s.data(), Some(&json!({"id": "o-1", "total": 30})));
    assert_eq!(OrderPlaced::decode(&s).unwrap(), order);

    let s = OrderPlaced::builder(&order)
        .unwrap()
        .subject("o-1")
        .build()
        .unwrap();
    assert_eq!(s.subject(), Some("o-1"));

    let err = OrderPlaced::new(Order {
        id: "o-2".into(),
        total: 0,
    })
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert_eq!(err.message(), "total must be positive");
}

#[test]
fn typed_decode_checks_type_data_and_rules() {
    let other = Signal::new("order.cancelled", json!({"id": "o", "total": 1}));
    let err = OrderPlaced::decode(&other).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert_eq!(
        err.message(),
        "signal type mismatch: expected order.placed, got order.cancelled"
    );
    assert_eq!(err.detail("expected"), Some(&json!("order.placed")));

    let bad = Signal::new("order.placed", json!({"id": "o"}));
    let err = OrderPlaced::decode(&bad).unwrap_err();
    assert_eq!(
        err.message(),
        "invalid data for signal order.placed: missing field `total`"
    );

    let zero = Signal::new("order.placed", json!({"id": "o", "total": 0}));
    assert_eq!(
        OrderPlaced::decode(&zero).unwrap_err().message(),
        "total must be positive"
    );
}

#[test]
fn a_typed_signal_with_an_unroutable_type_is_a_configuration_error() {
    let err = Broken::new(()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Configuration);
    assert_eq!(err.message(), "invalid signal type \"bad type!\"");
    assert_eq!(err.detail("signal_type"), Some(&json!("bad type!")));
}

#[test]
fn signals_are_send_sync_and_embed_in_serde_types() {
    fn assert_send_sync<T: Send + Sync + 'static>() {}
    assert_send_sync::<Signal>();

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Envelope {
        signals: Vec<Signal>,
    }
    let env = Envelope {
        signals: vec![fixed(), Signal::new("b", Value::Null)],
    };
    let text = serde_json::to_string(&env).unwrap();
    assert_eq!(serde_json::from_str::<Envelope>(&text).unwrap(), env);
}

#[test]
fn data_base64_is_refused_as_a_reserved_attribute() {
    let err = Signal::from_json_str(
        r#"{"specversion":"1.0.2","id":"x","source":"/s","type":"t","data_base64":"AAA="}"#,
    )
    .unwrap_err();
    assert_eq!(err.kind(), jido::ErrorKind::Validation);
    assert!(err.message().contains("data_base64"), "{}", err.message());
}
