"""The three decoding modes on hand-constructed blank logits.

Logits are written as ``np.log(probs)`` with rows summing to 1, so that ``blank_probs``
(softmax over blanks, per candidate) returns exactly the probabilities in the comments.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from cmrcx.benchmarks.cmrc2019.decoding import (
    DECODERS,
    blank_probs,
    decode,
    decode_assignment,
    decode_baseline,
    decode_paper,
)


def _logits(probs: list[list[float]]) -> np.ndarray:
    """[num_choices, num_blanks] logits whose per-candidate softmax is ``probs``."""
    return np.log(np.asarray(probs, dtype=np.float64))


def test_blank_probs_normalise_over_blanks() -> None:
    probs = blank_probs(np.array([[0.0, 0.0], [np.log(3.0), 0.0], [5.0, 5.0]]))
    np.testing.assert_allclose(probs, [[0.5, 0.5], [0.75, 0.25], [0.5, 0.5]])


def test_paper_allows_a_candidate_to_repeat() -> None:
    #           b0    b1    b2
    # c0       0.1   0.2   0.7
    # c1       0.5   0.4   0.1
    # c2       0.2   0.3   0.5
    # Column maxima: b0 -> c1 (0.5), b1 -> c1 (0.4), b2 -> c0 (0.7): c1 fills two blanks.
    logits = _logits([[0.1, 0.2, 0.7], [0.5, 0.4, 0.1], [0.2, 0.3, 0.5]])
    assert decode_paper(logits) == [1, 1, 0]
    assert decode("paper", logits) == [1, 1, 0]


# c3 is a fake candidate (no blank's answer). Used by the assignment tests below.
#           b0    b1    b2
# c0       0.1   0.2   0.7
# c1       0.4   0.1   0.5
# c2       0.5   0.4   0.1
# c3       0.3   0.3   0.4
CONTESTED = [[0.1, 0.2, 0.7], [0.4, 0.1, 0.5], [0.5, 0.4, 0.1], [0.3, 0.3, 0.4]]


def test_assignment_is_the_one_to_one_optimum() -> None:
    # Among the real candidates, products of probabilities per (b0, b1, b2) filler:
    #   (0,1,2) .001  (0,2,1) .020  (1,0,2) .008
    #   (1,2,0) .112  (2,0,1) .050  (2,1,0) .035
    # The best fillings using the fake: (2,3,0) = .5*.3*.7 = .105, (3,2,0) = .084,
    # (1,3,0) = .084, (2,3,1) = .5*.3*.5 = .075, (1,2,3) = .4*.4*.4 = .064, rest lower.
    # Optimum (1,2,0) = .112 leaves the fake unused.
    logits = _logits(CONTESTED)
    prediction = decode_assignment(logits)
    assert prediction == [1, 2, 0]
    assert 3 not in prediction
    # Brute force agrees: no injective filling has a higher total log-probability.
    log_probs = np.log(blank_probs(logits))
    best = max(
        sum(log_probs[c, k] for k, c in enumerate(fill))
        for fill in itertools.permutations(range(4), 3)
    )
    assert sum(log_probs[c, k] for k, c in enumerate(prediction)) == pytest.approx(best)


def test_assignment_differs_from_greedy_modes() -> None:
    logits = _logits(CONTESTED)
    # paper: b0 -> c2 (.5), b1 -> c2 (.4), b2 -> c0 (.7): c2 repeats.
    assert decode_paper(logits) == [2, 2, 0]
    # baseline (traced in test_baseline_lets_the_fake_in): b1 goes to the fake, total .105.
    assert decode_baseline(logits) == [2, 3, 0]
    assert decode_assignment(logits) == [1, 2, 0]


def test_assignment_with_fewer_candidates_than_blanks() -> None:
    # c0 prefers b1, c1 prefers b0; b2 cannot be filled.
    logits = _logits([[0.1, 0.8, 0.1], [0.7, 0.2, 0.1]])
    assert decode_assignment(logits) == [1, 0, -1]


def test_baseline_more_confident_keeps_the_blank() -> None:
    #           b0    b1    b2      ranked blanks
    # c0       0.6   0.3   0.1     [b0, b1, b2]
    # c1       0.7   0.1   0.2     [b0, b2, b1]
    # c2       0.1   0.5   0.4     [b1, b2, b0]
    # Sweep 1: c0 claims b0 (.6). c1 wants b0, .7 > .6: c0 is displaced and drops b0
    #          (now [b1, b2]), c1 holds b0. c2 claims b1 (.5).
    # Sweep 2: c0 wants b1, held by c2 at .5, .3 is not more: c0 drops b1 (now [b2]).
    #          c1 and c2 already hold their best blanks.
    # Sweep 3: c0 claims the free b2 (.1). Sweep 4: nothing changes.
    # Result: b0 <- c1, b1 <- c2, b2 <- c0.
    logits = _logits([[0.6, 0.3, 0.1], [0.7, 0.1, 0.2], [0.1, 0.5, 0.4]])
    assert decode_baseline(logits) == [1, 2, 0]
    assert decode("baseline", logits) == [1, 2, 0]


def test_baseline_lets_the_fake_in() -> None:
    # CONTESTED, ranked: c0 [b2, b1, b0], c1 [b2, b0, b1], c2 [b0, b1, b2], c3 [b2, b0, b1].
    # Sweep 1: c0 claims b2 (.7); c1 wants b2, .5 <= .7, drops it -> [b0, b1];
    #          c2 claims b0 (.5); c3 wants b2, .4 <= .7, drops it -> [b0, b1].
    # Sweep 2: c1 wants b0, .4 <= .5, drops it -> [b1]; c3 wants b0, .3 <= .5 -> [b1].
    # Sweep 3: c1 claims b1 (.1); c3 wants b1, .3 > .1: c1 is displaced -> [], c3 holds b1.
    # Sweep 4: nothing changes. Result: b0 <- c2, b1 <- c3 (the fake), b2 <- c0.
    assert decode_baseline(_logits(CONTESTED)) == [2, 3, 0]


def test_baseline_tie_goes_to_the_earlier_holder() -> None:
    # Both want b0 at .6; only a strictly higher probability displaces, so c0 keeps it
    # and c1 moves on to b1.
    logits = _logits([[0.6, 0.4], [0.6, 0.4]])
    assert decode_baseline(logits) == [0, 1]


def test_baseline_leaves_unclaimed_blanks_unfilled() -> None:
    # One candidate, two blanks: it takes its best blank, the other stays -1.
    assert decode_baseline(_logits([[0.3, 0.7]])) == [-1, 0]
    assert decode_paper(_logits([[0.3, 0.7]])) == [0, 0]


@pytest.mark.parametrize("mode", sorted(DECODERS))
def test_every_mode_returns_one_python_int_per_blank(mode: str) -> None:
    rng = np.random.default_rng(0)
    prediction = decode(mode, rng.normal(size=(7, 5)))
    assert len(prediction) == 5
    assert all(type(c) is int and -1 <= c < 7 for c in prediction)


def test_unknown_mode_names_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="'beam'.*assignment, baseline, paper"):
        decode("beam", np.zeros((2, 2)))


@pytest.mark.parametrize(
    "bad", [np.zeros(3), np.zeros((2, 0)), np.array([[0.0, np.nan]])], ids=["1d", "0b", "nan"]
)
def test_bad_logits_rejected(bad: np.ndarray) -> None:
    with pytest.raises(ValueError, match="blank_logits"):
        decode("paper", bad)
