"""Texts for tokenizer parity tests: the shipped corpus and a hand-picked adversarial set."""

import gzip
import re
import shutil
from pathlib import Path

from kerasbert.data import demo

ADVERSARIAL_TEXTS = [
    "",
    " ",
    "   \t\n  ",
    "\n\n",
    "Héllo Wörld ÀÉÎÕÜ naïve café résumé Ångström",
    "a\u0301 e\u0300 o\u0308 (combining accents)",
    "日本語のテキストです。カタカナ ひらがな",
    "中文字符测试，标点符号！",
    "한국어 텍스트",
    "emoji 😀👍🏽 👨‍👩‍👧‍👦 🇩🇪 ❤️",
    "مرحبا بالعالم، هذا نص عربي.",
    "नमस्ते दुनिया। यह हिन्दी पाठ है।",
    "ctrl\x00chars\x07here\x1b[0m and\x7fdel",
    "zero\u200bwidth\u200djoiner\u200cnon\ufeffbom",
    "line\u2028sep\u2029para\x85nel\x0bvt\x0cff",
    "non\u00a0breaking\u3000ideographic\u2009thin space",
    "x" * 150,
    "supercalifragilisticexpialidocious" * 4,
    "ΣΑΣ Straße İstanbul ǅ ﬁ ＡＢＣ ①②",
    "don't stop—it's “quoted” ‘single’ «guillemets» … ¿qué?",
    "$100 + 5% = <tag> ^_^ `code` |pipe| ~tilde @at #hash &amp; * \\ / {braces} [brackets]",
    "Numbers: 3.14159, 1,000,000, 2nd, 10th, 1e-10, 0x1F",
    "URLs https://docs.python.org/3/library/os.path.html and emails someone@example.com",
    "CamelCaseIdentifiers snake_case_names kebab-case-names dotted.module.names",
    "Mixed 中文 and English, with accents é and emoji 🎉.",
    "Repeated     spaces\tand\ttabs\n\nand newlines",
    " leading and trailing spaces ",
    "'s 're 've 'm 'll 'd It's We're They've I'm You'll He'd",
    "``double backtick quotes'' and \"straight\" quotes",
    "The quick brown fox jumps over the lazy dog. " * 40,
]


def corpus_files(plain_text_dir=None):
    """The shipped pretraining corpus files; with `plain_text_dir`, decompressed copies there."""
    files = [Path(path) for path in demo.pretraining_corpus_files()]
    if plain_text_dir is None:
        return files
    plain = []
    for path in files:
        target = Path(plain_text_dir) / path.name.removesuffix(".gz")
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as source, open(target, "wb") as out:
            shutil.copyfileobj(source, out)
        plain.append(target)
    return plain


def assert_offsets_same_in_graph(tokenizer, texts):
    """`tokenize_with_offsets` gives the eager result in a `tf.function` and in a `tf.data` map."""
    import tensorflow as tf

    eager = [tensor.to_list() for tensor in tokenizer.tokenize_with_offsets(texts)]

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def graph(batch):
        return tokenizer.tokenize_with_offsets(batch)

    assert [tensor.to_list() for tensor in graph(tf.constant(texts))] == eager
    dataset = tf.data.Dataset.from_tensor_slices(texts).batch(16).map(tokenizer.tokenize_with_offsets)
    streamed = [[], [], []]
    for batch in dataset:
        for column, tensor in zip(streamed, batch):
            column.extend(tensor.to_list())
    assert streamed == eager


def assert_answer_spans_map_to_tokens(tokenizer, lines, decode_only_letters=False):
    """Answers of three space-separated words in `lines`, given by character offsets, map to the
    tokens that spell exactly that text: those inside the span are those overlapping it, they
    are consecutive, their offsets start and end where the answer does, and they decode to the
    answer (with `decode_only_letters`, only answers of letters and spaces are decoded)."""
    cases = []
    for text in lines[:400]:
        words = list(re.finditer(r"(?<!\S)[A-Za-z]+(?!\S)", text))
        for first in range(0, len(words) - 2, 5):
            if words[first + 2].start() - words[first].end() <= 8:
                cases.append((text, words[first].start(), words[first + 2].end()))
    assert len(cases) > 100
    ids, starts, ends = tokenizer.tokenize_with_offsets([text for text, _, _ in cases])
    for (text, answer_start, answer_end), row, row_starts, row_ends in zip(
            cases, ids.to_list(), starts.to_list(), ends.to_list()):
        inside = [i for i, (s, e) in enumerate(zip(row_starts, row_ends))
                  if s >= answer_start and e <= answer_end]
        overlapping = [i for i, (s, e) in enumerate(zip(row_starts, row_ends))
                       if s < answer_end and e > answer_start]
        assert inside == overlapping == list(range(inside[0], inside[-1] + 1))
        first, last = inside[0], inside[-1]
        assert (row_starts[first], row_ends[last]) == (answer_start, answer_end)
        answer = " ".join(text[answer_start:answer_end].split())
        if not decode_only_letters or re.fullmatch(r"[A-Za-z ]+", answer):
            decoded = tokenizer.detokenize([row[first:last + 1]]).numpy()[0].decode("utf-8")
            assert decoded == (answer.lower() if tokenizer.lowercase else answer)


def transformers_mismatches(ours, reference, texts, **options):
    """`(text, our ids, transformers' ids)` for each of `texts` that a kerasbert tokenizer and a
    `transformers` tokenizer (called with `options`) split differently, no special tokens added."""
    mine = ours.tokenize(texts).to_list()
    theirs = reference(texts, add_special_tokens=False, **options)["input_ids"]
    return [(text, m, t) for text, m, t in zip(texts, mine, theirs) if m != t]
