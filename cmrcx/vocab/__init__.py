"""Vocabularies: WordPiece (BERT family) and SentencePiece (T5 family)."""
