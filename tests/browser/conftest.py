import os
from pathlib import Path

import pytest
from django.conf import settings

from tests.audit.conftest import environment, make_session  # noqa: F401 (audit sessions)
from tests.support.binaries import require_binary

# Playwright's sync API runs an event loop in the test thread; the ORM calls the test makes
# between browser steps are still plain synchronous code.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

PACK = Path(settings.BASE_DIR) / "scenarios" / "payment-pool-saturation"
# Test artefacts (gitignored): every page the browser tests look at, in both languages.
SCREENSHOTS = Path(settings.BASE_DIR) / "artifacts" / "screenshots"
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]


@pytest.fixture
def browser():
    chromium = require_binary("/usr/bin/chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=LAUNCH_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def pack_environment():
    pytest.importorskip("diagnosis.llm.offline")
    from diagnosis.evidence.services import environments_sync_from_packs

    [synced] = environments_sync_from_packs(dirs=[PACK])
    return synced


@pytest.fixture
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS
