"""Pretraining TFRecords: round trips, Google / Model Garden compatibility, atomicity, sharding, errors."""

import collections
import os

import numpy as np
import pytest
import tensorflow as tf

from kerasbert.data.tfrecords import (GOOGLE_FEATURE_NAMES, completed_shards, read_pretraining_records,
                                      serialize_instances, shard_paths, write_tfrecord)

SEQ, PREDICTIONS = 16, 4
OUR_NAMES = ("token_ids", "padding_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
             "masked_lm_weights", "next_sentence_labels")


def make_batch(n, seed=0, seq=SEQ, predictions=PREDICTIONS, first_id=0):
    """n random instances laid out like real ones; token_ids[:, 1] is a unique id from first_id up."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, seq + 1, size=n)
    real = np.arange(seq)[None, :] < lengths[:, None]
    token_ids = np.where(real, rng.integers(5, 30_000, size=(n, seq)), 0)
    token_ids[:, 1] = first_id + np.arange(n)
    segment_ids = np.where(real & (np.arange(seq)[None, :] >= lengths[:, None] // 2), 1, 0)
    num_predictions = rng.integers(1, predictions + 1, size=n)
    predicted = np.arange(predictions)[None, :] < num_predictions[:, None]
    positions = np.where(predicted, rng.integers(1, seq, size=(n, predictions)), 0)
    predicted_ids = np.where(predicted, rng.integers(5, 30_000, size=(n, predictions)), 0)
    return {"token_ids": token_ids.astype("int32"), "padding_mask": real.astype("int32"),
            "segment_ids": segment_ids.astype("int32"),
            "masked_lm_positions": positions.astype("int32"), "masked_lm_ids": predicted_ids.astype("int32"),
            "masked_lm_weights": predicted.astype("float32"),
            "next_sentence_labels": rng.integers(0, 2, size=n).astype("int32")}


def read_all(dataset):
    """A dataset of instances as one dict of stacked numpy arrays."""
    instances = list(dataset.as_numpy_iterator())
    return {name: np.stack([instance[name] for instance in instances]) for name in OUR_NAMES}


def assert_same_instances(actual, expected):
    for name in OUR_NAMES:
        np.testing.assert_array_equal(actual[name], expected[name], err_msg=name)


def google_examples(batch):
    """tf.train.Examples built exactly the way Google's write_instance_to_example_files builds them."""
    def create_int_feature(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

    def create_float_feature(values):
        return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))

    examples = []
    for i in range(len(batch["token_ids"])):
        features = collections.OrderedDict()
        features["input_ids"] = create_int_feature(batch["token_ids"][i].tolist())
        features["input_mask"] = create_int_feature(batch["padding_mask"][i].tolist())
        features["segment_ids"] = create_int_feature(batch["segment_ids"][i].tolist())
        features["masked_lm_positions"] = create_int_feature(batch["masked_lm_positions"][i].tolist())
        features["masked_lm_ids"] = create_int_feature(batch["masked_lm_ids"][i].tolist())
        features["masked_lm_weights"] = create_float_feature(batch["masked_lm_weights"][i].tolist())
        features["next_sentence_labels"] = create_int_feature([int(batch["next_sentence_labels"][i])])
        examples.append(tf.train.Example(features=tf.train.Features(feature=features)))
    return examples


def write_google_file(path, batch):
    with tf.io.TFRecordWriter(str(path)) as writer:
        for example in google_examples(batch):
            writer.write(example.SerializeToString())
    return str(path)


def leftovers(directory):
    return sorted(name for name in os.listdir(directory) if name.startswith(".tmp-"))


@pytest.mark.parametrize("compression", [None, "", "GZIP", "gzip"])
def test_round_trip(tmp_path, compression):
    batch = make_batch(10)
    path = write_tfrecord(str(tmp_path / "train.tfrecord"), serialize_instances(batch),
                          compression=compression)
    read_compression = "auto" if compression == "gzip" else compression
    dataset = read_pretraining_records(path, SEQ, PREDICTIONS, compression=read_compression)
    assert dataset.element_spec["token_ids"] == tf.TensorSpec([SEQ], tf.int32)
    assert dataset.element_spec["masked_lm_weights"] == tf.TensorSpec([PREDICTIONS], tf.float32)
    assert dataset.element_spec["next_sentence_labels"] == tf.TensorSpec([], tf.int32)
    assert_same_instances(read_all(dataset), batch)
    with open(path, "rb") as file:
        assert (file.read(2) == b"\x1f\x8b") == (compression in ("GZIP", "gzip"))


def test_auto_compression_reads_a_mix_of_files(tmp_path):
    batches = [make_batch(3, seed=1), make_batch(4, seed=2, first_id=100)]
    write_tfrecord(str(tmp_path / "a.tfrecord"), serialize_instances(batches[0]), compression="GZIP")
    write_tfrecord(str(tmp_path / "b.tfrecord"), serialize_instances(batches[1]))
    dataset = read_pretraining_records(str(tmp_path / "*.tfrecord"), SEQ, PREDICTIONS, compression="auto",
                                       num_parallel_reads=1)
    expected = {name: np.concatenate([b[name] for b in batches]) for name in OUR_NAMES}
    assert_same_instances(read_all(dataset), expected)


def test_records_equal_googles_protos():
    batch = make_batch(6)
    ours = [tf.train.Example.FromString(record) for record in serialize_instances(batch).numpy()]
    assert ours == google_examples(batch)


@pytest.mark.parametrize("compression", [None, "GZIP"])
def test_rewrites_are_byte_identical(tmp_path, compression):
    batch = make_batch(20)
    first = write_tfrecord(str(tmp_path / "first.tfrecord"),
                           [serialize_instances(batch)], compression=compression)
    second = write_tfrecord(str(tmp_path / "second.tfrecord"),
                            (r for r in serialize_instances(dict(batch)).numpy()), compression=compression)
    with open(first, "rb") as a, open(second, "rb") as b:
        assert a.read() == b.read()


def test_reads_records_made_by_googles_script(tmp_path):
    batch = make_batch(7, seed=3)
    path = write_google_file(tmp_path / "google.tfrecord", batch)
    assert_same_instances(read_all(read_pretraining_records(path, SEQ, PREDICTIONS)), batch)


def test_ours_parse_with_model_gardens_spec(tmp_path):
    batch = make_batch(5, seed=4)
    path = write_tfrecord(str(tmp_path / "ours.tfrecord"), serialize_instances(batch))
    name_to_features = {
        "input_ids": tf.io.FixedLenFeature([SEQ], tf.int64),
        "input_mask": tf.io.FixedLenFeature([SEQ], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([SEQ], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([PREDICTIONS], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([PREDICTIONS], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([PREDICTIONS], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }
    parsed = [tf.io.parse_single_example(record, name_to_features)
              for record in tf.data.TFRecordDataset(path)]
    assert len(parsed) == 5
    for google_name, our_name in zip(GOOGLE_FEATURE_NAMES, OUR_NAMES):
        values = np.stack([example[google_name].numpy() for example in parsed])
        np.testing.assert_array_equal(values.reshape(batch[our_name].shape), batch[our_name],
                                      err_msg=google_name)


def test_serialize_runs_in_tf_function_and_dataset_map():
    batch = make_batch(8, seed=5)
    eager = serialize_instances(batch).numpy().tolist()
    assert tf.function(serialize_instances)(batch).numpy().tolist() == eager
    mapped = tf.data.Dataset.from_tensor_slices(batch).batch(3).map(serialize_instances).unbatch()
    assert [record.numpy() for record in mapped] == eager


def test_dataset_batches_with_static_shapes(tmp_path):
    batch = make_batch(10, seed=6)
    path = write_tfrecord(str(tmp_path / "train.tfrecord"), serialize_instances(batch))
    batched = read_pretraining_records(path, SEQ, PREDICTIONS).batch(4, drop_remainder=True)
    assert batched.element_spec["token_ids"].shape == (4, SEQ)
    assert batched.element_spec["masked_lm_ids"].shape == (4, PREDICTIONS)
    assert batched.element_spec["next_sentence_labels"].shape == (4,)
    first = next(iter(batched))
    np.testing.assert_array_equal(first["padding_mask"].numpy(), batch["padding_mask"][:4])


class Interrupted(Exception):
    pass


@pytest.mark.parametrize("error", [Interrupted, KeyboardInterrupt])
def test_failed_write_leaves_neither_final_nor_temporary_file(tmp_path, error):
    records = serialize_instances(make_batch(6)).numpy().tolist()

    def failing_records():
        yield from records[:3]
        raise error("stop")

    path = str(tmp_path / "train.tfrecord")
    with pytest.raises(error):
        write_tfrecord(path, failing_records(), compression="GZIP")
    assert os.listdir(tmp_path) == []


def test_failed_rewrite_leaves_the_old_file_untouched(tmp_path):
    path = write_tfrecord(str(tmp_path / "train.tfrecord"), [b"old"])

    def failing_records():
        yield b"new"
        raise Interrupted()

    with pytest.raises(Interrupted):
        write_tfrecord(path, failing_records())
    assert [r.numpy() for r in tf.data.TFRecordDataset(path)] == [b"old"]
    assert leftovers(tmp_path) == []


def test_final_file_appears_only_after_success(tmp_path):
    path = str(tmp_path / "train.tfrecord")
    seen_while_writing = []

    def watched_records():
        for record in (b"a", b"b"):
            seen_while_writing.append((os.path.exists(path), leftovers(tmp_path)))
            yield record

    write_tfrecord(path, watched_records())
    assert [exists for exists, _ in seen_while_writing] == [False, False]
    assert all(len(temporary) == 1 and temporary[0].startswith(".tmp-train.tfrecord-")
               for _, temporary in seen_while_writing)
    assert sorted(os.listdir(tmp_path)) == ["train.tfrecord"]
    assert [r.numpy() for r in tf.data.TFRecordDataset(path)] == [b"a", b"b"]


def test_shard_paths():
    assert shard_paths("out.tfrecord", 3) == ["out-00000-of-00003.tfrecord", "out-00001-of-00003.tfrecord",
                                              "out-00002-of-00003.tfrecord"]
    assert shard_paths("d/out.tfrecord", 1) == ["d/out.tfrecord"]
    assert shard_paths("d/out.tfrecord.gz", 2)[1] == "d/out-00001-of-00002.tfrecord.gz"
    assert shard_paths("d.x/out", 2)[0] == "d.x/out-00000-of-00002"
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="num_shards"):
            shard_paths("out.tfrecord", bad)


def test_completed_shards_ignores_leftover_temporary_files(tmp_path):
    paths = shard_paths(str(tmp_path / "out.tfrecord"), 3)
    write_tfrecord(paths[2], [b"done"])
    (tmp_path / ".tmp-out-00000-of-00003.tfrecord-abc123").write_bytes(b"partial")
    assert completed_shards(paths) == [False, False, True]


def test_compression_errors_name_the_value(tmp_path):
    with pytest.raises(ValueError, match="'ZLIB'"):
        write_tfrecord(str(tmp_path / "x.tfrecord"), [b"a"], compression="ZLIB")
    with pytest.raises(ValueError, match="'auto'"):
        write_tfrecord(str(tmp_path / "x.tfrecord"), [b"a"], compression="auto")
    with pytest.raises(TypeError, match="str"):
        write_tfrecord(str(tmp_path / "x.tfrecord"), [[b"a", "text"]])
    assert os.listdir(tmp_path) == []
    path = write_tfrecord(str(tmp_path / "x.tfrecord"), [b"a"])
    with pytest.raises(ValueError, match="'bz2'"):
        read_pretraining_records(path, SEQ, PREDICTIONS, compression="bz2")


def test_missing_files_name_the_pattern(tmp_path):
    write_tfrecord(str(tmp_path / "a.tfrecord"), serialize_instances(make_batch(2)))
    pattern = str(tmp_path / "missing-*.tfrecord")
    with pytest.raises(FileNotFoundError, match="missing-"):
        read_pretraining_records([str(tmp_path / "a.tfrecord"), pattern], SEQ, PREDICTIONS)


@pytest.mark.parametrize("change, message", [
    (lambda b: b.update(token_ids=b["token_ids"][:, :-1]), "token_ids.*padding_mask"),
    (lambda b: b.update(masked_lm_weights=b["masked_lm_weights"][:, :2]),
     "masked_lm_ids.*masked_lm_weights"),
    (lambda b: b.pop("segment_ids"), "missing 'segment_ids'"),
    (lambda b: b.update(next_sentence_labels=b["next_sentence_labels"][:, None]),
     "'next_sentence_labels'.*rank 1"),
    (lambda b: b.update(masked_lm_ids=b["masked_lm_ids"][0]), r"'masked_lm_ids'.*rank 2.*\(4,\)"),
    (lambda b: b.update(padding_mask=b["padding_mask"][:2]), "instances disagrees.*padding_mask"),
    (lambda b: b.update(token_ids=b["token_ids"].astype("float32")), "'token_ids' must be integer"),
])
def test_bad_batches_are_named(change, message):
    batch = make_batch(3)
    change(batch)
    with pytest.raises(ValueError, match=message):
        serialize_instances(batch)


@pytest.mark.parametrize("seq, predictions, feature, length", [
    (SEQ + 2, PREDICTIONS, "input_ids", SEQ + 2),
    (SEQ, PREDICTIONS - 1, "masked_lm_positions", PREDICTIONS - 1),
])
def test_records_of_another_length_fail_naming_the_feature(tmp_path, seq, predictions, feature, length):
    path = write_google_file(tmp_path / "google.tfrecord", make_batch(5))
    dataset = read_pretraining_records(str(tmp_path / "*.tfrecord"), seq, predictions).batch(4)
    message = f"feature {feature} must have length {length} in every record of .*/[*].tfrecord"
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        list(dataset)
    assert os.path.exists(path)


def write_numbered_files(directory, sizes):
    """Files of `sizes` instances whose unique ids (token_ids[:, 1]) count up from 0; returns all ids."""
    first = 0
    for index, size in enumerate(sizes):
        batch = make_batch(size, seed=index, first_id=first)
        write_tfrecord(str(directory / f"part-{index}.tfrecord"), serialize_instances(batch))
        first += size
    return set(range(first))


def ids_of(dataset):
    return [int(instance["token_ids"][1]) for instance in dataset.as_numpy_iterator()]


@pytest.mark.parametrize("sizes, by_file", [((5, 3, 4, 2, 6), True), ((9,), False)])
def test_input_pipelines_see_disjoint_shares_of_everything(tmp_path, sizes, by_file):
    all_ids = write_numbered_files(tmp_path, sizes)
    shares = []
    for pipeline in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline)
        shares.append(ids_of(read_pretraining_records(str(tmp_path / "part-*"), SEQ, PREDICTIONS,
                                                      input_context=context)))
    assert not set(shares[0]) & set(shares[1])
    assert sorted(shares[0] + shares[1]) == sorted(all_ids)
    starts = np.cumsum((0,) + sizes)
    if by_file:   # worker i reads the sorted files i, i + 2, ...
        for pipeline, share in enumerate(shares):
            files = range(pipeline, len(sizes), 2)
            assert set(share) == {i for f in files for i in range(starts[f], starts[f + 1])}
    else:
        assert shares == [list(range(0, 9, 2)), list(range(1, 9, 2))]


def test_shuffled_files_follow_the_seed(tmp_path):
    all_ids = write_numbered_files(tmp_path, (2, 2, 2, 2, 2, 2))
    pattern = str(tmp_path / "part-*")
    unshuffled = ids_of(read_pretraining_records(pattern, SEQ, PREDICTIONS, num_parallel_reads=1))
    assert unshuffled == sorted(all_ids)
    orders = [ids_of(read_pretraining_records(pattern, SEQ, PREDICTIONS, num_parallel_reads=1,
                                              shuffle_files=True, seed=seed)) for seed in (7, 7, 8)]
    assert orders[0] == orders[1] and sorted(orders[0]) == unshuffled
    assert orders[0] != unshuffled or orders[2] != unshuffled
    # Files stay whole: each file's two instances are adjacent.
    assert all(a // 2 == b // 2 for a, b in zip(orders[0][::2], orders[0][1::2]))


def test_record_sharding_with_shuffled_files_needs_a_seed(tmp_path):
    write_numbered_files(tmp_path, (4,))
    context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=0)
    with pytest.raises(ValueError, match="seed"):
        read_pretraining_records(str(tmp_path / "part-*"), SEQ, PREDICTIONS, input_context=context,
                                 shuffle_files=True)


def damaged_copy(tmp_path, records, damage, bad_record):
    """An uncompressed TFRecord file of `records` whose record `bad_record` is cut short ("truncate")
    or has one flipped bit in its data ("flip")."""
    path = write_tfrecord(str(tmp_path / "good.tfrecord"), records)
    data = bytearray(open(path, "rb").read())
    start = sum(len(record) + 16 for record in records[:bad_record])  # length, 2 CRCs, data
    if damage == "truncate":
        data = data[:start + 12 + len(records[bad_record]) // 2]
    else:
        data[start + 12 + len(records[bad_record]) // 2] ^= 0x08
    damaged = tmp_path / f"{damage}.tfrecord"
    damaged.write_bytes(bytes(data))
    return str(damaged)


@pytest.mark.parametrize("damage, bad_record", [("truncate", 299), ("flip", 7), ("flip", 260)])
def test_damaged_files_fail_naming_the_file_and_record(tmp_path, damage, bad_record):
    records = list(serialize_instances(make_batch(300)).numpy())
    write_numbered_files(tmp_path, (5,))
    good = str(tmp_path / "part-*")
    damaged = damaged_copy(tmp_path, records, damage, bad_record)
    dataset = read_pretraining_records([good, damaged], SEQ, PREDICTIONS)
    with pytest.raises(tf.errors.InvalidArgumentError) as error:
        for _ in dataset:
            pass
    message = error.value.message
    assert f"[TFRecord file] [{damaged}] [is truncated or corrupt at record] [{bad_record}]" in message
    # The undamaged file reads whole.
    intact = read_all(read_pretraining_records(str(tmp_path / "good.tfrecord"), SEQ, PREDICTIONS))
    assert len(intact["token_ids"]) == 300


def test_damaged_gzip_files_fail_naming_the_file(tmp_path):
    path = write_tfrecord(str(tmp_path / "good.tfrecord"), serialize_instances(make_batch(300)),
                          compression="gzip")
    data = open(path, "rb").read()
    for name, damaged in (("cut", data[:-9]), ("flip", data[:200] + bytes([data[200] ^ 1]) + data[201:])):
        damaged_path = tmp_path / f"{name}.tfrecord"
        damaged_path.write_bytes(damaged)
        with pytest.raises(tf.errors.InvalidArgumentError, match=f"{damaged_path}.*truncated or corrupt"):
            list(read_pretraining_records(str(damaged_path), SEQ, PREDICTIONS, compression="auto"))
    assert len(read_all(read_pretraining_records(path, SEQ, PREDICTIONS, compression="auto"))["token_ids"]) == 300


def test_a_file_that_is_not_a_tfrecord_is_named(tmp_path):
    """TensorFlow says "corrupted record at 0 (Is this even a TFRecord file?)" and no file;
    counting a shard (a manifest's entry, the main job's data stage) names it."""
    from kerasbert.data.manifest import shard_entry
    from kerasbert.data.tfrecords import count_records

    path = tmp_path / "train-00000-of-00001.tfrecord"
    path.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(ValueError, match=rf"TFRecord file {path}: cannot be read \(corrupted "
                                         r"record at 0"):
        count_records(str(path))
    with pytest.raises(ValueError, match=f"TFRecord file {path}: cannot be read"):
        shard_entry(str(path), ["corpus.txt"])
