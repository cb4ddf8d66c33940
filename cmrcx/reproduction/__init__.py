"""Step-for-step comparison of a cmrcx run with the benchmark's reference recipe.

`python -m cmrcx.check_reproduction` (the entry point) runs N steps of a gin's run twice
from the same weights on the same batches, dropout off: in cmrcx (`cmrcx_steps`), and in
the benchmark's recipe in PyTorch + transformers (one module per recipe, e.g.
`clue_classifier`: CLUE's classifier_pytorch/run_classifier.py; `clue_multichoice`: its
C3 and ChID scripts). `check` picks the recipe of the run's task and compares the two per
step.

PyTorch and transformers (the `convert` extra) are imported only by the recipes
(`reference_imports`): the package imports without them.
"""
