"""SavedModel export: `serving_default` on ids and, with a tokenizer, the raw-text signatures.

Signatures (tag `serve`):
- `serving_default`: int32 `token_ids`, `segment_ids`, `padding_mask` (and `masked_lm_positions`
  for pretraining models), any batch and length; the model's outputs under their names.
- `serve_text(text)`, `serve_text_pair(text_a, text_b)`: tf.string `[batch]`, tokenized and
  packed in the graph by the family's tokenizer (truncation `longest_first` to
  `max_seq_length`; the batch is padded to its longest row rounded up to a bucket of
  `kerasbert.export.padding_buckets`, so sequence outputs are `[batch, bucket, ...]`). A
  multiple-choice model reads each text (pair) as one choice. A sequence classifier's also
  return its answers (`label`, `label_id`, `probabilities`; regression `score`:
  `kerasbert.export.answers`).
- `serve_examples(examples)`: serialized `tf.Example`s with a bytes feature `text` and an
  optional `text_pair` (rows without one are packed as single texts).
- The task's answer signature (`kerasbert.export.answer_signatures`): `serve_choices(context,
  choices)` for a multiple-choice model, `serve_question(question, context)` for span QA,
  `serve_entities(text)` for token classification.
Loading text signatures needs `import tensorflow_text` first (it registers the tokenizer ops).
"""

import keras
import tensorflow as tf

from kerasbert.export.answer_settings import AnswerSettings
from kerasbert.export.answer_signatures import answer_function, answer_signature
from kerasbert.export.answers import with_answers
from kerasbert.export.errors import ExportError
from kerasbert.export.padding_buckets import cut_to_bucket
from kerasbert.export.signatures import serving_function

TEXT_SIGNATURES = ("serve_text", "serve_text_pair", "serve_examples")


def text_functions(model, tokenizer, max_seq_length, length_buckets=True, answer_settings=None):
    """`{signature name: tf.function}` running `tokenizer` then `model` on strings.

    Each batch is padded to its longest row rounded up to a bucket of
    `kerasbert.export.padding_buckets`, or with `length_buckets=False` to `max_seq_length`.
    A multiple-choice, span-QA or token-classification model also gets its answer signature
    (`kerasbert.export.answer_signatures`), decoding with `answer_settings` (an
    `AnswerSettings`; default: its defaults at `max_seq_length`).

    >>> import kerasbert
    >>> from kerasbert.tokenizers import WordPieceTokenizer
    >>> tokenizer = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"])
    >>> encoder = kerasbert.zoo.build("bert_tiny_uncased", num_layers=1, vocab_size=6)
    >>> functions = text_functions(encoder, tokenizer, max_seq_length=8)
    >>> tuple(functions["serve_text_pair"](tf.constant(["hi"]), tf.constant(["hi hi"]))[
    ...     "sequence_output"].shape)  # 6 tokens: padded to the bucket 8 (max_seq_length)
    (1, 8, 128)
    >>> functions = text_functions(encoder, tokenizer, max_seq_length=64)
    >>> tuple(functions["serve_text"](tf.constant(["hi", "hi " * 20]))["sequence_output"].shape)
    (2, 32, 128)
    """
    if "masked_lm_positions" in model.input:
        raise ExportError(f"{model.name}: text signatures take whole texts, but this pretraining "
                          "model also needs masked_lm_positions; export it without them")
    choices = len(model.input["token_ids"].shape) == 3
    text = tf.TensorSpec([None], tf.string, name="text")

    def run(packed):
        inputs = {name: packed[name] for name in model.input}
        if choices:
            inputs = {name: tf.expand_dims(value, 1) for name, value in inputs.items()}
        outputs = model(inputs, training=False)
        return with_answers(model, {name: tf.cast(value, tf.float32)
                                    for name, value in outputs.items()})

    def pack(texts, pair_texts=None):
        return tokenizer(texts, pair_texts, max_length=max_seq_length, truncation="longest_first",
                         padding="max_length")

    def to_bucket(packed):
        """`packed` cut to the bucket of its longest row: right padding only, so the cut
        removes padding and nothing else."""
        return cut_to_bucket(packed, max_seq_length) if length_buckets else packed

    @tf.function(input_signature=[text])
    def serve_text(text):
        return run(to_bucket(pack(text)))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text_a"),
                                  tf.TensorSpec([None], tf.string, name="text_b")])
    def serve_text_pair(text_a, text_b):
        return run(to_bucket(pack(text_a, text_b)))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve_examples(examples):
        features = tf.io.parse_example(examples, {
            "text": tf.io.FixedLenFeature([], tf.string),
            "text_pair": tf.io.FixedLenFeature([], tf.string, default_value=""),
        })
        single, pair = pack(features["text"]), pack(features["text"], features["text_pair"])
        has_pair = tf.expand_dims(tf.strings.length(features["text_pair"]) > 0, 1)
        return run(to_bucket({name: tf.where(has_pair, pair[name], single[name])
                              for name in single}))

    functions = {"serve_text": serve_text, "serve_text_pair": serve_text_pair,
                 "serve_examples": serve_examples}
    settings = (answer_settings or AnswerSettings()).replace(max_seq_length=max_seq_length)
    answers = answer_function(model, tokenizer, settings, length_buckets)
    if answers is not None:
        functions[answer_signature(model)] = answers
    return functions


def write_saved_model(model, directory, tokenizer=None, max_seq_length=128, length_buckets=True,
                      answer_settings=None):
    """Write `model` as a SavedModel at `directory` (see the module docstring);
    `length_buckets=False` pads the text signatures' batches to `max_seq_length`;
    `answer_settings` (an `AnswerSettings`) is how the answer signature decodes.

    >>> import os, tempfile, kerasbert
    >>> encoder = kerasbert.zoo.build("bert_tiny_uncased", num_layers=1)
    >>> path = write_saved_model(encoder, os.path.join(tempfile.mkdtemp(), "saved_model"))
    >>> sorted(tf.saved_model.load(path).signatures)
    ['serving_default']
    """
    archive = keras.export.ExportArchive()
    # The endpoints track the variables they use. `archive.track(model)` would store every
    # weight a second time (Keras 3.15 saves the Keras variables and the tf.Variables under
    # them separately), doubling the SavedModel's size.
    archive.add_endpoint("serving_default", serving_function(model))
    if tokenizer is not None:
        archive.track(tokenizer)
        for name, function in text_functions(model, tokenizer, max_seq_length, length_buckets,
                                             answer_settings).items():
            archive.add_endpoint(name, function)
    archive.write_out(directory, verbose=False)
    return directory
