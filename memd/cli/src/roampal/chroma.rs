//! Reads a Roampal store's ChromaDB file (`chromadb/chroma.sqlite3`) into plain rows.
//!
//! Owns the SQLite side of `memd import --from-roampal`: opening the file read-only (Roampal may
//! still be running; a store in WAL mode that cannot be opened read-only in place is read from
//! a private copy), checking that the tables and columns it needs are there, and turning each
//! embedding row with its metadata rows into a [`Row`]. Must never write to the file, and never
//! guess: a layout it does not know is an error that names what is missing. What a field means
//! is `map`'s business.

use anyhow::{Context, Result, bail};
use rusqlite::{Connection, OpenFlags};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The five collections a Roampal 0.6 store holds, by their ChromaDB names.
pub const COLLECTIONS: [&str; 5] = [
    "roampal_memory_bank",
    "roampal_working",
    "roampal_history",
    "roampal_patterns",
    "roampal_books",
];

/// The metadata key under which ChromaDB keeps a row's document text.
const DOCUMENT_KEY: &str = "chroma:document";

/// The largest text value read (a document or a metadata string). A bigger one is never loaded
/// (SQLite measures it without reading it): its row is invalid, refused or, with
/// `--skip-invalid`, skipped (issue 36: three 419 MB documents aborted the import, and one
/// stopped every rerun at the same place).
pub const VALUE_MAX_BYTES: i64 = 1024 * 1024;

/// How long a read waits for Roampal's own write to finish (its writes are short).
const BUSY_WAIT: Duration = Duration::from_secs(10);

/// One typed value of ChromaDB metadata.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
}

/// A metadata field: one value (`embedding_metadata`) or an array (`embedding_metadata_array`,
/// where ChromaDB keeps list-valued metadata).
#[derive(Debug, Clone, PartialEq)]
pub enum Field {
    One(Scalar),
    Many(Vec<Scalar>),
}

/// One stored memory as ChromaDB holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The ChromaDB collection, e.g. `roampal_working`.
    pub collection: String,
    /// Roampal's id (`embedding_id`), e.g. `working_1a2b3c4d`.
    pub id: String,
    pub document: Option<String>,
    pub fields: BTreeMap<String, Field>,
    /// ChromaDB's own insertion time of the row (`embeddings.created_at`), when readable.
    pub stored_at: Option<String>,
    /// Values over [`VALUE_MAX_BYTES`], left unread: (key, bytes).
    pub oversized: Vec<(String, i64)>,
}

/// Everything read from one store.
#[derive(Debug)]
pub struct Store {
    pub file: PathBuf,
    /// Rows of the five collections, in insertion order.
    pub rows: Vec<Row>,
    /// Collections found that are not Roampal's (ignored), by name.
    pub foreign: Vec<String>,
    /// The newest ChromaDB schema migration applied, when the file records one.
    pub schema: Option<String>,
}

/// The columns of both metadata tables (single values and arrays).
const METADATA_COLUMNS: &[&str] = &[
    "id",
    "key",
    "string_value",
    "int_value",
    "float_value",
    "bool_value",
];

/// The columns each table must have; more columns are fine (newer ChromaDB adds some).
const REQUIRED: [(&str, &[&str]); 4] = [
    ("collections", &["id", "name"]),
    ("segments", &["id", "collection"]),
    ("embeddings", &["id", "segment_id", "embedding_id"]),
    ("embedding_metadata", METADATA_COLUMNS),
];

/// Reads every Roampal row of `file` in one read transaction (a consistent snapshot even if
/// Roampal writes meanwhile).
pub fn read(file: &Path) -> Result<Store> {
    let (conn, _copy) = open_read_only(file)?;
    check_layout(&conn, file)?;
    let schema = newest_migration(&conn);
    let tx = conn.unchecked_transaction()?;
    let names = collection_names(&tx)?;
    let foreign: Vec<String> = names
        .iter()
        .filter(|n| !n.starts_with("roampal_"))
        .cloned()
        .collect();
    if let Some(unknown) = names
        .iter()
        .find(|n| n.starts_with("roampal_") && !COLLECTIONS.contains(&n.as_str()))
    {
        bail!(
            "{}: collection {unknown:?} is not one memd knows (it knows {}); it may come from a \
             newer Roampal. Nothing was imported.",
            file.display(),
            COLLECTIONS.join(", ")
        );
    }
    let mut rows = read_rows(&tx)?;
    add_arrays(&tx, &mut rows)?;
    tx.finish()?;
    Ok(Store {
        file: file.to_path_buf(),
        rows: rows.into_values().collect(),
        foreign,
        schema,
    })
}

/// Opens `file` read-only. When that fails (a WAL-mode file whose `-shm` cannot be created
/// read-only), copies the file and its `-wal` into a private temporary directory and opens the
/// copy; the directory lives as long as the returned guard.
fn open_read_only(file: &Path) -> Result<(Connection, Option<tempfile::TempDir>)> {
    if !file.is_file() {
        bail!(
            "{} not found: not a Roampal data directory (expected chromadb/chroma.sqlite3)",
            file.display()
        );
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let direct = Connection::open_with_flags(file, flags).and_then(|c| {
        c.busy_timeout(BUSY_WAIT)?;
        // Touch the schema: a file that opens but cannot be read fails here, not later.
        c.query_row("SELECT count(*) FROM sqlite_master", [], |r| {
            r.get::<_, i64>(0)
        })?;
        Ok(c)
    });
    match direct {
        Ok(c) => Ok((c, None)),
        Err(first) => {
            let dir = tempfile::Builder::new()
                .prefix("memd-roampal-")
                .tempdir()
                .context("cannot create a temporary directory")?;
            let copy = dir.path().join("chroma.sqlite3");
            std::fs::copy(file, &copy)
                .with_context(|| format!("cannot read {} ({first})", file.display()))?;
            // The write-ahead log (WAL mode) or a hot rollback journal (an interrupted write,
            // which SQLite rolls back on open): without it the copy would read as committed
            // what was not, or miss what was.
            for suffix in ["-wal", "-journal"] {
                let side = with_suffix(file, suffix);
                if side.is_file() {
                    std::fs::copy(&side, with_suffix(&copy, suffix))
                        .with_context(|| format!("cannot read {}", side.display()))?;
                }
            }
            let c = Connection::open_with_flags(&copy, OpenFlags::SQLITE_OPEN_READ_WRITE)
                .with_context(|| format!("cannot open {} ({first})", file.display()))?;
            Ok((c, Some(dir)))
        }
    }
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// Refuses a file without the tables and columns the import reads, naming the first missing.
fn check_layout(conn: &Connection, file: &Path) -> Result<()> {
    for (table, columns) in REQUIRED {
        let have = table_columns(conn, table)
            .with_context(|| format!("cannot read the layout of {}", file.display()))?;
        if have.is_empty() {
            bail!(
                "{}: no table `{table}`: not a ChromaDB store memd understands (Roampal 0.6 \
                 writes one). Nothing was imported.",
                file.display()
            );
        }
        if let Some(missing) = columns.iter().find(|c| !have.iter().any(|h| h == *c)) {
            bail!(
                "{}: table `{table}` has no column `{missing}`: a ChromaDB layout memd does not \
                 understand (a newer Roampal?). Nothing was imported.",
                file.display()
            );
        }
    }
    Ok(())
}

fn table_columns(conn: &Connection, table: &str) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare("SELECT name FROM pragma_table_info(?1)")?;
    stmt.query_map([table], |r| r.get::<_, String>(0))?
        .collect()
}

/// The newest applied ChromaDB migration of each part (`embeddings_queue v2, metadb v6, ...`),
/// for messages and bug reports; `None` when the file keeps no record.
fn newest_migration(conn: &Connection) -> Option<String> {
    let mut stmt = conn
        .prepare("SELECT dir, max(version) FROM migrations GROUP BY dir ORDER BY dir")
        .ok()?;
    let parts = stmt
        .query_map([], |r| {
            Ok(format!(
                "{} v{}",
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?
            ))
        })
        .ok()?
        .collect::<rusqlite::Result<Vec<_>>>()
        .ok()?;
    (!parts.is_empty()).then(|| parts.join(", "))
}

fn collection_names(conn: &Connection) -> Result<Vec<String>> {
    let mut stmt = conn.prepare("SELECT name FROM collections ORDER BY name")?;
    let names = stmt
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(names)
}

/// `string_value`, or NULL when it is over [`VALUE_MAX_BYTES`] (`octet_length` reads only the
/// size, so an oversized value is never loaded).
const BOUNDED_STRING: &str = "CASE WHEN octet_length(string_value) > 1048576 THEN NULL \
                              ELSE string_value END";

/// Rows of the five collections keyed by ChromaDB's row number (insertion order), each with
/// its single-valued metadata.
fn read_rows(conn: &Connection) -> Result<BTreeMap<i64, Row>> {
    let stored_at = table_columns(conn, "embeddings")?
        .iter()
        .any(|c| c == "created_at");
    let sql = format!(
        "SELECT e.id, c.name, e.embedding_id, {}, m.key, {BOUNDED_STRING}, m.int_value, \
                m.float_value, m.bool_value, octet_length(m.string_value)
         FROM embeddings e
         JOIN segments s ON e.segment_id = s.id
         JOIN collections c ON s.collection = c.id
         LEFT JOIN embedding_metadata m ON m.id = e.id
         WHERE c.name IN ({})
         ORDER BY e.id",
        if stored_at {
            "CAST(e.created_at AS TEXT)"
        } else {
            "NULL"
        },
        COLLECTIONS.map(|c| format!("'{c}'")).join(", ")
    );
    let mut stmt = conn.prepare(&sql)?;
    let mut rows: BTreeMap<i64, Row> = BTreeMap::new();
    let mut cursor = stmt.query([])?;
    while let Some(r) = cursor.next()? {
        let key: i64 = r.get(0)?;
        let row = rows.entry(key).or_insert_with(|| Row {
            collection: r.get(1).unwrap_or_default(),
            id: r.get(2).unwrap_or_default(),
            document: None,
            fields: BTreeMap::new(),
            stored_at: r.get(3).ok().flatten(),
            oversized: Vec::new(),
        });
        let Some(name) = r.get::<_, Option<String>>(4)? else {
            continue; // a row without metadata at all
        };
        if let Some(bytes) = r.get::<_, Option<i64>>(9)?.filter(|b| *b > VALUE_MAX_BYTES) {
            row.oversized.push((name, bytes));
            continue;
        }
        let value = scalar(r, 5)?;
        match (name.as_str(), value) {
            (DOCUMENT_KEY, Some(Scalar::Str(text))) => row.document = Some(text),
            (k, _) if k.starts_with("chroma:") => {} // ChromaDB's own bookkeeping
            (_, Some(v)) => {
                row.fields.insert(name, Field::One(v));
            }
            (_, None) => {} // a key whose every value column is NULL: nothing to carry
        }
    }
    Ok(rows)
}

/// The value of the four typed columns starting at `first`: the one that is not NULL.
fn scalar(r: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<Option<Scalar>> {
    if let Some(s) = r.get::<_, Option<String>>(first)? {
        return Ok(Some(Scalar::Str(s)));
    }
    if let Some(i) = r.get::<_, Option<i64>>(first + 1)? {
        return Ok(Some(Scalar::Int(i)));
    }
    if let Some(f) = r.get::<_, Option<f64>>(first + 2)? {
        return Ok(Some(Scalar::Float(f)));
    }
    Ok(r.get::<_, Option<bool>>(first + 3)?.map(Scalar::Bool))
}

/// List-valued metadata (newer ChromaDB writes tags this way after an update): one table row
/// per element, in element order. Absent in older files.
fn add_arrays(conn: &Connection, rows: &mut BTreeMap<i64, Row>) -> Result<()> {
    let columns = table_columns(conn, "embedding_metadata_array")?;
    if columns.is_empty() {
        return Ok(());
    }
    for needed in METADATA_COLUMNS {
        if !columns.iter().any(|c| c == needed) {
            bail!(
                "table `embedding_metadata_array` has no column `{needed}`: a ChromaDB layout \
                 memd does not understand. Nothing was imported."
            );
        }
    }
    let order = if columns.iter().any(|c| c == "rowid") {
        "rowid"
    } else {
        "id, key, rowid"
    };
    let mut stmt = conn.prepare(&format!(
        "SELECT id, key, {BOUNDED_STRING}, int_value, float_value, bool_value,
                octet_length(string_value)
         FROM embedding_metadata_array ORDER BY {order}"
    ))?;
    let mut cursor = stmt.query([])?;
    while let Some(r) = cursor.next()? {
        let key: i64 = r.get(0)?;
        let Some(row) = rows.get_mut(&key) else {
            continue; // a row of another (non-Roampal) collection
        };
        let name: String = r.get(1)?;
        if let Some(bytes) = r.get::<_, Option<i64>>(6)?.filter(|b| *b > VALUE_MAX_BYTES) {
            row.oversized.push((name, bytes));
            continue;
        }
        let Some(v) = scalar(r, 2)? else { continue };
        match row.fields.entry(name) {
            std::collections::btree_map::Entry::Occupied(mut e) => match e.get_mut() {
                Field::Many(items) => items.push(v),
                // A key both single-valued and an array: the array is the newer write.
                one => *one = Field::Many(vec![v]),
            },
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert(Field::Many(vec![v]));
            }
        }
    }
    Ok(())
}
