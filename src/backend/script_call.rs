//! A Lua script call written straight into one command.
//!
//! redis' own `ScriptInvocation` keeps every key and argument in a buffer of its own,
//! then copies them all into the `EVALSHA` command it sends: a grab (six keys, six
//! arguments) cost eighteen allocations and frees there, and settling three per order
//! (`src/bin/bench/history.md`). Here they go once into the command's one buffer.

use super::RedisConn;
use redis::{Cmd, ErrorKind, FromRedisValue, RedisResult, Script, ToRedisArgs, Value};

/// `EVALSHA <script> <keys>`, then the arguments as they are added.
pub struct ScriptCall<'a> {
    script: &'a Script,
    cmd: Cmd,
}

impl<'a> ScriptCall<'a> {
    /// A call of `script` on `keys`, with room for `args` more arguments of about
    /// `arg_bytes` bytes in all (a hint: the buffer grows if it is short).
    pub fn new(script: &'a Script, keys: &[&str], args: usize, arg_bytes: usize) -> Self {
        let key_bytes: usize = keys.iter().map(|k| k.len()).sum();
        let mut cmd = Cmd::with_capacity(3 + keys.len() + args, 64 + key_bytes + arg_bytes);
        cmd.arg("EVALSHA").arg(script.get_hash()).arg(keys.len());
        for key in keys {
            cmd.arg(*key);
        }
        Self { script, cmd }
    }

    /// Adds `ARGV[n]` (or several, as `ToRedisArgs` writes them).
    pub fn arg<T: ToRedisArgs>(&mut self, arg: T) -> &mut Self {
        self.cmd.arg(arg);
        self
    }

    /// Runs the call. A Redis that does not know the script (restarted empty, or a
    /// replica promoted) is handed it, and the call runs once more, as
    /// `ScriptInvocation` does.
    pub async fn invoke<T: FromRedisValue>(&self, redis: &mut RedisConn) -> RedisResult<T> {
        match self.cmd.query_async(redis).await {
            Err(e) if e.kind() == ErrorKind::NoScriptError => {
                self.script.load_async(redis).await?;
                self.cmd.query_async(redis).await
            }
            answer => answer,
        }
    }
}

/// Runs `calls` (their keys all in one hash slot), then `WAIT replicas timeout_ms`,
/// as one pipeline on one connection, and answers each call's answer and how many
/// replicas hold their writes. A `WAIT` sent apart could, after a failover between
/// the two, be answered by the new master on a fresh connection: at once, for writes
/// that master never had. In one pipeline a failover fails both, and both are sent
/// again to the new master.
pub async fn invoke_then_wait<T: FromRedisValue>(
    calls: &[ScriptCall<'_>],
    redis: &mut RedisConn,
    replicas: u32,
    timeout_ms: u64,
) -> RedisResult<(Vec<T>, u32)> {
    let mut pipe = redis::pipe();
    for call in calls {
        pipe.add_command(call.cmd.clone());
    }
    pipe.cmd("WAIT").arg(replicas).arg(timeout_ms);
    let mut answers: Vec<Value> = match pipe.query_async(redis).await {
        Err(e) if e.kind() == ErrorKind::NoScriptError => {
            let mut loaded: Vec<&str> = Vec::new();
            for call in calls {
                if !loaded.contains(&call.script.get_hash()) {
                    call.script.load_async(redis).await?;
                    loaded.push(call.script.get_hash());
                }
            }
            pipe.query_async(redis).await?
        }
        answers => answers?,
    };
    let have = u32::from_owned_redis_value(answers.pop().unwrap_or(Value::Nil))?;
    let answers = answers.into_iter().map(T::from_owned_redis_value).collect::<RedisResult<_>>()?;
    Ok((answers, have))
}

/// Runs the write `cmd`, then `WAIT replicas timeout_ms`, as one pipeline on one
/// connection, for the same reason as [`invoke_then_wait`]; answers how many replicas
/// hold the writes. `cmd`'s own answer is not read (its error is).
pub async fn command_then_wait(cmd: Cmd, redis: &mut RedisConn, replicas: u32, timeout_ms: u64) -> RedisResult<u32> {
    let mut pipe = redis::pipe();
    pipe.add_command(cmd).ignore();
    pipe.cmd("WAIT").arg(replicas).arg(timeout_ms);
    let (have,): (u32,) = pipe.query_async(redis).await?;
    Ok(have)
}
