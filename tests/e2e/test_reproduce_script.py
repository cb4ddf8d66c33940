"""tools/reproduce_cmrc2019.sh end to end, on one tiny random HF checkpoint (2 steps)."""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from cmrcx.common.paths import package_path
from tests.support import REPO_ROOT

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

SCRIPT = REPO_ROOT / "tools" / "reproduce_cmrc2019.sh"


def _data_dir_with_a_test_file(directory: pathlib.Path) -> pathlib.Path:
    """The bundled sample plus a qualify (test) file whose markers are out of textual
    order, as QUALIFY_95 of the official test file is, and without answers."""
    sample = pathlib.Path(package_path("data/cmrc2019_sample"))
    shutil.copytree(sample, directory)
    dev = json.loads((sample / "cmrc2019_dev.json").read_text(encoding="utf-8"))["data"]
    qualify = []
    for record in dev[:3]:
        record = {k: v for k, v in record.items() if k != "answers"}
        record["context"] = record["context"].replace("[BLANK1]", "[BLANK_A]")
        record["context"] = record["context"].replace("[BLANK2]", "[BLANK1]")
        record["context"] = record["context"].replace("[BLANK_A]", "[BLANK2]")
        qualify.append(record)
    document = json.dumps({"data": qualify}, ensure_ascii=False)
    (directory / "cmrc2019_qualify.json").write_text(document, encoding="utf-8")
    return directory


@pytest.mark.slow  # converts, trains and scores through the script: ~25 s
def test_reproduce_script_converts_trains_and_prints_the_table(tmp_path):
    checkpoint = tmp_path / "ckpt" / "bert"
    config = transformers.BertConfig(
        vocab_size=4096,
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=512,
    )
    # Saved as many released Chinese checkpoints are: from BertForMaskedLM, no pooler.
    transformers.BertForMaskedLM(config).save_pretrained(checkpoint)
    shutil.copyfile(package_path("data/tiny_vocab.txt"), checkpoint / "vocab.txt")
    data_dir = _data_dir_with_a_test_file(tmp_path / "data")
    env = {
        **os.environ,
        "PYTHON": sys.executable,
        "CMRCX_GIN_ARGS": " ".join(
            [
                "--gin_file=models/bert_tiny.gin",
                "--gin.RunConfig.num_train_steps=2",
                "--gin.RunConfig.max_length=128",
                "--gin.RunConfig.doc_stride=64",
                "--gin.RunConfig.batch_size=8",
                "--gin.RunConfig.lower_case=True",
                f"--gin.RunConfig.tfds_cache_dir='{tmp_path}/tfds'",
            ]
        ),
    }
    out = subprocess.run(
        [
            "bash",
            str(SCRIPT),
            str(data_dir),
            str(tmp_path / "ckpt"),
            str(tmp_path / "runs"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    lines = out.stdout.strip().splitlines()
    assert lines[-8] == "| model | dev QAC | dev PAC |"  # header, rule, six rows
    bert_row = next(line for line in lines if line.startswith("| bert |"))
    assert "-" not in bert_row.replace("| bert |", "")  # numbers, not placeholders
    assert "| roberta_wwm_ext_large | - | - |" in lines  # no checkpoint: skipped, said so
    assert "skip roberta_wwm_ext_large" in out.stderr
    assert (
        tmp_path / "runs" / "bert" / "predictions" / "cmrc2019_bert_chinese_validation.json"
    ).is_file()
    # The test split (markers out of order) is predicted: one index per blank, by number.
    test_predictions = tmp_path / "runs" / "bert" / "predictions"
    test_predictions = test_predictions / "cmrc2019_bert_chinese_test.json"
    predictions = json.loads(test_predictions.read_text(encoding="utf-8"))
    qualify = json.loads((data_dir / "cmrc2019_qualify.json").read_text(encoding="utf-8"))
    for record in qualify["data"]:
        assert len(predictions[record["context_id"]]) == record["context"].count("[BLANK")
