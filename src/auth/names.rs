//! Names for people, shoppers' and operators': nobody takes a name that passes for
//! somebody else's. A new name may hold no character a reader cannot see (zero-width
//! spaces, direction overrides, soft hyphens, fillers, private or unassigned code
//! points: [`new_name`]), and is compared with those taken by its [`key`]: case, width,
//! spacing and look-alike letters folded (Unicode's confusables, UTS #39), so `Alice`,
//! `ａｌｉｃｅ` and `аlice` (a Cyrillic `а`) are all `alice`'s. A name is shown and
//! signed in with as it was made; only new names are held to this, so an account made
//! before still signs in.

use super::validate_name;
use crate::{backend::Db, error::AppError};
use unicode_normalization::UnicodeNormalization;
use unicode_properties::{GeneralCategory, GeneralCategoryGroup, UnicodeGeneralCategory};

/// A name a new account may take, and its comparison [`key`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewName {
    pub name: String,
    pub key: String,
}

/// `sent` as a new account's name: a line of at most 32 characters (`validate_name`)
/// with no character a reader cannot see, and one at least that shows (a letter, a
/// digit, a punctuation mark or a symbol); else `invalid_input` about `name`.
pub fn new_name(sent: &str) -> Result<NewName, AppError> {
    let name = validate_name(sent)?;
    if name.chars().any(unseen) {
        return Err(AppError::invalid(
            "A name cannot contain characters nobody sees (such as zero-width spaces or direction marks).",
        )
        .on("name"));
    }
    if !name.chars().any(shows) {
        return Err(AppError::invalid("A name needs a letter, a digit, a punctuation mark or a symbol.").on("name"));
    }
    let key = key(&name);
    Ok(NewName { name, key })
}

/// How a name is compared: compatibility forms (full width, ligatures, styled
/// letters) made plain, lower case, each run of spaces one space, then UTS #39's
/// skeleton (look-alike letters to one prototype, ignorable code points dropped), in
/// lower case again (a prototype may be a capital: `0` is `O`). Two names with one key
/// read the same; a name's key is not shown to anybody. A character's key has at most
/// 30 bytes (U+FDFA's), so a name's stays under 1 KB, within what PostgreSQL indexes.
pub fn key(name: &str) -> String {
    let folded = name.nfkc().collect::<String>().to_lowercase();
    let spaced = folded.split_whitespace().collect::<Vec<_>>().join(" ");
    unicode_security::skeleton(&spaced).collect::<String>().to_lowercase()
}

/// A character a reader does not see on its own, or that reorders or hides the ones
/// around it: format characters (zero-width spaces and joiners, direction marks and
/// overrides, the soft hyphen), line and paragraph separators, private-use and
/// unassigned code points, and the default-ignorable letters (Hangul fillers).
/// Default-ignorable marks (variation selectors) are kept for emoji: the key drops them.
fn unseen(c: char) -> bool {
    use GeneralCategory::*;
    let category = c.general_category();
    matches!(category, Format | LineSeparator | ParagraphSeparator | PrivateUse | Unassigned | Surrogate)
        || (ignorable(c) && category != NonspacingMark)
}

/// A character that shows: a letter, a digit, a punctuation mark or a symbol that is
/// not default-ignorable.
fn shows(c: char) -> bool {
    use GeneralCategoryGroup::*;
    matches!(c.general_category_group(), Letter | Number | Punctuation | Symbol) && !ignorable(c)
}

/// Unicode's Default_Ignorable_Code_Point: the characters UTS #39's skeleton drops
/// (unicode-security keeps its table private; a character's skeleton is empty just
/// when it is one).
fn ignorable(c: char) -> bool {
    unicode_security::skeleton(c.encode_utf8(&mut [0; 4])).next().is_none()
}

/// The two tables of named people, whose names [`fill_keys`] compares.
const TABLES: [&str; 2] = ["users", "operators"];

/// Rows read and keyed per transaction by [`fill_keys`].
const FILL_BATCH: i64 = 500;

/// Gives every account made before names were compared its name's key, so that new
/// names are compared with it too. The first of two accounts whose names pass for
/// each other keeps the key; the other keeps none (both still sign in, each by its own
/// name), and is counted in the log. Run at each start: every process may, and a row
/// keyed meanwhile is left as it is.
pub async fn fill_keys(db: &Db) -> sqlx::Result<()> {
    for table in TABLES {
        let mut after = 0;
        loop {
            let read = format!("SELECT id, name FROM {table} WHERE name_key IS NULL AND id > $1 ORDER BY id LIMIT $2");
            let rows: Vec<(i64, String)> = sqlx::query_as(&read).bind(after).bind(FILL_BATCH).fetch_all(db).await?;
            let Some(&(last, _)) = rows.last() else { break };
            key_rows(db, table, &rows).await?;
            after = last;
        }
        let unkeyed = format!("SELECT COUNT(*) FROM {table} WHERE name_key IS NULL");
        let unkeyed: i64 = sqlx::query_scalar(&unkeyed).fetch_one(db).await?;
        if unkeyed > 0 {
            tracing::warn!(table, unkeyed, "older names that pass for another's: each signs in by its own name");
        }
    }
    Ok(())
}

/// Keys `rows` of `table` in one transaction, each unless its key is taken.
async fn key_rows(db: &Db, table: &str, rows: &[(i64, String)]) -> sqlx::Result<()> {
    let write = format!(
        "UPDATE {table} SET name_key = $1 WHERE id = $2 AND name_key IS NULL \
         AND NOT EXISTS (SELECT 1 FROM {table} WHERE name_key = $1)"
    );
    let mut tx = db.begin().await?;
    for (id, name) in rows {
        sqlx::query(&write).bind(key(name)).bind(id).execute(&mut *tx).await?;
    }
    tx.commit().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_read_alike_have_one_key() {
        let alike = [
            ["alice", "Alice", "\u{ff21}lice", "\u{0430}lice", "al\u{0456}ce", "alic\u{0435}\u{fe0f}"],
            ["mary ann", "Mary  Ann", "mary\u{3000}ann", "mary\u{a0}ann", "MARY ANN", "mary ann"],
            ["bob0", "BOBO", "bobo", "b\u{043e}bo", "bob\u{1d7ce}", "\u{1d41b}obo"],
        ];
        for names in alike {
            for name in names {
                assert_eq!(key(name), key(names[0]), "{name:?}");
            }
        }
        assert!(key(&"\u{fdfa}".repeat(32)).len() < 1024, "the widest key a name can have");
        for (a, b) in [("alice", "alicia"), ("alice", "al ice"), ("zoë", "zoe"), ("李", "季")] {
            assert_ne!(key(a), key(b), "{a:?} and {b:?}");
        }
    }

    #[test]
    fn a_new_name_shows_every_character() {
        for unseen in
            ["a\u{200b}b", "\u{202e}abc", "a\u{ad}b", "a\u{2028}b", "\u{3164}", "a\u{e000}", "\u{301}", "ab\u{e0041}"]
        {
            assert_eq!(new_name(unseen).unwrap_err().param.as_deref(), Some("name"), "{unseen:?}");
        }
        for shown in ["ann", "Zoë Ödegaard", "李小龍", "❤\u{fe0f}", "o'brien", "#1", "ā"] {
            assert_eq!(new_name(shown).unwrap().name, shown, "{shown:?}");
        }
        assert_eq!(new_name("  ann ").unwrap(), NewName { name: "ann".into(), key: "ann".into() });
    }
}
