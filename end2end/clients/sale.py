"""A sale through the client openapi-python-client generates from docs/openapi.json.

Written against the generated package (`seckill_client`: its calls, its models), as a
shop's backend would be, with no HTTP by hand: a shopper solves the sign-up challenge
and signs up, the admin token adds an operator, who signs in, creates a two-unit sale (one
unit would sell out, and the process's sold-out flag answer the second grab) and warms
it; the shopper grabs, grabs again (told the order they hold, with its
receipt), follows the result from `queued` to `success`, and pays. Every call for shoppers or operators that changes something carries an Idempotency-Key. Run by
.ci/clients with SECKILL_URL and SECKILL_ADMIN_TOKEN set and the generated package on
PYTHONPATH; exits non-zero, saying where, when a step does not answer as it should.
"""

import hashlib
import os
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone
from http.cookies import SimpleCookie

from seckill_client import AuthenticatedClient, Client
from seckill_client.api.auth import add_operator, operator_sign_in, sign_up, sign_up_challenge
from seckill_client.api.orders import pay_order
from seckill_client.api.sale import create_voucher, grab, grab_result, warm_up
from seckill_client.models import (
    AddOperatorBody,
    CreateVoucherBody,
    GrabBody,
    GrabQueued,
    GrabResponse409,
    GrabResponse409Code,
    GrabResultBody,
    GrabSucceeded,
    GrabTicket,
    Operator,
    OperatorSignInBody,
    Order,
    OrderStatus,
    PayOrderBody,
    Role,
    SignUpBody,
    SignUpChallengeBody,
    Solution,
    User,
    Voucher,
    WarmUpBody,
)

URL = os.environ["SECKILL_URL"]
ADMIN_TOKEN = os.environ["SECKILL_ADMIN_TOKEN"]
PASSWORD = "a client's own password"


def expect(what, answer, kind):
    """The answer if it is a `kind`; else stop, saying what came instead."""
    if not isinstance(answer, kind):
        sys.exit(f"[sale.py] {what}: expected {kind.__name__}, got {answer!r}")
    print(f"[sale.py] {what}: ok")
    return answer


def key():
    """A fresh Idempotency-Key: sent again with the same body, the call is not made twice."""
    return str(uuid.uuid4())


def session(response):
    """A client carrying the cookies `response` set, as the Cookie header: the document's
    cookie security schemes, which the generated client sends as a header it is told."""
    jar = SimpleCookie()
    for value in response.headers.get_list("set-cookie"):
        jar.load(value)
    cookies = "; ".join(f"{name}={morsel.value}" for name, morsel in jar.items() if morsel.value)
    return AuthenticatedClient(
        base_url=URL, token=cookies, prefix="", auth_header_name="Cookie", raise_on_unexpected_status=True
    )


def solve(challenge):
    """The number up to `maxnumber` whose SHA-256 after the salt is the challenge."""
    for number in range(challenge.maxnumber + 1):
        if hashlib.sha256(f"{challenge.salt}{number}".encode()).hexdigest() == challenge.challenge:
            return Solution(
                algorithm=challenge.algorithm,
                challenge=challenge.challenge,
                number=number,
                salt=challenge.salt,
                signature=challenge.signature,
            )
    sys.exit("[sale.py] no number solves the sign-up challenge")


def main():
    anyone = Client(base_url=URL, raise_on_unexpected_status=True)
    admin = AuthenticatedClient(base_url=URL, token=ADMIN_TOKEN, raise_on_unexpected_status=True)
    suffix = uuid.uuid4().hex[:8]

    asked = sign_up_challenge.sync(client=anyone, body=SignUpChallengeBody()).challenge
    solution = solve(asked) if asked else None
    body = SignUpBody(name=f"client-{suffix}", password=PASSWORD, challenge=solution)
    signed_up = sign_up.sync_detailed(client=anyone, body=body)
    expect("sign_up", signed_up.parsed, User)
    shopper = session(signed_up)

    name = f"ops-{suffix}"
    body = AddOperatorBody(name=name, password=PASSWORD, role=Role.OPERATOR)
    expect("add_operator (admin token)", add_operator.sync(client=admin, body=body, idempotency_key=key()), object)
    signed_in = operator_sign_in.sync_detailed(client=anyone, body=OperatorSignInBody(name=name, password=PASSWORD))
    expect("operator_sign_in", signed_in.parsed, Operator)
    operator = session(signed_in)

    now = datetime.now(timezone.utc)
    body = CreateVoucherBody(
        title=f"Client sale {suffix}",
        stock=2,
        begins_at=now - timedelta(seconds=5),
        ends_at=now + timedelta(hours=1),
    )
    voucher = expect("create_voucher", create_voucher.sync(client=operator, body=body, idempotency_key=key()), Voucher)
    body = WarmUpBody(voucher_id=voucher.id)
    expect("warm_up", warm_up.sync(client=operator, body=body, idempotency_key=key()), Voucher)

    ticket = expect("grab", grab.sync(client=shopper, body=GrabBody(voucher_id=voucher.id), idempotency_key=key()), GrabTicket)
    # The grab sent again as if its answer had been lost (a new key: a new call): it
    # names the order the shopper holds, with the receipt to follow it by.
    again = grab.sync(client=shopper, body=GrabBody(voucher_id=voucher.id), idempotency_key=key())
    again = expect("grab sent again", again, GrabResponse409)
    if (again.code, again.order_id, again.receipt) != (GrabResponse409Code.ALREADY_BOUGHT, ticket.order_id, ticket.receipt):
        sys.exit(f"[sale.py] a grab sent again did not name the order it holds: {again}")
    body = GrabResultBody(voucher_id=voucher.id, order_id=ticket.order_id, receipt=ticket.receipt)
    deadline = time.monotonic() + 10
    state = grab_result.sync(client=shopper, body=body)
    while isinstance(state, GrabQueued) and time.monotonic() < deadline:
        time.sleep(0.1)
        state = grab_result.sync(client=shopper, body=body)
    saved = expect("grab_result until success", state, GrabSucceeded)

    paid = pay_order.sync(client=shopper, body=PayOrderBody(order_id=saved.order.order_id), idempotency_key=key())
    paid = expect("pay_order", paid, Order)
    if paid.status != OrderStatus.PAID:
        sys.exit(f"[sale.py] the order is {paid.status}, not paid")
    print(f"[sale.py] order {paid.order_id} granted, saved and paid through the generated client")


if __name__ == "__main__":
    main()
