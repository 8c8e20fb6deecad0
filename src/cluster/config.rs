//! How a node joins a cluster.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

/// The default heartbeat interval (see [`ClusterConfig::heartbeat`]).
pub(crate) const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);
/// The default heartbeat misses (see [`ClusterConfig::heartbeat`]).
pub(crate) const DEFAULT_HEARTBEAT_MISSES: u32 = 5;

/// The configuration of [`Cluster::start`](super::Cluster::start).
///
/// ```
/// use jido::cluster::ClusterConfig;
///
/// let config = ClusterConfig::new("node-a")
///     .cookie("secret")
///     .listen("127.0.0.1:4697".parse().unwrap())
///     .seeds(["127.0.0.1:4698"]);
/// assert_eq!(config.node_name(), "node-a");
/// ```
#[derive(Clone)]
pub struct ClusterConfig {
    pub(crate) node: String,
    pub(crate) cookie: String,
    pub(crate) cluster: String,
    pub(crate) listen: SocketAddr,
    pub(crate) seeds: Vec<String>,
    pub(crate) redial_min: Duration,
    pub(crate) redial_max: Duration,
    pub(crate) heartbeat_interval: Duration,
    pub(crate) heartbeat_misses: u32,
    pub(crate) tls: Option<ClusterTls>,
}

impl fmt::Debug for ClusterConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterConfig")
            .field("node", &self.node)
            .field("cookie", &"[REDACTED]")
            .field("cluster", &self.cluster)
            .field("listen", &self.listen)
            .field("seeds", &self.seeds)
            .field("heartbeat_interval", &self.heartbeat_interval)
            .field("heartbeat_misses", &self.heartbeat_misses)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl ClusterConfig {
    /// A node named `node` (unique in its cluster), listening on
    /// 127.0.0.1 on a port the system picks, with no seeds, cluster
    /// `"default"` and an empty cookie (set one).
    pub fn new(node: impl Into<String>) -> Self {
        ClusterConfig {
            node: node.into(),
            cookie: String::new(),
            cluster: "default".to_owned(),
            listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
            seeds: Vec::new(),
            redial_min: Duration::from_millis(100),
            redial_max: Duration::from_secs(5),
            heartbeat_interval: DEFAULT_HEARTBEAT_INTERVAL,
            heartbeat_misses: DEFAULT_HEARTBEAT_MISSES,
            tls: None,
        }
    }

    /// The node's name.
    pub fn node_name(&self) -> &str {
        &self.node
    }

    /// The shared secret every node of the cluster presents (ractor's
    /// magic-cookie challenge). It authenticates peers; it does not
    /// encrypt: use [`tls`](ClusterConfig::tls) or a private network.
    pub fn cookie(mut self, cookie: impl Into<String>) -> Self {
        self.cookie = cookie.into();
        self
    }

    /// The cluster's name: nodes of different clusters sharing a cookie
    /// still see separate members (default `"default"`).
    pub fn cluster(mut self, name: impl Into<String>) -> Self {
        self.cluster = name.into();
        self
    }

    /// The address the node listens on for peers (default 127.0.0.1 on a
    /// free port). Its IP is also what peers are told to dial.
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen = addr;
        self
    }

    /// Peers to dial at start, as `host:port`, and to redial whenever the
    /// session to them is lost.
    pub fn seeds<I, S>(mut self, seeds: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.seeds = seeds.into_iter().map(Into::into).collect();
        self
    }

    /// The redial backoff: from `min`, doubling up to `max` (default
    /// 100 ms to 5 s).
    pub fn redial_backoff(mut self, min: Duration, max: Duration) -> Self {
        self.redial_min = min;
        self.redial_max = max.max(min);
        self
    }

    /// The gateways' heartbeat: every `interval` this node's gateway sends
    /// a beat to every peer's gateway, over the same session as the
    /// requests. A peer from which nothing was heard for `misses`
    /// intervals is treated as down (a silent partition: ractor_cluster's
    /// own ping never times out): it leaves [`members`](super::Cluster::members)
    /// (its ids move to the other nodes), watches of its agents end with
    /// `noconnection`, calls to it fail with "node connection lost", and
    /// its session is closed so that the connector redials it; it is a
    /// member again once its session is back and its beats arrive.
    /// Default 1 s and 5 misses; a zero `interval` turns the heartbeat off,
    /// `misses` is at least 1.
    ///
    /// ```
    /// use std::time::Duration;
    /// use jido::cluster::ClusterConfig;
    ///
    /// let config = ClusterConfig::new("node-a").heartbeat(Duration::from_millis(200), 3);
    /// assert_eq!(config.heartbeat_timeout(), Some(Duration::from_millis(600)));
    /// ```
    pub fn heartbeat(mut self, interval: Duration, misses: u32) -> Self {
        self.heartbeat_interval = interval;
        self.heartbeat_misses = misses.max(1);
        self
    }

    /// How long a silent peer stays a member: the heartbeat interval times
    /// the misses, `None` when the heartbeat is off.
    pub fn heartbeat_timeout(&self) -> Option<Duration> {
        if self.heartbeat_interval.is_zero() {
            return None;
        }
        self.heartbeat_interval.checked_mul(self.heartbeat_misses)
    }

    /// Encrypts cluster traffic with TLS (rustls): incoming sessions are
    /// accepted with `acceptor`, seeds are dialled with `connector` and
    /// verified as `server_name`.
    pub fn tls(mut self, tls: ClusterTls) -> Self {
        self.tls = Some(tls);
        self
    }
}

/// TLS for cluster sessions (see [`ClusterConfig::tls`]).
#[derive(Clone)]
pub struct ClusterTls {
    pub(crate) acceptor: tokio_rustls::TlsAcceptor,
    pub(crate) connector: tokio_rustls::TlsConnector,
    pub(crate) server_name: tokio_rustls::rustls::pki_types::ServerName<'static>,
}

impl ClusterTls {
    /// From a rustls acceptor (incoming sessions), a connector (outgoing)
    /// and the name the peers' certificates are verified against.
    pub fn new(
        acceptor: tokio_rustls::TlsAcceptor,
        connector: tokio_rustls::TlsConnector,
        server_name: tokio_rustls::rustls::pki_types::ServerName<'static>,
    ) -> Self {
        ClusterTls {
            acceptor,
            connector,
            server_name,
        }
    }
}
