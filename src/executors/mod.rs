//! Executors: the systems that do the work, over HTTP or the Bloodbank bus (AMQP), the dispatcher
//! that hands them commands, and the ACKs they answer with. Imports `domain`, `config`, `store`
//! and `service`.

pub mod acks;
pub mod bus;
pub mod dispatcher;
pub mod executor;
mod handover;
