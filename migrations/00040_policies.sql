-- +goose Up
-- policies holds every version of the approval policy (internal/policy): rules that approve, deny
-- or gate interrupts. The newest version is in force; decisions name the version that made them.
CREATE TABLE policies (
    version     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source      text        NOT NULL,
    -- origin says where the version came from: "file:<path>" (devui serve --policy-file) or "ui".
    origin      text        NOT NULL,
    created_by  text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- policy is the rule that decided the interrupt, or that gated the tool and left the decision to a
-- person: {"rule", "version", "decision", "reason"}.
ALTER TABLE interrupts ADD COLUMN policy jsonb;

-- +goose Down
ALTER TABLE interrupts DROP COLUMN policy;
DROP TABLE policies;
