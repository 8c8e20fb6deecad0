//! The text of a signal's id and time: the forms the runtime writes (a
//! UUIDv7, an RFC 3339 time with microseconds) are kept inline, so making a
//! signal allocates neither; any other text is on the heap.

use std::fmt;

/// Text of at most a few dozen bytes: `N` ASCII bytes inline, or anything
/// else boxed. Compares, hashes and prints as the text.
#[derive(Clone)]
pub(crate) enum Text<const N: usize> {
    /// Exactly `N` ASCII bytes (written by the runtime).
    Inline([u8; N]),
    /// Any other text (given by the user or parsed).
    Heap(Box<str>),
}

impl<const N: usize> Text<N> {
    /// `bytes` inline when they are ASCII (always, for what the runtime
    /// writes), else copied to the heap.
    pub(crate) fn inline(bytes: [u8; N]) -> Self {
        if bytes.is_ascii() {
            Text::Inline(bytes)
        } else {
            Text::Heap(String::from_utf8_lossy(&bytes).into())
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        match self {
            // ASCII by construction (`inline`): never the empty fallback.
            Text::Inline(bytes) => std::str::from_utf8(bytes).unwrap_or_default(),
            Text::Heap(text) => text,
        }
    }

    pub(crate) fn into_string(self) -> String {
        match self {
            Text::Inline(_) => self.as_str().to_owned(),
            Text::Heap(text) => text.into(),
        }
    }
}

impl<const N: usize> From<String> for Text<N> {
    fn from(text: String) -> Self {
        Text::Heap(text.into_boxed_str())
    }
}

impl<const N: usize> PartialEq for Text<N> {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl<const N: usize> fmt::Debug for Text<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_str().fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::Text;

    #[test]
    fn inline_and_heap_compare_as_text() {
        let inline = Text::<3>::inline(*b"abc");
        assert_eq!(inline.as_str(), "abc");
        assert_eq!(inline, Text::from("abc".to_owned()));
        assert_ne!(inline, Text::from("abd".to_owned()));
        assert_eq!(format!("{inline:?}"), "\"abc\"");
        assert_eq!(inline.into_string(), "abc");
    }

    #[test]
    fn non_ascii_bytes_go_to_the_heap() {
        let text = Text::<2>::inline([0xc3, 0xa9]);
        assert!(matches!(text, Text::Heap(_)));
        assert_eq!(text.as_str(), "é");
    }
}
