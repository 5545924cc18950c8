-- +goose Up
-- usage is a run's tokens per model, {"model": {"input": n, "output": n}}, summed from its
-- model-call ledger as input_tokens and output_tokens are: a run that calls several models is
-- priced per model (its cost is computed when read, from the price table in force, so a changed
-- price or a model priced later applies to past runs too). NULL: no model call.
ALTER TABLE runs ADD COLUMN usage jsonb;

UPDATE runs r SET usage = u.usage
FROM (SELECT run_id, jsonb_object_agg(model, jsonb_build_object('input', i, 'output', o)) AS usage
      FROM (SELECT run_id, model,
                   coalesce(sum((response->'usage'->>'inputTokens')::bigint), 0) AS i,
                   coalesce(sum((response->'usage'->>'outputTokens')::bigint), 0) AS o
            FROM model_calls GROUP BY run_id, model) g
      GROUP BY run_id) u
WHERE r.id = u.run_id;

-- +goose Down
ALTER TABLE runs DROP COLUMN usage;
