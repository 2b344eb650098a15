//! A granted order's entry in its sale's order stream: its format, written and read
//! here. The gate writes it (`lua/grab.lua`, in the step that grants), from the
//! arguments [`gate_voucher`] puts first in its call and [`gate_grab`] first in each
//! grab's four:
//!
//! ```text
//! XADD <orders stream> * order <grab's order> user <grab's user> voucher ARGV[1] price <window's price>
//! ```
//!
//! (`price` is the sale's price at that grab, empty when the window had none, and
//! absent from entries written before prices.) The worker reads it back ([`Entry`],
//! [`OrderMsg`]); a malformed entry is dead-lettered with its fields as read.
//!
//! Replies are taken apart as they come (owned): the strings are moved out of the
//! reply. The `redis` crate's generic stream types copy every field into a map of its
//! own per entry, and a read brings hundreds.

use crate::backend::ScriptCall;
use redis::{ErrorKind, RedisError, RedisResult, Value};

/// One granted grab, as read from a voucher's order stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderMsg {
    pub voucher_id: i64,
    pub order_id: i64,
    pub user_id: i64,
    /// What the shopper pays, as the gate read it at the grab; `None` (an entry from
    /// before prices) takes the voucher's price.
    pub price: Option<i64>,
}

/// The gate's first argument, `ARGV[1]`: the voucher, which every entry the call
/// writes carries.
pub fn gate_voucher<'c, 'a>(call: &'c mut ScriptCall<'a>, voucher_id: i64) -> &'c mut ScriptCall<'a> {
    call.arg(voucher_id)
}

/// The first two of a grab's four arguments, in the order `lua/grab.lua` reads them
/// into its entry: the user, then the order.
pub fn gate_grab<'c, 'a>(call: &'c mut ScriptCall<'a>, user_id: i64, order_id: i64) -> &'c mut ScriptCall<'a> {
    call.arg(user_id).arg(order_id)
}

/// One stream entry: its id and the order it carries (`None` when malformed).
pub struct Entry {
    pub id: String,
    pub msg: Option<OrderMsg>,
    /// Its fields as read, kept for the dead-letter stream should it be refused.
    fields: Vec<(String, String)>,
}

impl Entry {
    /// Entries of an `XREADGROUP` reply on one stream (nil when it had none).
    pub fn from_read(reply: Value) -> RedisResult<Vec<Self>> {
        let streams = match reply {
            Value::Nil => return Ok(Vec::new()),
            Value::Array(rows) => rows.into_iter().map(stream_row).collect::<RedisResult<Vec<_>>>()?,
            Value::Map(rows) => rows.into_iter().map(|(_, entries)| entries).collect(),
            _ => return Err(shape("XREADGROUP")),
        };
        let mut out = Vec::new();
        for entries in streams {
            out.extend(Self::from_claim(entries)?);
        }
        Ok(out)
    }

    /// Entries of an `XCLAIM` reply (or of one stream in a read); an entry deleted
    /// from the stream meanwhile comes back as nil and is left out.
    pub fn from_claim(reply: Value) -> RedisResult<Vec<Self>> {
        let Value::Array(entries) = reply else { return Err(shape("stream entries")) };
        entries.into_iter().filter(|e| *e != Value::Nil).map(Self::from_value).collect()
    }

    /// `[id, [field, value, ...]]`; fields are nil for an entry deleted meanwhile
    /// (it reads as malformed).
    fn from_value(entry: Value) -> RedisResult<Self> {
        let Value::Array(parts) = entry else { return Err(shape("stream entry")) };
        let mut parts = parts.into_iter();
        let id = parts.next().and_then(text).ok_or_else(|| shape("stream entry id"))?;
        let fields = match parts.next() {
            Some(Value::Array(flat)) => pairs(flat),
            _ => Vec::new(),
        };
        let msg = order(&fields);
        Ok(Self { id, msg, fields })
    }

    /// Its fields as `name=value` pairs, sorted by name (only for refused entries).
    pub fn raw(&self) -> String {
        let mut pairs: Vec<String> = self.fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
        pairs.sort();
        pairs.join(" ")
    }
}

/// The order in the fields the gate writes (`order`, `user`, `voucher`, and `price`,
/// absent from entries written before prices and empty when the window had none).
fn order(fields: &[(String, String)]) -> Option<OrderMsg> {
    let field = |name: &str| fields.iter().find(|(k, _)| k == name).and_then(|(_, v)| v.parse::<i64>().ok());
    let (voucher_id, order_id, user_id) = (field("voucher")?, field("order")?, field("user")?);
    Some(OrderMsg { voucher_id, order_id, user_id, price: field("price") })
}

/// `[name, entries]` of a RESP2 read reply: the entries.
fn stream_row(row: Value) -> RedisResult<Value> {
    match row {
        Value::Array(parts) if parts.len() == 2 => Ok(parts.into_iter().nth(1).unwrap_or(Value::Nil)),
        _ => Err(shape("XREADGROUP stream")),
    }
}

/// A flat `field, value, ...` list as pairs (anything not text reads as empty).
fn pairs(flat: Vec<Value>) -> Vec<(String, String)> {
    let mut flat = flat.into_iter().map(|v| text(v).unwrap_or_default());
    std::iter::from_fn(|| Some((flat.next()?, flat.next()?))).collect()
}

/// A string reply as text, moved out of the reply (not copied) when it is UTF-8.
fn text(v: Value) -> Option<String> {
    match v {
        Value::BulkString(bytes) => {
            Some(String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
        }
        Value::SimpleString(s) => Some(s),
        Value::Int(n) => Some(n.to_string()),
        _ => None,
    }
}

fn shape(what: &'static str) -> RedisError {
    RedisError::from((ErrorKind::TypeError, "unexpected reply shape", what.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    fn entry(id: &str, fields: &[&str]) -> Value {
        Value::Array(vec![bulk(id), Value::Array(fields.iter().map(|f| bulk(f)).collect())])
    }

    #[test]
    fn reads_orders_from_a_read_reply() {
        let good = entry("1-0", &["order", "7", "user", "8", "voucher", "9", "price", "250"]);
        let bad = entry("1-1", &["order", "x", "zeta", "1"]);
        let reply = Value::Array(vec![Value::Array(vec![bulk("orders"), Value::Array(vec![good, bad])])]);
        let entries = Entry::from_read(reply).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].id, "1-0");
        assert_eq!(entries[0].msg, Some(OrderMsg { voucher_id: 9, order_id: 7, user_id: 8, price: Some(250) }));
        assert_eq!(entries[1].msg, None);
        assert_eq!(entries[1].raw(), "order=x zeta=1");
    }

    #[test]
    fn an_empty_read_and_deleted_entries_hold_nothing_to_persist() {
        assert!(Entry::from_read(Value::Nil).unwrap().is_empty());
        let claimed = Entry::from_claim(Value::Array(vec![Value::Nil, entry("2-0", &[])])).unwrap();
        assert_eq!(claimed.len(), 1);
        assert_eq!(claimed[0].msg, None);
        let deleted = Value::Array(vec![bulk("3-0"), Value::Nil]);
        assert_eq!(Entry::from_claim(Value::Array(vec![deleted])).unwrap()[0].msg, None);
    }

    #[test]
    fn other_shapes_are_errors_not_panics() {
        assert!(Entry::from_read(Value::Int(1)).is_err());
        assert!(Entry::from_claim(Value::Array(vec![Value::Int(1)])).is_err());
        assert!(Entry::from_read(Value::Array(vec![Value::Array(vec![bulk("s")])])).is_err());
    }
}
