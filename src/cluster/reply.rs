//! The answer to a call by id, read when asked.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::envelope::{Reply, checkpoint_json, checkpoint_value};
use crate::agent::AgentState;
use crate::error::{Error, Result};

/// The answer of [`ClusterAgent::call_reply`](super::ClusterAgent::call_reply):
/// the agent's checkpoint `{version, agent, id, state}` as it arrived (the
/// JSON the owner node wrote, its syntax checked, or the state of an agent
/// of this node), turned into a `Value`, JSON text or a type of yours only
/// when asked. A caller that only needs to know that the call was
/// processed, or that forwards the JSON, builds no `Value` tree.
///
/// # Examples
///
/// ```no_run
/// # async fn f(cluster: jido::cluster::Cluster) -> jido::Result<()> {
/// use std::time::Duration;
/// use jido::signal::Signal;
///
/// #[derive(serde::Deserialize)]
/// struct Order { id: String, state: serde_json::Value }
///
/// let reply = cluster
///     .agent("order:17")
///     .call_reply(Signal::new("order.pay", serde_json::json!({"amount": 42})), Duration::from_secs(5))
///     .await?;
/// println!("{}", reply.json());          // the checkpoint's JSON text
/// let order: Order = reply.decode()?;    // or a type of yours
/// assert_eq!(order.id, "order:17");
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct CallReply(Body);

#[derive(Clone)]
enum Body {
    /// A reply from another node: its text and where the checkpoint's
    /// JSON is in it.
    Remote(String, Range<usize>),
    /// The answer of an agent of this node.
    Local(AgentState),
}

impl CallReply {
    pub(crate) fn local(state: AgentState) -> Self {
        CallReply(Body::Local(state))
    }

    /// The checkpoint of a reply envelope from another node.
    ///
    /// # Errors
    ///
    /// The remote error; `Validation` "malformed cluster reply".
    pub(crate) fn remote(bytes: Vec<u8>) -> Result<Self> {
        let (text, ok) = Reply::decode_json(bytes)?;
        Ok(CallReply(Body::Remote(text, ok)))
    }

    /// The checkpoint as a JSON value (what
    /// [`ClusterAgent::call`](super::ClusterAgent::call) returns).
    ///
    /// # Errors
    ///
    /// `Validation` "malformed cluster reply" when the owner's JSON does
    /// not make a value (nested deeper than serde_json reads).
    pub fn into_value(self) -> Result<Value> {
        match self.0 {
            Body::Local(state) => Ok(checkpoint_value(&state)),
            Body::Remote(text, ok) => serde_json::from_str(text.get(ok).unwrap_or_default())
                .map_err(|e| Error::validation("malformed cluster reply").with_source(e)),
        }
    }

    /// The checkpoint's JSON text (compact), without building a value.
    pub fn json(&self) -> Cow<'_, str> {
        match &self.0 {
            Body::Local(state) => Cow::Owned(checkpoint_json(state)),
            Body::Remote(text, ok) => Cow::Borrowed(text.get(ok.clone()).unwrap_or_default()),
        }
    }

    /// The checkpoint decoded into `T` (a struct with the fields of
    /// `{version, agent, id, state}` you need), without a `Value` in
    /// between for a reply from another node.
    ///
    /// # Errors
    ///
    /// `Validation` "invalid call reply" when the checkpoint does not fit
    /// `T` (the source says why).
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T> {
        let decoded = match &self.0 {
            Body::Local(state) => serde_json::from_value(checkpoint_value(state)),
            Body::Remote(text, ok) => {
                serde_json::from_str(text.get(ok.clone()).unwrap_or_default())
            }
        };
        decoded.map_err(|e| Error::validation("invalid call reply").with_source(e))
    }
}

impl fmt::Debug for CallReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("CallReply").field(&self.json()).finish()
    }
}
