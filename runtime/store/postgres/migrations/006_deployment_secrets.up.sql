-- 006_deployment_secrets: secrets shared by every host on this store, created once by
-- whichever host needs one first (store.Store.DeploymentSecretGetOrCreate). The key of
-- the derived call ids lives here (issue 14, finding 5): every process on the store
-- derives the same id for the same call, so a retry through another process still finds
-- its record, while nobody without the store can compute an id from guessed
-- arguments. A new table: existing rows are untouched.
CREATE TABLE deployment_secrets (
    name       text        PRIMARY KEY CHECK (name <> ''),
    secret     bytea       NOT NULL CHECK (length(secret) >= 16),
    created_at timestamptz NOT NULL DEFAULT now()
);
