"""Schemathesis hooks for tests/tests/api_fuzz.rs.

Signs every request the way a partner does (README, "A signed request"): the signature covers
the exact bytes that go on the wire, so it is computed on the prepared request, after
schemathesis has serialized the body and the query. Admin routes are signed with the admin
credential, every other authenticated route with the partner credential; the two come from
the environment (`CUSTODY_FUZZ_PARTNER`, `CUSTODY_FUZZ_ADMIN`: JSON as `custody credentials
create` prints it).
"""

import atexit
import collections
import hashlib
import hmac
import json
import os
import time
import uuid
from urllib.parse import urlsplit

import requests
import schemathesis

PARTNER = json.loads(os.environ["CUSTODY_FUZZ_PARTNER"])
ADMIN = json.loads(os.environ["CUSTODY_FUZZ_ADMIN"])
PUBLIC = {"/health", "/openapi.json"}

# What a request the schema calls valid may still be refused for: facts the schema cannot know
# (a user without a wallet, a spent quote, a balance, a chain that is down). A refusal for the
# shape of the request itself (MALFORMED_JSON, VALIDATION_FAILED) means the document promised
# more than the server accepts.
SHAPE_CODES = {"MALFORMED_JSON", "VALIDATION_FAILED"}


AUTH_HEADERS = ("X-Service-Key", "X-Service-Timestamp", "X-Service-Nonce", "X-Service-Signature")


# Stands for a value only known once the request's bytes are: replaced by `Signer`.
LATER = "signed-on-send"


class Signer(requests.auth.AuthBase):
    """Signs the prepared request: fills the authentication headers that still hold `LATER`.
    A header a negative case left out or set to a generated value stays as the case has it."""

    def __call__(self, request):
        api_key = request.headers.get("X-Service-Key", "")
        secret = next(
            (c["hmac_secret"] for c in (PARTNER, ADMIN) if c["api_key"] == api_key),
            PARTNER["hmac_secret"],
        )
        body = request.body or b""
        if isinstance(body, str):
            body = body.encode("utf-8")
        path = urlsplit(request.url).path
        timestamp = str(int(time.time()))
        nonce = uuid.uuid4().hex
        if request.headers.get("X-Service-Timestamp") == LATER:
            request.headers["X-Service-Timestamp"] = timestamp
        if request.headers.get("X-Service-Nonce") == LATER:
            request.headers["X-Service-Nonce"] = nonce
        idem = request.headers.get("Idempotency-Key", "")
        if isinstance(idem, bytes):
            idem = idem.decode("latin-1")
        canonical = "\n".join(
            [
                request.method,
                path,
                str(request.headers.get("X-Service-Timestamp", "")),
                str(request.headers.get("X-Service-Nonce", "")),
                idem,
                hashlib.sha256(body).hexdigest(),
            ]
        )
        signature = hmac.new(
            secret.encode(), canonical.encode("utf-8", "surrogateescape"), hashlib.sha256
        ).hexdigest()
        if request.headers.get("X-Service-Signature") == LATER:
            request.headers["X-Service-Signature"] = signature
        return request


def _negative_auth_intent(case):
    """What a coverage case aimed at one authentication header asked for: `drop` it, or send
    the value schemathesis generated for it (`keep`)."""
    data = getattr(getattr(case.meta, "phase", None), "data", None)
    parameter = getattr(data, "parameter", None) or ""
    name = next((h for h in AUTH_HEADERS if h.lower() == parameter.lower()), None)
    if name is None or case.meta is None or case.meta.generation.mode.is_positive:
        return None, None
    if str(getattr(data, "scenario", "")) == "missing_parameter":
        return name, None
    present = any(k.lower() == name.lower() for k in (case.headers or {}))
    return (None, name) if present else (name, None)


@schemathesis.auth(refresh_interval=None)
class ServiceCredentials:
    """Partner credential for partner routes, admin credential for /admin and /metrics."""

    def get(self, case, context):
        template = case.operation.path
        admin = template.startswith("/admin") or template == "/metrics"
        return ADMIN if admin else PARTNER

    def set(self, case, credential, context):
        drop, keep = _negative_auth_intent(case)
        if case.headers is None:
            case.headers = {}
        for name in AUTH_HEADERS:
            for existing in [k for k in case.headers if k.lower() == name.lower()]:
                if name != keep:
                    del case.headers[existing]
            if name in (drop, keep):
                continue
            case.headers[name] = credential["api_key"] if name == "X-Service-Key" else LATER


@schemathesis.hook
def before_call(context, case, kwargs):
    if case.operation.path not in PUBLIC:
        kwargs["auth"] = Signer()
    # An admin route that revokes credentials must not revoke the fuzzer's own (a key it may
    # have read from a listing): every later request would be a 401 for that reason alone.
    body = case.body if isinstance(case.body, dict) else None
    if body and "revoke" in case.operation.path:
        for field, value in list(body.items()):
            if value in (PARTNER["api_key"], ADMIN["api_key"]):
                body[field] = "ck_not_a_fuzzer_key"


# Answers by status, written at exit to `CUSTODY_FUZZ_COUNTS` for the driving test to report.
STATUSES = collections.Counter()


@schemathesis.hook
def after_call(context, case, response):
    STATUSES[str(response.status_code)] += 1
    # A generated request may turn a kill switch or a maintenance control on: turn it off again
    # at once, or every later money operation would be refused (503) for that reason alone.
    if case.operation.path == "/admin/controls" and response.status_code == 200:
        control = response.json()
        if control.get("enabled"):
            _admin_post(
                "/admin/controls",
                {"control_key": control["control_key"], "enabled": False, "reason": "fuzz reset"},
            )


def _admin_post(path, body):
    url = os.environ["CUSTODY_FUZZ_BASE_URL"] + path
    request = requests.Request(
        "POST",
        url,
        data=json.dumps(body).encode(),
        headers={
            "Content-Type": "application/json",
            "X-Service-Key": ADMIN["api_key"],
            "X-Service-Timestamp": LATER,
            "X-Service-Nonce": LATER,
            "X-Service-Signature": LATER,
        },
    )
    with requests.Session() as session:
        answer = session.send(Signer()(request.prepare()), timeout=30)
    if answer.status_code != 200:
        raise AssertionError(f"resetting a control failed: {answer.status_code} {answer.text}")


@atexit.register
def _write_counts():
    path = os.environ.get("CUSTODY_FUZZ_COUNTS")
    if path:
        with open(path, "w") as out:
            json.dump(dict(STATUSES), out)


@schemathesis.check
def schema_valid_requests_are_well_formed(ctx, response, case):
    """A request generated from the document as valid is never refused for its shape."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        return None
    if response.status_code not in (400, 422):
        return None
    try:
        code = response.json().get("code")
    except ValueError:
        code = None
    if code == "VALIDATION_FAILED" and all(
        d.get("field") == "starting_after" and d.get("issue") == "names no row of this listing"
        for d in response.json().get("details", [])
    ):
        # A well-formed cursor naming no row of the listing: a fact, documented on the parameter.
        return None
    if code in SHAPE_CODES:
        raise AssertionError(
            f"schema-valid request refused as {response.status_code} {code}: {response.text[:300]}"
        )
    return None
