"""Browser fixtures: Chromium, the demo pack, and where screenshots go.

Every page a browser test looks at is saved under ``ROOTPROOF_SCREENSHOTS`` (default
``artifacts/screenshots/``, gitignored; CI keeps it as an artifact). With
``ROOTPROOF_DOCS_SCREENSHOTS=1`` the pages the README shows are also written to
``docs/screenshots/`` (1440 px, the first screen of each), so one run refreshes them:

    ROOTPROOF_DOCS_SCREENSHOTS=1 .venv/bin/pytest -m browser tests/browser/test_audit_layout.py
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest
from django.conf import settings

from diagnosis.evidence.services import environments_sync_from_packs
from diagnosis.models import Environment
from tests.audit.conftest import environment, make_session  # noqa: F401 (audit sessions)
from tests.support.binaries import require_binary

# Playwright's sync API runs an event loop in the test thread; the ORM calls the test makes
# between browser steps are still plain synchronous code.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

PACK = Path(settings.BASE_DIR) / "scenarios" / "payment-pool-saturation"
SCREENSHOTS = Path(
    os.environ.get("ROOTPROOF_SCREENSHOTS") or Path(settings.BASE_DIR) / "artifacts" / "screenshots"
)
DOCS_SCREENSHOTS = Path(settings.BASE_DIR) / "docs" / "screenshots"
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
DOCS_WIDTH = 1440


class Shoot(Protocol):
    def __call__(self, page: Any, name: str, *, locator: Any = None, docs: str = "") -> None: ...


@pytest.fixture
def browser() -> Iterator[Any]:
    chromium = require_binary("/usr/bin/chromium")
    from playwright.sync_api import sync_playwright  # optional: only the browser tests need it

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=LAUNCH_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def pack_environment() -> Environment:
    [synced] = environments_sync_from_packs(dirs=[PACK])
    return synced


@pytest.fixture
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS


def _docs_refresh() -> bool:
    return os.environ.get("ROOTPROOF_DOCS_SCREENSHOTS") == "1"


@pytest.fixture
def shoot(screenshots: Path) -> Shoot:
    """Save the page (full length) as an artifact; with ``docs`` (a README name such as
    ``audit-reading-claims-en``) and the docs refresh on, also the first screen of the
    page, or of ``locator`` scrolled to the top, at 1440 px under docs/screenshots/."""

    def save(page: Any, name: str, *, locator: Any = None, docs: str = "") -> None:
        page.screenshot(path=str(screenshots / f"{name}.png"), full_page=True)
        if not (docs and _docs_refresh() and page.viewport_size["width"] == DOCS_WIDTH):
            return
        if locator is not None:
            locator.evaluate("(el) => el.scrollIntoView({block: 'start'})")
        DOCS_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(DOCS_SCREENSHOTS / f"{docs}.png"))
        page.evaluate("window.scrollTo(0, 0)")

    return save
