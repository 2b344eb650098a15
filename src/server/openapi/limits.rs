//! The limits the server enforces on request fields, stated in the API document from
//! the same constants the checks use (a server function's arguments take no schema
//! attributes: its macro passes only serde's on). Each entry names a call's body and a
//! field; building the document fails when one is gone (a unit test builds it). The
//! fuzzer (`.ci/fuzz`) then holds the server to each: data outside a limit must be
//! refused, and data inside is what it generates.

use super::operation::{body_name, Schemas};
use crate::{auth, backend::layout::MAX_SHARDS, listing::PageSize, order_ids, voucher};
use utoipa::openapi::{
    schema::{KnownFormat, Schema, SchemaFormat, SchemaType, Type},
    RefOr,
};

/// A field's limit.
enum Limit {
    /// Characters, as sent.
    Chars(usize, usize),
    /// A whole number, both ends included.
    Range(i64, i64),
    /// A list's `limit`.
    Page(PageSize),
    /// An RFC 3339 time.
    Time,
    /// A string of this form (an ECMA-262 regular expression).
    Pattern(String),
    /// A line of text (`text::line`) of at most this many characters.
    Line(usize),
    /// At most this many characters (a password given to be checked: any length up to
    /// it is a guess to check).
    AtMost(usize),
    /// One of these names.
    OneOf(Vec<&'static str>),
}

/// Each call's limited fields.
fn table() -> Vec<(&'static str, &'static str, Limit)> {
    use Limit::*;
    let name = || Line(auth::MAX_NAME_CHARS);
    let new_password = || Chars(auth::password::MIN_CHARS, auth::password::MAX_CHARS);
    let title = || Line(voucher::MAX_TITLE_CHARS);
    let amount = || Range(0, voucher::MAX_AMOUNT);
    let units = || Range(1, voucher::MAX_STOCK);
    let given = || AtMost(auth::password::MAX_CHARS);
    let cursor = || Pattern(crate::listing::cursor_pattern());
    let statuses = crate::orders::OrderStatus::ALL.map(crate::orders::OrderStatus::as_str);
    vec![
        ("sign_up", "name", name()),
        ("sign_up", "password", new_password()),
        ("sign_in", "name", name()),
        ("sign_in", "password", given()),
        ("operator_sign_in", "name", name()),
        ("operator_sign_in", "password", given()),
        ("add_operator", "name", name()),
        ("add_operator", "password", new_password()),
        ("remove_operator", "name", name()),
        ("set_operator_role", "name", name()),
        ("change_password", "current", given()),
        ("change_password", "new", new_password()),
        ("change_operator_password", "current", given()),
        ("change_operator_password", "new", new_password()),
        ("create_voucher", "title", title()),
        ("create_voucher", "stock", units()),
        ("create_voucher", "begins_at", Time),
        ("create_voucher", "ends_at", Time),
        ("create_voucher", "price", amount()),
        ("create_voucher", "face_value", amount()),
        ("create_voucher", "shards", Range(1, i64::from(MAX_SHARDS))),
        ("update_voucher", "title", title()),
        ("update_voucher", "begins_at", Time),
        ("update_voucher", "ends_at", Time),
        ("update_voucher", "price", amount()),
        ("update_voucher", "face_value", amount()),
        ("add_stock", "units", units()),
        ("withdraw_stock", "units", units()),
        ("grab_result", "order_id", Pattern(order_ids::pattern())),
        ("pay_order", "order_id", Pattern(order_ids::pattern())),
        ("cancel_order", "order_id", Pattern(order_ids::pattern())),
        ("list_vouchers", "limit", Page(voucher::api::LIST_PAGE)),
        ("my_orders", "limit", Page(crate::orders::api::MY_ORDERS_PAGE)),
        ("list_orders", "limit", Page(crate::orders::api::ORDERS_PAGE)),
        ("list_audit", "limit", Page(crate::sale::run::AUDIT_PAGE)),
        ("list_vouchers", "after", cursor()),
        ("my_orders", "after", cursor()),
        ("list_orders", "after", cursor()),
        ("list_audit", "after", cursor()),
        ("list_orders", "status", OneOf(statuses.into())),
    ]
}

/// `schemas` with every limit of [`table`] stated on its field.
pub fn state(schemas: &mut Schemas) {
    for (call, field, limit) in table() {
        let body = body_name(call);
        let schema = schemas.iter_mut().find(|(name, _)| *name == body).map(|(_, schema)| schema);
        let Some(RefOr::T(Schema::Object(object))) = schema else { panic!("no body {body} for {call}") };
        let Some(RefOr::T(Schema::Object(property))) = object.properties.get_mut(field) else {
            panic!("{call} has no field {field}")
        };
        match limit {
            Limit::Chars(min, max) => (property.min_length, property.max_length) = (Some(min), Some(max)),
            Limit::Range(min, max) => (property.minimum, property.maximum) = (Some(min.into()), Some(max.into())),
            Limit::Page(size) => {
                (property.minimum, property.maximum) = (Some(1i64.into()), Some(size.most.into()));
                property.default = Some(size.default.into());
            }
            Limit::Time => property.format = Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)),
            Limit::Pattern(pattern) => property.pattern = Some(pattern),
            Limit::Line(most) => {
                (property.min_length, property.max_length) = (Some(1), Some(most));
                property.pattern = Some(crate::text::pattern());
            }
            Limit::AtMost(most) => property.max_length = Some(most),
            Limit::OneOf(names) => {
                // A field that may be left out is `null` too, which the list must name.
                let nullable = matches!(&property.schema_type, SchemaType::Array(types) if types.contains(&Type::Null));
                let null = nullable.then_some(serde_json::Value::Null);
                property.enum_values = Some(names.into_iter().map(Into::into).chain(null).collect());
            }
        }
    }
}
