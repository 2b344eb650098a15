//! A client of the JSON API (`POST /api/<name>`), shared by the load tool
//! (`src/bin/bench/`) and the integration tests: one place that knows how to sign in,
//! carry a session cookie and make calls with the admin token.

use futures::{stream, StreamExt};
use reqwest::StatusCode;
use serde_json::{json, Value};

/// How often, and how far apart, a call the server was too busy for is made again.
const BUSY_TRIES: u32 = 100;
const BUSY_PAUSE: std::time::Duration = std::time::Duration::from_millis(50);

/// Talks to one server.
#[derive(Clone)]
pub struct ApiClient {
    pub http: reqwest::Client,
    /// `http://host:port`, without a trailing slash.
    pub base: String,
    admin_token: String,
}

/// A signed-in shopper.
#[derive(Clone, Debug)]
pub struct Shopper {
    /// The `Cookie` header value that carries the session.
    pub cookie: String,
    pub user_id: i64,
}

impl ApiClient {
    /// `idle_per_host` keeps that many connections open for reuse. A server answers
    /// within its request timeout (30 s unless set) and its live feed speaks every
    /// 15 s, so a connection silent for a minute is dead: the call fails instead of
    /// waiting for ever.
    pub fn new(base: &str, admin_token: &str, idle_per_host: usize) -> Self {
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(idle_per_host)
            .read_timeout(std::time::Duration::from_secs(60))
            .build()
            .unwrap_or_default();
        Self { http, base: base.trim_end_matches('/').to_owned(), admin_token: admin_token.to_owned() }
    }

    /// POSTs JSON to `/api/<name>` with extra headers; the status and the body (a JSON
    /// string when it is not JSON).
    pub async fn call(&self, name: &str, body: Value, headers: &[(&str, &str)]) -> Result<(StatusCode, Value), String> {
        let mut req = self.http.post(format!("{}/api/{name}", self.base)).json(&body);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let res = req.send().await.map_err(|e| format!("{name}: {e}"))?;
        let status = res.status();
        let text = res.text().await.map_err(|e| format!("{name}: {e}"))?;
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::String(text))))
    }

    /// An operator's call (the admin token as bearer); the status and the body.
    pub async fn operator(&self, name: &str, body: Value) -> Result<(StatusCode, Value), String> {
        let auth = format!("Bearer {}", self.admin_token);
        self.call(name, body, &[("authorization", &auth)]).await
    }

    /// A call with the admin token (bearer) that must succeed.
    pub async fn admin(&self, name: &str, body: Value) -> Result<Value, String> {
        let (status, body) = self.operator(name, body).await?;
        if status.is_success() {
            Ok(body)
        } else {
            Err(format!("{name}: {status} {body}"))
        }
    }

    /// Makes an account and signs it in.
    pub async fn sign_up(&self, name: &str, password: &str) -> Result<Shopper, String> {
        self.account_call("sign_up", name, password).await
    }

    /// Signs in with a name and a password.
    pub async fn sign_in(&self, name: &str, password: &str) -> Result<Shopper, String> {
        self.account_call("sign_in", name, password).await
    }

    /// Signs in, making the account first when the name is new (tests and tools:
    /// every shopper they make has `password`).
    pub async fn shopper(&self, name: &str, password: &str) -> Result<Shopper, String> {
        match self.sign_up(name, password).await {
            Err(e) if e.contains("409") => self.sign_in(name, password).await,
            other => other,
        }
    }

    /// `sign_up` or `sign_in`: the shopper whose session cookie the answer sets. A busy
    /// password hasher (503), or an address with its most checks under way at once (429
    /// with a short `Retry-After`: many shoppers behind one address), is asked again a
    /// little later, as a browser would.
    async fn account_call(&self, call: &str, name: &str, password: &str) -> Result<Shopper, String> {
        let body = json!({ "name": name, "password": password });
        let mut tries = 0;
        let res = loop {
            let res = self.http.post(format!("{}/api/{call}", self.base)).json(&body).send().await;
            let res = res.map_err(|e| format!("{call}: {e}"))?;
            tries += 1;
            let retry_after = res.headers().get("retry-after").and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
            let pause = match res.status() {
                StatusCode::SERVICE_UNAVAILABLE => BUSY_PAUSE,
                StatusCode::TOO_MANY_REQUESTS if retry_after.is_some_and(|s| s <= 1) => BUSY_PAUSE * 4,
                _ => break res,
            };
            if tries >= BUSY_TRIES {
                break res;
            }
            tokio::time::sleep(pause).await;
        };
        if !res.status().is_success() {
            return Err(format!("{call} {name}: {}", res.status()));
        }
        let cookie = res
            .headers()
            .get("set-cookie")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .ok_or(format!("{call}: no session cookie"))?
            .to_owned();
        let body: Value = res.json().await.map_err(|e| format!("{call}: {e}"))?;
        Ok(Shopper { cookie, user_id: body["user_id"].as_i64().ok_or(format!("{call}: no user_id"))? })
    }

    /// Signs in `n` shoppers named `<prefix>-<i>` (making their accounts, with
    /// `password`, when new), `concurrency` at a time.
    pub async fn shoppers(
        &self,
        prefix: &str,
        n: usize,
        password: &str,
        concurrency: usize,
    ) -> Result<Vec<Shopper>, String> {
        stream::iter(0..n)
            .map(|i| async move { self.shopper(&format!("{prefix}-{i}"), password).await })
            .buffer_unordered(concurrency)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect()
    }

    /// Creates a voucher (as an operator); its id.
    pub async fn create_voucher(
        &self,
        title: &str,
        stock: i64,
        begins_at: chrono::DateTime<chrono::Utc>,
        ends_at: chrono::DateTime<chrono::Utc>,
    ) -> Result<i64, String> {
        self.create_sharded_voucher(title, stock, (begins_at, ends_at), 1).await
    }

    /// [`Self::create_voucher`], its units split over `shards` buckets in Redis.
    pub async fn create_sharded_voucher(
        &self,
        title: &str,
        stock: i64,
        (begins_at, ends_at): (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>),
        shards: u32,
    ) -> Result<i64, String> {
        let body = json!({
            "title": title,
            "stock": stock,
            "begins_at": begins_at.to_rfc3339(),
            "ends_at": ends_at.to_rfc3339(),
            "shards": shards,
        });
        let voucher = self.admin("create_voucher", body).await?;
        voucher["id"].as_i64().ok_or_else(|| "create_voucher: no id".to_owned())
    }

    /// A grab by `who`.
    pub async fn grab(&self, who: &Shopper, voucher_id: i64) -> Result<(StatusCode, Value), String> {
        self.call("grab", json!({ "voucher_id": voucher_id }), &[("cookie", &who.cookie)]).await
    }

    /// `sale_stats` of one voucher (as an operator).
    pub async fn stats(&self, voucher_id: i64) -> Result<Value, String> {
        self.admin("sale_stats", json!({ "voucher_id": voucher_id })).await
    }
}
