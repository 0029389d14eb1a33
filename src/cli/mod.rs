//! The command line: `serve`, `migrate`, `check-config`, `audit`, `token`, `stepup`, `simulate`.

pub mod simulate;
