//! Casts batched on the wire: a per-peer outbox that casts are written
//! into, sent as one gateway message ([`GatewayMsg::Casts`]) carrying
//! several requests, and the reader of that message on the owner.
//!
//! A cast to a peer that reads batches (its gateway is in
//! [`BATCH_GROUP`]) is appended to the peer's [`Outbox`]; the cast that
//! finds the outbox empty asks this node's gateway to flush it (a local
//! message, no timer), and casts made before the gateway's turn go in the
//! same message. Any other request to that peer (a call, a child's stop)
//! flushes the outbox first, so requests from one sender reach the peer
//! in the order they were made. Peers outside the group (an older build,
//! or one that does not read the binary form) are sent one message per
//! request, as before.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use ractor::ActorRef;

use super::envelope::Outgoing;
use super::gateway::GatewayMsg;
use super::telemetry;

/// The process group (in the cluster's scope) a gateway joins when it
/// reads [`GatewayMsg::Casts`]: casts to a gateway in it (and in the
/// binary group) are batched, casts to any other are sent one by one.
pub(crate) const BATCH_GROUP: &str = "jido.nodes.batch1";

/// The first byte of a batch. After it, each request: its length (u32
/// little-endian) and its bytes (a request in the binary or JSON form,
/// as a [`GatewayMsg::Cast`] would carry it).
const BATCH_MAGIC: u8 = 0xB2;

/// A batch this large is sent by the cast that makes it so, without
/// waiting for the gateway's turn (well below ractor_cluster's 16 MiB
/// frame limit).
const FLUSH_AT: usize = 256 * 1024;

/// The first buffer of a batch.
const BATCH_CAPACITY: usize = 4 * 1024;

/// The casts queued for one peer's gateway.
pub(crate) struct Outbox {
    /// This node and the peer's (for telemetry).
    node: String,
    owner: String,
    peer: ActorRef<GatewayMsg>,
    /// The batch being written. Taken and sent under the lock, so
    /// batches (and the requests that flush before they are sent) leave
    /// in the order they were made.
    queue: Mutex<Queue>,
}

/// A batch being written.
#[derive(Default)]
struct Queue {
    /// [`BATCH_MAGIC`] and framed requests, or empty.
    bytes: Vec<u8>,
    /// How many requests it holds.
    casts: u32,
}

/// Asks the local gateway to send an outbox's batch (see
/// [`GatewayMsg::Flush`]).
#[doc(hidden)]
pub struct Flush(pub(crate) Arc<Outbox>);

/// The peer's gateway is gone (its session ended).
pub(crate) struct PeerGone;

impl Outbox {
    pub(crate) fn new(node: &str, owner: &str, peer: ActorRef<GatewayMsg>) -> Self {
        Outbox {
            node: node.to_owned(),
            owner: owner.to_owned(),
            peer,
            queue: Mutex::new(Queue::default()),
        }
    }

    /// Queues a cast request. The first one queued asks `flusher` (this
    /// node's gateway) to send the batch in its next turn; a batch past
    /// [`FLUSH_AT`] is sent at once.
    ///
    /// # Errors
    ///
    /// [`PeerGone`] when the peer's gateway no longer runs (the request
    /// is not queued).
    pub(crate) fn cast(
        self: &Arc<Self>,
        request: &Outgoing<'_>,
        flusher: &ActorRef<GatewayMsg>,
    ) -> Result<(), PeerGone> {
        if !ractor::ACTIVE_STATES.contains(&self.peer.get_status()) {
            return Err(PeerGone);
        }
        let mut guard = self.lock();
        let queue = &mut *guard;
        let first = queue.bytes.is_empty();
        if first {
            queue.bytes.reserve(BATCH_CAPACITY);
            queue.bytes.push(BATCH_MAGIC);
        }
        let bytes = &mut queue.bytes;
        let at = bytes.len();
        bytes.extend_from_slice(&[0; 4]);
        request.encode_binary_into(bytes);
        match u32::try_from(bytes.len() - at - 4) {
            Ok(len) => {
                bytes[at..at + 4].copy_from_slice(&len.to_le_bytes());
                queue.casts += 1;
            }
            Err(_) => {
                // Longer than a frame can say (4 GiB): sent alone, after
                // what was queued before it.
                let single = bytes.split_off(at + 4);
                bytes.truncate(at);
                return self.send(queue).and_then(|()| {
                    self.peer
                        .send_message(GatewayMsg::Cast(single))
                        .map_err(|_| PeerGone)
                });
            }
        }
        if queue.bytes.len() >= FLUSH_AT {
            // A flush asked for by an earlier cast finds what comes next.
            return self.send(queue);
        }
        drop(guard);
        if first
            && flusher
                .send_message(GatewayMsg::Flush(Flush(Arc::clone(self))))
                .is_err()
        {
            // No local gateway any more (the cluster is shutting down):
            // sent now.
            return self.flush();
        }
        Ok(())
    }

    /// Sends what is queued (nothing when the queue is empty).
    ///
    /// # Errors
    ///
    /// [`PeerGone`] when the peer's gateway no longer runs (what was
    /// queued is lost, as a message in flight on a lost session is).
    pub(crate) fn flush(&self) -> Result<(), PeerGone> {
        let mut queue = self.lock();
        self.send(&mut queue)
    }

    /// Sends the batch in `queue` (held locked) and leaves it empty.
    fn send(&self, queue: &mut Queue) -> Result<(), PeerGone> {
        if queue.bytes.is_empty() {
            return Ok(());
        }
        let Queue { bytes, casts } = std::mem::take(queue);
        telemetry::batch(&self.node, &self.owner, casts, bytes.len());
        self.peer
            .send_message(GatewayMsg::Casts(bytes))
            .map_err(|_| PeerGone)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The outboxes of a node, one per peer that reads batches.
#[derive(Default)]
pub(crate) struct Outboxes {
    by_node: Mutex<HashMap<String, Arc<Outbox>>>,
}

impl Outboxes {
    /// The outbox for `node`'s gateway `peer` (a new one when the peer's
    /// gateway changed: a new session).
    pub(crate) fn of(&self, this: &str, node: &str, peer: &ActorRef<GatewayMsg>) -> Arc<Outbox> {
        let mut map = self.by_node.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(outbox) = map.get(node)
            && outbox.peer.get_id() == peer.get_id()
        {
            return Arc::clone(outbox);
        }
        let outbox = Arc::new(Outbox::new(this, node, peer.clone()));
        let old = map.insert(node.to_owned(), Arc::clone(&outbox));
        drop(map);
        if let Some(old) = old {
            // Its peer is gone: this fails, and what it held is lost with
            // the session, as anything in flight on it.
            let _ = old.flush();
        }
        outbox
    }

    /// Sends what is queued for `node` (before another request to it, so
    /// that it does not overtake earlier casts).
    pub(crate) fn flush(&self, node: &str) {
        let outbox = self
            .by_node
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(node)
            .cloned();
        if let Some(outbox) = outbox {
            let _ = outbox.flush();
        }
    }

    /// Sends what every outbox holds (the gateway, whose turn would have
    /// sent it, stops).
    pub(crate) fn flush_all(&self) {
        let all: Vec<Arc<Outbox>> = self
            .by_node
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        for outbox in all {
            let _ = outbox.flush();
        }
    }

    /// Forgets the outboxes of nodes that left (or whose gateway
    /// changed), sending what they hold.
    pub(crate) fn retain(&self, live: &HashMap<String, ActorRef<GatewayMsg>>) {
        let mut gone = Vec::new();
        self.by_node
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|node, outbox| {
                let keep = live
                    .get(node)
                    .is_some_and(|g| g.get_id() == outbox.peer.get_id());
                if !keep {
                    gone.push(Arc::clone(outbox));
                }
                keep
            });
        for outbox in gone {
            let _ = outbox.flush();
        }
    }
}

/// The requests of a batch, in order: each frame's bytes, or an error for
/// a batch that is not one (then nothing more is read: the frames after a
/// bad length cannot be found).
pub(crate) struct Frames<'a> {
    bytes: &'a [u8],
    at: usize,
    failed: bool,
}

/// Why a batch could not be read further.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BadBatch {
    /// It does not start with [`BATCH_MAGIC`].
    #[error("not a cast batch")]
    Magic,
    /// A frame's length runs past the end.
    #[error("truncated cast batch at byte {0}")]
    Truncated(usize),
}

impl<'a> Frames<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Frames {
            bytes,
            at: 0,
            failed: false,
        }
    }
}

impl<'a> Iterator for Frames<'a> {
    type Item = Result<&'a [u8], BadBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        if self.at == 0 {
            if self.bytes.first() != Some(&BATCH_MAGIC) {
                self.failed = true;
                return Some(Err(BadBatch::Magic));
            }
            self.at = 1;
        }
        if self.at == self.bytes.len() {
            return None;
        }
        let frame = (|| {
            let head = self.bytes.get(self.at..self.at.checked_add(4)?)?;
            let len = usize::try_from(u32::from_le_bytes(head.try_into().ok()?)).ok()?;
            let start = self.at + 4;
            let end = start.checked_add(len)?;
            let frame = self.bytes.get(start..end)?;
            Some((frame, end))
        })();
        match frame {
            Some((frame, end)) => {
                self.at = end;
                Some(Ok(frame))
            }
            None => {
                self.failed = true;
                Some(Err(BadBatch::Truncated(self.at)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::envelope::{Op, Request};
    use crate::signal::Signal;
    use ractor::{Actor, ActorProcessingErr};
    use tokio::sync::mpsc;

    /// A stand-in gateway: reports what it receives.
    struct Capture;

    /// What a stand-in gateway received.
    #[derive(Debug, PartialEq)]
    enum Got {
        /// The requests of a batch: each one's signal data.
        Casts(Vec<serde_json::Value>),
        Flush,
        Other,
    }

    impl Actor for Capture {
        type Msg = GatewayMsg;
        type State = mpsc::UnboundedSender<Got>;
        type Arguments = mpsc::UnboundedSender<Got>;

        async fn pre_start(
            &self,
            _: ActorRef<GatewayMsg>,
            tx: Self::Arguments,
        ) -> Result<Self::State, ActorProcessingErr> {
            Ok(tx)
        }

        async fn handle(
            &self,
            _: ActorRef<GatewayMsg>,
            msg: GatewayMsg,
            tx: &mut Self::State,
        ) -> Result<(), ActorProcessingErr> {
            let got = match msg {
                GatewayMsg::Casts(bytes) => Got::Casts(
                    Frames::new(&bytes)
                        .map(|f| {
                            let mut req = Request::decode(f.ok().unwrap()).unwrap();
                            assert_eq!((req.op, req.agent.as_str()), (Op::Cast, "counter:1"));
                            req.take_signal().unwrap().data().cloned().unwrap()
                        })
                        .collect(),
                ),
                GatewayMsg::Flush(Flush(outbox)) => {
                    let _ = outbox.flush();
                    Got::Flush
                }
                _ => Got::Other,
            };
            let _ = tx.send(got);
            Ok(())
        }
    }

    async fn capture() -> (ActorRef<GatewayMsg>, mpsc::UnboundedReceiver<Got>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let (actor, _) = Actor::spawn(None, Capture, tx).await.unwrap();
        (actor, rx)
    }

    fn cast(outbox: &Arc<Outbox>, flusher: &ActorRef<GatewayMsg>, n: u64) -> Result<(), PeerGone> {
        let signal = Signal::new("counter.add", serde_json::json!({"n": n}));
        outbox.cast(
            &Outgoing::new(Op::Cast, "counter:1", None).signal(&signal),
            flusher,
        )
    }

    #[tokio::test]
    async fn casts_leave_as_one_batch_in_order_and_one_flush_is_asked_per_batch() {
        let (peer, mut sent) = capture().await;
        let (flusher, mut asked) = capture().await;
        let outbox = Arc::new(Outbox::new("node-a", "node-b", peer.clone()));
        for n in 1..=3 {
            assert!(cast(&outbox, &flusher, n).is_ok());
        }
        // One flush asked (by the first cast); the flusher's turn sends
        // the three as one message, in order.
        assert_eq!(asked.recv().await, Some(Got::Flush));
        let data = |ns: &[u64]| -> Vec<serde_json::Value> {
            ns.iter().map(|n| serde_json::json!({"n": n})).collect()
        };
        assert_eq!(sent.recv().await, Some(Got::Casts(data(&[1, 2, 3]))));
        // A flush with nothing queued sends nothing; the next cast asks
        // for a flush again.
        assert!(outbox.flush().is_ok());
        assert!(cast(&outbox, &flusher, 4).is_ok());
        assert!(outbox.flush().is_ok());
        assert_eq!(sent.recv().await, Some(Got::Casts(data(&[4]))));
        assert_eq!(asked.recv().await, Some(Got::Flush));
        assert!(sent.try_recv().is_err());

        // A stopped peer: the cast is refused, not queued.
        peer.stop_and_wait(None, None).await.unwrap();
        assert!(matches!(cast(&outbox, &flusher, 5), Err(PeerGone)));
        flusher.stop_and_wait(None, None).await.unwrap();
    }

    #[tokio::test]
    async fn without_a_local_gateway_a_cast_leaves_at_once() {
        let (peer, mut sent) = capture().await;
        let (flusher, _asked) = capture().await;
        flusher.stop_and_wait(None, None).await.unwrap();
        let outbox = Arc::new(Outbox::new("node-a", "node-b", peer.clone()));
        assert!(cast(&outbox, &flusher, 1).is_ok());
        assert_eq!(
            sent.recv().await,
            Some(Got::Casts(vec![serde_json::json!({"n": 1})]))
        );
        peer.stop_and_wait(None, None).await.unwrap();
    }

    fn batch(frames: &[&[u8]]) -> Vec<u8> {
        let mut out = vec![BATCH_MAGIC];
        for f in frames {
            out.extend_from_slice(&(f.len() as u32).to_le_bytes());
            out.extend_from_slice(f);
        }
        out
    }

    #[test]
    fn frames_come_back_in_order() {
        let bytes = batch(&[b"one", b"", b"three"]);
        let frames: Vec<&[u8]> = Frames::new(&bytes).map(|f| f.ok().unwrap()).collect();
        assert_eq!(frames, [&b"one"[..], b"", b"three"]);
    }

    #[test]
    fn a_bad_batch_is_an_error_not_a_panic() {
        let err = |bytes: &[u8]| -> Vec<String> {
            Frames::new(bytes)
                .map(|f| match f {
                    Ok(frame) => String::from_utf8_lossy(frame).into_owned(),
                    Err(e) => e.to_string(),
                })
                .collect()
        };
        assert_eq!(err(b""), ["not a cast batch"]);
        assert_eq!(err(b"{\"v\":1}"), ["not a cast batch"]);
        assert_eq!(err(&[BATCH_MAGIC]), Vec::<String>::new());
        // A frame after a good one runs past the end: the good one is read.
        let mut bytes = batch(&[b"ok"]);
        bytes.extend_from_slice(&9u32.to_le_bytes());
        bytes.extend_from_slice(b"short");
        assert_eq!(err(&bytes), ["ok", "truncated cast batch at byte 7"]);
        // Not even a whole length.
        assert_eq!(
            err(&[BATCH_MAGIC, 1, 0]),
            ["truncated cast batch at byte 1"]
        );
        assert_eq!(
            err(&[BATCH_MAGIC, 0xff, 0xff, 0xff, 0xff, 0]),
            ["truncated cast batch at byte 1"]
        );
    }
}
