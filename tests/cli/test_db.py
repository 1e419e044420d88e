"""``skillyard db url``: the URL in use, its password masked unless --show-password."""

from __future__ import annotations

from support.cli import invoke


def test_db_url_masks_the_password(db_env):
    masked = invoke("db", "url")
    assert masked.exit_code == 0, masked.output
    shown = invoke("db", "url", "--show-password")
    assert shown.stdout.strip().split("?")[0].split("@")[-1] == masked.stdout.strip().split("?")[0].split("@")[-1]
    from sqlalchemy.engine import make_url

    password = make_url(db_env).password
    if password:  # the URL has a password: only --show-password prints it
        assert password not in masked.stdout and "***" in masked.stdout
        assert password in shown.stdout


def test_db_url_of_the_embedded_server_never_prints_its_password(home):
    import json

    import psutil

    try:
        masked = invoke("db", "url")
        assert masked.exit_code == 0, masked.output
        passwords = json.loads((home / "database.secret").read_text())
        assert passwords["platform"] not in masked.stdout and "skillyard:***@" in masked.stdout
        assert passwords["platform"] in invoke("db", "url", "--show-password").stdout
    finally:
        pid_file = home / "pg" / "postmaster.pid"
        if pid_file.is_file():
            psutil.Process(int(pid_file.read_text().split()[0])).terminate()
