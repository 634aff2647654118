//! How a limiter talks to Redis: which backend serves the commands (the module, the function
//! library or the script) and how each call is sent and its reply read, the connection a
//! process makes, and the subscription that hears the fleet's announcements (a background
//! task that ends with its owner, `abort_on_drop`).
//!
//! It imports only the vocabulary (`crate::vocabulary`); the engine and the layers above it
//! import it.

pub(crate) mod abort_on_drop;
pub(crate) mod backend;
pub(crate) mod commands;
pub(crate) mod connect;
pub(crate) mod listen;
pub(crate) mod reply;
pub mod script;
