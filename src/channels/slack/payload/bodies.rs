//! What Slack posts, as `payload` reads it first and the OpenAPI document describes it: the
//! Events API's envelope, a slash command's form and an interaction's form. What they carry is
//! read leniently after, from the body kept whole.

use serde::Deserialize;
use serde_json::{Map, Value};

/// An Events API request, by its `type`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[schema(as = SlackEvent)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventsBody {
    /// The endpoint's check when it is set in the app's settings: echo the challenge.
    UrlVerification { challenge: String },
    /// An event: `message` or `app_mention` a person wrote is read; the rest acknowledged.
    EventCallback {
        event_id: String,
        team_id: Option<String>,
        #[schema(value_type = Object)]
        event: Map<String, Value>,
    },
    /// Slack holds events back for a while (over 30,000 an hour).
    AppRateLimited { team_id: Option<String> },
}

/// A slash command's form (`/chatgate refund 1234 25.00`, or `/refund 1234 25.00`).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[schema(as = SlackSlashCommand)]
pub struct SlashCommandForm {
    /// The command typed, with its slash.
    pub command: String,
    /// Unique per invocation: the message's id in the inbox.
    pub trigger_id: String,
    /// What follows the command.
    pub text: Option<String>,
    /// The workspace: what the tenant is found by.
    pub team_id: Option<String>,
    /// The person, known as `slack:<user_id>`.
    pub user_id: Option<String>,
    /// Where the replies go.
    pub channel_id: Option<String>,
}

/// An interaction's form: `payload`, a JSON text (a `block_actions` tap is read, the rest
/// acknowledged).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[schema(as = SlackInteraction)]
pub struct InteractionForm {
    #[schema(content_media_type = "application/json")]
    pub payload: String,
}
