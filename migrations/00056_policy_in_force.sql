-- +goose Up
-- policy_in_force names the version of the approval policy in force (README, "Approval
-- policies"): versions saved as drafts, or put in force once and replaced, stay stored beside it,
-- and any of them can be put in force again. One row at most; none while no version was ever put
-- in force. Until now the newest version was in force, so it is the one in force after the upgrade.
CREATE TABLE policy_in_force (
    singleton boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    version   bigint      NOT NULL REFERENCES policies (version),
    since     timestamptz NOT NULL DEFAULT now(),
    set_by    text        NOT NULL DEFAULT ''
);
INSERT INTO policy_in_force (version) SELECT max(version) FROM policies HAVING max(version) IS NOT NULL;

-- +goose Down
DROP TABLE policy_in_force;
