-- Retention (issue #50): the purge of texts past `retention.texts` finds, oldest first, the rows
-- whose text is still kept and may go, without reading again what it overwrote before: an index
-- on each place's time over exactly those rows (`store/retention.rs` queries them with the same
-- conditions). Additive: indexes only.
CREATE INDEX inbound_messages_texts_kept ON inbound_messages (received_at) WHERE payload <> '{"expired":true}';
CREATE INDEX outbox_texts_kept ON outbox (created_at)
    WHERE payload <> '{"expired":true}' AND kind <> 'dispatch' AND status <> 'pending';
CREATE INDEX confirmations_prompts_kept ON confirmations (created_at)
    WHERE prompt <> '{"expired":true}' AND status <> 'pending';
