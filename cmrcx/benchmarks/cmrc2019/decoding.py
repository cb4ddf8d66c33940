"""Turning per-candidate blank logits into one choice index per blank.

The baseline model reads one candidate sentence at a time and scores every blank of the
passage; ``blank_logits[c, k]`` is its logit for candidate ``c`` filling blank ``k`` (taken
from the window in which blank ``k`` has maximum context). Each candidate's logits are
normalised over the passage's blanks, giving ``blank_probs[c]``, a distribution saying
*where* candidate ``c`` belongs. Decoders differ in how they resolve conflicts:

* ``paper``: each blank independently takes its most probable candidate (repeats allowed).
* ``baseline``: the authors' released conflict resolution (run_cmrc2019_baseline.py).
* ``assignment``: the one-to-one assignment with the highest total log-probability.

Every decoder returns a list of length num_blanks; ``-1`` marks a blank left unfilled.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.optimize
import scipy.special

UNFILLED = -1


def _as_blank_logits(blank_logits: np.ndarray) -> np.ndarray:
    """Validates and converts to float64 [num_choices, num_blanks]."""
    logits = np.asarray(blank_logits, dtype=np.float64)
    if logits.ndim != 2:
        raise ValueError(f"blank_logits must be [num_choices, num_blanks], got {logits.shape}")
    if logits.shape[1] == 0:
        raise ValueError("blank_logits has no blanks; every passage has at least one")
    if not np.all(np.isfinite(logits)):
        raise ValueError("blank_logits contains NaN or infinite values")
    return logits


def log_blank_probs(blank_logits: np.ndarray) -> np.ndarray:
    """Log-softmax over blanks for each candidate.

    Args:
      blank_logits: [num_choices, num_blanks] logits.

    Returns:
      [num_choices, num_blanks]; each row's exp sums to 1.
    """
    return scipy.special.log_softmax(_as_blank_logits(blank_logits), axis=1)


def blank_probs(blank_logits: np.ndarray) -> np.ndarray:
    """Softmax over blanks for each candidate: [num_choices, num_blanks] -> same shape."""
    return np.exp(log_blank_probs(blank_logits))


def decode_paper(blank_logits: np.ndarray) -> list[int]:
    """Each blank takes the candidate most confident about it; a candidate may repeat.

    Args:
      blank_logits: [num_choices, num_blanks].

    Returns:
      [num_blanks] choice indices (all -1 when there are no candidates).
    """
    probs = blank_probs(blank_logits)
    num_choices, num_blanks = probs.shape
    if num_choices == 0:
        return [UNFILLED] * num_blanks
    return [int(c) for c in np.argmax(probs, axis=0)]


def decode_baseline(blank_logits: np.ndarray) -> list[int]:
    """The conflict resolution of the authors' released ``write_predictions``.

    Every candidate ranks the blanks by its own probability. Sweeping the candidates in
    index order until nothing changes, a candidate claims its current best blank; a more
    confident later claimant displaces the holder, which drops that blank and moves on to
    its next one, while a claimant that is not more confident (ties included) drops it
    itself. Finally each candidate with blanks left fills its current best one.

    Args:
      blank_logits: [num_choices, num_blanks].

    Returns:
      [num_blanks] choice indices; blanks that no candidate ended on stay -1.
    """
    probs = blank_probs(blank_logits)
    num_choices, num_blanks = probs.shape
    # Stable sort: equal probabilities keep blank order, as the script's stable sort of
    # n-best entries (collected in text order) does.
    ranked = [[int(k) for k in np.argsort(-probs[c], kind="stable")] for c in range(num_choices)]
    holders: dict[int, tuple[float, int]] = {}  # blank -> (prob, candidate); answer_text_dict
    updated = True
    while updated:
        updated = False
        for c in range(num_choices):
            if not ranked[c]:
                continue
            blank = ranked[c][0]
            prob = float(probs[c, blank])
            if blank not in holders:
                holders[blank] = (prob, c)
                updated = True
                continue
            held_prob, holder = holders[blank]
            if prob > held_prob:
                # The holder's best blank is always the one it holds, so it loses its head.
                ranked[holder].pop(0)
                holders[blank] = (prob, c)
                updated = True
            elif holder != c:
                ranked[c].pop(0)
                updated = True
    prediction = [UNFILLED] * num_blanks
    for c in range(num_choices):
        if ranked[c]:
            # At convergence each remaining head is held by its own candidate, so heads are
            # distinct; writing in index order still copies the script's last-one-wins.
            prediction[ranked[c][0]] = c
    return prediction


def decode_assignment(blank_logits: np.ndarray) -> list[int]:
    """One-to-one candidates-to-blanks assignment maximising the summed log blank_probs.

    Args:
      blank_logits: [num_choices, num_blanks].

    Returns:
      [num_blanks] distinct choice indices; leftover candidates (ideally the fakes) are
      unused, and with fewer candidates than blanks the unmatched blanks stay -1.
    """
    log_probs = log_blank_probs(blank_logits)
    prediction = [UNFILLED] * log_probs.shape[1]
    if log_probs.size == 0:
        return prediction
    candidates, blanks = scipy.optimize.linear_sum_assignment(-log_probs)
    for c, k in zip(candidates, blanks, strict=True):
        prediction[int(k)] = int(c)
    return prediction


DECODERS: dict[str, Callable[[np.ndarray], list[int]]] = {
    "paper": decode_paper,
    "baseline": decode_baseline,
    "assignment": decode_assignment,
}


def decode(mode: str, blank_logits: np.ndarray) -> list[int]:
    """Decodes one passage with the named mode (a key of `DECODERS`).

    Args:
      mode: "paper", "baseline" or "assignment".
      blank_logits: [num_choices, num_blanks].

    Returns:
      [num_blanks] choice indices, -1 for unfilled blanks.
    """
    if mode not in DECODERS:
        raise ValueError(
            f"unknown decoding mode {mode!r}; valid modes: {', '.join(sorted(DECODERS))}"
        )
    return DECODERS[mode](blank_logits)
