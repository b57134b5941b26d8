"""Streaming `tf.data` pipelines from a text corpus to pretraining batches.

text files -> documents (`corpus.document_dataset`) -> windows of documents,
tokenized in the graph -> instances (`instances.build_instances`) -> shuffle
-> batches -> masked LM (`masking.MaskedLmMasker`, re-drawn each epoch).

Memory is bounded by the window, the shuffle buffer and prefetching, never by
the corpus. Every random choice is a stateless op seeded from `seed`, the
epoch, and the position of the window or batch in the stream, so the same
files and seed give the same batches, also with parallel calls.
"""

import tensorflow as tf

from kerasbert.data.corpus import corpus_files, document_windows
from kerasbert.data.instances import OBJECTIVES, build_instances
from kerasbert.data.masking import MaskedLmMasker


def instance_batches(file_patterns, tokenizer, objective="nsp", max_seq_length=128, *,
                     short_seq_prob=0.1, seed=0, copies=1, window_size=64, format="documents",
                     bad_lines="skip", stats=None, input_context=None, shard=None):
    """Unmasked instances, one dense batch per window of documents (`corpus.document_windows`).

    Each element is a dict of `token_ids`, `segment_ids`, `padding_mask`
    (int32 `[instances, max_seq_length]`) and `next_sentence_labels` (int32
    `[instances]`). `copies` passes over the corpus (`None`: forever) each make
    their own instances, as `dupe_factor` copies and epochs do. `input_context` (a
    `tf.distribute.InputContext`) gives each input pipeline its own files, or,
    with fewer files than pipelines, its own windows; `shard=(index, count)`
    does the same by window for the shards of a TFRecord writer.

    >>> import kerasbert.data.demo, kerasbert.zoo
    >>> tokenizer = kerasbert.zoo.build_tokenizer(
    ...     "bert_tiny_uncased", kerasbert.data.demo.vocabulary_dir("wordpiece"))
    >>> batches = instance_batches(kerasbert.data.demo.pretraining_corpus_files(), tokenizer)
    >>> first = next(iter(batches))
    >>> first["token_ids"].shape[1], sorted(first)
    (128, ['next_sentence_labels', 'padding_mask', 'segment_ids', 'token_ids'])
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    if window_size < 2:
        raise ValueError(f"window_size must be at least 2 (NSP takes its random sentences "
                         f"from other documents of the window), got {window_size}")
    files = corpus_files(file_patterns)
    pipelines, pipeline = 1, 0
    if input_context is not None:
        pipelines, pipeline = input_context.num_input_pipelines, input_context.input_pipeline_id
    by_file = pipelines > 1 and len(files) >= pipelines
    windows = document_windows(files, window_size, format=format, bad_lines=bad_lines,
                               stats=stats, input_context=input_context if by_file else None)
    windows = windows.enumerate()
    keep = []
    if pipelines > 1 and not by_file:
        keep.append((pipeline, pipelines))
    if shard is not None:
        keep.append(tuple(shard))
    for index, count in keep:
        windows = windows.filter(lambda number, _, i=index, n=count: number % n == i)
    # Each copy numbers its windows; (copy, window) seeds every random choice. The pipeline is
    # built once and read once per copy (no per-copy tracing).
    numbered = windows
    windows = tf.data.Dataset.range(2**62 if copies is None else copies).flat_map(_plain(
        lambda copy: numbered.map(_plain(lambda number, sentences: (copy, number, sentences)))))
    base = _seed_tensor(seed)

    @_plain
    def build(copy, number, sentences):
        tokens = tokenizer.tokenize(sentences.flat_values)
        documents = sentences.with_flat_values(tokens)
        if stats is not None:
            documents = _counted_without_tokens(documents, stats)
        window_seed = tf.random.experimental.stateless_fold_in(
            tf.random.experimental.stateless_fold_in(base, copy), number)
        return build_instances(documents, objective, tokenizer.layout, max_seq_length,
                               window_seed, short_seq_prob=short_seq_prob)

    return windows.map(build, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def pretraining_dataset(file_patterns, tokenizer, objective="nsp", batch_size=32,
                        max_seq_length=128, *, masked_lm_prob=0.15, max_predictions_per_seq=20,
                        whole_word_masking=False, max_ngram=1, short_seq_prob=0.1, seed=0,
                        epochs=1, shuffle_buffer=10_000, window_size=64, drop_remainder=True,
                        format="documents", bad_lines="skip", input_context=None, stats=None):
    """Masked pretraining batches from text files, ready for `model.fit`.

    Each batch is a dict of `token_ids` (masked), `segment_ids`,
    `padding_mask`, `next_sentence_labels` (`[batch]`; 1 = random next / swapped,
    0 for objectives without a pair label), `masked_lm_positions`,
    `masked_lm_ids` and `masked_lm_weights` (`[batch, max_predictions_per_seq]`).
    Instances are rebuilt and re-masked every epoch (`epochs=None` repeats
    forever); the shuffle buffer spans epoch boundaries. With an
    `input_context`, `batch_size` is the global batch size
    and each pipeline yields its share. `seed` is an int, or a scalar int64 tensor (a seed
    drawn inside the pipeline, as each tf.data service worker does).

    >>> import kerasbert.data.demo, kerasbert.zoo
    >>> tokenizer = kerasbert.zoo.build_tokenizer(
    ...     "bert_tiny_uncased", kerasbert.data.demo.vocabulary_dir("wordpiece"))
    >>> dataset = pretraining_dataset(kerasbert.data.demo.pretraining_corpus_files(),
    ...                               tokenizer, batch_size=8, shuffle_buffer=100)
    >>> batch = next(iter(dataset))
    >>> batch["token_ids"].shape.as_list(), batch["masked_lm_ids"].shape.as_list()
    ([8, 128], [8, 20])
    """
    masker = MaskedLmMasker.for_tokenizer(
        tokenizer, masked_lm_prob=masked_lm_prob, max_predictions_per_seq=max_predictions_per_seq,
        whole_word=whole_word_masking, max_ngram=max_ngram)
    if input_context is not None:
        batch_size = input_context.get_per_replica_batch_size(batch_size)
    instances = instance_batches(
        file_patterns, tokenizer, objective, max_seq_length, short_seq_prob=short_seq_prob,
        seed=seed, copies=epochs, window_size=window_size, format=format, bad_lines=bad_lines,
        stats=stats, input_context=input_context).unbatch()
    if shuffle_buffer:
        instances = instances.shuffle(shuffle_buffer, seed=_python_seed(seed, "shuffle"))
    batches = instances.batch(batch_size, drop_remainder=drop_remainder).enumerate()
    # Batch numbers run on through the epochs, so every epoch is masked anew.
    mask_seed = tf.random.experimental.stateless_fold_in(_seed_tensor(seed), -1)
    return batches.map(_plain(lambda number, batch: masker(
        batch, tf.random.experimental.stateless_fold_in(mask_seed, number))),
        num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).prefetch(tf.data.AUTOTUNE)


def _counted_without_tokens(documents, stats):
    """`documents` (ragged `[documents, sentences, tokens]`), once those without a single token
    are counted in `stats`."""
    tokens = tf.reduce_sum(tf.reduce_sum(tf.ones_like(documents, tf.int64), axis=2), axis=1)
    counted = stats.add("documents_without_tokens",
                        tf.reduce_sum(tf.cast(tokens == 0, tf.int64)))
    with tf.control_dependencies([counted]):
        return documents.with_flat_values(tf.identity(documents.flat_values))


def _plain(function):
    """`function` traced as it is: the pipeline's code is plain TensorFlow (explicit
    `tf.while_loop`s, no Python control flow on tensors), and converting it with AutoGraph
    would only add seconds of start-up."""
    return tf.autograph.experimental.do_not_convert(function)


def _seed_tensor(seed):
    """A stateless-RNG seed `[2]` from an int seed (or a scalar int64 tensor, drawn at run time
    as `kerasbert.data.service` does for each worker)."""
    if tf.is_tensor(seed):
        seed = tf.cast(seed, tf.int64)
        return tf.stack([tf.bitwise.bitwise_and(seed, 0x7FFFFFFF),
                         tf.bitwise.right_shift(seed, 31)])
    return tf.constant([int(seed) & 0x7FFFFFFF, int(seed) >> 31], tf.int64)


def _python_seed(seed, purpose):
    """A fixed int seed for stateful `tf.data` ops (shuffle) from the pipeline's int seed; None
    for a tensor seed (`tf.data` cannot take a tensor seed under the global seed 0, and the
    instances and masks already follow the drawn seed)."""
    if tf.is_tensor(seed):
        return None
    return (int(seed) * 1_000_003 + sum(map(ord, purpose))) % (2**31 - 1)
