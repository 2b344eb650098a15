//! A Lua script call written straight into one command.
//!
//! redis' own `ScriptInvocation` keeps every key and argument in a buffer of its own,
//! then copies them all into the `EVALSHA` command it sends: a grab (six keys, six
//! arguments) cost eighteen allocations and frees there, and settling three per order
//! (`src/bin/bench/history.md`). Here they go once into the command's one buffer.

use super::RedisConn;
use redis::{Cmd, ErrorKind, FromRedisValue, RedisResult, Script, ToRedisArgs};

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
