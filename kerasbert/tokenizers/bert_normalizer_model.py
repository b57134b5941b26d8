"""A `FastBertNormalizer` model that normalizes as Hugging Face's `BertNormalizer` does.

tensorflow-text's `FastBertNormalizer` (a TensorFlow op and a TFLite kernel) rewrites text one
code point at a time through a table: a darts-clone trie from each changed code point's UTF-8
bytes to its replacement. The table it builds itself replaces control characters by a space and,
for uncased models, applies NFKC case folding; Hugging Face deletes control, format, private-use
characters and U+FFFD and, for uncased models, lower-cases and strips accents after NFD only.
`bert_normalizer_model(lowercase, strip_accents)` builds the table from Hugging Face's rules:
every Unicode scalar value is normalized on its own by `kerasbert.tokenizers.wordpiece.
normalize_text` (the regular-expression path, checked against `transformers`), and the ones that
change go into the trie. Every step of those rules acts on one character at a time (NFD's reordering of combining
marks aside, and those marks are stripped whenever NFD runs), so the table normalizes whole
texts exactly as the rules do.

Splitting CJK ideographs into words of their own is left out of the table: tensorflow-text's
`FastWordpieceTokenizer` splits them when it splits words.

Example:
>>> import tensorflow_text as tf_text
>>> normalizer = tf_text.FastBertNormalizer(model_buffer=bert_normalizer_model(True, True))
>>> normalizer.normalize(["Ctrl\\x00Cafè ＡＢ\\u200bX ß"]).numpy().tolist()
[b'ctrlcafe \\xef\\xbd\\x81\\xef\\xbd\\x82x \\xc3\\x9f']
"""

import functools
import hashlib
import os

import flatbuffers
import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from kerasbert.atomic_files import write_atomically
from kerasbert.tokenizers.double_array_trie import double_array_trie

CACHE_ENV = "KERASBERT_CACHE_DIR"
# Part of the cached file's name: change it whenever the rules or the layout of the table
# change, so that no table built by older code is read (tests/tokenizers/
# test_bert_normalizer_model.py rebuilds the table and compares it with the cached one).
_FORMAT = "v2"

# The encoding of a trie value (tensorflow-text's fast_bert_normalizer.h): bit 30 says the code
# point changes; bits 6-29 hold the replacement's offset in the string pool, bits 0-5 its length.
_CHANGED = 1 << 30
_LENGTH_BITS = 6
_MAX_LENGTH = (1 << _LENGTH_BITS) - 1
_MAX_POOL_OFFSET = (1 << 24) - 1
# The fields of the `FastBertNormalizerModel` flatbuffer table, in schema order.
_FIELD_LOWER_CASE, _FIELD_TRIE, _FIELD_CODEPOINT_ZERO, _FIELD_POOL = range(4)


@functools.lru_cache(maxsize=None)
def bert_normalizer_model(lowercase, strip_accents):
    """The `FastBertNormalizer` model buffer (bytes) that normalizes as Hugging Face's
    `BertNormalizer(clean_text=True, handle_chinese_chars=False, strip_accents, lowercase)`.

    Building it normalizes every code point (about 2 seconds), so it is built once per setting
    and TensorFlow / tensorflow-text version and kept in the cache folder (`cache_folder`);
    where that folder cannot be written, once per process.
    """
    path = os.path.join(cache_folder(), _cache_name(bool(lowercase), bool(strip_accents)))
    cached = _read_cached(path)
    if cached is not None:
        return cached
    table = _build(bool(lowercase), bool(strip_accents))
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_atomically(path, table + hashlib.sha256(table).digest())
    except OSError:
        pass
    return table


def cache_folder():
    """Where built tables are kept: `$KERASBERT_CACHE_DIR`, else `$XDG_CACHE_HOME/kerasbert`,
    else `~/.cache/kerasbert`."""
    return os.environ.get(CACHE_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "kerasbert")


def _cache_name(lowercase, strip_accents):
    # The table follows the Unicode data of TensorFlow's and tensorflow-text's ops.
    return (f"bert_normalizer-{_FORMAT}-tf{tf.__version__}-tftext{tf_text.__version__}-"
            f"lowercase{int(lowercase)}-strip{int(strip_accents)}.bin")


def _read_cached(path):
    """The table kept at `path`, or None if there is none or it is not whole (its last 32
    bytes are the SHA-256 of the rest: a damaged table would crash the kernel reading it)."""
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError:
        return None
    table, digest = data[:-32], data[-32:]
    return table if len(data) > 32 and hashlib.sha256(table).digest() == digest else None


def _build(lowercase, strip_accents):
    replacements = _changed_code_points(lowercase, strip_accents)
    pool = bytearray()
    pool_offsets = {}
    values = {}
    for character, replacement in replacements.items():
        if len(replacement) > _MAX_LENGTH:
            raise ValueError(f"U+{ord(character.decode()):04X} normalizes to {len(replacement)} "
                             f"bytes; FastBertNormalizer holds at most {_MAX_LENGTH}")
        if replacement and replacement not in pool_offsets:
            pool_offsets[replacement] = len(pool)
            pool.extend(replacement)
        offset = pool_offsets.get(replacement, 0)
        if offset > _MAX_POOL_OFFSET:
            raise ValueError("The normalization table's string pool is too large")
        values[character] = _CHANGED | (offset << _LENGTH_BITS) | len(replacement)
    codepoint_zero = values.pop(b"\x00", 0)
    return _model_flatbuffer(lowercase and strip_accents, double_array_trie(values),
                             codepoint_zero, bytes(pool))


def _changed_code_points(lowercase, strip_accents):
    """{UTF-8 bytes of a code point: its normalized UTF-8 bytes}, for the code points that change."""
    # Imported here: the tokenizer module builds its normalizer from this one.
    from kerasbert.tokenizers.wordpiece import normalize_text

    code_points = np.concatenate([np.arange(0, 0xD800), np.arange(0xE000, 0x110000)])
    characters = tf.strings.unicode_encode(
        tf.constant(code_points, tf.int32)[:, tf.newaxis], "UTF-8")
    normalized = normalize_text(characters, lowercase=lowercase, strip_accents=strip_accents,
                                split_cjk=False)
    characters, normalized = characters.numpy(), normalized.numpy()
    changed = np.flatnonzero(characters != normalized)
    return dict(zip(characters[changed].tolist(), normalized[changed].tolist()))


def _model_flatbuffer(lower_case_nfd_strip_accents, trie_units, data_for_codepoint_zero, pool):
    builder = flatbuffers.Builder(4 * len(trie_units) + len(pool) + 64)
    pool_vector = builder.CreateNumpyVector(np.frombuffer(pool, dtype=np.uint8))
    trie_vector = builder.CreateNumpyVector(np.asarray(trie_units, dtype=np.uint32))
    builder.StartObject(4)
    builder.PrependUOffsetTRelativeSlot(_FIELD_POOL, pool_vector, 0)
    builder.PrependInt32Slot(_FIELD_CODEPOINT_ZERO, data_for_codepoint_zero, 0)
    builder.PrependUOffsetTRelativeSlot(_FIELD_TRIE, trie_vector, 0)
    builder.PrependBoolSlot(_FIELD_LOWER_CASE, bool(lower_case_nfd_strip_accents), False)
    builder.Finish(builder.EndObject())
    return bytes(builder.Output())
