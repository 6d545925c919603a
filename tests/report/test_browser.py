"""The reports in a real browser: headless Chromium driven through chromedriver (Selenium).

Each page must load with no console error, show the verdict and anomaly text, draw the timeline
and the epoch plot, and answer clicks and hovers. Full-page screenshots are saved under the test's
temporary folder and their paths printed (``pytest -s`` shows them). Without Chromium these tests
are skipped with the reason, except under ``CI=true``, where that is a failure.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from harness.record import HistoryWriter
from harness.report import write_report
from harness.report.index import write_index
from harness.run.store import RunDir, new_run_dir
from tests.report.conftest import check_run, write_spec
from tests.support.browser import chromium

pytestmark = pytest.mark.browser

RunFactory = Callable[..., RunDir]
_WAIT_S = 30  # a ceiling for page readiness on a loaded machine, not a performance claim


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for the module, with a fresh profile and the console log on."""
    yield from chromium()


def _open(driver: Any, path: Path) -> None:
    """Load ``path`` and wait until its script has run to the end."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get_log("browser")  # drop what earlier pages logged
    driver.get(path.resolve().as_uri())
    WebDriverWait(driver, _WAIT_S).until(
        lambda d: d.execute_script("return document.body.dataset.ready") == "1"
    )
    # Jumps, not smooth scrolls, so that positions read after a click are final.
    driver.execute_script("document.documentElement.style.scrollBehavior = 'auto'")


def _console_errors(driver: Any) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def _screenshot(driver: Any, path: Path, element_id: str | None = None) -> Path:
    """The whole page (or one element of it), beyond the window, as PNG."""
    driver.execute_script("window.scrollTo(0, 0)")  # the sticky header belongs at the top
    if element_id is None:
        size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"]}
    else:
        clip = driver.execute_script(
            "const r = document.getElementById(arguments[0]).getBoundingClientRect();"
            "return {x: r.left, y: r.top, width: r.width, height: r.height};",
            element_id,
        )
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot",
        {"format": "png", "captureBeyondViewport": True, "clip": {**clip, "scale": 1}},
    )
    path.write_bytes(base64.b64decode(shot["data"]))
    print(f"screenshot: {path}")
    return path


def _stats(driver: Any) -> dict[str, int]:
    stats: dict[str, int] = driver.execute_script("return window.fencecheck.stats")
    return stats


_INK = """
const canvas = document.getElementById(arguments[0]);
const ctx = canvas.getContext('2d');
const pixels = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
let inked = 0;
for (let k = 3; k < pixels.length; k += 4) if (pixels[k] > 0) inked++;
return inked;
"""


def _click(driver: Any, element: Any) -> None:
    """Click ``element`` as a person would: scrolled to the middle, clear of the sticky header."""
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    element.click()


def _mouse(driver: Any, kind: str, x: float, y: float) -> None:
    driver.execute_cdp_cmd(
        "Input.dispatchMouseEvent",
        {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1},
    )


def test_a_valid_report_renders_cleanly(browser: Any, make_run: RunFactory, tmp_path: Path) -> None:
    report = write_report(make_run(stale=False, rounds=12))
    _open(browser, report)
    assert _console_errors(browser) == []
    verdict = browser.find_element("id", "verdict")
    assert verdict.get_attribute("data-verdict") == "valid"
    assert "No accepted write carried an epoch lower" in verdict.text
    assert browser.find_element("id", "no-anomalies").is_displayed()
    stats = _stats(browser)
    assert stats["timelineDrawn"] > 0
    assert stats["epochPanels"] == 2
    assert stats["epochPoints"] > 0 and stats["latencyPoints"] > 0
    assert stats["throughputBars"] > 0 and stats["faultBands"] > 0
    for canvas in ("timeline-canvas", "overview-canvas", "latency-canvas", "throughput-canvas"):
        assert browser.execute_script(_INK, canvas) > 1000, canvas
    titles = [e.text for e in browser.find_elements("css selector", ".epoch-plot .plot-title")]
    assert any("sink journal" in t for t in titles) and any("sink store" in t for t in titles)
    # The fence's refusals of stale writes are the fence working: drawn in their own colour.
    assert "refused by the fence" in browser.find_element("id", "legend").text
    _screenshot(browser, tmp_path / "valid-report.png")


def test_an_invalid_report_shows_the_stale_write(
    browser: Any, make_run: RunFactory, tmp_path: Path
) -> None:
    report = write_report(make_run(stale=True, rounds=12))
    _open(browser, report)
    assert _console_errors(browser) == []
    assert browser.find_element("id", "verdict").get_attribute("data-verdict") == "invalid"
    card = browser.find_element("css selector", "article.anomaly:not(.expected)")
    assert "stale-write" in card.text
    assert "was accepted by fenced store" in card.text
    assert "w2 was paused from" in card.text
    assert _stats(browser)["staleMarked"] == 1

    # Clicking the stale operation selects it and brings it into the timeline's view.
    stale = card.find_element("css selector", "tr.op-link.stale")
    row = int(stale.get_attribute("data-row") or "-1")
    _click(browser, stale)
    assert browser.execute_script("return window.fencecheck.selected()") == row
    where = browser.execute_script("return window.fencecheck.locate(arguments[0])", row)
    assert where["visible"]
    panel = browser.find_element("id", "selected")
    write_id = browser.execute_script(
        "return window.fencecheck.data.ops.cols.id[arguments[0]]", row
    )
    assert write_id in panel.text and "stale-write" in panel.text

    # Hovering the bar tells what it is.
    from selenium.webdriver.support.ui import WebDriverWait

    _mouse(browser, "mouseMoved", where["x"], where["y"])
    tooltip = browser.find_element("id", "tooltip")
    WebDriverWait(browser, _WAIT_S).until(lambda d: tooltip.is_displayed())
    assert write_id in tooltip.text

    # "show on timeline" frames the story: the pause before the write and the write itself.
    _click(browser, card.find_element("css selector", "button.show-anomaly"))
    view = browser.execute_script("return window.fencecheck.view")
    pause = browser.execute_script("return window.fencecheck.data.faults[0]")
    assert view["t0"] <= pause["s"] and view["t1"] >= pause["e"]
    assert "active" in (card.get_attribute("class") or "")
    assert _console_errors(browser) == []
    _screenshot(browser, tmp_path / "invalid-timeline.png", "timeline")
    _screenshot(browser, tmp_path / "invalid-epochs.png", "epochs")
    browser.execute_script("window.fencecheck.resetView()")
    _screenshot(browser, tmp_path / "invalid-report.png")


def test_a_spanning_write_shows_every_key_it_wrote(
    browser: Any, store_root: Path, tmp_path: Path
) -> None:
    run = new_run_dir("reference-pause", store_root, datetime(2024, 5, 1, 12, 0, tzinfo=UTC))
    write_spec(run, bugs=[], seed=11, workers=1, when=datetime(2024, 5, 1, 12, 0, tzinfo=UTC))
    also = [{"key": "k2", "id": "w1-2"}, {"key": "k3", "id": "w1-3"}]
    write = {"lock": "L", "sink": "store", "key": "k1", "id": "w1-1", "epoch": 1, "also": also}
    with HistoryWriter(run.history) as history:
        history.append(
            time=1_000, process=0, node="w1", type="invoke", f="acquire", value={"lock": "L"}
        )
        history.append(
            time=2_000,
            process=0,
            node="w1",
            type="ok",
            f="acquire",
            value={"lock": "L", "epoch": 1},
        )
        history.append(time=3_000, process=0, node="w1", type="invoke", f="write", value=write)
        history.append(time=9_000, process=0, node="w1", type="ok", f="write", value=write)
    check_run(run)
    _open(browser, write_report(run))
    browser.execute_script("window.fencecheck.select(1)")
    panel = browser.find_element("id", "selected").text
    assert "k1" in panel and "k2 (w1-2)" in panel and "k3 (w1-3)" in panel
    assert _console_errors(browser) == []


def test_many_stale_writes_keep_their_labels_legible(
    browser: Any, store_root: Path, tmp_path: Path
) -> None:
    """40 stale writes on one plot: labels take free spots and never overlap; those with no
    room are counted in one "+N more" note instead of piling up."""
    from tests.support.shapes import falling_writes

    run = new_run_dir("reference-pause", store_root, datetime(2024, 5, 1, 12, 0, tzinfo=UTC))
    write_spec(run, bugs=[], seed=11, workers=3, when=datetime(2024, 5, 1, 12, 0, tzinfo=UTC))
    with HistoryWriter(run.history) as history:
        for event in falling_writes(40):
            event.pop("index")
            history.append(**event)
    check_run(run)
    _open(browser, write_report(run))
    assert _console_errors(browser) == []
    stats = _stats(browser)
    assert stats["staleMarked"] >= 39
    assert 0 < stats.get("staleLabelsHidden", 0) < stats["staleMarked"]
    _screenshot(browser, tmp_path / "many-stale-epochs.png", "epochs")


def test_a_large_history_is_aggregated_and_stays_interactive(
    browser: Any, make_run: RunFactory, tmp_path: Path
) -> None:
    report = write_report(make_run(stale=True, rounds=400, workers=10))
    _open(browser, report)
    assert _console_errors(browser) == []
    total = browser.execute_script("return window.fencecheck.data.total_ops")
    assert total > 15_000
    whole = _stats(browser)["timelineDrawn"]
    # Zoomed out, many operations share a pixel column and are drawn once.
    assert 0 < whole < total

    # Drag the timeline to pan: the shared view moves.
    canvas = browser.find_element("id", "timeline-canvas")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", canvas)
    browser.execute_script("window.fencecheck.setView(20e6, 22e6)")
    before = browser.execute_script("return window.fencecheck.view.t0")
    box = browser.execute_script("return arguments[0].getBoundingClientRect().toJSON()", canvas)
    y = box["top"] + box["height"] / 2
    x = box["left"] + box["width"] / 2
    _mouse(browser, "mousePressed", x, y)
    _mouse(browser, "mouseMoved", x - 200, y)
    _mouse(browser, "mouseReleased", x - 200, y)
    after = browser.execute_script("return window.fencecheck.view.t0")
    assert after > before
    browser.execute_script("window.fencecheck.drawAll()")
    assert _stats(browser)["timelineDrawn"] > 0
    assert _console_errors(browser) == []
    _screenshot(browser, tmp_path / "large-report.png")


def test_the_run_browser_filters_by_verdict(
    browser: Any, store_root: Path, make_run: RunFactory, tmp_path: Path
) -> None:
    for stale in (False, True, False):
        write_report(make_run(stale=stale))
    _open(browser, write_index(store_root))
    assert _console_errors(browser) == []
    rows = browser.find_elements("css selector", "#runs tbody tr")
    assert len(rows) == 3
    _click(browser, browser.find_element("css selector", 'button.filter[data-verdict="invalid"]'))
    shown = [r.get_attribute("data-verdict") for r in rows if r.is_displayed()]
    assert shown == ["invalid"]
    link = browser.find_element("css selector", 'tr[data-verdict="invalid"] td.links a')
    assert link.text == "report"
    _click(browser, link)
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, _WAIT_S).until(
        lambda d: (
            d.execute_script("return document.body.dataset.ready") == "1"
            and d.find_elements("id", "verdict")
        )
    )
    assert browser.find_element("id", "verdict").get_attribute("data-verdict") == "invalid"
    assert _console_errors(browser) == []
    _screenshot(browser, tmp_path / "run-browser.png")
