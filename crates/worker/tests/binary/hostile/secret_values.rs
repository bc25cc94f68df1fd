//! The secrets the secrets test gives the Worker, and the search for them in what it said.

use base64::Engine as _;
use hkdf::Hkdf;
use sha2::Sha256;

use crate::harness::World;

pub struct Secrets {
    /// (what, value) pairs that must appear nowhere.
    pub values: Vec<(&'static str, String)>,
}

impl Secrets {
    pub fn of(world: &World) -> Secrets {
        let master = base64::engine::general_purpose::STANDARD
            .decode(&world.master_key)
            .expect("master key");
        let hkdf = Hkdf::<Sha256>::new(None, &master);
        let derived = |label: &str| {
            let mut key = [0u8; 32];
            hkdf.expand(label.as_bytes(), &mut key).expect("hkdf");
            hex::encode(key)
        };
        let id = &world.id;
        let values = vec![
            ("the master key", world.master_key.clone()),
            (
                "the master key without padding",
                world.master_key.trim_end_matches('=').to_owned(),
            ),
            ("the master key's hex", hex::encode(&master)),
            ("the credentials key", derived("fetcher-credentials-v1")),
            ("the internal HMAC key", derived("fetcher-internal-hmac-v1")),
            ("the external HMAC key", derived("fetcher-external-hmac-v1")),
            ("the storage key", derived("fetcher-storage-encryption-v1")),
            ("the PostgreSQL datasource password", format!("pgpw-{id}")),
            ("the hidden datasource password", format!("hiddenpw-{id}")),
            ("the MySQL datasource password", format!("mypw-{id}")),
            ("a stored connection password", format!("tablepw-{id}")),
            ("the DATABASE_URL password", format!("dburlpw-{id}")),
            ("the S3 secret", "fetcher-secret".to_owned()),
            ("the secret hostname", "db-secret-host".to_owned()),
            (
                "the stored connection's hostname",
                "vault-secret-host".to_owned(),
            ),
            ("the unresolvable single-label host", format!("nxhost{id}")),
            ("the PostgreSQL role's password", format!("pgauthpw-{id}")),
            (
                "the MariaDB account's wrong password",
                format!("mywrongpw-{id}"),
            ),
            ("the MariaDB account's password", format!("myrightpw-{id}")),
            ("the TLS datasources' password", format!("tlspw-{id}")),
        ];
        let mut values = values;
        for user in users(id) {
            values.push(("a datasource user name", user));
        }
        Secrets { values }
    }

    /// The first secret found in `haystack` (searched case-insensitively, so hex in either
    /// case counts), with the text around it.
    pub fn find(&self, haystack: &str) -> Option<(&'static str, String)> {
        let lower = haystack.to_lowercase();
        self.values.iter().find_map(|(what, value)| {
            let at = lower.find(&value.to_lowercase())?;
            let context: String = lower
                .chars()
                .skip(lower[..at].chars().count().saturating_sub(200))
                .take(400 + value.len())
                .collect();
            Some((*what, context))
        })
    }

    pub fn assert_absent(&self, haystack: &str, place: &str) {
        if let Some((what, context)) = self.find(haystack) {
            panic!("{what} leaked into {place}: …{context}…");
        }
    }
}

/// The datasources' user names, all secret.
fn users(id: &str) -> Vec<String> {
    [
        "hiddenuser",
        "myghost",
        "pgauth",
        "myauth",
        "pgtls",
        "mytls",
        "vaultuser",
    ]
    .iter()
    .map(|user| format!("{user}{id}"))
    .collect()
}
