//! One operation of the API's document, described from types: a server function's
//! from its arguments struct and its answer, and the refusals every operation shares.
//! The access table names [`server_fn`] for each server function (`access::fns!`);
//! the document (`super`) gathers them.

use crate::{
    auth::challenge::HEADER as CHALLENGE,
    error::{AppError, ErrorCode},
    server::idempotency::{MAX_KEPT_SHOPPER_ANSWER, MOST_KEYS_PER_CALLER, REPLAYED},
};
use server_fn::ServerFn;
use utoipa::{
    openapi::{
        content::ContentBuilder,
        path::{Operation, OperationBuilder, Parameter, ParameterBuilder, ParameterIn},
        request_body::RequestBodyBuilder,
        response::{Response, ResponseBuilder},
        schema::{AllOfBuilder, ArrayBuilder, Object, ObjectBuilder, Schema, Type},
        Ref, RefOr, Required,
    },
    PartialSchema, ToSchema,
};

/// Named schemas the operations refer to, gathered as they are described.
pub type Schemas = Vec<(String, RefOr<Schema>)>;

/// A server function's operation, described from its type (see `access::fns!`) and
/// the refusals its route may answer (`server::refusals::of`).
pub type Describe = fn(&mut Schemas, &[ErrorCode]) -> Operation;

/// A server function's operation: its body is `F` (the arguments struct, whose doc is
/// the function's), its answer `F::Output`, each of its `codes` the error body.
pub fn server_fn<F>(schemas: &mut Schemas, codes: &[ErrorCode]) -> Operation
where
    F: ServerFn + ToSchema + serde::de::DeserializeOwned,
    F::Output: Answer + serde::de::DeserializeOwned,
{
    F::schemas(schemas);
    let mut body = F::schema();
    let doc = take_doc(&mut body);
    let name = F::PATH.rsplit('/').next().unwrap_or(F::PATH);
    let body_name = body_name(name);
    schemas.push((body_name.clone(), body));
    let (request, answer) = examples::<F>(name);
    refusals(
        OperationBuilder::new()
            .operation_id(Some(name))
            .summary(doc.as_deref().map(first_sentence))
            .description(doc)
            .tag(domain_of::<F>())
            .parameters(keyed(codes).then(|| vec![idempotency_key()]))
            .request_body(Some(
                RequestBodyBuilder::new()
                    .content("application/json", {
                        let mut content = json_content(Ref::from_schema_name(body_name).into());
                        content.example = Some(request);
                        content
                    })
                    .required(Some(Required::True))
                    .build(),
            ))
            .response("200", {
                let answer = with_cookies(name, with_example(F::Output::response(schemas), answer));
                with_links(name, replayed_where(keyed(codes), answer))
            }),
        codes,
    )
    .build()
}

/// `call`'s example request and answer (`super::examples`), each decoded into the
/// call's own types first: an example that is not a call's fails the document's
/// tests.
fn examples<F>(call: &str) -> (serde_json::Value, Option<serde_json::Value>)
where
    F: ServerFn + serde::de::DeserializeOwned,
    F::Output: serde::de::DeserializeOwned,
{
    let (request, answer) = super::examples::of(call).unwrap_or_else(|| panic!("{call} has no example"));
    if let Err(e) = serde_json::from_value::<F>(request.clone()) {
        panic!("{call}'s example request is not one: {e}");
    }
    if let Some(Err(e)) = answer.clone().map(serde_json::from_value::<F::Output>) {
        panic!("{call}'s example answer is not one: {e}");
    }
    (request, answer)
}

/// `answer` with a link to each call it feeds, under `x-links` (`super::links`).
fn with_links(call: &str, mut answer: Response) -> Response {
    let links: serde_json::Map<String, serde_json::Value> = super::links::of(call)
        .into_iter()
        .map(|(target, body)| (pascal_case(target), serde_json::json!({ "operationId": target, "requestBody": body })))
        .collect();
    if !links.is_empty() {
        let links = utoipa::openapi::extensions::ExtensionsBuilder::new().add("x-links", links).build();
        answer.extensions.get_or_insert_with(Default::default).merge(links);
    }
    answer
}

/// `answer` with `example` for its JSON: an answer with a body has one.
fn with_example(mut answer: Response, example: Option<serde_json::Value>) -> Response {
    if let Some(RefOr::T(content)) = answer.content.get_mut("application/json") {
        assert!(example.is_some(), "an answer with a body has an example ({})", answer.description);
        content.example = example;
    }
    answer
}

/// Whether a call that refuses with `codes` takes an `Idempotency-Key` (the calls for
/// shoppers and operators, `server::idempotency`): whether it may refuse a key.
fn keyed(codes: &[ErrorCode]) -> bool {
    codes.contains(&ErrorCode::IdempotencyKeyReused)
}

/// The `Idempotency-Key` header (`server::idempotency`).
fn idempotency_key() -> Parameter {
    let key =
        ObjectBuilder::new().schema_type(Type::String).pattern(Some(crate::server::idempotency::key_pattern())).build();
    let (most, shopper_kb) = (MOST_KEYS_PER_CALLER, MAX_KEPT_SHOPPER_ANSWER / 1024);
    ParameterBuilder::new()
        .name("Idempotency-Key")
        .parameter_in(ParameterIn::Header)
        .required(Required::False)
        .description(Some(format!(
            "Sent again with the same key and body within 24 hours, a call answers what it first \
             answered (with `Idempotent-Replayed: true`) and does nothing again; the key with \
             another body is refused (`idempotency_key_reused`). A signed-in shopper's or an \
             operator's key, kept across processes, at most {most} a day; an answer that did \
             nothing (`unavailable`, `rate_limited`) is not kept, nor is a shopper's refusal, \
             a shopper's answer over {shopper_kb} KB (a read, harmless to send again), nor, \
             past a budget of the day for all shoppers, any shopper's (served afresh: a grab \
             sent again answers `already_bought` with the order's id and receipt, a payment the \
             order as paid)."
        )))
        .schema(Some(key))
        .build()
}

/// `answer`, with `Idempotent-Replayed` where the call takes an `Idempotency-Key`.
fn replayed_where(keyed: bool, mut answer: Response) -> Response {
    if keyed {
        let what = "`true` when this answer is a replay: what the call answered when first sent with this \
                    `Idempotency-Key` (it did nothing again). A kept refusal carries it too.";
        answer.headers.insert(header_named(&REPLAYED), header(Type::String, what));
    }
    answer
}

/// A header's name as the document writes it: each word capitalised.
fn header_named(name: &axum::http::HeaderName) -> String {
    name.as_str().split('-').map(pascal_case).collect::<Vec<_>>().join("-")
}

/// A header of `kind`, described.
fn header(kind: Type, what: &str) -> RefOr<utoipa::openapi::header::Header> {
    let schema = ObjectBuilder::new().schema_type(kind);
    RefOr::T(utoipa::openapi::header::HeaderBuilder::new().schema(Some(schema)).description(Some(what)).build())
}

/// `answer`, with `Set-Cookie` where `call` sets cookies (`auth::caller::SETS_COOKIES`).
fn with_cookies(call: &str, mut answer: Response) -> Response {
    if crate::auth::caller::SETS_COOKIES.contains(&call) {
        let cookie = ObjectBuilder::new().schema_type(Type::String);
        let what = "The session cookies this call sets or clears (`HttpOnly`, `SameSite=Lax`; named with the \
                    `__Host-` prefix when served over HTTPS).";
        let header = utoipa::openapi::header::HeaderBuilder::new().schema(Some(cookie)).description(Some(what));
        answer.headers.insert("Set-Cookie".into(), RefOr::T(header.build()));
    }
    answer
}

/// `builder` with a response for each status a route that refuses with `codes` (its
/// handler's own and the front door's, `server::refusals::of`) answers with: the
/// error body, its code one of those it answers with that status.
pub fn refusals(mut builder: OperationBuilder, codes: &[ErrorCode]) -> OperationBuilder {
    for (status, codes) in by_status(codes) {
        builder = match codes[..] {
            // One code: the response every route refusing with it alone shares.
            [code] => builder.response(status.to_string(), Ref::from_response_name(refusal_name(code))),
            _ => builder.response(status.to_string(), refusal(status, &codes)),
        };
    }
    builder
}

/// The name among the components of the response refusing with `code` alone
/// (`sold_out` → `SoldOut`).
pub fn refusal_name(code: ErrorCode) -> String {
    pascal_case(code.as_str())
}

/// `codes` by the status each answers with.
pub fn by_status(codes: &[ErrorCode]) -> std::collections::BTreeMap<u16, Vec<ErrorCode>> {
    let mut statuses = std::collections::BTreeMap::<u16, Vec<ErrorCode>>::new();
    for &code in codes {
        statuses.entry(code.status()).or_default().push(code);
    }
    statuses
}

/// The refusal answered with `status`, one of `codes`.
pub fn refusal(status: u16, codes: &[ErrorCode]) -> Response {
    let listed = codes.iter().map(|c| format!("`{}`", c.as_str())).collect::<Vec<_>>().join(", ");
    let mut response = ResponseBuilder::new()
        .description(format!("Refused: {listed}."))
        .content("application/json", json_content(refused_with(codes)))
        .build();
    if let Some(header) = retry_after(status) {
        response.headers.insert("Retry-After".into(), RefOr::T(header));
    }
    if codes.contains(&ErrorCode::ChallengeRequired) {
        let what = "With `challenge_required`: a fresh sign-up challenge, as JSON (the `Challenge` \
                    schema, as `sign_up_challenge` answers it): solve it and sign up again.";
        response.headers.insert(header_named(&CHALLENGE), header(Type::String, what));
    }
    if codes.contains(&ErrorCode::MethodNotAllowed) {
        let what = "With `method_not_allowed`: the methods the path takes.";
        response.headers.insert(header_named(&axum::http::header::ALLOW), header(Type::String, what));
    }
    response
}

/// The error body, its code one of `codes`.
pub fn refused_with(codes: &[ErrorCode]) -> RefOr<Schema> {
    let names: Vec<&str> = codes.iter().map(|c| c.as_str()).collect();
    let code = ObjectBuilder::new().schema_type(Type::String).enum_values(Some(names)).build();
    let narrowed = ObjectBuilder::new().property("code", code).build();
    RefOr::T(Schema::AllOf(AllOfBuilder::new().item(Ref::from_schema_name(AppError::name())).item(narrowed).build()))
}

/// `Retry-After` where a refusal may carry it: a 429 of the rate limits and the
/// guessing limits (`error::AppError::rate_limited`, `server::rate_limit`), and a 503
/// that sheds a grab or comes before the process is ready (`sale::admission`,
/// `server::starting`).
fn retry_after(status: u16) -> Option<utoipa::openapi::header::Header> {
    let when = match status {
        429 => "Seconds to wait before trying again (a rate or guessing limit).",
        503 => "Seconds to wait before trying again, when the server knows (a shed grab, a process not ready yet); without it, retry with a backoff. Not `saved_not_applied`: that change is saved, and is not to be sent again.",
        _ => return None,
    };
    let seconds = ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(1));
    Some(utoipa::openapi::header::HeaderBuilder::new().schema(Some(seconds)).description(Some(when)).build())
}

pub fn json_content(schema: RefOr<Schema>) -> utoipa::openapi::Content {
    ContentBuilder::new().schema(Some(schema)).build()
}

/// A server function's doc comment, taken off its arguments struct's schema (where
/// its macro puts it, after a line of its own).
fn take_doc(schema: &mut RefOr<Schema>) -> Option<String> {
    let RefOr::T(Schema::Object(Object { description, .. })) = schema else { return None };
    let doc = description.take()?;
    let lines = doc.lines().filter(|line| !line.starts_with("Serialized arguments for the"));
    Some(lines.map(|line| line.strip_prefix(' ').unwrap_or(line)).collect::<Vec<_>>().join("\n"))
}

/// The name of `call`'s request body among the schemas (`grab` → `GrabBody`): named by
/// its call, so a generated client's names do not depend on the order of the paths.
pub fn body_name(call: &str) -> String {
    format!("{}Body", pascal_case(call))
}

/// `sale_report` → `SaleReport`.
fn pascal_case(name: &str) -> String {
    name.split('_')
        .flat_map(|word| word.chars().take(1).flat_map(char::to_uppercase).chain(word.chars().skip(1)))
        .collect()
}

/// The first sentence of a doc, for the operation's summary.
fn first_sentence(doc: &str) -> String {
    let flat = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.find(". ") {
        Some(end) => flat[..=end].to_owned(),
        None => flat,
    }
}

/// The domain a server function belongs to (its module's folder: `sale`, `auth`...),
/// the operation's tag.
fn domain_of<F>() -> &'static str {
    std::any::type_name::<F>().split("::").nth(1).unwrap_or("api")
}

/// How an answer's type appears in the document: a named type by reference (its
/// schema among the components), a list or an optional one around it, a plain value
/// as itself. Implemented for each answer type: a server function whose answer has
/// none does not compile.
pub trait Answer {
    fn schema(schemas: &mut Schemas) -> RefOr<Schema>;

    /// The operation's answer: its schema as JSON.
    fn response(schemas: &mut Schemas) -> Response {
        ResponseBuilder::new()
            .description("The answer.")
            .content("application/json", json_content(Self::schema(schemas)))
            .build()
    }
}

impl<T: Answer> Answer for Vec<T> {
    fn schema(schemas: &mut Schemas) -> RefOr<Schema> {
        ArrayBuilder::new().items(T::schema(schemas)).build().into()
    }
}

impl<T: Answer> Answer for crate::listing::Page<T> {
    /// A page of `T` is the named schema `TPage` (`VoucherPage`).
    fn schema(schemas: &mut Schemas) -> RefOr<Schema> {
        let item = T::schema(schemas);
        let item_name = match &item {
            RefOr::Ref(r) => r.ref_location.rsplit('/').next().unwrap_or("Item").to_owned(),
            RefOr::T(_) => "Item".to_owned(),
        };
        let items = ArrayBuilder::new().items(item).build();
        let has_more = ObjectBuilder::new()
            .schema_type(Type::Boolean)
            .description(Some("Whether older items follow: ask again with `after` set to `next`."));
        let next = ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::SchemaType::from_iter([Type::String, Type::Null]))
            .description(Some("The cursor of the next page, when `has_more`."));
        let page = ObjectBuilder::new()
            .description(Some("One page of a list, newest first."))
            .property("items", items)
            .property("has_more", has_more)
            .property("next", next)
            .required("items")
            .required("has_more")
            .required("next");
        let name = format!("{item_name}Page");
        schemas.push((name.clone(), RefOr::T(Schema::Object(page.build()))));
        Ref::from_schema_name(name).into()
    }
}

/// Nothing to read: the body is JSON `null`, and the document says no content (a
/// `null` schema makes some generators emit a model that does not compile).
impl Answer for () {
    fn schema(_: &mut Schemas) -> RefOr<Schema> {
        ObjectBuilder::new().schema_type(Type::Null).build().into()
    }

    fn response(_: &mut Schemas) -> Response {
        ResponseBuilder::new().description("Done (the body is `null`: nothing to read).").build()
    }
}

impl Answer for bool {
    fn schema(_: &mut Schemas) -> RefOr<Schema> {
        <bool as PartialSchema>::schema()
    }
}

macro_rules! named_answers {
    ($($t:ty),* $(,)?) => {$(
        impl Answer for $t {
            fn schema(schemas: &mut Schemas) -> RefOr<Schema> {
                schemas.push((<$t as ToSchema>::name().into_owned(), <$t as PartialSchema>::schema()));
                <$t as ToSchema>::schemas(schemas);
                Ref::from_schema_name(<$t as ToSchema>::name()).into()
            }
        }
    )*};
}

named_answers!(
    crate::auth::User,
    crate::auth::Operator,
    crate::auth::CurrentUser,
    crate::auth::CurrentOperator,
    crate::auth::ListedOperator,
    crate::auth::challenge::NextChallenge,
    crate::voucher::Voucher,
    crate::voucher::ShopConfig,
    crate::sale::GrabTicket,
    crate::sale::IssuedToken,
    crate::sale::GrabState,
    crate::sale::GateTime,
    crate::sale::StockChanged,
    crate::orders::Order,
    crate::report::Report,
    crate::live::SaleFigures,
    crate::audit::AuditEntry,
);
