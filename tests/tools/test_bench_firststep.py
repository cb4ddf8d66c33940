"""tools/bench.py firststep / evalpath: the synthetic files are the official formats, at
the official sizes times the scale (the timing itself runs only by hand: docs/performance.md)."""

import sys

import pytest

from cmrcx.benchmarks.clue import c3, chid, cmrc2018_format, official_format
from cmrcx.benchmarks.cmrc2019.official_format import read_passages
from tests.support import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "tools"))
from benchkit import synthetic  # noqa: E402

SCALE = 1e-4  # CMNLI 39 pairs, ChID 8 lines, C3 / CMRC 2018 / CMRC 2019 at least 4


@pytest.mark.parametrize("task", sorted(synthetic.SIZES))
def test_synthetic_files_read_as_official(task, tmp_path):
    out = synthetic.write(task, str(tmp_path), SCALE)
    sizes = []
    for split in ("train", "validation"):
        if task == "clue_chid11":
            data = chid.read_split(out, split)
            sizes.append(data.num_lines)
            assert len(data.blanks) > 4 * data.num_lines  # 6.8 blanks a line on average
            continue
        if task == "clue_c311":
            questions = c3.read_split(out, split)
        elif task == "clue_cmrc2018":
            questions = cmrc2018_format.read_split(out, split).questions
        elif task == "cmrc2019":
            name = "cmrc2019_train.json" if split == "train" else "cmrc2019_dev.json"
            questions = read_passages(tmp_path / name)
        else:
            questions = official_format.read_split(task, out, split).examples
        sizes.append(len(questions))
    expected = [synthetic.count(task, split, SCALE) for split in ("train", "validation")]
    assert sizes == expected
