//! The sale day's clients: shoppers who grab, poll their result, then pay, cancel or
//! let the order time out; operators who add and withdraw stock, pause and resume.
//! Each call goes to the app processes in turn and is recorded in the history,
//! answered or not: a process that is down or stopped simply does not answer.

use crate::history::{History, Op, OpKind};
use rand::{rngs::StdRng, Rng};
use seckill::client::{ApiClient, Shopper};
use serde_json::{json, Value};
use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

/// Longest a call waits for its answer (a stopped process never answers).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// How often a shopper asks how a granted grab stands.
const POLL_EVERY: Duration = Duration::from_millis(250);
/// How long a shopper polls a granted grab before going on (the checker looks again).
const POLL_FOR: Duration = Duration::from_secs(20);

/// The clients' shared view of the run.
pub struct Workload {
    /// One client per app process.
    pub clients: Vec<ApiClient>,
    pub vouchers: Vec<i64>,
    pub history: Arc<History>,
    /// Round robin over the processes.
    next: AtomicUsize,
}

impl Workload {
    pub fn new(bases: &[String], admin_token: &str, vouchers: Vec<i64>, history: Arc<History>) -> Self {
        let clients = bases.iter().map(|b| ApiClient::new(b, admin_token, 16)).collect();
        Self { clients, vouchers, history, next: AtomicUsize::new(0) }
    }

    fn process(&self) -> usize {
        self.next.fetch_add(1, Ordering::Relaxed) % self.clients.len()
    }

    /// Makes one call as `who` (or as the operator) about `voucher` and records it:
    /// `body["order_id"]` is the order it is about, else the one its answer names.
    pub async fn call(&self, kind: OpKind, who: Option<&Shopper>, voucher: i64, name: &str, body: Value) -> Op {
        let about = body["order_id"].as_str().map(str::to_owned);
        let process = self.process();
        let client = &self.clients[process];
        let invoked = self.history.now();
        let answer = match who {
            Some(s) => tokio::time::timeout(CALL_TIMEOUT, client.call(name, body, &[("cookie", &s.cookie)])).await,
            None => tokio::time::timeout(CALL_TIMEOUT, client.operator(name, body)).await,
        };
        let (status, code, order, receipt) = match answer {
            Ok(Ok((status, body))) => {
                let order = about.or_else(|| body["order_id"].as_str().map(str::to_owned));
                (Some(status.as_u16()), code_of(&body), order, body["receipt"].as_str().map(str::to_owned))
            }
            Ok(Err(e)) => (None, e, about, None),
            Err(_) => (None, "no answer in time".to_owned(), about, None),
        };
        let op = Op {
            kind,
            process,
            user: who.map(|s| s.user_id),
            voucher,
            invoked,
            answered: self.history.now(),
            answered_at: chrono::Utc::now().timestamp_millis(),
            status,
            code,
            order,
            receipt,
        };
        self.history.op(op.clone());
        op
    }

    /// One shopper's day until `until` (ms since the start): grab a sale, follow the
    /// result, then pay, cancel or let the order time out.
    pub async fn shopper(self: Arc<Self>, mut rng: StdRng, shoppers: Vec<Shopper>, until: u64) {
        while self.history.now() < until {
            let who = &shoppers[rng.random_range(0..shoppers.len())];
            let v = self.vouchers[rng.random_range(0..self.vouchers.len())];
            let grab = self.call(OpKind::Grab, Some(who), v, "grab", json!({ "voucher_id": v })).await;
            // A grant, or the order the shopper holds (`already_bought`, with its
            // receipt: an earlier grab's, whose answer may have been lost), followed alike.
            if let (true, Some(order)) = (grab.names_a_grant(), grab.order.clone()) {
                if self.follow(who, v, &order, grab.receipt.as_deref()).await.as_deref() == Some("success") {
                    tokio::time::sleep(Duration::from_millis(rng.random_range(0..1_500))).await;
                    let body = json!({ "order_id": order });
                    match rng.random_range(0..10) {
                        0..4 => drop(self.call(OpKind::Pay, Some(who), v, "pay_order", body).await),
                        4..7 => drop(self.call(OpKind::Cancel, Some(who), v, "cancel_order", body).await),
                        // Left to time out.
                        _ => {}
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(rng.random_range(20..300))).await;
        }
    }

    /// Polls a granted grab until it is decided (or [`POLL_FOR`] passes): its status.
    pub async fn follow(&self, who: &Shopper, v: i64, order: &str, receipt: Option<&str>) -> Option<String> {
        let asked = self.history.now();
        loop {
            let body = json!({ "voucher_id": v, "order_id": order, "receipt": receipt });
            let op = self.call(OpKind::Result, Some(who), v, "grab_result", body).await;
            if op.status == Some(200) && op.code != "queued" {
                return Some(op.code.split(':').next().unwrap_or_default().to_owned());
            }
            if self.history.since(asked) > POLL_FOR {
                return None;
            }
            tokio::time::sleep(POLL_EVERY).await;
        }
    }

    /// The operators' day until `until`: every few seconds a change to a sale.
    pub async fn operator(self: Arc<Self>, mut rng: StdRng, until: u64) {
        while self.history.now() < until {
            tokio::time::sleep(Duration::from_millis(rng.random_range(1_500..4_000))).await;
            let v = self.vouchers[rng.random_range(0..self.vouchers.len())];
            match rng.random_range(0..10) {
                0..4 => {
                    let units = rng.random_range(1..=3);
                    let body = json!({ "voucher_id": v, "units": units });
                    self.call(OpKind::AddStock(units), None, v, "add_stock", body).await;
                }
                4..6 => {
                    let units = rng.random_range(1..=2);
                    let body = json!({ "voucher_id": v, "units": units });
                    self.call(OpKind::Withdraw(units), None, v, "withdraw_stock", body).await;
                }
                6 => {
                    // An hour or more after the run, as the sales were made: the edit, not
                    // the end, is what runs under the faults.
                    let left = until.saturating_sub(self.history.now()) as i64;
                    let after_the_run =
                        chrono::Duration::milliseconds(left) + chrono::Duration::minutes(rng.random_range(60..90));
                    let ends_at = (chrono::Utc::now() + after_the_run).to_rfc3339();
                    let body = json!({ "voucher_id": v, "ends_at": ends_at });
                    self.call(OpKind::EditEnd, None, v, "update_voucher", body).await;
                }
                _ => {
                    self.call(OpKind::Pause, None, v, "pause_sale", json!({ "voucher_id": v })).await;
                    tokio::time::sleep(Duration::from_millis(rng.random_range(500..3_000))).await;
                    self.resume(v).await;
                }
            }
        }
    }

    /// A leaver's day until `until`: every few seconds signs in as `name`, signs out
    /// on the next process, and, when that answered, calls with the ended cookie on
    /// each process in turn for a few seconds (`OpKind::Probe`): every one must be
    /// refused soon after the sign-out (the checker's `signed_out_sessions_end`). One
    /// leaver per name, so a probe is of the name's last session signed out.
    pub async fn leaver(self: Arc<Self>, mut rng: StdRng, name: String, password: &'static str, until: u64) {
        while self.history.now() < until {
            tokio::time::sleep(Duration::from_millis(rng.random_range(1_000..3_000))).await;
            let client = &self.clients[self.process()];
            let Ok(Ok(session)) = tokio::time::timeout(CALL_TIMEOUT, client.sign_in(&name, password)).await else {
                continue;
            };
            let out = self.call(OpKind::SignOut, Some(&session), 0, "sign_out", json!({})).await;
            if out.status != Some(200) {
                continue;
            }
            for _ in 0..2 * self.clients.len() {
                tokio::time::sleep(Duration::from_millis(rng.random_range(200..800))).await;
                self.call(OpKind::Probe, Some(&session), 0, "my_orders", json!({})).await;
            }
        }
    }

    /// Resumes a sale, asking again until a process says it is on.
    pub async fn resume(&self, v: i64) {
        for _ in 0..100 {
            let op = self.call(OpKind::Resume, None, v, "resume_sale", json!({ "voucher_id": v })).await;
            if op.status == Some(200) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
}

/// What an answer says in a word: its error code, a grab result's status (and
/// reason), or an order's status.
fn code_of(body: &Value) -> String {
    if let Some(code) = body["code"].as_str() {
        return code.to_owned();
    }
    match (body["status"].as_str(), body["reason"].as_str()) {
        (Some(status), Some(reason)) => format!("{status}:{reason}"),
        (Some(status), None) => status.to_owned(),
        _ => "ok".to_owned(),
    }
}
