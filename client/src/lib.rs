//! Placeholder: the client crate is being written.
