-- +goose Up
-- interrupt_approvals holds the approvals of an interrupt that a policy rule requires several
-- distinct reviewers for (decide: require, approvals: N): it stays pending until N reviewers
-- approved it; one reviewer counts once.
CREATE TABLE interrupt_approvals (
    interrupt_id uuid        NOT NULL REFERENCES interrupts (id) ON DELETE CASCADE,
    actor        text        NOT NULL,
    comment      text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (interrupt_id, actor)
);

-- +goose Down
DROP TABLE interrupt_approvals;
