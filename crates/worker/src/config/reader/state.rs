//! The state backend: the Worker's PostgreSQL (`DATABASE_URL`) or the Manager's MongoDB
//! (`MONGO_*`, the Manager mode), chosen by `STATE_BACKEND` or by which of the two is set.
//!
//! The `MONGO_*` variables keep upstream's meaning: `MONGO_URI` is the scheme, and the
//! connection string is `MONGO_URI://MONGO_USER:MONGO_PASSWORD@MONGO_HOST:MONGO_PORT`, then
//! `/?MONGO_PARAMETERS` when set (`fetcher:components/worker/internal/bootstrap/config.go:849-856`).
//! Where upstream leaves a gap, this reader decides, and the configuration reference says so:
//! `MONGO_URI` defaults to `mongodb` and `MONGO_PORT` to 27017 (upstream has neither and builds
//! a URI the driver refuses); the user is percent-encoded as the password is (upstream escapes
//! only the password, with Go's query escaping, whose `+` for a space the driver reads as a
//! `+`); no `MONGO_USER` means no credentials in the URI at all. The password is read only into
//! the URI, a secret; no problem repeats it.

use base64::Engine as _;
use secrecy::SecretString;

use super::super::{DatabaseSettings, MongoSettings, StateChoice, StateSettings};
use super::{number, Reader};

/// The variables whose being set means "the Manager mode is configured".
const MONGO_VARIABLES: [&str; 9] = [
    "MONGO_URI",
    "MONGO_HOST",
    "MONGO_NAME",
    "MONGO_USER",
    "MONGO_PASSWORD",
    "MONGO_PORT",
    "MONGO_PARAMETERS",
    "MONGO_TLS_CA_CERT",
    "MONGO_MAX_POOL_SIZE",
];

/// The state backend and what chose it; `None` when a problem was found (and reported).
pub(super) fn read(r: &mut Reader<'_>) -> Option<(StateSettings, StateChoice)> {
    // Both backends' variables are read (and checked when set) whichever is chosen, so a
    // mistake in either is found before it matters.
    let max_connections = r.number(&number::DATABASE_MAX_CONNECTIONS);
    let run_migrations = r.flag("DATABASE_RUN_MIGRATIONS", true);
    let mongo = mongo(r);
    let mongo_set = MONGO_VARIABLES.iter().any(|name| r.get(name).is_some());
    let database_set = r.get("DATABASE_URL").is_some();
    let (postgres, choice) = match r.get("STATE_BACKEND").map(str::to_ascii_lowercase) {
        Some(named) => match named.as_str() {
            "postgres" => (true, StateChoice::Variable),
            "mongodb" => (false, StateChoice::Variable),
            _ => {
                r.problem("STATE_BACKEND must be postgres or mongodb".to_owned());
                return None;
            }
        },
        None if mongo_set && database_set => {
            r.problem(
                "DATABASE_URL and MONGO_* are both set, so the state backend is ambiguous: set \
                 STATE_BACKEND=postgres (the Worker's PostgreSQL) or STATE_BACKEND=mongodb (the \
                 Manager's MongoDB)"
                    .to_owned(),
            );
            return None;
        }
        None => (!mongo_set, StateChoice::Environment),
    };
    if postgres {
        let url = r.required("DATABASE_URL", "the Worker's PostgreSQL state database")?;
        let database = DatabaseSettings {
            url: SecretString::from(url),
            max_connections: u32::try_from(max_connections).unwrap_or(u32::MAX),
            run_migrations,
        };
        return Some((StateSettings::Postgres(database), choice));
    }
    let host = r.required(
        "MONGO_HOST",
        "the Manager's MongoDB, for the mongodb state backend",
    );
    let name = r.required(
        "MONGO_NAME",
        "the Manager's database, for the mongodb state backend",
    );
    let mongo = mongo?;
    let (host, name) = (host?, name?);
    if let Some(why) = invalid_database_name(&name) {
        r.problem(format!("MONGO_NAME {why}"));
        return None;
    }
    if host.contains(['@', '/', '?', '#']) || host.contains(char::is_whitespace) {
        r.problem(
            "MONGO_HOST must be a host, or hosts separated by commas: the scheme goes in \
             MONGO_URI, the port in MONGO_PORT, the options in MONGO_PARAMETERS"
                .to_owned(),
        );
        return None;
    }
    if !mongo.tls {
        if !mongo.allow_insecure_tls {
            r.problem(
                "the Manager's MongoDB would be reached without TLS: set tls=true in \
                 MONGO_PARAMETERS or a MONGO_TLS_CA_CERT, or ALLOW_INSECURE_TLS=true to accept a \
                 plaintext connection (as lib-commons requires)"
                    .to_owned(),
            );
            return None;
        }
        r.warning(
            "ALLOW_INSECURE_TLS=true: the Manager's MongoDB is reached without TLS, its password \
             and the jobs' documents cross the network in the clear"
                .to_owned(),
        );
    }
    let uri = mongo_uri(&mongo, &host);
    // The driver's verdict on the URI as built, with stand-in credentials: its message may
    // quote the URI, and the password must not reach it.
    let checked = mongo_uri(
        &MongoParts {
            user: mongo.user.as_ref().map(|_| "user".to_owned()),
            password: "password".to_owned(),
            ..mongo.clone()
        },
        &host,
    );
    if let Err(error) = mongodb::options::ConnectionString::parse(&checked) {
        r.problem(format!(
            "MONGO_HOST, MONGO_PORT and MONGO_PARAMETERS do not make a MongoDB connection \
             string: {}",
            error.kind
        ));
        return None;
    }
    Some((
        StateSettings::MongoDb(MongoSettings {
            uri: SecretString::from(uri),
            name,
            max_pool_size: mongo.max_pool_size,
            tls_ca_pem: mongo.tls_ca_pem,
            tls: mongo.tls,
        }),
        choice,
    ))
}

/// The `MONGO_*` variables other than the host and the name, each checked when set.
#[derive(Clone)]
struct MongoParts {
    user: Option<String>,
    password: String,
    port: u16,
    parameters: Option<String>,
    max_pool_size: u32,
    tls_ca_pem: Option<Vec<u8>>,
    tls: bool,
    allow_insecure_tls: bool,
}

fn mongo(r: &mut Reader<'_>) -> Option<MongoParts> {
    let mut usable = true;
    match r.get("MONGO_URI") {
        None | Some("mongodb") => {}
        Some(scheme) if scheme.eq_ignore_ascii_case("mongodb+srv") => {
            r.problem(
                "MONGO_URI=mongodb+srv needs DNS SRV lookups, which this build of the Worker does \
                 not make: set MONGO_URI=mongodb and list the servers in MONGO_HOST \
                 (`host1,host2,host3`)"
                    .to_owned(),
            );
            usable = false;
        }
        Some(_) => {
            r.problem(
                "MONGO_URI must be the scheme, mongodb (upstream builds the connection string \
                 from MONGO_URI, MONGO_USER, MONGO_PASSWORD, MONGO_HOST and MONGO_PORT)"
                    .to_owned(),
            );
            usable = false;
        }
    }
    let port = u16::try_from(r.number(&number::MONGO_PORT)).unwrap_or(u16::MAX);
    let user = r.get("MONGO_USER").map(str::to_owned);
    // A password's spaces are its own.
    let password = r.raw("MONGO_PASSWORD");
    if user.is_none() && !password.is_empty() {
        r.problem("MONGO_PASSWORD is set without MONGO_USER, whose password it would be".into());
        usable = false;
    }
    let parameters = r.get("MONGO_PARAMETERS").map(str::to_owned);
    if parameters
        .as_deref()
        .is_some_and(|p| p.contains(['/', '#']))
    {
        r.problem(
            "MONGO_PARAMETERS must be the connection string's options, `key=value&key=value`, \
             with no `/` or `#`"
                .to_owned(),
        );
        usable = false;
    }
    let max_pool_size = u32::try_from(r.number(&number::MONGO_MAX_POOL_SIZE)).unwrap_or(u32::MAX);
    let tls_ca_pem = match r.get("MONGO_TLS_CA_CERT").map(ca_certificate) {
        None => None,
        Some(Ok(pem)) => Some(pem),
        Some(Err(why)) => {
            r.problem(format!("MONGO_TLS_CA_CERT {why}"));
            usable = false;
            None
        }
    };
    let allow_insecure_tls = allow_insecure_tls(r);
    let tls = tls_ca_pem.is_some() || parameters.as_deref().is_some_and(asks_for_tls);
    usable.then_some(MongoParts {
        user,
        password,
        port,
        parameters,
        max_pool_size,
        tls_ca_pem,
        tls,
        allow_insecure_tls,
    })
}

/// `ALLOW_INSECURE_TLS`, with lib-commons' spellings (`true`, `1`, `yes`, `on` and their
/// opposites, any case). Upstream reads any other text as false, and older deployments set it
/// to a reason: false too, with a warning.
fn allow_insecure_tls(r: &mut Reader<'_>) -> bool {
    let value = r.get("ALLOW_INSECURE_TLS").map(str::to_ascii_lowercase);
    match value.as_deref() {
        None | Some("false" | "0" | "no" | "off") => false,
        Some("true" | "1" | "yes" | "on") => true,
        Some(_) => {
            r.warning(
                "ALLOW_INSECURE_TLS is not true or false: read as false, as lib-commons reads it"
                    .to_owned(),
            );
            false
        }
    }
}

/// Whether the options turn TLS on (`tls=true` or `ssl=true`, any case), as lib-commons'
/// `isTLSImplied` reads them.
fn asks_for_tls(parameters: &str) -> bool {
    parameters.split('&').any(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        (key.eq_ignore_ascii_case("tls") || key.eq_ignore_ascii_case("ssl"))
            && value.eq_ignore_ascii_case("true")
    })
}

/// `MONGO_TLS_CA_CERT`: standard base64 of PEM certificates, as lib-commons decodes it.
fn ca_certificate(text: &str) -> Result<Vec<u8>, &'static str> {
    let pem = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|_| "must be standard base64 of PEM CA certificates")?;
    let holds_certificate =
        std::str::from_utf8(&pem).is_ok_and(|pem| pem.contains("-----BEGIN CERTIFICATE-----"));
    if !holds_certificate {
        return Err("decodes to no PEM certificate (-----BEGIN CERTIFICATE-----)");
    }
    Ok(pem)
}

/// Why `name` cannot name a MongoDB database, if it cannot (the server's rules: no `/\. "$`,
/// no NUL, under 64 bytes).
fn invalid_database_name(name: &str) -> Option<&'static str> {
    if name.len() >= 64 {
        return Some("must be shorter than 64 bytes");
    }
    name.contains(['/', '\\', '.', ' ', '"', '$', '\0'])
        .then_some("must be a MongoDB database name, without / \\ . \" $ or spaces")
}

/// The connection string, as upstream builds it (see the module's doc for the differences).
fn mongo_uri(parts: &MongoParts, host: &str) -> String {
    let credentials = match &parts.user {
        None => String::new(),
        Some(user) => format!(
            "{}:{}@",
            contract::wire::percent_encode(user),
            contract::wire::percent_encode(&parts.password)
        ),
    };
    let mut uri = format!("mongodb://{credentials}{host}:{}", parts.port);
    if let Some(parameters) = &parts.parameters {
        uri.push_str("/?");
        uri.push_str(parameters);
    }
    uri
}
