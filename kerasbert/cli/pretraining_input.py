"""The data and optimization flags of the binaries that train on masked-LM pretraining batches
(`kerasbert-pretrain`, `kerasbert-distill`), and what they build from them: the batches (from
pretraining TFRecords or from text), the optimizer, the tokenizer arguments recorded in
`kerasbert_model.json` and `EncoderConfig` overrides. The flags are defined with absl alone;
the functions import the library (TensorFlow) when the binary's `main` calls them."""

from absl import flags

from kerasbert import file_system

FLAGS = flags.FLAGS
flags.DEFINE_list("input_files", None, "Pretraining TFRecords (globs), as "
                  "kerasbert-create-pretraining-data or Google's script writes them.")
flags.DEFINE_list("text_files", None, "Text files (globs) to make instances from on the fly.")
flags.DEFINE_integer("train_steps", None, "Total training steps.", required=True, lower_bound=1)
flags.DEFINE_integer("batch_size", 32, "Global batch size.", lower_bound=1)
flags.DEFINE_boolean("whole_word_masking", False, "Mask whole words (text input).")
flags.DEFINE_integer("warmup_steps", 0, "Steps of linear warmup.", lower_bound=0)
flags.DEFINE_enum("optimizer", "adamw", ["adamw", "lamb", "adam"], "Optimizer.")
flags.DEFINE_float("clip_norm", 1.0, "Clip gradients to this global norm (0: no clipping).",
                   lower_bound=0.0)
flags.DEFINE_integer("grad_accum_steps", 1, "Batches whose gradients add up to one update.",
                     lower_bound=1)
flags.DEFINE_integer("steps_per_loop", 100, "Steps between logs (one compiled loop).",
                     lower_bound=1)
flags.DEFINE_string("tf_data_service", None, "grpc://HOST:PORT of a tf.data service dispatcher "
                    "(kerasbert-data-service): its workers make the batches (reading the input "
                    "files at the same paths), this process only trains on them. From text, each "
                    "worker draws its own data seed: the data order is not reproducible and a "
                    "restart does not resume at the same data position.")


def check_input_flags():
    """A `ValueError` unless exactly one of `--input_files` and `--text_files` is given, or if
    `--tf_data_service` is not a `grpc://HOST:PORT` address."""
    if (FLAGS.input_files is None) == (FLAGS.text_files is None):
        raise ValueError("Give exactly one of --input_files and --text_files")
    if FLAGS.tf_data_service is not None:
        from kerasbert.data.service import service_address

        service_address(FLAGS.tf_data_service)


def pretraining_batches(tokenizer, objective, context):
    """This worker's batches, repeated forever (its share of the global batch), from the text
    files (instances of `objective`, masked on the fly) or the TFRecords the flags name; made
    by the tf.data service's workers with `--tf_data_service` (each from its own seed)."""
    import tensorflow as tf

    from kerasbert.data.service import (DISTRIBUTED_EPOCH, PARALLEL_EPOCHS, distribute,
                                        freshly_seeded)

    if FLAGS.tf_data_service is None:
        return _batches(tokenizer, objective, context, FLAGS.seed)
    # The whole corpus, not this trainer's share: the service divides the work.
    whole = tf.distribute.InputContext(num_replicas_in_sync=context.num_replicas_in_sync)
    if FLAGS.text_files is None:
        return distribute(_batches(tokenizer, objective, whole, FLAGS.seed),
                          FLAGS.tf_data_service, DISTRIBUTED_EPOCH)
    return distribute(freshly_seeded(lambda seed: _batches(tokenizer, objective, whole, seed)),
                      FLAGS.tf_data_service, PARALLEL_EPOCHS)


def saves_data_position():
    """Whether the training loop can checkpoint the position in the data (not when the
    tf.data service makes the batches)."""
    return FLAGS.tf_data_service is None


def _batches(tokenizer, objective, context, seed):
    import tensorflow as tf

    from kerasbert.data.pretraining import PretrainingDataConfig, pretraining_dataset
    from kerasbert.data.tfrecords import read_pretraining_records

    if FLAGS.text_files is not None:
        return pretraining_dataset(
            _absolute(FLAGS.text_files), tokenizer, PretrainingDataConfig(
                objective, FLAGS.max_seq_length, FLAGS.batch_size,
                masked_lm_prob=FLAGS.masked_lm_prob,
                max_predictions_per_seq=FLAGS.max_predictions_per_seq,
                whole_word_masking=FLAGS.whole_word_masking),
            seed=seed, epochs=None, input_context=context)
    records = read_pretraining_records(_absolute(FLAGS.input_files), FLAGS.max_seq_length,
                                       FLAGS.max_predictions_per_seq, compression="auto",
                                       input_context=context)
    batch_size = context.get_per_replica_batch_size(FLAGS.batch_size)
    return records.repeat().shuffle(10_000, seed=seed).batch(
        batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)


def _absolute(patterns):
    """Local paths made absolute (tf.data service workers run elsewhere: they read the files at
    the same paths, e.g. on a shared file system; URLs such as gs://... are kept)."""
    return [file_system.absolute(pattern) for pattern in patterns]


def optimizer_from_flags():
    """The optimizer and learning-rate schedule the flags describe (create it in the
    strategy's scope)."""
    from kerasbert.training.optimizers import create_optimizer

    return create_optimizer(
        FLAGS.optimizer, FLAGS.learning_rate, num_train_steps=FLAGS.train_steps,
        num_warmup_steps=FLAGS.warmup_steps, weight_decay=FLAGS.weight_decay,
        global_clipnorm=FLAGS.clip_norm or None,
        gradient_accumulation_steps=FLAGS.grad_accum_steps if FLAGS.grad_accum_steps > 1
        else None)


def tokenizer_arguments():
    """The tokenizer flags as `load_tokenizer` arguments (absolute paths), or None without a
    tokenizer flag."""
    if FLAGS.vocab_file is None and FLAGS.tokenizer_dir is None:
        return None

    def absolute(path):
        return None if path is None else file_system.absolute(path)

    return {"vocab_file": absolute(FLAGS.vocab_file), "merges_file": absolute(FLAGS.merges_file),
            "tokenizer_dir": absolute(FLAGS.tokenizer_dir), "lowercase": FLAGS.do_lower_case}


def config_overrides(items, flag_name):
    """`{field: value}` of `field=value` items of `EncoderConfig` fields (values parsed as int,
    float, true/false or kept as text); a `ValueError` naming `flag_name` and the item
    otherwise."""
    from kerasbert.config import EncoderConfig

    fields = {}
    for item in items:
        name, _, value = item.partition("=")
        if not value or name not in EncoderConfig.__dataclass_fields__:
            raise ValueError(f"{flag_name} item {item!r} is not field=value of EncoderConfig "
                             f"({sorted(EncoderConfig.__dataclass_fields__)})")
        fields[name] = _parse(value)
    return fields


def _parse(value):
    for convert in (int, float):
        try:
            return convert(value)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(value.lower(), value)
