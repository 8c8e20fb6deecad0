//! [`Messages`]: the conversation of a model call, shared.

use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::Message;

/// The messages of a model call ([`LlmRequest::messages`],
/// the `context` of [`LlmGenerate`] / [`LlmStream`]): a persistent list of
/// shared [`Message`]s.
///
/// Cloning it copies no message (a strategy handing its conversation to
/// every model call, the runtime copying a directive into its request),
/// and pushing onto a clone leaves the original as it was: a call's
/// conversation costs the same beside 10 000 earlier messages as beside
/// none.
///
/// It reads like a list (`len`, `iter`, `first`, `last`, indexing),
/// converts from a `Vec<Message>` (`.into()`), compares with one, and
/// serialises as a JSON array of messages.
///
/// [`LlmRequest::messages`]: super::LlmRequest::messages
/// [`LlmGenerate`]: crate::ai::LlmGenerate
/// [`LlmStream`]: crate::ai::LlmStream
///
/// ```
/// use jido::ai::{Message, Messages};
///
/// let history = Messages::from(vec![Message::user("What is 6 times 7?")]);
/// let mut next = history.clone(); // no message copied
/// next.push(Message::assistant("42"));
/// assert_eq!(history.len(), 1);
/// assert_eq!(next.len(), 2);
/// assert_eq!(next[1].content, "42");
/// assert_eq!(next.last().map(|m| m.content.as_str()), Some("42"));
/// assert_eq!(history, vec![Message::user("What is 6 times 7?")]);
/// ```
#[derive(Clone, Default)]
pub struct Messages(imbl::Vector<Arc<Message>>);

impl Messages {
    /// No messages.
    pub fn new() -> Self {
        Self::default()
    }

    /// The number of messages.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Appends `message`.
    pub fn push(&mut self, message: impl Into<Arc<Message>>) {
        self.0.push_back(message.into());
    }

    /// Puts `message` first (a system prompt).
    pub fn push_front(&mut self, message: impl Into<Arc<Message>>) {
        self.0.push_front(message.into());
    }

    /// Appends every message of `other` (shared, not copied).
    pub fn append(&mut self, other: Messages) {
        self.0.append(other.0);
    }

    /// Removes the last message and returns it (copied out when another
    /// list shares it).
    pub fn pop(&mut self) -> Option<Message> {
        self.0.pop_back().map(Arc::unwrap_or_clone)
    }

    /// The message at `index`, if any.
    pub fn get(&self, index: usize) -> Option<&Message> {
        self.0.get(index).map(|m| &**m)
    }

    /// The first message, if any.
    pub fn first(&self) -> Option<&Message> {
        self.0.front().map(|m| &**m)
    }

    /// The last message, if any.
    pub fn last(&self) -> Option<&Message> {
        self.0.back().map(|m| &**m)
    }

    /// The messages in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &Message> + DoubleEndedIterator + '_ {
        self.0.iter().map(|m| &**m)
    }

    /// The shared messages in order (a clone of one is a reference
    /// count).
    pub fn shared(&self) -> impl ExactSizeIterator<Item = &Arc<Message>> + '_ {
        self.0.iter()
    }

    /// The list a conversation holds, shared as it is.
    pub(crate) fn from_shared(messages: imbl::Vector<Arc<Message>>) -> Self {
        Self(messages)
    }

    /// The messages, copied into a `Vec`.
    pub fn to_vec(&self) -> Vec<Message> {
        self.iter().cloned().collect()
    }
}

impl std::ops::Index<usize> for Messages {
    type Output = Message;
    fn index(&self, index: usize) -> &Message {
        &self.0[index]
    }
}

impl From<Vec<Message>> for Messages {
    fn from(messages: Vec<Message>) -> Self {
        messages.into_iter().collect()
    }
}

impl FromIterator<Message> for Messages {
    fn from_iter<I: IntoIterator<Item = Message>>(iter: I) -> Self {
        Self(iter.into_iter().map(Arc::new).collect())
    }
}

impl Extend<Message> for Messages {
    fn extend<I: IntoIterator<Item = Message>>(&mut self, iter: I) {
        for message in iter {
            self.push(message);
        }
    }
}

/// The iterator of `&Messages`.
pub struct MessagesIter<'a>(
    imbl::vector::Iter<'a, Arc<Message>, imbl::shared_ptr::DefaultSharedPtr>,
);

impl<'a> Iterator for MessagesIter<'a> {
    type Item = &'a Message;
    fn next(&mut self) -> Option<&'a Message> {
        self.0.next().map(|m| &**m)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl<'a> IntoIterator for &'a Messages {
    type Item = &'a Message;
    type IntoIter = MessagesIter<'a>;
    fn into_iter(self) -> Self::IntoIter {
        MessagesIter(self.0.iter())
    }
}

impl PartialEq for Messages {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self
                .0
                .iter()
                .zip(other.0.iter())
                .all(|(a, b)| Arc::ptr_eq(a, b) || a == b)
    }
}

impl PartialEq<Vec<Message>> for Messages {
    fn eq(&self, other: &Vec<Message>) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl PartialEq<[Message]> for Messages {
    fn eq(&self, other: &[Message]) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl<const N: usize> PartialEq<[Message; N]> for Messages {
    fn eq(&self, other: &[Message; N]) -> bool {
        self == other.as_slice()
    }
}

impl std::fmt::Debug for Messages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Serialize for Messages {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for Messages {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::<Message>::deserialize(d).map(Self::from)
    }
}
