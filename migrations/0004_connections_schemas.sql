-- The schemas (MySQL: databases) a stored connection may be read from, the column form of
-- DATASOURCE_<NAME>_SCHEMAS. NULL: no allow-list (whatever the user's grants allow, system
-- schemas excluded). A list is never empty and holds no empty or NULL names.
ALTER TABLE connections
    ADD COLUMN schemas text[]
    CHECK (
        schemas IS NULL
        OR (cardinality(schemas) > 0
            AND array_position(schemas, NULL) IS NULL
            AND array_position(schemas, '') IS NULL)
    );
