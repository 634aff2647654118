//! `Backend::Auto` follows the server it is served by: a limiter that settled on the module
//! and then finds itself on a server without it (a failover to a replica that was never given
//! the module; here a connection switched from one server to the other) probes again on that
//! call and carries on with the function library, with no error reaching the caller, on the
//! four servers.
//!
//! ```sh
//! cargo build -p redis-throttle-module
//! cargo test -p redis-throttle --test auto_failover
//! ```

use redis_throttle::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{Cmd, Pipeline, RedisFuture, Value};
use redis_throttle::{Backend, Limiter, Quota};
use throttle_e2e::{multiplexed, runtime, server_for};
use throttle_testkit::Flavor;

/// A connection to the first server until `failed_over` is set, then to the second: what a
/// client behind a failover sees.
#[derive(Clone)]
struct FailOver {
    primary: MultiplexedConnection,
    replica: MultiplexedConnection,
    failed_over: Arc<AtomicBool>,
}

impl FailOver {
    fn now(&mut self) -> &mut MultiplexedConnection {
        if self.failed_over.load(Ordering::SeqCst) {
            &mut self.replica
        } else {
            &mut self.primary
        }
    }
}

impl ConnectionLike for FailOver {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        self.now().req_packed_command(cmd)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        self.now().req_packed_commands(cmd, offset, count)
    }

    fn get_db(&self) -> i64 {
        0
    }
}

fn a_failover_to_a_server_without_the_module_is_followed(flavor: Flavor) {
    let with_module = server_for(flavor, Backend::Module);
    let without = server_for(flavor, Backend::Library);
    runtime().block_on(async {
        let failed_over = Arc::new(AtomicBool::new(false));
        let conn = FailOver {
            primary: multiplexed(&with_module.url()).await,
            replica: multiplexed(&without.url()).await,
            failed_over: Arc::clone(&failed_over),
        };
        let limiter = Limiter::builder("failover", Quota::new(100, 100u64).unwrap())
            .build(conn)
            .unwrap();
        limiter.acquire().await.expect("on the module");
        assert_eq!(limiter.metrics().backend, Some(Backend::Module), "{flavor}");
        failed_over.store(true, Ordering::SeqCst);
        let grant = limiter
            .acquire()
            .await
            .unwrap_or_else(|err| panic!("{flavor}: the caller saw {err}"));
        assert_eq!(
            limiter.metrics().backend,
            Some(Backend::Library),
            "{flavor}"
        );
        // The module refused, the library checked (absent: loaded), the call sent: one call.
        assert!(grant.round_trips >= 3, "{flavor}: {}", grant.round_trips);
        let grant = limiter.acquire().await.expect("on the library");
        assert_eq!(grant.round_trips, 1, "{flavor}: settled again");
        assert_eq!(limiter.metrics().errors, 0, "{flavor}");
        // A limiter told to use the module keeps to it, and says how to load it.
        let module_only = Limiter::builder("failover", Quota::new(100, 100u64).unwrap())
            .backend(Backend::Module)
            .build(multiplexed(&without.url()).await)
            .unwrap();
        let err = module_only.acquire().await.expect_err("no module there");
        assert!(
            matches!(err, redis_throttle::Error::ModuleNotLoaded { .. }),
            "{flavor}: {err}"
        );
    });
}

throttle_testkit::per_server!(a_failover_to_a_server_without_the_module_is_followed);
