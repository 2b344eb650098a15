//! The API's contract: an OpenAPI 3.1 document generated from the code, served at
//! [`PATH`] and checked in at `docs/openapi.json` (`npm run openapi` writes it; a test
//! fails when the copy is out of date, or when a route and the document disagree).
//!
//! Nothing here is written twice. Each server function's body is the schema of the
//! arguments struct its macro makes (with the function's doc), its answer the schema
//! of its return type, and its audience the access table's entry (`access`), as
//! security requirements. Every refusal is the one error body (`AppError`), its status
//! derived from its code (`ErrorCode::status`), so each status lists the codes that
//! answer with it. The plain routes (the live feed, the CSV exports, health and
//! metrics) are described below, one function each, by their modules' own paths.

use super::access::{self, Access};
use crate::error::{AppError, ErrorCode};
use server_fn::ServerFn;
use strum::VariantArray;
use utoipa::{
    openapi::{
        content::ContentBuilder,
        path::{HttpMethod, Operation, OperationBuilder, ParameterBuilder, ParameterIn, PathItem},
        request_body::RequestBodyBuilder,
        response::{Response, ResponseBuilder},
        schema::{AllOfBuilder, ArrayBuilder, Object, ObjectBuilder, OneOfBuilder, Schema, Type},
        security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme},
        ComponentsBuilder, InfoBuilder, OpenApi, OpenApiBuilder, PathsBuilder, Ref, RefOr, Required,
    },
    PartialSchema, ToSchema,
};

/// Where the document is served (GET, for anyone).
pub const PATH: &str = "/api/openapi.json";

/// Named schemas the operations refer to, gathered as they are described.
type Schemas = Vec<(String, RefOr<Schema>)>;

/// A server function's operation, described from its type (see `access::fns!`).
pub type Describe = fn(&mut Schemas) -> Operation;

/// The document, as served and as checked in.
pub fn document() -> OpenApi {
    let mut schemas = Schemas::new();
    let mut paths = PathsBuilder::new();
    for (path, access, describe) in access::server_fns() {
        let operation = secured(describe(&mut schemas), access);
        paths = paths.path(path, PathItem::new(HttpMethod::Post, operation));
    }
    for (path, access) in access::table().filter(|(path, _)| !access::is_server_fn(path)) {
        let operation = secured(plain_route(path), access);
        paths = paths.path(path, PathItem::new(HttpMethod::Get, operation));
    }
    schemas.push((AppError::name().into_owned(), AppError::schema()));
    AppError::schemas(&mut schemas);
    OpenApiBuilder::new()
        .info(InfoBuilder::new().title("Seckill").version(env!("CARGO_PKG_VERSION")).description(Some(
            "A flash-sale system's JSON API. Every call is a POST of a JSON object to its \
             `/api/...` path and answers JSON; the live feed, the CSV exports, health and metrics \
             are GETs. A refusal is `{\"code\", \"message\"}` with a stable code and a status \
             derived from it. Served over HTTPS (`SECKILL_SECURE_COOKIES`), the session cookies' \
             names carry the `__Host-` prefix.",
        )))
        .paths(paths.build())
        .components(Some(
            ComponentsBuilder::new()
                .schemas_from_iter(schemas)
                .responses_from_iter(
                    refusal_statuses().into_iter().map(|(status, codes)| (refusal_name(status), refusal(&codes))),
                )
                .security_scheme(
                    SHOPPER_SESSION,
                    cookie(crate::auth::session::SESSION_COOKIE, "A shopper's session (`sign_in`, `sign_up`)."),
                )
                .security_scheme(SHOP_TOKEN, bearer("JWT", "The shop's own login: a JWT from its identity provider."))
                .security_scheme(
                    OPERATOR_SESSION,
                    cookie(
                        crate::auth::session::OPERATOR_COOKIE,
                        "An operator's session (`operator_sign_in`); the `admin` role where required.",
                    ),
                )
                .security_scheme(ADMIN_TOKEN, bearer("token", "The admin token (`SECKILL_ADMIN_TOKEN`)."))
                .build(),
        ))
        .build()
}

/// The document as JSON, as served and as `npm run openapi` writes it: pretty, ending
/// in a newline.
pub fn json() -> String {
    let mut text = document().to_pretty_json().expect("the document serialises");
    text.push('\n');
    text
}

/// The route serving the document, for the app's router: made once, on first ask.
pub fn routes<S: Clone + Send + Sync + 'static>() -> axum::Router<S> {
    use axum::{http::header, routing::get};
    static JSON: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let serve = || async { ([(header::CONTENT_TYPE, "application/json")], JSON.get_or_init(json).as_str()) };
    axum::Router::new().route(PATH, get(serve))
}

const SHOPPER_SESSION: &str = "shopper_session";
const SHOP_TOKEN: &str = "shop_token";
const OPERATOR_SESSION: &str = "operator_session";
const ADMIN_TOKEN: &str = "admin_token";

fn cookie(name: &str, description: &str) -> SecurityScheme {
    SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::with_description(name, description)))
}

fn bearer(format: &str, description: &str) -> SecurityScheme {
    SecurityScheme::Http(
        HttpBuilder::new().scheme(HttpAuthScheme::Bearer).bearer_format(format).description(Some(description)).build(),
    )
}

/// `operation` with its audience's security requirements (any one of them will do).
fn secured(mut operation: Operation, access: Access) -> Operation {
    let requirements = match access {
        Access::Anyone => vec![],
        Access::Shopper => vec![(SHOPPER_SESSION, vec![]), (SHOP_TOKEN, vec![])],
        Access::Operator => vec![(OPERATOR_SESSION, vec![]), (ADMIN_TOKEN, vec![])],
        Access::AdminRole => vec![(OPERATOR_SESSION, vec!["admin"]), (ADMIN_TOKEN, vec![])],
        Access::AdminToken => vec![(ADMIN_TOKEN, vec![])],
    };
    if !requirements.is_empty() {
        operation.security =
            Some(requirements.into_iter().map(|(name, roles)| SecurityRequirement::new(name, roles)).collect());
    }
    operation
}

/// A server function's operation: its body is `F` (the arguments struct, whose doc is
/// the function's), its answer `F::Output`, every refusal the error body.
pub fn server_fn<F>(schemas: &mut Schemas) -> Operation
where
    F: ServerFn + ToSchema,
    F::Output: Answer,
{
    F::schemas(schemas);
    let mut body = F::schema();
    let doc = take_doc(&mut body);
    let name = F::PATH.rsplit('/').next().unwrap_or(F::PATH);
    let answer = ResponseBuilder::new()
        .description("The answer.")
        .content("application/json", json_content(F::Output::schema(schemas)));
    refusals(
        OperationBuilder::new()
            .operation_id(Some(name))
            .summary(doc.as_deref().map(first_sentence))
            .description(doc)
            .tag(domain_of::<F>())
            .request_body(Some(
                RequestBodyBuilder::new()
                    .content("application/json", json_content(body))
                    .required(Some(Required::True))
                    .build(),
            ))
            .response("200", answer),
    )
    .build()
}

/// The operation of a route that is not a server function: the module that serves it
/// says what it is; this says it in the document.
fn plain_route(path: &str) -> Operation {
    let voucher = || {
        ParameterBuilder::new()
            .name("voucher_id")
            .parameter_in(ParameterIn::Query)
            .required(Required::True)
            .schema(Some(i64::schema()))
            .build()
    };
    let text = |kind: &str, what: &str| {
        ResponseBuilder::new()
            .description(what)
            .content(kind, ContentBuilder::new().schema(Some(String::schema())).build())
    };
    let (id, summary, builder) = match path {
        crate::live::FEED_PATH => {
            let view = ObjectBuilder::new().schema_type(Type::String).enum_values(Some(["shop"])).build();
            let view = ParameterBuilder::new()
                .name("view")
                .parameter_in(ParameterIn::Query)
                .required(Required::False)
                .description(Some(
                    "`shop` for the shoppers' stock feed (anyone); absent for the operator's feed (operators).",
                ))
                .schema(Some(view))
                .build();
            let frames =
                text("text/event-stream", "Server-Sent Events: a frame of JSON figures each time they change.");
            (
                "live",
                "The live feed: stock and figures as they change.",
                OperationBuilder::new().parameter(view).response("200", frames),
            )
        }
        crate::orders::export::PATH => {
            let csv = text("text/csv", "One line per order, oldest first, after a header line.");
            ("orders_csv", "A sale's orders as CSV.", OperationBuilder::new().parameter(voucher()).response("200", csv))
        }
        crate::report::api::CSV_PATH => {
            let csv = text("text/csv", "The report's figures, one line per second of the sale.");
            (
                "sale_report_csv",
                "A sale's report as CSV.",
                OperationBuilder::new().parameter(voucher()).response("200", csv),
            )
        }
        super::monitoring::METRICS => {
            let metrics = text("text/plain", "The Prometheus text format.");
            ("metrics", "This process's metrics.", OperationBuilder::new().response("200", metrics))
        }
        super::monitoring::HEALTHZ => {
            let ok = ObjectBuilder::new().property("status", String::schema()).required("status").build();
            let ok = ResponseBuilder::new()
                .description("The process runs.")
                .content("application/json", json_content(ok.into()));
            ("healthz", "Whether the process runs.", OperationBuilder::new().response("200", ok))
        }
        super::monitoring::READYZ => {
            let checks = ObjectBuilder::new().additional_properties(Some(<bool as PartialSchema>::schema())).build();
            let ready = ObjectBuilder::new()
                .property("ready", <bool as PartialSchema>::schema())
                .property("checks", checks)
                .required("ready")
                .required("checks")
                .build();
            let answer = |what: &str| {
                ResponseBuilder::new().description(what).content("application/json", json_content(ready.clone().into()))
            };
            // Not ready, or refused at the door (as any route may be): 503 is either.
            let not_ready =
                OneOfBuilder::new().item(ready.clone()).item(Ref::from_schema_name(AppError::name())).build();
            let not_ready = ResponseBuilder::new()
                .description("Not ready: each check's result says why (or the front door's refusal).")
                .content("application/json", json_content(RefOr::T(Schema::OneOf(not_ready))));
            let builder = refusals(OperationBuilder::new())
                .response("200", answer("Ready for traffic."))
                .response("503", not_ready);
            return builder
                .operation_id(Some("readyz"))
                .summary(Some("Whether this process should get traffic."))
                .tag("ops")
                .build();
        }
        PATH => {
            let document = ObjectBuilder::new().build();
            let document = ResponseBuilder::new()
                .description("OpenAPI 3.1.")
                .content("application/json", json_content(document.into()));
            ("openapi", "This document.", OperationBuilder::new().response("200", document))
        }
        other => unreachable!("{other} is in the access table but not described here"),
    };
    refusals(builder.operation_id(Some(id)).summary(Some(summary)).tag(tag_of_path(path))).build()
}

fn tag_of_path(path: &str) -> &'static str {
    match path {
        crate::live::FEED_PATH => "live",
        crate::orders::export::PATH => "orders",
        crate::report::api::CSV_PATH => "report",
        _ => "ops",
    }
}

/// `builder` with a response for each status a refusal can have: the error body, its
/// code one of those that answer with that status.
fn refusals(mut builder: OperationBuilder) -> OperationBuilder {
    for status in refusal_statuses().into_keys() {
        builder = builder.response(status.to_string(), Ref::from_response_name(refusal_name(status)));
    }
    builder
}

/// The name of the refusal with `status` among the components.
fn refusal_name(status: u16) -> String {
    format!("Refused{status}")
}

/// Each status a server answers a refusal with, and its codes (`network` is the
/// browser's own, never sent).
pub fn refusal_statuses() -> std::collections::BTreeMap<u16, Vec<ErrorCode>> {
    let mut statuses = std::collections::BTreeMap::<u16, Vec<ErrorCode>>::new();
    for &code in ErrorCode::VARIANTS.iter().filter(|c| **c != ErrorCode::Network) {
        statuses.entry(code.status()).or_default().push(code);
    }
    statuses
}

fn refusal(codes: &[ErrorCode]) -> Response {
    let names: Vec<&str> = codes.iter().map(|c| c.as_str()).collect();
    let code = ObjectBuilder::new().schema_type(Type::String).enum_values(Some(names.clone())).build();
    let narrowed = ObjectBuilder::new().property("code", code).build();
    let schema = AllOfBuilder::new().item(Ref::from_schema_name(AppError::name())).item(narrowed).build();
    let listed = names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
    ResponseBuilder::new()
        .description(format!("Refused: {listed}."))
        .content("application/json", json_content(RefOr::T(Schema::AllOf(schema))))
        .build()
}

fn json_content(schema: RefOr<Schema>) -> utoipa::openapi::Content {
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
}

impl<T: Answer> Answer for Vec<T> {
    fn schema(schemas: &mut Schemas) -> RefOr<Schema> {
        ArrayBuilder::new().items(T::schema(schemas)).build().into()
    }
}

impl<T: Answer> Answer for Option<T> {
    fn schema(schemas: &mut Schemas) -> RefOr<Schema> {
        let null = ObjectBuilder::new().schema_type(Type::Null).build();
        RefOr::T(Schema::OneOf(OneOfBuilder::new().item(null).item(T::schema(schemas)).build()))
    }
}

impl Answer for () {
    fn schema(_: &mut Schemas) -> RefOr<Schema> {
        ObjectBuilder::new().schema_type(Type::Null).build().into()
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
    crate::auth::ListedOperator,
    crate::auth::challenge::Challenge,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every route in the access table (every registered server function and plain
    /// route, as `access`'s own test proves) is in the document, with its method, and
    /// nothing else is.
    #[test]
    fn the_document_has_every_route_and_only_routes() {
        let doc = document();
        let documented: Vec<(&String, &PathItem)> = doc.paths.paths.iter().collect();
        for (path, _) in access::table() {
            let item = doc.paths.paths.get(path).unwrap_or_else(|| panic!("{path} is not documented"));
            let method = access::method_of(path);
            let described = if method == axum::http::Method::POST { &item.post } else { &item.get };
            assert!(described.is_some(), "{path}: {method} is not documented");
        }
        for (path, _) in documented {
            assert!(access::table().any(|(p, _)| p == path), "{path} is documented but not routed");
        }
    }

    /// `docs/openapi.json` is what the code generates: a shop generating its client
    /// from the checked-in copy gets today's API.
    #[test]
    fn the_checked_in_document_is_up_to_date() {
        let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/openapi.json");
        let checked_in = std::fs::read_to_string(&file).unwrap_or_default();
        assert!(checked_in == json(), "docs/openapi.json is out of date: run `npm run openapi` and commit it");
    }

    /// Each refusal's status lists its code, and only there.
    #[test]
    fn every_refusal_code_is_documented_once_with_its_status() {
        let statuses = refusal_statuses();
        for &code in ErrorCode::VARIANTS.iter().filter(|c| **c != ErrorCode::Network) {
            let listed: Vec<u16> =
                statuses.iter().filter(|(_, codes)| codes.contains(&code)).map(|(s, _)| *s).collect();
            assert_eq!(listed, vec![code.status()], "{code:?}");
        }
    }
}
