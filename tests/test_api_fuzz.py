"""Property-based: every operation of /openapi.json, fed generated input, never answers 5xx.

Runs in-process (WSGI) against the real node, with valid tokens so requests get past authentication and
reach validation and the queries. Hypothesis is derandomized so a failure reproduces.
"""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, given, settings

from tests.conftest import TEST_API_TOKENS

ALL_ACCESS = next(token for token, grant in TEST_API_TOKENS.items() if grant["workspaces"] == ["*"])


def test_no_operation_answers_a_server_error(app):
    schema = schemathesis.openapi.from_wsgi("/openapi.json", app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert operations, "the OpenAPI document lists no operation"
    failures: list[str] = []

    for operation in operations:
        exercise_operation(operation, failures)
    assert failures == []


def exercise_operation(operation, failures: list[str]) -> None:
    token = "test-admin-token" if "admin" in operation.path else ALL_ACCESS

    @given(case=operation.as_strategy())
    @settings(max_examples=25, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def exercise(case) -> None:
        response = case.call(headers={"Authorization": f"Bearer {token}"})
        if response.status_code >= 500:
            failures.append(f"{case.method} {case.formatted_path} -> {response.status_code}: "
                            f"{response.text[:200]}")
        elif response.status_code >= 400:
            body = response.json()
            assert body["code"] == response.status_code and body["message"], body

    exercise()
