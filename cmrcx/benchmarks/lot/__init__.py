"""LOT: story understanding and generation, and LongLM pretraining (official semantics)."""
