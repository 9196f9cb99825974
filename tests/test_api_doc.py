"""docs/api.md is a session that runs as shown (doctest)."""
import doctest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_api_session_runs_as_shown(monkeypatch):
    monkeypatch.chdir(ROOT)
    result = doctest.testfile(str(ROOT / "docs" / "api.md"), module_relative=False,
                              optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 20
    assert result.failed == 0
