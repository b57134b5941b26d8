"""Streaming `tf.data` pipelines from a text corpus to pretraining batches.

text files -> documents (`corpus.document_dataset`) -> windows of documents,
tokenized in the graph -> instances (`instances.build_instances`) -> shuffle
-> batches -> masked LM (`masking.MaskedLmMasker`, re-drawn each epoch).

What the batches are (objective, lengths, masking, batching) is a
`PretrainingDataConfig`; where they come from and how they are drawn (files, tokenizer, seed,
epochs, input context) are the pipeline functions' own arguments.

Memory is bounded by the window, the shuffle buffer and prefetching, never by
the corpus. Every random choice is a stateless op seeded from `seed`, the
epoch, and the position of the window or batch in the stream, so the same
files and seed give the same batches, also with parallel calls.
"""

import dataclasses

import tensorflow as tf

from kerasbert.data.corpus import corpus_files, document_windows
from kerasbert.data.instances import OBJECTIVES, build_instances
from kerasbert.data.masking import MaskedLmMasker


@dataclasses.dataclass(frozen=True)
class PretrainingDataConfig:
    """What pretraining batches are made of, shared by `instance_batches` and
    `pretraining_dataset` (as Model Garden's `BertPretrainDataConfig`).

    Instances: `objective` (one of `OBJECTIVES`: nsp, sop, full_sentences,
    doc_sentences, electra), `max_seq_length`, `short_seq_prob` (the chance of
    a shorter target length, nsp and sop), `window_size` (documents processed
    together; random next sentences come from the same window), `format` of
    the text files (`documents` or `paragraphs`, `kerasbert.data.corpus`) and
    `bad_lines` (`skip` or `fail`). Masking: `masked_lm_prob`,
    `max_predictions_per_seq`, `whole_word_masking`, `max_ngram`. Batching
    (`pretraining_dataset` only): `batch_size` (global, with an input context),
    `shuffle_buffer` (0: no shuffling), `drop_remainder`.
    Checked on creation: a `ValueError` names a bad objective or window size.

    >>> config = PretrainingDataConfig(objective="sop", max_seq_length=64)
    >>> config.batch_size, config.max_predictions_per_seq
    (32, 20)
    >>> PretrainingDataConfig(window_size=1)
    Traceback (most recent call last):
    ...
    ValueError: window_size must be at least 2 (NSP takes its random sentences from ... got 1
    """

    objective: str = "nsp"
    max_seq_length: int = 128
    batch_size: int = 32
    masked_lm_prob: float = 0.15
    max_predictions_per_seq: int = 20
    whole_word_masking: bool = False
    max_ngram: int = 1
    short_seq_prob: float = 0.1
    window_size: int = 64
    shuffle_buffer: int = 10_000
    drop_remainder: bool = True
    format: str = "documents"
    bad_lines: str = "skip"

    def __post_init__(self):
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {self.objective!r}")
        if self.window_size < 2:
            raise ValueError(f"window_size must be at least 2 (NSP takes its random sentences "
                             f"from other documents of the window), got {self.window_size}")

    def masker(self, tokenizer):
        """The `MaskedLmMasker` of this config's masking fields, for `tokenizer`'s vocabulary."""
        return MaskedLmMasker.for_tokenizer(
            tokenizer, masked_lm_prob=self.masked_lm_prob,
            max_predictions_per_seq=self.max_predictions_per_seq,
            whole_word=self.whole_word_masking, max_ngram=self.max_ngram)


def instance_batches(file_patterns, tokenizer, config=PretrainingDataConfig(), *, seed=0,
                     copies=1, stats=None, input_context=None, shard=None):
    """Unmasked instances, one dense batch per window of documents (`corpus.document_windows`).

    Each element is a dict of `token_ids`, `segment_ids`, `padding_mask`
    (int32 `[instances, max_seq_length]`) and `next_sentence_labels` (int32
    `[instances]`), made as `config` (a `PretrainingDataConfig`; its masking and
    batching fields are not used here) says. `copies` passes over the corpus
    (`None`: forever) each make their own instances, as `dupe_factor` copies and
    epochs do. `stats` (a `corpus.CorpusStats`) counts what was read.
    `input_context` (a `tf.distribute.InputContext`) gives each input pipeline
    its own files, or, with fewer files than pipelines, its own windows;
    `shard=(index, count)` does the same by window for the shards of a TFRecord
    writer.

    >>> import kerasbert.data.demo, kerasbert.zoo
    >>> tokenizer = kerasbert.zoo.build_tokenizer(
    ...     "bert_tiny_uncased", kerasbert.data.demo.vocabulary_dir("wordpiece"))
    >>> batches = instance_batches(kerasbert.data.demo.pretraining_corpus_files(), tokenizer)
    >>> first = next(iter(batches))
    >>> first["token_ids"].shape[1], sorted(first)
    (128, ['next_sentence_labels', 'padding_mask', 'segment_ids', 'token_ids'])
    """
    files = corpus_files(file_patterns)
    pipelines, pipeline = 1, 0
    if input_context is not None:
        pipelines, pipeline = input_context.num_input_pipelines, input_context.input_pipeline_id
    by_file = pipelines > 1 and len(files) >= pipelines
    windows = document_windows(files, config.window_size, format=config.format,
                               bad_lines=config.bad_lines, stats=stats,
                               input_context=input_context if by_file else None)
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
    windows = tf.data.Dataset.range(2**62 if copies is None else copies).flat_map(
        _without_autograph(lambda copy: numbered.map(_without_autograph(
            lambda number, sentences: (copy, number, sentences)))))
    base = _seed_tensor(seed)

    @_without_autograph
    def build(copy, number, sentences):
        tokens = tokenizer.tokenize(sentences.flat_values)
        documents = sentences.with_flat_values(tokens)
        if stats is not None:
            documents = _counted_without_tokens(documents, stats)
        window_seed = tf.random.experimental.stateless_fold_in(
            tf.random.experimental.stateless_fold_in(base, copy), number)
        return build_instances(documents, config.objective, tokenizer.layout,
                               config.max_seq_length, window_seed,
                               short_seq_prob=config.short_seq_prob)

    return windows.map(build, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def pretraining_dataset(file_patterns, tokenizer, config=PretrainingDataConfig(), *, seed=0,
                        epochs=1, input_context=None, stats=None):
    """Masked pretraining batches from text files, ready for `model.fit`, as `config` (a
    `PretrainingDataConfig`) says.

    Each batch is a dict of `token_ids` (masked), `segment_ids`,
    `padding_mask`, `next_sentence_labels` (`[batch]`; 1 = random next / swapped,
    0 for objectives without a pair label), `masked_lm_positions`,
    `masked_lm_ids` and `masked_lm_weights` (`[batch, max_predictions_per_seq]`).
    Instances are rebuilt and re-masked every epoch (`epochs=None` repeats
    forever); the shuffle buffer spans epoch boundaries. With an
    `input_context`, `config.batch_size` is the global batch size
    and each pipeline yields its share. `seed` is an int, or a scalar int64 tensor (a seed
    drawn inside the pipeline, as each tf.data service worker does). `stats`: as
    `instance_batches`'.

    >>> import kerasbert.data.demo, kerasbert.zoo
    >>> tokenizer = kerasbert.zoo.build_tokenizer(
    ...     "bert_tiny_uncased", kerasbert.data.demo.vocabulary_dir("wordpiece"))
    >>> dataset = pretraining_dataset(kerasbert.data.demo.pretraining_corpus_files(), tokenizer,
    ...                               PretrainingDataConfig(batch_size=8, shuffle_buffer=100))
    >>> batch = next(iter(dataset))
    >>> batch["token_ids"].shape.as_list(), batch["masked_lm_ids"].shape.as_list()
    ([8, 128], [8, 20])
    """
    masker = config.masker(tokenizer)
    batch_size = config.batch_size
    if input_context is not None:
        batch_size = input_context.get_per_replica_batch_size(batch_size)
    instances = instance_batches(file_patterns, tokenizer, config, seed=seed, copies=epochs,
                                 stats=stats, input_context=input_context).unbatch()
    if config.shuffle_buffer:
        instances = instances.shuffle(config.shuffle_buffer, seed=_python_seed(seed, "shuffle"))
    batches = instances.batch(batch_size, drop_remainder=config.drop_remainder).enumerate()
    # Batch numbers run on through the epochs, so every epoch is masked anew.
    mask_seed = tf.random.experimental.stateless_fold_in(_seed_tensor(seed), -1)
    return batches.map(_without_autograph(lambda number, batch: masker(
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


def _without_autograph(function):
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
