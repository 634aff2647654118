//! `load-library`: FUNCTION LOAD REPLACE of this client's function library.

use redis_throttle::script::{LIBRARY, LIBRARY_VERSION};

use crate::failure::{redis_failure, Failure};
use crate::server::{code_version, Server};

/// Loads the library; says the version before and after.
pub(crate) async fn load(server: &mut Server) -> Result<String, Failure> {
    let before = server.library_code().await?;
    let before_text = match &before {
        None => "none".to_owned(),
        Some(code) if code == LIBRARY => {
            format!("version {LIBRARY_VERSION}, this client's, byte for byte")
        }
        Some(code) => match code_version(code) {
            Some(v) => format!("version {v} (other code than this client's)"),
            None => "a library that says no version".to_owned(),
        },
    };
    let load: Result<String, redis::RedisError> = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(LIBRARY)
        .query_async(&mut server.con)
        .await;
    let name = match load {
        Ok(name) => name,
        Err(err) if err.code() == Some("NOPERM") => {
            return Err(Failure(format!(
                "{}: FUNCTION LOAD refused: {err}; load as a user with +function|load (the administrator of `throttle acl library`)",
                server.url
            )))
        }
        Err(err) => return Err(redis_failure(&server.url, "FUNCTION LOAD REPLACE", &err)),
    };
    let after = server.library_code().await?;
    let after_text = match after.as_deref().map(|code| (code == LIBRARY, code_version(code))) {
        Some((true, Some(v))) => format!("version {v}"),
        _ => return Err(Failure(format!(
            "{}: FUNCTION LOAD answered {name:?} but FUNCTION LIST does not show this client's library",
            server.url
        ))),
    };
    Ok(format!(
        "{}: function library {name}: before {before_text}; now {after_text}\n",
        server.url
    ))
}
