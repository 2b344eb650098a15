//! Commands run instead of serving (`seckill openapi`; `seckill operator add NAME`, `list`, `remove
//! NAME`, `set-role NAME ROLE`), against the configured database (migrated first, as a
//! start-up would). A running server sees a removal or a new role within a second.

use super::{cost, database, hasher, ServeError};
use crate::{
    audit::store::{self as audit, Record},
    auth::{names, operators, password, Role},
    backend::Db,
    config::{Command, Config, OperatorCommand},
    error::AppError,
};
use std::{io::IsTerminal, time::Duration};

/// Runs `command`; what to tell the operator.
pub async fn run(config: Config, command: Command) -> Result<String, ServeError> {
    let command = match command {
        Command::Operator(command) => command,
        // Needs no settings: the document is the code's.
        Command::Openapi => return Ok(super::openapi::json().trim_end().to_owned()),
    };
    let config = config.check().map_err(ServeError::Config)?;
    let refused = |e: AppError| ServeError::Config(e.message);
    let role_named = |role: &str| Role::from_name(role).ok_or_else(|| ServeError::Config(format!("no role {role:?}")));
    let open = || async {
        let db = database::open(&config.database_url, Duration::from_millis(config.db_busy_ms)).await?;
        database::migrate(&db, &config.database_url).await?;
        Ok::<_, ServeError>(db)
    };
    match command {
        OperatorCommand::Add { name, role } => {
            let name = names::new_name(&name).map_err(refused)?;
            operators::check_not_reserved(&name).map_err(refused)?;
            let role = role_named(&role)?;
            let password = read_password(&name.name)?;
            password::check_new("password", &password).map_err(refused)?;
            let db = open().await?;
            // Older operators' names are compared too, though no server ran since they
            // were made.
            names::fill_keys(&db, "operators").await?;
            // Unknown names answer at the slowest cost stored hashes have (this one included).
            password::decoy_cost(&db, cost(&config)).await?;
            let hash = hasher(&config)?.hash(password).await.map_err(refused)?;
            if operators::create(&db, &name, &hash, role).await?.is_none() {
                return Err(ServeError::Config(format!("an operator named {} (or alike) exists already", name.name)));
            }
            let name = name.name;
            let after = Some(serde_json::json!({ "name": name, "role": role.as_str() }));
            log(&db, "add_operator", None, after).await;
            Ok(format!("operator {name} added ({})", role.as_str()))
        }
        OperatorCommand::List => {
            let listed = operators::list(&open().await?).await?;
            let lines = listed.iter().map(|o| {
                let last = o.last_sign_in_at.and_then(chrono::DateTime::from_timestamp_millis);
                let last =
                    last.map_or_else(|| "never signed in".to_owned(), |t| format!("last signed in {}", t.to_rfc3339()));
                format!("{}\t{}\t{last}", o.name, o.role.as_str())
            });
            Ok(lines.collect::<Vec<_>>().join("\n"))
        }
        OperatorCommand::Remove { name } => {
            let db = open().await?;
            let before = operators::remove(&db, &name).await?.map_err(refused)?;
            log(&db, "remove_operator", Some(serde_json::json!({ "name": name, "role": before.as_str() })), None).await;
            Ok(format!("operator {name} removed"))
        }
        OperatorCommand::SetRole { name, role } => {
            let role = role_named(&role)?;
            let db = open().await?;
            let before = operators::set_role(&db, &name, role).await?.map_err(refused)?;
            let was = Some(serde_json::json!({ "name": name, "role": before.as_str() }));
            log(&db, "set_operator_role", was, Some(serde_json::json!({ "name": name, "role": role.as_str() }))).await;
            Ok(format!("operator {name} is now {}", role.as_str()))
        }
    }
}

/// Records a command's change in the operator's log, as the command line's.
async fn log(db: &Db, action: &str, before: Option<serde_json::Value>, after: Option<serde_json::Value>) {
    audit::record(db, Record { actor: "command line", action, voucher_id: None, before, after }).await;
}

/// The new operator's password: asked for without echo on a terminal, else the first
/// line of standard input.
fn read_password(name: &str) -> Result<String, ServeError> {
    let read = if std::io::stdin().is_terminal() {
        rpassword::prompt_password(format!("Password for {name}: "))
    } else {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line.trim_end_matches(['\r', '\n']).to_owned())
    };
    read.map_err(|e| ServeError::Config(format!("reading the password: {e}")))
}
