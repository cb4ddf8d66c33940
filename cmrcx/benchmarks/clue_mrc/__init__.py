"""CLUE's machine reading comprehension family: CMRC 2018 (span extraction), ChID (idiom
cloze, multiple choice per blank) and C3 (multiple choice), with the official file formats,
the baselines' input construction and decoding, the official evaluators' semantics and the
leaderboard's submission files.
"""
