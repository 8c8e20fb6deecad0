//! Assembling streamed tool-call fragments into complete calls.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{LlmEvent, ToolCall};

#[derive(Debug, Default, Clone)]
struct Partial {
    id: Option<String>,
    name: Option<String>,
    arguments: String,
}

/// Joins [`LlmEvent::ToolCallDelta`] fragments back into [`ToolCall`]s:
/// per call index, the first id and name seen and the concatenated
/// argument text, parsed as JSON at the end.
///
/// The final [`LlmEvent::Done`] already carries the assembled calls; this
/// is for consumers that show calls as they arrive, or check a stream.
///
/// # Examples
///
/// ```
/// use jido::ai::client::{LlmEvent, ToolCallAssembler};
/// use serde_json::json;
///
/// let mut calls = ToolCallAssembler::new();
/// calls.push(&LlmEvent::ToolCallDelta {
///     index: 0,
///     id: Some("call_1".into()),
///     name: Some("multiply".into()),
///     arguments: "{\"a\": ".into(),
/// });
/// calls.push(&LlmEvent::ToolCallDelta { index: 0, id: None, name: None, arguments: "6}".into() });
/// let calls = calls.finish();
/// assert_eq!(calls[0].name, "multiply");
/// assert_eq!(*calls[0].arguments, json!({"a": 6}));
/// ```
#[derive(Debug, Default, Clone)]
pub struct ToolCallAssembler {
    calls: BTreeMap<usize, Partial>,
}

impl ToolCallAssembler {
    /// An empty assembler.
    pub fn new() -> Self {
        Self::default()
    }

    /// Take one event; returns whether it was a tool-call fragment.
    pub fn push(&mut self, event: &LlmEvent) -> bool {
        let LlmEvent::ToolCallDelta {
            index,
            id,
            name,
            arguments,
        } = event
        else {
            return false;
        };
        let call = self.calls.entry(*index).or_default();
        if call.id.is_none() {
            call.id.clone_from(id);
        }
        if call.name.is_none() {
            call.name.clone_from(name);
        }
        call.arguments.push_str(arguments);
        true
    }

    /// Whether no fragment was taken.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// The argument text gathered so far for call `index`.
    pub fn arguments(&self, index: usize) -> Option<&str> {
        self.calls.get(&index).map(|c| c.arguments.as_str())
    }

    /// The calls in index order. Arguments are parsed as JSON: empty text
    /// becomes `{}`, text that is not JSON stays a JSON string (the tool
    /// layer reports it to the model). A call without id gets
    /// `call_{index}`.
    pub fn finish(self) -> Vec<ToolCall> {
        self.calls
            .into_iter()
            .map(|(index, call)| ToolCall {
                id: call.id.unwrap_or_else(|| format!("call_{index}")),
                name: call.name.unwrap_or_default(),
                arguments: parse_arguments(call.arguments).into(),
            })
            .collect()
    }
}

/// Tool arguments from their JSON text: `{}` when blank, the text itself
/// (a JSON string) when it is not JSON.
pub(crate) fn parse_arguments(text: String) -> Value {
    if text.trim().is_empty() {
        return Value::Object(Default::default());
    }
    serde_json::from_str(&text).unwrap_or(Value::String(text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn delta(index: usize, id: Option<&str>, name: Option<&str>, args: &str) -> LlmEvent {
        LlmEvent::ToolCallDelta {
            index,
            id: id.map(Into::into),
            name: name.map(Into::into),
            arguments: args.into(),
        }
    }

    #[test]
    fn interleaved_calls_assemble_in_index_order() {
        let mut a = ToolCallAssembler::new();
        assert!(a.push(&delta(1, Some("b"), Some("sub"), "{\"x\"")));
        assert!(a.push(&delta(0, Some("a"), Some("add"), "")));
        assert!(a.push(&delta(1, None, None, ":1}")));
        assert!(!a.push(&LlmEvent::Content("hi".into())));
        assert_eq!(a.arguments(1), Some("{\"x\":1}"));
        let calls = a.finish();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].id, "a");
        assert_eq!(calls[0].arguments, json!({}).into());
        assert_eq!(calls[1].name, "sub");
        assert_eq!(calls[1].arguments, json!({"x": 1}).into());
    }

    #[test]
    fn broken_json_and_missing_id_are_kept_not_dropped() {
        let mut a = ToolCallAssembler::new();
        a.push(&delta(2, None, Some("t"), "{\"x\": "));
        let calls = a.finish();
        assert_eq!(calls[0].id, "call_2");
        assert_eq!(calls[0].arguments, json!("{\"x\": ").into());
    }
}
