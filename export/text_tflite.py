"""A TFLite model that takes raw text: the WordPiece tokenizer and the packing inside the flatbuffer.

`text_tflite_model(model, tokenizer)` converts `model` with its tokenizer in front into one
flatbuffer with the signature `serve_text`: a 1-D `tf.string` input `text` in, the model's
own outputs (`logits`, ...) out, as float32, and a sequence classifier's answers (`label`,
`label_id`, `probabilities`, or regression's `score`: `kerasbert.export.answers`). Inside:

- normalization: tensorflow-text's `FastBertNormalizer` (custom op `FastBertNormalize`) with
  a table of Hugging Face's normalization rules
  (`kerasbert.tokenizers.bert_normalizer_model`: control, format and private-use characters
  and U+FFFD deleted, Unicode whitespace made a space, NFD accent stripping and lower-casing
  as the tokenizer says), not the table tensorflow-text builds for itself (control characters
  made spaces, NFKC case folding);
- splitting on whitespace, punctuation and CJK characters, then WordPiece: tensorflow-text's
  `FastWordpieceTokenizer` (custom op `FastWordpieceTokenizeWithOffsets`; the offsets it
  computes are not used);
- packing as Hugging Face does for one text: `[CLS] ids [SEP]`, truncated to
  `max_seq_length`, padded on the right with the pad id to the batch's longest row rounded
  up to a bucket of `kerasbert.export.padding_buckets` (16, 32, 64, ... capped at
  `max_seq_length`), segment ids 0 and the padding mask, all from TFLite builtin ops.

The sequence length therefore depends on the texts: the interpreter sizes the encoder's
tensors on each call (they are dynamic tensors), which the signature runner does by itself.

A span QA model also gets `serve_question(question, context)` and a token classifier
`serve_entities(text)`, answering as the SavedModel's signatures of those names
(`kerasbert.export.text_tflite_answers`, which adds tensorflow-text's `ByteSplitWithOffsets`
and `ByteSplitByOffsets` kernels).

Those custom ops (`TFTEXT_CUSTOM_OPS`) are the only non-builtin ops (no Flex / Select TF ops,
no ragged ops): run the model with an interpreter that has tensorflow-text's kernels registered, as
`run_text_tflite` does with ai_edge_litert's `InterpreterWithCustomOps` (its plain
`Interpreter` takes no registerers; TensorFlow's
`tf.lite.python.interpreter.InterpreterWithCustomOps` gives the same outputs). The ids are
those of Hugging Face's `BertTokenizerFast` on ordinary text; the exceptions are measured
and listed in `TEXT_TFLITE_DIFFERENCES`. Only WordPiece (BERT, ELECTRA) tokenizers are
supported.
"""

import os
import tempfile

import numpy as np
import tensorflow as tf

from kerasbert import file_system
from kerasbert.export.answer_settings import AnswerSettings
from kerasbert.export.answers import with_answers
from kerasbert.export.padding_buckets import bucket_width
from kerasbert.export.signatures import input_specs
from kerasbert.export.text_tflite_answers import answer_signatures
from kerasbert.tokenizers.wordpiece import WordPieceTokenizer

SIGNATURE_KEY = "serve_text"
TEXT_INPUT = "text"
# The custom ops the flatbuffer may hold: tensorflow-text's, registered by
# `tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS`.
TFTEXT_CUSTOM_OPS = ("FastBertNormalize", "FastWordpieceTokenizeWithOffsets",
                     "TFText>ByteSplitWithOffsets", "TFText>ByteSplitByOffsets")
_MODEL_INPUTS = ("token_ids", "segment_ids", "padding_mask")

# Where the flatbuffer's ids differ from `transformers.BertTokenizerFast` with the same
# vocabulary and `do_lower_case`. Measured on tests/tokenizer_cases.py's 30 ADVERSARIAL_TEXTS
# (5 differ uncased, 4 cased), 200 lines of the shipped corpus and 100 WordNet glosses (none
# differ); tests/export/test_text_tflite.py shows that each difference still happens and that
# no other does on those texts. The same everywhere else: accents and their stripping, case,
# CJK ideographs (split here by FastWordpieceTokenizer), Unicode whitespace and punctuation,
# truncation, ASCII words over 100 characters.
TEXT_TFLITE_DIFFERENCES = [
    "Special-token strings in the text ('[SEP]', '[MASK]', ...) are tokenized as text, as "
    "kerasbert's WordPieceTokenizer tokenizes them (by design: text cannot forge a special "
    "token); Hugging Face matches them as the special tokens.",
    "Words longer than max_chars_per_word (100) become [UNK] by UTF-8 bytes here, by "
    "characters in Hugging Face and in kerasbert's WordPieceTokenizer: a word of up to 100 "
    "characters but more than 100 bytes (non-ASCII, e.g. 60 accented letters in a cased "
    "model) is [UNK] only here. FastWordpieceTokenizer limits a word by its bytes, and "
    "none of tensorflow-text's TFLite kernels counts a word's characters.",
    "Unicode versions: characters whose properties differ between the Unicode tables of "
    "TensorFlow's ops and Hugging Face's (a few hundred characters added since Unicode 9, "
    "3 older ones whose category changed: docs/tokenizers.md) are normalized as TensorFlow's "
    "tables say (U+0890 ARABIC POUND MARK ABOVE is a format character here, deleted; "
    "Hugging Face keeps it), as kerasbert's WordPieceTokenizer does; and 13 punctuation "
    "characters of Unicode 16 (U+1B4E, U+1B4F, ...) split words here only.",
]


def text_tflite_model(model, tokenizer, max_seq_length=128, length_buckets=True, settings=None):
    """The TFLite flatbuffer (bytes) of `model` with `tokenizer` inside: text in, outputs out.

    The signature `serve_text` takes `text` (1-D `tf.string`, any batch size) and returns
    the model's outputs under the model's names, float32, computed on the texts
    tokenized as Hugging Face's `BertTokenizerFast` does (see `TEXT_TFLITE_DIFFERENCES`),
    with `[CLS]`/`[SEP]`, truncated to `max_seq_length` and padded to the batch's longest
    row rounded up to a bucket (`kerasbert.export.padding_buckets`): sequence outputs are
    `[batch, bucket, ...]`.

    Args:
        model: a Keras model whose only inputs are int32 `token_ids`, `segment_ids` and
            `padding_mask` of shape `[batch, seq]` (an encoder or a task model; not
            multiple choice, not a pretraining model).
        tokenizer: a `kerasbert.tokenizers.WordPieceTokenizer` with `split_cjk=True`.
        max_seq_length: the sequence length every text is truncated to, and the last
            bucket.
        length_buckets: False pads every batch to `max_seq_length` (static shapes, for
            delegates that need them; slower on short texts).
        settings: the `AnswerSettings` of a span QA model's `serve_question` (default:
            `AnswerSettings(max_seq_length=max_seq_length)`).

    A span QA model also gets `serve_question(question, context)` and a token classifier
    `serve_entities(text)`, answering as the SavedModel's signatures of those names
    (`kerasbert.export.text_tflite_answers`).

    Raises:
        ValueError: for any other tokenizer or model.

    Example:
    >>> import kerasbert
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "fox", "."]
    >>> tokenizer = kerasbert.tokenizers.WordPieceTokenizer(vocab)
    >>> encoder = kerasbert.models.build_encoder(kerasbert.EncoderConfig(
    ...     family="bert", vocab_size=8, hidden_size=8, num_layers=1, num_heads=1,
    ...     intermediate_size=8, max_positions=16))
    >>> model = kerasbert.models.build_task_model(encoder, "sequence_classification", num_labels=3)
    >>> flatbuffer = text_tflite_model(model, tokenizer, max_seq_length=8)
    >>> outputs = run_text_tflite(flatbuffer, ["The fox.", "THÉ  fox.", "fox"])
    >>> {name: value.shape for name, value in outputs.items()}  # logits and the answers
    {'label': (3,), 'label_id': (3,), 'logits': (3, 3), 'probabilities': (3, 3)}
    >>> logits = outputs["logits"]  # the first two texts have the same ids
    >>> bool(np.allclose(logits[0], logits[1])), bool(np.allclose(logits[0], logits[2]))
    (True, False)
    """
    module = tf.Module()
    # The TensorFlow variables under the Keras ones: saved this way, the converter freezes them
    # into constants (tracking the Keras model leaves them as uninitialised TFLite variables).
    module.model_variables = [variable.value for variable in model.variables]
    module.text_signatures = {SIGNATURE_KEY: _serving_function(model, tokenizer, max_seq_length,
                                                          length_buckets)}
    module.text_signatures.update(answer_signatures(model, tokenizer, settings or AnswerSettings(
        max_seq_length=max_seq_length)))
    # A SavedModel in between gives the signatures their keys (`from_concrete_functions` names a
    # single signature `serving_default`).
    with tempfile.TemporaryDirectory(prefix="text_tflite_") as directory:
        tf.saved_model.save(module, directory, signatures={
            key: function.get_concrete_function() for key, function in module.text_signatures.items()})
        converter = tf.lite.TFLiteConverter.from_saved_model(
            directory, signature_keys=list(module.text_signatures))
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        converter.allow_custom_ops = True
        return converter.convert()


def run_text_tflite(tflite_bytes_or_path, texts, signature=SIGNATURE_KEY):
    """Run `signature` (`serve_text`, `serve_question`, ...) of a `text_tflite_model` flatbuffer.

    `tflite_bytes_or_path`: the flatbuffer's bytes or the path (or URL) of a `.tflite` file;
    `texts`: a string or a sequence of strings (the `text` input), or a dict of them by input
    name (`{"question": [...], "context": [...]}`). Returns `{output name: numpy array}`, batch
    first. The interpreter is ai_edge_litert's `InterpreterWithCustomOps` with
    tensorflow-text's TFLite kernels (`tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS`)
    registered.

    Example:
    >>> import keras, kerasbert
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "cafe", "##s", "."]
    >>> tokenizer = kerasbert.tokenizers.WordPieceTokenizer(vocab)
    >>> inputs = {name: keras.Input((None,), dtype="int32", name=name)
    ...           for name in ("token_ids", "segment_ids", "padding_mask")}
    >>> echo = keras.Model(inputs, {"ids": keras.ops.cast(inputs["token_ids"], "float32")})
    >>> flatbuffer = text_tflite_model(echo, tokenizer, max_seq_length=6)
    >>> run_text_tflite(flatbuffer, ["Cafés.", "x", ""])["ids"].astype(int).tolist()
    [[2, 5, 6, 7, 3, 0], [2, 1, 3, 0, 0, 0], [2, 3, 0, 0, 0, 0]]
    >>> flatbuffer = text_tflite_model(echo, tokenizer, max_seq_length=64)
    >>> [run_text_tflite(flatbuffer, [text])["ids"].shape for text in ("x", "x " * 20)]
    [(1, 16), (1, 32)]
    """
    if isinstance(tflite_bytes_or_path, (str, os.PathLike)):
        tflite_bytes_or_path = file_system.read_bytes(tflite_bytes_or_path)
    if not isinstance(texts, dict):
        texts = {TEXT_INPUT: texts}
    runner = _interpreter(bytes(tflite_bytes_or_path)).get_signature_runner(signature)
    outputs = runner(**{name: _string_array(values) for name, values in texts.items()})
    return {name: np.asarray(value) for name, value in outputs.items()}


def _string_array(texts):
    if isinstance(texts, (str, bytes)):
        texts = [texts]
    return np.array([text.encode("utf-8") if isinstance(text, str) else bytes(text)
                     for text in texts], dtype=object)


# --- checks ---

def _check_tokenizer(tokenizer):
    if not isinstance(tokenizer, WordPieceTokenizer):
        raise ValueError(
            f"text_tflite_model supports WordPiece tokenizers (BERT, ELECTRA) only, not "
            f"{type(tokenizer).__name__}: its TFLite graph is built from tensorflow-text's "
            "FastBertNormalizer and FastWordpieceTokenizer")
    if not tokenizer.split_cjk:
        raise ValueError(
            f"{type(tokenizer).__name__}(split_cjk=False) cannot be expressed with "
            "FastWordpieceTokenizer, which always splits CJK characters into tokens of their own")


def _check_model(model):
    """The model's `EncoderConfig`, when it has one, after checking its inputs."""
    name = getattr(model, "name", type(model).__name__)
    try:
        specs = input_specs(model)
    except TypeError as error:
        raise ValueError(f"Model {name!r} cannot take text: {error}") from error
    if sorted(specs) != sorted(_MODEL_INPUTS):
        extra = sorted(set(specs) - set(_MODEL_INPUTS))
        raise ValueError(
            f"Model {name!r} has the inputs {sorted(specs)}; a text TFLite model feeds only "
            f"{list(_MODEL_INPUTS)}" + (f" (no {extra})" if extra else ""))
    for input_name, spec in specs.items():
        if spec.shape.rank != 2:
            raise ValueError(
                f"Model {name!r} takes {input_name!r} of rank {spec.shape.rank} (multiple "
                "choice?); a text TFLite model feeds one text per row, [batch, seq]")
    if not isinstance(model.output, dict):
        raise ValueError(f"Model {name!r} has unnamed outputs; a text TFLite model returns the "
                         "model's outputs by name (a dict)")
    return getattr(getattr(model, "encoder", model), "config", None)


def check_text_tflite(model, tokenizer, max_seq_length=128):
    """Raise `ValueError` saying why `text_tflite_model(model, tokenizer, max_seq_length)`
    cannot be built, if it cannot; return the model's `EncoderConfig` (or None).

    >>> import kerasbert
    >>> from kerasbert.data import demo
    >>> tokenizer = kerasbert.tokenizers.from_hf(demo.vocabulary_dir("byte_pair"))
    >>> check_text_tflite(kerasbert.zoo.build("roberta_base", num_layers=1), tokenizer)
    Traceback (most recent call last):
    ...
    ValueError: text_tflite_model supports WordPiece tokenizers (BERT, ELECTRA) only, not ...
    """
    _check_tokenizer(tokenizer)
    config = _check_model(model)
    if isinstance(max_seq_length, bool) or not isinstance(max_seq_length, int) or max_seq_length < 3:
        raise ValueError(f"max_seq_length must be an integer >= 3 ([CLS], a token, [SEP]), "
                         f"got {max_seq_length!r}")
    if config is not None:
        if getattr(config, "max_positions", max_seq_length) < max_seq_length:
            raise ValueError(f"max_seq_length={max_seq_length} is more than model "
                             f"{model.name!r}'s {config.max_positions} positions")
        if getattr(config, "vocab_size", tokenizer.vocabulary_size()) < tokenizer.vocabulary_size():
            raise ValueError(f"{type(tokenizer).__name__} has {tokenizer.vocabulary_size()} tokens, "
                             f"model {model.name!r} only {config.vocab_size}")
    return config


def _serving_function(model, tokenizer, max_seq_length, length_buckets):
    check_text_tflite(model, tokenizer, max_seq_length)

    normalizer, wordpiece = tokenizer.fast_kernels()
    layout = (tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=TEXT_INPUT)],
                 autograph=False)
    def serve_text(text):
        pieces = wordpiece.tokenize(normalizer.normalize(text))
        inputs = pack_text(pieces.flat_values, pieces.row_splits, max_seq_length, length_buckets,
                       *layout)
        outputs = model(inputs, training=False)
        return with_answers(model, {name: tf.cast(value, tf.float32)
                                    for name, value in outputs.items()})

    return serve_text


def pack_text(ids, row_splits, max_length, length_buckets, cls_id, sep_id, pad_id):
    """`[CLS] ids [SEP]` per row, truncated to `max_length` and right-padded to the bucket of
    the longest row (`length_buckets`) or to `max_length`, with builtin ops only.

    `ids` are every row's ids one after the other, `row_splits` where each row starts (and
    the last ends). No StridedSlice with new axes, no ragged ops: only Range, ExpandDims,
    arithmetic, comparisons, Gather and Select.
    """
    row_splits = tf.cast(row_splits, tf.int32)
    starts = tf.expand_dims(row_splits[:-1], 1)                     # [batch, 1]
    kept = tf.minimum(tf.expand_dims(row_splits[1:], 1) - starts, max_length - 2)
    length = bucket_width(tf.reduce_max(kept) + 2, max_length) if length_buckets else max_length
    position = tf.expand_dims(tf.range(length, dtype=tf.int32), 0)  # [1, length]
    is_token = tf.logical_and(position >= 1, position <= kept)
    # A pad value after the ids, so that every gather index is valid even with no ids at all.
    values = tf.concat([tf.cast(ids, tf.int32), tf.constant([pad_id], tf.int32)], axis=0)
    index = tf.where(is_token, starts + position - 1, tf.size(ids, out_type=tf.int32))
    token_ids = tf.gather(values, index)
    token_ids = tf.where(tf.equal(position, 0), cls_id, token_ids)
    token_ids = tf.where(tf.equal(position, kept + 1), sep_id, token_ids)
    return {"token_ids": token_ids, "segment_ids": tf.zeros_like(token_ids),
            "padding_mask": tf.cast(position <= kept + 1, tf.int32)}


def _interpreter(tflite_model):
    from tensorflow_text import tflite_registrar
    from ai_edge_litert.interpreter import InterpreterWithCustomOps

    interpreter = InterpreterWithCustomOps(
        custom_op_registerers=tflite_registrar.SELECT_TFTEXT_OPS, model_content=tflite_model)
    interpreter.allocate_tensors()
    return interpreter
