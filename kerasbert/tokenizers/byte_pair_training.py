"""Train a byte-level BPE vocabulary (RoBERTa / GPT-2 `vocab.json` + `merges.txt`) on text files.

The text is pre-tokenized in-graph exactly as `BytePairTokenizer` will split
it (GPT-2's pattern), every byte of every word becomes its printable
`bytes_to_unicode` character, and SentencePiece's BPE trainer learns the
merges on those words and their counts. SentencePiece records each learned
piece with its rank (score) but not which two pieces made it, so each merge
rule is recovered by applying the rules found so far to the new piece (as
the tokenizer will): what is left are the two halves it is made of.
"""

import collections
import io
import json
import logging
import os
import tempfile

import sentencepiece
import tensorflow as tf

from kerasbert import file_system
from kerasbert.atomic_files import write_atomically
from kerasbert.tokenizers.byte_pair import bytes_to_unicode, pre_tokenize
from kerasbert.tokenizers.text_files import check_text_files, line_dataset, report_progress
from kerasbert.tokenizers.unicode_text import lowercase_per_character

RESERVED_TOKENS = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")
# SentencePiece's limits: pieces of at most 512 characters, positions that fit 16 bits.
_MAX_PIECE_CHARS = 512
_MAX_WORD_BYTES = 16384


def train_byte_pair(files, vocab_size, lowercase=False, reserved_tokens=RESERVED_TOKENS,
                    output_dir=None, progress=None, batch_size=4096):
    """Learn a byte-level BPE vocabulary of `vocab_size` tokens from text files.

    Args:
        files: a path or a list of paths of UTF-8 text files, plain or gzip
            (`.gz`); every line is a text.
        vocab_size: tokens in the vocabulary, reserved tokens and the 256 byte
            tokens included. Fewer come out if the corpus has nothing left to
            merge.
        lowercase: lower-case the text before learning, character by
            character as Hugging Face's `Lowercase` normalizer does (the
            tokenizer itself never lower-cases: lower-case its input too).
        reserved_tokens: tokens given the first ids, in order (RoBERTa's
            `<s> <pad> </s> <unk> <mask>` by default).
        output_dir: where to write `vocab.json` and `merges.txt`; a new
            temporary directory if None.
        progress: if given, called with the number of lines each time a
            batch of `batch_size` lines is read.

    Returns:
        `(vocab_path, merges_path)`. Each file is written under a temporary
        name and renamed, so no half-written file is ever seen.

    SentencePiece skips words longer than 16384 bytes; should a learned piece
    not be one merge of earlier tokens (not seen so far), it is left out and
    the vocabulary comes out smaller.

    Example:
    >>> import os, tempfile
    >>> corpus = os.path.join(tempfile.mkdtemp(), "corpus.txt")
    >>> with open(corpus, "w", encoding="utf-8") as f:
    ...     _ = f.write("the cat sat on the mat\\nthe hat\\n" * 10)
    >>> vocab_path, merges_path = train_byte_pair([corpus], vocab_size=270)
    >>> from kerasbert.tokenizers.byte_pair import BytePairTokenizer
    >>> tokenizer = BytePairTokenizer.from_files(vocab_path, merges_path)
    >>> tokenizer.vocabulary_size(), tokenizer.id_to_token(0)
    (270, '<s>')
    >>> [tokenizer.id_to_token(i) for i in tokenizer.tokenize(["the mat"]).to_list()[0]]
    ['the', 'Ġm', 'at']
    """
    files = check_text_files(files)
    reserved_tokens = list(reserved_tokens)
    alphabet = bytes_to_unicode()
    _check_reserved(reserved_tokens, alphabet)
    base_size = len(reserved_tokens) + len(alphabet)
    if vocab_size < base_size:
        raise ValueError(f"vocab_size={vocab_size} is smaller than the {len(reserved_tokens)} "
                         f"reserved and 256 byte tokens it must hold")

    counts = _count_words(files, lowercase, alphabet, progress, batch_size)
    merges = _learn_merges(counts, vocab_size - base_size) if vocab_size > base_size else []

    vocabulary = {token: i for i, token in enumerate([*reserved_tokens, *alphabet])}
    for left, right in merges:
        # A merge may make a reserved token's string; like Hugging Face, keep its one id.
        vocabulary.setdefault(left + right, len(vocabulary))

    output_dir = output_dir or tempfile.mkdtemp(prefix="byte_pair_")
    vocab_path = write_atomically(file_system.join(output_dir, "vocab.json"),
                                  json.dumps(vocabulary, ensure_ascii=False))
    merges_text = "#version: 0.2\n" + "".join(f"{left} {right}\n" for left, right in merges)
    merges_path = write_atomically(file_system.join(output_dir, "merges.txt"), merges_text)
    return vocab_path, merges_path


def _check_reserved(reserved_tokens, alphabet):
    seen = set()
    for token in reserved_tokens:
        if not isinstance(token, str) or not token:
            raise ValueError(f"reserved token {token!r} is not a non-empty string")
        if token in seen:
            raise ValueError(f"reserved token {token!r} is listed twice")
        if token in alphabet:
            raise ValueError(f"reserved token {token!r} is one of the 256 byte tokens")
        seen.add(token)


def _count_words(files, lowercase, alphabet, progress, batch_size):
    """{word in byte characters: count} over the corpus, split as the tokenizer splits."""

    def words_and_counts(lines):
        if lowercase:
            lines = lowercase_per_character(lines)
        words, _, count = tf.unique_with_counts(pre_tokenize(lines).flat_values)
        return words, count

    counts = collections.Counter()
    lines = line_dataset(files).batch(batch_size)
    if progress is not None:
        lines = lines.map(lambda batch: report_progress(batch, progress))
    dataset = lines.map(words_and_counts)
    for words, count in dataset.as_numpy_iterator():
        counts.update(dict(zip(words.tolist(), count.tolist())))
    table = [alphabet[b] for b in range(256)]
    return {"".join(table[b] for b in word): count for word, count in counts.items()}


def _learn_merges(counts, num_merges):
    """SentencePiece BPE on the words (with their counts): the merge rules, in rank order."""
    words = {word: count for word, count in counts.items()
             if len(word.encode("utf-8")) <= _MAX_WORD_BYTES}
    characters = {c for word in words for c in word}
    merged_words = [word for word in words if len(word) > 1]
    if not merged_words:
        return []
    with tempfile.TemporaryDirectory(prefix="byte_pair_training_") as work:
        tsv = os.path.join(work, "words.tsv")
        with open(tsv, "w", encoding="utf-8") as file:
            for word, count in sorted(words.items()):
                file.write(f"{word}\t{count}\n")
        model = io.BytesIO()
        options = dict(
            input=tsv, input_format="tsv", model_writer=model, model_type="bpe",
            # One unknown piece, every character, then the merges.
            vocab_size=1 + len(characters) + num_merges, hard_vocab_limit=False,
            character_coverage=1.0, unk_id=0, bos_id=-1, eos_id=-1, pad_id=-1,
            # Pure BPE over the byte characters: no normalization, no extra splitting.
            normalization_rule_name="identity", add_dummy_prefix=False,
            remove_extra_whitespaces=False, split_by_whitespace=False,
            split_by_unicode_script=False, split_by_number=False, split_digits=False,
            max_sentencepiece_length=_MAX_PIECE_CHARS, max_sentence_length=_MAX_WORD_BYTES,
            input_sentence_size=0, num_threads=os.cpu_count() or 1, minloglevel=2)
        try:
            sentencepiece.SentencePieceTrainer.train(**options)
        except RuntimeError as error:
            raise ValueError(f"SentencePiece's BPE training failed: {error}") from None
    processor = sentencepiece.SentencePieceProcessor(model_proto=model.getvalue())
    pieces = [(processor.get_score(i), i, processor.id_to_piece(i))
              for i in range(processor.get_piece_size())
              if not (processor.is_unknown(i) or processor.is_control(i))]
    learned = [piece for _, _, piece in sorted(pieces, key=lambda p: (-p[0], p[1]))
               if len(piece) > 1]
    return _merges_of(learned)


def _merges_of(pieces):
    """The merge rule that makes each piece, given the rules of the pieces before it.

    Applying the earlier rules to a piece's characters (lowest rank first,
    leftmost first, as the tokenizer does) leaves the two tokens it was made
    from. A piece that does not come out as two tokens (SentencePiece can
    reach a string along a path those rules do not take) is left out.
    """
    ranks = {}
    merges = []
    skipped = []
    for piece in pieces:
        parts = _apply_merges(list(piece), ranks)
        if len(parts) != 2:
            skipped.append(piece)
            continue
        pair = (parts[0], parts[1])
        ranks[pair] = len(merges)
        merges.append(pair)
    if skipped:
        logging.getLogger(__name__).info(
            "%d learned pieces are not one merge of earlier tokens and were left out, e.g. %r",
            len(skipped), skipped[:5])
    return merges


def _apply_merges(symbols, ranks):
    while len(symbols) > 1:
        best = min(range(len(symbols) - 1),
                   key=lambda i: ranks.get((symbols[i], symbols[i + 1]), float("inf")))
        if (symbols[best], symbols[best + 1]) not in ranks:
            break
        symbols[best:best + 2] = [symbols[best] + symbols[best + 1]]
    return symbols

