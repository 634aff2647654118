//! The connection, and which THROTTLE backend the server has: the module's commands, or the
//! function library's functions with the same arguments and replies.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, Cmd, Value};
use redis_throttle::throttle_bucket::Command;
use redis_throttle::{Backend, Commands, Error};

use crate::failure::{fail, redact, redis_failure, Failure};

/// Connecting and each reply may take this long.
const TIMEOUT: Duration = Duration::from_secs(5);
/// The function library's name (`#!lua name=throttle`).
pub(crate) const LIBRARY_NAME: &str = "throttle";

/// A connection to the server at `url` (a clone shares it).
#[derive(Clone)]
pub(crate) struct Server {
    /// The URL without its password, for messages.
    pub(crate) url: String,
    pub(crate) con: MultiplexedConnection,
}

impl Server {
    /// Connects, and checks that the server answers.
    pub(crate) async fn connect(url: &str) -> Result<Server, Failure> {
        let shown = redact(url);
        let client = Client::open(url).map_err(|err| {
            Failure(format!(
                "{shown:?} is not a Redis URL ({err}): write redis://host:port, like redis://127.0.0.1:6379"
            ))
        })?;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(TIMEOUT))
            .set_response_timeout(Some(TIMEOUT));
        // Connecting sends the URL's credentials (AUTH), so a wrong password fails here too.
        let con = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(|err| {
                Failure(format!(
                    "cannot connect to {shown}: {err}; check that the server runs there and that the URL (--url or THROTTLE_URL) and its credentials are right"
                ))
            })?;
        Ok(Server { url: shown, con })
    }

    /// Sends one command.
    pub(crate) async fn query<T: redis::FromRedisValue>(
        &mut self,
        cmd: &Cmd,
        doing: &str,
    ) -> Result<T, Failure> {
        cmd.query_async(&mut self.con)
            .await
            .map_err(|err| redis_failure(&self.url, doing, &err))
    }

    /// Whether the server has the module's commands (`COMMAND INFO THROTTLE.PEEK`; it asks
    /// about the command, not the module, so it serves where `MODULE LIST` is refused).
    pub(crate) async fn has_module(&mut self) -> Result<bool, Failure> {
        let info: Vec<Value> = self
            .query(
                redis::cmd("COMMAND").arg("INFO").arg(Command::Peek.name()),
                "COMMAND INFO",
            )
            .await?;
        Ok(info.iter().any(|v| !matches!(v, Value::Nil)))
    }

    /// The module if the server has it, else the library if loaded, else a failure that says
    /// how to load either. (Not the client's `Auto`: a tool that reads must not load the
    /// library, nor fall back to a script, as a side effect.)
    pub(crate) async fn backend(&mut self) -> Result<Backend, Failure> {
        if self.has_module().await? {
            return Ok(Backend::Module);
        }
        if self.library_code().await?.is_some() {
            return Ok(Backend::Library);
        }
        fail(format!(
            "{}: the server has neither the THROTTLE module nor the throttle function library; \
             load the module (redis-server --loadmodule /path/to/libredis_throttle_module.so, or \
             MODULE LOAD) or, on a managed Redis, the library (throttle load-library)",
            redact(&self.url)
        ))
    }

    /// The THROTTLE commands on this connection, sent to `backend`.
    pub(crate) fn commands(&self, backend: Backend) -> Commands<MultiplexedConnection> {
        Commands::new(self.con.clone(), backend)
    }

    /// The code of the loaded `throttle` function library, if any.
    pub(crate) async fn library_code(&mut self) -> Result<Option<String>, Failure> {
        let list: Value = self
            .query(
                redis::cmd("FUNCTION")
                    .arg("LIST")
                    .arg("LIBRARYNAME")
                    .arg(LIBRARY_NAME)
                    .arg("WITHCODE"),
                "FUNCTION LIST",
            )
            .await?;
        let Value::Array(libraries) = list else {
            return Ok(None);
        };
        for library in &libraries {
            let name = field(library, "library_name");
            if name.as_deref() == Some(LIBRARY_NAME) {
                return Ok(field(library, "library_code"));
            }
        }
        Ok(None)
    }
}

/// A text field of a reply that is a map, or in RESP2 an array of names and values.
fn field(value: &Value, name: &str) -> Option<String> {
    let text = |v: &Value| match v {
        Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    };
    match value {
        Value::Map(pairs) => pairs
            .iter()
            .find(|(k, _)| text(k).as_deref() == Some(name))
            .and_then(|(_, v)| text(v)),
        Value::Array(items) => items
            .chunks(2)
            .find(|pair| pair.first().and_then(text).as_deref() == Some(name))
            .and_then(|pair| pair.get(1))
            .and_then(text),
        _ => None,
    }
}

/// The version a library's code says (`local VERSION = n`).
pub(crate) fn code_version(code: &str) -> Option<u64> {
    let rest = code.split("local VERSION = ").nth(1)?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// What a row shows for a command the server refused: its own words (`ERR ...`,
/// `WRONGTYPE ...`), or the client's for anything else.
pub(crate) fn refusal(err: &Error) -> String {
    match err {
        Error::Rejected { message } => message.clone(),
        other => other.to_string(),
    }
}

/// Whether a server error says the key is not a bucket.
pub(crate) fn not_a_bucket(message: &str) -> bool {
    message.contains("WRONGTYPE") || message.contains("not a THROTTLE bucket")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_librarys_version_is_read_from_its_code() {
        assert_eq!(
            code_version(redis_throttle::script::LIBRARY),
            Some(redis_throttle::script::LIBRARY_VERSION)
        );
        assert_eq!(code_version("return 1"), None);
    }
}
