"""SeqIO registrations of LOT (LongLM pretraining)."""
