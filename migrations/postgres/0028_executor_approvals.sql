-- Executor-requested approvals (issue #46, workflow seed §6.10): an executor may answer that the
-- execution waits for people's approval. The delivery machine gets its `waiting` state, and the
-- approval is a row of `approvals` like a policy's, marked by `origin`, naming the delivery's
-- `target` and what the executor said (`wait`, JSON). A command has at most one policy approval; an executor
-- may ask more than once (each waiting answer of a delivery that was resumed).
ALTER TABLE deliveries DROP CONSTRAINT deliveries_state_check;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_state_check
    CHECK (state IN ('received', 'validated', 'routed', 'delivered', 'waiting', 'executed', 'closed'));

ALTER TABLE approvals DROP CONSTRAINT approvals_command_id_key;
ALTER TABLE approvals ADD COLUMN origin TEXT NOT NULL DEFAULT 'policy' CHECK (origin IN ('policy', 'executor'));
ALTER TABLE approvals ADD COLUMN target TEXT;
ALTER TABLE approvals ADD COLUMN wait TEXT;
CREATE UNIQUE INDEX approvals_policy_once ON approvals (command_id) WHERE origin = 'policy';
CREATE INDEX approvals_of_command ON approvals (command_id, requested_at);

-- Escalation (issue #46): when the earliest escalation of a pending approval is due, the holders of
-- its roles are asked; `escalates_at` is that moment, cleared once they were asked.
ALTER TABLE approvals ADD COLUMN escalates_at BIGINT;
CREATE INDEX approvals_escalation ON approvals (escalates_at) WHERE escalates_at IS NOT NULL;
