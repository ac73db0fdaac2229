-- +goose Up
-- Tenants are not a table: every row carries its tenant id and every query filters by it.
SELECT 1;

-- +goose Down
SELECT 1;
