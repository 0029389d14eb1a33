-- Every instance's event streams learn of committed moves at once: one notification per
-- transaction that writes moves (PostgreSQL folds identical notifications of a transaction into
-- one, and delivers them at commit). SQLite has one process, which wakes its streams itself.
CREATE FUNCTION chatgate_notify_moves() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('chatgate_moves', '');
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER command_transitions_notify
    AFTER INSERT ON command_transitions
    FOR EACH STATEMENT EXECUTE FUNCTION chatgate_notify_moves();
