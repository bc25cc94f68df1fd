//! An `Engine` whose datasources are test databases, defined as the environment would.

use engine::connection::{from_env_vars, Resolver};
use engine::{Engine, EngineConfig};

use super::TestDb;

/// An engine with each `(connection name, database)` as a PostgreSQL datasource.
pub fn engine_for(datasources: &[(&str, &TestDb)], config: EngineConfig) -> Engine {
    engine_with(datasources, config, &[])
}

/// [`engine_for`], with `extra` `(suffix, value)` variables (`SCHEMAS`, `OPTIONS`, ...) added
/// to every datasource's group.
pub fn engine_with(
    datasources: &[(&str, &TestDb)],
    config: EngineConfig,
    extra: &[(&str, &str)],
) -> Engine {
    let mut vars = Vec::new();
    for (i, (name, db)) in datasources.iter().enumerate() {
        let prefix = format!("DATASOURCE_PG{i}_");
        for (suffix, value) in extra {
            vars.push((format!("{prefix}{suffix}"), (*value).to_owned()));
        }
        let host = db.options.get_host().to_owned();
        let port = db.options.get_port().to_string();
        let user = db.options.get_username().to_owned();
        for (suffix, value) in [
            ("CONFIG_NAME", name.to_string()),
            ("TYPE", "POSTGRESQL".into()),
            ("HOST", host),
            ("PORT", port),
            ("DATABASE", db.name.clone()),
            ("USER", user),
            ("SSLMODE", "disable".into()),
        ] {
            vars.push((format!("{prefix}{suffix}"), value));
        }
    }
    let env = from_env_vars(vars).expect("valid test datasources");
    Engine::new(config, Resolver::new(env, None))
}

/// The mappedFields and filters of a job body written as JSON.
pub fn job(body: serde_json::Value) -> contract::JobMessage {
    let mut body = body;
    body["jobId"] = serde_json::Value::String(uuid::Uuid::new_v4().to_string());
    contract::JobMessage::parse(body.to_string().as_bytes()).expect("valid job message")
}

/// Extracts `fields` of `table` from the datasource `connection`: the result JSON, parsed.
pub async fn extract(
    engine: &Engine,
    connection: &str,
    table: &str,
    fields: &[&str],
) -> Result<serde_json::Value, engine::EngineError> {
    let message = job(serde_json::json!({"mappedFields": {connection: {table: fields}}}));
    let extraction = engine
        .extract(&message.mapped_fields, &message.filters)
        .await?;
    Ok(serde_json::from_slice(&extraction.plaintext).expect("the result is JSON"))
}

/// Asserts the error the plan gives a table that does not exist, word for word. The result of a
/// table that was extracted is never printed: it could hold password hashes.
pub fn assert_missing(
    result: Result<serde_json::Value, engine::EngineError>,
    connection: &str,
    table: &str,
) {
    match result {
        Err(error @ engine::EngineError::Schema { .. }) => assert_eq!(
            error.to_string(),
            format!(
                "datasource {connection} failed schema validation: table {table:?} does not exist"
            ),
        ),
        Err(other) => panic!("{table}: expected a schema error, got {other:?}"),
        Ok(_) => panic!("{table} was extracted"),
    }
}
