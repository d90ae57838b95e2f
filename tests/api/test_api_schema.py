"""Schemathesis against the OpenAPI schema, in process (ASGI): no 5xx, every answer conforms to the schema
(status codes, content types, bodies), schema-violating input is refused, writes without a key are 401.

Not checked: that every schema-valid request is accepted (schemathesis' ``positive_data_acceptance``). The schema
states each field's type and range; ConvProblem's rules across fields (an output that is not empty, groups
dividing C, tensors within 32-bit indexing, a kernel family that can run the problem) cannot be written in
JSON Schema, so a schema-valid problem may rightly be 422 naming the field.

Bounded and deterministic: at most ``MAX_EXAMPLES`` examples per operation, derandomized. The server (model
backend, a fresh SQLite file) waits at most 0.2 s for ``?wait=``. The schema is loaded when the module is
collected (schemathesis' lazy fixture loader does not run under pytest 9); the app opens its database on
first use.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from api_samples import settings_for
from hypothesis import HealthCheck, Phase, settings
from schemathesis.config import SchemathesisConfig

from convtune.api.main import create_app
from convtune.storage import make_engine, session_scope
from convtune.storage import queries as repo

MAX_EXAMPLES = 50
_DIR = Path(tempfile.mkdtemp(prefix="convtune-schema-"))
atexit.register(shutil.rmtree, _DIR, True)  # also when the test is deselected
APP = create_app(settings_for(f"sqlite:///{_DIR / 'convtune.db'}", max_wait_s=0.2))
#: 413 refuses a body over ``max_request_bytes`` before it is parsed: as valid a refusal of schema-violating
#: input (e.g. more batch problems than ``maxItems``) as 422. See the module docstring for positive data.
CONFIG = SchemathesisConfig.from_str("""
[checks.negative_data_rejection]
expected-statuses = [400, 401, 403, 404, 405, 406, 409, 413, 415, 422, 428, 429]
[checks.positive_data_acceptance]
enabled = false
""")
schema = schemathesis.openapi.from_asgi("/openapi.json", APP, config=CONFIG)


@pytest.fixture(scope="module")
def key_headers() -> Iterator[dict[str, str]]:
    engine = make_engine(APP.state.settings.database_url)
    try:
        with session_scope(engine) as session:
            _, secret = repo.create_api_key(session, "schemathesis")
        yield {"X-API-Key": secret}
    finally:
        engine.dispose()


@schema.parametrize()
@settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, database=None,
          phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
def test_api_conforms_to_its_schema(case: schemathesis.Case, key_headers: dict[str, str]) -> None:
    case.call_and_validate(headers=key_headers)
