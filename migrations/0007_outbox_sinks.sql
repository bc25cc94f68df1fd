-- The outbox gets sinks (issue 14, lifecycle §5): every event has its AMQP row and, when the MQTT
-- mirror is on, its MQTT row, recorded in the same transaction as the state change. Each sink's
-- rows are leased, backed off and repaired on their own: a dead MQTT broker never holds back
-- AMQP events, and the reverse. Existing rows are AMQP rows.

ALTER TABLE outbox
    ADD COLUMN sink  text NOT NULL DEFAULT 'amqp' CHECK (sink IN ('amqp', 'mqtt')),
    -- The MQTT row's topic, frozen when recorded like its payload (the `body`); NULL for AMQP.
    ADD COLUMN topic text,
    ADD CONSTRAINT outbox_topic_is_mqtts CHECK ((sink = 'mqtt') = (topic IS NOT NULL));

-- One row per event and sink.
ALTER TABLE outbox DROP CONSTRAINT outbox_ce_id_key;
ALTER TABLE outbox ADD CONSTRAINT outbox_ce_id_sink_key UNIQUE (ce_id, sink);

DROP INDEX outbox_unpublished;
CREATE INDEX outbox_unpublished ON outbox (sink, next_attempt_at, id) WHERE published_at IS NULL;
