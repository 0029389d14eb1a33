//! The HTTP edge: shared state, the router and its layers, problem documents (the only place
//! errors become responses), the OpenAPI document, authentication and the routes. Imports every
//! layer below it.

pub mod auth;
pub(crate) mod body;
pub mod console;
pub mod error;
pub mod guards;
pub mod headers;
pub(crate) mod idempotency;
pub mod listen;
pub mod openapi;
pub mod problem;
pub mod responses;
pub mod routes;
pub mod server;
pub mod views;

pub use error::ApiError;
pub use problem::Problem;
pub use server::AppState;
