"""JUnit XML for CI: one test case per run, so a CI page lists runs as tests.

An invalid run is a ``<failure>`` whose text is the anomaly explanations; a run whose verdict is
``unknown`` is ``<skipped>`` with the checker's reasons (the harness could not decide: that is not a
pass, and CI shows it apart); a run that was never checked or whose files cannot be read is an
``<error>``. Each case carries the run directory and report path as properties, so a red test
leads straight to its report.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from harness.report.page import write_file
from harness.run.store import RunDir
from harness.run.summary import RunSummary, summarize

__all__ = ["SUITE_NAME", "error_case", "junit_case", "write_cases", "write_junit"]

SUITE_NAME: Final = "fencecheck"
# XML 1.0 cannot carry most control characters, even escaped; a history's error text might.
_NOT_XML: Final = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _text(value: object) -> str:
    return _NOT_XML.sub("\ufffd", str(value))


def _case_name(summary: RunSummary) -> str:
    """The same name for the same test every night: the seed and the run's time stamp are
    properties of the case, not part of its name, so CI can follow a test from run to run."""
    parts = [summary.test]
    if summary.bugs:
        parts.append("bugs=" + ",".join(summary.bugs))
    if summary.nemeses:
        parts.append("nemeses=" + ",".join(summary.nemeses))
    return " ".join(parts)


def junit_case(
    summary: RunSummary,
    outcome: str | None = None,
    message: str | None = None,
    name: str | None = None,
) -> ET.Element:
    """The ``<testcase>`` for one run.

    ``outcome`` overrides what the verdict alone would give (``"pass"``, ``"failure"``,
    ``"skipped"``, ``"error"``), for callers that judge runs against an expected verdict;
    ``message`` then says why (it replaces the default message of a failure or an error).
    ``name`` replaces the case name built from the run (a matrix names its rows).
    """
    case = ET.Element(
        "testcase",
        {
            "classname": _text(f"{SUITE_NAME}.{summary.system}"),
            "name": _text(name or _case_name(summary)),
            "time": f"{summary.duration_s or 0.0:.3f}",
        },
    )
    props = ET.SubElement(case, "properties")
    for name, value in (
        ("verdict", summary.verdict),
        ("seed", "" if summary.seed is None else str(summary.seed)),
        ("stamp", summary.stamp),
        ("run_dir", str(summary.run.path)),
        ("report", str(summary.run.report)),
    ):
        ET.SubElement(props, "property", {"name": name, "value": _text(value)})
    kind = outcome or _default_outcome(summary)
    if kind == "failure":
        types = ", ".join(summary.anomaly_types) or summary.verdict
        element = ET.SubElement(
            case, "failure", {"message": _text(message or f"{summary.verdict}: {types}")}
        )
        element.set("type", summary.verdict)
        lines = list(summary.explanations) or [f"verdict {summary.verdict}"]
        lines.append(f"report: {summary.run.report}")
        element.text = _text("\n".join(lines))
    elif kind == "skipped":
        reasons = "; ".join(summary.unknown_reasons) or "the checker could not decide"
        ET.SubElement(case, "skipped", {"message": _text(f"unknown: {reasons}")})
    elif kind == "error":
        problem = message or summary.problem or _unknown_or_unchecked(summary)
        element = ET.SubElement(case, "error", {"message": _text(problem), "type": summary.verdict})
        element.text = _text(f"{problem}\nrun: {summary.run.path}")
    return case


def _unknown_or_unchecked(summary: RunSummary) -> str:
    if summary.verdict == "unknown":
        return "unknown: " + ("; ".join(summary.unknown_reasons) or "the checker could not decide")
    return "the run was never checked (no results.json)"


def error_case(name: str, message: str, classname: str = SUITE_NAME) -> ET.Element:
    """A ``<testcase>`` for a run that crashed before it had a run directory to summarise."""
    case = ET.Element("testcase", {"classname": _text(classname), "name": _text(name), "time": "0"})
    element = ET.SubElement(case, "error", {"message": _text(message), "type": "error"})
    element.text = _text(message)
    return case


def _default_outcome(summary: RunSummary) -> str:
    if summary.verdict == "valid":
        return "pass"
    if summary.verdict == "invalid":
        return "failure"
    if summary.verdict == "unknown" and summary.problem is None:
        return "skipped"
    return "error"


def write_cases(cases: Sequence[ET.Element], path: str | os.PathLike[str]) -> Path:
    """Write ``<testcase>`` elements as one JUnit test suite; returns the file's path.

    Cases of the same name (runs of one test) are told apart by their order, ``#2``, ``#3``:
    still the same from night to night, where a seed or a time stamp would not be.
    """
    seen: dict[str, int] = {}
    for case in cases:
        name = case.get("name", "")
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            case.set("name", f"{name} #{seen[name]}")
    times = [float(case.get("time") or 0) for case in cases]
    suite = ET.Element(
        "testsuite",
        {
            "name": SUITE_NAME,
            "tests": str(len(cases)),
            "failures": str(sum(1 for c in cases if c.find("failure") is not None)),
            "errors": str(sum(1 for c in cases if c.find("error") is not None)),
            "skipped": str(sum(1 for c in cases if c.find("skipped") is not None)),
            "time": f"{sum(times):.3f}",
            "timestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S"),
        },
    )
    suite.extend(cases)
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    xml = ET.tostring(root, encoding="unicode", xml_declaration=True)
    return write_file(target, xml + "\n")


def write_junit(
    runs: Sequence[RunDir | RunSummary],
    path: str | os.PathLike[str],
    outcomes: Sequence[str | None] | None = None,
) -> Path:
    """Write a JUnit XML file with one test case per run; returns its path.

    ``outcomes``, when given, has one entry per run overriding its default outcome (see
    :func:`junit_case`); ``None`` entries keep the default.
    """
    if outcomes is not None and len(outcomes) != len(runs):
        raise ValueError(f"{len(outcomes)} outcomes given for {len(runs)} runs")
    cases = [
        junit_case(
            run if isinstance(run, RunSummary) else summarize(run),
            outcomes[n] if outcomes is not None else None,
        )
        for n, run in enumerate(runs)
    ]
    return write_cases(cases, path)
