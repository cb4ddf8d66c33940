"""`check_field_types`: a config dataclass's values against its declared plain types.

gin passes any Python literal through to a configurable: `--gin.RunConfig.batch_size='8'`
builds a RunConfig whose batch size is a string, which fails deep in the run (a TypeError
in arithmetic, minutes later). The entry points check their configs with this first.
"""

from __future__ import annotations

import dataclasses

from cmrcx.common.errors import ConfigError

# The plain field types a gin binding can get wrong (`batch_size='8'`, `num_layers=2.5`).
_PLAIN_TYPES = {"str": (str,), "int": (int,), "float": (int, float), "bool": (bool,)}
_A_TYPE = {"str": "a string", "int": "an integer", "float": "a number", "bool": "True or False"}


def check_field_types(config, name: str) -> None:
    """ConfigError naming the first field of the dataclass `config` whose value is not of
    its declared plain type (str, int, float, bool, each maybe `| None`); gin passes any
    literal through, and a string where a number belongs fails deep in the run."""
    for field in dataclasses.fields(config):
        kinds = [kind.strip() for kind in str(field.type).split("|")]
        optional = "None" in kinds
        kinds = [kind for kind in kinds if kind != "None"]
        if len(kinds) != 1 or kinds[0] not in _PLAIN_TYPES:
            continue
        value = getattr(config, field.name)
        if value is None and optional:
            continue
        allowed = _PLAIN_TYPES[kinds[0]]
        if isinstance(value, allowed) and (kinds[0] == "bool" or not isinstance(value, bool)):
            continue
        quoting = (
            f" (a string needs quotes inside the shell's: --gin.{name}.{field.name}=\"'VALUE'\")"
            if kinds[0] == "str"
            else " (no quotes around a number or True/False)"
        )
        raise ConfigError(
            f"{name}.{field.name} is {value!r} ({type(value).__name__}); it takes "
            f"{_A_TYPE[kinds[0]]}{' or None' if optional else ''}{quoting}"
        )
