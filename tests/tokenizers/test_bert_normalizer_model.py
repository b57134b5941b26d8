"""The FastBertNormalizer table built from Hugging Face's rules, and the trie under it.

The reference is the `tokenizers` library's `BertNormalizer`, on every Unicode scalar value one
at a time (the table is a per-code-point map) and on whole texts.
"""

import random
import unicodedata

import flatbuffers
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text as tf_text
from tokenizers.normalizers import BertNormalizer

from kerasbert.tokenizers import bert_normalizer_model as table_module
from kerasbert.tokenizers.bert_normalizer_model import bert_normalizer_model
from kerasbert.tokenizers.double_array_trie import double_array_trie, walk
from kerasbert.tokenizers.wordpiece import normalize_text
from tests.tokenizer_cases import ADVERSARIAL_TEXTS

SETTINGS = [(True, True), (False, False), (True, False), (False, True)]
SCALAR_VALUES = [chr(code) for code in range(0x110000) if not 0xD800 <= code <= 0xDFFF]
# Where the two libraries' Unicode tables disagree on a character Unicode 3.2 already had:
# its general category changed in a later Unicode version (U+1734 HANUNOO SIGN PAMUDPOD became
# a spacing mark, Mc; U+1885 / U+1886 MONGOLIAN LETTER ALI GALI BALUDA / THREE BALUDA became
# non-spacing marks, Mn), so only one of them strips it as an accent.
CATEGORY_CHANGED = {"\u1734", "\u1885", "\u1886"}


def _fast_normalizer(lowercase, strip_accents):
    return tf_text.FastBertNormalizer(model_buffer=bert_normalizer_model(lowercase, strip_accents))


def _hugging_face(lowercase, strip_accents):
    return BertNormalizer(clean_text=True, handle_chinese_chars=False,
                          strip_accents=strip_accents, lowercase=lowercase)


def _trie_units_and_starts(model):
    """The trie's uint32 units in a model buffer, and the byte offsets where they and the
    string pool start."""
    root = flatbuffers.encode.Get(flatbuffers.packer.uoffset, model, 0)
    table = flatbuffers.table.Table(bytearray(model), root)
    trie = table.Offset(4 + 2 * table_module._FIELD_TRIE)
    start = table.Vector(trie)
    units = np.frombuffer(model, dtype=np.uint32, count=table.VectorLen(trie), offset=start)
    return units, start, table.Vector(table.Offset(4 + 2 * table_module._FIELD_POOL))


def _normalized(normalizer, texts):
    outputs = normalizer.normalize(tf.constant([text.encode("utf-8") for text in texts]))
    return [value.decode("utf-8") for value in outputs.numpy().tolist()]


@pytest.mark.parametrize("lowercase, strip_accents", SETTINGS[:2], ids=["uncased", "cased"])
def test_every_code_point_as_hugging_face(lowercase, strip_accents):
    """Each Unicode scalar value alone: equal to Hugging Face's BertNormalizer on every
    character of Unicode 3.2 but the three whose category later changed; the characters added
    since are counted and printed (the two libraries ship different Unicode versions)."""
    ours = _normalized(_fast_normalizer(lowercase, strip_accents), SCALAR_VALUES)
    reference = _hugging_face(lowercase, strip_accents)
    differing = [character for character, normalized in zip(SCALAR_VALUES, ours)
                 if normalized != reference.normalize_str(character)]
    known_in_3_2 = {character for character in differing
                    if unicodedata.ucd_3_2_0.category(character) != "Cn"}
    assert known_in_3_2 == (CATEGORY_CHANGED if strip_accents else set())
    print(f"lowercase={lowercase}: {len(differing)} of {len(SCALAR_VALUES)} code points differ, "
          f"{len(differing) - len(known_in_3_2)} of them added after Unicode 3.2")
    # Control characters, U+FFFD, private use, NFKD-only characters: the cases that differed.
    for character in "\x00\x07\x7f\x85\u200b\ufeff\ufffd\ue000ＡﬁŁ…①":
        assert ours[SCALAR_VALUES.index(character)] == reference.normalize_str(character)


@pytest.mark.parametrize("lowercase, strip_accents", SETTINGS, ids=str)
def test_whole_texts_as_the_regular_expression_path_and_hugging_face(lowercase, strip_accents):
    """The table normalizes texts, not only characters: equal to `normalize_text` and to
    Hugging Face on the adversarial texts."""
    texts = list(ADVERSARIAL_TEXTS)
    ours = _normalized(_fast_normalizer(lowercase, strip_accents), texts)
    expected = normalize_text(tf.constant(texts), lowercase, strip_accents, split_cjk=False)
    assert ours == [value.decode("utf-8") for value in expected.numpy().tolist()]
    reference = _hugging_face(lowercase, strip_accents)
    assert ours == [reference.normalize_str(text) for text in texts]


def test_cached_table_is_what_the_rules_build_now():
    """A table kept in the cache folder by older code would be served instead of a new one."""
    assert table_module._build(True, True) == bert_normalizer_model(True, True)


def test_cache_folder_is_written_once_read_back_and_checked(tmp_path, monkeypatch):
    monkeypatch.setenv(table_module.CACHE_ENV, str(tmp_path / "cache"))
    builds = []

    def build(lowercase, strip_accents):
        builds.append((lowercase, strip_accents))
        return b"table %d%d" % (lowercase, strip_accents)

    monkeypatch.setattr(table_module, "_build", build)
    uncached = table_module.bert_normalizer_model.__wrapped__
    assert uncached(True, False) == b"table 10"
    (path,) = (tmp_path / "cache").iterdir()
    assert "lowercase1-strip0" in path.name and tf.__version__ in path.name
    assert uncached(True, False) == b"table 10" and builds == [(True, False)]   # read back
    path.write_bytes(path.read_bytes()[:-1] + b"?")                            # damaged
    assert uncached(True, False) == b"table 10" and len(builds) == 2
    assert uncached(True, False) == b"table 10" and len(builds) == 2           # rewritten
    # A cache folder that cannot be made: built every time, no error.
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    monkeypatch.setenv(table_module.CACHE_ENV, str(blocker / "cache"))
    assert uncached(False, False) == b"table 00" and len(builds) == 3


def test_tables_differ_by_setting():
    tables = {setting: bert_normalizer_model(*setting) for setting in SETTINGS}
    assert len(set(tables.values())) == 4
    assert bert_normalizer_model(True, True) is tables[True, True]   # built once


@pytest.mark.parametrize("lowercase, strip_accents", SETTINGS, ids=str)
def test_every_node_keeps_its_children_inside_the_array(lowercase, strip_accents):
    """tensorflow-text 2.21's kernels read unit `node ^ offset ^ byte` for any next byte without
    checking the array's length: every node's 256-unit block must lie inside the array. It did
    not for 38 nodes of the cased table: its kernel read the memory after the buffer, and in some
    processes changed U+2032-U+2034 and quotation marks."""
    units, _, _ = _trie_units_and_starts(bert_normalizer_model(lowercase, strip_accents))
    units = units.astype(np.int64)
    labelled = ((units & (1 << 31)) == 0) & ((units & 0xFF) != 0)
    nodes = np.append(np.flatnonzero(labelled), 0)      # every child node, and the root
    assert not np.any(units[nodes] & 0x200)             # offsets are stored plainly
    bases = nodes ^ (units[nodes] >> 10)
    assert (bases | 0xFF).max() < len(units)


def test_kernel_reads_nothing_past_the_trie():
    """A one-key table ("x" deleted) whose string pool, right after the trie, holds units that
    would match any byte read from past the trie's end and delete its character: the kernel
    changes "x" only. With the array cut at its last used unit, it deleted 6 more characters."""
    deleted = table_module._CHANGED                       # replacement: offset 0, length 0
    units = double_array_trie({b"x": deleted})
    root_base = units[0] >> 10                            # the root is unit 0: its offset is its base
    far = 1 << 12
    bait = np.zeros(2 * far, np.uint32)
    first = len(units) + 1                                # the unit after the pool's length word
    for index in range(first, first + 256):
        bait[index - first] = ((index ^ root_base) & 0xFF) | 0x100 | (far << 10)
        bait[(index ^ far) - first] = deleted             # the bait's leaf, at `index ^ far`
    model = table_module._model_flatbuffer(False, units, 0, bait.tobytes())
    found, trie_start, pool_start = _trie_units_and_starts(model)
    assert found.tolist() == units and pool_start == trie_start + 4 * first   # bait follows trie
    texts = [bytes([code]) for code in range(1, 128)]
    normalized = tf_text.FastBertNormalizer(model_buffer=model).normalize(texts).numpy().tolist()
    assert [text for text, result in zip(texts, normalized) if text != result] == [b"x"]


def test_trie_walks_like_a_dictionary():
    generator = random.Random(0)
    keys = {bytes(generator.randrange(1, 256) for _ in range(generator.randrange(1, 6)))
            for _ in range(3000)}
    values = {key: generator.randrange(0, 2 ** 31) for key in keys}
    units = double_array_trie(values)
    assert all(walk(units, key) == value for key, value in values.items())
    # Keys that are not in it: prefixes, extensions and strangers.
    others = {key + b"\x01" for key in keys} | {key[:-1] for key in keys if len(key) > 1}
    others |= {bytes(generator.randrange(1, 256) for _ in range(3)) for _ in range(3000)}
    assert all(walk(units, key) is None for key in others - keys)
    assert np.asarray(units, dtype=np.uint32).size == len(units)   # every unit fits uint32


def test_trie_refuses_what_it_cannot_hold():
    with pytest.raises(ValueError, match="non-empty bytes"):
        double_array_trie({b"": 1})
    with pytest.raises(ValueError, match=r"b'a'.*2\*\*31"):
        double_array_trie({b"a": 2 ** 31})
