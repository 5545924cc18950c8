-- +goose Up
-- webhook_deliveries: one row per attempt to post a notification about an interrupt (a River job
-- of kind loupe.webhook, enqueued in the transaction that made the event happen). target is the
-- receiver's id (notify.TargetID) and its redacted URL, never the URL itself, which may hold a
-- token; delivery_key is the notification's idempotency key, the same on each of its attempts.
CREATE TABLE webhook_deliveries (
    id            bigserial   PRIMARY KEY,
    interrupt_id  uuid        NOT NULL REFERENCES interrupts (id) ON DELETE CASCADE,
    event         text        NOT NULL,
    target        text        NOT NULL,
    delivery_key  text        NOT NULL,
    job_id        bigint,
    attempt       int         NOT NULL,
    attempted_at  timestamptz NOT NULL,
    duration_ms   int         NOT NULL,
    status_code   int,
    error         text,
    next_retry_at timestamptz
);
CREATE INDEX webhook_deliveries_interrupt_idx ON webhook_deliveries (interrupt_id, id);

-- +goose Down
DROP TABLE webhook_deliveries;
