"""SeqIO registrations of CLUE: classification and reading comprehension."""
