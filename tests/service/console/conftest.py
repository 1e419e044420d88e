"""The browser tests: ``skillyard serve`` as a real process on 127.0.0.1, Playwright driving Debian's ``chromium``
(``.ci/run`` installs it with apt; nothing is downloaded), a screenshot of every page under the test's temporary
folder, listed in the report of a failing test."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.service import free_socket, write_echo

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture
def page() -> Iterator[Any]:
    """A page of Debian's chromium (headless). Playwright's sync API is started and stopped per test, not kept for
    the session as pytest-playwright's own fixture does: its event loop would stay current in this worker and break
    the asyncio tests that run after it."""
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium; .ci/run does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield browser.new_page()
        finally:
            browser.close()


def cli(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "skillyard", *args], capture_output=True, text=True, timeout=120, env=os.environ.copy()
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@dataclass
class Console:
    base: str
    token: str
    org: str
    shots: list[Path] = field(default_factory=list)
    folder: Path = Path()

    def shot(self, page: Any, name: str) -> None:
        path = self.folder / f"{len(self.shots):02d}-{name}.png"
        page.screenshot(path=str(path), full_page=True)
        self.shots.append(path)

    def sign_in(self, page: Any) -> None:
        page.goto(f"{self.base}/console/login")
        page.get_by_label("Access token").fill(self.token)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url("**/console/skills")


@pytest.fixture
def console(db_env: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Console]:
    skills = tmp_path / "skills"
    write_echo(skills)
    org = "org-" + uuid.uuid4().hex[:8]
    token = cli("token", "add", "--name", "web-" + org, "--role", "r-" + org, "--org", org, "--admin",
                "--identity", '{"team_role": "owner", "actor_name": "Ada"}')  # fmt: skip
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()
    log = (tmp_path / "serve.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "skillyard", "serve", "--port", str(port), "--skills-dir", str(skills),
         "--agent", str(EXAMPLES / "agents" / "notes"), "--model", f"script:{EXAMPLES}/agents/notes/demo.yaml"],
        stdout=log, stderr=subprocess.STDOUT, env=os.environ.copy(),
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(f"{base}/openapi.json", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None:
                pytest.fail(f"serve exited: {(tmp_path / 'serve.log').read_text()}")
            time.sleep(0.1)
        folder = tmp_path / "screenshots"
        folder.mkdir()
        found = Console(base, token, org, folder=folder)
        request.node.console_shots = found.shots
        yield found
    finally:
        process.terminate()
        process.wait(30)
        log.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    shots = getattr(item, "console_shots", None)
    if report.failed and shots:
        report.sections.append(("screenshots", "\n".join(str(p) for p in shots)))
