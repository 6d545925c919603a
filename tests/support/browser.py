"""A headless Chromium driven through chromedriver (Selenium), for the tests that open pages.

Without Chromium the tests that need it are skipped with the reason, except under ``CI=true``,
where that is a failure.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

__all__ = ["chromium"]

_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1400,1000",
)


def _missing() -> str | None:
    for name in ("chromium", "chromedriver"):
        if shutil.which(name) is None:
            return f"{name} is not installed (apt-get install -y chromium chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    return None


def chromium() -> Iterator[Any]:
    """One headless Chromium with a fresh profile and the console log on (a fixture's body:
    ``yield from chromium()``); skips the test, or fails it under CI, without one."""
    problem = _missing()
    if problem is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"browser tests cannot run under CI: {problem}")
        pytest.skip(problem)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for flag in _FLAGS:
        options.add_argument(flag)
    with tempfile.TemporaryDirectory(prefix="fencecheck-chromium-") as profile:
        options.add_argument(f"--user-data-dir={profile}")
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(
            service=Service(executable_path=shutil.which("chromedriver")), options=options
        )
        try:
            yield driver
        finally:
            driver.quit()
