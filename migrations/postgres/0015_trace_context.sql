-- The W3C trace context (`traceparent`) a command was admitted under, when traces are exported:
-- every later span of the command (its transitions, its dispatches) joins that trace, whichever
-- request or worker makes it.
ALTER TABLE commands ADD COLUMN trace_parent TEXT;
