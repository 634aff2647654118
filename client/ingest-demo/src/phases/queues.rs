//! What the demo asks Redis about the backlog's queues while the workers drain them: how
//! many records are left, and how many a worker holds unacknowledged.

use redis_throttle::redis;
use redis_throttle::redis::aio::ConnectionManager;
use redis_throttle::redis::streams::StreamPendingCountReply;

/// Records not yet acknowledged in both queues (acknowledged records are deleted).
pub async fn depth(conn: &ConnectionManager, streams: &[String]) -> Result<u64, String> {
    let mut pipe = redis::pipe();
    for stream in streams {
        pipe.cmd("XLEN").arg(stream);
    }
    let mut conn = conn.clone();
    let lens: Vec<u64> = pipe
        .query_async(&mut conn)
        .await
        .map_err(|e| format!("XLEN: {e}"))?;
    Ok(lens.iter().sum())
}

/// Records `consumer` read and did not acknowledge, in both queues.
pub async fn held_by(
    conn: &ConnectionManager,
    streams: &[String],
    group: &str,
    consumer: &str,
) -> Result<u64, String> {
    let mut held = 0;
    for stream in streams {
        let mut conn = conn.clone();
        let reply: StreamPendingCountReply = redis::cmd("XPENDING")
            .arg(stream)
            .arg(group)
            .arg("-")
            .arg("+")
            .arg(10_000)
            .arg(consumer)
            .query_async(&mut conn)
            .await
            .map_err(|e| format!("XPENDING: {e}"))?;
        held += reply.ids.len() as u64;
    }
    Ok(held)
}
