//! Which datasource failures may pass by themselves, driver by driver: what
//! [`crate::EngineError::is_transient`] answers, and so what `JOB_RETRY_ATTEMPTS` retries.
//!
//! Transient: the network (a connection refused, reset, aborted or cut mid-way), the server
//! restarting or shutting down, too many connections, a deadlock, a serialization failure, a lock
//! wait that timed out. Permanent (never retried): everything else, among it a missing table, a
//! permission, a bad filter, an authentication failure, TLS, and a statement cancelled or timed
//! out by the engine's own limit: the engine sets the statement timeout from
//! `ENGINE_EXTRACTION_TIMEOUT_SEC` and cancels statements itself (a forced cancel, the job's
//! timeout), so such a statement would only be cut again.

use std::io::ErrorKind;

/// A sqlx error of PostgreSQL or MySQL/MariaDB.
pub(crate) fn sqlx(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(io) => io_kind(io.kind()),
        // The pool waited `connect_timeout` for a connection: the server did not answer (sqlx
        // tries a refused connection again until then).
        sqlx::Error::PoolTimedOut => true,
        sqlx::Error::Database(database) => {
            if let Some(pg) = database.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
                postgres_sqlstate(pg.code())
            } else if let Some(my) = database.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
            {
                mysql_number(my.number())
            } else {
                false
            }
        }
        _ => false,
    }
}

/// A PostgreSQL SQLSTATE: class 08 (connection exception), 40001 (serialization failure),
/// 40P01 (deadlock detected), 55P03 (lock not available: `lock_timeout`), 57P01–57P03 (the
/// server shutting down or starting), 53300 (too many connections). Not 57014 (query
/// cancelled): the engine's own cancel or `statement_timeout`.
pub(crate) fn postgres_sqlstate(code: &str) -> bool {
    code.starts_with("08")
        || matches!(
            code,
            "40001" | "40P01" | "55P03" | "57P01" | "57P02" | "57P03" | "53300"
        )
}

/// A MySQL or MariaDB error number: 1040 (too many connections), 1053 (server shutdown), 1205
/// (lock wait timeout), 1213 (deadlock), 1927 (connection killed), and the client's 2002, 2003,
/// 2006, 2013 (cannot connect, server gone away, connection lost). Not 1317 (query interrupted:
/// the engine's own `KILL QUERY`), 3024 or 1969 (the engine's statement time limit).
pub(crate) fn mysql_number(number: u16) -> bool {
    matches!(
        number,
        1040 | 1053 | 1205 | 1213 | 1927 | 2002 | 2003 | 2006 | 2013
    )
}

/// A MongoDB driver error: the network, no server selectable within the connect timeout, a
/// pool cleared by a network failure, or a server error of [`mongo_code`]; also anything the
/// driver labels a transient transaction error.
pub(crate) fn mongo(error: &mongodb::error::Error) -> bool {
    use mongodb::error::ErrorKind as Kind;
    if error.contains_label(mongodb::error::TRANSIENT_TRANSACTION_ERROR) {
        return true;
    }
    match error.kind.as_ref() {
        Kind::Io(io) => io_kind(io.kind()),
        Kind::ServerSelection { .. } | Kind::ConnectionPoolCleared { .. } => true,
        Kind::Command(command) => mongo_code(command.code),
        _ => false,
    }
}

/// A MongoDB server error code a read may be retried after (the driver's own list of
/// retryable reads): 6, 7, 89, 91, 134, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436;
/// and 112 (write conflict). Not 50 (`maxTimeMS` expired: the engine's own limit) nor 11601
/// (interrupted: a kill).
pub(crate) fn mongo_code(code: i32) -> bool {
    matches!(
        code,
        6 | 7 | 89 | 91 | 112 | 134 | 189 | 262 | 9001 | 10107 | 11600 | 11602 | 13435 | 13436
    )
}

/// A SQL Server (tiberius) error: the network, or a server error of [`sqlserver_code`].
pub(crate) fn sqlserver(error: &tiberius::error::Error) -> bool {
    match error {
        tiberius::error::Error::Io { kind, .. } => io_kind(*kind),
        tiberius::error::Error::Server(token) => sqlserver_code(token.code()),
        _ => false,
    }
}

/// A SQL Server error number: 1205 (deadlock victim), 1222 (lock request time out), 40501,
/// 40613, 40197, 49918–49920, 10928, 10929 (Azure SQL's busy or moving database), 4060 is not
/// (a database that does not exist or is denied), 233 and 10053/10054/10060 (the connection
/// broke).
pub(crate) fn sqlserver_code(code: u32) -> bool {
    matches!(
        code,
        1205 | 1222
            | 40501
            | 40613
            | 40197
            | 49918
            | 49919
            | 49920
            | 10928
            | 10929
            | 233
            | 10053
            | 10054
            | 10060
    )
}

/// A broken or unreachable connection.
pub(crate) fn io_kind(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::ConnectionRefused
            | ErrorKind::ConnectionReset
            | ErrorKind::ConnectionAborted
            | ErrorKind::NotConnected
            | ErrorKind::BrokenPipe
            | ErrorKind::UnexpectedEof
            | ErrorKind::TimedOut
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_connection_loss_restarts_deadlocks_and_serialization_failures_are_transient() {
        for code in [
            "08000", "08003", "08006", "08001", "08004", "40001", "40P01", "55P03", "57P01",
            "57P02", "57P03", "53300",
        ] {
            assert!(postgres_sqlstate(code), "{code}");
        }
    }

    #[test]
    fn postgres_missing_tables_permissions_syntax_and_cancels_are_permanent() {
        // undefined_table, undefined_column, insufficient_privilege, syntax_error,
        // query_canceled (the engine's own cancel or statement_timeout), invalid_password,
        // read_only_sql_transaction, division_by_zero.
        for code in [
            "42P01", "42703", "42501", "42601", "57014", "28P01", "25006", "22012",
        ] {
            assert!(!postgres_sqlstate(code), "{code}");
        }
    }

    #[test]
    fn mysql_deadlocks_lock_waits_and_lost_connections_are_transient() {
        for number in [1213, 1205, 2002, 2006, 2013, 1040, 1053, 2003, 1927] {
            assert!(mysql_number(number), "{number}");
        }
    }

    #[test]
    fn mysql_missing_tables_permissions_and_kills_are_permanent() {
        // no such table, unknown column, access denied (two kinds), syntax, query
        // interrupted (KILL QUERY), max_execution_time, max_statement_time.
        for number in [1146, 1054, 1045, 1142, 1064, 1317, 3024, 1969] {
            assert!(!mysql_number(number), "{number}");
        }
    }

    #[test]
    fn mongo_network_and_failover_codes_are_transient_others_permanent() {
        for code in [
            6, 7, 89, 91, 189, 9001, 10107, 11600, 11602, 13435, 13436, 262,
        ] {
            assert!(mongo_code(code), "{code}");
        }
        // Unauthorized, namespace not found, bad value, maxTimeMS expired, interrupted.
        for code in [13, 26, 2, 50, 11601] {
            assert!(!mongo_code(code), "{code}");
        }
    }

    #[test]
    fn a_mongo_network_error_is_transient() {
        let reset = std::io::Error::new(ErrorKind::ConnectionReset, "reset");
        assert!(mongo(&mongodb::error::Error::from(reset)));
        let denied = std::io::Error::new(ErrorKind::PermissionDenied, "no");
        assert!(!mongo(&mongodb::error::Error::from(denied)));
    }

    #[test]
    fn sqlserver_deadlock_victims_and_azure_busy_codes_are_transient_others_permanent() {
        for code in [1205, 1222, 40501, 40613, 40197, 49918, 10928, 10054] {
            assert!(sqlserver_code(code), "{code}");
        }
        // invalid object name, login failed, permission denied, syntax, cannot open database.
        for code in [208, 18456, 229, 102, 4060] {
            assert!(!sqlserver_code(code), "{code}");
        }
        let reset = tiberius::error::Error::Io {
            kind: ErrorKind::ConnectionReset,
            message: "reset".into(),
        };
        assert!(sqlserver(&reset));
        assert!(!sqlserver(&tiberius::error::Error::Conversion(
            "bad".into()
        )));
    }

    #[test]
    fn sqlx_network_errors_and_pool_timeouts_are_transient_others_permanent() {
        let reset = std::io::Error::new(ErrorKind::ConnectionReset, "reset");
        assert!(sqlx(&sqlx::Error::Io(reset)));
        let refused = std::io::Error::new(ErrorKind::ConnectionRefused, "refused");
        assert!(sqlx(&sqlx::Error::Io(refused)));
        assert!(sqlx(&sqlx::Error::PoolTimedOut));
        assert!(!sqlx(&sqlx::Error::PoolClosed));
        assert!(!sqlx(&sqlx::Error::RowNotFound));
        assert!(!sqlx(&sqlx::Error::Protocol("bad".into())));
        let denied = std::io::Error::new(ErrorKind::PermissionDenied, "no");
        assert!(!sqlx(&sqlx::Error::Io(denied)));
    }
}
