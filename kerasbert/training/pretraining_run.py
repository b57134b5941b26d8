"""A pretraining run in a model directory, as `kerasbert-pretrain` starts it: a zoo model trained
on an objective, resumable from its checkpoints, recorded in `kerasbert_run.json`
(`kerasbert.training.run_record`) and described in `kerasbert_model.json`, so
`kerasbert-finetune --init_from=<model_dir>` starts from it. `RunSettings` is what every
pretraining-style run (`kerasbert-distill`'s too) shares.
"""

import dataclasses
from typing import Optional

import keras

from kerasbert import file_system
from kerasbert.bfloat16 import precision_plan
from kerasbert.data.pretraining_input import PretrainingInput
from kerasbert.json_files import write_json_file
from kerasbert.training.distribute import get_strategy
from kerasbert.training.loop import train
from kerasbert.training.optimizers import create_optimizer
from kerasbert.training.pretrained_sources import PRETRAINED_MODEL_FILE
from kerasbert.training.run_record import TRAINING_OUTPUTS, RunRecord, matching


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """How a pretraining-style run trains: in `model_dir` (whose run record is checked against
    `recorded_flags` first, or removed with `overwrite`), on `input` (a `PretrainingInput`) for
    `train_steps`, with the optimizer `create_optimizer(**optimizer)` makes, the tokenizer
    `load_tokenizer(**tokenizer)` loads (None: no tokenizer), on the tf.distribute `strategy`
    (`get_strategy`'s `num_gpus`, `tpu`), from `seed`, with the dtype policy `mixed_precision`;
    `steps_per_loop`, `checkpoint_interval`, `jit_compile` (not under bfloat16 on a CPU:
    `kerasbert.bfloat16`), `max_recoveries`: `train`'s.

    >>> settings = RunSettings("runs/bert", PretrainingInput(text_files=["corpus.txt"]), 10,
    ...                        optimizer={"name": "adamw", "learning_rate": 1e-4})
    >>> settings.strategy, settings.mixed_precision
    ('one_device', 'float32')
    """

    model_dir: str
    input: PretrainingInput
    train_steps: int
    optimizer: dict
    tokenizer: Optional[dict] = None
    strategy: str = "one_device"
    num_gpus: int = 0
    tpu: Optional[str] = None
    seed: int = 0
    mixed_precision: str = "float32"
    steps_per_loop: int = 100
    checkpoint_interval: int = 1000
    jit_compile: bool = False
    max_recoveries: int = 0
    overwrite: bool = False
    recorded_flags: dict = dataclasses.field(default_factory=dict)

    def run_record(self, program, *extra_outputs):
        """The model directory's `RunRecord` for `program`, checked before anything is written:
        what the run writes is the training outputs, `kerasbert_model.json` and
        `extra_outputs`."""
        record = RunRecord(self.model_dir, program, self.recorded_flags,
                           matching(*TRAINING_OUTPUTS, PRETRAINED_MODEL_FILE, *extra_outputs),
                           self.overwrite)
        record.check()
        return record

    def recorded_tokenizer(self):
        """The `tokenizer` arguments with absolute paths, for `kerasbert_model.json` (None without
        a tokenizer)."""
        if self.tokenizer is None:
            return None
        return {name: value if name == "lowercase" or value is None
                else file_system.absolute(value) for name, value in self.tokenizer.items()}

    def start(self, log=print):
        """The strategy, once the seed and the dtype policy are set; under bfloat16, logs whether
        the device supports it and whether steps use XLA (`precision_plan`)."""
        strategy = get_strategy(self.strategy, num_gpus=self.num_gpus, tpu=self.tpu)
        keras.utils.set_random_seed(self.seed)
        keras.mixed_precision.set_dtype_policy(self.mixed_precision)
        for line in precision_plan(self.mixed_precision, strategy, self.jit_compile)[1]:
            log(line)
        return strategy

    def create_optimizer(self):
        """The run's optimizer (create it in the strategy's scope)."""
        return create_optimizer(num_train_steps=self.train_steps, **self.optimizer)

    def begin(self, record, description):
        """Record the run (`description`: the content of `kerasbert_model.json`) and write its
        `kerasbert_model.json`, once the model is built: a refused run leaves nothing behind."""
        record.start(description)
        write_json_file(file_system.join(self.model_dir, PRETRAINED_MODEL_FILE), description)

    def train(self, model, strategy, tokenizer):
        """Train the compiled `model` on the run's batches; the last logs."""
        return train(model, strategy,
                     lambda context: self.input.batches(tokenizer, context, self.seed),
                     self.model_dir, self.train_steps, steps_per_loop=self.steps_per_loop,
                     checkpoint_interval=self.checkpoint_interval,
                     jit_compile=precision_plan(self.mixed_precision, strategy,
                                                self.jit_compile)[0],
                     max_recoveries=self.max_recoveries,
                     save_data_position=self.input.saves_data_position)


@dataclasses.dataclass(frozen=True)
class PretrainingSettings:
    """A pretraining run: the zoo preset `model` with `config_overrides` (`EncoderConfig`
    fields; `vocab_size` and `pad_token_id` default to the tokenizer's), trained on the objective of
    `run.input.data` (ELECTRA's generator `generator_ratio` of the discriminator's size),
    starting from `init_checkpoint` (a Hugging Face folder or a kerasbert checkpoint) or random
    weights, as `run` (a `RunSettings`) says.

    >>> settings = PretrainingSettings(RunSettings(
    ...     "runs/bert", PretrainingInput(text_files=["corpus.txt"]), 10, optimizer={}),
    ...     model="bert_tiny_uncased")
    >>> settings.objective
    'nsp'
    """

    run: RunSettings
    model: str
    config_overrides: dict = dataclasses.field(default_factory=dict)
    generator_ratio: float = 0.25
    init_checkpoint: Optional[str] = None

    @property
    def objective(self):
        return self.run.input.data.objective


def run_pretraining(settings, program="kerasbert-pretrain"):
    """Run (or resume) the pretraining `settings` (a `PretrainingSettings`) describes, printing
    what it trains and its progress; the last logs. A `ValueError` before anything is written
    when the model directory holds a run with other settings, or the model cannot train the
    objective."""
    from kerasbert import zoo
    from kerasbert.models.pretraining import OBJECTIVE_HEADS, build_objective_model
    from kerasbert.tokenizers.vocabulary_files import load_tokenizer
    from kerasbert.training.distribute import strategy_summary
    from kerasbert.training.initial_weights import load_initial_weights
    from kerasbert.training.pretrained_sources import pretraining_description

    run = settings.run
    record = run.run_record(program)
    strategy = run.start()
    tokenizer = None if run.tokenizer is None else load_tokenizer(**run.tokenizer)
    fields = dict(settings.config_overrides)
    if tokenizer is not None:
        fields.setdefault("vocab_size", tokenizer.vocabulary_size())
        fields.setdefault("pad_token_id", tokenizer.pad_token_id)
    config = zoo.get_config(settings.model, **fields)
    objective = settings.objective
    if objective in ("nsp", "sop") and not config.use_pooler:
        raise ValueError(
            f"--objective={objective} trains a head on the pooled output, and "
            f"--model={settings.model} has no pooler; use --objective=full_sentences or "
            "doc_sentences")
    print(f"{strategy_summary(strategy)}; {settings.model} ({config.num_layers} layers, hidden "
          f"{config.hidden_size}, vocab {config.vocab_size}, objective {objective})")
    electra = objective == "electra"
    with strategy.scope():
        model, encoder = build_objective_model(config, objective, settings.generator_ratio,
                                               seed=run.seed)
        if settings.init_checkpoint:
            initialised = load_initial_weights(model, encoder, settings.init_checkpoint)
            print(f"{initialised} initialised from {settings.init_checkpoint}")
        model.compile(optimizer=run.create_optimizer())
    run.begin(record, pretraining_description(
        config, None if electra else OBJECTIVE_HEADS[objective],
        settings.generator_ratio if electra else None, run.recorded_tokenizer()))
    logs = run.train(model, strategy, tokenizer)
    print("\nDone: " + ", ".join(f"{name} {value:.4g}" for name, value in logs.items()))
    return logs
