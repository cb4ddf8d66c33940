"""cmrcx against CLUE's PyTorch classification recipe (run_classifier.py, ported in
`cmrcx.reproduction.clue_classifier`), step for step, from the same weights on the same
batches: AFQMC (bundled official-format sample), OCNLI (three-way) and CLUEWSC2020
(official-format files written here), BERT and ALBERT; then the same dev predictions and
accuracy. The vocabulary holds every character of the files, so the token ids are real
and the recipe's own encoding must equal cmrcx's row for row."""

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from cmrcx.benchmarks.clue.submission import read_submission  # noqa: E402
from cmrcx.cli import launch  # noqa: E402
from cmrcx.common.errors import ConfigError  # noqa: E402
from cmrcx.common.paths import package_path  # noqa: E402
from cmrcx.reproduction import check, clue_classifier, recipe_updates  # noqa: E402

AFQMC = Path(package_path("data/clue_sample/afqmc_public"))
STEPS = 3
TOLERANCE = 1e-5  # float32, tiny geometry

NLI = [
    ("会议推迟到下周举行", "会议没有按原计划召开", "entailment"),
    ("他每天骑车上班", "他从来不骑车", "contradiction"),
    ("商店门口排着长队", "商店在打折", "neutral"),
    ("雨下了一整夜", "地面是湿的", "entailment"),
    ("她刚学会游泳", "她是游泳教练", "contradiction"),
    ("孩子们在公园里放风筝", "今天有风", "neutral"),
    ("图书馆周一闭馆", "周一不能去图书馆借书", "entailment"),
    ("他把钥匙忘在家里了", "他带着钥匙出门", "contradiction"),
]
WSC = [  # (text, noun, pronoun, label); the spans are at their first occurrence
    ("小王把书给了小李，因为他要出门。", "小李", "他", "true"),
    ("他说小李明天来。", "小李", "他", "false"),
    ("妈妈给女儿买了裙子，她很高兴。", "女儿", "她", "true"),
    ("老师表扬了学生，因为他考得好。", "学生", "他", "true"),
    ("她告诉姐姐自己要出国了。", "姐姐", "她", "false"),
    ("狗追着猫跑，它吓坏了。", "猫", "它", "true"),
]


def _write_lines(path: Path, records) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), "utf-8")


def _ocnli_dir(root: Path) -> Path:
    """ocnli_public/ in the official format: train.50k.json, dev.json, test.json."""
    records = [{"sentence1": a, "sentence2": b, "label": label, "genre": "news", "id": i}
               for i, (a, b, label) in enumerate(NLI)]  # fmt: skip
    directory = root / "ocnli_public"
    _write_lines(directory / "train.50k.json", records)
    _write_lines(directory / "dev.json", records[:6] + [{**records[6], "label": "-"}])
    _write_lines(directory / "test.json", [{"sentence1": a, "sentence2": b, "id": i}
                                           for i, (a, b, _) in enumerate(NLI)])  # fmt: skip
    return directory


def _wsc_dir(root: Path) -> Path:
    """cluewsc2020_public/ in the official format (CLUE 1.1 names)."""
    records = [
        {"target": {"span1_index": text.index(noun), "span1_text": noun,
                    "span2_index": text.index(pronoun), "span2_text": pronoun},
         "idx": n, "label": label, "text": text}
        for n, (text, noun, pronoun, label) in enumerate(WSC)
    ]  # fmt: skip
    directory = root / "cluewsc2020_public"
    for name in ("train.json", "dev.json", "test.json"):
        _write_lines(directory / name, records)
    return directory


def _vocab(root: Path, *data_dirs: Path) -> Path:
    """A BERT vocab.txt ([PAD], [unused1..99], [UNK], [CLS], [SEP], [MASK] at BERT's ids)
    with every character of the files, the recipe's markers _ [ ] included."""
    chars = set("_[]")
    for directory in data_dirs:
        for path in directory.iterdir():
            chars |= {c for c in path.read_text("utf-8") if not c.isascii() or c in "_[]"}
    tokens = ["[PAD]", *(f"[unused{i}]" for i in range(1, 100)), "[UNK]", "[CLS]", "[SEP]",
              "[MASK]", *sorted(chars - set("\n"))]  # fmt: skip
    path = root / "vocab.txt"
    path.write_text("\n".join(tokens) + "\n", "utf-8")
    return path


def _run(tmp_path: Path, gin_file: str, data_dir: Path, vocab: Path):
    """The gin's run on the tiny overlay (random weights), 20 steps at 1e-3."""
    launch.parse_gin(
        [gin_file, "local_tiny.gin"],
        [
            f"MODEL_DIR = '{tmp_path / 'unused'}'",
            f"DATA_DIR = '{data_dir}'",
            f"VOCAB_FILE = '{vocab}'",
            f"RunConfig.tfds_cache_dir = '{tmp_path / 'tfds'}'",
            "RunConfig.batch_size = 4",
            "RunConfig.max_length = 32",
            "RunConfig.learning_rate = 1e-3",
            "RunConfig.num_train_steps = 20",  # the recipe's max_steps: 2 warm-up steps
        ],
    )
    return launch.run_config_from_gin()


def _assert_same_steps(comparison) -> None:
    rates = [row.learning_rate for row in comparison.rows]
    assert rates == pytest.approx([0.0, 5e-4, 1e-3], rel=1e-6)  # warm-up 2 of 20 steps
    assert not comparison.learning_rates_differ
    for row in comparison.rows:
        assert row.relative_difference <= TOLERANCE, row
    # Losses move (a step that changed nothing would agree trivially).
    assert comparison.rows[2].loss != pytest.approx(comparison.rows[0].loss, rel=1e-4)
    assert comparison.verdict == "same"


def _assert_same_predictions(comparison, tmp_path: Path) -> None:
    """The dev split after the steps: same label for every record, same accuracy."""
    ours = comparison.cmrcx
    results = ours.runner.evaluate(ours.final_state, STEPS, out_dir=str(tmp_path / "out"))
    name = f"{ours.runner.train_task}_validation.json"
    submitted = read_submission(ours.runner.run.task, tmp_path / "out" / "predictions" / name)
    labels, accuracy = comparison.reference.predictions("validation")
    assert [line.label for line in submitted] == labels
    assert results["accuracy"] == pytest.approx(100 * accuracy)  # cmrcx reports percent


@pytest.mark.parametrize(
    "gin_file, data",
    [
        ("clue_afqmc_tiny.gin", "afqmc"),  # BERT
        # The other three in the slow suite (the default one stays under 15 minutes).
        # ALBERT in Google's layout: transformers' AlbertForSequenceClassification.
        pytest.param("clue_afqmc_albert_xxlarge.gin", "afqmc", marks=pytest.mark.slow),
        # ALBERT-tiny (albert_zh layout, as the BertModel computing the same), 3 classes.
        pytest.param("clue_ocnli_albert_tiny.gin", "ocnli", marks=pytest.mark.slow),
        # the recipe's _noun_ / [pronoun] marks
        pytest.param("clue_cluewsc11_albert_tiny.gin", "wsc", marks=pytest.mark.slow),
    ],
)
def test_same_steps_and_predictions_as_the_clue_recipe(tmp_path, gin_file, data):
    data_dir = {"afqmc": lambda: AFQMC, "ocnli": lambda: _ocnli_dir(tmp_path),
                "wsc": lambda: _wsc_dir(tmp_path)}[data]()  # fmt: skip
    run = _run(tmp_path, gin_file, data_dir, _vocab(tmp_path, data_dir))
    comparison = check.check_reproduction(run, STEPS, work_dir=str(tmp_path / "work"))
    _assert_same_steps(comparison)
    _assert_same_predictions(comparison, tmp_path)
    # A cmrcx row that the recipe would encode otherwise is refused, by step and row.
    batch = dict(comparison.cmrcx.batches[0])
    batch["input_ids"] = batch["input_ids"].copy()
    batch["input_ids"][1, 1] += 1
    with pytest.raises(ConfigError, match="step 1, row 1: cmrcx's input is no record"):
        clue_classifier.match_rows([batch], comparison.reference.train_features)


def test_the_recipe_optimizer_is_not_torch_adamw():
    """transformers 2.x AdamW (the script's) against torch.optim.AdamW on one tensor: the
    epsilon inside the bias correction and the decay after the update differ."""
    import torch

    weights = torch.nn.Parameter(torch.tensor([1.0, -2.0, 3e-3]))
    weights.grad = torch.tensor([1e-7, 0.5, -2e-8])
    reference = weights.detach().clone().requires_grad_()
    reference.grad = weights.grad.clone()
    groups = [{"params": [weights], "weight_decay": 0.01}]
    recipe_updates.adamw_step(torch, groups, {}, lr=1e-3, eps=1e-8)
    torch_adamw = torch.optim.AdamW([reference], lr=1e-3, eps=1e-8, weight_decay=0.01)
    torch_adamw.step()
    want = np.array([1.0, -2.0, 3e-3])
    # Step 1: m_hat = g, step = lr * g / (|g| + eps / sqrt(1 - b2)), decay after.
    g = np.array([1e-7, 0.5, -2e-8])
    updated = want - 1e-3 * g / (np.abs(g) + 1e-8 / np.sqrt(1e-3))
    updated = updated - 1e-3 * 0.01 * updated
    np.testing.assert_allclose(weights.detach().numpy(), updated, rtol=1e-6)
    assert not np.allclose(weights.detach().numpy(), reference.detach().numpy(), rtol=1e-7)


def test_xlnet_same_steps_as_the_clue_recipe(tmp_path):
    """XLNet (clue_afqmc_xlnet_mid.gin at the tiny geometry, the bundled SentencePiece
    model): transformers' XLNetForSequenceClassification under the recipe's optimizer and
    schedule, fed cmrcx's own rows (XLNet's framing: <cls> last, left padding)."""
    launch.parse_gin(
        ["clue_afqmc_xlnet_mid.gin", "local_tiny.gin"],
        [
            f"MODEL_DIR = '{tmp_path / 'unused'}'",
            f"DATA_DIR = '{AFQMC}'",
            f"RunConfig.tfds_cache_dir = '{tmp_path / 'tfds'}'",
            "RunConfig.batch_size = 4",
            "RunConfig.max_length = 32",
            "RunConfig.learning_rate = 1e-3",
            "RunConfig.num_train_steps = 20",
        ],
    )
    run = launch.run_config_from_gin()
    comparison = check.check_reproduction(run, STEPS, work_dir=str(tmp_path / "work"))
    print(check.table(comparison, TOLERANCE))  # the figures, with pytest -s
    _assert_same_steps(comparison)
    features = comparison.reference.train_features
    assert len(set(features.input_ids[:, -1].tolist())) == 1  # <cls>, every row
    assert (features.attention_mask[:, 0] == 0).any()  # padding on the left
    with pytest.raises(ConfigError, match="XLNet's rows are cmrcx's"):
        comparison.reference.predictions("validation")
