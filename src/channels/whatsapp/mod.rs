//! WhatsApp Cloud API, both directions: Meta's webhook (handshake, signature, payload) in, the
//! Graph API client out, and the simulator that signs deliveries as Meta does.

pub mod client;
pub mod payload;
pub mod signature;
pub mod simulate;
pub mod webhook;
