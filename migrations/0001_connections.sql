-- Datasource connections the Worker resolves job connection names against (contract §6).
-- Environment-defined datasources (DATASOURCE_<NAME>_*) take precedence over these rows.
CREATE TABLE connections (
    id              uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    -- The connection name jobs use; matched exactly (case-sensitive).
    name            text        NOT NULL CHECK (name <> ''),
    type            text        NOT NULL
                    CHECK (type IN ('POSTGRESQL', 'MYSQL', 'MONGODB', 'SQL_SERVER', 'ORACLE')),
    host            text        NOT NULL CHECK (host <> ''),
    -- NULL: the type's default port (5432, 3306, 27017, 1433, 1521).
    port            integer     CHECK (port BETWEEN 1 AND 65535),
    database        text        NOT NULL,
    username        text        NOT NULL,
    -- base64(nonce[12] || ciphertext || tag[16]), AES-256-GCM under the credentials key
    -- (contract §2); NULL: no password.
    password_sealed text,
    -- Must equal APP_ENC_KEY_VERSION for password_sealed to be used.
    key_version     text        NOT NULL DEFAULT '1',
    -- libpq or MySQL spelling (disable, prefer, require, verify-ca, verify-full, ...);
    -- NULL: prefer.
    ssl_mode        text,
    -- key=value pairs separated by '&' or whitespace, the format of DATASOURCE_<NAME>_OPTIONS.
    options         text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    -- Soft delete: a row with deleted_at set never resolves.
    deleted_at      timestamptz
);

-- One live connection per name; deleted rows keep their name for the record.
CREATE UNIQUE INDEX connections_live_name ON connections (name) WHERE deleted_at IS NULL;
