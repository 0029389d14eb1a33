-- What the gateway answered a provider that waits for its HTTP answer (Twilio's TwiML), kept with
-- the message so that a retried webhook gets the same answer as the first.
ALTER TABLE inbound_messages ADD COLUMN answer TEXT;
