//! Commands run instead of serving (`seckill operator add NAME`), against the
//! configured database (migrated first, as a start-up would).

use super::{hasher, migrate, open_database, ServeError};
use crate::{
    audit::store::{self as audit, Record},
    auth::{operators, password, validate_name, Role},
    config::{Command, Config, OperatorCommand},
};
use std::{io::IsTerminal, time::Duration};

/// Runs `command`; what to tell the operator.
pub async fn run(config: Config, command: Command) -> Result<String, ServeError> {
    let config = config.check().map_err(ServeError::Config)?;
    match command {
        Command::Operator(OperatorCommand::Add { name, role }) => {
            let name = validate_name(&name).map_err(|e| ServeError::Config(e.message))?;
            let role = Role::from_name(&role).ok_or_else(|| ServeError::Config(format!("no role {role:?}")))?;
            let password = read_password(&name)?;
            password::check_new(&password).map_err(|e| ServeError::Config(e.message))?;
            let db = open_database(&config.database_url, Duration::from_millis(config.db_busy_ms)).await?;
            migrate(&db, &config.database_url).await?;
            let hash = hasher(&config)?.hash(password).await.map_err(|e| ServeError::Config(e.message))?;
            match operators::create(&db, &name, &hash, role).await? {
                Some(_) => {
                    let after = Some(serde_json::json!({ "name": name, "role": role.as_str() }));
                    let record =
                        Record { actor: "command line", action: "add_operator", voucher_id: None, before: None, after };
                    audit::record(&db, record).await;
                    Ok(format!("operator {name} added ({})", role.as_str()))
                }
                None => Err(ServeError::Config(format!("an operator named {name} exists already"))),
            }
        }
    }
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
