//! One job over a MongoDB collection, a PostgreSQL table, a MariaDB table and a SQL Server
//! table (the pysqlbridge stand-in) at once: it completes, and its one result (each datasource
//! under its name) is the golden file `mixed.json` byte for byte.

use mongodb::bson::doc;
use serde_json::json;
use testkit::sqlbridge::SqlBridge;

use super::golden_job;
use crate::harness::sources::{MariaDb, MongoDb, PgSource};
use crate::harness::World;

const PG_FIXTURE: &str = r#"
CREATE TABLE invoices (id integer PRIMARY KEY, amount numeric(12,2), paid boolean,
                       issued date, note text);
INSERT INTO invoices VALUES
  (1, 1234.50, true, '2024-02-29', 'first <one>'),
  (2, -0.01, false, '1999-12-31', NULL),
  (3, NULL, NULL, NULL, 'café');
"#;

const MARIADB_FIXTURE: &str = r#"
CREATE TABLE orders (id INT PRIMARY KEY, total DECIMAL(10,3), sku VARCHAR(20),
                     placed DATETIME, qty BIGINT);
INSERT INTO orders VALUES
  (10, 99.990, 'SKU-1', '2024-01-15 10:30:00', 9007199254740993),
  (11, 0.000, 'SKU-"2"', '2000-01-01 00:00:00', -1);
"#;

#[tokio::test]
async fn a_job_over_mongodb_postgresql_mariadb_and_sql_server_matches_its_golden_file() {
    let world = World::new().await;
    let mongo = MongoDb::create().await;
    mongo
        .insert(
            "customers",
            vec![
                doc! { "code": "C-1", "tier": 1_i32, "tags": ["a", "b"], "address": { "city": "Recife", "zip": "50000" } },
                doc! { "code": "C-2", "tier": 2_i64, "tags": [], "address": { "city": "São Paulo" } },
            ],
        )
        .await;
    let pg = PgSource::create(PG_FIXTURE).await;
    let maria = MariaDb::create().await;
    maria.exec(MARIADB_FIXTURE).await;
    let mssql = SqlBridge::start(&[(
        "payments",
        json!([
            {"id": 7, "payer": "Zoë ]'; --", "amount": 10.25, "batch": 9007199254740993i64},
            {"id": 8, "payer": "O'Brien", "amount": -0.5, "batch": null},
            {"id": 9, "payer": "skipped", "amount": 1.0, "batch": 1},
        ]),
    )]);
    let mapped = json!({
        "crm": {"customers": ["code", "tier", "tags", "address.city"]},
        "ledger": {"invoices": ["id", "amount", "paid", "issued", "note"]},
        "shop": {"orders": ["id", "total", "sku", "placed", "qty"]},
        "sales": {"dbo.payments": ["id", "payer", "amount", "batch"]},
    });
    let filters = json!({
        "crm": {"customers": {"tier": {"gte": [1]}}},
        "ledger": {"invoices": {"id": {"in": [1, 2, 3]}}},
        "shop": {"orders": {"sku": {"like": ["SKU-%"]}}},
        "sales": {"dbo.payments": {"id": {"lt": [9]}}},
    });
    let worker = golden_job(
        &world,
        &[
            ("crm", &mongo),
            ("ledger", &pg),
            ("shop", &maria),
            ("sales", &mssql),
        ],
        Vec::new(),
        (mapped, filters),
        "mixed.json",
    )
    .await;

    drop(worker);
    mongo.drop().await;
    pg.drop().await;
    maria.drop().await;
    drop(mssql);
    world.cleanup().await;
}
