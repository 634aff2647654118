//! The connection a subscription listens on: one server's, or a cluster's (redis-rs sends each
//! shard channel's `SSUBSCRIBE` to the master of its slot, with a connection per node, and
//! hands every node's pushes to one sender). Both are in RESP3, which a multiplexed connection
//! needs for subscriptions and the pushes they bring.

use redis::{AsyncConnectionConfig, ProtocolVersion, PushInfo, RedisResult};
use tokio::sync::mpsc;
use tokio::time::Duration;

/// Where a subscription connects.
#[derive(Clone, Debug)]
pub(super) enum Source {
    /// One server (or a cluster node whose slots hold every channel).
    One(redis::Client),
    /// A cluster, from its seed nodes.
    #[cfg(feature = "cluster")]
    Cluster(Vec<redis::ConnectionInfo>),
}

/// Which subscribe the server takes: sharded where it has it, plain where it does not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Subscribe {
    Shard,
    Plain,
}

impl Subscribe {
    pub(super) fn command(self) -> &'static str {
        match self {
            Subscribe::Shard => "SSUBSCRIBE",
            Subscribe::Plain => "SUBSCRIBE",
        }
    }
}

/// One session's connection.
pub(super) enum Subscriber {
    One(redis::aio::MultiplexedConnection),
    #[cfg(feature = "cluster")]
    Cluster(redis::cluster_async::ClusterConnection),
}

impl Source {
    /// The same addresses and credentials, in RESP3.
    pub(super) fn resp3(self) -> RedisResult<Source> {
        fn resp3(info: redis::ConnectionInfo) -> redis::ConnectionInfo {
            let settings = info
                .redis_settings()
                .clone()
                .set_protocol(ProtocolVersion::RESP3);
            info.set_redis_settings(settings)
        }
        Ok(match self {
            Source::One(client) => Source::One(redis::Client::open(resp3(
                client.get_connection_info().clone(),
            ))?),
            #[cfg(feature = "cluster")]
            Source::Cluster(nodes) => Source::Cluster(nodes.into_iter().map(resp3).collect()),
        })
    }

    /// Connects, every push to `pushes`; each connect and command may take up to `within`.
    pub(super) async fn connect(
        &self,
        pushes: mpsc::UnboundedSender<PushInfo>,
        within: Duration,
    ) -> RedisResult<Subscriber> {
        match self {
            Source::One(client) => {
                let config = AsyncConnectionConfig::new()
                    .set_push_sender(pushes)
                    .set_connection_timeout(Some(within))
                    .set_response_timeout(Some(within));
                let con = client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await?;
                Ok(Subscriber::One(con))
            }
            #[cfg(feature = "cluster")]
            Source::Cluster(nodes) => {
                let client = redis::cluster::ClusterClientBuilder::new(nodes.clone())
                    .use_protocol(ProtocolVersion::RESP3)
                    .push_sender(pushes)
                    .connection_timeout(within)
                    .response_timeout(within)
                    .build()?;
                Ok(Subscriber::Cluster(client.get_async_connection().await?))
            }
        }
    }
}

impl Subscriber {
    /// Subscribes to one channel (one per command: a command answers with one confirmation
    /// per channel, and the connection matches one answer to each command).
    pub(super) async fn subscribe(&mut self, kind: Subscribe, channel: &[u8]) -> RedisResult<()> {
        match self {
            Subscriber::One(con) => {
                redis::cmd(kind.command())
                    .arg(channel)
                    .query_async::<redis::Value>(con)
                    .await?;
            }
            #[cfg(feature = "cluster")]
            Subscriber::Cluster(con) => match kind {
                Subscribe::Shard => con.ssubscribe(channel).await?,
                Subscribe::Plain => con.subscribe(channel).await?,
            },
        }
        Ok(())
    }

    /// Pings the server, or every master of the cluster: each holds some of the channels.
    pub(super) async fn ping(&mut self) -> RedisResult<()> {
        match self {
            Subscriber::One(con) => redis::cmd("PING").query_async::<redis::Value>(con).await?,
            #[cfg(feature = "cluster")]
            Subscriber::Cluster(con) => {
                use redis::cluster_routing::{
                    MultipleNodeRoutingInfo, ResponsePolicy, RoutingInfo,
                };
                con.route_command(
                    redis::cmd("PING"),
                    RoutingInfo::MultiNode((
                        MultipleNodeRoutingInfo::AllMasters,
                        Some(ResponsePolicy::AllSucceeded),
                    )),
                )
                .await?
            }
        };
        Ok(())
    }
}
