//! The HTTP surface: one router per resource, merged in `app`.

pub mod error;
pub mod health;
pub mod problem;

pub use error::ApiError;
pub use problem::Problem;
