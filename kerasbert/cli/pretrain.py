"""`kerasbert-pretrain`: pretrain a zoo model on text or on pretraining TFRecords.

    kerasbert-pretrain --model=bert_base_uncased --text_files='corpus/*.txt' \\
        --vocab_file=vocab.txt --objective=nsp --model_dir=runs/bert \\
        --train_steps=100000 --batch_size=256 --learning_rate=1e-4 --warmup_steps=10000 \\
        --strategy=mirrored --mixed_precision=mixed_bfloat16

Flags can also come from a file (`--flagfile=run.flags`, absl's). Restarted with
the same flags, it resumes from the last checkpoint in `--model_dir`, at the
same step and position in the data. `--model_dir` also gets `kerasbert_model.json`
(the model's config and tokenizer), so `kerasbert-finetune --init_from=<model_dir>`
starts from the latest checkpoint.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402
from absl import app, flags, logging  # noqa: E402

from kerasbert import zoo  # noqa: E402
from kerasbert.config import EncoderConfig  # noqa: E402
from kerasbert.convert import from_hf  # noqa: E402
from kerasbert.data.pretraining import pretraining_dataset  # noqa: E402
from kerasbert.data.tfrecords import read_pretraining_records  # noqa: E402
from kerasbert.models.electra import ElectraPretrainer, generator_config  # noqa: E402
from kerasbert.models.pretraining import PretrainingModel  # noqa: E402
from kerasbert.models.encoder import build_encoder  # noqa: E402
from kerasbert.cli import instance_flags  # noqa: E402,F401  (defines --objective, ...)
from kerasbert.cli import training_flags  # noqa: E402,F401  (--model_dir, --strategy, ...)
from kerasbert.cli.data_flags import tokenizer_from_flags  # noqa: E402
from kerasbert.training.distribute import get_strategy, strategy_summary  # noqa: E402
from kerasbert.training.loop import NonFiniteLossError, model_variables, train  # noqa: E402
from kerasbert.training.optimizers import create_optimizer  # noqa: E402
from kerasbert.training.finetune import write_json  # noqa: E402
from kerasbert.training.pretrained_sources import (PRETRAINED_MODEL_FILE,  # noqa: E402
                                                   pretraining_description)

FLAGS = flags.FLAGS
flags.DEFINE_string("model", None, "Zoo preset, e.g. bert_base_uncased.", required=True)
flags.DEFINE_list("config_overrides", [], "EncoderConfig fields to change, e.g. "
                  "num_layers=2,hidden_size=128.")
flags.DEFINE_list("input_files", None, "Pretraining TFRecords (globs), as "
                  "kerasbert-create-pretraining-data or Google's script writes them.")
flags.DEFINE_list("text_files", None, "Text files (globs) to make instances from on the fly.")
flags.DEFINE_float("generator_ratio", 0.25, "ELECTRA: generator hidden size / discriminator's.")
flags.DEFINE_integer("train_steps", None, "Total training steps.", required=True)
flags.DEFINE_integer("batch_size", 32, "Global batch size.")
flags.DEFINE_boolean("whole_word_masking", False, "Mask whole words (text input).")
flags.DEFINE_integer("warmup_steps", 0, "Steps of linear warmup.")
flags.DEFINE_enum("optimizer", "adamw", ["adamw", "lamb", "adam"], "Optimizer.")
flags.DEFINE_float("clip_norm", 1.0, "Clip gradients to this global norm (0: no clipping).")
flags.DEFINE_integer("grad_accum_steps", 1, "Batches whose gradients add up to one update.")
flags.DEFINE_string("init_checkpoint", None, "Initial encoder weights: a Hugging Face model "
                    "directory or a kerasbert checkpoint (model_dir/ckpt-N).")
flags.DEFINE_integer("steps_per_loop", 100, "Steps between logs (one compiled loop).")

_HEADS = {"nsp": ("mlm", "nsp"), "sop": ("mlm", "sop"), "full_sentences": ("mlm",),
          "doc_sentences": ("mlm",)}


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    if (FLAGS.input_files is None) == (FLAGS.text_files is None):
        raise app.UsageError("Give exactly one of --input_files and --text_files")
    logging.set_verbosity(logging.WARNING)
    strategy = get_strategy(FLAGS.strategy, num_gpus=FLAGS.num_gpus, tpu=FLAGS.tpu)
    keras.utils.set_random_seed(FLAGS.seed)
    keras.mixed_precision.set_dtype_policy(FLAGS.mixed_precision)
    tokenizer = None  # sizes the vocabulary; with --text_files it also tokenizes
    if FLAGS.text_files is not None or FLAGS.vocab_file or FLAGS.tokenizer_dir:
        tokenizer = tokenizer_from_flags("--text_files")
    config = _config(tokenizer)
    if FLAGS.objective in ("nsp", "sop") and not config.use_pooler:
        raise app.UsageError(
            f"--objective={FLAGS.objective} trains a head on the pooled output, and "
            f"--model={FLAGS.model} has no pooler; use --objective=full_sentences or doc_sentences")
    print(f"{strategy_summary(strategy)}; {FLAGS.model} ({_describe(config)})")
    electra = FLAGS.objective == "electra"
    write_json(os.path.join(FLAGS.model_dir, PRETRAINED_MODEL_FILE), pretraining_description(
        config, None if electra else _HEADS[FLAGS.objective],
        FLAGS.generator_ratio if electra else None, _tokenizer_arguments()))
    with strategy.scope():
        if FLAGS.objective == "electra":
            model = ElectraPretrainer(config, generator_config(config, FLAGS.generator_ratio),
                                      seed=FLAGS.seed)
            encoder = model.discriminator
        else:
            model = PretrainingModel(build_encoder(config), _HEADS[FLAGS.objective])
            encoder = model.encoder
        if FLAGS.init_checkpoint:
            _initialize(model, encoder, FLAGS.init_checkpoint)
        model.compile(optimizer=create_optimizer(
            FLAGS.optimizer, FLAGS.learning_rate, num_train_steps=FLAGS.train_steps,
            num_warmup_steps=FLAGS.warmup_steps, weight_decay=FLAGS.weight_decay,
            global_clipnorm=FLAGS.clip_norm or None,
            gradient_accumulation_steps=FLAGS.grad_accum_steps if FLAGS.grad_accum_steps > 1
            else None))
    try:
        logs = train(model, strategy, lambda context: _dataset(tokenizer, context),
                     FLAGS.model_dir, FLAGS.train_steps, steps_per_loop=FLAGS.steps_per_loop,
                     checkpoint_interval=FLAGS.checkpoint_interval,
                     jit_compile=FLAGS.jit_compile)
    except NonFiniteLossError as error:
        raise SystemExit(f"\n{error}") from None
    print("\nDone: " + ", ".join(f"{name} {value:.4g}" for name, value in logs.items()))


def _tokenizer_arguments():
    """The tokenizer flags as `load_tokenizer` arguments (absolute paths), for fine-tuning."""
    if FLAGS.vocab_file is None and FLAGS.tokenizer_dir is None:
        return None

    def absolute(path):
        return None if path is None else os.path.abspath(path)

    return {"vocab_file": absolute(FLAGS.vocab_file), "merges_file": absolute(FLAGS.merges_file),
            "tokenizer_dir": absolute(FLAGS.tokenizer_dir), "lowercase": FLAGS.do_lower_case}


def _config(tokenizer):
    fields = {}
    for item in FLAGS.config_overrides:
        name, _, value = item.partition("=")
        if not value or name not in EncoderConfig.__dataclass_fields__:
            raise app.UsageError(f"--config_overrides item {item!r} is not field=value of "
                                 f"EncoderConfig ({sorted(EncoderConfig.__dataclass_fields__)})")
        fields[name] = _parse(value)
    if tokenizer is not None:
        fields.setdefault("vocab_size", tokenizer.vocabulary_size())
    return zoo.get_config(FLAGS.model, **fields)


def _parse(value):
    for convert in (int, float):
        try:
            return convert(value)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(value.lower(), value)


def _describe(config):
    return (f"{config.num_layers} layers, hidden {config.hidden_size}, vocab {config.vocab_size}, "
            f"objective {FLAGS.objective}")


def _dataset(tokenizer, context):
    """This worker's batches, repeated forever (its share of the global batch)."""
    if FLAGS.text_files is not None:
        return pretraining_dataset(
            FLAGS.text_files, tokenizer, FLAGS.objective, FLAGS.batch_size, FLAGS.max_seq_length,
            masked_lm_prob=FLAGS.masked_lm_prob,
            max_predictions_per_seq=FLAGS.max_predictions_per_seq,
            whole_word_masking=FLAGS.whole_word_masking, seed=FLAGS.seed, epochs=None,
            input_context=context)
    records = read_pretraining_records(FLAGS.input_files, FLAGS.max_seq_length,
                                       FLAGS.max_predictions_per_seq, compression="auto",
                                       input_context=context)
    batch_size = context.get_per_replica_batch_size(FLAGS.batch_size)
    return records.repeat().shuffle(10_000, seed=FLAGS.seed).batch(
        batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)


def _initialize(model, encoder, path):
    """Encoder weights from a Hugging Face directory, or the model's from a kerasbert checkpoint."""
    if os.path.isfile(os.path.join(path, "config.json")):
        source = from_hf(path, encoder_only=True)
        if source.config != encoder.config.replace(use_pooler=source.config.use_pooler):
            raise app.UsageError(f"--init_checkpoint {path}: its config {source.config} differs "
                                 f"from the model's {encoder.config}")
        targets = {weight.path: weight for weight in encoder.weights}
        for weight in source.weights:
            targets[weight.path].assign(weight)
        print(f"Encoder initialised from {path}")
        return
    tf.train.Checkpoint(model_variables=model_variables(model)).restore(path).expect_partial()
    print(f"Model initialised from {path}")


def run():
    app.run(main)


if __name__ == "__main__":
    run()
