"""BERT pretraining instances in TFRecord files, with the feature names Google's BERT uses.

A file holds one `tf.train.Example` per instance with the features Google's
`create_pretraining_data.py` writes (`GOOGLE_FEATURE_NAMES`), so records made by Google's or the
TF Model Garden's script load here and ours load there. In memory an instance is a dict in our
names: "token_ids" (Google's "input_ids"), "padding_mask" ("input_mask"), "segment_ids",
"masked_lm_positions", "masked_lm_ids", "masked_lm_weights" and "next_sentence_labels" (a scalar).

Files are written atomically: a file at its final name is always complete. Paths may be local or
on any of TensorFlow's file systems (`kerasbert.file_system`).
"""

import os

import tensorflow as tf

from kerasbert import file_system
from kerasbert.atomic_files import TemporarySibling
from kerasbert.op_errors import op_error_message

GOOGLE_FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
                        "masked_lm_weights", "next_sentence_labels")

# Our name for each Google feature, in Google's order.
_OUR_NAMES = dict(zip(GOOGLE_FEATURE_NAMES, (
    "token_ids", "padding_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids", "masked_lm_weights",
    "next_sentence_labels")))
_PER_TOKEN = ("input_ids", "input_mask", "segment_ids")
_PER_PREDICTION = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")
_INT_FEATURES = tuple(name for name in GOOGLE_FEATURE_NAMES if name != "masked_lm_weights")
_GZIP_MAGIC = b"\x1f\x8b"
_PARSE_BATCH_SIZE = 256
# Bytes a TFRecord spends on each record besides its data: the length and two CRC32C checksums.
_RECORD_FRAMING_BYTES = 16
# Plain files are compared byte for byte (a modulus no file reaches).
_PLAIN_MODULUS = 1 << 62


def _compression_type(compression, allow_auto=False):
    """The compression type, "" or "GZIP", for `compression` (None, "", "gzip" in any case; or "auto")."""
    if compression is None:
        return ""
    if isinstance(compression, str) and compression.upper() in ("", "GZIP"):
        return compression.upper()
    if allow_auto and isinstance(compression, str) and compression.lower() == "auto":
        return "auto"
    allowed = 'None, "", "GZIP"' + (' or "auto"' if allow_auto else "")
    raise ValueError(f"compression must be {allowed}, got {compression!r}")


def _checked_batch(batch):
    """The batch's arrays as tensors keyed by Google name, after checking keys, ranks and lengths."""
    if not isinstance(batch, dict):
        raise ValueError(f"batch must be a dict of arrays keyed by {tuple(_OUR_NAMES.values())}, "
                         f"got {type(batch)}")
    tensors, lengths = {}, {}
    for google_name, our_name in _OUR_NAMES.items():
        if our_name not in batch:
            raise ValueError(f"batch is missing {our_name!r}; it has {sorted(batch)}")
        tensor = tf.convert_to_tensor(batch[our_name])
        per_instance = google_name == "next_sentence_labels"
        rank, layout = (1, "[instances]") if per_instance else (2, "[instances, length]")
        if tensor.shape.rank != rank:
            raise ValueError(f"{our_name!r} must have rank {rank} {layout}, got shape {tensor.shape}")
        if rank == 2 and tensor.shape[1] is None:
            raise ValueError(f"{our_name!r} must have a known length, got shape {tensor.shape}")
        floating = google_name == "masked_lm_weights"
        if not (tensor.dtype.is_floating if floating else tensor.dtype.is_integer):
            raise ValueError(f"{our_name!r} must be {'floating' if floating else 'integer'}, "
                             f"got dtype {tensor.dtype.name} (shape {tensor.shape})")
        tensors[google_name] = tf.cast(tensor, tf.float32 if floating else tf.int64)
        lengths[our_name] = tensor.shape
    for group in (("token_ids", "padding_mask", "segment_ids"),
                  ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")):
        if len({lengths[name][1] for name in group}) > 1:
            shapes = ", ".join(f"{name} {lengths[name]}" for name in group)
            raise ValueError(f"lengths disagree across the batch: {shapes}")
    if len({shape[0] for shape in lengths.values() if shape[0] is not None}) > 1:
        shapes = ", ".join(f"{name} {shape}" for name, shape in lengths.items())
        raise ValueError(f"the number of instances disagrees across the batch: {shapes}")
    return tensors


def _encode(message_type, fields, sizes=None):
    """Serialized `message_type` messages, one per position of the leading dimensions of the values.

    `fields` maps field names to values [..., count]; `sizes` [..., num_fields] says how many of each
    field's values a message sets (default: all of them).
    """
    values = list(fields.values())
    if sizes is None:
        sizes = tf.stack([tf.fill(tf.shape(value)[:-1], tf.shape(value)[-1]) for value in values], -1)
    return tf.io.encode_proto(sizes, values, list(fields), message_type)


def _encode_examples(tensors):
    """Serialized `tf.train.Example`s [n], built in-graph level by level (lists, features, map, example)."""
    int_lists = [tensors[name][:, None] if name == "next_sentence_labels" else tensors[name]
                 for name in _INT_FEATURES]
    longest = max(values.shape[1] for values in int_lists)
    padded = tf.stack([tf.pad(values, [[0, 0], [0, longest - values.shape[1]]]) for values in int_lists], 1)
    int_sizes = tf.broadcast_to(tf.constant([[values.shape[1]] for values in int_lists]),
                                [tf.shape(padded)[0], len(int_lists), 1])
    encoded_int_lists = _encode("tensorflow.Int64List", {"value": padded}, int_sizes)
    int_features = _encode("tensorflow.Feature", {"int64_list": encoded_int_lists[..., None]})
    float_list = _encode("tensorflow.FloatList", {"value": tensors["masked_lm_weights"]})
    float_feature = _encode("tensorflow.Feature", {"float_list": float_list[:, None]})
    at = GOOGLE_FEATURE_NAMES.index("masked_lm_weights")
    features = tf.concat([int_features[:, :at], float_feature[:, None], int_features[:, at:]], 1)[..., None]
    keys = tf.broadcast_to(tf.constant(GOOGLE_FEATURE_NAMES)[:, None], tf.shape(features))
    entries = _encode("tensorflow.Features.FeatureEntry", {"key": keys, "value": features})
    feature_maps = _encode("tensorflow.Features", {"feature": entries})
    return _encode("tensorflow.Example", {"features": feature_maps[:, None]})


def serialize_instances(batch):
    """Serialize a batch of pretraining instances (our names, arrays [n, ...]) to `tf.train.Example`s.

    Returns a tf.string tensor [n], one record per instance with Google's feature names. Runs eagerly,
    in `tf.function` and in `tf.data.Dataset.map` (the shapes must be known when traced).

    Example:
    >>> import numpy as np
    >>> batch = {"token_ids": [[2, 7, 3, 0]], "padding_mask": [[1, 1, 1, 0]], "segment_ids": [[0, 0, 0, 0]],
    ...          "masked_lm_positions": [[1, 0]], "masked_lm_ids": [[5, 0]],
    ...          "masked_lm_weights": [[1.0, 0.0]], "next_sentence_labels": [1]}
    >>> records = serialize_instances(batch)
    >>> example = tf.train.Example.FromString(records.numpy()[0])
    >>> list(example.features.feature["input_ids"].int64_list.value)
    [2, 7, 3, 0]
    """
    return _encode_examples(_checked_batch(batch))


def _record_bytes(records):
    """Each serialized record in `records` (bytes, or batches of them: lists, arrays, string tensors)."""
    if isinstance(records, bytes) or hasattr(records, "dtype"):  # one record, or one array / tensor
        records = [records]
    for item in records:
        batch = item.numpy() if isinstance(item, tf.Tensor) else item
        batch = batch.tolist() if hasattr(batch, "tolist") else batch
        if not isinstance(batch, (bytes, list, tuple)):
            raise TypeError(f"records must be bytes or batches of bytes, got {type(item)}")
        for record in [batch] if isinstance(batch, bytes) else batch:
            if not isinstance(record, bytes):
                raise TypeError(f"records must be bytes or batches of bytes, got an element {type(record)}")
            yield record


def write_tfrecord(path, records, compression=None):
    """Write serialized `records` (bytes, or batches of them) to the TFRecord file `path`, atomically.

    The records go to a temporary file in the same directory (`kerasbert.atomic_files`), renamed
    to `path` only once it is completely written and fsynced; if anything fails (or the writer is
    interrupted) the temporary file is removed and `path` is left untouched. `compression` is
    None/"" or "GZIP". Returns `path`.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "train.tfrecord")
    >>> write_tfrecord(path, [b"first", b"second"], compression="gzip") == path
    True
    >>> [r.numpy() for r in tf.data.TFRecordDataset(path, compression_type="GZIP")]
    [b'first', b'second']
    """
    compression_type = _compression_type(compression)
    # Created (and a killed run's leftover for `path` removed) before the first record is made.
    temporary = TemporarySibling(path)
    try:
        with tf.io.TFRecordWriter(temporary.path, options=compression_type) as writer:
            for record in _record_bytes(records):
                writer.write(record)
        temporary.publish()
    except BaseException as error:
        temporary.discard()
        if isinstance(error, (tf.errors.ResourceExhaustedError, tf.errors.PermissionDeniedError)):
            # TensorFlow's writer reports a full disk (ENOSPC) or a refused write this way.
            raise OSError(f"{path}: could not be written ({error.message}); nothing was left "
                          "there") from error
        raise
    return path


def count_records(path, compression=None):
    """The number of records in the TFRecord file at `path`; a damaged file is a `ValueError`
    naming it (TensorFlow's own "corrupted record at 0" names no file).

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "x.tfrecord")
    >>> path = write_tfrecord(path, [b"a", b"b"])
    >>> count_records(path)
    2
    """
    records = tf.data.TFRecordDataset(path, compression_type=compression or "")
    try:
        return int(records.reduce(tf.constant(0, tf.int64), lambda count, _: count + 1))
    except tf.errors.OpError as error:
        raise ValueError(f"TFRecord file {path}: cannot be read ({op_error_message(error)})"
                         ) from None


def shard_paths(output_file, num_shards):
    """The file names for `num_shards` shards of `output_file`.

    "out.tfrecord" in 3 shards is "out-00000-of-00003.tfrecord", ...; one shard keeps `output_file`.

    Example:
    >>> shard_paths("data/out.tfrecord", 2)
    ['data/out-00000-of-00002.tfrecord', 'data/out-00001-of-00002.tfrecord']
    >>> shard_paths("data/out.tfrecord", 1)
    ['data/out.tfrecord']
    """
    if isinstance(num_shards, bool) or not isinstance(num_shards, int) or num_shards < 1:
        raise ValueError(f"num_shards must be a positive integer, got {num_shards!r}")
    if num_shards == 1:
        return [output_file]
    directory, name = file_system.dirname(output_file), file_system.basename(output_file)
    dot = name.find(".", 1)
    stem, extension = (name, "") if dot < 0 else (name[:dot], name[dot:])
    return [file_system.join(directory, f"{stem}-{index:05d}-of-{num_shards:05d}{extension}")
            for index in range(num_shards)]


def completed_shards(paths):
    """For each path, whether its file exists (`write_tfrecord` only creates it once fully written).

    Example:
    >>> import os, tempfile
    >>> paths = shard_paths(os.path.join(tempfile.mkdtemp(), "out.tfrecord"), 2)
    >>> _ = write_tfrecord(paths[1], [b"record"])
    >>> completed_shards(paths)
    [False, True]
    """
    return [file_system.isfile(path) for path in paths]


def _matching_files(file_patterns):
    """The sorted files matching `file_patterns` (one or several), and the patterns as strings.

    FileNotFoundError names a pattern that matches nothing.
    """
    patterns = [file_patterns] if isinstance(file_patterns, (str, os.PathLike)) else list(file_patterns)
    if not patterns:
        raise FileNotFoundError("no file patterns given")
    files = set()
    for pattern in patterns:
        matches = file_system.glob(os.fspath(pattern))
        if not matches:
            raise FileNotFoundError(f"no files match {os.fspath(pattern)!r}")
        files.update(matches)
    return sorted(files), [os.fspath(pattern) for pattern in patterns]


def _file_compression(path, compression_type):
    """The compression type of the file at `path`: "auto" looks at its first two bytes."""
    if compression_type != "auto":
        return compression_type
    return "GZIP" if file_system.read_range(path, 0, 2) == _GZIP_MAGIC else ""


def _expected_bytes(path, compression_type):
    """What reading the whole file at `path` yields, in TFRecord framing bytes, and the modulus to
    compare it in: the file's size for plain files; for gzip files the uncompressed size its
    trailer records (RFC 1952 ISIZE), which is kept modulo 2**32."""
    if compression_type != "GZIP":
        return file_system.getsize(path), _PLAIN_MODULUS
    trailer = file_system.read_range(path, max(file_system.getsize(path) - 4, 0), 4)
    return int.from_bytes(trailer.ljust(4, b"\0"), "little"), 1 << 32


@tf.autograph.experimental.do_not_convert
def _checked_file_records(path, compression_type, expected_bytes, modulus):
    """The records of one file, failing with an error that names the file and the record number when
    the file is truncated or corrupt.

    TensorFlow's own error (DataLossError, "corrupted record at <byte offset>") names neither file nor
    record; so the reader skips past a bad record (`ignore_errors`, which ends the file there), counts
    the records and their framing bytes (a length, two checksums and the data: 16 bytes more than the
    record), and asserts at the file's end that it read every byte the file holds.
    """
    tagged = (tf.data.TFRecordDataset(path, compression_type=compression_type)
              .ignore_errors(log_warning=False)
              .batch(_PARSE_BATCH_SIZE)
              .map(lambda records: (records, False))
              .concatenate(tf.data.Dataset.from_tensors((tf.constant([], tf.string), True))))

    def count(state, element):
        records, file_end = element
        number, consumed = state
        number += tf.size(records, tf.int64)
        consumed += tf.reduce_sum(tf.cast(tf.strings.length(records), tf.int64) + _RECORD_FRAMING_BYTES)
        complete = tf.equal(tf.math.floormod(consumed, modulus), tf.math.floormod(expected_bytes, modulus))
        check = tf.debugging.Assert(tf.logical_or(tf.logical_not(file_end), complete), [
            "TFRecord file", path, "is truncated or corrupt at record", number,
            "(counting from 0; the records before it are intact)"], summarize=1)
        with tf.control_dependencies([check]):
            return (number, consumed), tf.identity(records)

    return tagged.scan((tf.constant(0, tf.int64), tf.constant(0, tf.int64)), count).unbatch()


def _positive_int(value, name):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def _parser(max_seq_length, max_predictions_per_seq, patterns):
    """A function from a batch of serialized records to instances in our names, checking each length."""
    expected = {name: max_seq_length for name in _PER_TOKEN}
    expected.update({name: max_predictions_per_seq for name in _PER_PREDICTION}, next_sentence_labels=1)
    spec = {name: tf.io.RaggedFeature(tf.float32 if name == "masked_lm_weights" else tf.int64,
                                      row_splits_dtype=tf.int64) for name in GOOGLE_FEATURE_NAMES}

    def parse(serialized):
        parsed = tf.io.parse_example(serialized, spec)
        instances = {}
        for name, length in expected.items():
            check = tf.debugging.assert_equal(
                parsed[name].row_lengths(), tf.constant(length, tf.int64),
                message=f"feature {name} must have length {length} in every record of "
                        f"{', '.join(patterns)}")
            with tf.control_dependencies([check]):
                values = tf.reshape(parsed[name].flat_values, [-1, length])
            values = values if name == "masked_lm_weights" else tf.cast(values, tf.int32)
            instances[_OUR_NAMES[name]] = values[:, 0] if name == "next_sentence_labels" else values
        return instances

    return parse


def read_pretraining_records(file_patterns, max_seq_length, max_predictions_per_seq, compression=None,
                             num_parallel_reads=4, input_context=None, shuffle_files=False, seed=None):
    """A `tf.data.Dataset` of single pretraining instances, in our names, from TFRecord files.

    Reads the files matching `file_patterns` (sorted), written by `write_tfrecord` or by Google's /
    Model Garden's `create_pretraining_data.py`. Each element has "token_ids", "padding_mask",
    "segment_ids" int32 [max_seq_length], "masked_lm_positions", "masked_lm_ids" int32 and
    "masked_lm_weights" float32 [max_predictions_per_seq], and "next_sentence_labels" int32 [].
    A record with another length fails with an error naming the feature and the expected length; a
    truncated or corrupt file (a bad checksum, a missing end) fails, when the reader gets there, with
    an error naming the file and the number of the first bad record.

    compression: None/"", "GZIP" or "auto" (each file's first bytes decide). num_parallel_reads files
    are read interleaved, in a fixed order. With `input_context` (a `tf.distribute.InputContext`) each
    input pipeline reads its own share: whole files when there are at least as many files as
    pipelines, else every n-th record. shuffle_files shuffles the file order (with `seed`; record-level
    sharding needs a seed so that all pipelines agree on the order).

    Example:
    >>> import os, tempfile
    >>> batch = {"token_ids": [[2, 7, 3, 0]], "padding_mask": [[1, 1, 1, 0]], "segment_ids": [[0, 0, 0, 0]],
    ...          "masked_lm_positions": [[1, 0]], "masked_lm_ids": [[5, 0]],
    ...          "masked_lm_weights": [[1.0, 0.0]], "next_sentence_labels": [1]}
    >>> path = os.path.join(tempfile.mkdtemp(), "train.tfrecord")
    >>> _ = write_tfrecord(path, serialize_instances(batch))
    >>> instance = next(iter(read_pretraining_records(path, max_seq_length=4, max_predictions_per_seq=2)))
    >>> instance["token_ids"].numpy().tolist(), instance["next_sentence_labels"].numpy().tolist()
    ([2, 7, 3, 0], 1)
    """
    _positive_int(max_seq_length, "max_seq_length")
    _positive_int(max_predictions_per_seq, "max_predictions_per_seq")
    _positive_int(num_parallel_reads, "num_parallel_reads")
    compression_type = _compression_type(compression, allow_auto=True)
    files, patterns = _matching_files(file_patterns)
    compressions = [_file_compression(path, compression_type) for path in files]
    expected_bytes, moduli = zip(*[_expected_bytes(path, file_compression)
                                   for path, file_compression in zip(files, compressions)])
    num_pipelines = input_context.num_input_pipelines if input_context is not None else 1
    shard_by_file = num_pipelines > 1 and len(files) >= num_pipelines
    shard_by_record = num_pipelines > 1 and not shard_by_file
    if shuffle_files and shard_by_record and seed is None:
        raise ValueError(f"shuffle_files with {len(files)} file(s) for {num_pipelines} input pipelines "
                         "shards by record, which needs a seed so that every pipeline shuffles the files "
                         "alike")

    file_dataset = tf.data.Dataset.from_tensor_slices(
        (files, compressions, tf.constant(expected_bytes, tf.int64), tf.constant(moduli, tf.int64)))
    if shard_by_file:
        file_dataset = file_dataset.shard(num_pipelines, input_context.input_pipeline_id)
    if shuffle_files:
        file_dataset = file_dataset.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    records = file_dataset.interleave(
        _checked_file_records,
        cycle_length=min(num_parallel_reads, len(files)), num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True)
    if shard_by_record:
        records = records.shard(num_pipelines, input_context.input_pipeline_id)
    parse = _parser(max_seq_length, max_predictions_per_seq, patterns)
    return (records.batch(_PARSE_BATCH_SIZE)
            .map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
            .unbatch())
