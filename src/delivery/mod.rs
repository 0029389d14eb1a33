//! Delivery: how effects leave the gateway. The outbox (in the store) holds what must be sent;
//! the workers that send it share the retry policy here.

pub mod backoff;

pub use backoff::RetryPolicy;
