"""The suite-time plugin (`tests/compile_log.py`) sums its per-test lines per file."""

import json

from tests import compile_log


def test_per_file_sums_each_files_tests():
    lines = [
        json.dumps({"test": "tests/a.py::test_x", "wall": 2.0, "compile": 1.5, "compile_n": 3}),
        json.dumps({"test": "tests/a.py::test_y[1]", "wall": 1.0, "hits": 2}),
        json.dumps({"test": "tests/b.py::test_z", "wall": 4.0}),
    ]
    files = compile_log.per_file(lines)
    assert files["tests/a.py"] == {"wall": 3.0, "compile": 1.5, "compile_n": 3, "hits": 2}
    assert files["tests/b.py"] == {"wall": 4.0}


def test_loading_the_plugin_leaves_jax_unloaded():
    """`-p tests.compile_log` loads before tests/conftest.py sets the session's compilation
    cache; jax reads those variables when imported, so the plugin must not import it."""
    import subprocess
    import sys

    from tests.support import REPO_ROOT

    code = "import sys, tests.compile_log; print('jax' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.stdout.strip() == "False", result.stderr
