//! Sessions ended before their cookie expired (sign out, sign out everywhere, a new
//! password), as this process knows them. A session cookie is signed, so checking one
//! reads nothing; what ends it early is the `sessions_ended` table, which every
//! process follows here a few times a second (one indexed query, whatever the
//! traffic), so a grab checks a cookie against memory and never reads the database.
//! The database is the truth: nothing is lost when Redis is, and a process that
//! starts reads every row still in force. A process whose reads keep failing fails
//! closed: past [`STALE_AFTER`] without a read, it honours no session cookie (a
//! session ended meanwhile must not go on unseen), until a read succeeds.

use super::{
    store::{self, EndedRow},
    REVOCATIONS_READ_EVERY,
};
use crate::{backend::Db, shutdown::Shutdown};
use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
    time::Duration,
};

/// On PostgreSQL, row ids are taken when a row is written, not when it commits: a row
/// may appear below one already read. Rows ended this recently are read again (ending
/// is idempotent) so a slow commit is not skipped: recently by the database's clock,
/// which dates the rows too (`store::ended_since`), whatever this process's says.
const LATE_COMMIT_MS: i64 = 10_000;
/// How often rows and entries whose cookies have all expired are dropped.
const PRUNE_EVERY: Duration = Duration::from_secs(600);
/// How old this process's copy may grow while reads fail before it honours no session:
/// long enough that a database restart or failover (seconds) signs nobody out, short
/// enough that a process cut off from the database stops honouring ended sessions
/// soon. (Operators' cookies, rarer and mightier, have 10 s: `operators::STALE_AFTER`.)
pub const STALE_AFTER: Duration = Duration::from_secs(30);

/// What ends sessions early, by user and by session.
#[derive(Default)]
pub struct EndedSessions {
    state: RwLock<State>,
}

#[derive(Default)]
struct State {
    /// The lowest session generation still valid, per user (absent: every one).
    generations: HashMap<i64, i64>,
    /// Sessions ended one by one, per user: session id → (its row, when its cookie
    /// expires, ms). A user's generation going up drops the entries of rows written
    /// before it (they end sessions of an older generation, ended anyway): with the
    /// table's bound per account (`store::MAX_ENDED_PER_ACCOUNT`), memory is bounded too.
    sessions: HashMap<i64, HashMap<String, (i64, i64)>>,
    /// The highest row read.
    last_id: i64,
    /// When the table was last read (none yet: a process reads it before it serves).
    read_at: Option<std::time::Instant>,
}

impl State {
    fn is_stale(&self) -> bool {
        self.read_at.is_some_and(|at| at.elapsed() > STALE_AFTER)
    }
}

impl EndedSessions {
    /// True when this session of `user_id`, issued in `generation`, was ended, or may
    /// have been: the copy is older than [`STALE_AFTER`].
    pub fn is_ended(&self, user_id: i64, generation: i64, session_id: &str) -> bool {
        let state = self.state.read().unwrap_or_else(|e| e.into_inner());
        state.is_stale()
            || state.generations.get(&user_id).is_some_and(|&lowest| generation < lowest)
            || state.sessions.get(&user_id).is_some_and(|ended| ended.contains_key(session_id))
    }

    /// Whether the copy is older than [`STALE_AFTER`]: no session can be told on or
    /// ended by it.
    pub fn is_stale(&self) -> bool {
        self.state.read().unwrap_or_else(|e| e.into_inner()).is_stale()
    }

    /// Takes rows in (read from the table, or just written by this process).
    pub fn apply(&self, rows: &[EndedRow]) {
        let mut state = self.state.write().unwrap_or_else(|e| e.into_inner());
        for row in rows {
            if let Some(generation) = row.generation {
                let lowest = state.generations.entry(row.user_id).or_default();
                if generation > *lowest {
                    *lowest = generation;
                    if let Some(ended) = state.sessions.get_mut(&row.user_id) {
                        ended.retain(|_, (id, _)| *id > row.id);
                    }
                }
            }
            if let Some(session_id) = &row.session_id {
                let ended = state.sessions.entry(row.user_id).or_default();
                ended.insert(session_id.clone(), (row.id, row.expires_at));
            }
            state.last_id = state.last_id.max(row.id);
        }
    }

    /// Reads the rows this process has not seen (and the latest ones again).
    pub async fn catch_up(&self, db: &Db) -> sqlx::Result<()> {
        let last_id = self.state.read().unwrap_or_else(|e| e.into_inner()).last_id;
        let began = std::time::Instant::now();
        let rows = store::ended_since(db, last_id, LATE_COMMIT_MS).await?;
        self.apply(&rows);
        // Fresh as of when the read began: a row written during a slow read may be unseen.
        let mut state = self.state.write().unwrap_or_else(|e| e.into_inner());
        state.read_at = state.read_at.max(Some(began));
        Ok(())
    }

    /// Forgets sessions whose cookies have expired anyway. Generations stay: one
    /// number per user who ever ended their sessions.
    fn prune(&self, now_ms: i64) {
        let mut state = self.state.write().unwrap_or_else(|e| e.into_inner());
        for ended in state.sessions.values_mut() {
            ended.retain(|_, (_, expires)| *expires > now_ms);
        }
        state.sessions.retain(|_, ended| !ended.is_empty());
    }
}

/// Follows the table until shutdown: reads new rows every [`REVOCATIONS_READ_EVERY`](super::REVOCATIONS_READ_EVERY), and now
/// and then drops what has expired, here and in the table.
pub fn follow(ended: Arc<EndedSessions>, db: Db, shutdown: Shutdown) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut prune = tokio::time::interval(PRUNE_EVERY);
        let mut read = tokio::time::interval(REVOCATIONS_READ_EVERY);
        read.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let stopped = shutdown.wait();
        tokio::pin!(stopped);
        loop {
            tokio::select! {
                _ = read.tick() => {
                    if let Err(e) = ended.catch_up(&db).await {
                        tracing::warn!("ended sessions: {e}");
                    }
                }
                _ = prune.tick() => {
                    let now = chrono::Utc::now().timestamp_millis();
                    ended.prune(now);
                    if let Err(e) = store::drop_ended_before(&db, now).await {
                        tracing::warn!("ended sessions: pruning: {e}");
                    }
                }
                _ = &mut stopped => break,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: i64, user_id: i64, session_id: Option<&str>, generation: Option<i64>) -> EndedRow {
        EndedRow { id, user_id, session_id: session_id.map(str::to_owned), generation, expires_at: 1_000 }
    }

    #[test]
    fn a_generation_ends_older_sessions_and_a_session_id_ends_that_one() {
        let ended = EndedSessions::default();
        assert!(!ended.is_ended(7, 0, "a"));
        ended.apply(&[row(1, 7, None, Some(2)), row(2, 8, Some("b"), None)]);
        assert!(ended.is_ended(7, 1, "a"), "issued before the user's sessions were ended");
        assert!(!ended.is_ended(7, 2, "a"), "issued after");
        assert!(ended.is_ended(8, 0, "b") && !ended.is_ended(8, 0, "c"));
        // Rows read again (or out of order) change nothing.
        ended.apply(&[row(1, 7, None, Some(1))]);
        assert!(!ended.is_ended(7, 2, "a"));
        ended.prune(1_000);
        assert!(!ended.is_ended(8, 0, "b"), "its cookie has expired anyway");
        assert!(ended.is_ended(7, 1, "a"));
    }

    /// A process whose reads keep failing honours no session past the bound (issue 53):
    /// before, it honoured ended cookies for ever.
    #[test]
    fn a_copy_not_read_for_longer_than_the_bound_honours_no_session() {
        let ended = EndedSessions::default();
        let now = std::time::Instant::now();
        ended.state.write().unwrap().read_at = Some(now);
        assert!(!ended.is_ended(7, 0, "a"), "a fresh copy honours a session never ended");
        ended.state.write().unwrap().read_at = now.checked_sub(STALE_AFTER + Duration::from_secs(1));
        assert!(ended.is_ended(7, 0, "a"), "a copy older than the bound honours none");
        ended.state.write().unwrap().read_at = Some(now);
        assert!(!ended.is_ended(7, 0, "a"), "a read succeeding again restores it");
    }

    #[test]
    fn a_new_generation_drops_the_sessions_ended_before_it() {
        let ended = EndedSessions::default();
        ended.apply(&[row(1, 7, Some("a"), None), row(2, 7, Some("b"), None)]);
        ended.apply(&[row(3, 7, None, Some(1)), row(4, 7, Some("c"), None)]);
        let held = |user| ended.state.read().unwrap().sessions.get(&user).map_or(0, HashMap::len);
        assert_eq!(held(7), 1, "only the session ended after the new generation is held");
        assert!(ended.is_ended(7, 0, "a") && ended.is_ended(7, 1, "c") && !ended.is_ended(7, 1, "d"));
        // Read again (a late commit): changes nothing.
        ended.apply(&[row(3, 7, None, Some(1))]);
        assert!(ended.is_ended(7, 1, "c"), "a session of the new generation stays ended");
    }
}
