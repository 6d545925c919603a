"""The report page: one self-contained file that says what happened in words and pictures."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from html.parser import HTMLParser

from hypothesis import given
from hypothesis import strategies as st

from harness.report import write_report
from harness.report.page import DATA_ELEMENT_ID, asset, embed_json, page
from harness.run.store import RunDir
from tests.report.conftest import check_run

RunFactory = Callable[..., RunDir]


class _Page(HTMLParser):
    """Collects ids, external references and the embedded data of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.references: list[str] = []
        self.data = ""
        self._in_data = False
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if values.get("id"):
            self.ids.add(values["id"] or "")
        for name in ("src", "href"):
            ref = values.get(name)
            if ref and not ref.startswith(("#", "data:")):
                self.references.append(f"{tag} {name}={ref}")
        if tag == "link" and values.get("rel") == "stylesheet":
            self.references.append("stylesheet link")
        self._in_data = values.get("id") == DATA_ELEMENT_ID

    def handle_endtag(self, tag: str) -> None:
        self._in_data = False

    def handle_data(self, data: str) -> None:
        if self._in_data:
            self.data += data
        else:
            self.text.append(data)


def _parse(text: str) -> _Page:
    parsed = _Page()
    parsed.feed(text)
    return parsed


def test_the_report_is_self_contained(make_run: RunFactory) -> None:
    text = write_report(make_run(stale=True)).read_text()
    parsed = _parse(text)
    assert parsed.references == []
    assert not re.search(r"https?://", text.replace("http://www.w3.org/2000/svg", ""))
    assert "@import" not in text
    assert re.findall(r"url\((?!data:)", text) == []
    assert "default-src 'none'" in text  # the browser itself refuses any request


def test_the_report_has_every_section_and_the_data(make_run: RunFactory) -> None:
    run = make_run(stale=True)
    path = write_report(run)
    assert path == run.report
    parsed = _parse(path.read_text())
    for anchor in ("summary", "anomalies", "timeline", "epochs", "performance", "inventory"):
        assert anchor in parsed.ids
    for canvas in ("timeline-canvas", "overview-canvas", "latency-canvas", "throughput-canvas"):
        assert canvas in parsed.ids
    data = json.loads(parsed.data)
    assert data["total_ops"] == len(data["ops"]["cols"]["s"]) > 0
    text = " ".join(parsed.text)
    assert "Invalid" in text
    assert "was accepted by fenced store" in text
    assert "store-skips-check" in text
    assert "fencecheck run --system reference" in text  # how to rerun it


def test_a_valid_report_says_so(make_run: RunFactory) -> None:
    text = write_report(make_run(stale=False)).read_text()
    assert 'data-verdict="valid"' in text
    assert 'id="no-anomalies"' in text


def test_the_anomaly_operations_link_to_the_timeline(make_run: RunFactory) -> None:
    text = write_report(make_run(stale=True)).read_text()
    rows = re.findall(r'<tr class="op-link( stale)?" data-row="(\d+)"', text)
    assert rows, "each evidence operation links to its timeline row"
    stale_rows = [int(row) for stale, row in rows if stale]
    data = json.loads(_parse(text).data)
    counted = [a for a in data["anomalies"] if not a["expected"]]
    assert stale_rows[0] == counted[0]["stale"][0]


def test_expected_anomalies_are_apart_from_those_that_count(make_run: RunFactory) -> None:
    text = write_report(make_run(stale=True)).read_text()
    head, _, expected = text.partition("expected anomaly on sinks that cannot check epochs")
    assert expected, "the expected stale write on the journal is listed"
    assert 'class="anomaly expected"' in expected.split("</details>")[0]
    assert 'class="anomaly expected"' not in head


def test_an_unchecked_run_gets_a_report(make_run: RunFactory) -> None:
    text = write_report(make_run(stale=True, checked=False)).read_text()
    assert 'data-verdict="unchecked"' in text
    assert "fencecheck analyze" in text


def test_failed_faults_are_counted(make_run: RunFactory) -> None:
    text = write_report(make_run(stale=False, failed_fault=True)).read_text()
    assert "no such process" in text
    assert "(1 failed)" in text


def test_assets_cannot_close_their_elements() -> None:
    for name in ("base.css", "report.css", "index.css", "report.js", "index.js"):
        text = asset(name).lower()
        assert "</script" not in text and "</style" not in text, name


@given(st.text())
def test_embedded_json_round_trips_and_cannot_escape(text: str) -> None:
    data = {"error": text, "nested": [text, {"k": text}]}
    embedded = embed_json(data)
    assert json.loads(embedded) == data
    assert "<" not in embedded and ">" not in embedded


def test_hostile_strings_in_the_history_stay_data(make_run: RunFactory) -> None:
    hostile = "</script><script>alert(1)</script><!--"
    run = make_run(stale=False)
    stored = run.read_results()
    assert stored is not None
    results = dict(stored.data)
    results["unknown_reasons"] = [hostile]
    run.write_json(run.results, results)
    text = write_report(run).read_text()
    assert hostile not in text
    assert text.count("<script>") == 1  # only the report's own script


def test_page_shell_inlines_the_named_assets() -> None:
    text = page("t", "<p>x</p>", styles=("base.css",), scripts=("index.js",), data={"a": 1})
    assert asset("base.css") in text
    assert asset("index.js") in text
    assert f'<script type="application/json" id="{DATA_ELEMENT_ID}">{{"a":1}}</script>' in text


def test_epochs_beyond_64_bits_are_reported_exactly(make_run: RunFactory) -> None:
    run = make_run(stale=True, checked=False)
    huge = 2**64
    text = run.history.read_text()
    run.history.write_text(
        re.sub(r'"epoch":(\d+)', lambda found: f'"epoch":{int(found.group(1)) + huge}', text)
    )
    assert check_run(run).valid is False
    page_text = write_report(run).read_text()
    assert str(huge + 1) in page_text


def test_every_anomalys_meaning_comes_from_the_registry_alone() -> None:
    """Each card says its anomaly's meaning as the registry has it, and render.py holds no copy
    of any meaning (a copy there once drifted and lacked wrongful-refusal)."""
    import html
    from pathlib import Path

    import harness.report.render as render
    from checkers.registry import REGISTRY
    from harness.report.data import Anomaly

    source = Path(render.__file__).read_text()
    for kind in REGISTRY.values():
        card = render._anomaly_card(0, Anomaly(kind.name, False, "why", (), (), (), (), None))
        assert f'<p class="meaning">{html.escape(kind.meaning, quote=True)}</p>' in card
        assert kind.meaning[:40] not in source, f"render.py copies {kind.name}'s meaning"
