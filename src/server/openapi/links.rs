//! The document's links: which call's answer feeds which call's body (OpenAPI links,
//! runtime expressions). A shop's tools, and the fuzzer's stateful phase, chain calls
//! through them: a sale made by `create_voucher` is the one `grab` then asks for.
//!
//! They are under `x-links`, each in the shape of an OpenAPI link, not under `links`:
//! our calls take their ids in a JSON body, so each link's `requestBody` is an object,
//! and openapi-generator's parser (swagger-parser) refuses a document with one (it
//! takes a link's `requestBody` only as a string). The fuzzer (`.ci/fuzz_hooks.py`)
//! moves them to `links` in its copy.

use serde_json::{json, Value};

/// The calls `call`'s answer feeds, each with the body it makes for it.
pub fn of(call: &str) -> Vec<(&'static str, Value)> {
    let sale = || json!({ "voucher_id": "$response.body#/id" });
    let units = || json!({ "voucher_id": "$response.body#/id", "units": 1 });
    let order = || json!({ "order_id": "$response.body#/order_id" });
    match call {
        "create_voucher" => {
            let mut links: Vec<(&str, Value)> = [
                "warm_up",
                "grab",
                "grab_token",
                "server_time",
                "pause_sale",
                "resume_sale",
                "end_sale",
                "sale_stats",
                "sale_report",
                "list_orders",
                "list_audit",
            ]
            .into_iter()
            .map(|target| (target, sale()))
            .collect();
            links.push(("add_stock", units()));
            links.push(("withdraw_stock", units()));
            links.push(("update_voucher", json!({ "voucher_id": "$response.body#/id", "title": "Renamed" })));
            links
        }
        "grab" => vec![
            (
                "grab_result",
                json!({ "voucher_id": "$request.body#/voucher_id", "order_id": "$response.body#/order_id",
                        "receipt": "$response.body#/receipt" }),
            ),
            ("pay_order", order()),
            ("cancel_order", order()),
        ],
        "add_operator" => vec![
            ("set_operator_role", json!({ "name": "$response.body#/name", "role": "operator" })),
            ("remove_operator", json!({ "name": "$response.body#/name" })),
        ],
        _ => Vec::new(),
    }
}
