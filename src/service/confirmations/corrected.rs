//! A request corrected before its confirmation ("no, 30"; issue #48, goal 2): the request and its
//! confirmation are closed in one step, so that the corrected request, admitted next from the same
//! message, is prompted in its place (and takes the lock the old one held).

use time::OffsetDateTime;

use super::moves::correction_move;
use crate::domain::command::ActorId;
use crate::service::engine::{Engine, EngineError};
use crate::store::{Confirmation, ConfirmationStatus, SettleConfirmation, StepOutcome, StepWrite, StoredCommand};

/// Closes `command`, whose `confirmation` its person corrects with message `message_id`: its
/// confirmation declined by them and the command canceled (`corrected`, its outcome reply says
/// so). `false` when it moved meanwhile (answered, expired): then there is nothing to correct.
pub async fn close(
    engine: &Engine,
    (confirmation, command): (&Confirmation, &StoredCommand),
    (actor, message_id): (&ActorId, &str),
    now: OffsetDateTime,
) -> Result<bool, EngineError> {
    let Ok(moves) = engine.plan_moves(command, vec![correction_move(confirmation, message_id)], now) else {
        return Ok(false);
    };
    let settle = SettleConfirmation {
        id: confirmation.id,
        status: ConfirmationStatus::Declined,
        answered_by: Some(actor.clone()),
    };
    let step = StepWrite {
        settle: Some(settle),
        moves,
        ..StepWrite::new(confirmation.tenant_id.clone(), Some(confirmation.command_id), now)
    };
    Ok(matches!(engine.store().commands().commit_step(&step).await?, StepOutcome::Committed { .. }))
}
