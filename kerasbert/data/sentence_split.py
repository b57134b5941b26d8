"""A rule-based sentence splitter for English-like prose, in TensorFlow ops (RE2 regexes).

A sentence ends at `.`, `!` or `?` (and any closing quotes or brackets after
it) followed by whitespace and a capital letter, a digit or an opening quote
or bracket. It does not end after a common abbreviation (`Mr.`, `e.g.`,
`Fig.`, ...) or a single capital initial (`J. R. R. Tolkien`).
"""

import tensorflow as tf

# Where a sentence may end; the whitespace between the sentences becomes _CUT.
_END = r"""([.!?]['"’”)\]]*)[\s]+(['"‘“(\[]?[\p{Lu}\p{N}])"""
# A character that never occurs in text (a Unicode noncharacter) marks a cut.
_CUT = "\U0010fffe"
_ABBREVIATIONS = ("Mr", "Mrs", "Ms", "Dr", "Prof", "Sr", "Jr", "St", "Mt", "vs", "etc", "e.g",
                  "i.e", "cf", "al", "Fig", "Figs", "Eq", "No", "Nos", "Vol", "pp", "Inc", "Ltd",
                  "Co", "Corp", "Jan", "Feb", "Mar", "Apr", "Jun", "Jul", "Aug", "Sep", "Sept",
                  "Oct", "Nov", "Dec", "approx", "Gen", "Gov", "Sen", "Rep", "Rev")
# A cut right after an abbreviation or a single capital initial is undone.
_NOT_AN_END = (r"(^|[^\p{L}\p{N}.])((?:" + "|".join(a.replace(".", r"\.") for a in _ABBREVIATIONS)
               + r"|\p{Lu})\.)" + _CUT)


def split_sentences(paragraphs):
    """Each paragraph's sentences, ragged tf.string `[paragraphs, None]`.

    >>> split_sentences(["Mr. Smith arrived at 5 p.m. on Monday. He left! Did he? "
    ...                  "J. R. R. Tolkien wrote it (e.g. The Hobbit)."]).to_list()
    [[b'Mr. Smith arrived at 5 p.m. on Monday.', b'He left!', b'Did he?', b'J. R. R. Tolkien wrote it (e.g. The Hobbit).']]
    """
    paragraphs = tf.convert_to_tensor(paragraphs, tf.string)
    marked = tf.strings.regex_replace(paragraphs, _END, r"\1" + _CUT + r"\2")
    # Twice: a match takes the character before the next one ("J. R. R.").
    for _ in range(2):
        marked = tf.strings.regex_replace(marked, _NOT_AN_END, r"\1\2 ")
    sentences = tf.strings.split(marked, sep=_CUT)
    stripped = tf.strings.strip(sentences.flat_values)
    return tf.ragged.boolean_mask(sentences.with_flat_values(stripped),
                                  tf.strings.length(sentences.with_flat_values(stripped)) > 0)
