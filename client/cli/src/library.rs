//! `load-library`: FUNCTION LOAD REPLACE of this client's function library.

use redis_throttle::script::{LIBRARY, LIBRARY_VERSION};

use crate::failure::Failure;
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
    let name: String = server
        .query(
            redis::cmd("FUNCTION")
                .arg("LOAD")
                .arg("REPLACE")
                .arg(LIBRARY),
            "FUNCTION LOAD REPLACE",
        )
        .await
        .map_err(|Failure(why)| {
            Failure(format!(
                "{why}; the user needs +function|load (docs/trust-model.md: throttle acl library)"
            ))
        })?;
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
