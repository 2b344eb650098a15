//! The full topology's database: a throw-away PostgreSQL cluster (Debian's server
//! binaries; `initdb` will not run as root, so as root it belongs to `postgres`),
//! which can be restarted (`pg_ctl -m immediate`: a crash, as far as clients see).

use std::{path::PathBuf, time::Duration};
use tokio::process::Command;

pub struct Postgres {
    bin: PathBuf,
    data: PathBuf,
    dir: PathBuf,
    port: u16,
}

impl Postgres {
    pub async fn start(dir: PathBuf, port: u16) -> Result<Self, String> {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .map_err(|e| format!("no PostgreSQL server binaries (apt install postgresql): {e}"))?
            .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
            .filter(|b| b.join("initdb").exists())
            .max()
            .ok_or("no PostgreSQL server binaries (apt install postgresql)")?;
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let me = Self { bin, data: dir.join("data"), dir, port };
        give_to_postgres(&me.dir).await?;
        let initdb = me.bin.join("initdb");
        let data = me.data.to_string_lossy().into_owned();
        let args = [initdb.to_string_lossy().as_ref(), "-D", &data, "-A", "trust", "-U", "postgres", "--no-sync"]
            .map(str::to_owned);
        run_as_postgres(&args).await?;
        me.start_server().await?;
        Ok(me)
    }

    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    pub async fn start_server(&self) -> Result<(), String> {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300",
            self.port,
            self.dir.display()
        );
        let pg_ctl = self.bin.join("pg_ctl").to_string_lossy().into_owned();
        let log = self.dir.join("server.log").to_string_lossy().into_owned();
        let data = self.data.to_string_lossy().into_owned();
        run_as_postgres(&[
            pg_ctl,
            "-D".into(),
            data,
            "-l".into(),
            log,
            "-w".into(),
            "-t".into(),
            "60".into(),
            "start".into(),
            "-o".into(),
            options,
        ])
        .await
    }

    /// Stops the server at once (`-m immediate`: no checkpoint, connections cut).
    pub async fn crash(&self) -> Result<(), String> {
        let pg_ctl = self.bin.join("pg_ctl").to_string_lossy().into_owned();
        let data = self.data.to_string_lossy().into_owned();
        run_as_postgres(&[pg_ctl, "-D".into(), data, "-m".into(), "immediate".into(), "stop".into()]).await
    }

    pub async fn stop(&self) {
        let _ = self.crash().await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// True when this run is root (then PostgreSQL runs as `postgres`).
fn root() -> bool {
    // SAFETY: geteuid(2) reads the process's own id; it cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Runs a command as `postgres` when this run is root (else as is).
async fn run_as_postgres(args: &[String]) -> Result<(), String> {
    let mut command = if root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).args(args);
        c
    } else {
        let mut c = Command::new(&args[0]);
        c.args(&args[1..]);
        c
    };
    let out = command.output().await.map_err(|e| format!("{}: {e}", args[0]))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{}: {}", args[0], String::from_utf8_lossy(&out.stderr)))
    }
}

/// Gives `dir` to `postgres` when this run is root.
async fn give_to_postgres(dir: &std::path::Path) -> Result<(), String> {
    if !root() {
        return Ok(());
    }
    let out = Command::new("chown").args(["-R", "postgres"]).arg(dir).output().await.map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}
