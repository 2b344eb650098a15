//! Who is calling: shoppers sign up and sign in with a name and a password (hashed
//! with argon2id, `password`) and get a signed, HttpOnly session cookie, which they
//! can end (`ended_sessions`); guesses are limited across processes (`attempts`).
//! Operators sign in by name to an operator cookie (`operators`, `session`), or
//! present the admin token. A handler asks who is calling (`caller`): server functions
//! never trust an id sent by the client, they read it from the session.

pub mod account_box;
pub mod api;
#[cfg(feature = "ssr")]
pub mod attempts;
#[cfg(feature = "ssr")]
pub mod caller;
pub mod challenge;
#[cfg(feature = "ssr")]
pub mod context;
#[cfg(feature = "ssr")]
pub mod ended_sessions;
#[cfg(feature = "ssr")]
pub mod jwt;
#[cfg(feature = "ssr")]
pub mod names;
pub mod operator_api;
#[cfg(feature = "ssr")]
pub mod operators;
#[cfg(feature = "ssr")]
pub mod password;
#[cfg(feature = "ssr")]
pub mod session;
#[cfg(feature = "ssr")]
pub mod store;
pub mod view;

#[cfg(feature = "ssr")]
pub use session::Secrets;

#[cfg(feature = "ssr")]
use crate::error::AppError;
use crate::wire::{self, FromJson};
use serde::{Deserialize, Serialize};

/// A signed-in shopper.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct User {
    pub user_id: i64,
    pub name: String,
}

/// The answer to `me`: the signed-in shopper, or `null` for nobody (an object
/// around it, so every client generator types the nobody).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CurrentUser {
    #[schema(required = true)]
    pub user: Option<User>,
}

impl FromJson for User {
    fn from_json(json: &impl wire::Json) -> Option<Self> {
        Some(Self { user_id: json.int_at("user_id")?, name: json.text_at("name")? })
    }
}

impl FromJson for CurrentUser {
    fn from_json(json: &impl wire::Json) -> Option<Self> {
        Some(Self { user: json.maybe("user", User::from_json)? })
    }
}

/// What an operator may do: `operator` runs sales; `admin` also adds operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Operator,
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Operator => "operator",
            Self::Admin => "admin",
        }
    }

    #[cfg(feature = "ssr")]
    pub fn from_name(name: &str) -> Option<Self> {
        [Self::Operator, Self::Admin].into_iter().find(|r| r.as_str() == name)
    }
}

/// Who is running the admin page: an operator by name, or `token` (the admin token,
/// for bootstrap and automation, with the admin role).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Operator {
    pub name: String,
    pub role: Role,
}

/// The answer to `operator_me`: who runs this admin page, or `null` for nobody.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CurrentOperator {
    #[schema(required = true)]
    pub operator: Option<Operator>,
}

/// An operator as the admin page lists them (`list_operators`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ListedOperator {
    pub name: String,
    pub role: Role,
    /// The last sign-in (Unix ms), if any.
    #[schema(required = true)]
    pub last_sign_in_at: Option<i64>,
}

/// Longest accepted shopper name, in characters.
#[cfg(feature = "ssr")]
pub const MAX_NAME_CHARS: usize = 32;

/// How often each process reads what revoked a credential (ended sessions, the
/// operators' table): a revoked cookie of either kind stops working on every process
/// within this, plus one query.
#[cfg(feature = "ssr")]
pub const REVOCATIONS_READ_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

/// Checks a name and trims its ends' spaces: a line of at most 32 characters as sent
/// (`text::line`, whose pattern the API document states).
#[cfg(feature = "ssr")]
pub fn validate_name(name: &str) -> Result<String, AppError> {
    crate::text::line(name, MAX_NAME_CHARS, "name")
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::*;

    #[test]
    fn names_are_trimmed_and_bounded() {
        assert_eq!(validate_name("  ann ").unwrap(), "ann");
        assert!(validate_name("   ").is_err());
        assert!(validate_name(&"x".repeat(33)).is_err());
        assert!(validate_name(&format!(" {} ", "x".repeat(31))).is_err(), "counted as sent");
        assert!(validate_name(&"é".repeat(32)).is_ok());
        assert!(validate_name("a\u{0}b").is_err());
    }
}
