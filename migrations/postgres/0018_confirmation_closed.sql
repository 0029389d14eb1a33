-- A confirmation is `closed` when its command ends (canceled, recovered) before anyone answered:
-- closed by the move that ends the command, in its transaction.
ALTER TABLE confirmations DROP CONSTRAINT confirmations_status_check;
ALTER TABLE confirmations ADD CONSTRAINT confirmations_status_check
    CHECK (status IN ('pending', 'accepted', 'declined', 'expired', 'closed'));
