"""`kerasbert-pretrain`: pretrain a zoo model on text or on pretraining TFRecords.

    kerasbert-pretrain --model=bert_base_uncased --text_files='corpus/*.txt' \\
        --vocab_file=vocab.txt --objective=nsp --model_dir=runs/bert \\
        --train_steps=100000 --batch_size=256 --learning_rate=1e-4 --warmup_steps=10000 \\
        --strategy=mirrored --mixed_precision=mixed_bfloat16

Flags can also come from a file (`--flagfile=run.flags`, absl's). Restarted with
the same flags, it resumes from the last checkpoint in `--model_dir`, at the
same step and position in the data. The first start records the flags that shape
the run and the model's config in `--model_dir/kerasbert_run.json`; a rerun with
other values is refused, naming them, and `--overwrite` starts over
(`kerasbert.training.run_record`). `--model_dir` also gets `kerasbert_model.json`
(the model's config and tokenizer), so `kerasbert-finetune --init_from=<model_dir>`
starts from the latest checkpoint.
"""

from absl import app, flags, logging

from kerasbert import file_system
from kerasbert.cli import instance_flags  # noqa: F401  (defines --objective, ...)
from kerasbert.cli.pretraining_input import (check_input_flags, config_overrides,
                                             optimizer_from_flags, pretraining_batches,
                                             saves_data_position, tokenizer_arguments)
from kerasbert.cli import training_flags  # noqa: F401  (--model_dir, --strategy, ...)
from kerasbert.cli.data_flags import tokenizer_from_flags
from kerasbert.cli.flag_bounds import require_positive
from kerasbert.cli.one_line_errors import run_reporting_errors

FLAGS = flags.FLAGS
flags.DEFINE_string("model", None, "Zoo preset, e.g. bert_base_uncased.", required=True)
flags.DEFINE_list("config_overrides", [], "EncoderConfig fields to change, e.g. "
                  "num_layers=2,hidden_size=128.")
flags.DEFINE_float("generator_ratio", 0.25, "ELECTRA: generator hidden size / discriminator's.")
require_positive("generator_ratio")
flags.DEFINE_string("init_checkpoint", None, "Initial encoder weights: a Hugging Face model "
                    "directory or a kerasbert checkpoint (model_dir/ckpt-N).")

_HEADS = {"nsp": ("mlm", "nsp"), "sop": ("mlm", "sop"), "full_sentences": ("mlm",),
          "doc_sentences": ("mlm",)}


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    try:
        check_input_flags()
    except ValueError as error:
        raise app.UsageError(str(error)) from None
    import keras

    from kerasbert.models.electra import ElectraPretrainer, generator_config
    from kerasbert.models.encoder import build_encoder
    from kerasbert.models.pretraining import PretrainingModel
    from kerasbert.json_files import write_json_file
    from kerasbert.training.distribute import get_strategy, strategy_summary
    from kerasbert.training.loop import train
    from kerasbert.training.pretrained_sources import (PRETRAINED_MODEL_FILE,
                                                       pretraining_description)
    from kerasbert.training.run_record import (TRAINING_OUTPUTS, RunRecord, matching,
                                               recorded_flags)

    record = RunRecord(FLAGS.model_dir, "kerasbert-pretrain", recorded_flags(FLAGS),
                       matching(*TRAINING_OUTPUTS, PRETRAINED_MODEL_FILE), FLAGS.overwrite)
    record.check()  # before anything is written into --model_dir
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
        model.compile(optimizer=optimizer_from_flags())
    description = pretraining_description(
        config, None if electra else _HEADS[FLAGS.objective],
        FLAGS.generator_ratio if electra else None, tokenizer_arguments())
    # Written once the initial weights are known to fit, so a refused run leaves nothing behind.
    record.start(description)
    write_json_file(file_system.join(FLAGS.model_dir, PRETRAINED_MODEL_FILE), description)
    logs = train(model, strategy,
                 lambda context: pretraining_batches(tokenizer, FLAGS.objective, context),
                 FLAGS.model_dir, FLAGS.train_steps, steps_per_loop=FLAGS.steps_per_loop,
                 checkpoint_interval=FLAGS.checkpoint_interval,
                 jit_compile=FLAGS.jit_compile, max_recoveries=FLAGS.max_recoveries,
                 save_data_position=saves_data_position())
    print("\nDone: " + ", ".join(f"{name} {value:.4g}" for name, value in logs.items()))


def _config(tokenizer):
    from kerasbert import zoo

    try:
        fields = config_overrides(FLAGS.config_overrides, "--config_overrides")
    except ValueError as error:
        raise app.UsageError(str(error)) from None
    if tokenizer is not None:
        fields.setdefault("vocab_size", tokenizer.vocabulary_size())
    return zoo.get_config(FLAGS.model, **fields)


def _describe(config):
    return (f"{config.num_layers} layers, hidden {config.hidden_size}, vocab {config.vocab_size}, "
            f"objective {FLAGS.objective}")


def _initialize(model, encoder, path):
    """Encoder weights from a Hugging Face directory, or the model's from a kerasbert checkpoint."""
    import tensorflow as tf

    from kerasbert.convert import from_hf
    from kerasbert.training.loop import model_variables

    if file_system.isfile(file_system.join(path, "config.json")):
        source = from_hf(path, encoder_only=True)
        if source.config != encoder.config.replace(use_pooler=source.config.use_pooler):
            raise ValueError(f"--init_checkpoint {path}: its config {source.config} differs "
                             f"from the model's {encoder.config}")
        targets = {weight.path: weight for weight in encoder.weights}
        for weight in source.weights:
            targets[weight.path].assign(weight)
        print(f"Encoder initialised from {path}")
        return
    tf.train.Checkpoint(model_variables=model_variables(model)).restore(path).expect_partial()
    print(f"Model initialised from {path}")


def run():
    run_reporting_errors(main, "kerasbert-pretrain", expected=("kerasbert.training.loop.TrainingError",))


if __name__ == "__main__":
    run()
