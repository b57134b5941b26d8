"""The data and optimization flags of the binaries that train on masked-LM pretraining batches
(`kerasbert-pretrain`, `kerasbert-distill`), and their translation into library arguments: the
run's `RunSettings` (`kerasbert.training.pretraining_run`: the batches, from pretraining TFRecords
or from text, the optimizer, the tokenizer, the training loop) and `EncoderConfig` overrides. The
flags are defined with absl alone; the functions import the library (TensorFlow) when the
binary's `main` calls them."""

from absl import flags

from kerasbert.cli.data_flags import tokenizer_arguments

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


def run_settings_from_flags():
    """The `RunSettings` of the flags (`kerasbert.training.pretraining_run`): a `ValueError` unless
    exactly one of `--input_files` and `--text_files` is given, or if `--tf_data_service` is not
    a `grpc://HOST:PORT` address."""
    from kerasbert.data.pretraining import PretrainingDataConfig
    from kerasbert.data.pretraining_input import PretrainingInput
    from kerasbert.training.pretraining_run import RunSettings
    from kerasbert.training.run_record import recorded_flags

    data = PretrainingDataConfig(
        FLAGS.objective, FLAGS.max_seq_length, FLAGS.batch_size,
        masked_lm_prob=FLAGS.masked_lm_prob, max_predictions_per_seq=FLAGS.max_predictions_per_seq,
        whole_word_masking=FLAGS.whole_word_masking)
    return RunSettings(
        FLAGS.model_dir, PretrainingInput(FLAGS.text_files, FLAGS.input_files, data,
                                          FLAGS.tf_data_service),
        FLAGS.train_steps, optimizer={
            "name": FLAGS.optimizer, "learning_rate": FLAGS.learning_rate,
            "num_warmup_steps": FLAGS.warmup_steps, "weight_decay": FLAGS.weight_decay,
            "global_clipnorm": FLAGS.clip_norm or None,
            "gradient_accumulation_steps": FLAGS.grad_accum_steps if FLAGS.grad_accum_steps > 1
            else None},
        tokenizer=tokenizer_arguments(), strategy=FLAGS.strategy, num_gpus=FLAGS.num_gpus,
        tpu=FLAGS.tpu, seed=FLAGS.seed, mixed_precision=FLAGS.mixed_precision,
        steps_per_loop=FLAGS.steps_per_loop, checkpoint_interval=FLAGS.checkpoint_interval,
        jit_compile=FLAGS.jit_compile, max_recoveries=FLAGS.max_recoveries,
        overwrite=FLAGS.overwrite, recorded_flags=recorded_flags(FLAGS))


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
