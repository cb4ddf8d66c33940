"""Checkpoint formats: HuggingFace / TF release files (`hf_io`), weight tables (`table`),
cmrcx exports (`exports`), and one module per model family with the same names:

  config_from_hf(raw, path, tensors) -> config   config.json dict -> the family's config
  config_to_hf(config) -> dict                   the config.json transformers reads
  weight_table(config) -> entries                every parameter: path, HF name, layout
  params_from_hf(tensors, config, source)        HF-named torch tensors -> params tree
  hf_tensors(params, config)                     params tree -> (HF name, tensor) pairs
  describe(config) -> str                        the geometry `cmrcx.convert` prints
  read_dir(directory) -> hf_io.Release           a release directory, read whole
  vocabulary_files(directory) -> [names]         what `cmrcx.convert` copies beside it (a
                                                 name, or (release name, export name))
  write_hf_dir(out, params, config, vocab_file)  `cmrcx.export --format hf`
  verify(source, export_dir) (optional)          `cmrcx.convert --verify` against torch
  WeightError, PretrainedFormatError             what they raise

Beside them a family module holds `RELEASE`, its `hf_io.ReleaseFormat` (vocabulary files,
a tensor pair a release may lack, the notes' words): `read_dir`, `vocabulary_files` and
`write_hf_dir` go through the shared `hf_io.read_release`, `hf_io.vocabulary_files` and
`hf_io.write_release`, and `weight_table` lists `table.Entry` rows.

`cmrcx.models.registry.weights(family)` finds a family's module.
"""

# Every family module's public names (tests/test_model_family_registry.py checks them).
FAMILY_FUNCTIONS = (
    "config_from_hf",
    "config_to_hf",
    "weight_table",
    "params_from_hf",
    "hf_tensors",
    "describe",
    "read_dir",
    "vocabulary_files",
    "write_hf_dir",
)
