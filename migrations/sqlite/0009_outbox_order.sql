-- Messages to one person keep their order around Twilio's TwiML answer: a message is not sent
-- while an earlier one to the same destination is held for that answer or in flight. The claim
-- looks those up by destination among pending rows.
CREATE INDEX outbox_pending_by_destination ON outbox (destination, id) WHERE status = 'pending';
