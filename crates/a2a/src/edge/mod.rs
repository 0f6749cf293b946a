//! The HTTP edge: the endpoint every binding's call runs through, each binding's wire, the HTTP
//! helpers, the accept loop and the fair share.

pub(crate) mod connection;
pub(crate) mod endpoint;
pub(crate) mod fair;
pub(crate) mod http;
pub(crate) mod wire;
