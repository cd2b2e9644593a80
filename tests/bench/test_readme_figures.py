"""bench/README.md's "Latest figures": written from a results document between its two marker lines."""

from __future__ import annotations

from pathlib import Path

from bench import report

DOC = {
    "meta": {"started": "2026-11-24T04:54:20Z", "seconds": 742.9, "cpus": 2, "load_average": [1.5], "passed": False},
    "precision": {
        "title": "1. Precision",
        "passed": False,
        "checks": [
            {"name": "p99", "measured": 5.0, "unit": "ms", "budget": "≤ 200 ms", "passed": True},
            {"name": "max", "measured": 2000.0, "unit": "ms", "budget": "≤ 1000 ms", "passed": False},
            {"name": "p50", "measured": 1.0, "unit": "ms", "budget": "", "passed": None},
        ],
        "notes": [],
    },
}


def test_the_readme_block_is_replaced_by_each_targets_budgets_met(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"# Bench\n\n{report.FIGURES_START}\nold\n{report.FIGURES_END}\n\n## Next\n", encoding="utf-8")
    report.write_readme_figures(DOC, readme)
    text = readme.read_text(encoding="utf-8")
    assert "old" not in text and text.endswith(f"{report.FIGURES_END}\n\n## Next\n")
    assert "| 1. Precision | 1 of 2 | FAIL |" in text
    assert "SOME BUDGETS MISSED" in text


def test_the_repositorys_readme_has_figures_and_no_placeholder() -> None:
    text = report.README.read_text(encoding="utf-8")
    assert "LATEST_FIGURES" not in text
    block = text.partition(report.FIGURES_START)[2].partition(report.FIGURES_END)[0]
    assert "| target | budgets met | result |" in block
