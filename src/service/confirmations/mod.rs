//! Confirmations: the prompt a mutating command asks, and how an answer to it is read and bound
//! to its command, its key and its actor.

pub mod answers;
pub mod confirm;
pub mod corrected;
mod moves;
pub mod step_up;
