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
    pub(crate) fn as_str(&self) -> &str {
        match self {
            // ASCII by construction (only the runtime writes it): never
            // the empty fallback.
            Text::Inline(bytes) => std::str::from_utf8(bytes).unwrap_or_default(),
            Text::Heap(text) => text,
        }
    }

    /// The text's bytes, without the UTF-8 check of [`as_str`](Self::as_str)
    /// (for writers of bytes).
    #[cfg(feature = "cluster")]
    pub(crate) fn as_bytes(&self) -> &[u8] {
        match self {
            Text::Inline(bytes) => bytes,
            Text::Heap(text) => text.as_bytes(),
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

/// How many bytes of a [`Short`] text are kept inline.
const SHORT: usize = 22;

/// Text kept inline when it has at most 22 bytes (a signal's type, almost
/// always), boxed otherwise: making a signal of a short type allocates
/// nothing for it, and the actor that receives it frees nothing. Compares
/// and prints as the text.
#[derive(Clone)]
pub(crate) enum Short {
    /// The first `len` bytes of the array (a copy of a `str`).
    Inline(u8, [u8; SHORT]),
    /// Longer text.
    Heap(Box<str>),
}

impl Short {
    /// A copy of `text`.
    pub(crate) fn new(text: &str) -> Self {
        match u8::try_from(text.len()) {
            Ok(len) if text.len() <= SHORT => {
                let mut bytes = [0; SHORT];
                bytes[..text.len()].copy_from_slice(text.as_bytes());
                Short::Inline(len, bytes)
            }
            _ => Short::Heap(text.into()),
        }
    }

    /// `text`, inline when short (its buffer is then freed), else in its
    /// own buffer.
    pub(crate) fn from_string(text: String) -> Self {
        if text.len() <= SHORT {
            Short::new(&text)
        } else {
            Short::Heap(text.into_boxed_str())
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        match self {
            // A copy of a whole `str`: never the empty fallback.
            Short::Inline(len, bytes) => bytes
                .get(..usize::from(*len))
                .and_then(|b| std::str::from_utf8(b).ok())
                .unwrap_or_default(),
            Short::Heap(text) => text,
        }
    }

    /// Whether the text is `text` (bytes compared: no UTF-8 check).
    pub(crate) fn is(&self, text: &str) -> bool {
        match self {
            Short::Inline(len, bytes) => {
                usize::from(*len) == text.len() && bytes.get(..text.len()) == Some(text.as_bytes())
            }
            Short::Heap(own) => **own == *text,
        }
    }

    /// The text's bytes, without the UTF-8 check of [`as_str`](Self::as_str)
    /// (for writers of bytes).
    #[cfg(feature = "cluster")]
    pub(crate) fn as_bytes(&self) -> &[u8] {
        match self {
            Short::Inline(len, bytes) => bytes.get(..usize::from(*len)).unwrap_or_default(),
            Short::Heap(text) => text.as_bytes(),
        }
    }

    pub(crate) fn into_string(self) -> String {
        match self {
            Short::Inline(..) => self.as_str().to_owned(),
            Short::Heap(text) => text.into(),
        }
    }
}

impl PartialEq for Short {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl fmt::Debug for Short {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_str().fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::{Short, Text};

    #[test]
    fn is_compares_as_the_text() {
        for own in [
            "",
            "ai.llm.response",
            "a.type.of.exactly.22.b",
            "a much longer signal type",
        ] {
            let short = Short::new(own);
            for other in [
                "",
                "ai.llm.response",
                "ai.llm.respons",
                "ai.llm.responsex",
                own,
            ] {
                assert_eq!(short.is(other), own == other, "{own} / {other}");
            }
        }
    }

    #[test]
    fn short_text_is_inline_up_to_22_bytes() {
        for text in [
            "",
            "noop",
            "jido.agent.child.exit",
            "é.ü",
            "abcdefghijklmnopqrstuv",
        ] {
            let short = Short::new(text);
            assert!(matches!(short, Short::Inline(..)), "{text}");
            assert_eq!(short.as_str(), text);
            assert_eq!(Short::from_string(text.to_owned()), short);
            assert_eq!(short.clone().into_string(), text);
        }
        let long = "com.example.order.created.v1";
        let short = Short::new(long);
        assert!(matches!(short, Short::Heap(_)));
        assert_eq!(short.as_str(), long);
        assert_eq!(Short::from_string(long.to_owned()), short);
        assert_eq!(format!("{short:?}"), format!("{long:?}"));
        assert_ne!(Short::new("a"), Short::new("b"));
    }

    #[test]
    fn inline_and_heap_compare_as_text() {
        let inline = Text::<3>::Inline(*b"abc");
        assert_eq!(inline.as_str(), "abc");
        assert_eq!(inline, Text::from("abc".to_owned()));
        assert_ne!(inline, Text::from("abd".to_owned()));
        assert_eq!(format!("{inline:?}"), "\"abc\"");
        assert_eq!(inline.into_string(), "abc");
    }
}
