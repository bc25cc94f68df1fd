//! The `plugin_crm` path's reads (`docs/UPSTREAM-MONGO-MSSQL.md` §3): a requested logical
//! collection `C` is every collection named `C_*` of the connection's database, read one after
//! another (in name order) into the one result table `C`; when the requested fields ask for it
//! ([`crate::plugin_crm::decrypts`]), the CRM's encrypted fields are decrypted before the rows are
//! written. Its filters were rewritten before planning ([`crate::plugin_crm::rewrite_filters`]).

use std::collections::BTreeMap;

use mongodb::bson::{Bson, Document, RawDocumentBuf};

use crypto::{CrmCipher, CrmHashKey};

use super::{error, is_reserved, values, Find, Session, Source};
use crate::catalog::{Catalog, Table, TableName};
use crate::config::CrmSecrets;
use crate::datasource::Datasource;
use crate::error::{EngineError, Result};
use crate::plan::{Naming, TablePlan};
use crate::result::ConnectionResult;

/// The CRM's encrypted fields, as document paths: each is decrypted where it holds a non-empty
/// string.
pub(crate) const ENCRYPTED_FIELDS: [&str; 13] = [
    "document",
    "name",
    "contact.primary_email",
    "contact.secondary_email",
    "contact.mobile_phone",
    "contact.other_phone",
    "banking_details.account",
    "banking_details.iban",
    "legal_person.representative.name",
    "legal_person.representative.document",
    "legal_person.representative.email",
    "natural_person.mother_name",
    "natural_person.father_name",
];

/// A MongoDB session on the CRM's database, with the physical collections its catalog found.
pub(crate) struct CrmSession {
    inner: Session,
    secrets: CrmSecrets,
    /// Each logical collection's physical ones, in name order.
    physical: BTreeMap<String, Vec<String>>,
}

impl CrmSession {
    pub(crate) fn new(inner: Session, secrets: CrmSecrets) -> CrmSession {
        CrmSession {
            inner,
            secrets,
            physical: BTreeMap::new(),
        }
    }
}

/// The CRM as the engine sees it.
pub(crate) struct CrmSource;

impl Datasource for CrmSource {
    type Session = CrmSession;

    fn naming(database: &str) -> Naming {
        Source::naming(database)
    }

    async fn load_catalog(
        session: &mut CrmSession,
        connection: &str,
        database: &str,
        tables: &[TableName],
    ) -> Result<Catalog> {
        let schema_error = |detail: String| EngineError::Schema {
            connection: connection.to_owned(),
            detail,
        };
        let names = session
            .inner
            .client
            .database(database)
            .list_collection_names()
            .await
            .map_err(|e| error(connection, &e))?;
        let mut catalog = Catalog::default();
        for name in tables {
            if name.schema.is_some() {
                return Err(schema_error(format!(
                    "collection {:?} names a database: the CRM's collections are its connection's",
                    format!(
                        "{}.{}",
                        name.schema.as_deref().unwrap_or_default(),
                        name.table
                    )
                )));
            }
            let prefix = format!("{}_", name.table);
            let mut matching: Vec<String> = names
                .iter()
                .filter(|n| n.starts_with(&prefix) && !is_reserved(database, n))
                .cloned()
                .collect();
            if matching.is_empty() {
                return Err(schema_error(format!(
                    "no collections found matching prefix {prefix:?} in plugin_crm database"
                )));
            }
            matching.sort_unstable();
            session.physical.insert(name.table.clone(), matching);
            catalog.tables.insert(
                name.clone(),
                Table {
                    schema: database.to_owned(),
                    columns: Vec::new(),
                    document_paths: true,
                },
            );
        }
        Ok(catalog)
    }

    async fn stream(
        session: &mut CrmSession,
        connection: &str,
        plans: &[TablePlan],
        out: &mut ConnectionResult,
    ) -> Result<()> {
        let mut reads = Vec::with_capacity(plans.len());
        for plan in plans {
            let fields: Vec<String> = plan.columns.iter().map(|c| c.name.clone()).collect();
            let cipher = if crate::plugin_crm::decrypts(&fields) {
                Some(
                    cipher(&session.secrets)
                        .map_err(|detail| EngineError::query_detail(connection, detail))?,
                )
            } else {
                None
            };
            reads.push((Find::of(connection, plan)?, cipher));
        }
        for (find, cipher) in reads {
            out.start_table(&find.plan.key)?;
            let physical = session
                .physical
                .get(&find.plan.name.table)
                .cloned()
                .unwrap_or_default();
            let mut record = 0usize;
            for collection in physical {
                let mut cursor = find.open(&session.inner, connection, &collection).await?;
                while cursor.advance().await.map_err(|e| error(connection, &e))? {
                    let failed = |detail: String| find.row_error(connection, detail);
                    let w = out.begin_row()?;
                    match &cipher {
                        None => values::write_members(w, cursor.current()).map_err(failed)?,
                        Some(cipher) => {
                            let document = decrypted(cursor.current(), cipher)
                                .map_err(|e| failed(format!("record {record}: {e}")))?;
                            values::write_members(w, &document).map_err(failed)?;
                        }
                    }
                    out.end_row().await?;
                    record += 1;
                }
            }
        }
        Ok(())
    }

    fn finish(_session: CrmSession, _succeeded: bool) {}
}

/// The cipher of the encrypted fields, after the checks upstream makes before any row: the
/// encryption key, then the hash key, must be configured.
fn cipher(secrets: &CrmSecrets) -> std::result::Result<CrmCipher, String> {
    if secrets.encrypt_key.is_empty() {
        return Err(crypto::CrmKeyError::EncryptKeyMissing.to_string());
    }
    CrmHashKey::new(&secrets.hash_key).map_err(|e| e.to_string())?;
    CrmCipher::from_hex(&secrets.encrypt_key).map_err(|e| e.to_string())
}

/// A row with each encrypted field that holds a non-empty string decrypted.
fn decrypted(
    raw: &mongodb::bson::RawDocument,
    cipher: &CrmCipher,
) -> std::result::Result<RawDocumentBuf, String> {
    let mut document: Document = raw
        .try_into()
        .map_err(|e: mongodb::bson::raw::Error| e.to_string())?;
    for path in ENCRYPTED_FIELDS {
        let Some(value) = field_mut(&mut document, path) else {
            continue;
        };
        if let Bson::String(text) = value {
            if !text.is_empty() {
                let plain = cipher
                    .decrypt(text)
                    .map_err(|e| format!("failed to decrypt field {path}: {e}"))?;
                *value = Bson::String(plain);
            }
        }
    }
    RawDocumentBuf::from_document(&document).map_err(|e| e.to_string())
}

/// The value at a dotted `path` through embedded documents, if there is one.
fn field_mut<'d>(document: &'d mut Document, path: &str) -> Option<&'d mut Bson> {
    let mut segments = path.split('.');
    let mut value = document.get_mut(segments.next()?)?;
    for segment in segments {
        value = match value {
            Bson::Document(inner) => inner.get_mut(segment)?,
            _ => return None,
        };
    }
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mongodb::bson::doc;

    const KEY: &str = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";

    fn secrets(hash: &str, encrypt: &str) -> CrmSecrets {
        CrmSecrets {
            hash_key: hash.to_owned().into(),
            encrypt_key: encrypt.to_owned().into(),
        }
    }

    #[test]
    fn the_encrypted_fields_are_decrypted_with_the_known_answers_and_others_stay() {
        let cipher = cipher(&secrets("h", KEY)).unwrap();
        let stored = doc! {
            "document": "AAECAwQFBgcICQoLyB/IOKq2fZrou8rDKPQVBtnImJNPwT+07R6g",
            "name": "AAECAwQFBgcICQoLs0KTYr/EJcdOb7I3rrIP1HMUp34L/W5G",
            "contact": { "primary_email": "", "other_phone": Bson::Null },
            "natural_person": "not a document",
            "status": "AAECAwQFBgcICQoLs0KTYr/EJcdOb7I3rrIP1HMUp34L/W5G",
        };
        let raw = RawDocumentBuf::from_document(&stored).unwrap();
        let opened: Document = decrypted(&raw, &cipher).unwrap().try_into().unwrap();
        assert_eq!(opened.get_str("document").unwrap(), "12345678900");
        assert_eq!(opened.get_str("name").unwrap(), "John Doe");
        assert_eq!(
            opened.get_document("contact").unwrap(),
            &doc! { "primary_email": "", "other_phone": Bson::Null }
        );
        assert_eq!(opened.get_str("natural_person").unwrap(), "not a document");
        assert_eq!(
            opened.get_str("status").unwrap(),
            stored.get_str("status").unwrap(),
            "a field outside the list stays as stored"
        );
    }

    #[test]
    fn an_undecryptable_value_names_its_field_and_never_its_content() {
        let cipher = cipher(&secrets("h", KEY)).unwrap();
        let raw = RawDocumentBuf::from_document(&doc! {
            "contact": { "primary_email": "bm90LWNpcGhlcnRleHQtYXQtYWxsLWF0LWFsbA==" }
        })
        .unwrap();
        let error = decrypted(&raw, &cipher).unwrap_err();
        assert!(
            error.starts_with("failed to decrypt field contact.primary_email"),
            "{error}"
        );
        assert!(!error.contains("bm90"), "{error}");
    }

    #[test]
    fn missing_or_bad_keys_are_refused_in_upstreams_order_without_their_values() {
        let missing_encrypt = cipher(&secrets("h", "")).unwrap_err();
        assert!(
            missing_encrypt.contains("encrypt secret key not configured"),
            "{missing_encrypt}"
        );
        let missing_hash = cipher(&secrets("", KEY)).unwrap_err();
        assert!(
            missing_hash.contains("hash secret key not configured"),
            "{missing_hash}"
        );
        let bad = cipher(&secrets("h", "xyz-not-hex")).unwrap_err();
        assert!(bad.contains("not hex") && !bad.contains("xyz"), "{bad}");
    }
}
