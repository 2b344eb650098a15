"""The API fuzzer's hooks (.ci/fuzz loads them through SCHEMATHESIS_HOOKS).

- The document's links (`x-links`, server/openapi/links.rs) become OpenAPI `links` in
  the fuzzer's copy, so its stateful phase chains calls: the sale `create_voucher`
  made is the one `grab` asks for, the order `grab` answered is the one paid.
- Every call carries a shopper's session cookie and the admin token, so the protected
  operations are explored past their door. A sign-out, a change of password and a
  grab get a shopper of their own each (one grab per shopper is the rule), so they
  never end the fuzzer's session or change its password.
- Every call comes from an address of its own (`X-Forwarded-For`; the server trusts
  loopback as its proxy here): the fuzzer's wrong passwords are guesses, and one
  address making them all would soon be held back (auth/attempts.rs), its calls then
  refused before any logic ran.
- The examples that carry a credential carry the right one (the admin token, the
  shopper's password), so the success is tried too.
- A generated id is, half the time, one that exists: a sale on now, and the shopper's
  order in it (made here, before the run). Only a valid id is swapped for another
  valid one, so a body meant to be refused stays refused.
"""

import datetime
import itertools
import json
import os
import re
import urllib.request

import schemathesis
from hypothesis import strategies as st

BASE = os.environ["SECKILL_FUZZ_BASE"]
TOKEN = os.environ["SECKILL_FUZZ_TOKEN"]
PASSWORD = "a fuzzing password"
OWN_SESSION = ("/api/sign_out", "/api/sign_out_everywhere", "/api/change_password", "/api/grab")
# Not `random`: Hypothesis seeds it, so a replayed run would make the same names.
COUNTER = itertools.count(1)
RUN = os.getpid()


def an_address():
    n = next(COUNTER)
    return "10.%d.%d.%d" % ((RUN >> 8) & 255, (n >> 8) & 255, n & 255)


def call(name, body, cookie=None, admin=False):
    """Calls the API; the answer's JSON and its session cookie, if it set one."""
    headers = {"content-type": "application/json", "x-forwarded-for": an_address()}
    if cookie:
        headers["cookie"] = cookie
    if admin:
        headers["authorization"] = "Bearer " + TOKEN
    request = urllib.request.Request(BASE + "/api/" + name, data=json.dumps(body).encode(), headers=headers)
    with urllib.request.urlopen(request, timeout=10) as answer:
        cookies = [v.split(";", 1)[0] for h, v in answer.getheaders() if h.lower() == "set-cookie"]
        session = next((c for c in cookies if c.startswith("seckill_session=")), None)
        return json.loads(answer.read() or b"null"), session


def a_shopper():
    """A new shopper's session cookie."""
    name = "fuzzer%d_%d" % (RUN, next(COUNTER))
    return call("sign_up", {"name": name, "password": PASSWORD})[1]


def a_sale_with_an_order(cookie):
    """A sale on now, and the order `cookie`'s shopper grabbed in it."""
    now = datetime.datetime.now(datetime.timezone.utc)
    at = lambda minutes: (now + datetime.timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")
    sale = {"title": "Fuzzed sale", "stock": 1_000_000, "price": 100, "face_value": 500,
            "begins_at": at(-1), "ends_at": at(120)}
    sale = call("create_voucher", sale, admin=True)[0]["id"]
    call("warm_up", {"voucher_id": sale}, admin=True)
    ticket = call("grab", {"voucher_id": sale}, cookie)[0]
    return sale, ticket["order_id"], ticket["receipt"]


# The fuzzer's shopper, and what exists for its ids to name: a sale with its order
# (paid, asked about), and another sale with the order `cancel_order` is given. The
# first sale is the examples' (they name sale 1, and one ends it).
COOKIE = a_shopper()
EXAMPLES_SALE, _, _ = a_sale_with_an_order(COOKIE)
SALE, ORDER, RECEIPT = a_sale_with_an_order(COOKIE)
CANCELS_SALE, CANCELLED, _ = a_sale_with_an_order(COOKIE)
# The fuzzer learns ids from answers and tries them everywhere. So that the calls on a
# sale reach it open and `pay_order` reaches an unpaid order, the calls that would end,
# move, pause or empty these sales are sent the examples' sale instead, and a cancel of
# the order to pay is sent the order to cancel: (field, kept, instead) per call.
KEPT_OPEN = ("voucher_id", (SALE, CANCELS_SALE), EXAMPLES_SALE)
KEPT = {
    "/api/end_sale": KEPT_OPEN,
    "/api/update_voucher": KEPT_OPEN,
    "/api/pause_sale": KEPT_OPEN,
    "/api/withdraw_stock": KEPT_OPEN,
    "/api/cancel_order": ("order_id", (ORDER,), CANCELLED),
}
VALID = {
    "voucher_id": lambda v: type(v) is int and -(2**63) <= v < 2**63,
    "order_id": lambda v: isinstance(v, str) and re.fullmatch(r"[0-9]{1,19}", v),
    "receipt": lambda v: isinstance(v, str),
}
REAL = {"voucher_id": SALE, "order_id": ORDER, "receipt": RECEIPT}
# `end_sale` is given no real sale (it would end the one the others are given); the
# stateful phase ends sales it made.
REAL_FOR = {"/api/end_sale": {}, "/api/cancel_order": {"order_id": CANCELLED}}


@schemathesis.hook
def before_load_schema(context, raw_schema):
    for item in raw_schema.get("paths", {}).values():
        for operation in item.values():
            for answer in operation.get("responses", {}).values() if isinstance(operation, dict) else ():
                if isinstance(answer, dict) and "x-links" in answer:
                    answer["links"] = answer.pop("x-links")


@schemathesis.hook
def before_add_examples(context, examples):
    path = context.operation.path if context.operation else None
    for case in examples:
        if path == "/api/admin_sign_in" and isinstance(case.body, dict):
            case.body = {**case.body, "token": TOKEN}
        if path == "/api/change_password" and isinstance(case.body, dict):
            case.body = {**case.body, "current": PASSWORD}


@schemathesis.hook
def flatmap_body(context, body):
    if not isinstance(body, dict):
        return st.just(body)
    real = REAL_FOR.get(context.operation.path, REAL) if context.operation else {}
    real = {field: value for field, value in real.items() if field in body and VALID[field](body[field])}
    return st.sampled_from([body, {**body, **real}]) if real else st.just(body)


@schemathesis.auth()
class Caller:
    def get(self, case, context):
        return TOKEN

    def set(self, case, token, context):
        path = case.operation.path
        cookie = a_shopper() if path in OWN_SESSION else COOKIE
        field, kept, instead = KEPT.get(path, (None, (), None))
        if isinstance(case.body, dict) and field in case.body and case.body[field] in kept:
            case.body = {**case.body, field: instead}
        case.headers = {
            **(case.headers or {}),
            "Cookie": cookie,
            "Authorization": "Bearer " + token,
            "X-Forwarded-For": an_address(),
        }
