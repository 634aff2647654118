//! What the layers show a picker of a request, and a settle closure of its response: the
//! heads, without the bodies.

use ::http::{Extensions, HeaderMap, Method, StatusCode};

/// What a bucket can be chosen by: the parts of an outgoing request that every client has.
#[derive(Clone, Copy, Debug)]
pub struct RequestHead<'a> {
    pub(super) method: &'a Method,
    pub(super) host: Option<&'a str>,
    pub(super) path: &'a str,
    pub(super) headers: &'a HeaderMap,
    pub(super) extensions: &'a Extensions,
}

impl<'a> RequestHead<'a> {
    /// The request method.
    pub fn method(&self) -> &'a Method {
        self.method
    }

    /// The host the request goes to, without the port: the URL's, or else the `Host`
    /// header's (a tower request may carry only a path, as tonic's do).
    pub fn host(&self) -> Option<&'a str> {
        self.host
    }

    /// The URL path.
    pub fn path(&self) -> &'a str {
        self.path
    }

    /// A header's value, if it is there and is text.
    pub fn header(&self, name: &str) -> Option<&'a str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// All the request's headers.
    pub fn headers(&self) -> &'a HeaderMap {
        self.headers
    }

    /// The request's extensions (tower: the `http::Request`'s; reqwest-middleware: the
    /// middleware chain's, where `RequestBuilder::with_extension` puts them).
    pub fn extensions(&self) -> &'a Extensions {
        self.extensions
    }
}

/// The parts of a response a [`Pick::settle_from`](super::Pick::settle_from) closure reads: its status and headers.
#[derive(Clone, Copy, Debug)]
pub struct ResponseHead<'a> {
    pub(super) status: StatusCode,
    pub(super) headers: &'a HeaderMap,
}

impl<'a> ResponseHead<'a> {
    /// The response status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// A header's value, if it is there and is text.
    pub fn header(&self, name: &str) -> Option<&'a str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// All the response's headers.
    pub fn headers(&self) -> &'a HeaderMap {
        self.headers
    }
}
