"""RoBERTa / GPT-2 byte-level BPE tokenization, in the TensorFlow graph."""

import json

import keras
import tensorflow as tf

from kerasbert import file_system
from kerasbert.tokenizers.base import Tokenizer, VocabularyError, vocabulary_from_ids
from kerasbert.tokenizers.text_inputs import to_text_tensor

# Character classes as the Hugging Face `tokenizers` ByteLevel regex (Oniguruma, Unicode mode,
# Unicode 16) sees them. Whitespace (`\s`): tab, line feed, vertical tab, form feed, carriage
# return, U+0085 and the separators Zs, Zl, Zp; RE2's `\s` is ASCII-only, so it is spelled out.
_WS = r"\t\n\x0b\x0c\r\x{85}\p{Z}"
# Letters and numbers that Unicode 16 added and TensorFlow's RE2 tables (Unicode 15) lack.
_LETTERS_16 = (r"\x{1c89}-\x{1c8a}\x{a7cb}-\x{a7cd}\x{a7da}-\x{a7dc}\x{105c0}-\x{105f3}"
               r"\x{10d4a}-\x{10d65}\x{10d6f}-\x{10d85}\x{10ec2}-\x{10ec4}\x{11380}-\x{11389}"
               r"\x{1138b}\x{1138e}\x{11390}-\x{113b5}\x{113b7}\x{113d1}\x{113d3}"
               r"\x{11bc0}-\x{11be0}\x{13460}-\x{143fa}\x{16100}-\x{1611d}\x{16d40}-\x{16d6c}"
               r"\x{18cff}\x{1e5d0}-\x{1e5ed}\x{1e5f0}\x{2ebf0}-\x{2ee5d}")
_NUMBERS_16 = (r"\x{10d40}-\x{10d49}\x{116d0}-\x{116e3}\x{11bf0}-\x{11bf9}\x{16130}-\x{16139}"
               r"\x{16d70}-\x{16d79}\x{1ccf0}-\x{1ccf9}\x{1e5f1}-\x{1e5fa}")
_L = rf"\p{{L}}{_LETTERS_16}"
_N = rf"\p{{N}}{_NUMBERS_16}"
# GPT-2's pre-tokenization pattern,
#     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
# in RE2, which has no lookahead: regex_replace passes put the byte \xff (never part of UTF-8
# text, and matched by no RE2 character class) after every word, and tf.strings.split cuts there.
_END = b"\xff"
# 1. `\s+(?!\S)` leaves the last character of a whitespace run that is followed by text to that
#    text: mark such runs before their last character. (Before \xff, a cut-out special token, a
#    run stays whole.)
_CUT = rf"([{_WS}])([{_WS}][^{_WS}])"
# 2. Each word, which now matches as it would in the whole text.
_WORD = rf"'s|'t|'re|'ve|'m|'ll|'d| ?[{_L}]+| ?[{_N}]+| ?[^{_WS}{_L}{_N}]+|[{_WS}]+"
# Marks (never part of UTF-8 text) of the edits that lstrip/rstrip tokens and add_prefix_space
# make, for offsets: _DROP before and after whitespace a token takes, _ADD before an added space.
_DROP = b"\xfd"
_ADD = b"\xfc"
_NO_MERGE = 2**31 - 1


def bytes_to_unicode():
    """GPT-2's byte -> character table: a list of 256 one-character strings, indexed by byte.

    Printable Latin-1 bytes stand for themselves; the other 68 (controls,
    space, soft hyphen, ...) are given the characters U+0100 onwards, in byte
    order, so that every token is printable text.
    """
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            table[byte] = chr(byte)
        else:
            table[byte] = chr(0x100 + extra)
            extra += 1
    return [table[byte] for byte in range(256)]


def read_vocabulary_json(path):
    """The tokens of a GPT-2 / RoBERTa `vocab.json` ({token: id}), as a list in id order.

    Unlike Hugging Face (which tolerates them), raises `VocabularyError` for a
    file that is not a JSON object of token -> integer id, a token listed
    twice, two tokens sharing an id, or ids that are not exactly 0..n-1.
    """
    if not file_system.isfile(path):
        raise FileNotFoundError(f"vocabulary file {path} does not exist")
    with file_system.open_file(path, encoding="utf-8") as file:
        text = file.read()

    def no_duplicate_keys(pairs):
        seen = {}
        for token, token_id in pairs:
            if token in seen:
                raise VocabularyError(f"{path}: token {token!r} is listed twice "
                                      f"(ids {seen[token]} and {token_id})")
            seen[token] = token_id
        return seen

    try:
        entries = json.loads(text, object_pairs_hook=no_duplicate_keys)
    except json.JSONDecodeError as error:
        raise VocabularyError(f"{path} is not valid JSON: {error}") from None
    if not isinstance(entries, dict):
        raise VocabularyError(f"{path} must hold a JSON object {{token: id}}, "
                              f"not a {type(entries).__name__}")
    return vocabulary_from_ids(entries, path)


def read_merges_txt(path):
    """The merge rules of a GPT-2 `merges.txt`, in rank order, as "left right" strings.

    A first line starting with `#version` is skipped, as are line endings
    (`\\n` or `\\r\\n`); any other line must be two tokens separated by one
    space (`VocabularyError` naming the line otherwise, as Hugging Face does).
    """
    if not file_system.isfile(path):
        raise FileNotFoundError(f"merges file {path} does not exist")
    merges = []
    with file_system.open_file(path, encoding="utf-8", newline="") as file:
        for number, line in enumerate(file, start=1):
            line = line.removesuffix("\n").removesuffix("\r")
            if number == 1 and line.startswith("#version"):
                continue
            if len(line.split(" ")) != 2 or "" in line.split(" "):
                raise VocabularyError(f"{path} line {number}: expected two tokens separated by "
                                      f"one space, got {line!r}")
            merges.append(line)
    return merges


@keras.saving.register_keras_serializable(package="kerasbert")
class BytePairTokenizer(Tokenizer):
    """RoBERTa's byte-level BPE tokenizer, exactly as Hugging Face's `RobertaTokenizer(Fast)`.

    The text is split by GPT-2's pre-tokenization pattern (contractions,
    letters, digits, other symbols, each optionally after one space;
    whitespace runs leave their last character to the word that follows),
    every byte of a word becomes one of 256 printable characters
    (`bytes_to_unicode`), and the merge rules are applied lowest rank first.
    All of it runs in TensorFlow ops (RE2 regexes, lookup tables and one
    `tf.while_loop` that merges every word of the batch at once), so it works
    in `tf.function`, `tf.data` and SavedModels. Words seen before are served
    from a cache (`cache_capacity` words per tokenizer), which changes
    nothing but the speed.

    Like Hugging Face, the special token strings (`<s>`, `</s>`, `<unk>`,
    `<pad>`, `<mask>`) written inside the text become their ids; pass
    `split_special_tokens=True` to tokenize them as plain text instead.
    Characters whose byte tokens are missing from the vocabulary are dropped,
    as Hugging Face's BPE (which has no unknown token for RoBERTa) does.

    `tokenize_with_offsets` gives Hugging Face's `offset_mapping` (with its
    `trim_offsets`: a token's leading "Ġ" is not part of its span, an
    all-space token's span is empty; byte tokens of one character all span
    that character). Whitespace that an `lstrip_tokens` / `rstrip_tokens`
    token takes is in no span; a space that `add_prefix_space` adds belongs to
    the character after it and, in the text's first token, is not trimmed
    (Hugging Face's rule for a "first" token: the first of the text, or one
    that starts at character 0).

    Args:
        vocabulary: the tokens in id order (the keys of a `vocab.json` sorted
            by id; `read_vocabulary_json` reads one).
        merges: the merge rules in rank order, each "left right" (the lines of
            a `merges.txt` after its `#version` header; `read_merges_txt`).
        add_prefix_space: put a space before text that does not start with
            one, so its first word is tokenized like any other.
        split_special_tokens: tokenize special token strings in the text as
            text instead of mapping them to their ids.
        lstrip_tokens, rstrip_tokens: special tokens that take the whitespace
            before (after) them in the text, like Hugging Face's
            `AddedToken(lstrip=True)` (the Hub's RoBERTa `<mask>`).

    Example:
    >>> vocab = ["<s>", "<pad>", "</s>", "<unk>", "<mask>", *bytes_to_unicode(), "Ġ" + "w",
    ...          "o" + "r", "Ġw" + "or", "Ġwor" + "d"]
    >>> merges = ["Ġ w", "o r", "Ġw or", "Ġwor d"]
    >>> tokenizer = BytePairTokenizer(vocab, merges)
    >>> tokenizer.tokenize(["a word"]).to_list()
    [[102, 264]]
    >>> tokenizer(["a"], [" words"], max_length=8)["token_ids"].numpy().tolist()
    [[0, 102, 2, 2, 264, 120, 2, 1]]
    >>> tokenizer.detokenize([[102, 264]]).numpy().tolist()
    [b'a word']
    """

    pair_separators = 2
    second_segment_id = 0
    # Words (pre-tokenized pieces) the cache holds at most, and the most tokens a cached word may
    # have (longer ones are merged every time they are seen).
    cache_capacity = 100_000
    cache_max_tokens = 15

    def __init__(self, vocabulary, merges, add_prefix_space=False, unk_token="<unk>",
                 cls_token="<s>", sep_token="</s>", pad_token="<pad>", mask_token="<mask>",
                 split_special_tokens=False, lstrip_tokens=(), rstrip_tokens=(),
                 pair_separators=2, **kwargs):
        if pair_separators not in (1, 2):
            raise ValueError(f"pair_separators must be 1 or 2, got {pair_separators!r}")
        self.pair_separators = pair_separators
        special_tokens = {"pad": pad_token, "unk": unk_token, "cls": cls_token,
                          "sep": sep_token, "mask": mask_token}
        super().__init__(vocabulary, special_tokens, **kwargs)
        self.merges = _as_merge_strings(merges)
        self.add_prefix_space = bool(add_prefix_space)
        self.split_special_tokens = bool(split_special_tokens)
        self.lstrip_tokens = list(lstrip_tokens)
        self.rstrip_tokens = list(rstrip_tokens)
        for token in self.lstrip_tokens + self.rstrip_tokens:
            if token not in self.special_tokens.values():
                raise ValueError(f"{token!r} in lstrip_tokens/rstrip_tokens is not one of the "
                                 f"special tokens {sorted(set(self.special_tokens.values()))}")
        # Bytes -> ids of their one-character tokens (-1: not in the vocabulary, dropped).
        self._byte_ids = tf.constant(
            [self._token_to_id.get(char, -1) for char in bytes_to_unicode()], tf.int32)
        # Merge rules: (left id, right id) -> rank, rank -> merged id. A rule listed twice keeps
        # its last rank, as in Hugging Face's BPE.
        ranks, merged_ids = _index_merges(self.merges, self._token_to_id, lambda i: f"merges[{i}]")
        size = len(self.vocabulary)
        self._merge_ranks = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant([left * size + right for left, right in ranks], tf.int64),
                tf.constant(list(ranks.values()), tf.int32)),
            default_value=_NO_MERGE)
        self._merged_ids = tf.constant(merged_ids or [0], tf.int32)
        # With "consistent" rules (every token is made before any rule that uses it, as trained
        # merges are), every occurrence of a word's best pair can be merged in the same step;
        # otherwise merge only the leftmost one per step, as Hugging Face's priority queue does.
        self._merge_all_occurrences = _rules_are_consistent(ranks, merged_ids)
        # Word -> [number of tokens, ids...]. Words are never \xff or \xfe (not UTF-8).
        self._cache = tf.lookup.experimental.DenseHashTable(
            tf.string, tf.int32, default_value=tf.fill([self.cache_max_tokens + 1], -1),
            empty_key=b"\xff", deleted_key=b"\xfe", initial_num_buckets=1024)
        self._special_pattern = ""
        self._strip_patterns = []
        self._word_pattern = _WORD
        self._special_ids = None
        if not self.split_special_tokens:
            # Longest first: RE2 takes the first alternative that matches, Hugging Face the longest.
            strings = sorted({s for s in self.special_tokens.values() if s},
                             key=lambda s: (-len(s), s))
            self._special_pattern = "|".join(_re2_literal(s) for s in strings)
            # Whitespace that Hugging Face's AddedToken(lstrip/rstrip=True) takes into the token.
            # (pattern, replacement, replacement that keeps the whitespace between _DROP marks)
            self._strip_patterns = (
                [(rf"([{_WS}]+)({_re2_literal(s)})", "\\2", _DROP + b"\\1" + _DROP + b"\\2")
                 for s in self.lstrip_tokens]
                + [(rf"({_re2_literal(s)})([{_WS}]+)", "\\1", b"\\1" + _DROP + b"\\2" + _DROP)
                   for s in self.rstrip_tokens])
            self._word_pattern = f"{self._special_pattern}|{_WORD}"
            self._special_ids = tf.lookup.StaticHashTable(
                tf.lookup.KeyValueTensorInitializer(
                    tf.constant(strings), tf.constant([self._token_to_id[s] for s in strings],
                                                      tf.int32)),
                default_value=-1)
        # Each id's bytes, for detokenization: a token made of byte characters stands for those
        # bytes; any other token (e.g. an added one) for its own UTF-8 text, as in Hugging Face.
        char_bytes = {char: bytes([byte]) for byte, char in enumerate(bytes_to_unicode())}
        id_bytes = [
            b"".join(char_bytes[c] for c in token) if all(c in char_bytes for c in token)
            else token.encode("utf-8") for token in self.vocabulary]
        self._id_bytes = tf.constant(id_bytes)
        self._tokenize_graph = tf.function(
            self._tokenize_texts, input_signature=[tf.TensorSpec([None], tf.string)],
            autograph=False)
        # For offsets: the bytes each id covers, and its leading / trailing spaces ("Ġ" or
        # whitespace characters), which Hugging Face's trim_offsets leaves out of its span.
        self._id_byte_lengths = tf.constant([len(b) for b in id_bytes], tf.int64)
        self._id_leading_spaces = tf.constant(
            [_count_spaces(token) for token in self.vocabulary], tf.int32)
        self._id_trailing_spaces = tf.constant(
            [_count_spaces(token[::-1]) for token in self.vocabulary], tf.int32)
        self._all_bytes_known = all(char in self._token_to_id for char in bytes_to_unicode())
        self._offsets_graph = tf.function(
            self._offsets_texts, input_signature=[tf.TensorSpec([None], tf.string)],
            autograph=False)

    @classmethod
    def from_files(cls, vocabulary_file, merges_file, **kwargs):
        """A tokenizer from a `vocab.json` and a `merges.txt` (see `read_vocabulary_json`).

        Errors name the file and the token or line at fault.
        """
        vocabulary = read_vocabulary_json(vocabulary_file)
        merges = read_merges_txt(merges_file)
        offset = 1 if _has_version_header(merges_file) else 0
        _index_merges(merges, {token: i for i, token in enumerate(vocabulary)},
                      lambda i: f"{merges_file} line {i + 1 + offset}")
        return cls(vocabulary, merges, source=vocabulary_file, **kwargs)

    # --- text -> ids ---

    def _tokenize(self, texts):
        if tf.executing_eagerly():
            return self._tokenize_graph(texts)
        return self._tokenize_texts(texts)

    def _tokenize_texts(self, texts):
        # Empty "words" (left between markers) stay: they have no tokens, and are cheaper to
        # look up than to remove.
        words = self._split_words(texts, drop_empty=False)
        ids = self._word_ids(words.flat_values)
        # Ragged constructors here skip their validation: an assertion is a conditional, which
        # costs a function call per batch in tf.data.
        return tf.RaggedTensor.from_row_splits(
            ids.flat_values, tf.gather(ids.row_splits, words.row_splits), validate=False)

    def _tokenize_with_offsets(self, texts):
        if tf.executing_eagerly():
            return self._offsets_graph(texts)
        return self._offsets_texts(texts)

    def _offsets_texts(self, texts):
        # The words' bytes, in order, are the bytes of the edited texts of the batch one after
        # the other (the "stream"); without lstrip/rstrip tokens and add_prefix_space, the
        # texts themselves.
        edits = self.add_prefix_space or self._strip_patterns
        if edits:
            words, marked = self._split_words(texts, drop_empty=False, marked=True)
        else:
            words = self._split_words(texts, drop_empty=False)
        flat_words = words.flat_values
        ids = self._word_ids(flat_words)
        token_ids = ids.flat_values
        token_row = tf.gather(words.value_rowids(), ids.value_rowids())
        token_splits = tf.gather(ids.row_splits, words.row_splits)
        # Each token stands for a run of its word's bytes, the tokens of a word for all of them
        # in order (a special token for its word's text), so the runs follow one another through
        # the stream. Bytes missing from the vocabulary are dropped and covered by no token.
        lengths = tf.gather(self._id_byte_lengths, token_ids)
        byte_ends = tf.cumsum(lengths)
        byte_starts = byte_ends - lengths
        if not self._all_bytes_known:
            # Runs in the kept bytes -> positions in the stream. (Hugging Face counts a word's
            # offsets over its kept bytes only, so after a dropped character its spans shift
            # onto the wrong characters; these stay on the characters each token came from.)
            word_lengths = tf.strings.length(flat_words)
            byte_values = tf.strings.unicode_decode(flat_words, "ISO-8859-1").flat_values
            known = tf.gather(self._byte_ids, byte_values) >= 0
            if self._special_ids is not None:
                known |= tf.repeat(self._special_ids.lookup(flat_words) >= 0, word_lengths)
            kept = tf.where(known)[:, 0]
            byte_starts = tf.gather(kept, byte_starts)
            byte_ends = tf.gather(kept, byte_ends - 1) + 1
        if edits:
            # Edited stream -> the texts' bytes; an added space stands at the byte after it.
            to_text = _edited_to_text_bytes(marked)
            byte_starts = tf.gather(to_text, byte_starts)
            byte_ends = tf.gather(to_text, byte_ends - 1) + 1
        # Stream bytes -> characters: a token that starts or ends inside a character (a byte
        # token of an emoji) spans the whole character, as in Hugging Face.
        characters = tf.strings.unicode_decode(texts, "UTF-8")
        code_points = characters.flat_values
        character_lengths = (1 + tf.cast(code_points >= 0x80, tf.int64)
                             + tf.cast(code_points >= 0x800, tf.int64)
                             + tf.cast(code_points >= 0x10000, tf.int64))
        # The character of each stream byte (one gather is cheaper than a binary search).
        byte_characters = tf.repeat(tf.range(tf.size(code_points, tf.int64)), character_lengths)
        row_base = tf.gather(characters.row_starts(), token_row)
        starts = tf.gather(byte_characters, byte_starts) - row_base
        ends = tf.gather(byte_characters, byte_ends - 1) + 1 - row_base
        starts, ends = tf.cast(starts, tf.int32), tf.cast(ends, tf.int32)
        # Hugging Face's ByteLevel trim_offsets: leading spaces move the start (at most to the
        # end), trailing ones the end (at least to the start); an all-space token is empty.
        leading = tf.gather(self._id_leading_spaces, token_ids)
        if self.add_prefix_space:
            # Hugging Face keeps the one leading space of a "first" token: the row's first
            # token, or one that starts at character 0.
            first = tf.equal(tf.range(tf.size(token_row, tf.int64)),
                             tf.gather(token_splits, token_row))
            leading = tf.where((first | tf.equal(starts, 0)) & tf.equal(leading, 1), 0, leading)
        trailing = tf.gather(self._id_trailing_spaces, token_ids)
        starts = tf.minimum(starts + leading, ends)
        ends = tf.where((trailing > 0) & (ends >= trailing),
                        tf.maximum(ends - trailing, starts), ends)

        def shaped(values):
            return tf.RaggedTensor.from_row_splits(values, token_splits, validate=False)

        return shaped(token_ids), shaped(starts), shaped(ends)

    def pre_tokenize(self, texts):
        """The words (pre-tokenized pieces) of each text, ragged tf.string `[batch, None]`."""
        return self._split_words(to_text_tensor(texts))

    def _split_words(self, texts, drop_empty=True, marked=False):
        """The words of each text; with `marked`, also the texts with the edits marked.

        The marked texts keep the whitespace that lstrip/rstrip tokens take between _DROP
        bytes and put _ADD before each space that add_prefix_space adds.
        """
        for pattern, replacement, marked_replacement in self._strip_patterns:
            texts = tf.strings.regex_replace(
                texts, pattern, marked_replacement if marked else replacement)
        return _split_words(texts, self._special_pattern, self._special_ids,
                            self.add_prefix_space, self._word_pattern, drop_empty, marked)

    def _word_ids(self, words):
        """Token ids of each word (1-D tf.string), ragged `[words, None]`: cached or merged."""
        unique, index = tf.unique(words)
        cached = self._cache.lookup(unique)
        cached.set_shape([None, self.cache_max_tokens + 1])
        lengths, ids = cached[:, 0], cached[:, 1:]
        if self._special_ids is not None:
            special = self._special_ids.lookup(unique)
            lengths = tf.where(special >= 0, 1, lengths)
            ids = tf.where(tf.expand_dims(special >= 0, 1), tf.expand_dims(special, 1), ids)
        miss = lengths < 0
        missing = tf.boolean_mask(unique, miss)
        merged = self._merge(missing)
        merged_lengths = tf.cast(merged.row_lengths(), tf.int32)
        storable = (merged_lengths <= self.cache_max_tokens) & (
            self._cache.size() + tf.size(missing, tf.int64) <= self.cache_capacity)
        insert = self._cache.insert(
            tf.boolean_mask(missing, storable),
            tf.boolean_mask(tf.concat([tf.expand_dims(merged_lengths, 1), merged.to_tensor(
                -1, shape=[None, self.cache_max_tokens])], axis=1), storable))
        # Rows of the known words (misses empty), then the merged ones; each word picks its row.
        known_lengths = tf.maximum(lengths, 0)
        every = tf.concat([tf.RaggedTensor.from_row_lengths(
            tf.boolean_mask(ids, tf.sequence_mask(known_lengths, self.cache_max_tokens)),
            tf.cast(known_lengths, tf.int64), validate=False), merged], axis=0)
        count = tf.size(unique)
        row = tf.where(miss, count + tf.cumsum(tf.cast(miss, tf.int32)) - 1, tf.range(count))
        with tf.control_dependencies([insert]):
            return tf.gather(every, tf.gather(row, index))

    def _merge(self, words):
        """BPE of every word (1-D tf.string) at once: ragged int32 ids `[words, None]`."""
        num_words = tf.size(words)
        byte_values = tf.strings.unicode_decode(words, "ISO-8859-1")
        symbols = tf.gather(self._byte_ids, byte_values.flat_values)
        known = symbols >= 0
        symbols = tf.boolean_mask(symbols, known)
        rows = tf.boolean_mask(tf.cast(byte_values.value_rowids(), tf.int32), known)
        size = tf.constant(len(self.vocabulary), tf.int64)

        def step(symbols, rows, _):
            # The pair starting at each symbol, its rule's rank, and each word's best rank.
            keys = (tf.cast(symbols, tf.int64) * size
                    + tf.cast(_shift_left(symbols, 0), tf.int64))
            ranks = tf.where(tf.equal(rows, _shift_left(rows, -1)),
                             self._merge_ranks.lookup(keys), _NO_MERGE)
            best = tf.math.unsorted_segment_min(ranks, rows, num_words)
            chosen = tf.equal(ranks, tf.gather(best, rows)) & (ranks < _NO_MERGE)
            position = tf.range(tf.size(ranks))
            if self._merge_all_occurrences:
                # Runs of overlapping occurrences ("a a a" for the rule "a a"): keep every other
                # one, from the left.
                starts = chosen & ~_shift_right(chosen, False)
                run = tf.maximum(tf.cumsum(tf.cast(starts, tf.int32)) - 1, 0)
                run_start = tf.gather(tf.concat([tf.boolean_mask(position, starts), [0]], 0), run)
                chosen = chosen & tf.equal((position - run_start) % 2, 0)
            else:
                first = tf.math.unsorted_segment_min(
                    tf.where(chosen, position, _NO_MERGE), rows, num_words)
                chosen = chosen & tf.equal(position, tf.gather(first, rows))
            merged = tf.gather(self._merged_ids, tf.where(chosen, ranks, 0))
            keep = ~_shift_right(chosen, False)
            return (tf.boolean_mask(tf.where(chosen, merged, symbols), keep),
                    tf.boolean_mask(rows, keep), tf.reduce_any(chosen))

        symbols, rows, _ = tf.while_loop(
            lambda symbols, rows, changed: changed, step,
            (symbols, rows, tf.size(symbols) > 1),
            shape_invariants=(tf.TensorShape([None]), tf.TensorShape([None]),
                              tf.TensorShape([])))
        return tf.RaggedTensor.from_value_rowids(symbols, tf.cast(rows, tf.int64),
                                                 nrows=tf.cast(num_words, tf.int64),
                                                 validate=False)

    # --- ids -> text ---

    def _detokenize(self, token_ids):
        text = tf.strings.reduce_join(tf.gather(self._id_bytes, token_ids), axis=-1)
        # Byte sequences that are not UTF-8 become U+FFFD, as `bytes.decode(errors="replace")`.
        return tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="replace",
                                            replacement_char=0xFFFD)

    def get_config(self):
        config = super().get_config()
        config.update({
            "merges": list(self.merges),
            "add_prefix_space": self.add_prefix_space,
            **{f"{name}_token": token for name, token in self.special_tokens.items()},
            "split_special_tokens": self.split_special_tokens,
            "lstrip_tokens": list(self.lstrip_tokens),
            "rstrip_tokens": list(self.rstrip_tokens),
            "pair_separators": self.pair_separators,
        })
        return config


def pre_tokenize(texts):
    """GPT-2's pre-tokenization of each text: its words, ragged tf.string `[batch, None]`.

    >>> pre_tokenize(["It's  2 o'clock!"]).to_list()
    [[b'It', b"'s", b' ', b' 2', b' o', b"'", b'clock', b'!']]
    """
    return _split_words(to_text_tensor(texts))


def _split_words(texts, special_pattern="", special_ids=None, add_prefix_space=False,
                 word_pattern=_WORD, drop_empty=True, marked=False):
    """Texts -> their words, ragged tf.string `[batch, None]`; special tokens are words too.

    With `marked` (texts whose whitespace taken by lstrip/rstrip tokens is kept between _DROP
    bytes), also those texts with _ADD before each space that add_prefix_space adds.
    """
    if special_pattern:
        # Special tokens are cut out first; the text between them is split on its own.
        texts = tf.strings.regex_replace(texts, f"({special_pattern})", _END + b"\\1" + _END)
    marked_texts = texts
    if marked:
        texts = _without_dropped(texts)
    if add_prefix_space:
        # Hugging Face's ByteLevel(add_prefix_space=True) gives each stretch of text between
        # special tokens a leading space unless it starts with one.
        stretches = tf.strings.split(texts, sep=_END)
        flat = stretches.flat_values
        needs_space = tf.not_equal(flat, "") & tf.not_equal(
            tf.strings.substr(flat, tf.zeros_like(flat, tf.int32), tf.ones_like(flat, tf.int32)),
            " ")
        if special_ids is not None:
            needs_space &= special_ids.lookup(flat) < 0
        flat = tf.where(needs_space, tf.strings.join([" ", flat]), flat)
        texts = tf.strings.reduce_join(stretches.with_flat_values(flat), axis=-1, separator=_END)
        if marked:
            marked_stretches = tf.strings.split(marked_texts, sep=_END)
            marked_flat = marked_stretches.flat_values
            marked_flat = tf.where(needs_space, tf.strings.join([_ADD + b" ", marked_flat]),
                                   marked_flat)
            marked_texts = tf.strings.reduce_join(
                marked_stretches.with_flat_values(marked_flat), axis=-1, separator=_END)
    texts = tf.strings.regex_replace(texts, _CUT, b"\\1" + _END + b"\\2")
    texts = tf.strings.regex_replace(texts, word_pattern, b"\\0" + _END)
    pieces = tf.strings.split(texts, sep=_END)
    if not drop_empty:
        words = pieces
    else:
        keep = tf.not_equal(pieces.flat_values, "")
        words = tf.RaggedTensor.from_value_rowids(
            tf.boolean_mask(pieces.flat_values, keep),
            tf.boolean_mask(pieces.value_rowids(), keep), nrows=pieces.nrows())
    if marked:
        return words, tf.strings.reduce_join(tf.strings.split(marked_texts, sep=_END), axis=-1)
    return words


def _without_dropped(texts):
    """`texts` without the runs between pairs of _DROP bytes (nor those bytes)."""
    pieces = tf.strings.split(texts, sep=_DROP)
    position = tf.range(tf.size(pieces.flat_values, tf.int64)) - tf.gather(
        pieces.row_starts(), pieces.value_rowids())
    return tf.strings.reduce_join(pieces.with_flat_values(
        tf.where(tf.equal(position % 2, 0), pieces.flat_values, "")), axis=-1)


def _edited_to_text_bytes(marked_texts):
    """Where each byte of the edited texts is in the texts (both a batch's, one after the other).

    `marked_texts` as `_split_words` gives them. An added space is put where the next byte of
    the texts that is not dropped is, as Hugging Face aligns it.
    """
    values = tf.strings.unicode_decode(marked_texts, "ISO-8859-1").flat_values
    drop_mark = tf.equal(values, _DROP[0])
    add_mark = tf.equal(values, _ADD[0])
    # An opening mark and the bytes up to the closing one.
    dropped = tf.equal(tf.math.floormod(tf.cumsum(tf.cast(drop_mark, tf.int32)), 2), 1)
    added = _shift_right(add_mark, False)
    mark = drop_mark | add_mark
    in_texts = ~mark & ~added
    index = tf.range(tf.size(values, tf.int64))
    # The next kept byte of the texts, at or after each byte (a last entry for "none").
    kept = tf.concat([tf.boolean_mask(index, in_texts & ~dropped), [tf.size(index, tf.int64)]], 0)
    source = tf.where(added, tf.gather(kept, tf.searchsorted(kept, index)), index)
    position = tf.concat([tf.cumsum(tf.cast(in_texts, tf.int64), exclusive=True), [0]], 0)
    return tf.boolean_mask(tf.gather(position, source), ~mark & ~dropped)


# Characters Rust's `char::is_whitespace` (Unicode White_Space) accepts, and GPT-2's byte
# character for the space byte: what Hugging Face's ByteLevel trim_offsets counts as spaces.
_SPACES = frozenset("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
                    "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\u0120")


def _count_spaces(token):
    """How many characters at the start of `token` are spaces (see `_SPACES`)."""
    count = 0
    while count < len(token) and token[count] in _SPACES:
        count += 1
    return count


def _shift_right(values, fill):
    """`values` moved one place right, `fill` first (same length, also when empty)."""
    return tf.concat([[fill], values], axis=0)[:-1]


def _shift_left(values, fill):
    """`values` moved one place left, `fill` last (same length, also when empty)."""
    return tf.concat([values, [fill]], axis=0)[1:]


def _as_merge_strings(merges):
    if isinstance(merges, (str, bytes)):
        raise TypeError("merges must be a list of 'left right' rules; use "
                        "BytePairTokenizer.from_files to read a merges.txt")
    rules = []
    for index, merge in enumerate(merges):
        if isinstance(merge, (tuple, list)) and len(merge) == 2:
            merge = f"{merge[0]} {merge[1]}"
        if not isinstance(merge, str):
            raise TypeError(f"merges[{index}] is {merge!r}; expected a 'left right' string")
        rules.append(merge)
    return rules


def _index_merges(merges, token_to_id, where):
    """{(left id, right id): rank} (last rank of a repeated rule) and merged id of each rank."""
    ranks, merged_ids = {}, []
    for rank, merge in enumerate(merges):
        parts = merge.split(" ")
        if len(parts) != 2 or "" in parts:
            raise VocabularyError(f"{where(rank)}: expected two tokens separated by one space, "
                                  f"got {merge!r}")
        for part in parts:
            if part not in token_to_id:
                raise VocabularyError(f"{where(rank)}: merge {merge!r} uses {part!r}, "
                                      "which is not in the vocabulary")
        if parts[0] + parts[1] not in token_to_id:
            raise VocabularyError(f"{where(rank)}: merge {merge!r} makes "
                                  f"{parts[0] + parts[1]!r}, which is not in the vocabulary")
        pair = (token_to_id[parts[0]], token_to_id[parts[1]])
        ranks.pop(pair, None)
        ranks[pair] = rank
        merged_ids.append(token_to_id[parts[0] + parts[1]])
    return ranks, merged_ids


def _rules_are_consistent(ranks, merged_ids):
    """Whether every rule ranks below every rule that makes one of its two tokens."""
    last_made = {}
    for rank in ranks.values():
        made = merged_ids[rank]
        last_made[made] = max(last_made.get(made, -1), rank)
    return all(last_made.get(left, -1) < rank and last_made.get(right, -1) < rank
               for (left, right), rank in ranks.items())


def _has_version_header(path):
    with file_system.open_file(path, encoding="utf-8") as file:
        return file.readline().startswith("#version")


def _re2_literal(text):
    return "".join(f"\\x{{{ord(c):x}}}" if not c.isalnum() else c for c in text)
