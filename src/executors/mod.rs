//! Executors: the systems that do the work, over HTTP or the Bloodbank bus (RabbitMQ, or NATS
//! JetStream), the dispatcher that hands them commands, and the ACKs they answer with; and the
//! tenants' identity resolvers, the systems that say who a sender is. Imports `domain`, `config`,
//! `store` and `service`.

pub mod acks;
pub mod bus;
pub mod dispatcher;
pub mod executor;
mod handover;
pub mod jetstream;
mod preview;
pub mod resolver;
pub mod responses;
pub mod shop;
