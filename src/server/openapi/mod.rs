//! The API's contract: an OpenAPI 3.1 document generated from the code, served at
//! [`access::DOCUMENT_PATH`] and checked in at `docs/openapi.json` (`npm run openapi` writes it; a test
//! fails when the copy is out of date, or when a route and the document disagree).
//!
//! Nothing here is written twice. Each server function's body is the schema of the
//! arguments struct its macro makes (with the function's doc), its answer the schema
//! of its return type, and its audience the access table's entry (`access`), as
//! security requirements. Every refusal is the one error body (`AppError`), its status
//! derived from its code (`ErrorCode::status`), so each status lists the codes that
//! answer with it. The plain routes (the live feed, the CSV exports, health and
//! metrics, the reference page) are described below, one function each, by their
//! modules' own paths. The limits the checks enforce are stated on the bodies'
//! fields from the checks' own constants (`limits`).

mod examples;
mod limits;
mod links;
pub mod operation;

use super::access::{self, Access};
use crate::error::AppError;
use operation::{by_status, json_content, refusal, refusal_name, refusals, Schemas};
use utoipa::{
    openapi::{
        content::ContentBuilder,
        path::{HttpMethod, Operation, OperationBuilder, ParameterBuilder, ParameterIn, PathItem},
        response::ResponseBuilder,
        schema::{ObjectBuilder, OneOfBuilder, Schema, Type},
        security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme},
        ComponentsBuilder, InfoBuilder, OpenApi, OpenApiBuilder, PathsBuilder, Ref, RefOr, Required,
    },
    PartialSchema, ToSchema,
};

/// The document, as served and as checked in.
pub fn document() -> OpenApi {
    let mut schemas = Schemas::new();
    let mut paths = PathsBuilder::new();
    for (path, access, describe) in access::server_fns() {
        let operation = secured(describe(&mut schemas, refusals_of(path)), access);
        paths = paths.path(path, PathItem::new(HttpMethod::Post, operation));
    }
    for (path, access) in access::table().filter(|(path, _)| !access::is_server_fn(path)) {
        let operation = secured(plain_route(path, &mut schemas), access);
        paths = paths.path(path, PathItem::new(HttpMethod::Get, operation));
    }
    limits::state(&mut schemas);
    schemas.push((AppError::name().into_owned(), AppError::schema()));
    AppError::schemas(&mut schemas);
    OpenApiBuilder::new()
        .servers(Some(vec![utoipa::openapi::server::Server::new("/")]))
        .info(
            InfoBuilder::new()
                .title("Seckill")
                .version(env!("CARGO_PKG_VERSION"))
                .license(Some(license()))
                .description(Some(
                    "A flash-sale system's JSON API. Every call is a POST of a JSON object to its \
             `/api/...` path and answers JSON; the live feed, the CSV exports, health and metrics \
             are GETs. A refusal is `{\"code\", \"message\"}` with a stable code and a status \
             derived from it. Served over HTTPS (`SECKILL_SECURE_COOKIES`), the session cookies' \
             names carry the `__Host-` prefix.",
                )),
        )
        .paths(paths.build())
        .components(Some(
            ComponentsBuilder::new()
                .schemas_from_iter(schemas)
                .responses_from_iter(shared_refusals())
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

/// Where the reference page finds its renderer: Redoc's standalone bundle, which the
/// set-up copies from npm into the site's files (`public/vendor`, `.ci/setup`), so the
/// page asks nothing of another host.
const RENDERER: &str = "/vendor/redoc.standalone.js";

/// The routes serving the document, and the page rendering it, for the app's router:
/// each made once, on first ask.
pub fn routes<S: Clone + Send + Sync + 'static>() -> axum::Router<S> {
    use axum::{http::header, response::Html, routing::get};
    static JSON: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    static PAGE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let serve = || async { ([(header::CONTENT_TYPE, "application/json")], JSON.get_or_init(json).as_str()) };
    let page =
        || include_str!("reference.html").replace("{renderer}", RENDERER).replace("{document}", access::DOCUMENT_PATH);
    // The renderer's attribution shows a logo from its maker's host: the policy keeps
    // the page to this server (the image is not fetched, and the page hides it).
    let policy = "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; \
                  img-src 'self' data:; font-src 'self' data:; worker-src 'self' blob:";
    let reference =
        move || async move { ([(header::CONTENT_SECURITY_POLICY, policy)], Html(PAGE.get_or_init(page).as_str())) };
    axum::Router::new().route(access::DOCUMENT_PATH, get(serve)).route(access::REFERENCE_PATH, get(reference))
}

const SHOPPER_SESSION: &str = "shopper_session";
const SHOP_TOKEN: &str = "shop_token";
const OPERATOR_SESSION: &str = "operator_session";
const ADMIN_TOKEN: &str = "admin_token";

/// The crate's license, by its SPDX identifier.
fn license() -> utoipa::openapi::info::License {
    let spdx = env!("CARGO_PKG_LICENSE");
    utoipa::openapi::info::LicenseBuilder::new().name(spdx).identifier(Some(spdx)).build()
}

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
    // An open operation says so (`[]`): no requirement, not a forgotten one.
    operation.security =
        Some(requirements.into_iter().map(|(name, roles)| SecurityRequirement::new(name, roles)).collect());
    operation
}

/// The operation of a route that is not a server function: the module that serves it
/// says what it is; this says it in the document.
fn plain_route(path: &str, schemas: &mut Schemas) -> Operation {
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
    // A file of lines, each line's schema named: the body is a string whose content,
    // read as CSV, is an array of them (`contentSchema`; OpenAPI 3.2 would say
    // `itemSchema`, the document is 3.1).
    let items = |kind: &str, what: &str, item: RefOr<Schema>| {
        let lines = utoipa::openapi::schema::ArrayBuilder::new().items(item);
        let file = ObjectBuilder::new()
            .schema_type(Type::String)
            .content_media_type(kind)
            .content_schema(Some(RefOr::T(Schema::Array(lines.build()))));
        ResponseBuilder::new().description(what).content(kind, ContentBuilder::new().schema(Some(file)).build())
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
            // The schema is each event's, as tools read an event stream's schema
            // before OpenAPI 3.2 (3.2 calls it `itemSchema`).
            let frames = ResponseBuilder::new()
                .description(format!(
                    "Server-Sent Events, the schema each event's: a frame each time the figures change, each \
                     event's `data` one JSON frame: a `ShopFrame` with `view=shop`, an `OperatorFrame` otherwise \
                     (first its `hello`). The answer ends after at most `SECKILL_FEED_LIFETIME_MS` ({} minutes by \
                     default): reconnect then.",
                    crate::config::FEED_LIFETIME_MS / 60_000
                ))
                .content("text/event-stream", ContentBuilder::new().schema(Some(feed::event(schemas))).build());
            (
                "live",
                "The live feed: stock and figures as they change.",
                OperationBuilder::new().parameter(view).response("200", frames),
            )
        }
        crate::orders::export::PATH => {
            let csv = items(
                "text/csv",
                "One line per order, oldest first, after a header line: the columns of `OrdersCsvLine`, in its order.",
                csv::orders(schemas),
            );
            ("orders_csv", "A sale's orders as CSV.", OperationBuilder::new().parameter(voucher()).response("200", csv))
        }
        crate::report::api::CSV_PATH => {
            let csv = items(
                "text/csv",
                "The report's figures, one line per second of the sale with a grab, after a header line: the \
                 columns of `SaleReportCsvLine`, in its order.",
                csv::report(schemas),
            );
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
            let door = refusals_of(path);
            let door: Vec<_> = door.iter().copied().filter(|c| c.status() == 503).collect();
            let not_ready = OneOfBuilder::new().item(ready.clone()).item(operation::refused_with(&door)).build();
            let not_ready = ResponseBuilder::new()
                .description("Not ready: each check's result says why (or the front door's refusal).")
                .content("application/json", json_content(RefOr::T(Schema::OneOf(not_ready))));
            let builder = refusals(OperationBuilder::new(), refusals_of(path))
                .response("200", answer("Ready for traffic."))
                .response("503", not_ready);
            let operation = builder
                .operation_id(Some("readyz"))
                .summary(Some("Whether this process should get traffic."))
                .tag("ops")
                .build();
            return with_route_example(operation, path);
        }
        access::DOCUMENT_PATH => {
            let document = ObjectBuilder::new().build();
            let document = ResponseBuilder::new()
                .description("OpenAPI 3.1.")
                .content("application/json", json_content(document.into()));
            ("openapi", "This document.", OperationBuilder::new().response("200", document))
        }
        access::REFERENCE_PATH => {
            let page =
                text("text/html", "This document, rendered (Redoc), with every call's body, answer and refusals.");
            ("reference", "This document, rendered for people.", OperationBuilder::new().response("200", page))
        }
        other => unreachable!("{other} is in the access table but not described here"),
    };
    let operation = builder.operation_id(Some(id)).summary(Some(summary)).tag(tag_of_path(path));
    with_route_example(refusals(operation, refusals_of(path)).build(), path)
}

/// `operation` with its route's example answer (`examples::of_route`) on its `200`.
fn with_route_example(mut operation: Operation, path: &str) -> Operation {
    let Some(RefOr::T(ok)) = operation.responses.responses.get_mut("200") else { unreachable!("{path} answers 200") };
    for content in ok.content.values_mut() {
        if let RefOr::T(content) = content {
            content.example = Some(examples::of_route(path));
        }
    }
    operation
}

/// The refusals some route answers with one code alone at its status: each a
/// response among the components, which those routes refer to (`operation::refusals`).
fn shared_refusals() -> Vec<(String, utoipa::openapi::response::Response)> {
    let mut alone: Vec<crate::error::ErrorCode> = access::table()
        .flat_map(|(path, _)| by_status(refusals_of(path)).into_values())
        .filter_map(|codes| (codes.len() == 1).then(|| codes[0]))
        .collect();
    alone.sort_by_key(|c| c.as_str());
    alone.dedup();
    alone.into_iter().map(|code| (refusal_name(code), refusal(code.status(), &[code]))).collect()
}

/// The live feed's event: its `data`, JSON of one frame.
mod feed {
    use super::*;
    use crate::live::{OperatorFrame, ShopFrame};

    pub fn event(schemas: &mut Schemas) -> RefOr<Schema> {
        let frames = OneOfBuilder::new().item(named::<ShopFrame>(schemas)).item(named::<OperatorFrame>(schemas));
        let data = ObjectBuilder::new()
            .schema_type(Type::String)
            .content_media_type("application/json")
            .content_schema(Some(RefOr::T(Schema::OneOf(frames.build()))));
        ObjectBuilder::new().property("data", data).required("data").build().into()
    }
}

/// The CSV exports' lines, as objects of their columns (named schemas).
mod csv {
    use super::*;

    /// `orders.csv`: each column a string, as `orders::export::COLUMNS` says.
    pub fn orders(schemas: &mut Schemas) -> RefOr<Schema> {
        let mut line = ObjectBuilder::new().description(Some("A line of `orders.csv`, column by column."));
        for (column, what) in crate::orders::export::COLUMNS {
            line = line.property(column, ObjectBuilder::new().schema_type(Type::String).description(Some(what)));
            line = line.required(column);
        }
        name("OrdersCsvLine", line.into(), schemas)
    }

    /// `sale_report.csv`: the second, then the grabs answered each way in it.
    pub fn report(schemas: &mut Schemas) -> RefOr<Schema> {
        let second = ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(utoipa::openapi::KnownFormat::DateTime)))
            .description(Some("The second (UTC)."));
        let mut line = ObjectBuilder::new()
            .description(Some("A line of `sale_report.csv`: a second, and its grabs by answer."))
            .property("second", second)
            .required("second");
        for outcome in crate::report::Outcome::ALL {
            let grabs = ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(0));
            line = line.property(outcome.as_str(), grabs).required(outcome.as_str());
        }
        name("SaleReportCsvLine", line.into(), schemas)
    }

    fn name(name: &str, schema: Schema, schemas: &mut Schemas) -> RefOr<Schema> {
        schemas.push((name.to_owned(), RefOr::T(schema)));
        Ref::from_schema_name(name).into()
    }
}

/// `T`'s schema among the components (with those it refers to), by reference.
fn named<T: ToSchema>(schemas: &mut Schemas) -> RefOr<Schema> {
    schemas.push((T::name().into_owned(), T::schema()));
    T::schemas(schemas);
    Ref::from_schema_name(T::name()).into()
}

/// What the route at `path`, in the access table, may refuse.
fn refusals_of(path: &str) -> &'static [crate::error::ErrorCode] {
    super::refusals::of(path).unwrap_or_else(|| panic!("{path} is not in the access table"))
}

fn tag_of_path(path: &str) -> &'static str {
    match path {
        crate::live::FEED_PATH => "live",
        crate::orders::export::PATH => "orders",
        crate::report::api::CSV_PATH => "report",
        _ => "ops",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;
    use strum::VariantArray;

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

    /// `docs/api.md`'s tables, written for people, say what the code does: its calls
    /// table has every server function and no other, each with its audience, and its
    /// refusals table every code with its status.
    #[test]
    fn the_api_pages_tables_agree_with_the_code() {
        let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/api.md");
        let page = std::fs::read_to_string(file).expect("docs/api.md");
        // The rows of the table under `heading`: each row's first column's names, and
        // its second column.
        let rows = |heading: &str| -> Vec<(Vec<String>, String)> {
            let section = page.split(heading).nth(1).expect(heading).split("\n## ").next().unwrap_or_default();
            let rows = section.lines().filter(|l| l.starts_with("| `"));
            rows.map(|row| {
                let cells: Vec<&str> = row.split(" | ").collect();
                let names = cells[0].split('`').skip(1).step_by(2).map(str::to_owned).collect();
                (names, cells[1].to_owned())
            })
            .collect()
        };
        let who = |access: Access| match access {
            Access::Anyone => "anyone",
            Access::Shopper => "shopper",
            Access::Operator => "operator",
            Access::AdminRole => "admin role",
            Access::AdminToken => "admin token",
        };
        let calls = rows("\n## Calls\n");
        let mut listed = Vec::new();
        for (names, audience) in &calls {
            for name in names {
                let path = format!("/api/{name}");
                let access = access::table().find(|(p, _)| *p == path).map(|(_, a)| a);
                let access = access.unwrap_or_else(|| panic!("docs/api.md lists `{name}`, which is no call"));
                assert!(
                    audience.starts_with(who(access)),
                    "docs/api.md: `{name}` is for {}, not {audience}",
                    who(access)
                );
                listed.push(path);
            }
        }
        for (path, _) in access::table().filter(|(p, _)| access::is_server_fn(p)) {
            assert!(listed.iter().any(|l| l == path), "docs/api.md's calls table lacks {path}");
        }
        let mut codes = Vec::new();
        for (names, status) in rows("\n## Refusals\n") {
            for name in names {
                let code = ErrorCode::from_name(&name).unwrap_or_else(|| panic!("docs/api.md: no code `{name}`"));
                assert_eq!(status, code.status().to_string(), "docs/api.md: `{name}`'s status");
                codes.push(code);
            }
        }
        let missing = ErrorCode::VARIANTS.iter().find(|c| **c != ErrorCode::Network && !codes.contains(c));
        assert!(missing.is_none(), "docs/api.md's refusals table lacks {missing:?}");
    }

    /// Every link leads to a call in the document, and every field its body names is
    /// one the call takes.
    #[test]
    fn every_link_leads_to_a_call_and_its_fields() {
        let doc = serde_json::to_value(document()).unwrap();
        let mut links = 0;
        for (path, item) in doc["paths"].as_object().unwrap() {
            let Some(answer) = item["post"]["responses"]["200"].as_object() else { continue };
            for (name, link) in answer.get("x-links").and_then(|l| l.as_object()).into_iter().flatten() {
                let target = link["operationId"].as_str().unwrap();
                let body = &doc["components"]["schemas"][operation::body_name(target)]["properties"];
                assert!(body.is_object(), "{path}: {name} leads to no call");
                for field in link["requestBody"].as_object().unwrap().keys() {
                    assert!(body.get(field).is_some(), "{path}: {name} sends {target} a `{field}` it does not take");
                }
                links += 1;
            }
        }
        assert!(links >= 19, "{links} links");
    }

    /// Each operation lists exactly its route's refusals (`server::refusals`), each
    /// under its status.
    #[test]
    fn each_operation_lists_its_routes_refusals_under_their_statuses() {
        let doc = serde_json::to_value(document()).unwrap();
        for (path, _) in access::table() {
            let method = access::method_of(path).as_str().to_lowercase();
            let responses = doc["paths"][path][&method]["responses"].as_object().unwrap();
            let mut listed = Vec::new();
            for (status, response) in responses.iter().filter(|(s, _)| s.as_str() >= "400") {
                let shared = response["$ref"].as_str().and_then(|r| r.strip_prefix("#/components/responses/"));
                let response = shared.map_or(response, |name| &doc["components"]["responses"][name]);
                let schemas = response["content"]["application/json"]["schema"].to_string();
                for &code in ErrorCode::VARIANTS {
                    if schemas.contains(&format!("\"{}\"", code.as_str())) {
                        assert_eq!(status, &code.status().to_string(), "{path}: {code:?}");
                        listed.push(code);
                    }
                }
            }
            let expected = crate::server::refusals::of(path).unwrap();
            assert_eq!(listed.len(), expected.len(), "{path}: {listed:?}");
            assert!(expected.iter().all(|c| listed.contains(c)), "{path}: {listed:?}");
        }
    }

    /// The headers clients act on are in the document (before, only `Retry-After` and
    /// `Set-Cookie` were): the fresh challenge on `challenge_required`, `Allow` on a
    /// wrong method, and `Idempotent-Replayed` on the answers of calls that take a key.
    #[test]
    fn the_headers_clients_act_on_are_documented() {
        let doc = serde_json::to_value(document()).unwrap();
        // The headers of `path`'s answer with `status`, inline or shared.
        let headers = |path: &str, status: u16| {
            let answer = &doc["paths"][path]["post"]["responses"][status.to_string()];
            let shared = answer["$ref"].as_str().and_then(|r| r.strip_prefix("#/components/responses/"));
            shared.map_or(answer, |name| &doc["components"]["responses"][name])["headers"].clone()
        };
        let refused = |path: &str, code: ErrorCode| headers(path, code.status());
        assert!(refused("/api/sign_up", ErrorCode::ChallengeRequired)["Seckill-Challenge"].is_object());
        assert!(refused("/api/sign_in", ErrorCode::MethodNotAllowed)["Allow"].is_object());
        assert!(refused("/api/sign_in", ErrorCode::RateLimited)["Retry-After"].is_object());
        let answered = |path: &str| headers(path, 200);
        assert!(answered("/api/add_stock")["Idempotent-Replayed"].is_object());
        assert!(answered("/api/pay_order")["Idempotent-Replayed"].is_object());
        assert!(answered("/api/list_vouchers")["Idempotent-Replayed"].is_null(), "a call that takes no key");
    }
}
