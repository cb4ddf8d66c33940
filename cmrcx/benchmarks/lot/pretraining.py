"""LongLM pretraining (LOT paper section 4): the two objectives and the Table 9 metrics.

Pure Python / NumPy reference semantics. `cmrcx.tasks.lot.pretraining` implements the same
sampling in TF ops for the tf.data pipeline; the tests check the TF output against the
functions here (reconstruction, span statistics, `infilling_pair` on given spans).

Text infilling (section 4, "Pretraining Tasks"): "a number of spans are sampled and
replaced by special tokens with unique IDs, while the output is the spans delimited by the
special tokens used in the input. The lengths of masked spans are drawn from a Poisson
distribution with lambda=3 and all masked tokens compress 15% of the original texts."
  - num_noise = round(0.15 * length), clipped to [1, length - 1] (T5's count, below).
  - Span lengths: Poisson(3) draws until their sum reaches num_noise, the last one cut so
    the sum is exactly num_noise (BART's text infilling, Lewis et al. 2020: fairseq
    `DenoisingDataset.add_whole_word_mask`, which also cuts the last span). A length may be
    0, as in BART: a sentinel inserted without removing a token. At most num_noise + 1
    draws are used; if they fall short the last one takes the rest (probability 2e-3 for
    num_noise = 1, < 1e-10 from num_noise = 20, i.e. texts of 134 tokens or more).
    Because the last span is cut, the realised mean span length is a little under 3
    (`expected_span_count`); every uncut span is an exact Poisson(3) draw.
  - Placement: spans keep their drawn order left to right; the kept tokens are split
    uniformly at random into the gaps around them, at least one between two spans
    (spans never touch, as in T5), possibly none before the first or after the last.
  - T5 (google-research/text-to-text-transfer-transformer t5/data/preprocessors.py
    @84f8bcc1, `random_spans_noise_mask`) differs: it fixes the number of spans,
    round(num_noise / 3), and cuts num_noise into that many parts uniformly at random
    (every part >= 1), always starting with kept tokens and ending with a span.
  - Format: input = the text with span k replaced by sentinel k; target = sentinel k
    followed by span k, for k = 0, 1, ... (no trailing sentinel). The caller picks the
    sentinel ids: LongLM's released examples number them from <extra_id_1> (see
    `cmrcx.tasks.lot.pretraining`).

Conditional continuation: "the input and output are, respectively, the front and back half
of a text, which is split into two parts randomly": split uniform in [1, length - 1];
input = front + [sentinel], target = [sentinel] + back (LongLM's fine-tuning format).

Metrics (section 4, "Model Performance", Table 9): perplexity, and BLEU-3/4 as the LOT
evaluation scripts compute BLEU: jieba words of the text with all white space removed,
NLTK 3.5's `sentence_bleu` with uniform weights and no smoothing, averaged over examples
(the OutGen/PlotCom `eval.py` shipped with the LOT data on THUCloud; a copy is in
IndexFziQ/LongLM-Eyas datasets/chn/eval.py @8a5b4a2c, `bleu` and `proline`). The authors'
pretraining evaluation script is not published. Generated text is cleaned as the LongLM
generation script does (`generation_text`, from `cmrcx.benchmarks.lot.generation`).
"""

from __future__ import annotations

import collections
import math
import sys
from collections.abc import Sequence

import numpy as np

# Re-exported: the LongLM generation script's clean-up, shared with PlotCom and OutGen.
from cmrcx.benchmarks.lot.generation import generation_text  # noqa: F401

NOISE_DENSITY = 0.15  # section 4: masked tokens are 15% of the text
MEAN_SPAN_LENGTH = 3.0  # section 4: span lengths ~ Poisson(lambda=3)
BLEU_ORDERS = (3, 4)  # Table 9: BLEU-3/4


# --- Text infilling -----------------------------------------------------------------------


def num_noise_tokens(length: int, noise_density: float = NOISE_DENSITY) -> int:
    """round(length * noise_density) (half to even, as np.round / tf.round), in [1, length-1].

    >>> num_noise_tokens(200), num_noise_tokens(510), num_noise_tokens(2)
    (30, 76, 1)
    """
    if length < 2:
        raise ValueError(f"a text of {length} token(s) cannot be split into spans and context")
    if not 0.0 < noise_density < 0.5:
        raise ValueError(f"noise_density {noise_density} must be in (0, 0.5)")
    return int(np.clip(np.round(length * noise_density), 1, length - 1))


def poisson_span_lengths(
    rng: np.random.Generator, num_noise: int, mean: float = MEAN_SPAN_LENGTH
) -> np.ndarray:
    """int [num_spans]: Poisson(mean) draws until they sum to >= num_noise, the last cut.

    At most num_noise + 1 draws; if those fall short, the last takes the rest.
    """
    draws = rng.poisson(mean, size=num_noise + 1)
    return span_lengths_from_draws(draws, num_noise)


def span_lengths_from_draws(draws: Sequence[int], num_noise: int) -> np.ndarray:
    """The spans `draws` give: the shortest prefix reaching num_noise, the last one cut.

    >>> span_lengths_from_draws([2, 0, 5, 4], 6).tolist()
    [2, 0, 4]
    >>> span_lengths_from_draws([0, 1, 0], 6).tolist()  # too short: the last takes the rest
    [0, 1, 5]
    """
    draws = np.asarray(draws, np.int64)
    ends = np.cumsum(draws)
    reached = np.nonzero(ends >= num_noise)[0]
    num_spans = int(reached[0]) + 1 if reached.size else draws.size
    lengths = draws[:num_spans].copy()
    lengths[-1] = num_noise - lengths[:-1].sum()
    return lengths


def place_spans(rng: np.random.Generator, length: int, span_lengths: Sequence[int]) -> np.ndarray:
    """int [num_spans]: start of each span, in order, the gaps a uniform random split.

    The length - sum(span_lengths) kept tokens go into num_spans + 1 gaps, every gap
    between two spans >= 1: choosing num_spans of (free + num_spans) slots uniformly
    (free = kept - (num_spans - 1)) gives every such split the same probability.
    """
    span_lengths = np.asarray(span_lengths, np.int64)
    num_spans = span_lengths.size
    free = length - int(span_lengths.sum()) - (num_spans - 1)
    if free < 0:
        raise ValueError(f"{num_spans} spans of {span_lengths.sum()} tokens do not fit {length}")
    chosen = np.sort(rng.choice(free + num_spans, size=num_spans, replace=False))
    return chosen + np.concatenate([[0], np.cumsum(span_lengths)[:-1]]).astype(np.int64)


def infilling_pair(
    tokens: Sequence[int],
    starts: Sequence[int],
    span_lengths: Sequence[int],
    sentinel_ids: Sequence[int],
) -> tuple[list[int], list[int]]:
    """(inputs, targets) of text infilling, without EOS.

    tokens [L]; starts, span_lengths [S] (increasing, spans not touching); sentinel_ids:
    the id of the sentinel for span 0, 1, ... (at least S of them).
    >>> infilling_pair([10, 11, 12, 13, 14], [1, 4], [2, 0], [99, 98])
    ([10, 99, 13, 98, 14], [99, 11, 12, 98])
    """
    tokens = [int(t) for t in tokens]
    if len(starts) != len(span_lengths) or len(starts) > len(sentinel_ids):
        raise ValueError(
            f"{len(starts)} starts, {len(span_lengths)} lengths, {len(sentinel_ids)} sentinels"
        )
    inputs, targets, position = [], [], 0
    for k, (start, span) in enumerate(zip(starts, span_lengths, strict=True)):
        if start < position + (1 if k else 0) or start + span > len(tokens):
            raise ValueError(f"span {k} at {start} (length {span}) overlaps, touches or overruns")
        inputs += tokens[position:start] + [int(sentinel_ids[k])]
        targets += [int(sentinel_ids[k])] + tokens[start : start + span]
        position = start + span
    return inputs + tokens[position:], targets


def sample_infilling(
    rng: np.random.Generator,
    tokens: Sequence[int],
    sentinel_ids: Sequence[int],
    noise_density: float = NOISE_DENSITY,
    mean_span_length: float = MEAN_SPAN_LENGTH,
) -> tuple[list[int], list[int]]:
    """One text infilling example of `tokens` (the reference sampler)."""
    num_noise = num_noise_tokens(len(tokens), noise_density)
    lengths = poisson_span_lengths(rng, num_noise, mean_span_length)
    starts = place_spans(rng, len(tokens), lengths)
    return infilling_pair(tokens, starts, lengths, sentinel_ids)


def reconstruct_infilling(
    inputs: Sequence[int], targets: Sequence[int], sentinel_ids: Sequence[int]
) -> tuple[list[int], list[int]]:
    """(text tokens, span lengths) from an infilling pair without EOS: each sentinel of the
    input replaced by the tokens that follow it in the target.

    Raises ValueError unless the sentinels appear in order, once each, in both.
    >>> reconstruct_infilling([10, 99, 13, 98, 14], [99, 11, 12, 98], [99, 98])
    ([10, 11, 12, 13, 14], [2, 0])
    """
    position = {int(s): k for k, s in enumerate(sentinel_ids)}
    spans: list[list[int]] = []
    for token in map(int, targets):
        if token in position:
            if position[token] != len(spans):
                raise ValueError(
                    f"target sentinel {token} out of order (expected span {len(spans)})"
                )
            spans.append([])
        elif not spans:
            raise ValueError("target does not begin with a sentinel")
        else:
            spans[-1].append(token)
    text, used = [], 0
    for token in map(int, inputs):
        if token in position:
            if position[token] != used or used >= len(spans):
                raise ValueError(f"input sentinel {token} out of order or without a target span")
            text += spans[used]
            used += 1
        else:
            text.append(token)
    if used != len(spans):
        raise ValueError(f"the target has {len(spans)} spans, the input {used} sentinels")
    return text, [len(span) for span in spans]


def expected_span_count(num_noise: int, mean: float = MEAN_SPAN_LENGTH) -> float:
    """E[number of spans] for num_noise masked tokens: draws until the sum reaches num_noise.

    Renewal recursion m(k) = 1 + sum_j P(j) m(k - j) over draws j < k, m(<=0) = 0 (the
    num_noise + 1 cap is ignored: it binds with probability < 1e-10 for num_noise >= 20).
    The realised mean span length is num_noise / m(num_noise): 30 / m(30) = 30 / 10.5.
    """
    pmf = [math.exp(-mean)]
    for j in range(1, num_noise):
        pmf.append(pmf[-1] * mean / j)
    m = [0.0] * (num_noise + 1)
    for k in range(1, num_noise + 1):
        m[k] = (1.0 + sum(pmf[j] * m[k - j] for j in range(1, k))) / (1.0 - pmf[0])
    return m[num_noise]


# --- Conditional continuation --------------------------------------------------------------


def continuation_pair(
    tokens: Sequence[int], split: int, sentinel_id: int
) -> tuple[list[int], list[int]]:
    """(front + [sentinel], [sentinel] + back), without EOS; 1 <= split <= len(tokens) - 1.

    >>> continuation_pair([10, 11, 12], 1, 99)
    ([10, 99], [99, 11, 12])
    """
    tokens = [int(t) for t in tokens]
    if not 1 <= split <= len(tokens) - 1:
        raise ValueError(f"split {split} leaves an empty half of a {len(tokens)}-token text")
    return tokens[:split] + [int(sentinel_id)], [int(sentinel_id)] + tokens[split:]


def sample_continuation(
    rng: np.random.Generator, tokens: Sequence[int], sentinel_id: int
) -> tuple[list[int], list[int]]:
    """One conditional continuation example: the split uniform in [1, len(tokens) - 1]."""
    return continuation_pair(tokens, int(rng.integers(1, len(tokens))), sentinel_id)


# --- Table 9 metrics -----------------------------------------------------------------------


def perplexity(log_likelihoods: Sequence[float], num_tokens: Sequence[int]) -> float:
    """exp(-sum log p / sum tokens): per-token perplexity over all target tokens (EOS too).

    log_likelihoods [N]: natural-log likelihood of each example's target; num_tokens [N].
    """
    total = int(np.sum(num_tokens))
    if total <= 0:
        raise ValueError("perplexity: no target tokens")
    return math.exp(-math.fsum(float(x) for x in log_likelihoods) / total)


def _ngrams(words: Sequence[str], n: int) -> collections.Counter:
    return collections.Counter(tuple(words[i : i + n]) for i in range(len(words) - n + 1))


def sentence_bleu(references: Sequence[Sequence[str]], hypothesis: Sequence[str], order: int):
    """NLTK 3.5 `sentence_bleu(references, hypothesis, weights=(1/order,)*order)`, in [0, 1].

    No smoothing (NLTK's method0): a zero n-gram precision counts as sys.float_info.min,
    so the score is ~1e-77 rather than 0; no unigram match at all gives exactly 0. The
    brevity penalty uses the reference length closest to the hypothesis (shorter on ties).
    """
    numerators, denominators = [], []
    for n in range(1, order + 1):
        counts = _ngrams(hypothesis, n)
        max_counts: dict[tuple, int] = {}
        for reference in references:
            reference_counts = _ngrams(reference, n)
            for ngram in counts:
                max_counts[ngram] = max(max_counts.get(ngram, 0), reference_counts[ngram])
        numerators.append(sum(min(c, max_counts[g]) for g, c in counts.items()))
        denominators.append(max(1, sum(counts.values())))
    hyp_len = len(hypothesis)
    ref_len = min((len(r) for r in references), key=lambda r: (abs(r - hyp_len), r))
    if hyp_len > ref_len:
        brevity = 1.0
    elif hyp_len == 0:
        brevity = 0.0
    else:
        brevity = math.exp(1 - ref_len / hyp_len)
    if numerators[0] == 0:
        return 0
    precisions = [
        num / den if num else sys.float_info.min
        for num, den in zip(numerators, denominators, strict=True)
    ]
    weight = 1.0 / order  # NLTK sums w * log(p) with math.fsum, in this order
    return brevity * math.exp(math.fsum(weight * math.log(p) for p in precisions))


def jieba_words(text: str) -> list[str]:
    """LOT's `proline`: jieba words of the text with all white space removed."""
    import jieba  # imported here: ~1 s to load its dictionary on first use

    return " ".join(jieba.cut("".join(text.split()))).split()


def lot_bleu(
    references: Sequence[str], predictions: Sequence[str], orders: Sequence[int] = BLEU_ORDERS
) -> dict[str, float]:
    """{"bleu-n": mean over examples of sentence BLEU-n x 100} on jieba words, LOT's way.

    references, predictions: [N] texts, parallel.
    """
    if len(references) != len(predictions):
        raise ValueError(f"bleu: {len(references)} references but {len(predictions)} predictions")
    if not references:
        raise ValueError("bleu: no examples to score")
    pairs = [(jieba_words(r), jieba_words(p)) for r, p in zip(references, predictions, strict=True)]
    return {
        f"bleu-{n}": 100.0 * float(np.mean([sentence_bleu([r], p, n) for r, p in pairs]))
        for n in orders
    }
