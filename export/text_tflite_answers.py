"""`serve_question` and `serve_entities` inside `model_text.tflite`: answers from raw text on a phone.

The SavedModel's answer signatures (`kerasbert.export.question_answers`,
`kerasbert.export.entity_answers`) tokenize with ragged and string ops that have no TFLite
kernels. These build the same answers from TFLite builtin ops and tensorflow-text's TFLite
kernels only:

- the tokens and their character offsets: `FastBertNormalize` with offsets (Hugging Face's
  normalization table, as `serve_text`), `FastWordpieceTokenizeWithOffsets` and
  `ByteSplitWithOffsets` (`kerasbert.tokenizers.fast_offsets`, which `WordPieceTokenizer`'s
  `tokenize_with_offsets` runs too);
- the answer texts are cut out of the original bytes by `ByteSplitByOffsets`;
- everything else (windows, packing, the model, span and entity decoding) is builtin ops.

A WordPiece token always holds a character that is neither whitespace nor deleted by the
normalizer, so no span of tokens is blank text: the SavedModel's check for whitespace-only
answers is not needed here.
"""

import tensorflow as tf
import tensorflow_text as tf_text

from kerasbert.export.question_answers import HAS_ANSWER, decode_spans, question_answer_names
from kerasbert.tokenizers.fast_offsets import fast_tokens_with_offsets

# The answer signatures `model_text.tflite` can have, by the model's task.
TEXT_TFLITE_ANSWERS = {"question_answering": "serve_question",
                       "token_classification": "serve_entities"}


def flat_tokens(tokenizer, text, offsets=False):
    """Every token of every text of `text` (1-D tf.string) one after the other, tokenized by
    `tokenizer.fast_kernels()`, in ops TFLite has kernels for: `{"ids", "splits"}` (int32: the
    ids, and where each text's ids start, `[batch + 1]`); with `offsets`, also what
    `kerasbert.tokenizers.fast_offsets.fast_tokens_with_offsets` gives per token."""
    normalizer, wordpiece = tokenizer.fast_kernels()
    if offsets:
        return fast_tokens_with_offsets(normalizer, wordpiece, text)
    pieces = wordpiece.tokenize(normalizer.normalize(text))
    return {"ids": pieces.flat_values, "splits": tf.cast(pieces.row_splits, tf.int32)}


def answer_signatures(model, tokenizer, settings):
    """`{signature key: tf.function}`: `serve_question` for a span QA model, `serve_entities`
    for a token classifier, nothing for other models."""
    builders = {"serve_question": question_tflite_function,
                "serve_entities": entity_tflite_function}
    key = TEXT_TFLITE_ANSWERS.get(getattr(model, "task", None))
    return {} if key is None else {key: builders[key](model, tokenizer, settings)}


def question_tflite_function(model, tokenizer, settings):
    """`serve_question(question, context)` of `kerasbert.export.question_answers`, for a
    TFLite conversion with tensorflow-text's custom ops (module docstring)."""
    names = question_answer_names(settings)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="question"),
                                  tf.TensorSpec([None], tf.string, name="context")],
                 autograph=False)
    def serve_question(question, context):
        questions = flat_tokens(tokenizer, question)
        contexts = flat_tokens(tokenizer, context, offsets=True)
        span = decode_spans(model, tokenizer.layout, settings, questions["ids"],
                            questions["splits"], contexts["ids"], contexts["splits"])
        has_answer = span[HAS_ANSWER]
        start = {name: tf.where(has_answer, _token_values(contexts[name], span["start_token"]), 0)
                 for name in ("char_start", "byte_start")}
        end = {name: tf.where(has_answer, _token_values(contexts[name], span["end_token"]), 0)
               for name in ("char_end", "byte_end")}
        answer = tf_text.ByteSplitter().split_by_offsets(
            context, tf.expand_dims(start["byte_start"], 1), tf.expand_dims(end["byte_end"], 1))
        answers = {"answer": tf.reshape(answer, [-1]), "start": start["char_start"],
                   "end": end["char_end"], "score": span["score"], HAS_ANSWER: has_answer}
        return {name: answers[name] for name in names}

    return serve_question


def _token_values(values, tokens):
    """`values` of the answers' `tokens`; 0 for a batch without any context token, where no
    question has an answer and `tokens` are 0."""
    return tf.gather(tf.concat([values, [0]], 0), tokens)


def entity_tflite_function(model, tokenizer, settings):
    """`serve_entities(text)` of `kerasbert.export.entity_answers` (the same decoding, outputs
    and padding), for a TFLite conversion with tensorflow-text's custom ops."""
    from kerasbert.export.entity_answers import (ENTITY_ANSWERS, _PADDING, _capacity,
                                                 _label_tables)
    from kerasbert.export.text_tflite import pack_text

    names, tags, begins, kept = _label_tables(model)
    labels = model.num_labels
    capacity = _capacity(tokenizer, settings.max_seq_length)
    suffix = tf.constant([token.startswith("##") and index != tokenizer.unk_token_id
                          for index, token in enumerate(tokenizer.vocabulary)], tf.bool)
    layout = (tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")],
                 autograph=False)
    def serve_entities(text):
        tokens = flat_tokens(tokenizer, text, offsets=True)
        splits = tokens["splits"]
        inputs = pack_text(tokens["ids"], splits, settings.max_seq_length, True, *layout)
        logits = tf.cast(model(inputs, training=False)["logits"], tf.float32)

        # The kept sub-tokens (the first `capacity` of each text), one after the other.
        position = tf.range(tf.size(tokens["ids"])) - tf.gather(splits, tokens["row"])
        keep = tf.reshape(tf.where(position < capacity), [-1])
        token = {name: tf.gather(tokens[name], keep)
                 for name in ("ids", "row", "char_start", "char_end", "byte_start", "byte_end")}
        position = tf.gather(position, keep)
        token_logits = tf.gather_nd(logits, tf.stack([token["row"], position + 1], axis=1))
        token_label = tf.argmax(token_logits, axis=-1, output_type=tf.int32)
        token_score = tf.reduce_max(tf.nn.softmax(token_logits, axis=-1), axis=-1)
        starts_word = tf.equal(position, 0) | ~tf.gather(suffix, token["ids"])

        # Words: runs of a word-starting token and its continuations.
        word_first = tf.reshape(tf.where(starts_word), [-1])
        word_last = tf.concat([word_first[1:], tf.shape(position, tf.int64)], 0) - 1
        word_row = tf.gather(token["row"], word_first)
        word_label = tf.gather(token_label, word_first)
        word_score = tf.gather(token_score, word_first)

        # Entities: runs of words of one type, each but the first not a B- label.
        word_tag = tf.gather(tags, word_label)
        starts_group = ((word_row != tf.concat([[-1], word_row[:-1]], 0))
                        | (word_tag != tf.concat([[-1], word_tag[:-1]], 0))
                        | tf.gather(begins, word_label))
        group_of_word = tf.cumsum(tf.cast(starts_group, tf.int32)) - 1
        group_first = tf.reshape(tf.where(starts_group), [-1])
        group_last = tf.concat([group_first[1:], tf.shape(word_row, tf.int64)], 0) - 1
        groups = tf.size(group_first)
        group_score = (tf.math.unsorted_segment_sum(word_score, group_of_word, groups)
                       / tf.math.unsorted_segment_sum(tf.ones_like(word_score), group_of_word,
                                                      groups))
        group_label = tf.gather(word_label, group_first)
        entity = tf.reshape(tf.where(tf.gather(kept, group_label)), [-1])
        first_word = tf.gather(group_first, entity)
        last_word = tf.gather(group_last, entity)
        first_token = tf.gather(word_first, first_word)
        last_token = tf.gather(word_last, last_word)
        entity_row = tf.gather(word_row, first_word)
        entity_splits = tf.concat([[0], tf.cumsum(tf.math.unsorted_segment_sum(
            tf.ones_like(entity_row), entity_row, tf.size(text)))], 0)
        # The strings are padded through their indexes (TFLite has no string Concat): the
        # padding's name is the one past the labels', its word the bytes [0, 0).
        padded = {name: _padded(values, entity_splits, _PADDING[name]) for name, values in (
            ("start", tf.gather(token["char_start"], first_token)),
            ("end", tf.gather(token["char_end"], last_token)),
            ("score", tf.gather(group_score, entity)))}
        label = _padded(tf.gather(group_label, entity), entity_splits, labels)
        padded["entity"] = tf.gather(tf.concat([names, [_PADDING["entity"]]], 0), label)
        byte_start = _padded(tf.gather(token["byte_start"], first_token), entity_splits, 0)
        words = tf_text.ByteSplitter().split_by_offsets(
            text, byte_start, _padded(tf.gather(token["byte_end"], last_token), entity_splits, 0))
        padded["word"] = tf.reshape(words.flat_values, tf.shape(byte_start))
        return {name: padded[name] for name in ENTITY_ANSWERS}

    return serve_entities


def _padded(values, splits, padding):
    """Flat `values` of rows under `splits` as a dense `[rows, longest row]`, padded with
    `padding`, in builtin ops."""
    lengths = splits[1:] - splits[:-1]
    column = tf.expand_dims(tf.range(tf.reduce_max(tf.concat([lengths, [0]], 0))), 0)
    index = tf.where(column < tf.expand_dims(lengths, 1), tf.expand_dims(splits[:-1], 1) + column,
                     tf.size(values))
    return tf.gather(tf.concat([values, tf.constant([padding], values.dtype)], 0), index)
