//! A bulk import: people from JSON lines or CSV, upserted a batch at a time. **Line by line**: a
//! line that cannot be read or kept is reported with its number and nothing of it is stored, and
//! the others are; a 100,000-line file with one typo should not be refused whole, and sending the
//! file again (fixed) is safe, because a line that matches what is stored changes nothing.

use std::collections::HashMap;

use serde::Serialize;
use utoipa::ToSchema;

use super::People;
use super::change::{batch_evidence, person_change};
use super::manage::{Changing, change_of};
use crate::domain::directory::{AddressKind, OneOrMany, Person, PersonFields, Roles};
use crate::domain::names::named_enum;
use crate::store::{BatchRow, Source, StoreError, StoredPerson, Written};

/// Lines written per transaction.
pub(super) const BATCH: usize = 500;
/// How often a line that crossed another change is read again before it is refused.
pub(super) const ROUNDS: usize = 8;
/// How many refused lines the report names (all are counted).
const PROBLEMS_SHOWN: usize = 100;
/// People written before the database's statistics are first brought up to date, and how much
/// that number grows before the next time (`Directory::refresh_statistics`).
const FIRST_REFRESH: u64 = 1_000;
const REFRESH_GROWTH: u64 = 4;

/// When the statistics are next brought up to date while many people are written (an import,
/// the directory file's seed).
pub(super) struct Refreshes {
    next: u64,
}

impl Refreshes {
    pub(super) fn new() -> Self {
        Self { next: FIRST_REFRESH }
    }

    /// Once `written` people in all are written: refreshes the statistics when that is due.
    pub(super) async fn after(&mut self, written: u64, people: &People) -> Result<(), StoreError> {
        if written >= self.next {
            self.next = written * REFRESH_GROWTH;
            people.store.directory().refresh_statistics().await?;
        }
        Ok(())
    }
}

named_enum! {
    /// How the lines are written: `ndjson` (`application/x-ndjson`, one JSON object a line) or
    /// `csv` (`text/csv`, a header line naming the columns, then one person a line).
    ImportFormat {
        NdJson => "ndjson",
        Csv => "csv",
    }
}

named_enum! {
    /// The columns of a CSV import that are a person's fields; every other column is an address
    /// kind, by its name ([`AddressKind`]: a kind added is a column).
    FieldColumn {
        Id => "id",
        Name => "name",
        Roles => "roles",
        Locale => "locale",
        Active => "active",
    }
}

/// A column a CSV import may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Column {
    Field(FieldColumn),
    Address(AddressKind),
}

impl std::str::FromStr for Column {
    type Err = String;
    fn from_str(name: &str) -> Result<Self, String> {
        let address = || name.parse().map(Column::Address);
        name.parse().map(Column::Field).or_else(|_| address()).map_err(|_| {
            let fields = FieldColumn::ALL.iter().map(|c| c.as_str());
            let known: Vec<&str> = fields.chain(AddressKind::ALL.iter().map(|k| k.as_str())).collect();
            format!("`{name}` is not a column (the columns are {})", known.join(", "))
        })
    }
}

impl std::fmt::Display for Column {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Column::Field(field) => field.fmt(f),
            Column::Address(kind) => kind.fmt(f),
        }
    }
}

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, ToSchema)]
pub struct ImportReport {
    /// Lines read, the header and blank lines included.
    pub lines: u64,
    pub created: u64,
    pub updated: u64,
    /// Lines that matched what was stored: nothing written.
    pub unchanged: u64,
    pub refused: u64,
    /// The first 100 refused lines, each with why.
    pub problems: Vec<LineProblem>,
}

/// A line not imported, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct LineProblem {
    /// 1 for the first line.
    pub line: u64,
    pub problem: String,
}

/// Why an import stopped.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// A CSV file whose header is not one: nothing can be read.
    #[error("line 1: {0}")]
    Header(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// An import under way: lines go in (`line`) and are written a batch at a time.
pub struct Importer<'a> {
    people: &'a People,
    who: Changing<'a>,
    format: ImportFormat,
    header: Option<Vec<Column>>,
    roles: Roles,
    pending: Vec<(u64, PersonFields)>,
    report: ImportReport,
    refreshes: Refreshes,
}

/// A line read and checked, not yet written: its number, the person, how they were.
type Ready = (u64, PersonFields, Person, Option<StoredPerson>);

impl<'a> Importer<'a> {
    pub async fn new(people: &'a People, who: Changing<'a>, format: ImportFormat) -> Result<Self, StoreError> {
        let roles = people.roles(who.tenant).await?;
        let report = ImportReport::default();
        let refreshes = Refreshes::new();
        Ok(Self { people, who, format, header: None, roles, pending: vec![], report, refreshes })
    }

    /// Line `number`, as read (`Err`: why it could not be, a line too long say).
    pub async fn line(&mut self, number: u64, line: Result<&str, String>) -> Result<(), ImportError> {
        self.report.lines += 1;
        let line = match line {
            Ok(line) => line.trim_start_matches('\u{feff}').trim(),
            Err(problem) => {
                self.refuse(number, problem);
                return Ok(());
            }
        };
        if line.is_empty() {
            return Ok(());
        }
        let fields = match (self.format, &self.header) {
            (ImportFormat::NdJson, _) => PersonFields::from_json(line.as_bytes()),
            (ImportFormat::Csv, None) => {
                self.header = Some(header(line).map_err(ImportError::Header)?);
                return Ok(());
            }
            (ImportFormat::Csv, Some(columns)) => csv_fields(columns, line),
        };
        match fields.and_then(|f| f.id().map(|_| f).map_err(|e| e.to_string())) {
            Ok(fields) => self.pending.push((number, fields)),
            Err(problem) => self.refuse(number, problem),
        }
        if self.pending.len() >= BATCH {
            self.flush().await?;
        }
        Ok(())
    }

    pub async fn finish(mut self) -> Result<ImportReport, ImportError> {
        if self.format == ImportFormat::Csv && self.header.is_none() {
            return Err(ImportError::Header("a CSV import begins with a header line naming its columns".into()));
        }
        self.flush().await?;
        Ok(self.report)
    }

    fn refuse(&mut self, line: u64, problem: String) {
        self.report.refused += 1;
        if self.report.problems.len() < PROBLEMS_SHOWN {
            self.report.problems.push(LineProblem { line, problem });
        }
    }

    async fn flush(&mut self) -> Result<(), StoreError> {
        let mut pending = std::mem::take(&mut self.pending);
        for _ in 0..ROUNDS {
            if pending.is_empty() {
                break;
            }
            pending = self.write_round(pending).await?;
        }
        for (line, _) in pending {
            self.refuse(line, "the person changed while this line was written; import it again".into());
        }
        let written = self.report.created + self.report.updated;
        if written > 0 {
            self.people.changed(self.who.tenant);
        }
        self.refreshes.after(written, self.people).await
    }

    /// Writes what it can of `pending`; gives back the lines to read again.
    async fn write_round(&mut self, pending: Vec<(u64, PersonFields)>) -> Result<Vec<(u64, PersonFields)>, StoreError> {
        let ready = self.read_current(pending).await?;
        let rows: Vec<BatchRow<'_>> = ready
            .iter()
            .map(|(_, _, p, before)| BatchRow { person: p, expected: before.as_ref().map_or(0, |b| b.version) })
            .collect();
        let evidence = |written: &[usize]| {
            let changes = written.iter().map(|&i| {
                let (_, _, after, before) = &ready[i];
                let before = before.as_ref().map(|b| &b.person);
                person_change(change_of(before, after), self.people.pseudonym(after.id.as_str()), before, Some(after))
            });
            vec![batch_evidence(changes.collect(), &self.who.by)]
        };
        let written = self
            .people
            .store
            .directory()
            .write_batch(self.who.tenant, &rows, (Source::Api, self.who.at), evidence)
            .await?;
        let Some(outcomes) = written else {
            return Ok(ready.into_iter().map(|(line, fields, _, _)| (line, fields)).collect());
        };
        let mut again = vec![];
        for ((line, fields, _, before), outcome) in ready.into_iter().zip(outcomes) {
            match outcome {
                Written::Done(_) if before.is_none() => self.report.created += 1,
                Written::Done(_) => self.report.updated += 1,
                Written::Stale => again.push((line, fields)),
                Written::AddressTaken { address, owner } => {
                    self.refuse(line, format!("the address {address} belongs to `{owner}`"));
                }
            }
        }
        Ok(again)
    }

    /// The lines with the people they make of those stored now; those that cannot be kept are
    /// refused and those that change nothing counted.
    async fn read_current(&mut self, pending: Vec<(u64, PersonFields)>) -> Result<Vec<Ready>, StoreError> {
        let ids: Vec<String> =
            pending.iter().filter_map(|(_, f)| f.id().ok()).map(|id| id.as_str().to_owned()).collect();
        let mut current: HashMap<String, StoredPerson> =
            self.people.store.directory().get_many(self.who.tenant, &ids).await?;
        let mut ready = vec![];
        for (line, fields) in pending {
            let made = fields.id().and_then(|id| {
                let before = current.get(id.as_str());
                let person = fields.apply(&id, before.map(|b| &b.person))?;
                person.check(&self.roles).map(|()| person)
            });
            match made {
                Err(problem) => self.refuse(line, problem.to_string()),
                Ok(person) => {
                    let before = current.remove(person.id.as_str());
                    if before.as_ref().is_some_and(|b| b.person == person) {
                        self.report.unchanged += 1;
                    } else {
                        ready.push((line, fields, person, before));
                    }
                }
            }
        }
        Ok(ready)
    }
}

/// A CSV header: the columns, each named once.
fn header(line: &str) -> Result<Vec<Column>, String> {
    let cells = csv_cells(line)?;
    let mut columns: Vec<Column> = vec![];
    for cell in &cells {
        let column: Column = cell.trim().parse()?;
        if columns.contains(&column) {
            return Err(format!("`{column}` is named twice"));
        }
        columns.push(column);
    }
    if !columns.contains(&Column::Field(FieldColumn::Id)) {
        return Err("the header names no `id` column".into());
    }
    Ok(columns)
}

fn csv_cells(line: &str) -> Result<Vec<String>, String> {
    let mut reader = csv::ReaderBuilder::new().has_headers(false).flexible(true).from_reader(line.as_bytes());
    let record = reader.records().next().ok_or("an empty line")?.map_err(|e| format!("not a CSV line: {e}"))?;
    Ok(record.iter().map(str::to_owned).collect())
}

/// A CSV line as a person's fields: an empty cell leaves its field out; roles and several
/// addresses of a kind are separated by `;` or `|`.
fn csv_fields(columns: &[Column], line: &str) -> Result<PersonFields, String> {
    let cells = csv_cells(line)?;
    if cells.len() != columns.len() {
        return Err(format!("{} cells where the header names {} columns", cells.len(), columns.len()));
    }
    let mut fields = PersonFields::default();
    let split =
        |cell: &str| cell.split([';', '|']).map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect::<Vec<_>>();
    let mut addresses = std::collections::BTreeMap::new();
    for (column, cell) in columns.iter().zip(&cells).filter(|(_, cell)| !cell.trim().is_empty()) {
        let cell = cell.trim();
        match column {
            Column::Field(FieldColumn::Id) => fields.id = Some(cell.to_owned()),
            Column::Field(FieldColumn::Name) => fields.name = Some(cell.to_owned()),
            Column::Field(FieldColumn::Roles) => fields.roles = Some(split(cell)),
            Column::Field(FieldColumn::Locale) => fields.locale = Some(Some(cell.to_owned())),
            Column::Field(FieldColumn::Active) => fields.active = Some(yes_or_no(cell)?),
            Column::Address(kind) => drop(addresses.insert(*kind, OneOrMany::Many(split(cell)))),
        }
    }
    if columns.iter().any(|c| matches!(c, Column::Address(_))) {
        fields.addresses = Some(addresses);
    }
    Ok(fields)
}

fn yes_or_no(cell: &str) -> Result<bool, String> {
    match cell.to_ascii_lowercase().as_str() {
        "true" | "yes" | "1" => Ok(true),
        "false" | "no" | "0" => Ok(false),
        _ => Err(format!("`active` is true or false, not `{cell}`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_lines_read_as_the_json_lines_do() {
        let columns = header("id,name,roles,whatsapp,active").expect("header");
        let fields = csv_fields(&columns, "c-1042,\"Ana, Maria\",customer;vip,+55 11 99999-0000,yes").expect("line");
        let json: PersonFields = serde_json::from_str(
            r#"{"id": "c-1042", "name": "Ana, Maria", "roles": ["customer", "vip"], "active": true,
                "addresses": {"whatsapp": ["+55 11 99999-0000"]}}"#,
        )
        .expect("json");
        assert_eq!(fields, json);
        assert!(header("id,fax").expect_err("fax").contains("`fax` is not a column"));
        assert!(header("name").expect_err("no id").contains("no `id`"));
        assert!(csv_fields(&columns, "c-1,Ana").expect_err("short").contains("2 cells"));
        assert!(csv_fields(&columns, "c-1,Ana,,,maybe").expect_err("active").contains("`active`"));
    }
}
