//! Names for people, shoppers' and operators': nobody takes a name that passes for
//! somebody else's. A new name may hold no character a reader cannot see (zero-width
//! spaces, direction overrides, soft hyphens, fillers, private or unassigned code
//! points: [`new_name`]), and is compared with those taken by two [`Keys`]: one folds
//! case (`ALICE` is `alice`'s), one folds shapes (`AIice` with a capital `I`, `Тom`
//! with a Cyrillic `Т`), both width, spacing and look-alike letters (Unicode's
//! confusables, UTS #39). A name is stored composed (NFC) and shown as it was made; a
//! sign-in finds it however the keyboard composed it ([`signed_in_as`]). Only new names
//! are held to this, so an account made before still signs in.

use super::validate_name;
use crate::{backend::Db, error::AppError, shutdown::Shutdown};
use std::time::Duration;
use unicode_normalization::UnicodeNormalization;
use unicode_properties::{GeneralCategory, GeneralCategoryGroup, UnicodeGeneralCategory};

/// A name a new account may take, and its comparison [`Keys`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewName {
    pub name: String,
    pub keys: Keys,
}

/// How a name is compared, twice: a new name whose either key is taken is taken. One
/// key cannot do both: a capital `I` reads as `i` by case and as `l` by shape, and a
/// key that made `i` and `l` one would take `lisa` for `iisa`. Neither is shown to
/// anybody. A character's key has at most 30 bytes (U+FDFA's), so a name's stays
/// under 1 KB, within what PostgreSQL indexes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Keys {
    /// Lower case first, then look-alikes folded: `ALICE`, `Alice` and `аlice` (a
    /// Cyrillic `а`) are `alice`.
    pub case: String,
    /// Look-alikes folded first, then lower case: `AIice` (a capital `I`) is `Alice`,
    /// `Тom` (a Cyrillic `Т`) is `Tom`.
    pub shape: String,
}

impl Keys {
    /// Both keys of `name`: its [`fold`] in lower case, each run of spaces one space;
    /// the case key folds the name in lower case.
    pub fn of(name: &str) -> Self {
        let spaced = |s: String| s.to_lowercase().split_whitespace().collect::<Vec<_>>().join(" ");
        Self { case: spaced(fold(&name.to_lowercase())), shape: spaced(fold(name)) }
    }

    /// Whether a name of these keys passes for one of `other`'s.
    pub fn meet(&self, other: &Keys) -> bool {
        self.case == other.case || self.shape == other.shape
    }
}

/// Look-alikes to one prototype (UTS #39's skeleton, which drops ignorable code points
/// too), compatibility forms made plain (NFKC: full width, ligatures, styled letters),
/// and the skeleton again, with the Arabic tatweel (a letter drawn longer) dropped. The
/// skeleton comes first as well as last: NFKC makes some look-alikes letters of their
/// own (a lunate sigma `ϲ`, which reads as `c`, a final sigma `ς`), and last, as NFKC
/// makes some letters look-alikes (a full-width `ａ`).
fn fold(name: &str) -> String {
    let skeleton = |s: &str| unicode_security::skeleton(s).collect::<String>();
    // Before the skeleton, which makes a tatweel a low line.
    let drawn: String = name.chars().filter(|&c| c != TATWEEL).collect();
    let plain: String = skeleton(&drawn).nfkc().collect();
    skeleton(&plain)
}

/// The Arabic tatweel (kashida): it draws the letters beside it longer, nothing more.
const TATWEEL: char = '\u{640}';

/// `sent` as a new account's name, composed (NFC, as [`signed_in_as`] reads it): a line
/// of at most 32 characters (`validate_name`) with no character a reader cannot see,
/// no more than [`MOST_MARKS`] marks stacked on one character, and one character at
/// least that shows (a letter, a digit, a punctuation mark or a symbol); else
/// `invalid_input` about `name`.
pub fn new_name(sent: &str) -> Result<NewName, AppError> {
    let name: String = validate_name(sent)?.nfc().collect();
    let chars: Vec<char> = name.chars().collect();
    let refused = |message: String| Err(AppError::invalid(message).on("name"));
    if (0..chars.len()).any(|at| unseen(&chars, at)) {
        return refused(
            "A name cannot contain characters nobody sees (such as zero-width spaces or direction marks).".into(),
        );
    }
    let decomposed: Vec<char> = name.nfd().collect();
    if decomposed.windows(MOST_MARKS + 1).any(|run| run.iter().all(|&c| stacks(c))) {
        return refused(format!("A name stacks at most {MOST_MARKS} marks on a letter."));
    }
    if !chars.iter().any(|&c| shows(c)) {
        return refused("A name needs a letter, a digit, a punctuation mark or a symbol.".into());
    }
    let keys = Keys::of(&name);
    Ok(NewName { name, keys })
}

/// The most combining marks a new name stacks on one character, decomposed (`é` is `e`
/// and one): a Vietnamese letter has two, Hebrew with its points and cantillation four;
/// more draw over the lines around the name (a page's, an operator's list).
pub const MOST_MARKS: usize = 4;

/// A mark drawn on the character before it (nonspacing or enclosing).
fn stacks(c: char) -> bool {
    matches!(c.general_category(), GeneralCategory::NonspacingMark | GeneralCategory::EnclosingMark)
}

/// The forms a name typed at sign-in may be stored under: composed (NFC: how new names
/// are stored, whatever the keyboard sent), then as typed (an account made before
/// names were composed), when that differs. A sign-in's guesses are counted under the
/// first, so that the forms of one name share a counter.
pub fn signed_in_as(sent: &str) -> Result<Vec<String>, AppError> {
    let typed = validate_name(sent)?;
    let composed: String = typed.nfc().collect();
    Ok(if composed == typed { vec![typed] } else { vec![composed, typed] })
}

/// The account `find` finds by the first of a sign-in's `forms` ([`signed_in_as`])
/// that one is stored under.
pub async fn first_found<T, F, Fut>(forms: &[String], find: F) -> sqlx::Result<Option<T>>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = sqlx::Result<Option<T>>>,
{
    for name in forms {
        if let Some(found) = find(name.clone()).await? {
            return Ok(Some(found));
        }
    }
    Ok(None)
}

/// The refusal of a new name that is taken, or passes for one that is.
pub fn taken_refusal() -> AppError {
    AppError::from(crate::error::ErrorCode::NameTaken).on("name")
}

/// `name` with its keys, unchecked: a name the server makes itself (the shop login's
/// `shop-` and hex), which needs no check.
pub fn made_up(name: String) -> NewName {
    NewName { keys: Keys::of(&name), name }
}

/// Whether the character at `at` is one a reader does not see on its own, or that
/// reorders or hides the ones around it: format characters (zero-width spaces, direction
/// marks and overrides, the soft hyphen), line and paragraph separators, private-use and
/// unassigned code points, the default-ignorable letters (Hangul fillers) and the
/// [`BLANKS`]. Default-ignorable marks (variation selectors) are kept for emoji, and
/// the joiners (ZWJ, ZWNJ) after a character they join, before another or after a mark
/// (an emoji sequence, a Persian word, an Indic one's virama): the keys drop them.
fn unseen(chars: &[char], at: usize) -> bool {
    use GeneralCategory::*;
    let c = chars[at];
    if is_joiner(c) {
        let before = at.checked_sub(1).map(|i| chars[i]).filter(|&c| joins(c));
        let after = chars.get(at + 1).is_some_and(|&c| joins(c));
        return !before.is_some_and(|before| after || stacks(before));
    }
    let category = c.general_category();
    matches!(category, Format | LineSeparator | ParagraphSeparator | PrivateUse | Unassigned | Surrogate)
        || (ignorable(c) && category != NonspacingMark)
        || BLANKS.contains(&c)
}

/// Characters that draw nothing but are neither spaces nor default-ignorable, so the
/// rules above let them through: the Braille blank, the ideographic half fill space, the
/// musical null notehead and the Khitan filler.
const BLANKS: [char; 4] = ['\u{2800}', '\u{303f}', '\u{1d159}', '\u{16fe4}'];

fn is_joiner(c: char) -> bool {
    matches!(c, '\u{200c}' | '\u{200d}')
}

/// A character a joiner may stand beside: a letter, a mark, a digit, a punctuation
/// mark or a symbol.
fn joins(c: char) -> bool {
    use GeneralCategoryGroup::*;
    matches!(c.general_category_group(), Letter | Mark | Number | Punctuation | Symbol) && !is_joiner(c)
}

/// A character that shows: a letter, a digit, a punctuation mark or a symbol that the
/// skeleton neither drops (default-ignorable) nor makes a space (a blank, U+2800).
fn shows(c: char) -> bool {
    use GeneralCategoryGroup::*;
    matches!(c.general_category_group(), Letter | Number | Punctuation | Symbol)
        && unicode_security::skeleton(c.encode_utf8(&mut [0; 4])).any(|s| !s.is_whitespace())
}

/// Unicode's Default_Ignorable_Code_Point: the characters UTS #39's skeleton drops
/// (unicode-security keeps its table private; a character's skeleton is empty just
/// when it is one).
fn ignorable(c: char) -> bool {
    unicode_security::skeleton(c.encode_utf8(&mut [0; 4])).next().is_none()
}

/// Whether a row of `table` (`users`, `operators`) has this name, or one it passes for.
pub async fn taken(db: &Db, table: &str, name: &NewName) -> sqlx::Result<bool> {
    let query = format!("SELECT COUNT(*) FROM {table} WHERE name = $1 OR name_key = $2 OR name_shape = $3");
    let found: i64 =
        sqlx::query_scalar(&query).bind(&name.name).bind(&name.keys.case).bind(&name.keys.shape).fetch_one(db).await?;
    Ok(found > 0)
}

/// How many times [`inserted`] tries an insert whose name was freed as it was refused.
const INSERT_TRIES: usize = 3;

/// The new row's id from `insert` (an insert of `name` into `table`, `ON CONFLICT DO
/// NOTHING`); `None` when the name, or one it passes for, is taken; an error when the
/// row was refused for something else (another unique column: the conflict clause
/// would pass that off as a name taken, and nobody would hear of it). A refusal whose
/// name is free by the time it is looked at (its holder removed meanwhile) is tried
/// again, a bounded number of times: the name is the caller's to take.
pub async fn inserted<F, Insert>(db: &Db, table: &str, name: &NewName, insert: F) -> sqlx::Result<Option<i64>>
where
    F: Fn() -> Insert,
    Insert: std::future::Future<Output = sqlx::Result<Option<i64>>>,
{
    for _ in 0..INSERT_TRIES {
        match insert().await? {
            Some(id) => return Ok(Some(id)),
            None if taken(db, table, name).await? => return Ok(None),
            None => {}
        }
    }
    Err(sqlx::Error::Protocol(format!("a new row of {table} was refused, and its name is free")))
}

/// The two tables of named people, whose names [`fill_keys`] compares.
const TABLES: [&str; 2] = ["users", "operators"];

/// Rows read and keyed per transaction by [`fill_keys`].
const FILL_BATCH: i64 = 500;

/// How often each process keys the accounts that have none ([`follow`]): rows that a
/// process of an older release made during a rolling upgrade, or the command line's.
pub const FILL_EVERY: Duration = Duration::from_secs(5);

/// Keys the accounts that have none every [`FILL_EVERY`], from the start, until
/// shutdown: the first round at once, in the background (a database with a million
/// accounts from before takes a while, and the start does not wait for it).
pub fn follow(db: Db, shutdown: Shutdown) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut rounds = crate::shutdown::interval(FILL_EVERY);
        let mut first = true;
        while shutdown.tick(&mut rounds).await {
            for table in TABLES {
                // Those left without are counted once, at the start.
                let counted = match fill_keys(&db, table).await {
                    Ok(()) if first => unkeyed(&db, table).await,
                    done => done.map(|()| 0),
                };
                match counted {
                    Ok(0) => {}
                    Ok(unkeyed) => tracing::warn!(
                        table,
                        unkeyed,
                        "older names that pass for another's keep no keys: each signs in by its own name"
                    ),
                    Err(e) => tracing::warn!(table, "keying older names: {e}"),
                }
            }
            first = false;
        }
    })
}

/// Gives every account of `table` made without keys (before names were compared, or
/// by an older release) its name's keys, so that new names are compared with it too.
/// Of two accounts whose names pass for each other, the
/// one keyed first keeps the keys; the other keeps none (both still sign in, each by
/// its own name). Every process may run it at once: a row keyed meanwhile is left as
/// it is.
pub async fn fill_keys(db: &Db, table: &str) -> sqlx::Result<()> {
    let mut after = 0;
    loop {
        let read = format!("SELECT id, name FROM {table} WHERE name_key IS NULL AND id > $1 ORDER BY id LIMIT $2");
        let rows: Vec<(i64, String)> = sqlx::query_as(&read).bind(after).bind(FILL_BATCH).fetch_all(db).await?;
        let Some(&(last, _)) = rows.last() else { break };
        key_rows(db, table, &rows).await?;
        after = last;
    }
    Ok(())
}

/// How many accounts of `table` [`fill_keys`] left without keys.
async fn unkeyed(db: &Db, table: &str) -> sqlx::Result<i64> {
    sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {table} WHERE name_key IS NULL")).fetch_one(db).await
}

/// Keys `rows` of `table`, each unless a key of its is taken: in one transaction, or,
/// when a name was taken meanwhile by a key the batch did not see (a sign-up under
/// way: the unique index refuses the batch), one row at a time, each refusal skipped.
async fn key_rows(db: &Db, table: &str, rows: &[(i64, String)]) -> sqlx::Result<()> {
    let write = format!(
        "UPDATE {table} SET name_key = $1, name_shape = $2 WHERE id = $3 AND name_key IS NULL \
         AND NOT EXISTS (SELECT 1 FROM {table} WHERE name_key = $1 OR name_shape = $2)"
    );
    let key = |id: i64, keys: &Keys| sqlx::query(&write).bind(keys.case.clone()).bind(keys.shape.clone()).bind(id);
    let keyed: Vec<(i64, Keys)> = rows.iter().map(|(id, name)| (*id, Keys::of(name))).collect();
    let mut tx = db.begin().await?;
    let mut all = Ok(());
    for (id, keys) in &keyed {
        all = key(*id, keys).execute(&mut *tx).await.map(drop);
        if all.is_err() {
            break;
        }
    }
    match all {
        Ok(()) => tx.commit().await,
        Err(e) if is_unique_violation(&e) => {
            drop(tx);
            for (id, keys) in &keyed {
                match key(*id, keys).execute(db).await {
                    Err(e) if !is_unique_violation(&e) => return Err(e),
                    _ => {}
                }
            }
            Ok(())
        }
        Err(e) => Err(e),
    }
}

fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(e) if e.is_unique_violation())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_read_alike_have_a_key_in_common() {
        let alike = [
            [
                "alice",
                "Alice",
                "ALICE",
                "AIice",
                "\u{ff21}lice",
                "\u{0430}lice",
                "al\u{0456}ce",
                "alic\u{0435}\u{fe0f}",
            ],
            ["tom", "Tom", "\u{0422}om", "TOM", "t\u{043e}m", "\u{1d42d}om", "tom\u{2800}", "to\u{200d}m"],
            [
                "mary ann",
                "Mary  Ann",
                "mary\u{3000}ann",
                "mary\u{a0}ann",
                "MARY ANN",
                "mary\u{2800}ann",
                "mary ann",
                "Mary Ann",
            ],
            ["bob0", "BOBO", "bobo", "b\u{043e}bo", "bob\u{1d7ce}", "\u{1d41b}obo", "B0B0", "bob0 "],
            // Look-alikes NFKC alone would make letters of their own (a lunate sigma,
            // a vertical dash), a tatweel.
            ["carl", "\u{3f2}arl", "\u{3f9}ARL", "Carl", "CARL", "c\u{430}rl", "carl", "carl"],
            ["alice", "a\u{fe31}ice", "alice", "alice", "alice", "alice", "alice", "alice"],
            ["محمد", "محـمد", "محمد", "محمد", "محمد", "محمد", "محمد", "محمد"],
        ];
        for names in alike {
            let first = Keys::of(names[0]);
            for name in names {
                assert!(Keys::of(name).meet(&first), "{name:?}: {:?} and {first:?}", Keys::of(name));
            }
        }
        for (a, b) in [("alice", "alicia"), ("alice", "al ice"), ("zoë", "zoe"), ("李", "季"), ("lisa", "iisa")] {
            assert!(!Keys::of(a).meet(&Keys::of(b)), "{a:?} and {b:?}");
        }
        let widest = Keys::of(&"\u{fdfa}".repeat(32));
        assert!(widest.case.len() < 1024 && widest.shape.len() < 1024, "the widest keys a name can have");
    }

    #[test]
    fn a_new_name_shows_every_character() {
        for unseen in [
            "a\u{200b}b",
            "\u{202e}abc",
            "a\u{ad}b",
            "a\u{2028}b",
            "\u{3164}",
            "a\u{e000}",
            "\u{301}",
            "ab\u{e0041}",
            "\u{2800}",
            "\u{200d}ann",
            "ann\u{200c}",
            "a\u{200d}\u{200d}b",
            "a \u{200c}b",
            "mary\u{303f}ann",
            "token\u{1d159}",
            "alice\u{16fe4}",
            "zed\u{2800}",
            "e\u{301}\u{302}\u{303}\u{304}\u{305}",
        ] {
            assert_eq!(new_name(unseen).unwrap_err().param.as_deref(), Some("name"), "{unseen:?}");
        }
        let family = "\u{1f468}\u{200d}\u{1f469}\u{200d}\u{1f467}";
        let persian = "\u{0645}\u{06cc}\u{200c}\u{062e}\u{0648}\u{0627}\u{0647}\u{0645}";
        let flag = "\u{1f3f3}\u{fe0f}\u{200d}\u{1f308}";
        let chillu = "\u{d05}\u{d35}\u{d28}\u{d4d}\u{200d}"; // a Malayalam virama, then a joiner
        let vietnamese = "Nguy\u{1ec5}n";
        let shown = ["ann", "Zoë Ödegaard", "李小龍", "❤\u{fe0f}", "o'brien", "#1", "ā", family, persian, flag];
        for shown in shown.into_iter().chain([chillu, vietnamese]) {
            assert_eq!(new_name(shown).unwrap().name, shown, "{shown:?}");
        }
        assert_eq!(new_name("  ann ").unwrap().name, "ann");
        assert_eq!(new_name("Rene\u{301}e").unwrap().name, "Ren\u{e9}e", "stored composed");
        assert_eq!(signed_in_as(" Rene\u{301}e").unwrap(), ["Ren\u{e9}e", "Rene\u{301}e"], "composed first");
        assert_eq!(signed_in_as("Ren\u{e9}e").unwrap(), ["Ren\u{e9}e"]);
    }

    /// Keys are stored: tables of another Unicode version may key a name otherwise, and
    /// the stored keys would no longer meet the new ones. Whoever moves these versions
    /// adds a migration that sets every `name_key` and `name_shape` to NULL (each
    /// process keys them again within [`FILL_EVERY`]) and then changes this test.
    #[test]
    fn keys_are_made_with_the_unicode_tables_they_were_stored_with() {
        assert_eq!(unicode_security::UNICODE_VERSION, (18, 0, 0));
        assert_eq!(unicode_normalization::UNICODE_VERSION, (18, 0, 0));
        assert_eq!(char::UNICODE_VERSION, (17, 0, 0), "lower case: the toolchain's (rust-toolchain.toml)");
    }
}
