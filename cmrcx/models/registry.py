"""The model families, one row each: everything the rest of cmrcx asks of a family.

A row names the family ("bert": run_config.json's and model_config.json's "family", and
the parameter subtree its network fills), its config dataclass (gin: cmrcx.<Class>.*),
how to build its networks (an encoder the task heads of `cmrcx.models.heads` run over,
an encoder-decoder with its `DecodeModel`, the token states the candidate pointer
dots), its input layout (`cmrcx.vocab.layouts`: its vocabulary and how tasks frame an
example) and the HuggingFace config.json `model_type` values `cmrcx.convert` reads as
it. Its checkpoint formats are a module of `cmrcx.weights` (the same function names for
every family), imported only when asked for (`weights`): models/ sits below weights/ and
imports nothing above it.

A new family is a network module, a weights module and one `register(Family(...))`
(tests/test_model_family_registry.py adds a toy family so, in its own file).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any, NamedTuple

import flax.linen as nn

from cmrcx.models import albert, bert, gpt2, heads, t5, xlnet
from cmrcx.vocab import layouts


class HeadOptions(NamedTuple):
    """What the task heads take from a family's config."""

    dropout_rate: float  # before the classification / multiple-choice layer
    init_std: float  # stddev of the head kernels' initialisers


@dataclasses.dataclass(frozen=True)
class Family:
    """One model family: an encoder (for the task heads), an encoder-decoder, or both."""

    name: str  # "bert": the "family" of run_config.json / model_config.json, the params subtree
    config_class: type  # the network's config dataclass (BertConfig)
    # Its input layout (`cmrcx.vocab.layouts`): the vocabulary, its file in an export or
    # release directory (`vocab_file`), and how tasks frame an example for its networks.
    layout: layouts.Layout
    hf_model_types: tuple[str, ...]  # config.json `model_type` values read as this family
    # config, name -> a module (input_ids, token_type_ids, input_mask, deterministic) ->
    # (hidden [batch, length, width], pooled [batch, width]), named `name`.
    encoder: Callable[[Any, str], nn.Module] | None = None
    head_options: Callable[[Any], HeadOptions] | None = None  # for the heads over `encoder`
    # config -> an encoder-decoder (input_ids, attention_mask, decoder_input_ids,
    # decoder_mask=None, deterministic) -> logits, and config -> its `DecodeModel`.
    seq2seq: Callable[[Any], nn.Module] | None = None
    decode_model: Callable[[Any], Any] | None = None
    # config -> a decoder-only language model (input_ids, input_mask, deterministic,
    # positions=None) -> float32 logits [batch, length or positions, vocab]: position t
    # predicts token t + 1 (GPT-2); `cmrcx.model_api.causal_lm` fine-tunes it on seq2seq
    # batches, decoding through `decode_model`.
    causal_lm: Callable[[Any], nn.Module] | None = None
    # config, name -> a module (input_ids, token_type_ids, input_mask, deterministic) ->
    # the final state of every token [batch, length, width], named `name`: what the
    # candidate pointer (LOT ClozeT / SenPos) dots. None: the encoder's hidden states.
    # Encoder-decoders give their decoder's states of the input fed to both stacks (T5);
    # a decoder-only family gives its last layer's (GPT-2; with `causal`).
    token_states: Callable[[Any, str], nn.Module] | None = None
    # The `cmrcx.weights` module (or a module object): config_from_hf, config_to_hf,
    # weight_table, params_from_hf, hf_tensors, describe, read_dir, write_hf_dir,
    # vocabulary_files (see cmrcx/weights/__init__.py). None: cmrcx.weights.<name>.
    weights: str | ModuleType | None = None
    # The bundled vocabulary of the family's models/<family>/tiny.gin (`cmrcx:` path):
    # local_tiny.gin's VOCAB_FILE 'cmrcx:tiny' stands for it (RunConfig.checked).
    tiny_vocab_file: str = "cmrcx:data/tiny_vocab.txt"
    # Glob patterns of the config file of a TF release of this family (a directory without
    # config.json): `cmrcx.convert` reads a directory holding a match as this family.
    tf_release_configs: tuple[str, ...] = ()

    @property
    def vocab_file(self) -> str:
        """The vocabulary's file in an export or release directory (vocab.txt)."""
        return self.layout.vocab_file

    @property
    def causal(self) -> bool:
        """A decoder-only family (GPT-2, its layout's `causal`): its token states are
        causal (a state has read the tokens before it only), so tasks lay inputs out with
        what a state must see first, and it decodes a prompt it continues."""
        return self.layout.causal


# The family of exports written before model_config.json named one (they are BERT).
DEFAULT_FAMILY = "bert"

FAMILIES: dict[str, Family] = {}


def register(row: Family) -> Family:
    """Adds a family; ValueError if its name, config class or a model_type is taken."""
    for other in FAMILIES.values():
        taken = set(other.hf_model_types) & set(row.hf_model_types)
        if other.name == row.name or other.config_class is row.config_class or taken:
            raise ValueError(f"model family {row.name!r} clashes with {other.name!r}")
    FAMILIES[row.name] = row
    return row


def unregister(name: str) -> None:
    """Removes a family (tests that register their own)."""
    FAMILIES.pop(name, None)


def family(name: str) -> Family:
    """The row of a family name; ValueError naming the known ones."""
    if name not in FAMILIES:
        raise ValueError(f"unknown model family {name!r}; known: {', '.join(FAMILIES)}")
    return FAMILIES[name]


def family_of(config) -> Family:
    """The row whose config class `config` is an instance of."""
    for row in FAMILIES.values():
        if type(config) is row.config_class:
            return row
    raise ValueError(f"{type(config).__name__} is no registered model family's config")


def family_of_hf_type(model_type: str | None) -> Family | None:
    """The row reading config.json `model_type` (None: no such row)."""
    for row in FAMILIES.values():
        if model_type in row.hf_model_types:
            return row
    return None


def family_of_tf_release(file_names) -> Family | None:
    """The row whose `tf_release_configs` matches one of `file_names` (None: no row)."""
    for row in FAMILIES.values():
        if any(fnmatch.filter(file_names, pattern) for pattern in row.tf_release_configs):
            return row
    return None


def weights(row: Family) -> ModuleType:
    """The family's checkpoint-format module, imported now."""
    if isinstance(row.weights, ModuleType):
        return row.weights
    return importlib.import_module(row.weights or f"cmrcx.weights.{row.name}")


# Problem types whose networks are a head over the family's encoder.
HEADS = ("cloze", "classification", "span", "multiple_choice")
PROBLEMS = (*HEADS, "candidate_pointer", "seq2seq", "causal_lm")


def network(config, problem: str, **options) -> nn.Module:
    """The network of `problem` for `config`'s family.

    problem: "cloze", "classification" (options: num_classes), "span",
    "multiple_choice" (a head over the family's encoder, named after the family),
    "candidate_pointer" (`heads.CandidatePointer` over the family's token states, named
    after the family: its `token_states`, else its encoder's hidden states),
    "seq2seq" (the family's encoder-decoder) or "causal_lm" (its decoder-only LM).
    """
    row = family_of(config)
    if problem == "seq2seq":
        if row.seq2seq is None:
            raise ValueError(f"model family {row.name!r} has no encoder-decoder network")
        return row.seq2seq(config)
    if problem == "causal_lm":
        if row.causal_lm is None:
            raise ValueError(f"model family {row.name!r} has no decoder-only language model")
        return row.causal_lm(config)
    if problem == "candidate_pointer":
        states = row.token_states or row.encoder
        if states is None:
            raise ValueError(f"model family {row.name!r} gives no token states to point with")
        return heads.CandidatePointer(states(config, row.name))
    if problem not in HEADS:
        raise ValueError(f"problem type {problem!r}: use one of {', '.join(PROBLEMS)}")
    if row.encoder is None:
        raise ValueError(f"model family {row.name!r} has no encoder for a {problem} head")
    encoder, head = row.encoder(config, row.name), row.head_options(config)
    if problem == "cloze":
        return heads.SentenceCloze(encoder, head.init_std)
    if problem == "classification":
        return heads.SequenceClassification(
            encoder, options["num_classes"], head.dropout_rate, head.init_std
        )
    if problem == "span":
        return heads.SpanExtraction(encoder, head.init_std)
    return heads.MultipleChoice(encoder, head.dropout_rate, head.init_std)


def decode_model(config):
    """The `cmrcx.models.decoding.DecodeModel` of `config`'s family."""
    row = family_of(config)
    if row.decode_model is None:
        raise ValueError(f"model family {row.name!r} does not decode")
    return row.decode_model(config)


def _albert_encoder(config: albert.AlbertConfig, name: str) -> nn.Module:
    return albert.AlbertEncoder(config, name=name)


def _albert_heads(config: albert.AlbertConfig) -> HeadOptions:
    # transformers' AlbertFor*: classifier_dropout_prob on the pooled output (the releases
    # set no dropout inside the encoder); Google's run_classifier.py drops 0.1 there too.
    return HeadOptions(config.classifier_dropout, config.initializer_range)


def _bert_encoder(config: bert.BertConfig, name: str) -> nn.Module:
    return bert.BertEncoder(config, name=name)


def _bert_heads(config: bert.BertConfig) -> HeadOptions:
    # The BERT baselines: hidden dropout before the classifier, initializer_range stddev.
    return HeadOptions(config.hidden_dropout, config.initializer_range)


def _t5_token_states(config: t5.T5Config, name: str) -> nn.Module:
    return t5.T5TokenStates(config, name=name)


register(
    Family(
        name="bert",
        config_class=bert.BertConfig,
        layout=layouts.BERT,
        # "ernie": ERNIE 1.0 (BERT + ReLU); "roberta": CLUE's BERT-architecture RoBERTas.
        hf_model_types=("bert", "ernie", "roberta"),
        encoder=_bert_encoder,
        head_options=_bert_heads,
    )
)
register(
    Family(
        name="t5",
        config_class=t5.T5Config,
        layout=layouts.T5,
        hf_model_types=("t5", "mt5"),  # LongLM, T5 v1.0 / v1.1; mT5
        seq2seq=t5.T5ForConditionalGeneration,
        decode_model=t5.T5DecodeModel,
        token_states=_t5_token_states,
        tiny_vocab_file="cmrcx:data/longlm_tiny/spiece.model",
    )
)


def _xlnet_encoder(config: xlnet.XLNetConfig, name: str) -> nn.Module:
    return xlnet.XLNetEncoder(config, name=name)


def _xlnet_heads(config: xlnet.XLNetConfig) -> HeadOptions:
    # transformers' XLNetForSequenceClassification / ForMultipleChoice: the summary's last
    # dropout, then logits_proj (normal init, initializer_range).
    return HeadOptions(config.summary_last_dropout, config.initializer_range)


register(
    Family(
        name="xlnet",
        config_class=xlnet.XLNetConfig,
        layout=layouts.XLNET,
        hf_model_types=("xlnet",),  # Chinese XLNet (hfl/chinese-xlnet-mid, -base)
        encoder=_xlnet_encoder,
        head_options=_xlnet_heads,
        tiny_vocab_file="cmrcx:data/xlnet_tiny/spiece.model",
    )
)
register(
    Family(
        name="albert",
        config_class=albert.AlbertConfig,
        layout=layouts.BERT,  # both Chinese releases: Google's Chinese BERT vocabulary
        hf_model_types=("albert",),
        encoder=_albert_encoder,
        head_options=_albert_heads,
        # Google's albert_config.json; brightmart's albert_config_tiny.json (albert_zh).
        tf_release_configs=("albert_config*.json",),
    )
)


def _gpt2_token_states(config: gpt2.GPT2Config, name: str) -> nn.Module:
    return gpt2.GPT2TokenStates(config, name=name)


register(
    Family(
        name="gpt2",
        config_class=gpt2.GPT2Config,
        layout=layouts.GPT2,  # UER's GPT-2: BERT's Chinese vocab.txt (BertTokenizer)
        hf_model_types=("gpt2",),  # uer/gpt2-chinese-cluecorpussmall
        causal_lm=gpt2.GPT2LMHeadModel,
        decode_model=gpt2.GPT2DecodeModel,
        token_states=_gpt2_token_states,
    )
)
