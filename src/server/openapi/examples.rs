//! An example request and answer for every call, in the document (each operation's
//! request body and `200` answer). The `#[server]` macro passes only serde's
//! attributes onto a call's arguments struct, so the examples cannot sit on its
//! fields; they are here, one entry per call, and building the document decodes each
//! into the call's own types (`operation::server_fn`): an example that drifts from its
//! call fails the unit tests. The ids are what a fresh server hands out first.

use serde_json::{json, Value};

/// `call`'s example request and answer (`None` for a call that answers nothing).
pub fn of(call: &str) -> Option<(Value, Option<Value>)> {
    let voucher = voucher();
    let order = order();
    let page = |item: Value| json!({ "items": [item], "has_more": false, "next": null });
    let operator = json!({ "name": "ada", "role": "admin" });
    let user = json!({ "user_id": 1, "name": "ann" });
    let on_voucher = json!({ "voucher_id": 1 });
    Some(match call {
        "sign_up" => (json!({ "name": "ann", "password": "a long pass phrase", "challenge": solution() }), Some(user)),
        "sign_up_challenge" => (json!({}), Some(json!({ "challenge": challenge() }))),
        "sign_in" => (json!({ "name": "ann", "password": "a long pass phrase" }), Some(user)),
        "sign_out" | "sign_out_everywhere" => (json!({}), None),
        "me" => (json!({}), Some(json!({ "user": user }))),
        "change_password" | "change_operator_password" => {
            (json!({ "current": "a long pass phrase", "new": "another long pass phrase" }), None)
        }
        "admin_sign_in" => (json!({ "token": "the admin token" }), None),
        "operator_sign_in" => (json!({ "name": "ada", "password": "ada's pass phrase" }), Some(operator)),
        "operator_me" => (json!({}), Some(json!({ "operator": operator }))),
        "admin_status" => (json!({}), Some(json!(true))),
        "add_operator" => (json!({ "name": "ada", "password": "ada's pass phrase", "role": "admin" }), Some(operator)),
        "list_operators" => {
            (json!({}), Some(json!([{ "name": "ada", "role": "admin", "last_sign_in_at": 1_796_000_000_000_i64 }])))
        }
        "remove_operator" => (json!({ "name": "bo" }), None),
        "set_operator_role" => (json!({ "name": "ada", "role": "admin" }), Some(operator)),
        "list_vouchers" => (json!({ "limit": 20 }), Some(page(voucher))),
        "shop_settings" => (json!({}), Some(json!({ "currency": "EUR", "minor_digits": 2 }))),
        "server_time" => (json!({ "voucher_id": 1 }), Some(json!({ "now_ms": 1_796_000_000_000_i64 }))),
        "grab" => {
            (on_voucher, Some(json!({ "order_id": "4611686018427387905", "status": "queued", "receipt": "9f2c…" })))
        }
        "grab_token" => (on_voucher, Some(json!({ "token": "5b1e0c7d2a9f4e38" }))),
        "grab_result" => (
            json!({ "voucher_id": 1, "order_id": "4611686018427387905", "receipt": "9f2c…" }),
            Some(json!({ "status": "success", "order": order })),
        ),
        "my_orders" => (json!({ "limit": 20 }), Some(page(order))),
        "pay_order" => (json!({ "order_id": "4611686018427387905" }), Some(order)),
        "cancel_order" => (json!({ "order_id": "4611686018427387905" }), Some(order)),
        "list_orders" => (json!({ "voucher_id": 1, "status": "unpaid", "limit": 100 }), Some(page(order))),
        "sale_report" => (on_voucher, Some(report())),
        "sale_stats" => (on_voucher, Some(figures())),
        "create_voucher" => (
            json!({ "title": "Winter sale: 50 € off", "stock": 100, "begins_at": "2026-12-01T10:00:00Z",
                    "ends_at": "2026-12-01T11:00:00Z", "price": 1999, "face_value": 5000 }),
            Some(voucher),
        ),
        "warm_up" | "pause_sale" | "resume_sale" | "end_sale" => (on_voucher, Some(voucher)),
        "update_voucher" => {
            (json!({ "voucher_id": 1, "title": "Winter sale: 60 € off", "price": 1499 }), Some(voucher))
        }
        "add_stock" | "withdraw_stock" => {
            (json!({ "voucher_id": 1, "units": 10 }), Some(json!({ "units": 10, "voucher": voucher })))
        }
        "list_audit" => (json!({ "voucher_id": 1, "limit": 50 }), Some(page(audit_entry()))),
        _ => return None,
    })
}

/// The example answer of the plain route at `path`, as it is sent: JSON for the
/// health checks and the document, one event for the feed, text for the CSVs, the
/// metrics and the reference page. The feed's frame and the CSVs are made by the code that makes the
/// real ones, from the examples above, so they cannot drift from them.
pub fn of_route(path: &str) -> Value {
    use crate::server::{access, monitoring};
    let text = |s: String| Value::String(s);
    match path {
        crate::live::FEED_PATH => {
            let stock = json!({ "voucher_id": 1, "total": 100, "stock": 42, "sold_out": false, "paused": false,
                                "begins_at_ms": 1_796_119_200_000_i64, "ends_at_ms": 1_796_122_800_000_i64 });
            let frame = json!({ "type": "stock", "vouchers": [stock], "now_ms": 1_796_119_200_250_i64 });
            let frame: crate::live::ShopFrame = decode(path, frame);
            // One event, as the schema describes each (sent as `data: <frame>`).
            json!({ "data": serde_json::to_string(&frame).expect("a frame serialises") })
        }
        crate::orders::export::PATH => {
            let orders = [decode(path, order())];
            text(crate::orders::export::header() + &crate::orders::export::lines(&orders))
        }
        crate::report::api::CSV_PATH => text(crate::report::api::csv(&decode(path, report()))),
        monitoring::METRICS => text(
            "# TYPE seckill_live_feeds gauge\nseckill_live_feeds 12\n# TYPE seckill_http_responses_total counter\n\
             seckill_http_responses_total{route=\"/api/grab\",status=\"2xx\"} 100\n"
                .into(),
        ),
        monitoring::HEALTHZ => json!({ "status": "ok" }),
        monitoring::READYZ => {
            json!({ "ready": true, "checks": { "redis": true, "database": true, "stopping": false, "layout": true } })
        }
        access::DOCUMENT_PATH => json!({ "openapi": "3.1.0", "info": { "title": "Seckill" }, "paths": {} }),
        access::REFERENCE_PATH => text("<!DOCTYPE html>\n<html lang=\"en\">…</html>\n".into()),
        other => unreachable!("{other} has no example"),
    }
}

/// `example` as a `T`, as the route's code takes it.
fn decode<T: serde::de::DeserializeOwned>(path: &str, example: Value) -> T {
    serde_json::from_value(example).unwrap_or_else(|e| panic!("{path}'s example does not decode: {e}"))
}

fn voucher() -> Value {
    json!({ "id": 1, "title": "Winter sale: 50 € off", "stock": 100, "remaining": 42,
            "begins_at": "2026-12-01T10:00:00Z", "ends_at": "2026-12-01T11:00:00Z", "price": 1999,
            "face_value": 5000, "currency": "EUR", "paused": false, "fair_start": false, "shards": 1 })
}

fn order() -> Value {
    json!({ "order_id": "4611686018427387905", "voucher_id": 1, "user_id": 1, "title": "Winter sale: 50 € off",
            "status": "unpaid", "created_at": "2026-12-01T10:00:00.120Z", "pay_deadline": "2026-12-01T10:15:00.120Z",
            "cancel_reason": null, "price": 1999, "currency": "EUR" })
}

fn challenge() -> Value {
    json!({ "algorithm": "SHA-256", "challenge": "4a5f…", "maxnumber": 100_000, "salt": "e3b0c442?expires=1796000600",
            "signature": "0d1c…" })
}

fn solution() -> Value {
    json!({ "algorithm": "SHA-256", "challenge": "4a5f…", "number": 31_337, "salt": "e3b0c442?expires=1796000600",
            "signature": "0d1c…" })
}

fn audit_entry() -> Value {
    json!({ "id": 7, "at": "2026-12-01T10:20:00Z", "actor": "ada", "action": "pause_sale", "voucher_id": 1,
            "before": "{\"paused\":false}", "after": "{\"paused\":true}" })
}

fn figures() -> Value {
    json!({ "voucher_id": 1, "total_stock": 100, "redis_stock": 0, "granted": 100, "persisted": 100, "unpaid": 12,
            "paid": 85, "cancelled": 3, "stream_length": 103, "lag": 0, "pending": 0, "dead_letters": 0,
            "refused": 9_900, "sold_out_flag": true, "refused_locally": 4_200, "paused": false,
            "begins_at_ms": 1_796_119_200_000_i64, "ends_at_ms": 1_796_122_800_000_i64,
            "sold_out_at_ms": 1_796_119_200_850_i64 })
}

fn report() -> Value {
    json!({
        "voucher": voucher(),
        "generated_at": "2026-12-01T11:05:00Z",
        "sold_out_at": "2026-12-01T10:00:00.850Z",
        "time_to_sell_out_ms": 850,
        "answers": { "granted": 100, "sold_out": 9_900 },
        "seconds": [{ "at": 1_796_119_200, "answers": { "granted": 100, "sold_out": 9_900 } }],
        "step_secs": 1,
        "latency": { "grabs": 10_000, "p50_ms": 1.0, "p90_ms": 2.0, "p99_ms": 5.0, "p999_ms": 10.0, "max_ms": 20.0,
                     "bins": [{ "le_ms": 1.0, "grabs": 6_000 }, { "le_ms": 20.0, "grabs": 4_000 }] },
        "orders": { "total": 100, "unpaid": 12, "paid": 85, "cancelled_by_shopper": 1, "timed_out": 2 },
        "units": { "on_sale": 100, "added": 0, "withdrawn": 0, "sold": 97, "returned": 3, "resold": 0, "left": 3,
                   "dead_letters": 0, "lost": 0 },
        "actions": [audit_entry()],
    })
}
