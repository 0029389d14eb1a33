//! The providers' webhooks as HTTP routes: thin handlers that hand the request's parts to the
//! channel that reads them and turn what it answers into a response.

pub mod hooks;
pub mod line;
pub mod messenger;
pub mod slack;
pub mod standard;
pub mod telegram;
pub mod twilio;
pub mod whatsapp;
