"""The library of `python -m cmrcx.convert`: a pretrained release -> cmrcx export, and
--verify's report (the entry point's docstring says which releases each family reads).

The family's weights module (`cmrcx.weights.<family>`, found through
`cmrcx.models.registry`) reads the release and, for --verify, runs the source model.
"""

from __future__ import annotations

import os
import shutil
import time

import numpy as np

from cmrcx.models import registry
from cmrcx.weights import exports, hf_io


def source_family(source: str) -> registry.Family:
    """The family reading `source`: its config.json model_type's; without a config.json,
    the family whose TF release config it holds (`Family.tf_release_configs`: ALBERT's
    albert_config*.json); else BERT's (which reads Google TF releases, and names every
    model type cmrcx reads when it meets another)."""
    found = registry.family_of_hf_type(hf_io.hf_model_type(source))
    if os.path.isdir(source) and not os.path.isfile(os.path.join(source, "config.json")):
        found = registry.family_of_tf_release(os.listdir(source))
    return found or registry.family(registry.DEFAULT_FAMILY)


def convert(family: registry.Family, source: str, out: str) -> None:
    """Reads the release `source` with the family's weights module and writes the export
    `out`: params/ (under the family's name), model_config.json, the vocabulary files."""
    weights = registry.weights(family)
    start = time.perf_counter()  # a large release takes tens of seconds each way
    print(f"reading {source} ...", flush=True)
    release = weights.read_dir(source)
    seconds = time.perf_counter() - start
    described = weights.describe(release.config)
    print(f"read {release.source} from {source} in {seconds:.1f} s: {described}", flush=True)
    for note in release.notes:
        print(note)
    files = weights.vocabulary_files(source)
    extra = {
        **exports.family_key(release.config),
        "converted_from": os.path.abspath(source),
        "source_format": release.source,
        **release.extra,
    }
    start = time.perf_counter()
    print(f"writing {out} ...", flush=True)
    exports.export_params(out, {family.name: release.params}, release.config, extra=extra)
    # A name, or (the release's name, the export's): Google's Chinese ALBERT ships
    # vocab_chinese.txt, which the export holds as vocab.txt.
    copies = [(name, name) if isinstance(name, str) else tuple(name) for name in files]
    for name, export_name in copies:
        shutil.copyfile(os.path.join(source, name), os.path.join(out, export_name))
    written = "".join(", " + export_name for _, export_name in copies)
    seconds = time.perf_counter() - start
    print(f"wrote {out} in {seconds:.1f} s (params/, model_config.json{written})")


# ---------------------------------------------------------------------------
# --verify: the source model in PyTorch against the converted Flax model


def import_reference():
    """(torch, transformers), or ImportError saying what to install."""
    try:
        import torch
        import transformers
    except ImportError as error:
        raise ImportError(
            "--verify runs the source model in PyTorch: install torch and transformers "
            "(pip install 'cmrcx[convert]')"
        ) from error
    return torch, transformers


def report(comparisons, atol: float) -> bool:
    """Prints one line per compared output; True when every difference is within atol."""
    print("verify: transformers (PyTorch) vs cmrcx (Flax), 3 random inputs with padding")
    ok = True
    for name, want, got in comparisons:
        diff = float(np.max(np.abs(np.asarray(got, np.float64) - want)))
        scale = float(np.max(np.abs(want)))
        within = diff <= atol
        ok &= within
        print(
            f"  {name}: max |diff| {diff:.3g} (reference max |value| {scale:.3g})"
            f"{'' if within else f'  > {atol:g}'}"
        )
    print(f"verify: {'OK' if ok else 'FAILED'} (--verify_atol {atol:g})")
    return ok
