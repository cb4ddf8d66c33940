"""`python -m cmrcx.convert --verify` has a transformers reference for every registered
family. Each family's --verify runs against a random-initialised
transformers model saved in a tmp dir in its own tests: bert
(test_t5_conversion.py::test_verify_passes_a_good_bert_conversion_and_fails_a_corrupted_one,
test_table2_models.py), t5 (test_t5_conversion.py::test_verify_passes_a_good_t5_conversion_
and_fails_a_corrupted_one), albert (test_albert_conversion.py: HF, Google TF, brightmart
TF), xlnet (test_xlnet_conversion.py::test_verify_compares_with_transformers), gpt2
(tests/cli/test_generate_gpt2_cli.py's release fixture)."""

from cmrcx.models import registry

VERIFIED = {"bert", "t5", "albert", "xlnet", "gpt2"}  # the tests named above


def test_every_family_has_a_reference_model_for_verify():
    assert set(registry.FAMILIES) == VERIFIED  # a new family: add its --verify test
    for row in registry.FAMILIES.values():
        assert callable(getattr(registry.weights(row), "verify", None)), row.name
