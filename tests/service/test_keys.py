"""API keys: the secret is shown once and never stored (only its SHA-256 and an 8-character prefix), found
by hash while active, revoked at once; ``convtune keys create | list | revoke``."""

from __future__ import annotations

import hashlib
import re

import pytest
from sqlalchemy import URL, Engine, text

from convtune.cli import main
from convtune.errors import InvalidInput, NotFound
from convtune.storage import queries as repo
from convtune.storage import session_scope


def _url(db_url: str | URL) -> str:
    return db_url if isinstance(db_url, str) else db_url.render_as_string(hide_password=False)


def test_create_stores_only_the_hash_and_a_prefix(engine: Engine) -> None:
    with session_scope(engine) as session:
        key, secret = repo.create_api_key(session, "ci", max_queued_jobs=7)
        key_id = key.id
    assert re.fullmatch(r"ct_[A-Za-z0-9_-]{32}", secret)
    with engine.connect() as connection:
        row = connection.execute(text("SELECT * FROM api_keys WHERE id = :id"), {"id": key_id}).mappings().one()
    assert row["key_hash"] == hashlib.sha256(secret.encode()).hexdigest()
    assert row["prefix"] == secret[:8] and row["max_queued_jobs"] == 7 and row["revoked_at"] is None
    assert not any(secret in str(value) for value in row.values())  # the secret itself is nowhere
    with session_scope(engine) as session:
        _, other = repo.create_api_key(session, "ci-2")
    assert other != secret


def test_find_by_secret_while_active_then_revoke(engine: Engine) -> None:
    with session_scope(engine) as session:
        key, secret = repo.create_api_key(session, "alice")
        key_id = key.id
    with session_scope(engine) as session:
        found = repo.find_api_key(session, secret)
        assert found is not None and found.id == key_id
        for wrong in (secret[:-1], secret + "x", "", None, "ct_" + "A" * 32):
            assert repo.find_api_key(session, wrong) is None
        assert repo.revoke_api_key(session, "alice").revoked_at is not None
        assert repo.find_api_key(session, secret) is None  # at once
        revoked_at = repo.revoke_api_key(session, key_id).revoked_at  # again, by id: unchanged
        assert revoked_at == repo.get_api_key(session, key_id).revoked_at
        assert [k.name for k in repo.list_api_keys(session)] == ["alice"]
        assert repo.list_api_keys(session, include_revoked=False) == []
        with pytest.raises(NotFound):
            repo.revoke_api_key(session, "bob")


@pytest.mark.parametrize(("name", "limit", "field"), [
    pytest.param("", 10, "name", id="empty-name"),
    pytest.param("x" * 65, 10, "name", id="long-name"),
    pytest.param("ok", -1, "max_queued_jobs", id="negative-limit"),
    pytest.param("taken", 10, "name", id="taken"),
])
def test_create_rejects_bad_input(engine: Engine, name: str, limit: int, field: str) -> None:
    with session_scope(engine) as session:
        repo.create_api_key(session, "taken")
    with pytest.raises(InvalidInput) as info, session_scope(engine) as session:
        repo.create_api_key(session, name, max_queued_jobs=limit)
    assert info.value.field == field


def test_keys_command_line(db_url: str | URL, capsys: pytest.CaptureFixture[str], engine: Engine) -> None:
    url = _url(db_url)
    assert main(["keys", "create", "ops", "--max-queued", "3", "--db", url]) == 0
    out, err = capsys.readouterr()
    secret = out.strip()
    assert re.fullmatch(r"ct_[A-Za-z0-9_-]{32}", secret) and "shown only now" in err and secret not in err
    with session_scope(engine) as session:
        key = repo.find_api_key(session, secret)
        assert key is not None and key.max_queued_jobs == 3

    assert main(["keys", "list", "--db", url]) == 0
    out, _ = capsys.readouterr()
    assert "ops" in out and secret[:8] in out and secret not in out

    assert main(["keys", "create", "ops", "--db", url]) == 2  # the name is taken
    assert "name:" in capsys.readouterr().err
    assert main(["keys", "revoke", "ops", "--db", url]) == 0
    assert main(["keys", "revoke", "nobody", "--db", url]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no API key named 'nobody'" in err
    with session_scope(engine) as session:
        assert repo.find_api_key(session, secret) is None
