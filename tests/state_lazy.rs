//! A lazy state value (`StateValue::Lazy`) reads as the JSON it builds,
//! builds it once, and turns into that JSON when written through.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use jido::state::{LazyValue, StateMap, StateOp, StateSource, StateValue, apply_state_op};
use serde_json::json;

/// `{"name": NAME, "tags": ["a", "b"], "cfg": {"depth": 2}}`, counting
/// its builds.
struct Doc {
    name: &'static str,
    builds: Arc<AtomicUsize>,
}

impl StateSource for Doc {
    fn to_state(&self) -> StateValue {
        self.builds.fetch_add(1, Ordering::SeqCst);
        StateValue::from(json!({"name": self.name, "tags": ["a", "b"], "cfg": {"depth": 2}}))
    }
}

fn state_with_doc() -> (StateMap, Arc<AtomicUsize>) {
    let builds = Arc::new(AtomicUsize::new(0));
    let mut state = StateMap::new();
    state.insert("n", 1);
    state.insert(
        "doc",
        StateValue::Lazy(LazyValue::new(Doc {
            name: "d",
            builds: Arc::clone(&builds),
        })),
    );
    (state, builds)
}

#[test]
fn a_lazy_value_is_built_on_first_read_once_and_shared_by_clones() {
    let (state, builds) = state_with_doc();
    let copy = state.clone();
    assert_eq!(builds.load(Ordering::SeqCst), 0);
    assert_eq!(state["doc"]["name"], "d");
    assert_eq!(state["doc"]["tags"][1], "b");
    assert_eq!(copy["doc"]["cfg"], json!({"depth": 2}));
    assert!(state["doc"].is_object());
    assert_eq!(state["doc"].as_object().map(StateMap::len), Some(3));
    assert_eq!(
        serde_json::to_string(&state).unwrap(),
        r#"{"n":1,"doc":{"name":"d","tags":["a","b"],"cfg":{"depth":2}}}"#
    );
    assert_eq!(
        serde_json::Value::from(&state),
        json!({"n": 1, "doc": {"name": "d", "tags": ["a", "b"], "cfg": {"depth": 2}}})
    );
    #[derive(serde::Deserialize, PartialEq, Debug)]
    struct Cfg {
        depth: u32,
    }
    #[derive(serde::Deserialize, PartialEq, Debug)]
    struct Typed {
        name: String,
        cfg: Option<Cfg>,
    }
    let typed: Typed = serde::Deserialize::deserialize(&state["doc"]).unwrap();
    assert_eq!(
        typed,
        Typed {
            name: "d".into(),
            cfg: Some(Cfg { depth: 2 })
        }
    );
    assert_eq!(
        format!("{:?}", state["doc"]),
        r#"{"name":"d","tags":["a","b"],"cfg":{"depth":2}}"#
    );
    // Built once, for every reader and every clone.
    assert_eq!(builds.load(Ordering::SeqCst), 1);
    // Equal to the same JSON held as plain values, and to itself.
    let plain = StateValue::from(json!({"name": "d", "tags": ["a", "b"], "cfg": {"depth": 2}}));
    assert_eq!(state["doc"], plain);
    assert_eq!(plain, state["doc"]);
    assert!(state["doc"].ptr_eq(&copy["doc"]));
    assert!(!state["doc"].ptr_eq(&plain));
}

#[test]
fn writes_through_a_lazy_value_replace_it_with_its_json() {
    // A path write keeps the built keys beside the new one.
    let (mut state, _) = state_with_doc();
    let before = state.clone();
    apply_state_op(
        &mut state,
        StateOp::set_path(["doc", "cfg", "mode"], "fast"),
    );
    assert!(matches!(state.get("doc"), Some(StateValue::Object(_))));
    assert_eq!(
        state["doc"],
        json!({"name": "d", "tags": ["a", "b"], "cfg": {"depth": 2, "mode": "fast"}})
    );
    // The snapshot taken before still holds the node, unchanged.
    assert!(matches!(before.get("doc"), Some(StateValue::Lazy(_))));
    assert_eq!(before["doc"]["cfg"], json!({"depth": 2}));

    // Append, delete, deep merge, `object_mut`, `as_object_mut`.
    let (mut state, _) = state_with_doc();
    apply_state_op(&mut state, StateOp::append(["doc", "tags"], "c"));
    assert_eq!(state["doc"]["tags"], json!(["a", "b", "c"]));
    let (mut state, _) = state_with_doc();
    apply_state_op(&mut state, StateOp::delete_path(["doc", "cfg", "depth"]));
    assert_eq!(state["doc"]["cfg"], json!({}));
    let (mut state, _) = state_with_doc();
    state.deep_merge(StateMap::from(
        json!({"doc": {"cfg": {"extra": true}}})
            .as_object()
            .unwrap(),
    ));
    assert_eq!(state["doc"]["cfg"], json!({"depth": 2, "extra": true}));
    assert_eq!(state["doc"]["name"], "d");
    let (mut state, _) = state_with_doc();
    state.deep_merge_json(json!({"doc": {"name": "e"}}).as_object().unwrap().clone());
    assert_eq!(
        state["doc"],
        json!({"name": "e", "tags": ["a", "b"], "cfg": {"depth": 2}})
    );
    let (mut state, _) = state_with_doc();
    state.object_mut("doc").insert("k", 1);
    assert_eq!(state["doc"]["k"], 1);
    assert_eq!(state["doc"]["tags"], json!(["a", "b"]));
    let (mut state, _) = state_with_doc();
    let slot = state.get_mut("doc").unwrap();
    slot.as_object_mut().unwrap().remove("tags");
    assert_eq!(state["doc"], json!({"name": "d", "cfg": {"depth": 2}}));

    // A lazy value merged into an object merges as the object it is.
    let (lazy, _) = state_with_doc();
    let mut state = StateMap::from(json!({"doc": {"other": 1}}).as_object().unwrap());
    state.deep_merge(lazy);
    assert_eq!(
        state["doc"],
        json!({"other": 1, "name": "d", "tags": ["a", "b"], "cfg": {"depth": 2}})
    );
}

/// A source that holds some entries as they are: `{"id": ID, "big": …}`.
struct Entries {
    id: StateValue,
    builds: Arc<AtomicUsize>,
}

impl StateSource for Entries {
    fn to_state(&self) -> StateValue {
        self.builds.fetch_add(1, Ordering::SeqCst);
        let mut m = StateMap::new();
        m.insert("id", self.id.clone());
        m.insert("big", json!([1, 2, 3]));
        StateValue::Object(m)
    }
    fn get(&self, key: &str) -> Option<&StateValue> {
        (key == "id").then_some(&self.id)
    }
}

#[test]
fn a_path_read_of_an_entry_the_source_holds_builds_nothing() {
    let builds = Arc::new(AtomicUsize::new(0));
    let v = StateValue::Lazy(LazyValue::new(Entries {
        id: StateValue::from("x1"),
        builds: Arc::clone(&builds),
    }));
    assert_eq!(v["id"], "x1");
    assert_eq!(v.get("id").and_then(StateValue::as_str), Some("x1"));
    assert_eq!(v.get("id".to_owned()), Some(&StateValue::from("x1")));
    assert_eq!(builds.load(Ordering::SeqCst), 0);
    let StateValue::Lazy(node) = &v else {
        unreachable!()
    };
    assert!(node.built().is_none());
    // Anything else builds it, once; the entry is then the built one.
    assert_eq!(v["big"][2], 3);
    assert!(v.get("missing").is_none());
    assert_eq!(builds.load(Ordering::SeqCst), 1);
    assert!(v["id"].ptr_eq(&node.get()["id"]));
    assert_eq!(v, json!({"id": "x1", "big": [1, 2, 3]}));
}
