//! Delivery: how effects leave the gateway. The outbox (in the store) holds what must be sent;
//! the workers that send it share the retry policy here.

pub mod acks;
pub mod agent;
pub mod amqp;
pub mod backoff;
pub mod dispatch;
pub mod dispatcher;
pub mod executor;
pub mod machine;

pub use backoff::RetryPolicy;
